#!/usr/bin/env bash
# The Debian package for one of the test clusters' Slurm releases, by the route a site takes
# (./configure against that Slurm's headers, then make deb; docs/admin.md):
#   scripts/package.sh [24.11|26.05|src-24.11]      (default: LAMA_SLURM, else 24.11)
# → prints the .deb's path. The headers are the cluster's, extracted by docker/cluster.sh
# build; each release has its own configuration (config.mk) and cargo target directory
# (scripts/lib.sh). Debian's Slurm is named as the package's dependency (the headers come
# from its libslurm-dev); the source-built Slurm has no package: the preinst asks its
# commands. LAMA_DEB_FAST=1 compresses with gzip (the test clusters use it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh
flavour=${1:-${LAMA_SLURM:-24.11}}
slurm_flavour "$flavour" "$top"

LAMA_SLURM=$flavour docker/cluster.sh build
mkdir -p "$target"
# One package.sh of a flavour at a time: scripts/test.sh's lanes ask for the same package at
# once (a cluster's start, a guest's, the RPM test's make install); the second waits and then
# finds it up to date.
exec 9> "$target/.package.lock"
flock 9
# The other releases' builds start from 24.11's (scripts/lib.sh seed_target): only the crates
# that read the headers or the plugin directory are compiled again.
seed_target "$top" "$target"
config=$target/config.mk
if [ "$flavour" == src-24.11 ]; then
    args=(--with-slurm="$build/slurm-include/usr/local" --prefix=/usr --slurm-package=none
        --plugindir=/usr/local/lib/slurm --slurm-bindir=/usr/local/bin)
else
    args=(--with-slurm="$build/slurm-include/usr" --prefix=/usr
        --slurm-package=slurm-wlm-basic-plugins --plugindir=/usr/lib/x86_64-linux-gnu/slurm-wlm
        --slurm-bindir=/usr/bin)
fi
# The cluster's Slurm is not this host's: everything configure would ask the running Slurm
# is given, and the headers' release must be the flavour's.
# (Written beside it and moved over it only when it changed: a make of another process that
# reads it, tests/rpm.sh's make install, never sees it half written.)
CONFIG_MK=$config.new ./configure "${args[@]}" --sysconfdir=/etc/slurm 2>"$target/configure.log" \
    || { cat "$target/configure.log" >&2; exit 1; }
if cmp -s "$config.new" "$config"; then rm -f "$config.new"; else mv -f "$config.new" "$config"; fi
grep -qx "SLURM_RELEASE := ${flavour#src-}" "$config" \
    || { echo "package: the headers in $build/slurm-include are not Slurm ${flavour#src-}'s" >&2; exit 1; }

log "building spank_lama.so and lama for Slurm $flavour (target ${target#"$top"/})"
make --no-print-directory -s all CONFIG_MK="$config" CARGO_TARGET_DIR="$target" >/dev/null
# The package is made again only when something it is made from changed (the clusters ask for
# it at every start, and scripts/test.sh has built it already).
inputs=$( {
    sha256sum "$target/release/libspank_lama.so" "$target/release/examples/manpage" \
        "$target/release/lama" plugstack.conf.example packaging/*.in packaging/copyright \
        Makefile README.md scripts/make-deb.sh "$config"
    git rev-parse HEAD 2>/dev/null || true
    echo "${LAMA_DEB_FAST:-}"
} | sha256sum | cut -c1-16)
deb=$(ls "$target"/debian/spank-lama_*+slurm"${flavour#src-}"_*.deb 2>/dev/null | head -n1 || true)
if [ -n "$deb" ] && [ "$(cat "$deb.inputs" 2>/dev/null)" == "$inputs" ]; then
    log "$deb is up to date"
    echo "$deb"
    exit 0
fi
compress=xz
[ "${LAMA_DEB_FAST:-}" != 1 ] || compress=gzip
deb=$(DEB_COMPRESS=$compress make --no-print-directory -s deb CONFIG_MK="$config" \
    CARGO_TARGET_DIR="$target" | tail -n1)
echo "$inputs" > "$deb.inputs"
echo "$deb"
