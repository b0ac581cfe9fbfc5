#!/usr/bin/env bash
# Per-step topology cost on the docker cluster: LAMA's own topology cache (written when slurmd
# starts) against live hwloc discovery in every step, as the plugin measures it (the
# `topology_us=` field of its slurmd log line: from reading the online CPUs to a checked
# topology, every source tried included). node3 discovers the host's real topology
# (docker/configs/host-topology.conf), so "live" is a real discovery, not an XML read.
#   scripts/bench-topology.sh [RUNS] [CONCURRENT]    (defaults 30 and 16)
# Brings the cluster up itself (LAMA_SLURM, default 26.05: the Slurm that no longer caches its
# own XML) and leaves it running. For each source: RUNS steps one after another, then
# CONCURRENT steps started at once (sharing the CPUs with --overlap), each
# `srun -n2 --lama-map=scbnh true` in one allocation of node3.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
runs=${1:-30} concurrent=${2:-16}
export LAMA_SLURM=${LAMA_SLURM:-26.05}
cluster=docker/cluster.sh
LAMA_CONFIG=host-topology "$cluster" up

# (PluginDir is asked first: docker exec inside the pipeline would read the pipe's input.)
plugin_dir=$("$cluster" exec node3 scontrol show config | awk '$1 == "PluginDir" { print $3 }')
plugin_line=$(grep -v -e '^#' -e '^[[:space:]]*$' plugstack.conf.example | sed "s|@PLUGINDIR@|$plugin_dir|")
[ -n "$plugin_dir" ] && [ -n "$plugin_line" ] || { echo "bench-topology: no plugin line (PluginDir: '$plugin_dir')" >&2; exit 1; }
set_line() { echo "$plugin_line $*" | "$cluster" exec node3 sh -c 'cat > /etc/slurm/plugstack.conf.d/lama.conf'; }
# steps N CONCURRENT: N steps in one allocation of node3, CONCURRENT at a time.
steps() {
    "$cluster" exec -u tester slurmctld salloc -Q -w node3 -n2 bash -c '
        for ((i = 0; i < $1; i += $2)); do
            for ((j = 0; j < $2; j++)); do srun --overlap -n2 --lama-map=scbnh true & done
            wait
        done' steps "$1" "$2"
}
log_lines() { "$cluster" exec node3 sh -c 'wc -l < /var/log/slurm/slurmd.log'; }
# The topology_us values and sources logged since line $1.
costs_since() {
    "$cluster" exec node3 sh -c "tail -n +$1 /var/log/slurm/slurmd.log" \
        | grep -o 'source=[^=]* topology_us=[0-9]*' | sed 's/ cpus$//'
}
stats() { # label, then values on stdin
    sort -n | awk -v label="$1" '{ v[NR] = $1 } END {
        printf "%-34s n=%-3d median %7d us   p90 %7d us   max %7d us\n", label, NR,
            v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[NR] }'
}

measure() { # label, plugstack settings...
    local label=$1; shift
    set_line "$@"
    steps 1 1 # warm-up
    local from src
    from=$(log_lines)
    steps "$runs" 1
    src=$(costs_since "$from" | head -n1 | sed 's/ topology_us=.*//')
    costs_since "$from" | sed 's/.*topology_us=//' | stats "$label, one at a time"
    from=$(log_lines)
    steps "$concurrent" "$concurrent"
    costs_since "$from" | sed 's/.*topology_us=//' | stats "$label, $concurrent at once"
    echo "  ($src)"
}

echo "Slurm $LAMA_SLURM, node3 (the host's real topology: $("$cluster" exec node3 lstopo-no-graphics --of synthetic 2>/dev/null))"
measure "cache" ""
measure "live discovery" "topology_cache=none"
set_line ""
