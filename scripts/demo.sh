#!/usr/bin/env bash
# Builds everything, brings up the docker Slurm cluster with the plugin, previews a placement
# with `lama`, and runs a demo job that shows every task's binding. The cluster keeps running:
# try more with `docker/cluster.sh exec -u tester slurmctld srun ...`; stop it with
# `docker/cluster.sh down`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

scripts/deps.sh
docker/cluster.sh up

log "preview: lama map on node1's topology (2 sockets x 1 core)"
docker/cluster.sh exec node1 cat /etc/slurm/topology/node1.xml > docker/.build/node1.xml
target/release/lama map --topology docker/.build/node1.xml --np 2 --map scbnh --bind 1s

log "srun -N3 -n6 --lama-map=scbnh --lama-bind=1s --lama-verbose"
docker/cluster.sh exec -u tester slurmctld srun -N3 -n6 --lama-map=scbnh --lama-bind=1s --lama-verbose \
    bash -c 'echo "rank $SLURM_PROCID on $(hostname -s): Cpus_allowed_list=$(grep Cpus_allowed_list /proc/self/status | cut -f2) LAMA_CPUS=$LAMA_CPUS"' \
    2>&1 | sort
