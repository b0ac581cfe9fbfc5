#!/usr/bin/env bash
# End-to-end tests on the QEMU test node (vmnode/vm.sh up): one Slurm 24.11 node whose machine
# has two packages, four NUMA nodes (two per package, each with its own L3), eight cores and two
# threads per core, confined with cgroup v2. Every assertion is on the kernel's view of each
# task (Cpus_allowed_list, Mems_allowed_list, /proc/self/numa_maps, /proc/self/cgroup) or on
# what Slurm and the plugin print. Expectations come from `lama map` on the topology hwloc
# discovers in the guest, and some are written out by hand so that a bug shared by the engine
# and the plugin cannot hide.
#
#   tests/vm/run.sh [TEST...]     (default: all tests, in order)
# Ends with "vm: N passed, N failed"; exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib.sh"
vm=$top/vmnode/vm.sh

# Runs a command as the unprivileged user in the guest (the submit host is the node).
as_user() { "$vm" exec -u tester "$@"; }
# Runs a command as root in the guest.
on_guest() { "$vm" exec "$@"; }
nodes_idle() { [ "$(as_user sinfo -h -N -o %T)" == idle ]; }

# The whole machine for one step: the step runs in an exclusive allocation (salloc -N1
# --exclusive), so its cpuset is all 16 CPUs. (srun -n4 --exclusive alone gives the job the
# whole node but the step only its 4 CPUs: cgroup v2 shows 0-1,8-9.)
run_whole() {
    local srun_prefix=(salloc -N1 --exclusive)
    run_srun "$@"
}

# Tasks' CPUs only, space-separated by rank ("0-1 8-9 ..."): the host is always vmnode.
cpus() { report_field 3; }

# Kernel CPU lists on stdin ("0-2,5"), one CPU per line out.
expand_cpus() { tr ',' '\n' | awk -F- 'NF { for (c = $1; c <= (NF > 1 ? $2 : $1); c++) print c }'; }

# --- tests ---------------------------------------------------------------------------------

t_setup() {
    # The topology hwloc discovers in the guest, for `lama map`.
    on_guest lstopo-no-graphics --of xml - > "$work/vmnode.xml" || fail "lstopo in the guest failed" || return 1
    [ -x "$lama" ] || fail "$lama is missing (scripts/package.sh builds it)" || return 1
    wait_for 60 nodes_idle || fail "the node is not idle: $(as_user sinfo -h -N -o %T)" || return 1
    on_guest dpkg-query -W spank-lama > /dev/null || fail "the plugin's package is not installed in the guest"
}

t_real_topology() {
    # The kernel's view: 16 CPUs, threads 2n and 2n+1 share a core, 4 cores per package, 4 CPUs
    # per NUMA node, SMT siblings in the same NUMA node.
    local cpus
    cpus=$(on_guest lscpu -p=CPU,CORE,SOCKET,NODE | grep -v '^#' | tr '\n' ' ')
    assert_eq "lscpu (cpu,core,socket,node)" "0,0,0,0 1,0,0,0 2,1,0,0 3,1,0,0 4,2,0,1 5,2,0,1 6,3,0,1 7,3,0,1 8,4,1,2 9,4,1,2 10,5,1,2 11,5,1,2 12,6,1,3 13,6,1,3 14,7,1,3 15,7,1,3 " "$cpus" || return 1
    assert_eq "thread siblings of CPU 9" "8-9" "$(on_guest cat /sys/devices/system/cpu/cpu9/topology/thread_siblings_list)" || return 1
    assert_eq "NUMA distances from node 0" "10 12 21 21" "$(on_guest cat /sys/devices/system/node/node0/distance)" || return 1
    # hwloc's view (what Slurm and the plugin read).
    local counts="" obj
    for obj in package die numanode l3cache core pu; do
        counts+="$obj=$(on_guest hwloc-calc --number-of "$obj" all) "
    done
    assert_eq "hwloc objects" "package=2 die=4 numanode=4 l3cache=4 core=8 pu=16 " "$counts" || return 1
    # Slurm's view: its own hwloc discovery, no fake XML (sockets:cores:threads and CPUs).
    assert_eq "sinfo S:C:T CPUs" "2:4:2 16" "$(as_user sinfo -h -N -o '%z %c')" || return 1
    on_guest test ! -e /etc/slurm/topology || fail "the guest has an admin topology file" || return 1
    # And the topology the steps read is the machine's: Slurm's cached XML gives the same
    # placement of all 16 PUs as the topology discovered just now.
    on_guest cat /var/lib/slurm/slurmd/hwloc_topo_whole.xml > "$work/slurm.xml" || fail "no Slurm cached XML" || return 1
    local live cached
    live=$("$lama" map -t "$work/vmnode.xml" --np 16 --map Nscbnh --json | jq -ce '.processes | select(length == 16)') \
        || fail "lama map on the discovered topology failed" || return 1
    cached=$("$lama" map -t "$work/slurm.xml" --np 16 --map Nscbnh --json | jq -ce '.processes | select(length == 16)') \
        || fail "lama map on Slurm's cached topology failed" || return 1
    assert_eq "Slurm's cached topology" "$live" "$cached" || return 1
    # and a step says it read that file.
    local task_report='echo "$SLURM_JOB_ID"' job
    run_whole -n1 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    job=$(cat "$work/out")
    on_guest grep -qE "lama: placed 1 task\(s\) with layout scbnh .* job=$job step=0 source=Slurm's cached /var/lib/slurm/slurmd/hwloc_topo_whole.xml " \
        /var/log/slurm/slurmd.log || fail "slurmd's log does not show job $job's step reading Slurm's cached topology"
}

