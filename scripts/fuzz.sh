#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of user input (fuzz/fuzz_targets: the plan file,
# the option strings and CPU lists, Slurm's host lists, GPU and launcher variables, the
# topology cache's machine text, gres.conf, hwloc XML) with libFuzzer (the libfuzzer-sys crate) on
# stable Rust: the targets are built with the sanitizer-coverage options rustc takes on
# stable, then each runs for SECONDS from its corpus (fuzz/corpus/TARGET, in the repository).
#   scripts/fuzz.sh [SECONDS [TARGET...]]      (default: 20 s each, every target)
# A panic or failed assertion, an input that takes more than 2 s (-timeout: a parser that is
# not linear) or more than 1 GiB fails the target; the input is kept as
# target/fuzz/artifacts/TARGET-crash-... (or -timeout-...) to run again:
#   target/fuzz/HOST/release/TARGET target/fuzz/artifacts/TARGET-crash-...
# New inputs the run finds go to target/fuzz/new/TARGET (copy good ones into the corpus);
# the corpus in the repository is only read. Ends with "fuzz: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
secs=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(plan_file options hostlist slurm_variables machine_text gres_conf hwloc_xml)
# What cargo-fuzz passes, less its nightly-only sanitizer (-Z): coverage counters, the PC
# table and comparison tracing, which guide libFuzzer.
export RUSTFLAGS="-C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=4 \
-C llvm-args=-sanitizer-coverage-inline-8bit-counters -C llvm-args=-sanitizer-coverage-pc-table \
-C llvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
export CARGO_TARGET_DIR=$PWD/target/fuzz
# With --target, RUSTFLAGS reach the targets only, not build scripts and proc macros (which
# would need libFuzzer's runtime to link).
host=$(rustc -vV | awk '$1 == "host:" { print $2 }')
log "building the fuzz targets (fuzz/)"
cargo build --release --locked --manifest-path fuzz/Cargo.toml --bins --target "$host"
bin=$CARGO_TARGET_DIR/$host/release
passed=0 failed=0
for t in "${targets[@]}"; do
    new=$CARGO_TARGET_DIR/new/$t
    mkdir -p "$new" "$CARGO_TARGET_DIR/artifacts" "fuzz/corpus/$t"
    # hwloc_xml drives hwloc's own XML import (C), which still aborts on malformed files LAMA
    # does not yet know to refuse (docs/testing.md): its corpus, every input it ever crashed
    # on included, is replayed; mutation runs where LAMA_FUZZ_HWLOC=1 asks for it.
    mode=(-max_total_time="$secs")
    if [ "$t" == hwloc_xml ] && [ "${LAMA_FUZZ_HWLOC:-0}" != 1 ]; then
        mode=(-runs=0)
        log "replaying $t's corpus ($(ls "fuzz/corpus/$t" | wc -l) inputs; LAMA_FUZZ_HWLOC=1 fuzzes it)"
    else
        log "fuzzing $t for ${secs}s ($(ls "fuzz/corpus/$t" | wc -l) inputs in its corpus)"
    fi
    if "$bin/$t" "${mode[@]}" -timeout=2 -rss_limit_mb=1024 \
        -max_len=16384 -print_final_stats=1 -artifact_prefix="$CARGO_TARGET_DIR/artifacts/$t-" \
        "$new" "fuzz/corpus/$t" > "$CARGO_TARGET_DIR/$t.log" 2>&1; then
        echo "ok   $t: $(grep -E '^stat::number_of_executed_units' "$CARGO_TARGET_DIR/$t.log" | awk '{ print $2 }') inputs, $(grep -cE '^#[0-9]+.*NEW' "$CARGO_TARGET_DIR/$t.log" || true) new paths"
        passed=$((passed + 1))
    else
        echo "FAIL $t: the last lines of $CARGO_TARGET_DIR/$t.log:"
        tail -n 30 "$CARGO_TARGET_DIR/$t.log" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
