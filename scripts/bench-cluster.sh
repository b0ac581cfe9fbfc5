#!/usr/bin/env bash
# Launch overhead on the docker cluster: `srun -N NODES -n 2*NODES true` with `--lama-map=scbnh
# --lama-bind=1c` against the same step without any lama option, RUNS runs each (default 20),
# interleaved, wall-clock time of srun as the user sees it. Prints the medians and their ratio.
# Needs a running cluster (docker/cluster.sh up); NODES (default 3) over 3 needs the eight-node
# row (LAMA_CONFIG=many-nodes docker/cluster.sh up) and runs in its partition many.
#   scripts/bench-cluster.sh [RUNS] [NODES]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20} nodes=${2:-3}
step=(-N"$nodes" -n$((2 * nodes)))
[ "$nodes" -le 3 ] || step=(-p many "${step[@]}")
cluster=docker/cluster.sh

# Time one srun inside the controller, so docker exec's own start-up is not counted.
timed() {
    "$cluster" exec -u tester slurmctld bash -c '
        s=$(date +%s%N); srun "$@" true >/dev/null 2>&1 || exit 1; e=$(date +%s%N)
        echo $(( (e - s) / 1000 ))' timed "$@"
}

plain=() lama=()
timed "${step[@]}" >/dev/null # warm-up
for i in $(seq "$runs"); do
    plain+=("$(timed "${step[@]}")")
    lama+=("$(timed "${step[@]}" --lama-map=scbnh --lama-bind=1c)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
mp=$(median "${plain[@]}") ml=$(median "${lama[@]}")
echo "runs: $runs each, interleaved"
echo "srun ${step[*]} true: median ${mp} us"
echo "srun ${step[*]} --lama-map=scbnh --lama-bind=1c true: median ${ml} us"
awk -v a="$ml" -v b="$mp" 'BEGIN { printf "ratio: %.3f\n", a / b }'
