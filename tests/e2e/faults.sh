#!/usr/bin/env bash
# Fault tests on the running cluster (docker/cluster.sh up): slurmd killed under a step, a node
# restarted during a job, the topology file replaced while steps start, 50 concurrent steps,
# one step of 1,024 tasks, tasks that rebind themselves. Each ends with every node idle, no
# crash in any daemon log and the next job placed correctly.
#   tests/e2e/faults.sh [TEST...]
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
all=(t_fault_task_rebinds_itself t_fault_topology_file_replaced t_fault_many_concurrent_steps
    t_fault_1024_tasks t_fault_slurmd_killed t_fault_node_restarted)
[ $# -gt 0 ] || set -- "${all[@]}"
out=$("$top/tests/e2e/run.sh" "$@" t_daemons_still_up 2>&1)
rc=$?
echo "$out" | sed 's/^e2e:/faults:/'
exit $rc
