#!/bin/sh
# One task of a check's step (reframe/checks/lama_checks.py):
#   lama-task.sh [--expect PREVIEW.json] [--watch] [PROGRAM ARGS...]
# prints "task RANK NODE CPUS omp=OMP_NUM_THREADS:OMP_PLACES", the CPUs as the kernel lists them
# in Cpus_allowed_list (read here, not by lama), then runs `lama verify --json` on itself, and
# then PROGRAM (an MPI program) in its place, whatever the verdict (the other ranks wait for it
# in MPI_Init). With --watch, lama verify runs around PROGRAM instead and judges every thread of
# it while it runs.
# The rank is the launcher's: Open MPI's mpirun, then MPICH's hydra, then Slurm's (in a batch job
# SLURM_PROCID is the batch step's, 0, for every rank that mpirun starts).
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-?}}}
cpus=$(awk '$1 == "Cpus_allowed_list:" { print $2 }' /proc/self/status)
echo "task $rank ${SLURMD_NODENAME:-$(hostname -s)} $cpus omp=${OMP_NUM_THREADS:-unset}:${OMP_PLACES:-unset}"
expect=
if [ "${1:-}" = --expect ]; then
    expect=$2
    shift 2
fi
if [ "${1:-}" = --watch ]; then
    shift
    exec lama verify --json ${expect:+--expect "$expect"} -- "$@"
fi
lama verify --json ${expect:+--expect "$expect"}
[ $# -eq 0 ] || exec "$@"
