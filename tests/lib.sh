# shellcheck shell=bash
# Shared helpers of the end-to-end tests (sourced by tests/e2e/run.sh on the docker cluster and
# tests/vm/run.sh on the QEMU test node, with top set to the repository). The sourcing runner
# defines as_user (runs a command as the unprivileged user on the submit host) and nodes_idle
# (every node idle again). Sets work (a scratch directory, removed on exit; each node's
# topology goes in $work/HOST.xml) and lama (the host's lama command, for predictions).
lama=$top/target/release/lama
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT

# What each task reports, one line per task sorted by rank: "RANK HOST CPUS LAMA_CPUS".
task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${LAMA_CPUS-unset}"'
# srun ARGS... with the task report; stdout to $work/out, stderr to $work/err. Returns srun's
# status if srun failed; if it succeeded, fails unless the report has exactly one line per task
# (ranks 0 to N-1, N being the -n/--ntasks given to srun or to the srun_prefix command), so
# that a step whose tasks printed nothing, or only some of them, can never pass a comparison.
# A caller may set (as locals) srun_prefix to run srun inside another command, e.g. salloc or
# env, and task_report to have each task report something else (one line per task, rank first).
# With verify_each=1 (set by tests/e2e/run.sh), a step placed by a layout (--lama-map) runs each
# task's report under `lama verify --json --` (installed on the nodes), which compares every
# thread's CPUs, the memory policy, the GPUs it may open and the variables with what LAMA placed
# for that rank; `lama verify --collect --np N` must then find every rank, all agreeing. A test
# that changes a task's binding on purpose sets verify_each=0 as a local.
srun_prefix=()
verify_each=${LAMA_VERIFY_EACH:-0}
run_srun() {
    local verify=0 arg rc n
    if [ "$verify_each" == 1 ]; then
        for arg in "$@"; do [[ "$arg" != --lama-map=* ]] || verify=1; done
    fi
    if [ $verify -eq 1 ]; then
        as_user "${srun_prefix[@]}" srun "$@" lama verify --json -- bash -c "$task_report" > "$work/both" 2> "$work/err"
        rc=$?
        grep '^{' "$work/both" > "$work/verify"
        grep -v '^{' "$work/both" > "$work/out"
        [ $rc -eq 0 ] || cat "$work/verify" >> "$work/err"
    else
        as_user "${srun_prefix[@]}" srun "$@" bash -c "$task_report" > "$work/out" 2> "$work/err"
        rc=$?
    fi
    sort -n -o "$work/out" "$work/out"
    [ $rc -eq 0 ] || return $rc
    n=$(ntasks_of "${srun_prefix[@]}" "$@")
    report_complete "$n" || return 1
    [ $verify -eq 1 ] || return 0
    "$lama" verify --collect --np "${n:-$(wc -l < "$work/out")}" < "$work/verify" > "$work/verified" 2>&1 \
        || fail "lama verify in each task: $(cat "$work/verified")"
}

fail() { echo "    $*" >&2; return 1; }

# The task count in an srun/salloc/sbatch command line (-n N, -nN, --ntasks=N, --ntasks N; the
# last one wins), or nothing if none is given.
ntasks_of() {
    local n=
    while [ $# -gt 0 ]; do
        case $1 in
            -n|--ntasks) n=${2:-}; shift ;;
            --ntasks=*) n=${1#--ntasks=} ;;
            -n[0-9]*) n=${1#-n} ;;
        esac
        shift
    done
    echo "$n"
}

# report_complete [N]: $work/out has exactly one line for each of the ranks 0 to N-1 (rank
# first), or, without N, at least one line and ranks 0 to (lines - 1).
report_complete() {
    local n=${1:-} got want
    got=$(awk '{ print $1 }' "$work/out" | paste -sd' ')
    [ -n "$n" ] || n=$(wc -l < "$work/out")
    [ "$n" -gt 0 ] 2>/dev/null || { fail "the step's report is empty"; return 1; }
    want=$(seq 0 $((n - 1)) | paste -sd' ')
    [ "$got" == "$want" ] || fail "the step's report: expected one line per task for ranks [$want], got ranks [$got]"
}

