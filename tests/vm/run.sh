#!/usr/bin/env bash
# End-to-end tests on the QEMU test node (vmnode/vm.sh up): one Slurm node (24.11, or 26.05 with
# LAMA_SLURM=26.05, the variable that also picks vmnode/vm.sh's guest) whose machine
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

# The guest's Slurm release (vmnode/vm.sh talks to this flavour's guest; t_setup checks it).
flavour=${LAMA_SLURM:-24.11}
spool=/var/lib/slurm/slurmd
# The topology file a step reads first: the machine text of the plugin's own cache, written
# when slurmd starts beside its XML (before Slurm 24.11's own cache; 25.05 and later no longer
# write one).
topology_file=$spool/lama_topology.machine; step_source="LAMA's cached $topology_file"

# job_cgroup JOBID [SLUID]: the name of the job's cgroup v2 directory under slurmstepd's scope:
# job_<id> on 24.11, and on 26.05 with CgroupJobIdPaths=yes (cgroup.conf); else, 26.05's
# default, the job's SLUID (e.g. s6M1M856ZHPV00; a task has it as SLURM_JOB_SLUID, squeue as
# -O SLUID while the job is known).
job_cgroup() {
    local job=$1 sluid=${2:-}
    if [ "$flavour" == 24.11 ] \
        || [ "$(as_user scontrol show config | awk '$1 == "CgroupJobIdPaths" { print $3 }')" == yes ]; then
        echo "job_$job"
        return
    fi
    [ -n "$sluid" ] || sluid=$(as_user squeue -h -j "$job" -O SLUID | tr -d ' ')
    [[ $sluid =~ ^s[0-9A-Z]+$ ]] || { echo "no SLUID for job $job: [$sluid]" >&2; return 1; }
    echo "$sluid"
}

# The whole machine for one step: the step runs in an exclusive allocation (salloc -N1
# --exclusive), so its cpuset is all 16 CPUs. (srun -n4 --exclusive alone gives the job the
# whole node but the step only its 4 CPUs: cgroup v2 shows 0-1,8-9.) Inside a test run by
# one_allocation, the step runs in that test's allocation instead, as srun inside salloc does.
whole_job=
run_whole() {
    local srun_prefix=(salloc -N1 --exclusive)
    [ -z "$whole_job" ] || srun_prefix=(env SLURM_JOB_ID="$whole_job")
    run_srun "$@"
}

# The tests of six steps or more that all take the whole node (run_whole) run in one
# allocation each: the node held by `salloc -N1 --exclusive --no-shell`, each step an srun in
# that job, the job cancelled when the test ends however it ends. Under emulation an
# allocation of its own for each step cost these four 347 s on an idle machine, one for each
# test 262 s; on tests of four steps the cancellation took what the allocations saved.
one_allocation_tests=(t_mppr t_order_sequential t_layouts_threads_and_more t_preview_is_srun t_slurm_own_placement)
one_allocation() { # TEST
    local t=$1 rc
    # A guest that is gone fails the tests left at once; vmnode/vm.sh test says why after them.
    "$vm" running || { fail "the guest's QEMU is gone"; return 1; }
    [[ " ${one_allocation_tests[*]} " == *" $t "* ]] || { "$t"; return; }
    whole_job=$(as_user timeout 300 salloc -N1 --exclusive --no-shell 2>&1 | sed -n 's/.*Granted job allocation \([0-9][0-9]*\).*/\1/p')
    [ -n "$whole_job" ] || { fail "salloc -N1 --exclusive --no-shell granted no job"; return 1; }
    "$t"
    rc=$?
    release "$whole_job" || rc=1
    whole_job=
    return $rc
}
run_test_with=one_allocation

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
    on_guest dpkg-query -W spank-lama > /dev/null || fail "the plugin's package is not installed in the guest" || return 1
    assert_eq "the guest's Slurm release (LAMA_SLURM)" "$flavour" "$(on_guest slurmd -V | awk '{ print $2 }' | cut -d. -f1-2)"
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
    # And the topology the steps read is the machine's: the plugin's cached machine text
    # (written with its XML when slurmd starts) gives the same placement of all 16 PUs as the
    # topology discovered just now. 26.05 writes no cache of its own.
    if [ "$flavour" != 24.11 ]; then
        on_guest test ! -e "$spool/hwloc_topo_whole.xml" || fail "Slurm $flavour wrote $spool/hwloc_topo_whole.xml" || return 1
    fi
    on_guest grep -qF "lama: topology cached in $spool/lama_topology.xml (" /var/log/slurm/slurmd.log \
        || fail "slurmd's log does not show the plugin caching the topology: $(on_guest grep 'lama: topology' /var/log/slurm/slurmd.log | tail -n 2)" || return 1
    on_guest cat "$topology_file" > "$work/cached.machine" || fail "no cached machine text $topology_file" || return 1
    local live cached
    live=$("$lama" map --topology "$work/vmnode.xml" --np 16 --map Nscbnh --json | jq -ce '.processes | select(length == 16)') \
        || fail "lama map on the discovered topology failed" || return 1
    cached=$("$lama" map --topology "$work/cached.machine" --np 16 --map Nscbnh --json | jq -ce '.processes | select(length == 16)') \
        || fail "lama map on the cached topology $topology_file failed" || return 1
    assert_eq "the cached topology $topology_file" "$live" "$cached" || return 1
    # and a step says it read that file.
    local task_report='echo "$SLURM_PROCID $SLURM_JOB_ID"' job
    run_whole -n1 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    job=$(awk '{ print $2 }' "$work/out")
    [[ $job =~ ^[0-9]+$ ]] || fail "the step's job id: [$job]" || return 1
    on_guest grep -qE "lama: placed 1 task\(s\) with layout scbnh .* job=$job step=0 source=$step_source " \
        /var/log/slurm/slurmd.log || fail "slurmd's log does not show job $job's step reading $step_source"
}

