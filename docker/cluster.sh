#!/usr/bin/env bash
# The docker Slurm test cluster (see docker/README.md).
#   docker/cluster.sh build    base image (mmdebstrap of Debian trixie from this host's mirror,
#                              imported into Docker; cached by a hash of its inputs), node image,
#                              Slurm headers for building the plugin, munge key
#   docker/cluster.sh plugin   build the Debian package for the cluster's Slurm
#                              (scripts/package.sh) and stage it for the containers
#   docker/cluster.sh up       build + plugin + (re)start the cluster, wait for healthchecks
#   docker/cluster.sh down     stop and remove the containers and the shared volume
#   docker/cluster.sh exec [-u USER] MEMBER CMD...   run a command in a member (root by default)
#   docker/cluster.sh restart MEMBER   restart one member's container
#   docker/cluster.sh logs     daemon logs of every member
#   docker/cluster.sh status   health of every member and sinfo
# Environment:
#   LAMA_SLURM=24.11|26.05|src-24.11  the cluster's Slurm: 24.11 from Debian trixie (default),
#                        26.05 from Debian sid, or 24.11 built from source under /usr/local
#                        (SchedMD's default layout) on trixie; images, headers, the plugin's
#                        cargo target directory and the default project name are kept apart
#                        per flavour
#   LAMA_PLUGIN=none     up: start without the plugin (no cargo build, no package)
#   LAMA_CLUSTER=NAME    compose project name (default spank-lama, spank-lama-2605 for
#                        26.05, spank-lama-src for src-24.11): a second, independent
#                        cluster beside the first one (its own network, staging and key)
#   LAMA_UP_TIMEOUT=S    seconds to wait for the healthchecks (default 180)
#   LAMA_CONFIG=NAME     up: a row of the configuration matrix, docker/configs/NAME.conf,
#                        applied on top of slurm.conf/cgroup.conf (default: none, the base)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$top/scripts/lib.sh"
flavour=${LAMA_SLURM:-24.11}
# Per flavour (scripts/lib.sh): the Debian suite, the build directory (headers, staging), the
# plugin's cargo target directory. 24.11 keeps the paths .cargo/config.toml names, so a plain
# `cargo build` on the host builds for it.
slurm_flavour "$flavour" "$top" || exit 2
project=${LAMA_CLUSTER:-$default_project}
# What the containers see as /opt/lama: munge key, the plugin's Debian package,
# install-plugin.sh, a configuration row's overlay.
if [ "$project" == spank-lama ]; then stage=$build/lama; else stage=$build/lama-$project; fi
mkdir -p "$stage"
# The members: the controller and node1-node3, and the nodes the staged configuration row adds
# (its "add-node NAME" lines, docker/configs/many-nodes.conf), compose.yaml's services of the
# profile many-nodes. set_members reads the staged row again (cmd_up stages a new one).
extra_profile=many-nodes
set_members() {
    mapfile -t added < <(awk '$1 == "add-node" { print $2 }' "$stage/config.overlay" 2>/dev/null)
    members=(slurmctld node1 node2 node3 "${added[@]}")
}
set_members

base_packages="slurmd,slurmctld,slurm-client,munge,hwloc,libhwloc15,libslurm-dev,procps,iproute2,util-linux,ca-certificates,man-db"
# src-24.11: the run-time base has no Debian Slurm package, only what the source-built Slurm
# needs at run time (munge, hwloc, libnuma; libhwloc-plugins for libxml2: node1's topology,
# node1-gpus.xml, is refused by hwloc's minimalistic XML parser, and the Debian bases get the
# plugins through their Slurm packages); the builder's base has the compiler and the headers
# of what Slurm is built with (docker/src/Dockerfile).
src_base_packages="munge,hwloc,libhwloc15,libhwloc-plugins,libnuma1,procps,iproute2,util-linux,ca-certificates,man-db"
src_build_packages="gcc,make,libc6-dev,pkgconf,libmunge-dev,libhwloc-dev"

# base_image [NAME PACKAGES]: spank-lama/$suite-NAME:<hash> (default: base, $base_packages).
base_image() {
    local name=${1:-base} packages=${2:-$base_packages} mirror hash tag
    mirror=$(debian_mirror)
    hash=$(printf '%s\n' "$suite" "$mirror" "$packages" minbase v1 | sha256sum | cut -c1-12)
    tag=spank-lama/$suite-$name:$hash
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        log "building the $suite $name image from $mirror (mmdebstrap)"
        rm -f "$build/rootfs.tar"
        # sid's Release file is valid for a week only: a mirror that is a snapshot older than
        # that would be refused (seen here), so sid is fetched without the date check.
        local opts=()
        [ "$suite" != sid ] || opts+=(--aptopt='Acquire::Check-Valid-Until "false"')
        # (Explicit returns: errexit does not reach inside the $(base_image) substitution.)
        mmdebstrap --quiet --variant=minbase --include="$packages" "${opts[@]}" \
            "$suite" "$build/rootfs.tar" "$mirror" >&2 || { echo "cluster: mmdebstrap $suite failed" >&2; return 1; }
        docker import "$build/rootfs.tar" "$tag" >/dev/null || return 1
        rm -f "$build/rootfs.tar"
    fi
    echo "$tag"
}

