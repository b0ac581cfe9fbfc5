#!/usr/bin/env bash
# The configuration matrix: the cluster restarted with each row of docker/configs/ (a small
# overlay of slurm.conf, cgroup.conf or the plugin line) and the tests that show what the row
# changes, every assertion on the kernel's view of each task.
#   tests/e2e/matrix.sh [ROW...]      (default: every row; the cluster is left in the base
#                                      configuration at the end)
# LAMA_CLUSTER=NAME picks the cluster. Ends with "matrix: N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)

declare -A tests_of=(
    [affinity-only]="t_row_affinity_only t_lama_exec_beside_another_job t_bind_core t_cpus_per_task_widen_the_binding t_plan_ring_and_stencil"
    [cgroup-only]="t_row_cgroup_only t_confinement t_bind_socket t_membind"
    [cr-core]="t_row_cr_core t_step_cpuset_is_honoured"
    [cr-core-memory]="t_row_cr_core"
    [corespec]="t_row_corespec"
    [contain-spank]="t_bind_core t_membind t_plan_ring_and_stencil t_bad_input_fails_before_launch"
    [optional]="t_row_optional t_bind_core"
    [contain-devices]="t_row_contain_devices t_gpu_placement"
    [many-nodes]="t_row_many_nodes"
    [node-name]="t_row_node_name"
    [no-plugin]="t_row_no_plugin"
    [plugin-only]="t_row_plugin_only t_bind_core t_bind_socket t_membind t_bad_input_fails_before_launch"
)
rows=(affinity-only cgroup-only cr-core cr-core-memory corespec contain-spank optional contain-devices many-nodes node-name no-plugin plugin-only)
[ $# -gt 0 ] && rows=("$@")

passed=0 failed=0
for row in "${rows[@]}"; do
    [ -n "${tests_of[$row]:-}" ] || { echo "matrix: unknown row $row (rows: ${!tests_of[*]})" >&2; exit 2; }
    echo "== row $row: $(head -n1 "$top/docker/configs/$row.conf" | sed 's/^# *//')"
    # The row no-plugin is a cluster started without the plugin.
    plugin=; [ "$row" == no-plugin ] && plugin=none
    if ! LAMA_PLUGIN=$plugin LAMA_CONFIG=$row "$top/docker/cluster.sh" up > "${TMPDIR:-/tmp}/lama-matrix-up-${LAMA_CLUSTER:-default}.log" 2>&1; then
        cat "${TMPDIR:-/tmp}/lama-matrix-up-${LAMA_CLUSTER:-default}.log" >&2
        echo "FAIL row $row: the cluster did not come up"
        failed=$((failed + 1))
        continue
    fi
    # shellcheck disable=SC2086
    # (Without lama on the nodes, the row plugin-only runs no step under lama verify.)
    verify=1; [ "$row" == plugin-only ] && verify=0
    out=$(LAMA_VERIFY_EACH=$verify LAMA_NO_PLUGIN=$([ "$plugin" == none ] && echo 1 || echo 0) "$top/tests/e2e/run.sh" ${tests_of[$row]} t_daemons_still_up 2>&1)
    echo "$out" | grep -v '^e2e:'
    summary=$(echo "$out" | grep -E '^e2e: [0-9]+ passed, [0-9]+ failed$' | tail -n1)
    p=$(echo "$summary" | awk '{ print $2 }'); f=$(echo "$summary" | awk '{ print $4 }')
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1}))
done
# Back to the base configuration.
"$top/docker/cluster.sh" up > /dev/null 2>&1 || { echo "matrix: the base configuration did not come back" >&2; failed=$((failed + 1)); }
echo "matrix: $passed passed, $failed failed"
[ $failed -eq 0 ]
