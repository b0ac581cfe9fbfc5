#!/usr/bin/env bash
# lama built without Scotch, as a user without root builds it (README: `cargo install --path
# lama-cli --no-default-features`, which needs Rust, a C compiler and hwloc, not Scotch, its
# compression libraries or libclang):
#   t_builds_without_scotch   the build links no Scotch (no library, no symbol)
#   t_plan_without_scotch     lama plan makes a plan from the candidates it has (the recursive
#                             bisection and the layouts), by hand on a ring: each rank's
#                             neighbours on its own socket where the sockets allow
#   t_map_without_scotch      lama map is the same as with Scotch (nothing of it uses Scotch)
# Ends with "no-scotch: N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib.sh"
cd "$top"
bare=$top/target/no-scotch/debug/lama

t_builds_without_scotch() {
    cargo build -q -p lama-cli --no-default-features --target-dir "$top/target/no-scotch" 2> "$work/err" \
        || { fail "cargo build --no-default-features: $(tail -n 20 "$work/err")"; return 1; }
    [ -x "$bare" ] || fail "no $bare" || return 1
    ! ldd "$bare" | grep -i scotch || fail "it links Scotch" || return 1
    assert_eq "Scotch's symbols in it" 0 "$(nm "$bare" | grep -c 'SCOTCH_')"
}

t_plan_without_scotch() {
    # A ring of 8 ranks on 2 sockets of 4 cores: the cheapest plan keeps 4 consecutive ranks on
    # each socket (two ring links cross the sockets, the fewest a ring of 8 over two sockets can
    # have), as csbnh does.
    local i
    for i in 0 1 2 3 4 5 6 7; do echo "$i $(((i + 1) % 8)) 10"; done > "$work/ring"
    "$bare" plan --matrix "$work/ring" --format sparse --np 8 --topology "pack:2 core:4 pu:1" \
        --node-names n1 --out "$work/plan" > "$work/out" 2>&1 || { fail "lama plan: $(cat "$work/out")"; return 1; }
    grep -q '^plan: 8 ranks, binding 1c; bisection wins' "$work/out" || fail "the plan's summary: $(head -n 3 "$work/out")" || return 1
    ! grep -qi scotch "$work/out" || fail "a Scotch candidate in a build without it: $(head -n 3 "$work/out")" || return 1
    local sockets
    sockets=$(awk '$1 == "rank" { print $7 }' "$work/plan.lama" | awk '{ printf "%s", ($1 < 4 ? "a" : "b") }')
    [[ "$sockets" == aaaabbbb || "$sockets" == bbbbaaaa ]] || fail "the ranks' sockets, in rank order: $sockets" || return 1
}

t_map_without_scotch() {
    local with=$top/target/debug/lama
    [ -x "$with" ] || cargo build -q -p lama-cli 2> "$work/err" || { fail "cargo build: $(tail -n 5 "$work/err")"; return 1; }
    assert_eq "lama map -n 12 -m nscbh on the Zen 3 node, with and without Scotch" \
        "$("$with" map --topology tests/topologies/AMD-19h-Zen3-2xEpyc-7763.xml -n 12 --map nscbh --json)" \
        "$("$bare" map --topology tests/topologies/AMD-19h-Zen3-2xEpyc-7763.xml -n 12 --map nscbh --json)"
}

run_tests no-scotch t_builds_without_scotch t_plan_without_scotch t_map_without_scotch