t_cgroup_v2() {
    assert_eq "file system at /sys/fs/cgroup" "cgroup2fs" "$(on_guest stat -fc %T /sys/fs/cgroup)" || return 1
    on_guest grep -qw cpuset /sys/fs/cgroup/cgroup.controllers || fail "no cpuset controller in cgroup.controllers" || return 1
    assert_eq "Slurm's cgroup plugin" "cgroup/v2" "$(as_user scontrol show config | awk '$1 == "CgroupPlugin" { print $3 }')" || return 1
    # Each task lives in its step's cgroup v2 tree under slurmstepd's scope.
    as_user srun -n1 cat /proc/self/cgroup > "$work/cg" 2> "$work/err" || fail "srun failed: $(cat "$work/err")" || return 1
    # (Debian's slurmd names the scope after the node: vmnode_slurmstepd.scope.)
    grep -qE '^0::/system.slice/(vmnode_)?slurmstepd.scope/job_[0-9]+/step_0/user/task_0$' "$work/cg" \
        || fail "the task's cgroup: $(cat "$work/cg")"
}

# check_layout MAP BIND NP [BY-HAND]: srun -n NP on the whole node with --lama-map=MAP
# --lama-bind=BIND; the tasks' CPUs must be what `lama map` predicts and, if given, BY-HAND.
check_layout() {
    local map=$1 bind=$2 np=$3 by_hand=${4:-}
    run_whole -n "$np" --lama-map="$map" --lama-bind="$bind" || fail "srun --lama-map=$map --lama-bind=$bind failed: $(cat "$work/err")" || return 1
    assert_eq "$map $bind, lama map" "$(predict --map "$map" --bind "$bind")" "$(actual_cpus)" || return 1
    [ -z "$by_hand" ] || assert_eq "$map $bind, by hand" "$by_hand" "$(cpus)"
}

t_layouts_core_binding() {
    # One task per core, in each layout's order: scbnh alternates packages, csbnh fills package
    # 0 first, Nscbnh goes round the four NUMA nodes, L3csbnh round the two L3s of a package.
    check_layout scbnh 1c 8 "0-1 8-9 2-3 10-11 4-5 12-13 6-7 14-15" || return 1
    check_layout csbnh 1c 8 "0-1 2-3 4-5 6-7 8-9 10-11 12-13 14-15" || return 1
    check_layout Nscbnh 1c 8 "0-1 4-5 8-9 12-13 2-3 6-7 10-11 14-15" || return 1
    check_layout L3csbnh 1c 8 "0-1 4-5 2-3 6-7 8-9 12-13 10-11 14-15"
}

t_layouts_two_cores() {
    # Two cores per task: a pair of cores sharing a NUMA node and L3.
    check_layout scbnh 2c 4 "0-3 8-11 4-7 12-15" || return 1
    check_layout csbnh 2c 4 "0-3 4-7 8-11 12-15" || return 1
    check_layout Nscbnh 2c 4 "0-3 4-7 8-11 12-15" || return 1
    check_layout L3csbnh 2c 4 "0-3 4-7 8-11 12-15"
}

t_layouts_numa_binding() {
    # A NUMA binding is the node of the mapped core: scbnh's first two cores are in nodes 0
    # and 2, its next two too.
    check_layout scbnh 1N 4 "0-3 8-11 0-3 8-11" || return 1
    check_layout csbnh 1N 4 "0-3 0-3 4-7 4-7" || return 1
    check_layout Nscbnh 1N 4 "0-3 4-7 8-11 12-15" || return 1
    check_layout L3csbnh 1N 4 "0-3 4-7 0-3 4-7"
}