t_io_locality() {
    # By hand from vmnode/vm.sh's QEMU command line: an e1000e NIC behind the PCI Express
    # expander bridge bound to NUMA node 1 (CPUs 4-7), a virtio NIC and a display adapter behind
    # the one bound to node 3 (CPUs 12-15), the ssh NIC and QEMU's VGA on the root bus.
    # The kernel's view, from the bridges' ACPI proximity (the guest's firmware tables):
    local kernel
    kernel=$(on_guest sh -c 'for f in 0000:41:00.0 0000:81:00.0 0000:82:00.0; do echo "$(cat /sys/bus/pci/devices/$f/numa_node):$(cat /sys/bus/pci/devices/$f/local_cpulist)"; done' | tr '\n' ' ')
    assert_eq "the kernel's NUMA node and CPUs of 41:00.0, 81:00.0, 82:00.0" "1:4-7 3:12-15 3:12-15 " "$kernel" || return 1
    # hwloc's, through lama on the live guest: each NIC near the die (one NUMA node, one L3) of
    # its bridge, the ssh NIC near the whole machine; the display adapters are no GPU.
    local devices
    devices=$(on_guest lama map --topology host -n1 --map scbnh --json \
        | jq -c '[.devices[] | [.bus_id, .kind, .near, (.cpus | map(tostring) | join(","))]]') \
        || fail "lama map on the live guest failed" || return 1
    assert_eq "devices seen by hwloc" '[["0000:00:05.0","nic","Machine L#0","0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"],["0000:41:00.0","nic","Die L#1","4,5,6,7"],["0000:81:00.0","nic","Die L#3","12,13,14,15"]]' "$devices" || return 1
    # And the XML exported in the guest (t_setup) says the same on this side.
    assert_eq "devices in the exported XML" "$devices" \
        "$("$lama" map --topology "$work/vmnode.xml" -n1 --map scbnh --json | jq -c '[.devices[] | [.bus_id, .kind, .near, (.cpus | map(tostring) | join(","))]]')"
}

t_cgroup_v2() {
    assert_eq "file system at /sys/fs/cgroup" "cgroup2fs" "$(on_guest stat -fc %T /sys/fs/cgroup)" || return 1
    on_guest grep -qw cpuset /sys/fs/cgroup/cgroup.controllers || fail "no cpuset controller in cgroup.controllers" || return 1
    assert_eq "Slurm's cgroup plugin" "cgroup/v2" "$(as_user scontrol show config | awk '$1 == "CgroupPlugin" { print $3 }')" || return 1
    # Each task lives in its step's cgroup v2 tree under slurmstepd's scope, in its job's
    # directory (job_J, or on 26.05 by default the job's SLUID: job_cgroup).
    as_user srun -n1 sh -c 'echo "$SLURM_JOB_ID ${SLURM_JOB_SLUID:-}"; cat /proc/self/cgroup' > "$work/cg" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    local dir
    dir=$(job_cgroup $(head -n1 "$work/cg")) || fail "the job's cgroup directory name: $(head -n1 "$work/cg")" || return 1
    # (Debian's slurmd names the scope after the node: vmnode_slurmstepd.scope.)
    tail -n +2 "$work/cg" | grep -qxE "0::/system.slice/(vmnode_)?slurmstepd.scope/$dir/step_0/user/task_0" \
        || fail "the task's cgroup (its job's directory $dir): $(tail -n +2 "$work/cg")"
}

