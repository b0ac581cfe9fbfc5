#!/usr/bin/env bash
# The docker Slurm test cluster.
#   docker/cluster.sh build    base image (mmdebstrap of Debian trixie from this host's mirror,
#                              imported into Docker; cached by a hash of its inputs), node image,
#                              Slurm headers for building the plugin, munge key
#   docker/cluster.sh plugin   build spank_lama.so against the cluster's Slurm headers (and the
#                              lama command) and stage them for the containers
#   docker/cluster.sh up       build + plugin + (re)start the cluster, wait for healthchecks
#   docker/cluster.sh down     stop and remove the containers
#   docker/cluster.sh exec SERVICE CMD...   run a command in a container (as root)
#   docker/cluster.sh logs     daemon logs of every member
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$top/scripts/lib.sh"
build=$here/.build
mkdir -p "$build/lama"

base_packages="slurmd,slurmctld,slurm-client,munge,hwloc,libhwloc15,libslurm-dev,procps,iproute2,util-linux,ca-certificates"

base_image() {
    local mirror hash tag
    mirror=$(debian_mirror)
    hash=$(printf '%s\n' trixie "$mirror" "$base_packages" minbase v1 | sha256sum | cut -c1-12)
    tag=spank-lama/trixie-base:$hash
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        log "building the trixie base image from $mirror (mmdebstrap)"
        rm -f "$build/rootfs.tar"
        mmdebstrap --quiet --variant=minbase --include="$base_packages" \
            trixie "$build/rootfs.tar" "$mirror" >&2
        docker import "$build/rootfs.tar" "$tag" >/dev/null
        rm -f "$build/rootfs.tar"
    fi
    echo "$tag"
}

node_image() {
    local base=$1 hash tag
    hash=$( (echo "$base"; cat "$here/Dockerfile" "$here/entrypoint.sh" "$here/slurm.conf" \
        "$here/cgroup.conf" "$here/topologies.txt") | sha256sum | cut -c1-12)
    tag=spank-lama/node:$hash
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        log "building the node image"
        docker build -q --build-arg BASE="$base" -t "$tag" "$here" >/dev/null
    fi
    echo "$tag"
}

slurm_headers() {
    local base=$1 stamp=$build/slurm-include/.base
    if [ "$(cat "$stamp" 2>/dev/null)" != "$base" ]; then
        log "extracting the cluster's Slurm headers"
        rm -rf "$build/slurm-include"
        mkdir -p "$build/slurm-include/usr/include"
        docker run --rm --entrypoint tar "$base" -C /usr/include -c slurm \
            | tar -x -C "$build/slurm-include/usr/include"
        echo "$base" > "$stamp"
    fi
}

cmd_build() {
    local base node
    base=$(base_image)
    node=$(node_image "$base")
    slurm_headers "$base"
    [ -f "$build/lama/munge.key" ] || dd if=/dev/urandom of="$build/lama/munge.key" bs=1024 count=1 status=none
    echo "$node" > "$build/node-image"
}

cmd_plugin() {
    [ -f "$build/slurm-include/.base" ] || cmd_build
    log "building spank_lama.so against $(grep -h 'define SLURM_VERSION_STRING' "$build/slurm-include/usr/include/slurm/slurm_version.h" | cut -d'"' -f2)"
    (cd "$top" && BINDGEN_EXTRA_CLANG_ARGS="-I$build/slurm-include/usr/include" \
        cargo build --release --quiet -p spank-lama -p lama-cli)
    install -m 0755 "$top/target/release/libspank_lama.so" "$build/lama/spank_lama.so"
    install -m 0644 "$top/plugstack.conf.example" "$build/lama/plugstack.conf.example"
}

compose() {
    LAMA_NODE_IMAGE=$(cat "$build/node-image") docker compose -p spank-lama -f "$here/compose.yaml" "$@"
}

cmd_up() {
    cmd_build
    cmd_plugin
    log "starting the cluster"
    compose up -d --force-recreate --wait --quiet-pull >&2
    compose exec -T slurmctld sinfo -N -o '%N %T %c %z' >&2
}

case "${1:-}" in
    build) cmd_build ;;
    plugin) cmd_plugin ;;
    up) cmd_up ;;
    down) [ -f "$build/node-image" ] && compose down -t 2 --remove-orphans ;;
    exec) shift; compose exec -T "$@" ;;
    logs)
        for s in slurmctld node1 node2 node3; do
            echo "== $s"
            compose exec -T "$s" sh -c 'cat /var/log/slurm/*.log' || true
        done
        ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
