#!/usr/bin/env bash
# Runs every test: unit, golden, property and integration tests of the crates (cargo test),
# then the end-to-end tests on a docker Slurm cluster of their own (tests/e2e/ci.sh: started,
# tested, daemon logs kept on failure, removed). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
start=$SECONDS

scripts/deps.sh
# The cluster's Slurm headers are needed to build the plugin crate (see .cargo/config.toml).
docker/cluster.sh build

log "cargo test --workspace"
cargo test --workspace

log "end-to-end tests on the docker cluster"
tests/e2e/ci.sh

log "all tests passed in $((SECONDS - start))s"