# check_layout MAP BIND NP [BY-HAND]: srun -n NP on the whole node with --lama-map=MAP
# --lama-bind=BIND; the tasks' CPUs must be what `lama map` predicts, what derive_layout
# derives from lscpu (for the layouts and bindings it knows) and, if given, BY-HAND.
check_layout() {
    local map=$1 bind=$2 np=$3 by_hand=${4:-}
    run_whole -n "$np" --lama-map="$map" --lama-bind="$bind" || fail "srun --lama-map=$map --lama-bind=$bind failed: $(cat "$work/err")" || return 1
    assert_eq "$map $bind, lama map" "$(predict --map "$map" --bind "$bind")" "$(actual_cpus)" || return 1
    if derive_knows "$map" "$bind"; then
        assert_eq "$map $bind, derived from lscpu" "$(derive_layout "$map" "$bind" "$np")" "$(cpus)" || return 1
    fi
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

t_aliases_as_open_mpi() {
    # The l3cache alias (L3scbnh) goes round every L3 of the node in logical order, as Open
    # MPI's --map-by l3cache, before a second core of any: L3 0-3 are cores 0-1, 2-3, 4-5,
    # 6-7 (CPUs 0-3, 4-7, 8-11, 12-15).
    check_layout l3cache 1c 8 "0-1 4-5 8-9 12-13 2-3 6-7 10-11 14-15" || return 1
    # The hwthread alias without --lama-bind binds each rank to its own thread (1h), as
    # --map-by hwthread: ranks 0 and 1 on the two threads of core 0.
    run_whole -n4 --lama-map=hwthread || fail "srun --lama-map=hwthread failed: $(cat "$work/err")" || return 1
    assert_eq "hwthread, lama map" "$(predict --map hwthread)" "$(actual_cpus)" || return 1
    assert_eq "hwthread, by hand" "0 1 2 3" "$(cpus)"
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
    # L3csbnh: the L3s of package 0 (0-3, 4-7), then its second cores: all four in package 0.
    check_layout L3csbnh 1s 4 "0-7 0-7 0-7 0-7"
}

# check_mppr MAP BIND MPPR NP BY-HAND WITHOUT: srun -n NP on the whole node with and without
# --lama-mppr=MPPR; with it the tasks' CPUs are `lama map`'s and BY-HAND, without it WITHOUT
# (by hand too), which differs: the MPPR is what moved the tasks.
check_mppr() {
    local map=$1 bind=$2 mppr=$3 np=$4 by_hand=$5 without=$6
    run_whole -n "$np" --lama-map="$map" --lama-bind="$bind" --lama-mppr="$mppr" || fail "srun --lama-mppr=$mppr failed: $(cat "$work/err")" || return 1
    assert_eq "$map $bind mppr $mppr, lama map" "$(predict --map "$map" --bind "$bind" --mppr "$mppr")" "$(actual_cpus)" || return 1
    assert_eq "$map $bind mppr $mppr, by hand" "$by_hand" "$(cpus)" || return 1
    run_whole -n "$np" --lama-map="$map" --lama-bind="$bind" || fail "srun without --lama-mppr failed: $(cat "$work/err")" || return 1
    assert_eq "$map $bind without an MPPR, by hand" "$without" "$(cpus)" || return 1
    assert_ne "$map $bind: with and without mppr $mppr" "$by_hand" "$(cpus)"
}

t_mppr() {
    # At most one process per NUMA node: csbnh skips the second core of each node (without
    # it: the first four cores).
    check_mppr csbnh 1c 1:N 4 "0-1 4-5 8-9 12-13" "0-1 2-3 4-5 6-7" || return 1
    # Two per package and one per core, on hardware threads (without: both threads of core
    # 0, then of core 1).
    check_mppr hcsbn 1h 1:c,2:s 4 "0 2 8 10" "0 1 2 3" || return 1
    # One per thread (always true) and two per package: both threads of core 0, then package
    # 1's first core (the docker cluster's old t_mppr, which could not differ on 2 CPUs).
    check_mppr hcsbn 1h 1:h,2:s 4 "0 1 8 9" "0 1 2 3"
}

t_partial_allocation() {
    # Another job holds 6 CPUs; the step's cgroup v2 cpuset is the rest of what Slurm gave it,
    # and LAMA places inside it.
    local holder held
    holder=$(hold_cpus vmnode 6) || return 1
    # The job's cgroup appears when its first step (the batch step) starts, after RUNNING.
    local held_file
    held_file="/sys/fs/cgroup/system.slice/*slurmstepd.scope/$(job_cgroup "$holder")/cpuset.cpus.effective" || return 1
    wait_for 30 on_guest sh -c "test -s $held_file"
    held=$(on_guest sh -c "cat $held_file")
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) $(cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup | sed "s|/task_[0-9]*$||")/cpuset.cpus.effective) $SLURM_JOB_ID ${SLURM_JOB_SLUID:-}"'
    # -c2: one core per task (with CR_CPU, -n4 alone gets 4 threads, two cores, where four
    # 1c bindings cannot fit without sharing).
    run_srun -n4 -c2 --lama-map=scbnh
    local rc=$?
    release "$holder" || return 1
    [ $rc -eq 0 ] || fail "srun failed: $(cat "$work/err")" || return 1
    [ -n "$held" ] || fail "no cgroup v2 cpuset for the holding job $holder" || return 1
    local step_cpus job
    step_cpus=$(awk 'NR == 1 { print $4 }' "$work/out")
    job=$(awk 'NR == 1 { print $5 }' "$work/out")
    [[ $step_cpus =~ ^[0-9][0-9,-]*$ ]] && [[ $job =~ ^[0-9]+$ ]] || fail "the step's cpuset and job: [$step_cpus] [$job]" || return 1
    [ "$(echo "$step_cpus" | expand_cpus | wc -l)" -ge 4 ] || fail "the step's cpuset $step_cpus has fewer CPUs than its 4 tasks" || return 1
    assert_eq "every task saw one step cpuset" "1" "$(awk '{ print $4 }' "$work/out" | sort -u | wc -l)" || return 1
    # The step's CPUs and the holder's are disjoint; together at most the node's 16.
    local both
    both=$(printf '%s\n' "$held" "$step_cpus" | expand_cpus | sort -n | uniq -d | paste -sd,)
    assert_empty "CPUs both in the holder's and the step's cpuset" "$both" || return 1
    assert_eq "CPUs held" "6" "$(echo "$held" | expand_cpus | wc -l)" || return 1
    assert_eq "placement" "$(predict --restrict "$step_cpus" --map scbnh --cpus-per-task 2)" "$(actual_cpus)" || return 1
    # The plugin read the step's CPUs from the cgroup v2 file, and said so.
    # (Its configured cpuset.cpus, not .effective, which holds the whole node when Slurm does
    # not constrain cores; intersected with the step's allocated cores.)
    local dir
    dir=$(job_cgroup "$job" "$(awk 'NR == 1 { print $6 }' "$work/out")") || return 1
    on_guest grep -qE "lama: step CPUs $step_cpus from cgroup v2 /sys/fs/cgroup/system.slice/(vmnode_)?slurmstepd.scope/$dir/step_0/user/cpuset.cpus \($step_cpus\) and allocated cores \($step_cpus\)" \
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
    assert_eq "pages on the preferred nodes" "2" "$(awk '($1 == 0 && $7 ~ /^[01](,[01])?$/) || ($1 == 1 && $7 ~ /^[23](,[23])?$/)' "$work/out" | wc -l)" || return 1
    # lama verify watching a program that fills 64 MiB: the policy and the pages agree with
    # each task's LAMA_MEMS; a program that drops its policy (set_mempolicy(MPOL_DEFAULT), x86-64
    # system call 238) differs.
    local fill='$x = "a" x (64 << 20); sleep 1' quiet='s/CPUs [0-9,-]* /CPUs C /; s/pages: [0-9]* on/pages: P on/; s/^lama verify: rank \([0-9]\) on [^:]*:/\1:/'
    as_user salloc -N1 --exclusive srun -n4 --lama-map=Nscbnh --lama-bind=1c --lama-membind=local lama verify -- perl -e "$fill" \
        > "$work/out" 2> "$work/err" || fail "lama verify, local: $(cat "$work/out" "$work/err")" || return 1
    assert_eq "lama verify, local" "0: agrees: 1 thread on CPUs C (1c), memory bind:0 (anonymous pages: P on 0)
