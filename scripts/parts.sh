# shellcheck shell=bash
# The parts of a test run (scripts/test.sh), run in lanes at the same time: a lane is a
# background shell that runs its parts one after another; a part is one command whose output
# goes to its own log, and which waits for the parts it needs (in any lane) to pass first. A
# part whose needed part failed is not run: it is marked "not run" with the reason. At the
# end parts_report prints each part's lane, start, duration, result and test counts, and
# writes them as times.tsv beside the logs. (Sourced, not run; needs scripts/lib.sh's log.)
#   parts_init DIR           the run's directory (emptied): logs, times.tsv
#   part NAME [NEED...] -- CMD...     runs CMD as part NAME once every NEED has passed (a
#                            NEED written ~NAME: once NAME has ended, whatever its result)
#   parts_ended NAME         whether NAME has ended (for a lane's own waits; PARTS_AFTER then
#                            names what it waited on, for the critical path)
#   parts_report             the table; returns non-zero if any part failed or was not run
#   parts_watch SECONDS      from then on a warning is printed every 5 minutes, so that a
#                            run that grows towards CI's bound is seen long before it

parts_init() {
    parts_dir=$1
    rm -rf "$parts_dir" && mkdir -p "$parts_dir" || return 1
    parts_t0=$(date +%s)
    : > "$parts_dir/order"
}

# part NAME [NEED...] -- CMD...  (in a lane: `( part a -- cmd; part b a -- cmd ) &`)
part() {
    local name=$1 needs=() need rc t0
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do needs+=("$1"); shift; done
    shift
    echo "$name" >> "$parts_dir/order"
    echo "${PARTS_LANE:-main}" > "$parts_dir/$name.lane"
    # What it waited for: its needs, the part before it in its lane, and what the lane waited
    # on before it (PARTS_AFTER): the critical path.
    echo "${parts_prev:-}" "${needs[@]#"~"}" ${PARTS_AFTER:-} > "$parts_dir/$name.after"
    parts_prev=$name
    for need in "${needs[@]}"; do
        # ~NAME: only after NAME has ended, whatever its result (an order, not a need).
        if [[ $need == "~"* ]]; then
            until [ -f "$parts_dir/${need#"~"}.rc" ]; do sleep 2; done
            continue
        fi
        until [ -f "$parts_dir/$need.rc" ]; do sleep 2; done
        if [ "$(cat "$parts_dir/$need.rc")" != 0 ]; then
            echo "needs $need, which did not pass" > "$parts_dir/$name.why"
            date +%s > "$parts_dir/$name.start"
            echo skip > "$parts_dir/$name.rc"
            log "$name: not run ($need did not pass)"
            return 1
        fi
    done
    t0=$(date +%s)
    echo "$t0" > "$parts_dir/$name.start"
    log "$name: started ($(parts_clock "$t0"))"
    "$@" > "$parts_dir/$name.log" 2>&1 < /dev/null
    rc=$?
    date +%s > "$parts_dir/$name.end"
    echo "$rc" > "$parts_dir/$name.rc"
    if [ "$rc" == 0 ]; then
        log "$name: passed in $(($(cat "$parts_dir/$name.end") - t0))s"
    else
        log "$name: FAILED (exit $rc) in $(($(cat "$parts_dir/$name.end") - t0))s; log ${parts_dir#"$PWD"/}/$name.log"
    fi
    return "$rc"
}

# m:ss since the run's start, for an epoch time.
parts_clock() {
    local s=$(($1 - parts_t0))
    printf '%d:%02d' $((s / 60)) $((s % 60))
}

# The tests a part's log counts: its runners' closing lines ("NAME: N passed, N failed",
# cargo's "test result: ok. N passed; N failed"), summed. Prints "PASSED FAILED" or nothing.
parts_counts() {
    awk '
        /^test result: / { for (i = 1; i <= NF; i++) { if ($(i + 1) ~ /^passed/) p += $i; if ($(i + 1) ~ /^failed/) f += $i }; n++ }
        /^[a-z0-9._-]+: [0-9]+ passed, [0-9]+ failed/ { sub(/,/, "", $3); p += $2; f += $4; n++ }
        END { if (n) print p + 0, f + 0 }' "$1" 2>/dev/null
}

# The parts in the order they started (a part not run: when it was given up).
parts_by_start() {
    local name
    while read -r name; do
        echo "$(cat "$parts_dir/$name.start" 2>/dev/null || echo 0) $name"
    done < "$parts_dir/order" | sort -n -s -k1,1 | cut -d' ' -f2
}

