#!/usr/bin/env bash
# Runs every test and lint: unit, golden, property and integration tests of the crates (cargo
# test), clippy, a time-boxed coverage-guided fuzzing run (scripts/fuzz.sh), lama without
# Scotch (tests/no-scotch.sh), lama statically linked (tests/static.sh), the Debian packages, configure and the RPM spec (tests/rpm.sh), the whole
# end-to-end suite (tests, MPI, fault tests, configuration matrix) on a docker Slurm cluster of
# its own for each supported Slurm, 24.11 (Debian trixie) and 26.05 (Debian sid), a subset on
# Slurm 24.11 built from source in SchedMD's layout (tests/e2e/ci.sh: started, tested, daemon
# logs kept on failure, removed), and the tests on the QEMU test node, a real two-package,
# four-NUMA-node SMT machine with cgroup v2, with Slurm 24.11, then 26.05 (vmnode/vm.sh test),
# when this machine can run it; when it cannot, it says why and goes on. Installs what it
# needs first.
#
# The parts run in lanes at the same time (scripts/parts.sh; docs/testing.md says why and what
# each part takes): "build" (crates, clippy, packages, RPM: the CPU-bound parts), "images"
# (the clusters' and guests' images: mostly downloads and dpkg), "docker-24.11" and
# "docker-26.05" (the docker suites, which mostly wait on Slurm) and a lane per QEMU guest
# ("guest-24.11", "guest-26.05": each keeps one core busy; the second starts once the first
# or the docker suites have ended). A part
# starts once the parts it needs have passed; each part's output is in its own log under
# target/test-logs (LAMA_TEST_LOGS=DIR elsewhere), and the end of the run prints every part's
# lane, start, time, result and test counts, the logs of the parts that failed, and a closing
# "N passed, N failed" line, and the critical path: the chain of parts the run waited on. A run
# that passes 60 minutes prints a warning every 5 minutes.
#
# LAMA_SLURM=24.11 or 26.05 runs one flavour only (docker cluster and guest, no source-built
# cluster); LAMA_VM=0 leaves out the guest; LAMA_VM_CGROUP_JOB_ID_PATHS=yes runs the 26.05
# guest with CgroupJobIdPaths=yes (job_<id> cgroup directories instead of SLUIDs).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
. scripts/parts.sh

flavours=(${LAMA_SLURM:-24.11 26.05})
for f in "${flavours[@]}"; do
    case $f in 24.11 | 26.05) ;; *) echo "test: LAMA_SLURM=$f: use 24.11 or 26.05" >&2; exit 2 ;; esac
done
src_tests=(t_setup t_confinement t_bind_core t_bind_socket t_cpus_per_task_widen_the_binding
    t_membind t_verbose_one_line_per_task t_topology_sources t_topology_cache
    t_package_installed t_install_refuses_other_slurm t_package_refused_on_other_slurm
    t_package_removal_keeps_srun_working)
# The source-built cluster on a full run only (a run of one flavour is a developer's).
with_src=
[ -n "${LAMA_SLURM:-}" ] || with_src=1

scripts/deps.sh
vm_why=$(env -u LAMA_VM_CGROUP_JOB_ID_PATHS vmnode/vm.sh check 2>&1) && vm_why=
parts_init "${LAMA_TEST_LOGS:-$PWD/target/test-logs}"
parts_watch "${LAMA_TEST_WARN_S:-3600}"
trap 'kill "$parts_watcher" 2>/dev/null || true' EXIT

# The guest of flavour F (CgroupJobIdPaths is a 26.05 setting: the 24.11 guest never gets it).
vm_test() {
    if [ "$1" == 24.11 ]; then
        env -u LAMA_VM_CGROUP_JOB_ID_PATHS LAMA_SLURM="$1" vmnode/vm.sh test
    else
        LAMA_SLURM="$1" vmnode/vm.sh test
    fi
}

