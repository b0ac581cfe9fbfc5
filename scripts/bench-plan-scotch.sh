#!/usr/bin/env bash
# What Scotch brings to `lama plan`: the winning plan's cost, and which candidate won, with
# Scotch (the default build) and without it (`--no-default-features`: the recursive bisection,
# the stencil path and the layouts), on the same matrices and nodes: 2-D stencils and a ring on
# nodes of 2 x 12 cores (the seed paper's shape), and a random sparse matrix. Costs are the
# model's (deterministic); prints one Markdown row per matrix.
#   scripts/bench-plan-scotch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p lama-cli
cargo build -q -p lama-cli --no-default-features --target-dir target/no-scotch
with=target/debug/lama without=target/no-scotch/debug/lama
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
stencil() { awk -v x="$1" -v y="$2" 'BEGIN { for (j = 0; j < y; j++) for (i = 0; i < x; i++) {
    r = j * x + i; if (i + 1 < x) print r, r + 1, 1; if (j + 1 < y) print r, r + x, 1 } }'; }
ring() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print i, (i + 1) % n, 10 }'; }
# A random sparse matrix: each rank talks to 4 others, volumes 1-100 (awk's srand(7): the same
# matrix every run).
random() { awk -v n="$1" 'BEGIN { srand(7); for (i = 0; i < n; i++) for (k = 0; k < 4; k++) {
    j = int(rand() * n); if (j != i) print i, j, 1 + int(rand() * 100) } }'; }
# plan LAMA NP NODES: "cost winner" of the plan for $dir/m.
plan() {
    "$1" plan --matrix "$dir/m" --format sparse --np "$2" --topology "pack:2 numa:2 core:6 pu:1" \
        --node-names "n[1-$3]" 2>&1 | sed -n 's/^plan: [0-9,]* ranks, binding [^;]*; \(.*\) wins with cost \([0-9,]*\).*/\2 \1/p'
}
echo "| matrix | ranks | nodes | with Scotch: cost (winner) | without: cost (winner) | without, against with |"
echo "|---|---:|---:|---|---|---:|"
for spec in stencil:12:8 stencil:48:44 ring:96 ring:480 random:96 random:480; do
    IFS=: read -r kind a b <<< "$spec"
    case $kind in
        stencil) stencil "$a" "$b" > "$dir/m"; n=$((a * b)); what="2-D stencil ${a}x$b" ;;
        ring) ring "$a" > "$dir/m"; n=$a; what="ring" ;;
        random) random "$a" > "$dir/m"; n=$a; what="random, 4 peers a rank" ;;
    esac
    nodes=$(((n + 23) / 24))
    read -r c1 w1 < <(plan "$with" "$n" "$nodes")
    read -r c2 w2 < <(plan "$without" "$n" "$nodes")
    x=${c1//,/} y=${c2//,/}
    echo "| $what | $n | $nodes | $c1 ($w1) | $c2 ($w2) | $(awk -v a="$x" -v b="$y" 'BEGIN { printf "%+.1f%%", (b - a) * 100 / a }') |"
done