# Image builds yield the CPU to running clusters: a cold CI run builds the source-built Slurm
# (make -j) while both docker suites run. --cpu-shares 128 is a cgroup CPU weight an eighth of
# a container's default. (A cold run once stalled for a minute while that image compiled; a
# warm run, no image built, stalled the same way later: docs/testing.md, "The record".)
build_weight="--cpu-shares=128"
# The node image's build context: its files here and the MPI test program's sources.
node_files=(Dockerfile entrypoint.sh slurm.conf cgroup.conf gres.conf mpi.conf topologies.txt
    topologies.sh node1-gpus.xml)
node_image() {
    local base=$1 hash tag ctx
    hash=$( (echo "$base"; cd "$here" && cat "${node_files[@]}"; cat "$top"/tests/mpi/*) \
        | sha256sum | cut -c1-12)
    tag=spank-lama/node:$hash
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        log "building the node image (with Open MPI, MPICH and tests/mpi)"
        ctx=$(mktemp -d "$build/context.XXXXXX") || return 1
        (cd "$here" && cp "${node_files[@]}" "$ctx/") && cp -r "$top/tests/mpi" "$ctx/mpi" \
            && docker build -q "$build_weight" --build-arg BASE="$base" -t "$tag" "$ctx" >/dev/null
        local rc=$?
        rm -rf "$ctx"
        [ $rc -eq 0 ] || { echo "cluster: the node image did not build" >&2; return 1; }
    fi
    echo "$tag"
}

# src-24.11's node image: docker/src/Dockerfile builds Slurm in a stage on the builder base and
# copies its /usr/local tree onto the run-time base, with the same configuration files and
# entrypoint as node_image (no MPI). Tagged by a hash of both bases and the files.
src_node_files=(src/Dockerfile entrypoint.sh slurm.conf cgroup.conf gres.conf topologies.txt topologies.sh
    node1-gpus.xml)
src_node_image() {
    local base=$1 builder=$2 hash tag ctx
    hash=$( (echo "$base" "$builder"; cd "$here" && cat "${src_node_files[@]}") | sha256sum | cut -c1-12)
    tag=spank-lama/node-src:$hash
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        log "building the node image with Slurm built from source (docker/src/Dockerfile)"
        ctx=$(mktemp -d "$build/context.XXXXXX") || return 1
        local t0=$SECONDS
        (cd "$here" && cp "${src_node_files[@]}" "$ctx/") \
            && docker build -q "$build_weight" --build-arg BASE="$base" --build-arg BUILDER="$builder" -t "$tag" "$ctx" >/dev/null
        local rc=$?
        rm -rf "$ctx"
        [ $rc -eq 0 ] || { echo "cluster: the node image did not build" >&2; return 1; }
        log "node image built in $((SECONDS - t0))s"
    fi
    echo "$tag"
}

# The cluster's Slurm headers from IMAGE's PREFIX, kept under the same path in
# $build/slurm-include: /usr (Debian's libslurm-dev), or /usr/local for the source build, with
# slurm.pc when Slurm installs one (only when configured with --enable-pkgconfig).
#   slurm_headers IMAGE PREFIX
slurm_headers() {
    local image=$1 prefix=$2 stamp=$build/slurm-include/.base
    if [ "$(cat "$stamp" 2>/dev/null)" != "$image" ]; then
        log "extracting the cluster's Slurm headers ($prefix/include/slurm)"
        rm -rf "$build/slurm-include"
        mkdir -p "$build/slurm-include$prefix"
        docker run --rm --entrypoint sh "$image" -c \
            "cd $prefix && tar -cf - include/slurm \$(ls lib/pkgconfig/slurm.pc 2>/dev/null)" \
            | tar -x -C "$build/slurm-include$prefix" || return 1
        echo "$image" > "$stamp"
    fi
}

cmd_build() {
    local base node
    if [ "$flavour" == src-24.11 ]; then
        local builder
        base=$(base_image runtime "$src_base_packages")
        builder=$(base_image build "$src_build_packages")
        node=$(src_node_image "$base" "$builder")
        slurm_headers "$node" /usr/local
    else
        base=$(base_image)
        node=$(node_image "$base")
        slurm_headers "$base" /usr
    fi
    [ -f "$stage/munge.key" ] || dd if=/dev/urandom of="$stage/munge.key" bs=1024 count=1 status=none
    # (Moved into place: a cluster or guest of another lane reads it meanwhile.)
    echo "$node" > "$build/node-image.$$" && mv -f "$build/node-image.$$" "$build/node-image"
}

cmd_plugin() {
    # The cluster runs the plugin from its Debian package, as a site would (scripts/package.sh:
    # built against this flavour's headers in its own target directory, lintian-checked).
    local deb
    deb=$(LAMA_DEB_FAST=1 "$top/scripts/package.sh" "$flavour") || return 1
    rm -f "$stage"/spank-lama_*.deb "$stage"/spank-lama-tools_*.deb "$stage/spank_lama.so"
    # The plugin's package and the lama command's beside it (scripts/make-deb.sh).
    install -m 0644 "$deb" "${deb%/*}/spank-lama-tools_${deb##*/spank-lama_}" "$stage/"
    # For sites that build from source: the e2e tests check its refusal on the nodes.
    install -m 0755 "$top/scripts/install-plugin.sh" "$stage/install-plugin.sh"
    # Intel MPI's run time for tests/e2e/mpi.sh, at /opt/lama/impi on every member.
    local impi
    impi=$(intel_mpi_runtime "$top") || return 1
    [ -x "$stage/impi/bin/mpiexec.hydra" ] || { rm -rf "$stage/impi" && cp -a "$impi" "$stage/impi"; }
}

# docker compose on this cluster's project; with the profile of the extra nodes when the
# staged row adds nodes (compose_all: always, so that they are also stopped and removed).
compose() {
    local profiles=
    [ ${#added[@]} -eq 0 ] || profiles=$extra_profile
    COMPOSE_PROFILES=$profiles compose_with "$@"
}
compose_all() { COMPOSE_PROFILES=$extra_profile compose_with "$@"; }
compose_with() {
    LAMA_NODE_IMAGE=$(cat "$build/node-image") LAMA_STAGE=$stage \
        docker compose -p "$project" -f "$here/compose.yaml" "$@"
}

# Polls every member's healthcheck (compose's own --wait would do, but this also prints which
# member is late and its log when the bound is reached).
wait_healthy() {
    local deadline=$((SECONDS + ${LAMA_UP_TIMEOUT:-180})) m id st pending
    while :; do
        pending=()
        for m in "${members[@]}"; do
            id=$(compose ps -q "$m")
            st=$(docker inspect -f '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id" 2>/dev/null || echo missing)
            case "$st" in
                running/healthy) ;;
                running/*) pending+=("$m:$st") ;;
                *) echo "cluster: $m is $st" >&2; compose logs --no-color "$m" >&2; return 1 ;;
            esac
        done
        [ ${#pending[@]} -gt 0 ] || return 0
        if [ $SECONDS -ge $deadline ]; then
            echo "cluster: not healthy after ${LAMA_UP_TIMEOUT:-180}s: ${pending[*]}" >&2
            for m in "${pending[@]}"; do compose exec -T "${m%%:*}" sh -c 'tail -n 20 /var/log/slurm/*.log' >&2 || true; done
            return 1
        fi
        sleep 1
    done
}

cmd_up() {
    cmd_build
    if [ "${LAMA_PLUGIN:-}" == none ]; then
        log "LAMA_PLUGIN=none: starting without the plugin"
        rm -f "$stage"/spank-lama_*.deb "$stage"/spank-lama-tools_*.deb "$stage/spank_lama.so" "$stage/plugstack.conf.example" "$stage/install-plugin.sh"
    else
        cmd_plugin
    fi
    local row=${LAMA_CONFIG:-}
    if [ -n "$row" ] && [ "$row" != base ]; then
        [ -f "$here/configs/$row.conf" ] || { echo "cluster: no configuration row $row (docker/configs/)" >&2; return 1; }
        install -m 0644 "$here/configs/$row.conf" "$stage/config.overlay"
        log "configuration row: $row"
    else
        rm -f "$stage/config.overlay"
    fi
    # The nodes this row adds; those of an earlier row that this one does not have are removed.
    set_members
    local extra
    for extra in $(compose_all config --services); do
        [[ " ${members[*]} " == *" $extra "* ]] || compose_all rm -sf "$extra" >/dev/null 2>&1 || true
    done
    log "starting the Slurm $flavour cluster ($project${added[*]:+, with ${added[*]}})"
    local t0=$SECONDS
    compose up -d --force-recreate --remove-orphans --quiet-pull >&2
    wait_healthy
    log "healthy after $((SECONDS - t0))s"
    compose exec -T slurmctld sinfo -N -o '%N %T %c %z' >&2
}

case "${1:-}" in
    build) cmd_build ;;
    plugin) cmd_plugin ;;
    up) cmd_up ;;
    down) [ -f "$build/node-image" ] && compose_all down -v -t 2 --remove-orphans ;;
    exec)
        shift
        user=()
        if [ "${1:-}" == -u ]; then user=(-u "$2"); shift 2; fi
        compose exec -T "${user[@]}" "$@"
        ;;
    restart)
        # Restarts one member's container (the fault tests): restart MEMBER
        [ -n "${2:-}" ] || { echo "usage: docker/cluster.sh restart MEMBER" >&2; exit 2; }
        compose restart -t 2 "$2" >&2
        ;;
    logs)
        for s in "${members[@]}"; do
            echo "== $s"
            compose exec -T "$s" sh -c 'cat /var/log/slurm/*.log' || true
        done
        ;;
    status)
        compose ps
        compose exec -T slurmctld sinfo -N -o '%N %T %c %z'
        ;;
    *) sed -n '2,26p' "$0" >&2; exit 2 ;;
esac
