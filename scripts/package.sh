#!/usr/bin/env bash
# Builds the Debian package for one Slurm release:
#   scripts/package.sh [24.11|26.05]      (default: LAMA_SLURM, else 24.11)
# → target/debian/slurm-<release>/spank-lama_<version>+slurm<release>_amd64.deb, then lintian on it (errors
# fail the build; the warnings kept are listed, with the reason, in README.md).
# The plugin is built against that release's headers (the test cluster's, extracted by
# docker/cluster.sh build) in its own cargo target directory; the files are staged in
# target/package/stage/ and packed by cargo-deb (spank-lama/Cargo.toml,
# [package.metadata.deb]). LAMA_DEB_FAST=1 compresses less (the test clusters use it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh
flavour=${1:-${LAMA_SLURM:-24.11}}
slurm_flavour "$flavour" "$top"

LAMA_SLURM=$flavour docker/cluster.sh build
headers=$build/slurm-include/usr/include
n=$(awk '$2 == "SLURM_VERSION_NUMBER" { print $3 }' "$headers/slurm/slurm_version.h")
release=$((n >> 16)).$(printf %02d $(((n >> 8) & 255)))
[ "$release" == "$flavour" ] || { echo "package: the headers in $headers are for Slurm $release, not $flavour" >&2; exit 1; }

log "building spank_lama.so against Slurm $flavour's headers (target ${target#"$top"/}) and lama"
CPATH=$headers CARGO_TARGET_DIR=$target cargo build --release --quiet -p spank-lama --lib --example manpage
cargo build --release --quiet -p lama-cli

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
deb_version=$version+slurm$flavour
# One directory per release: cargo-deb replaces the packages of the same name in its output
# directory.
mkdir -p "target/debian/slurm-$flavour"
deb=target/debian/slurm-$flavour/spank-lama_${deb_version}_amd64.deb
# The package is made again only when something it is made from changed (the clusters ask for
# it at every start, and scripts/test.sh has built it already): the built files, the files it
# takes from the repository, this script, the commit (its changelog names it), the options.
inputs=$( {
    sha256sum "$target/release/libspank_lama.so" "$target/release/examples/manpage" \
        "$top/target/release/lama" plugstack.conf.example packaging/*.in packaging/post* \
        packaging/copyright spank-lama/Cargo.toml \
        README.md scripts/package.sh
    git rev-parse HEAD 2>/dev/null || true
    echo "$flavour ${LAMA_DEB_FAST:-}"
} | sha256sum | cut -c1-16)
if [ -f "$deb" ] && [ "$(cat "$deb.inputs" 2>/dev/null)" == "$inputs" ]; then
    log "$deb is up to date"
    echo "$top/$deb"
    exit 0
fi
rm -f "$deb.inputs"

stage=$top/target/package/stage
rm -rf "$stage"
mkdir -p "$stage/debian"
# Stripped here (the release profile keeps line tables for profiling and backtraces).
strip --strip-unneeded -o "$stage/spank_lama.so" "$target/release/libspank_lama.so"
strip --strip-unneeded -o "$stage/lama" "$top/target/release/lama"
# The plugstack line, commented out: installing the package enables nothing.
sed 's|^required |# required |' plugstack.conf.example > "$stage/lama.conf"
grep -q '^# required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_lama.so' "$stage/lama.conf"
"$stage/lama" manpage | gzip -9n > "$stage/lama.1.gz"
"$target/release/examples/manpage" | gzip -9n > "$stage/spank-lama.8.gz"
"$stage/lama" completions bash > "$stage/lama.bash"
"$stage/lama" completions zsh > "$stage/_lama"
"$stage/lama" completions fish > "$stage/lama.fish"
# A Debian changelog (the package's own history is the git log), dated by the last commit so
# that two builds of one commit are the same.
{
    echo "spank-lama ($deb_version) unstable; urgency=medium"
    echo
    echo "  * Built from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) for Slurm $flavour."
    echo
    echo " -- The spank-lama developers <spank-lama@users.noreply.github.com>  $(git log -1 --format=%cD 2>/dev/null || date -R)"
} | gzip -9n > "$stage/changelog.gz"
sed "s/@SLURM_RELEASE@/$flavour/" packaging/preinst.in > "$stage/debian/preinst"
chmod 0755 "$stage/debian/preinst"
# Removal disables the plugin's line, reinstallation enables it again (packaging/postrm).
install -m 0755 packaging/postinst packaging/postrm "$stage/debian/"

fast=()
[ "${LAMA_DEB_FAST:-}" != 1 ] || fast=(--fast)
cargo deb -p spank-lama --no-build --no-strip --variant "slurm${flavour/./-}" \
    --deb-version "$deb_version" --output "$deb" --quiet "${fast[@]}" >/dev/null
log "built $deb ($(du -k "$deb" | cut -f1) KiB; plugin $(du -k "$stage/spank_lama.so" | cut -f1) KiB stripped)"
if command -v lintian >/dev/null; then
    report=$(lintian --fail-on error "$deb" 2>&1) \
        || { echo "$report" >&2; echo "package: lintian reports errors in $deb" >&2; exit 1; }
    echo "$report" | grep -v -e 'root privileges is not recommended' -e '^$' >&2 || true
fi
echo "$inputs" > "$deb.inputs"
echo "$top/$deb"