1: agrees: 1 thread on CPUs C (1c), memory bind:1 (anonymous pages: P on 1)
2: agrees: 1 thread on CPUs C (1c), memory bind:2 (anonymous pages: P on 2)
3: agrees: 1 thread on CPUs C (1c), memory bind:3 (anonymous pages: P on 3)" "$(sed "$quiet" "$work/out" | sort)" || return 1
    as_user salloc -N1 --exclusive srun -n4 --lama-map=Nscbnh --lama-bind=1c --lama-membind=local lama verify -- perl -e "syscall(238, 0, 0, 0) == 0 or die; $fill" \
        > "$work/out" 2> "$work/err" && { fail "lama verify passed a program without its memory policy"; return 1; }
    assert_eq "lama verify, policy dropped" "4" "$(grep -c 'DIFFERS: the memory policy is default, not bind to LAMA_MEMS [0-3] (LAMA_MEMBIND local)' "$work/out")" \
        || fail "$(cat "$work/out" "$work/err")"
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

t_preview_is_srun() {
    # What a user previews is what srun does: `lama map` with the step's own options (no
    # --lama-bind: the default binding, widened for -c; the tasks srun gives the node) prints
    # exactly the CPUs every task got, for layouts the docker nodes' 2 CPUs cannot tell apart.
    # By hand for two of them: hcsbn fills both threads of a core before the next (1h each),
    # and -c 4 by NUMA node (Nscbnh) gives each task the two cores of one node in turn. Where
    # the step gets fewer CPUs than the node, Slurm's choice is given to the preview as the
    # user sees it in the job (--restrict): -n4 -c3 asks for 12 threads, and the step has
    # CPUs 0-11 (t_odd_cpus_per_task_on_smt), where the widened 2c falls back to 3 threads each.
    local case args map restrict
    for case in "-n16 hcsbn" "-n8 Nscbnh" "-n6 L3csbnh" "-n5 csbnh" "-n4 -c4 Nscbnh" "-n3 -c2 scbnh" "-n4 -c3 csbnh|0-11"; do
        args=${case%|*}
        restrict=; [[ "$case" != *"|"* ]] || restrict=${case#*|}
        map=${args##* }
        # shellcheck disable=SC2086
        run_whole ${args% *} --lama-map="$map" || fail "srun $args failed: $(cat "$work/err")" || return 1
        # shellcheck disable=SC2086
        assert_eq "srun $args" "$(preview --map "$map" ${restrict:+--restrict "$restrict"} $(sed 's/-c\([0-9]\)/--cpus-per-task \1/; s/-n[0-9]*//' <<< "${args% *}"))" "$(actual_cpus)" || return 1
        case $args in
            "-n16 hcsbn") assert_eq "$args by hand" "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15" "$(cpus)" || return 1 ;;
            "-n4 -c4 Nscbnh") assert_eq "$args by hand" "0-3 4-7 8-11 12-15" "$(cpus)" || return 1 ;;
            "-n4 -c3 csbnh") assert_eq "$args by hand" "0-2 3-5 6-8 9-11" "$(cpus)" || return 1 ;;
        esac
    done
}

t_slurm_own_placement() {
    # Without LAMA, `lama map` shows what Slurm itself gives each task (a pasted line without
    # --lama-map): on 2 packages of 4 two-thread cores and 4 NUMA nodes, for each line every
    # task's Cpus_allowed_list equals the preview's. By hand from task/affinity's dist_tasks.c
    # and the step manager's core pick: -n4 fills no whole unit, so no binding; 8 tasks = 8
    # cores bind to cores round the packages; 16 to threads, siblings after; -c2 makes the
    # step exact (cores 0,4,1,5 round the packages, or core by core with fcyclic); ldoms
    # binds each task's first thread's NUMA node, round the packages (0-3 8-11 0-3 8-11);
    # nomultithread skips sibling threads.
    local line
    local lines=("-n4" "-n8" "-n2" "-n16" "-n4 -c2" "-n4 --cpu-bind=ldoms"
        "-n8 -m block:block --cpu-bind=cores" "-n6 --hint=nomultithread"
        "-n4 --ntasks-per-socket=2" "-n3 --cpu-bind=map_cpu:3,5,7"
        "-n2 --cpu-bind=mask_cpu:0xf0,0xf" "-n4 -c2 -m block:fcyclic" "-n8 --threads-per-core=1"
        "-n4 --ntasks-per-core=1")
    for line in "${lines[@]}"; do
        # shellcheck disable=SC2086
        run_whole $line || fail "srun $line failed: $(cat "$work/err")" || return 1
        # shellcheck disable=SC2086
        assert_eq "srun $line (Slurm's own)" "$(preview_line $line | sed 's/vmnode://g')" "$(cpus)" || return 1
        case $line in
            -n4) assert_eq "$line by hand" "0-15 0-15 0-15 0-15" "$(cpus)" || return 1 ;;
            -n8) assert_eq "$line by hand" "0-1 8-9 2-3 10-11 4-5 12-13 6-7 14-15" "$(cpus)" || return 1 ;;
            -n16) assert_eq "$line by hand" "0 8 1 9 2 10 3 11 4 12 5 13 6 14 7 15" "$(cpus)" || return 1 ;;
            "-n4 -c2") assert_eq "$line by hand" "0-1 8-9 2-3 10-11" "$(cpus)" || return 1 ;;
            "-n4 --cpu-bind=ldoms") assert_eq "$line by hand" "0-3 8-11 0-3 8-11" "$(cpus)" || return 1 ;;
            "-n6 --hint=nomultithread") assert_eq "$line by hand" "0 8 2 10 4 12" "$(cpus)" || return 1 ;;
            "-n4 -c2 -m block:fcyclic") assert_eq "$line by hand" "0,8 1,9 2,10 3,11" "$(cpus)" || return 1 ;;
        esac
    done
}