# build: the CPU-bound parts. The crates need the 24.11 cluster's Slurm headers to build the
# plugin crate (.cargo/config.toml); each Debian package is built against its cluster's
# headers (the clusters install theirs; each cluster's e2e tests check that dpkg refuses the
# other's); tests/rpm.sh: configure refuses Slurm 22.05 and finds each cluster's release,
# make install, make dist and rpmbuild -ta taken apart here (no RHEL system runs on this
# machine).
(
    set +e; PARTS_LANE=build
    part image-24.11 -- docker/cluster.sh build
    # The packages first: the docker suites and the guests wait for them.
    for f in 24.11 26.05; do
        part "deb-$f" "image-$f" -- env LAMA_DEB_FAST=1 scripts/package.sh "$f"
    done
    # Then the rest at a lower priority (nice 5): nothing waits for them but the source-built
    # cluster, which comes after 24.11's suite, so the clusters and the guest (nice -5,
    # vmnode/vm.sh) go first and these fill the gaps.
    # (Without incremental compilation: a fresh clone's build only pays for writing its state.)
    part crates image-24.11 -- env CARGO_INCREMENTAL=0 nice -n 5 cargo test --workspace
    part clippy crates -- env CARGO_INCREMENTAL=0 nice -n 5 cargo clippy --workspace --all-targets -- -D warnings
    # Coverage-guided fuzzing of every parser of user input, 10 s a target from the corpus in
    # fuzz/corpus (scripts/fuzz.sh): a crash or an input over 2 s fails it.
    part fuzz crates -- nice -n 5 scripts/fuzz.sh 10
    # The README's try-out, as written (tests/readme.sh).
    part readme crates -- nice -n 5 tests/readme.sh
    # lama built without Scotch, as a user without root builds it (tests/no-scotch.sh).
    part no-scotch crates -- env CARGO_INCREMENTAL=0 nice -n 5 tests/no-scotch.sh
    # make static: the statically linked lama sites copy (tests/static.sh).
    part static no-scotch -- env CARGO_INCREMENTAL=0 nice -n 5 tests/static.sh
    [ -z "$with_src" ] || part deb-src-24.11 image-src-24.11 -- env LAMA_DEB_FAST=1 nice -n 5 scripts/package.sh src-24.11
    part rpm deb-24.11 image-26.05 -- nice -n 5 tests/rpm.sh
) &
lanes=($!)
# images: the guests' images first (the guests, the longest lane, start as soon as their
# package is built), then the other clusters' images (mmdebstrap, the node image with Open MPI
# and MPICH, the source-built Slurm). Each is cached by a hash of its inputs: nothing to do when
# it is there.
(
    set +e; PARTS_LANE=images
    if [ -z "$vm_why" ]; then
        for f in "${flavours[@]}"; do part "guest-image-$f" -- env LAMA_SLURM="$f" vmnode/vm.sh build; done
    fi
    part image-26.05 -- env LAMA_SLURM=26.05 docker/cluster.sh build
    [ -z "$with_src" ] || part image-src-24.11 -- env LAMA_SLURM=src-24.11 docker/cluster.sh build
) &
lanes+=($!)
# docker: a lane per flavour, each with its own cluster (its own compose project, network and
# staging directory); the source-built cluster after 24.11's. Every cluster's tests check
# that dpkg refuses the other release's package: both packages first.
for f in "${flavours[@]}"; do
    (
        set +e; PARTS_LANE=docker-$f
        part "e2e-$f" deb-24.11 deb-26.05 -- env LAMA_SLURM="$f" tests/e2e/ci.sh
        if [ -n "$with_src" ] && [ "$f" == 24.11 ]; then
            part e2e-src-24.11 deb-src-24.11 deb-26.05 -- env LAMA_SLURM=src-24.11 tests/e2e/ci.sh "${src_tests[@]}"
        fi
    ) &
    lanes+=($!)
done
# guests: each keeps a core busy. The first starts once its package and image are there; the
# second (a full run's 26.05 guest) once a core is free for it: when the first guest has
# ended, or its own release's docker suite has (the other's ends about then), whichever first (docs/testing.md: one after the
# other, the guests were the run's length; beside the suites and the builds, a second guest
# would starve them all).
second_guest_may_start() { parts_ended guest-24.11 || parts_ended e2e-26.05; }
if [ -z "$vm_why" ]; then
    for f in "${flavours[@]}"; do
        (
            set +e; PARTS_LANE=guest-$f
            if [ ${#flavours[@]} -gt 1 ] && [ "$f" == 26.05 ]; then
                until second_guest_may_start; do sleep 2; done
                PARTS_AFTER="guest-24.11 e2e-26.05"
            fi
            part "guest-$f" "deb-$f" "image-$f" "guest-image-$f" -- vm_test "$f"
        ) &
        lanes+=($!)
    done
fi
# (Each part's result is in its files: a lane's status says nothing more.)
wait "${lanes[@]}" || true

not_run=
[ -z "$vm_why" ] || not_run="NOT RUN: the tests on the QEMU test node, as ${vm_why#vmnode: }"
if ! parts_report; then
    log "tests failed${not_run:+ ($not_run)}"
    exit 1
fi
log "all tests passed in $(($(date +%s) - parts_t0))s${not_run:+ ($not_run)}"
