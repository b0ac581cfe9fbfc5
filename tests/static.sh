#!/usr/bin/env bash
# make static: a statically linked lama for sites to copy (README "Without root"):
#   t_static_is_static        make static builds target/static/lama; the kernel loads it with
#                             no dynamic loader (ldd: not dynamic), and it names no hwloc plugin
#                             path it could dlopen from (HWLOC_PLUGINS_VERBOSE)
#   t_static_places_as_lama   lama map, lama topology, lama export and lama plan (Scotch) give
#                             what the dynamic build gives, on an XML node and this machine
#   t_static_gives_programs_their_environment
#                             lama exec starts its program without the HWLOC_PLUGINS_PATH the
#                             static lama set for itself
# Ends with "static: N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib.sh"
cd "$top"
st=$top/target/static/lama

t_static_is_static() {
    make -s static > "$work/out" 2>&1 || { fail "make static: $(tail -n 20 "$work/out")"; return 1; }
    [ -x "$st" ] || fail "no $st" || return 1
    ldd "$st" 2>&1 | grep -qE 'statically linked|not a dynamic executable' \
        || fail "ldd: $(ldd "$st" 2>&1)" || return 1
    ! readelf -l "$st" | grep -q 'Requesting program interpreter' || fail "it asks for a dynamic loader" || return 1
    HWLOC_PLUGINS_VERBOSE=1 "$st" topology host > "$work/out" 2>&1 || { fail "lama topology host: $(cat "$work/out")"; return 1; }
    ! grep -q 'Plugin dlforeach found' "$work/out" || fail "hwloc looked for plugins: $(grep Plugin "$work/out")"
}

t_static_places_as_lama() {
    local dyn=$top/target/debug/lama x=tests/topologies/AMD-19h-Zen3-2xEpyc-7763.xml i
    [ -x "$dyn" ] || cargo build -q -p lama-cli 2> "$work/err" || { fail "cargo build: $(tail -n 5 "$work/err")"; return 1; }
    "$st" map --topology "$x" -n 12 --map nscbh --json > "$work/st.json" 2> "$work/err" \
        || { fail "static lama map: $(cat "$work/err")"; return 1; }
    grep -q '"processes":\[{"rank":0' "$work/st.json" || fail "static lama map: $(head -c 300 "$work/st.json")" || return 1
    assert_eq "lama map -n 12 -m nscbh on the Zen 3 node" \
        "$("$dyn" map --topology "$x" -n 12 --map nscbh --json)" "$(cat "$work/st.json")" || return 1
    assert_eq "lama map on this machine" \
        "$("$dyn" map --topology host -n 2 --map csbnh --json 2>&1)" \
        "$("$st" map --topology host -n 2 --map csbnh --json 2>&1)" || return 1
    assert_eq "lama topology host" "$("$dyn" topology host)" "$("$st" topology host)" || return 1
    # This machine's XML, PCI devices included (hwloc's Linux discovery, built in).
    "$st" export > "$work/st.xml" 2> "$work/err" || { fail "static lama export: $(cat "$work/err")"; return 1; }
    grep -q '<object type="PU"' "$work/st.xml" || fail "static lama export: $(head -c 300 "$work/st.xml")" || return 1
    assert_eq "lama export" "$("$dyn" export)" "$(cat "$work/st.xml")" || return 1
    for i in 0 1 2 3 4 5 6 7; do echo "$i $(((i + 1) % 8)) 10"; done > "$work/ring"
    for b in dyn st; do
        "${!b}" plan --matrix "$work/ring" --format sparse --np 8 --topology "pack:2 core:4 pu:1" \
            --node-names n1 --out "$work/$b" > "$work/$b.txt" 2>&1 || { fail "$b lama plan: $(cat "$work/$b.txt")"; return 1; }
    done
    grep -qi scotch "$work/st.txt" || fail "no Scotch candidate in the static plan: $(head -n 3 "$work/st.txt")" || return 1
    grep -q '^ranks 8$' "$work/st.lama" || fail "the static plan: $(head -n 3 "$work/st.lama")" || return 1
    assert_eq "the ring's plan" "$(cat "$work/dyn.lama")" "$(cat "$work/st.lama")"
}

t_static_gives_programs_their_environment() {
    # One rank of mpirun's, outside any Slurm job.
    local got one_rank=(OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1
        OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1)
    got=$(env -u SLURM_JOB_ID -u HWLOC_PLUGINS_PATH "${one_rank[@]}" "$st" exec --map csbnh -- \
        sh -c 'echo "${HWLOC_PLUGINS_PATH-unset}"' 2> "$work/err") || { fail "lama exec: $(cat "$work/err")"; return 1; }
    assert_eq "HWLOC_PLUGINS_PATH in lama exec's program" unset "$got" || return 1
    got=$(env -u SLURM_JOB_ID HWLOC_PLUGINS_PATH=/site "${one_rank[@]}" "$st" exec --map csbnh -- \
        sh -c 'echo "${HWLOC_PLUGINS_PATH-unset}"' 2> "$work/err") || { fail "lama exec: $(cat "$work/err")"; return 1; }
    assert_eq "a user's HWLOC_PLUGINS_PATH" /site "$got"
}

run_tests static t_static_is_static t_static_places_as_lama t_static_gives_programs_their_environment