# assert_eq WHAT EXPECTED ACTUAL: refuses an empty EXPECTED (an expectation computed from a
# step that printed nothing would otherwise equal the nothing it is compared with); use
# assert_empty for a value that must be empty.
assert_eq() {
    [ -n "$2" ] || { fail "$1: the expected value is empty (got [$3])"; return 1; }
    [ "$2" == "$3" ] || fail "$1: expected [$2], got [$3]"
}
# assert_empty WHAT ACTUAL
assert_empty() {
    [ -z "$2" ] || fail "$1: expected nothing, got [$2]"
}
# assert_ne WHAT UNWANTED ACTUAL: ACTUAL is not empty and differs from UNWANTED (a run without
# the option under test must give something else than the run with it).
assert_ne() {
    [ -n "$3" ] || { fail "$1: got nothing"; return 1; }
    [ "$2" != "$3" ] || fail "$1: both gave [$3]"
}

# Polls CMD... (quietly) until it succeeds, at most SECONDS: wait_for SECONDS CMD...
wait_for() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.5
    done
}

# The field of the task report (2 host, 3 Cpus_allowed_list, 4 LAMA_CPUS) of every task, space-separated.
report_field() { awk -v f="$1" '{ printf "%s%s", (NR > 1 ? " " : ""), $f }' "$work/out"; }

# The CPUs reported by the tasks, as "host:cpus" per rank.
# What a plan ($work/NAME.lama) says, as "host:cpus" per rank.
planned_cpus() { awk '$1 == "rank" { printf "%s%s:%s", (n++ ? " " : ""), $3, $7 }' "$work/$1.lama"; }
actual_cpus() { awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $3 }' "$work/out"; }

# lama prints a CPU list as 0,1,2,5; the kernel as ranges (0-2,5): compare in the kernel's form.
kernel_form() {
    tr ',' '\n' <<< "$1" | awk 'NR == 1 { s = $1; e = $1; next } $1 == e + 1 { e = $1; next } { printf "%s,", (s == e ? s : s "-" e); s = $1; e = $1 } END { printf "%s", (s == e ? s : s "-" e) }'
}

# What `lama map` predicts for the tasks of the last run: for each node, its tasks (by Slurm's
# rank order) placed on that node's topology restricted to CPUS (default: the node's CPUs),
# with the lama options given. Prints "host:cpus" per rank like actual_cpus.
# predict [--restrict CPUS] LAMA-MAP-ARGS...
# It refuses to predict from an empty report, and when `lama map` fails or places fewer
# processes than the node has tasks it prints PREDICTION-FAILED (never a CPU list), so the
# comparison it feeds fails too.
predict() {
    local restrict=() ; if [ "$1" == "--restrict" ]; then restrict=(--restrict "$2"); shift 2; fi
    [ -s "$work/out" ] || { fail "predict: the step printed no task report"; echo PREDICTION-FAILED; return 1; }
    local -A cpus_of
    local host
    for host in $(awk '{ print $2 }' "$work/out" | sort -u); do
        local ranks np json
        ranks=$(awk -v h="$host" '$2 == h { print $1 }' "$work/out" | sort -n)
        np=$(echo "$ranks" | wc -l)
        json=$("$lama" map --topology "$work/$host.xml" --np "$np" "${restrict[@]}" "$@" --json) \
            || { fail "predict: lama map for $host failed"; echo PREDICTION-FAILED; return 1; }
        local k=0 r
        for r in $ranks; do
            cpus_of[$r]=$(echo "$json" | jq -er ".processes[$k].cpus | map(tostring) | join(\",\")") && [ -n "${cpus_of[$r]}" ] \
                || { fail "predict: lama map gave no CPUs for rank $r (process $k on $host)"; echo PREDICTION-FAILED; return 1; }
            k=$((k + 1))
        done
    done
    local first=1 r
    for r in $(awk '{ print $1 }' "$work/out"); do
        host=$(awk -v r="$r" '$1 == r { print $2 }' "$work/out")
        [ $first -eq 1 ] || printf ' '
        first=0
        printf '%s:%s' "$host" "$(kernel_form "${cpus_of[$r]}")"
    done
}

