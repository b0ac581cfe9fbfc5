#!/usr/bin/env bash
# Installs what the project needs on a Debian 12 host (root): build dependencies of the Rust
# crates, hwloc, mmdebstrap for the cluster's base image and the QEMU test node's guest image,
# QEMU (software emulation), ssh and zstd for that guest (vmnode/), lintian and dpkg-dev for the
# Debian package, rpm (rpmbuild) for the RPM, pip (Intel MPI's run time for the MPI tests), and
# docker compose v2 (from Debian
# trixie's docker-compose package; bookworm only has compose v1). Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

packages=(libhwloc-dev hwloc libclang-dev clang g++ pkg-config libudev-dev libscotch-dev libbz2-dev liblzma-dev mmdebstrap
    debian-archive-keyring ca-certificates git jq lintian binutils dpkg-dev make
    qemu-system-x86 openssh-client zstd xz-utils e2fsprogs rpm cpio)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# pip, for Intel MPI's run time in the MPI tests (scripts/lib.sh intel_mpi_runtime).
if ! python3 -m pip --version >/dev/null 2>&1; then
    log "installing python3-pip"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
fi

if ! docker compose version >/dev/null 2>&1; then
    log "installing docker compose v2 from Debian trixie's docker-compose package"
    trixie_apt update -qq
    tmp=$(mktemp -d)
    (cd "$tmp" && trixie_apt download docker-compose >/dev/null 2>&1)
    dpkg-deb -x "$tmp"/docker-compose_*.deb "$tmp/x"
    install -D -m 0755 "$tmp/x/usr/libexec/docker/cli-plugins/docker-compose" \
        /usr/local/lib/docker/cli-plugins/docker-compose
    rm -rf "$tmp"
    docker compose version >/dev/null
fi

for tool in cargo rustc docker; do
    command -v "$tool" >/dev/null || { echo "missing $tool (install Rust with rustup, and Docker)" >&2; exit 1; }
done
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt >/dev/null 2>&1 || true
