#!/usr/bin/env bash
# Time and peak memory of the whole `lama plan` command (reading the matrix, building the
# nodes, Scotch, the bisection, every layout, the swaps) on 2-D stencils up to 20,000 ranks, on
# nodes of 2 x 12 cores (the seed paper's node shape) under one switch per 22 nodes; the plan
# is written (--out), as a user would.
#   scripts/bench-plan.sh [RUNS]          (default 3; prints one Markdown row per size)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
cargo build --release -q -p lama-cli
lama=target/release/lama
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "| ranks | nodes | stencil | matrix lines | wall time (s), $runs runs | peak memory (MB) |"
echo "|---:|---:|---|---:|---|---:|"
for size in 96:12x8 2112:48x44 5040:72x70 10080:120x84 20016:144x139 50176:224x224 100160:320x313; do
    n=${size%%:*} shape=${size#*:} x=${shape%x*} y=${shape#*x}
    nodes=$(((n + 23) / 24))
    # A sparse 2-D stencil, i j volume, each pair once.
    awk -v x="$x" -v y="$y" 'BEGIN {
        for (j = 0; j < y; j++) for (i = 0; i < x; i++) {
            r = j * x + i
            if (i + 1 < x) print r, r + 1, 1
            if (j + 1 < y) print r, r + x, 1
        } }' >"$dir/m"
    # Leaf switches of 22 nodes under one top switch.
    : >"$dir/net"
    for ((s = 0; s * 22 < nodes; s++)); do
        last=$(((s + 1) * 22 < nodes ? (s + 1) * 22 : nodes))
        echo "SwitchName=leaf$s Nodes=n[$((s * 22 + 1))-$last]" >>"$dir/net"
    done
    [ "$nodes" -le 22 ] || echo "SwitchName=top Switches=leaf[0-$(((nodes - 1) / 22))]" >>"$dir/net"
    times=() mem=0
    for ((k = 0; k < runs; k++)); do
        /usr/bin/time -f '%e %M' -o "$dir/t" "$lama" plan --matrix "$dir/m" --format sparse \
            --np "$((x * y))" --topology "pack:2 numa:2 core:6 pu:1" --node-names "n[1-$nodes]" \
            --network "$dir/net" --out "$dir/plan" >/dev/null 2>&1
        read -r t m <"$dir/t"
        times+=("$t")
        [ "$m" -le "$mem" ] || mem=$m
    done
    echo "| $((x * y)) | $nodes | ${x}x$y | $(wc -l <"$dir/m") | ${times[*]} | $((mem / 1024)) |"
done