# What one `lama map` over the step's nodes previews for the last run, given the srun options'
# lama spelling: every node's topology in Slurm's node order (the hosts of the report, sorted),
# -n from the report, as "host:cpus" per rank like actual_cpus. Unlike predict, lama map itself
# deals the ranks to the nodes. PREVIEW-FAILED (never a CPU list) when it cannot.
# preview LAMA-MAP-ARGS...
preview() {
    [ -s "$work/out" ] || { fail "preview: the step printed no task report"; echo PREVIEW-FAILED; return 1; }
    local hosts=() topo=() h json np
    mapfile -t hosts < <(awk '{ print $2 }' "$work/out" | sort -uV)
    for h in "${hosts[@]}"; do topo+=(--topology "$work/$h.xml"); done
    np=$(wc -l < "$work/out")
    json=$("$lama" map "${topo[@]}" --np "$np" --node-names "$(IFS=,; echo "${hosts[*]}")" "$@" --json) \
        || { fail "preview: lama map failed"; echo PREVIEW-FAILED; return 1; }
    preview_cpus "$json"
}

# The same from the srun line itself: `lama map -- srun SRUN-ARGS ./app` over the step's nodes
# (-n, -N, -c, -m ... read from the line as srun reads them).
# preview_line SRUN-ARGS...
preview_line() {
    [ -s "$work/out" ] || { fail "preview_line: the step printed no task report"; echo PREVIEW-FAILED; return 1; }
    local hosts=() topo=() h json
    mapfile -t hosts < <(awk '{ print $2 }' "$work/out" | sort -uV)
    for h in "${hosts[@]}"; do topo+=(--topology "$work/$h.xml"); done
    json=$("$lama" map "${topo[@]}" --node-names "$(IFS=,; echo "${hosts[*]}")" --json -- srun "$@" ./app) \
        || { fail "preview_line: lama map -- srun $* failed"; echo PREVIEW-FAILED; return 1; }
    preview_cpus "$json"
}

# lama map's --json as "host:cpus" per rank, in the kernel's form.
preview_cpus() {
    local json=$1 rows h
    rows=$(echo "$json" | jq -er '[.nodes[].name] as $n | [.processes | sort_by(.rank)[]
            | "\($n[.node]) \(.cpus | map(tostring) | join(","))"] | select(length > 0) | .[]') \
        || { fail "preview: lama map gave no processes"; echo PREVIEW-FAILED; return 1; }
    local first=1 list
    while read -r h list; do
        [ $first -eq 1 ] || printf ' '
        first=0
        printf '%s:%s' "$h" "$(kernel_form "$list")"
    done <<< "$rows"
}

job_state() { as_user squeue -h -j "$1" -o %T 2>/dev/null; }
job_running() { [ "$(job_state "$1")" == RUNNING ]; }
job_gone() { [ -z "$(job_state "$1")" ]; }

# hold_cpus NODE N: a batch job holding N CPUs of NODE (sleeping); prints its id once it runs.
hold_cpus() {
    local id
    id=$(as_user sbatch --parsable -w "$1" -n "$2" -o /dev/null --wrap 'sleep 300') || return 1
    wait_for 30 job_running "$id" || { as_user scancel "$id"; fail "job $id holding $2 CPU(s) of $1 did not start"; return 1; }
    echo "$id"
}
# release JOBID: cancels the job and waits until it is gone and every node is idle again.
release() {
    as_user scancel "$1"
    wait_for 60 job_gone "$1" && wait_for 60 nodes_idle || fail "job $1 did not end cleanly"
}

# Runs each test function in order, one line each with its wall time ("ok   t_x (12 s)" or
# "FAIL t_x (12 s)", the reason indented above it), then "LABEL: N passed, N failed"; fails if
# any test failed. run_tests LABEL TEST...
run_tests() {
    local label=$1 t t0 passed=0 failed=0
    shift
    for t in "$@"; do
        t0=$SECONDS
        # A suite may run each test through a function of its own (run_test_with=FUNCTION,
        # called with the test's name).
        if ${run_test_with:+"$run_test_with"} "$t"; then
            echo "ok   $t ($((SECONDS - t0)) s)"
            passed=$((passed + 1))
        else
            echo "FAIL $t ($((SECONDS - t0)) s)"
            failed=$((failed + 1))
        fi
    done
    echo "$label: $passed passed, $failed failed"
    [ $failed -eq 0 ]
}