t_die_level() {
    # Dies exist as hwloc objects only on hardware (and here): D and a die binding.
    check_layout Dscbnh 1D 4 "0-3 4-7 8-11 12-15" || return 1
    check_layout Dcsbnh 1c 8 "0-1 4-5 2-3 6-7 8-9 12-13 10-11 14-15"
}

t_layouts_package_binding() {
    check_layout scbnh 1s 4 "0-7 8-15 0-7 8-15" || return 1
    check_layout csbnh 1s 4 "0-7 0-7 0-7 0-7" || return 1
    check_layout Nscbnh 1s 4 "0-7 0-7 8-15 8-15" || return 1
    check_layout L3csbnh 1s 4
}

t_mppr() {
    # At most one process per NUMA node: csbnh skips the second core of each node.
    run_whole -n4 --lama-map=csbnh --lama-bind=1c --lama-mppr=1:N || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "lama map" "$(predict --map csbnh --bind 1c --mppr 1:N)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "0-1 4-5 8-9 12-13" "$(cpus)" || return 1
    # Two per package and one per core, on hardware threads.
    run_whole -n4 --lama-map=hcsbn --lama-bind=1h --lama-mppr=1:c,2:s || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "lama map" "$(predict --map hcsbn --bind 1h --mppr 1:c,2:s)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "0 2 8 10" "$(cpus)"
}

t_partial_allocation() {
    # Another job holds 6 CPUs; the step's cgroup v2 cpuset is the rest of what Slurm gave it,
    # and LAMA places inside it.
    local holder held
    holder=$(hold_cpus vmnode 6) || return 1
    # The job's cgroup appears when its first step (the batch step) starts, after RUNNING.
    local held_file="/sys/fs/cgroup/system.slice/*slurmstepd.scope/job_$holder/cpuset.cpus.effective"
    wait_for 30 on_guest sh -c "test -s $held_file"
    held=$(on_guest sh -c "cat $held_file")
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) $(cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup | sed "s|/task_[0-9]*$||")/cpuset.cpus.effective) $SLURM_JOB_ID"'
    run_srun -n4 --lama-map=scbnh --lama-bind=1c
    local rc=$?
    release "$holder" || return 1
    [ $rc -eq 0 ] || fail "srun failed: $(cat "$work/err")" || return 1
    [ -n "$held" ] || fail "no cgroup v2 cpuset for the holding job $holder" || return 1
    local step_cpus job
    step_cpus=$(awk 'NR == 1 { print $4 }' "$work/out")
    job=$(awk 'NR == 1 { print $5 }' "$work/out")
    assert_eq "every task saw one step cpuset" "1" "$(awk '{ print $4 }' "$work/out" | sort -u | wc -l)" || return 1
    # The step's CPUs and the holder's are disjoint; together at most the node's 16.
    local both
    both=$(printf '%s\n' "$held" "$step_cpus" | expand_cpus | sort -n | uniq -d | paste -sd,)
    assert_eq "CPUs both in the holder's and the step's cpuset" "" "$both" || return 1
    assert_eq "CPUs held" "6" "$(echo "$held" | expand_cpus | wc -l)" || return 1
    assert_eq "placement" "$(predict --restrict "$step_cpus" --map scbnh --bind 1c)" "$(actual_cpus)" || return 1
    # The plugin read the step's CPUs from the cgroup v2 file, and said so.
    # (Its configured cpuset.cpus, not .effective, which holds the whole node when Slurm does
    # not constrain cores; intersected with the step's allocated cores.)
    on_guest grep -qE "lama: step CPUs $step_cpus from cgroup v2 /sys/fs/cgroup/system.slice/(vmnode_)?slurmstepd.scope/job_$job/step_0/user/cpuset.cpus \($step_cpus\) and allocated cores \($step_cpus\)" \
        /var/log/slurm/slurmd.log || fail "slurmd's log does not name the cgroup v2 step cpuset: $(on_guest grep 'step CPUs' /var/log/slurm/slurmd.log | tail -n 2)"
}

# What each task reports of its memory: "RANK LAMA_MEMS LAMA_MEMBIND Mems_allowed_list POLICY
# NODES", POLICY being the one /proc/self/numa_maps shows for the first mapping ("bind:0",
# "prefer (many):0-1") and NODES the NUMA nodes the kernel
# put a 64 MiB allocation's pages on (perl writes it, then reads its own numa_maps).
mem_report='echo "$SLURM_PROCID ${LAMA_MEMS-unset} ${LAMA_MEMBIND-unset} $(grep Mems_allowed_list /proc/self/status | cut -f2) $(awk "NR == 1 { p = \$2; if (\$3 ~ /^[(]many[)]/) p = p \" \" \$3; print p }" /proc/self/numa_maps) $(perl -e '"'"'$x = "a" x (64 << 20); open(M, "/proc/self/numa_maps"); while (<M>) { next unless /anon=(\d+)/ && $1 >= 8192; my @n = /N(\d+)=/g; print join(",", @n); last }'"'"')"'

