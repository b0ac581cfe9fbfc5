#!/usr/bin/env bash
# One step of many tasks over the docker cluster: `srun -N NODES -n TASKS --overcommit true`
# without LAMA, with `--lama-map=scbnh`, and with `--lama-map=scbnh --lama-verbose` (node 0 also
# computes the distribution hint), RUNS runs each (default 2), interleaved. Prints srun's wall
# time as the user sees it and, from node1's slurmd log, what the plugin spent in its step hook
# there: the topology load (`topology_us`) and the time from the step's CPUs being read to the
# node's tasks being placed. Needs a running cluster (docker/cluster.sh up) whose slurm.conf
# allows TASKS/NODES tasks per node (docker/slurm.conf: MaxTasksPerNode=4096); NODES over 3
# needs the eight-node row (LAMA_CONFIG=many-nodes docker/cluster.sh up), its partition many.
#
#   scripts/bench-big-step.sh [TASKS] [RUNS] [NODES]       (default 10000 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${1:-10000} runs=${2:-2} nodes=${3:-3}
where=(-N"$nodes")
[ "$nodes" -le 3 ] || where=(-p many "${where[@]}")
cluster=docker/cluster.sh

# srun's wall time in ms, inside the controller (docker exec's start-up not counted).
timed() {
    "$cluster" exec -u tester slurmctld bash -c '
        s=$(date +%s%N); srun "$@" true >/dev/null 2>&1 || exit 1; e=$(date +%s%N)
        echo $(( (e - s) / 1000000 ))' timed "${where[@]}" -n "$tasks" --overcommit "$@"
}

# The plugin's last step on node1: "topology_us=T placed_ms=P tasks=N".
last_step() {
    "$cluster" exec node1 sh -c 'grep -h "lama: step CPUs\|lama: placed" /var/log/slurm/slurmd.log | tail -2' | awk '
        function ms(line,   t) { match(line, /T[0-9:.]+\]/); t = substr(line, RSTART + 1, RLENGTH - 2)
            split(t, p, ":"); return (p[1] * 3600 + p[2] * 60 + p[3]) * 1000 }
        /step CPUs/ { a = ms($0) }
        /placed/ { b = ms($0); match($0, /topology_us=[0-9]+/); topo = substr($0, RSTART + 12, RLENGTH - 12)
            match($0, /placed [0-9]+/); n = substr($0, RSTART + 7, RLENGTH - 7) }
        END { printf "topology_us=%s placed_ms=%d tasks=%s", topo, b - a, n }'
}

echo "srun ${where[*]} -n$tasks --overcommit true, $runs run(s) each, interleaved"
for i in $(seq "$runs"); do
    echo "run $i: no LAMA: $(timed) ms"
    echo "run $i: --lama-map=scbnh: $(timed --lama-map=scbnh) ms; node1: $(last_step)"
    echo "run $i: --lama-map=scbnh --lama-verbose: $(timed --lama-map=scbnh --lama-verbose) ms; node1: $(last_step)"
done