t_daemons_still_up() {
    wait_for 60 nodes_idle || fail "the node is not idle: $(as_user sinfo -h -N -o %T)" || return 1
    if on_guest sh -c 'cat /var/log/slurm/*.log' | grep -E 'fatal|Segmentation|panicked|Caught panic' >&2; then
        fail "a daemon logged a crash"; return 1
    fi
    assert_eq "daemons" "active active active" "$(on_guest systemctl is-active munge slurmctld slurmd | paste -sd' ')"
}

. "$top/tests/vm/rows.sh"

# --- independent expectations: derived from lscpu, and written by hand -----------------------
# (Order and MPPR moved here from the docker cluster, whose 2-CPU nodes cannot tell them apart
# from the same run without the option; the hand-written table covers the main layouts with
# hardware threads and bindings wider than a core.)

# derive_layout MAP BIND NP [ORDER]: the tasks' CPUs ("0-1 8-9 ...", by rank) for --lama-map=MAP
# --lama-bind=BIND on the whole node, derived from the guest's `lscpu -p` alone, not from
# `lama map`: each CPU's coordinate in a layout level is the index of its object (socket s,
# NUMA node N, L3, core c, CPU h) among those of the enclosing coarser layout level (containment
# s > N > L3 > c > h; b and n are single objects here); the positions are the CPUs in odometer
# order (the layout's first level fastest), the binding level stepping by the binding width (a
# position whose coordinate there is not a multiple of it is not one); each of the first NP
# positions is bound to that many objects of the binding level from its own, in CPU order (a
# position with too few left is skipped); ORDER s renumbers the ranks by CPU.
# Layout levels s N L3 c h b n; bindings <width> c h N L3 s n.
derive_knows() { [[ $1 =~ ^(s|N|L3|c|h|b|n)+$ ]] && [[ $2 =~ ^[0-9]+(c|h|N|L3|s|n)$ ]]; }
derive_layout() {
    local map=$1 bind=$2 np=$3 order=${4:-n}
    derive_knows "$map" "$bind" || { fail "derive_layout: $map $bind is not derivable"; echo DERIVATION-FAILED; return 1; }
    if [ ! -s "$work/lscpu" ]; then
        on_guest lscpu -p=CPU,CORE,SOCKET,NODE,CACHE | grep -v '^#' > "$work/lscpu" \
            || { fail "lscpu in the guest failed"; echo DERIVATION-FAILED; return 1; }
    fi
    local out
    out=$(awk -F, -v map="$map" -v bind="$bind" '
        # (The caches are the last field, "L1d:L1i:L2:L3", or the last four, by util-linux version.)
        { n++; cpu[n] = $1; o["h", n] = $1; o["c", n] = $2; o["s", n] = $3; o["N", n] = $4
          nca = split($NF, ca, ":"); o["L3", n] = ca[nca]; o["b", n] = 0; o["n", n] = 0 }
        END {
            k = 0; m = map
            while (m != "") {
                t = (substr(m, 1, 2) == "L3") ? "L3" : substr(m, 1, 1)
                m = substr(m, length(t) + 1); lay[++k] = t; inlay[t] = 1
            }
            nc = split("s N L3 c h", cont, " ")
            # Coordinates within the nearest coarser layout level.
            for (l = 1; l <= k; l++) {
                x = lay[l]; p = ""
                for (q = 1; q <= nc && cont[q] != x; q++) if (inlay[cont[q]]) p = cont[q]
                for (i = 1; i <= n; i++) {
                    par = (p == "") ? "" : o[p, i]; key = x SUBSEP par SUBSEP o[x, i]
                    if (!(key in idx)) idx[key] = cnt[x, par]++
                    co[x, i] = idx[key]
                }
            }
            w = bind; sub(/[^0-9].*/, "", w); w += 0; b = substr(bind, length(w) + 1)
            # The objects of the binding level, in CPU order.
            nb = 0
            for (i = 1; i <= n; i++) if (!((b, o[b, i]) in bpos)) { bpos[b, o[b, i]] = ++nb; bobj[nb] = o[b, i] }
            for (i = 1; i <= n; i++) {
                if (inlay[b] && co[b, i] % w != 0) continue
                first = bpos[b, o[b, i]]
                if (first + w - 1 > nb) continue
                for (j = first; j < first + w; j++) want[bobj[j]] = 1
                # The bound CPUs as a kernel list.
                list = ""; s0 = -1
                for (j = 1; j <= n; j++) {
                    if (o[b, j] in want) {
                        if (s0 < 0) { s0 = cpu[j]; e = cpu[j] }
                        else if (cpu[j] == e + 1) e = cpu[j]
                        else { list = list (list == "" ? "" : ",") (s0 == e ? s0 : s0 "-" e); s0 = cpu[j]; e = cpu[j] }
                    }
                }
                list = list (list == "" ? "" : ",") (s0 == e ? s0 : s0 "-" e)
                delete want
                key = ""
                for (l = k; l >= 1; l--) key = key sprintf("%04d", co[lay[l], i])
                print key, cpu[i], list
            }
        }' "$work/lscpu" | sort | head -n "$np")
    [ "$(echo "$out" | grep -c .)" -eq "$np" ] || { fail "derive_layout: $map $bind has fewer than $np positions"; echo DERIVATION-FAILED; return 1; }
    [ "$order" == s ] && out=$(echo "$out" | sort -n -k2)
    echo "$out" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $3 }'
}

