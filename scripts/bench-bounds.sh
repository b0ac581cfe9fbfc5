#!/usr/bin/env bash
# What the plugin costs slurmstepd in memory and open files, on a running cluster
# (docker/cluster.sh up): the step's slurmstepd on node1 is read (VmRSS, open file descriptors)
# while its tasks sleep, for the same step without and with LAMA, and for a step of 1,024 tasks.
#   scripts/bench-bounds.sh [RUNS]      (default 5 runs of each; prints medians)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
as_user() { docker/cluster.sh exec -u tester slurmctld "$@"; }
on1() { docker/cluster.sh exec node1 "$@"; }

# Reads "RSS_KB FDS" of the step's slurmstepd on node1 (the parent of its tasks, which write
# its pid to /tmp/lama-stepd) while the step runs: measure SECONDS STEP-PREFIX...
measure() {
    local secs=$1; shift
    on1 rm -f /tmp/lama-stepd
    as_user "$@" bash -c "echo \$PPID > /tmp/lama-stepd; sleep $secs" > /dev/null 2>&1 &
    local pid=$! i
    for i in $(seq 200); do
        on1 test -s /tmp/lama-stepd && break
        sleep 0.1
    done
    sleep 1
    on1 sh -c 'p=$(head -n1 /tmp/lama-stepd); echo $(awk "/VmRSS/ { print \$2 }" /proc/$p/status) $(ls /proc/$p/fd | wc -l)'
    wait $pid
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

report() { # LABEL SECONDS ARGS...
    local label=$1; shift
    local rss=() fds=() r a b
    for r in $(seq "$runs"); do
        read -r a b < <(measure "$@")
        rss+=("$a"); fds+=("$b")
    done
    printf '| %s | %s kB | %s |\n' "$label" "$(printf '%s\n' "${rss[@]}" | median)" "$(printf '%s\n' "${fds[@]}" | median)"
}

echo "| step on node1 | slurmstepd VmRSS (median of $runs) | open files |"
echo "|---|---:|---:|"
report "srun -n2" 3 srun -w node1 -n2
report "srun -n2 --lama-map=scbnh" 3 srun -w node1 -n2 --lama-map=scbnh
report "srun -n2 --lama-map=scbnh --lama-verbose --lama-membind=local" 3 srun -w node1 -n2 --lama-map=scbnh --lama-verbose --lama-membind=local
report "salloc -n2 srun -n1024 --overcommit" 8 salloc -w node1 -n2 srun -n1024 --overcommit
report "salloc -n2 srun -n1024 --overcommit --lama-map=scbnh" 8 salloc -w node1 -n2 srun -n1024 --overcommit --lama-map=scbnh
