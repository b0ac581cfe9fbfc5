#!/usr/bin/env bash
# Runs every test: unit, golden, property and integration tests of the crates (cargo test),
# the Debian packages, configure and the RPM spec (tests/rpm.sh), then the whole end-to-end
# suite (tests, fault tests, configuration matrix) on a docker Slurm cluster of its own for each
# supported Slurm: 24.11 (Debian trixie), then 26.05 (Debian sid), then a subset on Slurm 24.11
# built from source in SchedMD's layout
# (tests/e2e/ci.sh: started, tested, daemon logs kept on failure, removed), then the tests on
# the QEMU test node, a real two-package, four-NUMA-node SMT machine with cgroup v2, with
# Slurm 24.11 (Debian trixie), then 26.05 (Debian sid) (vmnode/vm.sh test, one guest at a
# time), when this machine can run it; when it cannot, it says why and goes on. Installs what
# it needs first. LAMA_SLURM=24.11 or 26.05 runs one flavour only (docker cluster and guest);
# LAMA_VM=0 leaves out the guest; LAMA_VM_CGROUP_JOB_ID_PATHS=yes runs the 26.05 guest with
# CgroupJobIdPaths=yes (job_<id> cgroup directories instead of SLUIDs).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
start=$SECONDS

flavours=(${LAMA_SLURM:-24.11 26.05})
src_tests=(t_setup t_confinement t_bind_core t_bind_socket t_cpus_per_task_widen_the_binding
    t_membind t_verbose_one_line_per_task t_topology_sources t_topology_cache
    t_package_installed t_install_refuses_other_slurm t_package_refused_on_other_slurm
    t_package_removal_keeps_srun_working)
scripts/deps.sh
# The 24.11 cluster's Slurm headers are needed to build the plugin crate (.cargo/config.toml).
LAMA_SLURM=24.11 docker/cluster.sh build

log "cargo test --workspace"
cargo test --workspace

# The Debian package of each supported Slurm (the clusters install theirs; each cluster's
# e2e tests check that dpkg refuses the other's).
for f in 24.11 26.05; do
    log "Debian package for Slurm $f"
    LAMA_DEB_FAST=1 scripts/package.sh "$f" >/dev/null
done

rc=0
# The routes without a cluster (tests/rpm.sh): configure refuses Slurm 22.05 and finds each
# cluster's release; rpmbuild -ta builds the spec from make dist's tarball, taken apart here
# (no RHEL system runs on this machine): contents, requirements, scriptlets.
log "configure and the RPM spec (tests/rpm.sh)"
tests/rpm.sh || rc=1

for f in "${flavours[@]}"; do
    log "end-to-end tests on the docker cluster, Slurm $f"
    t=$SECONDS
    LAMA_SLURM=$f tests/e2e/ci.sh || rc=1
    log "Slurm $f: end-to-end tests took $((SECONDS - t))s"
done

# The source-built Slurm 24.11 in SchedMD's layout (/usr/local, /var/spool/slurmd, no Slurm
# package): its package built by ./configure --with-slurm and make deb from that Slurm's
# installed headers, installed on every member; the tests of placement, -c, membind, the
# topology caches in its spool, the package and its release checks. (Not with LAMA_SLURM: a
# run of one flavour is a developer's.)
if [ -z "${LAMA_SLURM:-}" ]; then
    log "end-to-end tests on the docker cluster, Slurm 24.11 built from source (SchedMD's layout)"
    t=$SECONDS
    LAMA_SLURM=src-24.11 tests/e2e/ci.sh "${src_tests[@]}" || rc=1
    log "Slurm src-24.11: end-to-end tests took $((SECONDS - t))s"
fi

not_run=
# What the machine must have is the same for both guests (vmnode/vm.sh check). CgroupJobIdPaths
# is a 26.05 setting: the 24.11 guest never gets it.
if why=$(env -u LAMA_VM_CGROUP_JOB_ID_PATHS vmnode/vm.sh check 2>&1); then
    for f in "${flavours[@]}"; do
        # (env's options before its assignments: `env A=1 -u B` would run a command `-u`.)
        vm_env=(env)
        [ "$f" != 24.11 ] || vm_env+=(-u LAMA_VM_CGROUP_JOB_ID_PATHS)
        vm_env+=(LAMA_SLURM="$f")
        log "end-to-end tests on the QEMU test node, Slurm $f (cgroup v2, 2 packages, 4 NUMA nodes, SMT)"
        t=$SECONDS
        "${vm_env[@]}" vmnode/vm.sh test || rc=1
        log "QEMU test node, Slurm $f: build, boot and tests took $((SECONDS - t))s"
    done
else
    not_run="NOT RUN: the tests on the QEMU test node, as ${why#vmnode: }"
    log "$not_run"
fi
[ $rc -eq 0 ] || { log "end-to-end tests failed"; exit 1; }

log "all tests passed in $((SECONDS - start))s${not_run:+ ($not_run)}"