t_order_sequential() {
    # --lama-order=s numbers the ranks in hardware order: scbnh's positions alternate packages
    # (0-1 8-9 2-3 ...), sequential order numbers them by CPU instead.
    local natural="0-1 8-9 2-3 10-11 4-5 12-13 6-7 14-15" sequential="0-1 2-3 4-5 6-7 8-9 10-11 12-13 14-15"
    run_whole -n8 --lama-map=scbnh --lama-bind=1c --lama-order=s || fail "srun --lama-order=s failed: $(cat "$work/err")" || return 1
    assert_eq "order s, lama map" "$(predict --map scbnh --bind 1c --order s)" "$(actual_cpus)" || return 1
    assert_eq "order s, derived from lscpu" "$(derive_layout scbnh 1c 8 s)" "$(cpus)" || return 1
    assert_eq "order s, by hand" "$sequential" "$(cpus)" || return 1
    run_whole -n8 --lama-map=scbnh --lama-bind=1c || fail "srun without --lama-order failed: $(cat "$work/err")" || return 1
    assert_eq "natural order, by hand" "$natural" "$(cpus)" || return 1
    assert_ne "with and without --lama-order=s" "$sequential" "$(cpus)" || return 1
    # On hardware threads, the whole node: Nscbnh 1h goes round the NUMA nodes (0 4 8 12),
    # sequential order is CPU order; --lama-order=n is the natural order.
    run_whole -n16 --lama-map=Nscbnh --lama-bind=1h --lama-order=s || fail "srun --lama-order=s failed: $(cat "$work/err")" || return 1
    assert_eq "Nscbnh 1h order s, lama map" "$(predict --map Nscbnh --bind 1h --order s)" "$(actual_cpus)" || return 1
    assert_eq "Nscbnh 1h order s, by hand" "$(seq -s ' ' 0 15)" "$(cpus)" || return 1
    run_whole -n16 --lama-map=Nscbnh --lama-bind=1h --lama-order=n || fail "srun --lama-order=n failed: $(cat "$work/err")" || return 1
    assert_eq "Nscbnh 1h order n, by hand" "0 4 8 12 2 6 10 14 1 5 9 13 3 7 11 15" "$(cpus)"
}

# The hand-written table: MAP BIND NP and the tasks' CPUs by rank. The guest's numbering
# (asserted by t_real_topology from lscpu): CPU = 2 x core + thread; core = 4 x package + 2 x
# (NUMA node in its package) + (core in its NUMA node); one L3 per NUMA node. In a layout the
# first level varies fastest; the binding level steps by the binding width.
layouts_by_hand='
# 1h, all 16 CPUs: packages alternate, cores 0-3 of each, then every second thread.
scbnh   1h 16 0 8 2 10 4 12 6 14 1 9 3 11 5 13 7 15
# csbnh: package 0s cores, package 1s, then the second threads.
csbnh   1h 16 0 2 4 6 8 10 12 14 1 3 5 7 9 11 13 15
# Nscbnh: NUMA nodes of a package alternate (cores 0, 2), packages next, then cores 1, 3.
Nscbnh  1h 16 0 4 8 12 2 6 10 14 1 5 9 13 3 7 11 15
# L3csbnh: the two L3s of package 0 (cores 0, 2), its cores 1, 3, package 1 the same.
L3csbnh 1h 16 0 4 2 6 8 12 10 14 1 5 3 7 9 13 11 15
# h first: both threads of a core before the next core; hscbn alternates packages per core.
hcsbn   1h 8  0 1 2 3 4 5 6 7
hscbn   1h 8  0 1 8 9 2 3 10 11
# h, then NUMA nodes: both threads of core 0, of core 2 (NUMA 1), of cores 4 and 6 (package 1).
hNscbn  1h 8  0 1 4 5 8 9 12 13
# 2h is one core: csbnh with a two-thread binding is csbnh 1c.
csbnh   2h 8  0-1 2-3 4-5 6-7 8-9 10-11 12-13 14-15
# 1N, 8 tasks: Nscbnh goes round the four NUMA nodes twice; L3csbnh round the L3s (= NUMA).
Nscbnh  1N 8  0-3 4-7 8-11 12-15 0-3 4-7 8-11 12-15
L3csbnh 1N 8  0-3 4-7 0-3 4-7 8-11 12-15 8-11 12-15
# 1L3 and 2N (two NUMA nodes = a package from a node of package 0 or 1, Nscbnh stepping N by 2).
L3csbnh 1L3 4 0-3 4-7 0-3 4-7
Nscbnh  2N 4  0-7 8-15 0-7 8-15
# 1s, 8 tasks of scbnh: packages alternate.
scbnh   1s 8  0-7 8-15 0-7 8-15 0-7 8-15 0-7 8-15
# 4c: a package per task, csbnh stepping c by 4 (then the second threads).
csbnh   4c 4  0-7 8-15 0-7 8-15
# 1n: the whole node.
scbnh   1n 2  0-15 0-15
'

