#!/usr/bin/env bash
# Runs every test: unit, golden, property and integration tests of the crates (cargo test),
# then the end-to-end tests on the docker Slurm cluster. Installs what it needs first.
# The cluster is stopped at the end unless LAMA_KEEP_CLUSTER=1.
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
docker/cluster.sh up
[ "${LAMA_KEEP_CLUSTER:-0}" == 1 ] || trap 'docker/cluster.sh down >/dev/null 2>&1 || true' EXIT
tests/e2e/run.sh

log "all tests passed in $((SECONDS - start))s"
