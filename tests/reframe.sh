#!/usr/bin/env bash
# The site checks (reframe/) against the running docker cluster, as a site runs them on its
# own: ReFrame (reframe/requirements.txt) installed as the test user in a virtual environment
# on the controller (the submit host), reframe/config/docker.py, stage directories on the file
# system every member shares (/shared). Then once more with a mask written wrong by hand, which
# must fail. Ends with "reframe: N passed, N failed".
#   tests/reframe.sh        (LAMA_SLURM and LAMA_CLUSTER as for tests/e2e/run.sh)
# ReFrame's wheels, for the controller's Python, are downloaded here (target/reframe-wheels)
# and installed there without an index.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cluster=$top/docker/cluster.sh
on() { "$cluster" exec slurmctld "$@"; }
as_user() { "$cluster" exec -u tester slurmctld "$@"; }
passed=0 failed=0
finish() { echo "reframe: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

py=$(on python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
    || { echo "reframe: the controller has no python3" >&2; failed=1; finish; }
wheels=$top/target/reframe-wheels/py$py
if [ ! -f "$wheels/.complete" ]; then
    rm -rf "$wheels" && mkdir -p "$wheels"
    python3 -m pip download -q --only-binary=:all: --python-version "$py" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
        -r "$top/reframe/requirements.txt" -d "$wheels" \
        || { echo "reframe: pip download for Python $py failed" >&2; failed=1; finish; }
    touch "$wheels/.complete"
fi
# The checks and the wheels onto the shared file system; the test user's directory there.
on sh -c 'rm -rf /shared/lama-reframe /shared/wheels && mkdir -p /shared/lama-reframe /shared/wheels /shared/tester && chown tester /shared/tester' || { failed=1; finish; }
tar -C "$top/reframe" -cf - . | on tar -xf - -C /shared/lama-reframe || { failed=1; finish; }
tar -C "$wheels" -cf - . | on tar -xf - -C /shared/wheels || { failed=1; finish; }
t0=$SECONDS
as_user sh -c 'python3 -m venv /shared/tester/venv && /shared/tester/venv/bin/pip install -q --no-index --find-links /shared/wheels -r /shared/lama-reframe/requirements.txt' \
    || { echo "reframe: installing ReFrame failed" >&2; failed=1; finish; }
echo "reframe: ReFrame installed in $((SECONDS - t0))s" >&2

# reframe RUN-NAME ARGS...: the checks of reframe/checks as the test user; output in $out/RUN-NAME.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
reframe() {
    local name=$1; shift
    as_user timeout 900 /shared/tester/venv/bin/reframe -C /shared/lama-reframe/config/docker.py \
        -c /shared/lama-reframe/checks/lama_checks.py --prefix "/shared/tester/rfm-$name" \
        --nocolor "$@" -r > "$out/$name" 2>&1
}
# ReFrame's closing line: "[  PASSED  ] Ran 13/13 test case(s) from 13 check(s) (0 failure(s), ...".
ran() { grep -oE 'Ran [0-9]+/[0-9]+ test case' "$out/$1" | tail -n1; }

# Every check, with the masks of lama_by_hand as written out by hand: two tasks of
# --lama-map=scbnh on any node of this cluster (two CPUs, 0 and 1) get CPU 0 and CPU 1.
t0=$SECONDS
reframe all -S lama_by_hand.expected_cpus='0 1'
rc=$?
cat "$out/all"
summary=$(ran all)
if [ $rc -eq 0 ] && [ -n "$summary" ]; then
    passed=$((passed + 1))
    echo "reframe: every check passed ($summary(s), $((SECONDS - t0))s)" >&2
else
    failed=$((failed + 1))
    echo "reframe: the checks failed (exit $rc; ${summary:-no summary})" >&2
fi
# A check made to fail: the same masks, written the wrong way round. ReFrame must say which rank
# differs, and exit non-zero.
reframe wrong -n lama_by_hand -S lama_by_hand.expected_cpus='1 0'
rc=$?
if [ $rc -ne 0 ] && grep -q 'rank 0: runs on .* CPUs 0, expected .* CPUs 1' "$out/wrong"; then
    passed=$((passed + 1))
    echo "reframe: the wrong mask failed its check, as it must: $(grep -m1 'Reason:' "$out/wrong" | sed 's/^ *\* //')" >&2
else
    failed=$((failed + 1))
    echo "reframe: the check with a wrong mask did not fail as it must (exit $rc):" >&2
    cat "$out/wrong" >&2
fi
finish