parts_report() {
    local name rc start end dur result counts total_p=0 total_f=0 bad=0 bad_parts= tsv=$parts_dir/times.tsv
    printf 'part\tlane\tstart_s\tseconds\tresult\tpassed\tfailed\n' > "$tsv"
    echo
    printf '%-18s %-12s %7s %8s  %-9s %s\n' part lane start seconds result tests
    while read -r name; do
        rc=$(cat "$parts_dir/$name.rc" 2>/dev/null || echo none)
        start=$(cat "$parts_dir/$name.start" 2>/dev/null || echo "$parts_t0")
        end=$(cat "$parts_dir/$name.end" 2>/dev/null || echo "$start")
        dur=$((end - start))
        case $rc in
            0) result=passed ;;
            skip) result="not run"; bad=$((bad + 1)); bad_parts+=" $name" ;;
            *) result=FAILED; bad=$((bad + 1)); bad_parts+=" $name" ;;
        esac
        counts=$(parts_counts "$parts_dir/$name.log")
        if [ -n "$counts" ]; then
            total_p=$((total_p + ${counts% *})); total_f=$((total_f + ${counts#* }))
        fi
        printf '%-18s %-12s %7s %8s  %-9s %s\n' "$name" "$(cat "$parts_dir/$name.lane")" \
            "$(parts_clock "$start")" "$dur" "$result" "${counts:+${counts% *} passed, ${counts#* } failed}"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$(cat "$parts_dir/$name.lane")" \
            $((start - parts_t0)) "$dur" "$result" "${counts% *}" "${counts#* }" >> "$tsv"
    done < <(parts_by_start)
    echo "wall time: $(($(date +%s) - parts_t0))s (each part's log and times.tsv in ${parts_dir#"$PWD"/})"
    echo "critical path: $(parts_critical)"
    while read -r name; do
        rc=$(cat "$parts_dir/$name.rc" 2>/dev/null || echo none)
        if [ "$rc" == skip ]; then
            echo "== $name was not run: $(cat "$parts_dir/$name.why")"
        elif [ "$rc" != 0 ]; then
            echo "== $name FAILED (exit $rc); the last 60 lines of ${parts_dir#"$PWD"/}/$name.log:"
            tail -n 60 "$parts_dir/$name.log" | sed 's/^/    /'
        fi
    done < "$parts_dir/order"
    # A part that failed, or was not run, counts as one failure more than its tests say.
    [ "$bad_parts" == "" ] || echo "parts that failed or were not run:$bad_parts"
    echo "$total_p passed, $((total_f + bad)) failed"
    [ $bad -eq 0 ] && [ $total_f -eq 0 ]
}

# The chain of parts the run waited on: from the part that ended last, back through what each
# waited for (its needs, the part before it in its lane), the one of them that ended last.
parts_critical() {
    local name best end start e p chain=
    name=$(while read -r p; do echo "$(cat "$parts_dir/$p.end" 2>/dev/null || echo 0) $p"; done < "$parts_dir/order" \
        | sort -n | tail -n1 | cut -d' ' -f2)
    while [ -n "$name" ]; do
        chain="$name ($(parts_clock "$(cat "$parts_dir/$name.start" 2>/dev/null || echo "$parts_t0")")-$(parts_clock "$(cat "$parts_dir/$name.end" 2>/dev/null || echo "$parts_t0")"))${chain:+ -> }$chain"
        best= end=-1 start=$(cat "$parts_dir/$name.start" 2>/dev/null || echo 0)
        for p in $(cat "$parts_dir/$name.after" 2>/dev/null); do
            e=$(cat "$parts_dir/$p.end" 2>/dev/null || echo 0)
            # (Only what had ended when it started: an alternative it did not wait for ends later.)
            if [ "$e" -gt "$end" ] && [ "$e" -le "$start" ]; then best=$p end=$e; fi
        done
        name=$best
    done
    echo "$chain"
}

# Whether part NAME has ended (passed, failed or not run).
parts_ended() { [ -f "$parts_dir/$1.rc" ]; }

# Prints a warning once the run has lasted SECONDS, then every 5 minutes (in the background:
# kill $parts_watcher at the end).
parts_watch() {
    local at=$1
    (
        # (Its sleep is killed with it, so that nothing holds the run's output open.)
        trap 'kill $nap 2>/dev/null; exit 0' TERM
        nap_for() { sleep "$1" & nap=$!; wait $nap; }
        nap_for "$at"
        while :; do
            log "WARNING: this run has taken $(( ($(date +%s) - parts_t0) / 60 )) minutes, past its budget of $((at / 60)) (CI stops at 90): see docs/testing.md"
            nap_for 300
        done
    ) &
    parts_watcher=$!
}
