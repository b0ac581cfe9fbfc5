#!/usr/bin/env bash
# The whole end-to-end run in one command, for CI: host packages, cluster (built and cached as
# usual, plugin built from this checkout), the tests, the MPI tests (tests/e2e/mpi.sh: Open MPI
# and MPICH, direct launch and mpirun), the site checks (tests/reframe.sh), the fault tests
# (tests/e2e/faults.sh),
# then every row of the configuration matrix (tests/e2e/matrix.sh), the daemon logs when a test failed, and the cluster removed
# again. Exit status: the tests'.
#   tests/e2e/ci.sh [--base] [TEST...]    (arguments go to tests/e2e/run.sh; with --base the
#                                          cluster starts without the plugin)
# LAMA_SLURM=24.11|26.05 picks the cluster's Slurm (docker/cluster.sh). Uses its own cluster
# (LAMA_CLUSTER, default spank-lama-ci, spank-lama-ci-2605 for 26.05) so a developer's
# cluster is untouched.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/lib.sh"
export LAMA_SLURM=${LAMA_SLURM:-24.11}
slurm_flavour "$LAMA_SLURM" "$top" || exit 2
# The flavour's project name with -ci: spank-lama-ci, spank-lama-ci-2605.
export LAMA_CLUSTER=${LAMA_CLUSTER:-${default_project/spank-lama/spank-lama-ci}}
[ "${1:-}" == --base ] && export LAMA_PLUGIN=none

"$top/scripts/deps.sh" || exit 1
t0=$SECONDS
if ! "$top/docker/cluster.sh" up; then
    echo "e2e: the cluster did not come up" >&2
    "$top/docker/cluster.sh" logs >&2
    "$top/docker/cluster.sh" down >/dev/null 2>&1
    echo "e2e: 0 passed, 1 failed"
    exit 1
fi
echo "e2e: Slurm $LAMA_SLURM cluster up in $((SECONDS - t0))s" >&2
"$top/tests/e2e/run.sh" "$@"
rc=$?
# The MPI tests and the site checks (tests/reframe.sh: reframe/ as a site runs it), on every
# full run (not with --base or a chosen list of tests), whatever the suite gave: they leave the
# cluster as they found it.
if [ $# -eq 0 ]; then
    "$top/tests/e2e/mpi.sh" || rc=1
    "$top/tests/reframe.sh" || rc=1
fi
# The configuration matrix and the fault tests, after the whole base suite (not with --base or
# a chosen list of tests).
if [ $rc -eq 0 ] && [ $# -eq 0 ]; then
    "$top/tests/e2e/faults.sh" || rc=1
fi
if [ $rc -eq 0 ] && [ $# -eq 0 ]; then
    "$top/tests/e2e/matrix.sh" || rc=1
fi
if [ $rc -ne 0 ]; then
    logs=${TMPDIR:-/tmp}/spank-lama-e2e-logs-$LAMA_SLURM.txt
    "$top/docker/cluster.sh" logs > "$logs" 2>&1
    echo "e2e: daemon logs in $logs" >&2
fi
"$top/docker/cluster.sh" down >/dev/null 2>&1
exit $rc
