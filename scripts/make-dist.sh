#!/usr/bin/env bash
# `make dist`: spank-lama-VERSION.tar.gz, from which a build host with no access to crates
# builds the plugin (./configure && make, or rpmbuild -ta): the committed sources (git
# archive of HEAD), every crate vendored (cargo vendor) with a .cargo/config.toml that builds
# from them offline, and the RPM spec (packaging/rpm/spank-lama.spec.in, version filled in)
# at the top, where rpmbuild -ta finds it. DIST_DIR=DIR writes it there (default: the top).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
name=spank-lama-$version
out=${DIST_DIR:-$top}
git rev-parse --verify -q HEAD >/dev/null || { echo "make dist: run it in a git checkout" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=no)" ] \
    || echo "make dist: warning: uncommitted changes are not in the tarball (it is made from HEAD)" >&2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive --format=tar --prefix="$name/" HEAD | tar -x -C "$work"
# The repository's .cargo/config.toml points at the test cluster's headers: the tarball's
# builds from the vendored crates instead (configure and make give the headers).
rm -rf "$work/$name/.cargo"
mkdir -p "$work/$name/.cargo"
cargo vendor --locked --manifest-path "$work/$name/Cargo.toml" "$work/$name/vendor" 2>/dev/null \
    > "$work/$name/.cargo/config.toml"
grep -q 'replace-with = "vendored-sources"' "$work/$name/.cargo/config.toml" \
    || { echo "make dist: cargo vendor wrote no source replacement" >&2; exit 1; }
sed -i 's|directory = ".*/vendor"|directory = "vendor"|' "$work/$name/.cargo/config.toml"
sed "s|@VERSION@|$version|g" packaging/rpm/spank-lama.spec.in > "$work/$name/spank-lama.spec"
mkdir -p "$out"
# Reproducible: owners, order and times fixed: the last commit's date, and for the vendored
# crates the date Cargo.lock last changed, so that a build keeping its cargo directory (and
# its tree: tests/rpm.sh) finds them unchanged from one commit to the next (cargo compares a
# build script's files by time) and compiles only the workspace again.
commit_time=$(git log -1 --format=%ct)
lock_time=$(git log -1 --format=%ct -- Cargo.lock)
find "$work/$name" -exec touch -h -d "@$commit_time" {} +
find "$work/$name/vendor" -exec touch -h -d "@${lock_time:-$commit_time}" {} +
tar --sort=name --owner=0 --group=0 --numeric-owner -C "$work" -c "$name" | gzip -6n > "$out/$name.tar.gz"
echo "make dist: $out/$name.tar.gz ($(du -k "$out/$name.tar.gz" | cut -f1) KiB)" >&2
echo "$out/$name.tar.gz"