t_layouts_threads_and_more() {
    # Each row of layouts_by_hand: the run against `lama map`, the derivation from lscpu and
    # the row (check_layout does all three).
    # (The table comes in on fd 3: ssh, under check_layout, reads stdin.)
    local map bind np hand rows=0
    while read -r map bind np hand <&3; do
        [ -z "$map" ] || [ "${map:0:1}" == "#" ] && continue
        check_layout "$map" "$bind" "$np" "$hand" || return 1
        rows=$((rows + 1))
    done 3<<< "$layouts_by_hand"
    assert_eq "rows checked" "15" "$rows"
}

# --- real MPI programs ---------------------------------------------------------------------

# The MPI test program (tests/mpi/mpitest.c), built with Open MPI and with MPICH in the docker
# node image of the same Debian suite and copied in by vmnode/vm.sh up.
mpi_bin=/opt/lama-tests

# guest_mpi LIB SRUN-ARGS... [-- PROGRAM-ARGS...]: srun --mpi=pmix (Open MPI) or pmi2 (MPICH)
# in an exclusive allocation of the node; the rank report sorted in $work/out, rank 0's halo
# summary in $work/extra. Fails unless srun succeeded and each rank 0..N-1 reported once.
guest_mpi() {
    local lib=$1 type=pmi2 args=() prog=(report)
    shift
    [ "$lib" != ompi ] || type=pmix
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    if [ "${1:-}" == -- ]; then shift; prog=("$@"); fi
    as_user timeout 300 salloc -N1 --exclusive srun --mpi="$type" "${args[@]}" "$mpi_bin/mpitest-$lib" "${prog[@]}" \
        > "$work/all" 2> "$work/err"
    local rc=$?
    grep -E '^[0-9]+ ' "$work/all" | sort -n > "$work/out"
    grep -vE '^[0-9]+ ' "$work/all" > "$work/extra"
    [ $rc -eq 0 ] || { fail "srun --mpi=$type ${args[*]} failed ($rc): $(tail -n 5 "$work/err")"; return 1; }
    report_complete "$(ntasks_of "${args[@]}")" || return 1
    # MPI_Comm_rank = SLURM_PROCID, the program is LIB's build.
    local n; n=$(ntasks_of "${args[@]}")
    assert_eq "$lib: MPI_Comm_rank = SLURM_PROCID" "$(seq 0 $((n - 1)) | paste -sd' ')" "$(report_field 5)" || return 1
    assert_eq "$lib: library" "$(yes "$lib" | head -n "$n" | paste -sd' ')" "$(report_field 7)"
}

# mpi_layouts LIB: layouts that 2-CPU docker nodes cannot tell apart, with a halo exchange
# over a 2 x 2 grid: each MPI process's own mask (sched_getaffinity) is LAMA's, by hand and as
# lama map predicts; the library did not re-bind it; without --lama-* the masks differ.
mpi_layouts() {
    local lib=$1 map bind hand
    while read -r map bind hand; do
        guest_mpi "$lib" -n4 --lama-map="$map" --lama-bind="$bind" -- report halo 65536 3 || return 1
        assert_eq "$lib $map $bind: by hand" "$hand" "$(cpus)" || return 1
        assert_eq "$lib $map $bind: lama map" "$(predict --map "$map" --bind "$bind")" "$(actual_cpus)" || return 1
        assert_eq "$lib $map $bind: LAMA_CPUS" "$(report_field 3)" "$(report_field 4)" || return 1
        assert_eq "$lib $map $bind: halo" "ranks=4 grid=2x2 errors=0" \
            "$(grep '^halo ' "$work/extra" | grep -oE '(ranks|grid|errors)=[^ ]+' | paste -sd' ')" || return 1
    done <<'EOF_LAYOUTS'
scbnh 1c 0-1 8-9 2-3 10-11
Nscbnh 1N 0-3 4-7 8-11 12-15
L3csbnh 2c 0-3 4-7 8-11 12-15
EOF_LAYOUTS
    local with; with=$(cpus)
    guest_mpi "$lib" -n4 -- report || return 1
    assert_ne "$lib without --lama-*: masks" "$with" "$(cpus)" || return 1
    assert_eq "$lib without --lama-*: LAMA_CPUS" "unset unset unset unset" "$(report_field 4)"
}
t_mpi_layouts_mpich() { mpi_layouts mpich; }
t_mpi_layouts_ompi() { mpi_layouts ompi; }