# A step on the whole node (run_whole) whose tasks print the memory report.
mem_whole() {
    local task_report=$mem_report
    run_whole "$@" || fail "srun $* failed: $(cat "$work/err")"
}

t_membind() {
    # local: each task's memory only on the NUMA nodes of its CPUs, real pages included.
    mem_whole -n4 --lama-map=Nscbnh --lama-bind=1c --lama-membind=local || return 1
    assert_eq "local, one node each" "0 0 local 0-3 bind:0 0
1 1 local 0-3 bind:1 1
2 2 local 0-3 bind:2 2
3 3 local 0-3 bind:3 3" "$(cat "$work/out")" || return 1
    # A package binding covers two NUMA nodes; the pages stay within them.
    mem_whole -n2 --lama-map=scbnh --lama-bind=1s --lama-membind=local || return 1
    assert_eq "local, package binding" "0 0-1 local 0-3 bind:0-1
1 2-3 local 0-3 bind:2-3" "$(awk '{ print $1, $2, $3, $4, $5 }' "$work/out")" || return 1
    assert_eq "pages on the package's nodes" "2" "$(awk '($1 == 0 && $6 ~ /^[01](,[01])?$/) || ($1 == 1 && $6 ~ /^[23](,[23])?$/)' "$work/out" | wc -l)" || return 1
    # preferred: one node is MPOL_PREFERRED, several MPOL_PREFERRED_MANY (kernel 5.15 and
    # later: this guest runs 6.12); with free memory there, the pages are there.
    mem_whole -n2 --lama-map=scbnh --lama-bind=1N --lama-membind=preferred || return 1
    assert_eq "preferred, one node" "0 0 preferred 0-3 prefer:0 0
1 2 preferred 0-3 prefer:2 2" "$(cat "$work/out")" || return 1
    mem_whole -n2 --lama-map=scbnh --lama-bind=1s --lama-membind=preferred || return 1
    assert_eq "preferred, two nodes" "0 0-1 preferred 0-3 prefer (many):0-1
1 2-3 preferred 0-3 prefer (many):2-3" "$(awk '{ print $1, $2, $3, $4, $5, $6 }' "$work/out")" || return 1
    assert_eq "pages on the preferred nodes" "2" "$(awk '($1 == 0 && $7 ~ /^[01](,[01])?$/) || ($1 == 1 && $7 ~ /^[23](,[23])?$/)' "$work/out" | wc -l)"
}

t_cpus_per_task() {
    # -c 4 on a node whose CPUs are threads: each task gets two whole cores of one NUMA node,
    # and with --lama-omp four OpenMP places and four threads.
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) $OMP_NUM_THREADS $OMP_PLACES"'
    run_whole -n4 -c4 --lama-map=scbnh --lama-omp || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "lama map" "$(predict --map scbnh --cpus-per-task 4)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "0-3 8-11 4-7 12-15" "$(cpus)" || return 1
    assert_eq "OMP_NUM_THREADS" "4 4 4 4" "$(report_field 4)" || return 1
    assert_eq "OMP_PLACES of rank 1" "{8},{9},{10},{11}" "$(awk '$1 == 1 { print $5 }' "$work/out")"
}

t_daemons_still_up() {
    wait_for 60 nodes_idle || fail "the node is not idle: $(as_user sinfo -h -N -o %T)" || return 1
    if on_guest sh -c 'cat /var/log/slurm/*.log' | grep -E 'fatal|Segmentation|panicked|Caught panic' >&2; then
        fail "a daemon logged a crash"; return 1
    fi
    assert_eq "daemons" "active active active" "$(on_guest systemctl is-active munge slurmctld slurmd | paste -sd' ')"
}

. "$top/tests/vm/rows.sh"

all_tests=(t_setup t_real_topology t_cgroup_v2 t_layouts_core_binding t_layouts_two_cores
    t_layouts_numa_binding t_layouts_package_binding t_die_level t_mppr t_partial_allocation t_membind
    t_cpus_per_task t_row_steps_smaller_than_the_job t_row_v2_unconstrained t_row_v2_affinity_only
    t_row_broken_plugin_line t_daemons_still_up)
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${all_tests[@]}")
[ "${selected[0]}" == t_setup ] || selected=(t_setup "${selected[@]}")
run_tests vm "${selected[@]}"