# lama exec: one LAMA command line, the same placement under Open MPI's mpirun and MPICH's
# mpiexec started by the test user with no Slurm step involved, and under the plugin with
# srun: each rank's mask read by the MPI program after MPI_Init. By hand, Nscbnh 1c over 8
# ranks deals the four NUMA nodes' first cores (0-1, 4-5, 8-9, 12-13), then their second ones.
t_lama_exec_mpis() {
    local hand="0-1 4-5 8-9 12-13 2-3 6-7 10-11 14-15" lib
    guest_mpi mpich -n8 --lama-map=Nscbnh || return 1
    assert_eq "the plugin, Nscbnh: by hand" "$hand" "$(cpus)" || return 1
    assert_eq "the plugin, Nscbnh: derived from lscpu" "$(derive_layout Nscbnh 1c 8)" "$(cpus)" || return 1
    # Intel MPI (vm.sh up copies impi-rt's run time to /opt/impi): its hydra, and its library in
    # place of MPICH's (ABI-compatible), which says so at I_MPI_DEBUG=4. Its hydra pins each rank
    # at launch (I_MPI_PIN, on by default); lama exec places among the cgroup's CPUs instead and
    # sets I_MPI_PIN=0 for MPI_Init.
    local impi=(env LD_LIBRARY_PATH=/opt/impi/lib FI_PROVIDER_PATH=/opt/impi/lib/prov I_MPI_FABRICS=shm
        I_MPI_DEBUG=4 /opt/impi/bin/mpiexec.hydra -n 8)
    for lib in ompi mpich impi; do
        local run=(mpirun -np 8) prog=$lib
        [ "$lib" == mpich ] && run=(mpiexec.mpich -n 8)
        [ "$lib" == impi ] && run=("${impi[@]}") prog=mpich
        as_user timeout 300 "${run[@]}" lama exec --map Nscbnh -- "$mpi_bin/mpitest-$prog" report \
            > "$work/all" 2> "$work/err" || { fail "$lib: ${run[*]} lama exec failed: $(tail -n 5 "$work/err")"; return 1; }
        grep -E '^[0-9]+ ' "$work/all" | sort -n > "$work/out"
        report_complete 8 || return 1
        assert_eq "$lib: size, library" "$(yes "8 $prog" | head -n 8 | paste -sd' ')" \
            "$(awk '{ printf "%s%s %s", (NR > 1 ? " " : ""), $6, $7 }' "$work/out")" || return 1
        if [ "$lib" == impi ]; then
            grep -q 'MPI startup(): Intel(R) MPI Library' "$work/all" "$work/err" \
                || { fail "impi: Intel MPI's library did not start the ranks: $(head -n 3 "$work/all" "$work/err")"; return 1; }
        fi
        assert_eq "$lib: lama exec, after MPI_Init: by hand" "$hand" "$(cpus)" || return 1
        assert_eq "$lib: lama exec: LAMA_CPUS" "$(report_field 3)" "$(report_field 4)" || return 1
    done
    # The same placement as an Open MPI rankfile (lama map --emit rankfile: logical cores),
    # bound by mpirun itself, with no lama exec: the same masks.
    "$lama" map --topology "$work/vmnode.xml" -n 8 --map Nscbnh --node-names vmnode --emit rankfile \
        > "$work/rankfile" || { fail "lama map --emit rankfile failed"; return 1; }
    as_user bash -c 'printf "%s\n" "$1" > /tmp/lama.rankfile' _ "$(cat "$work/rankfile")" || return 1
    as_user timeout 300 mpirun -np 8 --map-by rankfile:file=/tmp/lama.rankfile "$mpi_bin/mpitest-ompi" report \
        > "$work/all" 2> "$work/err" || { fail "mpirun with the rankfile failed: $(tail -n 5 "$work/err")"; return 1; }
    grep -E '^[0-9]+ ' "$work/all" | sort -n > "$work/out"
    report_complete 8 || return 1
    assert_eq "mpirun --map-by rankfile:file= (lama map --emit rankfile), after MPI_Init: by hand" "$hand" "$(cpus)"
}

# Hybrid: 2 ranks of 4 threads (-c4 --lama-omp, OMP_NUM_THREADS=4), round the packages: each
# rank holds two cores of its package, and each thread runs on one hardware thread of them.
t_mpi_hybrid_mpich() {
    guest_mpi mpich -n2 -c4 --lama-map=scbnh --lama-omp || return 1
    assert_eq "hybrid: LAMA_CPUS by hand" "0-3 8-11" "$(report_field 4)" || return 1
    assert_eq "hybrid: LAMA_CPUS against lama map" "$(predict --map scbnh --cpus-per-task 4 | sed 's/vmnode://g')" "$(report_field 4)" || return 1
    assert_eq "hybrid: threads (CPU/mask) by hand" "0/0|1/1|2/2|3/3 8/8|9/9|10/10|11/11" "$(report_field 8)"
}

# The layouts, bindings and MPI placements that only the plugin's engine decides (the same code
# under both releases: Slurm gives the step the whole node either way) run on the 24.11 guest
# only; the 26.05 guest runs what reads Slurm (its cgroup layout, its topology file, its
# rows, the tasks srun gives the node: t_preview_is_srun) and one layout test,
# t_layouts_core_binding: 19 tests instead of 29, which keeps CI inside its time on a slow
# machine (docs/testing.md).
engine_layouts=(t_aliases_as_open_mpi t_layouts_two_cores t_layouts_numa_binding t_layouts_package_binding
    t_die_level t_mppr t_order_sequential t_layouts_threads_and_more t_mpi_layouts_mpich t_mpi_hybrid_mpich)
all_tests=(t_setup t_real_topology t_io_locality t_cgroup_v2 t_layouts_core_binding t_partial_allocation t_membind
    t_cpus_per_task t_row_steps_smaller_than_the_job t_row_v2_unconstrained t_row_v2_affinity_only
    t_row_broken_plugin_line t_cache_levels_on_slurms_topology t_odd_cpus_per_task_on_smt
    t_row_core_spec_without_slurms_xml t_row_v2_constrained_gpus t_preview_is_srun t_slurm_own_placement)
# Open MPI direct launch needs Slurm's mpi/pmix (none in Debian sid's 26.05: docker/README.md).
# The launchers of t_lama_exec_mpis start their ranks without Slurm, so it runs on one guest
# only, the 26.05 one, which runs after the docker suites, on a quieter machine (the docker
# clusters run t_lama_exec_launchers under both releases).
if [ "$flavour" == 24.11 ]; then all_tests+=("${engine_layouts[@]}" t_mpi_layouts_ompi); else all_tests+=(t_lama_exec_mpis); fi
all_tests+=(t_daemons_still_up)
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${all_tests[@]}")
[ "${selected[0]}" == t_setup ] || selected=(t_setup "${selected[@]}")
run_tests vm "${selected[@]}"
