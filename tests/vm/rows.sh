# shellcheck shell=bash
# Site configurations on the QEMU test node (sourced by tests/vm/run.sh): each row changes
# Slurm's configuration in the guest, restarts the daemons, checks what a site would see, and
# puts the configuration back however the test ends. Each names the finding it guards.

# The configuration files as vmnode/vm.sh wrote them, kept once.
save_config() {
    on_guest sh -c 'for f in slurm.conf cgroup.conf plugstack.conf.d/lama.conf; do
        [ -e /etc/slurm/$f.orig ] || cp -p /etc/slurm/$f /etc/slurm/$f.orig; done'
}

# Restarts slurmctld and slurmd and waits for the node to be idle.
restart_slurm() {
    on_guest systemctl restart slurmctld slurmd || fail "restarting Slurm failed" || return 1
    wait_for 90 nodes_idle || fail "the node is not idle after the restart: $(as_user sinfo -h -N -o %T); $(on_guest tail -n 5 /var/log/slurm/slurmd.log)"
}

# Puts back the configuration vm.sh wrote and restarts Slurm with it.
restore_config() {
    on_guest sh -c 'for f in slurm.conf cgroup.conf plugstack.conf.d/lama.conf; do
        cp -p /etc/slurm/$f.orig /etc/slurm/$f; done' || fail "restoring the configuration failed" || return 1
    restart_slurm
}

# with_config 'SED-ON-slurm.conf' 'SED-ON-cgroup.conf' TEST-BODY ['SED-ON-lama.conf']: runs
# TEST-BODY (a function) under the changed configuration, then restores it. Fails if the body
# fails.
with_config() {
    local slurm_sed=$1 cgroup_sed=$2 body=$3 lama_sed=${4:-s/^x//} rc
    save_config || return 1
    on_guest sed -i "$slurm_sed" /etc/slurm/slurm.conf || return 1
    on_guest sed -i "$cgroup_sed" /etc/slurm/cgroup.conf || return 1
    on_guest sed -i "$lama_sed" /etc/slurm/plugstack.conf.d/lama.conf || return 1
    restart_slurm || { restore_config; return 1; }
    "$body"
    rc=$?
    restore_config || return 1
    return $rc
}

# The CPUs Slurm allocated to job $1 on the node (scontrol's CPU_IDs=, an OS CPU list on this
# node, whose CPU numbers are OS indexes).
job_cpu_ids() {
    as_user scontrol show job -d "$1" | grep -oE 'CPU_IDs=[0-9,-]+' | head -n1 | cut -d= -f2
}

# A job holds 8 CPUs; a LAMA step of 4 tasks of 2 CPUs (one core each) must be bound only to
# CPUs that are not the holder's (Slurm confines nothing, so only the plugin's reading of the
# step's CPUs keeps the tasks off the other job). Before the fix the plugin read user/cpuset.cpus.effective (the whole
# node) and bound the tasks to CPUs 0-7, the holder's.
beside_the_holder() {
    local holder held
    holder=$(hold_cpus vmnode 8) || return 1
    held=$(job_cpu_ids "$holder")
    run_srun -n4 -c2 --lama-map=scbnh
    local rc=$?
    release "$holder" || return 1
    [ $rc -eq 0 ] || fail "srun failed: $(cat "$work/err")" || return 1
    [ -n "$held" ] || fail "no CPU_IDs for the holding job $holder" || return 1
    assert_eq "CPUs held" "8" "$(echo "$held" | expand_cpus | wc -l)" || return 1
    assert_eq "tasks" "4" "$(wc -l < "$work/out")" || return 1
    local tasks both
    tasks=$(report_field 3 | tr ' ' '\n' | expand_cpus | sort -n)
    [ -n "$tasks" ] || fail "the tasks reported no CPUs" || return 1
    both=$( (echo "$held" | expand_cpus; echo "$tasks" | sort -un) | sort -n | uniq -d | paste -sd,)
    assert_empty "CPUs of LAMA tasks that are the holder's ($held)" "$both" || return 1
    # Four tasks, one core each, on the 8 free CPUs: four disjoint bindings of two CPUs.
    assert_eq "CPUs bound, all distinct" "8 8" "$(echo "$tasks" | wc -l) $(echo "$tasks" | sort -u | wc -l)"
}

t_row_v2_unconstrained() {
    # Finding: cgroup v2 with ConstrainCores=no. The controller is enabled down the tree, so
    # the step's user/cpuset.cpus.effective exists and holds the whole node.
    with_config 's/^x//' 's/^ConstrainCores=yes/ConstrainCores=no/' beside_the_holder || return 1
    on_guest grep -qE "lama: step CPUs [0-9,-]+ from allocated cores \([0-9,-]+\); no step cpuset: .*user/cpuset.cpus is empty" \
        /var/log/slurm/slurmd.log || fail "slurmd's log does not say the unconstrained cgroup was not trusted"
}

t_row_v2_affinity_only() {
    # Finding: cgroup v2 with TaskPlugin=task/affinity alone (proctrack/cgroup still makes the
    # step's cgroup, with the cpuset controller and the whole node in .effective).
    with_config 's|^TaskPlugin=.*|TaskPlugin=task/affinity|' 's/^x//' beside_the_holder
}

t_row_steps_smaller_than_the_job() {
    # Finding: -c's unit came from the job's CPUs, but a step smaller than its job is common
    # (salloc --exclusive, then several srun -c). The step of -n2 -c4 gets 8 threads (two cores
    # of each package with scbnh's order... as Slurm chooses: 0-3,8-11 on this node); each task
    # must get 4 threads (two cores), not all 8.
    local srun_prefix=(salloc -N1 --exclusive)
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) $(cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup | sed "s|/task_[0-9]*$||")/cpuset.cpus)"'
    run_srun -n2 -c4 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "tasks" "2" "$(wc -l < "$work/out")" || return 1
    local step
    step=$(awk 'NR == 1 { print $4 }' "$work/out")
    assert_eq "the step's 8 CPUs" "8" "$(echo "$step" | expand_cpus | wc -l)" || return 1
    local t
    for t in $(report_field 3); do
        assert_eq "CPUs of a task ($t)" "4" "$(echo "$t" | expand_cpus | wc -l)" || return 1
    done
    assert_eq "the tasks' CPUs are disjoint and cover the step" "$(echo "$step" | expand_cpus | sort -n | paste -sd,)" \
        "$(report_field 3 | tr ' ' '\n' | expand_cpus | sort -n | paste -sd,)" || return 1
    assert_eq "lama map" "$(predict --restrict "$step" --map scbnh --cpus-per-task 4)" "$(actual_cpus)"
}

t_row_broken_plugin_line() {
    # Finding: an error from the plugin's init in slurmd's context stopped slurmd (and, after a
    # restart, took the node down). Now slurmd logs it and stays up; steps fail with the reason.
    save_config || return 1
    on_guest sed -i 's|^required \(.*spank_lama.so\).*|required \1 topology_cache=cache.xml|' \
        /etc/slurm/plugstack.conf.d/lama.conf || return 1
    on_guest grep -q 'topology_cache=cache.xml' /etc/slurm/plugstack.conf.d/lama.conf || fail "the broken line was not written" || return 1
    # Only slurmd: srun on this host reads the same line and refuses before launch otherwise.
    on_guest systemctl restart slurmd
    local state ok=0
    sleep 5
    state=$(on_guest systemctl is-active slurmd)
    if [ "$state" != active ]; then
        fail "slurmd is $state after a restart with a broken plugin line: $(on_guest tail -n 5 /var/log/slurm/slurmd.log)"
    elif ! on_guest grep -qE 'topology_cache.*expected an absolute path.*slurmd goes on' /var/log/slurm/slurmd.log; then
        fail "slurmd's log does not explain the broken line: $(on_guest grep lama /var/log/slurm/slurmd.log | tail -n 3)"
    elif ! wait_for 60 nodes_idle; then
        fail "the node is $(as_user sinfo -h -N -o %T), not idle"
    else
        ok=1
    fi
    restore_config || return 1
    [ $ok -eq 1 ]
}

# --- findings on the guest's own configuration ---------------------------------------------

t_cache_levels_on_slurms_topology() {
    # Finding: Slurm 24.11's cached hwloc_topo_whole.xml (read first) keeps L3 but no L2 or L1,
    # so a step asking for an L2 binding failed every task ("no available PU has 1 L2
    # cache(s)"), while lama map on the guest's own lstopo XML placed it. A source lacking a
    # level the step asks for is skipped. (Each core has its own L2 here: 1L2 is one core.)
    run_whole -n8 --lama-map=L3csbnh --lama-bind=1L2 || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "by hand" "0-1 4-5 2-3 6-7 8-9 12-13 10-11 14-15" "$(cpus)" || return 1
    assert_eq "lama map" "$(predict --map L3csbnh --bind 1L2)" "$(actual_cpus)"
}

t_odd_cpus_per_task_on_smt() {
    # Finding: -c 3 on two threads per core. The step has 12 CPUs (0-11); the default binding
    # widened to two cores (4 CPUs) does not fit 4 tasks, and tasks 0 and 3 were both bound to
    # 0-3. Tasks must never share a CPU they did not ask to share.
    local srun_prefix=(salloc -N1 --exclusive)
    run_srun -n4 -c3 --lama-map=csbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "tasks" "4" "$(wc -l < "$work/out")" || return 1
    local all
    all=$(report_field 3 | tr ' ' '\n' | expand_cpus | sort -n)
    [ -n "$all" ] || fail "the tasks reported no CPUs" || return 1
    local shared
    shared=$(echo "$all" | uniq -d | paste -sd,)
    [ -z "$shared" ] || fail "tasks share CPUs $shared: $(report_field 3)" || return 1
    local t
    for t in $(report_field 3); do
        [ "$(echo "$t" | expand_cpus | wc -l)" -ge 3 ] || fail "a task has fewer than the 3 CPUs -c asked for: $t" || return 1
    done
}

t_row_core_spec_without_slurms_xml() {
    # Finding: core specialisation (CoreSpecCount=2, no SlurmdOffSpec: Slurm's default) with
    # the plugin's own topology cache, as on Slurm 25.05 and later, which no longer write
    # hwloc_topo_whole.xml (removed here after slurmd's start). The cache is written by slurmd,
    # confined to the specialised cores at that moment; a topology read from a file carried
    # that allowed set, and every step saw no usable CPU. Only the step's CPUs may restrict.
    # (Slurm 24.11's slurmstepd writes hwloc_topo_whole.xml again when it is missing, so the
    # plugin is pointed past it with slurm_xml=, as the source order on 25.05+ is.)
    with_config 's/^\(NodeName=vmnode .*\)$/\1 CoreSpecCount=2/' 's/^x//' core_spec_steps \
        's|^\(required .*spank_lama.so\)\(.*\)$|\1\2 slurm_xml=/var/lib/slurm/slurmd/absent.xml|'
}

core_spec_steps() {
    local spec
    spec=$(as_user scontrol show node vmnode | grep -oE 'CPUSpecList=[0-9,-]+' | cut -d= -f2)
    [ -n "$spec" ] || fail "no CPUSpecList for CoreSpecCount=2: $(as_user scontrol show node vmnode | grep -i spec)" || return 1
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) $(cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup | sed "s|/task_[0-9]*$||")/cpuset.cpus) $SLURM_JOB_ID"'
    run_whole -n4 -c2 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "tasks" "4" "$(wc -l < "$work/out")" || return 1
    local step job
    step=$(awk 'NR == 1 { print $4 }' "$work/out")
    job=$(awk 'NR == 1 { print $5 }' "$work/out")
    local in_spec
    in_spec=$( (echo "$spec" | expand_cpus; report_field 3 | tr ' ' '\n' | expand_cpus | sort -un) | sort -n | uniq -d | paste -sd,)
    [ -z "$in_spec" ] || fail "tasks bound to specialised CPUs $in_spec ($spec)" || return 1
    assert_eq "placement" "$(predict --restrict "$step" --map scbnh --cpus-per-task 2)" "$(actual_cpus)" || return 1
    on_guest grep -qE "lama: placed 4 task\(s\) .* job=$job step=0 source=LAMA's cached " /var/log/slurm/slurmd.log \
        || fail "the step did not read LAMA's topology cache: $(on_guest grep "job=$job" /var/log/slurm/slurmd.log | tail -n 2)"
}

# The guest's topology with two GPUs (for the plugin's topology= file): by hand, the PCI
# devices at 41:00.0 (behind the expander bridge of NUMA node 1, CPUs 4-7) and 82:00.0 (NUMA
# node 3, CPUs 12-15) made NVIDIA 3D controllers, their OS devices left out (a GPU by class).
gpu_topology() {
    python3 - "$work/vmnode.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
tree = ET.parse(sys.argv[1])
made = 0
for o in tree.iter("object"):
    if o.get("type") == "PCIDev" and o.get("pci_busid") in ("0000:41:00.0", "0000:82:00.0"):
        o.set("pci_type", "0302 [10de:1eb8] [10de:12a2] a1")
        for child in list(o):
            if child.tag == "object":
                o.remove(child)
        made += 1
assert made == 2, made
sys.stdout.write(ET.tostring(tree.getroot(), encoding="unicode"))
PY
}

# GPUs under ConstrainDevices=yes on cgroup v2: two fake GRES GPUs (/dev/nvidia0 for the card
# at 41:00.0, /dev/nvidia1 for 82:00.0, with NVIDIA's driver files giving their minors), gres.conf
# Cores= their sockets (Slurm refuses Cores= that do not match socket boundaries; CPUs 0-7 are
# cores 0-3), the plugin given the topology
# above. Slurm's devices controller on cgroup v2 is a BPF program: each task may open only
# its own GPU, numbered 0 in its environment, and learns which by access(2).
gpus_constrained_v2() {
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${LAMA_GPUS-unset} ${SLURM_STEP_GPUS-unset} ${CUDA_VISIBLE_DEVICES-unset} $(for g in 0 1; do (: < /dev/nvidia$g) 2>&1 | grep -q "not permitted" && printf d || printf o; done)"'
    local rc=0
    # Slurm alone: task/affinity binds task 0 to CPU 12 (GPU 1's cores), task 1 to CPU 4.
    as_user srun -n2 -c8 --gpus-per-task=1 --cpu-bind=map_cpu:12,4 bash -c "$task_report" > "$work/out" 2> "$work/err" \
        || fail "srun without LAMA failed: $(cat "$work/err")" || rc=1
    sort -n -o "$work/out" "$work/out"
    [ $rc -ne 0 ] || assert_eq "Slurm alone: GPU, numbers, what each task may open" "unset 0 0 do unset 0 0 od" \
        "$(awk '{ printf "%s%s %s %s %s", (NR > 1 ? " " : ""), $4, $5, $6, $7 }' "$work/out")" || rc=1
    # With LAMA, g and a layout without g: each task beside the GPU it may open (by hand: GPU 1
    # near CPUs 12-15, GPU 0 near 4-7; -c 8 is more than those four, so each task runs on the
    # package holding its GPU's CPUs: 8-15 and 0-7).
    local map
    for map in gcsbnh csbnh; do
        [ $rc -eq 0 ] || break
        run_srun -n2 -c8 --gpus-per-task=1 --cpu-bind=map_cpu:12,4 --lama-map=$map \
            || { fail "srun --lama-map=$map failed: $(cat "$work/err")"; rc=1; break; }
        assert_eq "$map: CPUs, LAMA_GPUS, SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES, devices" \
            "8-15 1 0 0 do|0-7 0 0 0 od" \
            "$(awk '{ printf "%s%s %s %s %s %s", (NR > 1 ? "|" : ""), $3, $4, $5, $6, $7 }' "$work/out")" || rc=1
    done
    on_guest rm -f /etc/slurm/gres.conf
    return $rc
}

t_row_v2_constrained_gpus() {
    [ -s "$work/vmnode.xml" ] || fail "no guest topology (t_setup)" || return 1
    gpu_topology > "$work/vmnode-gpus.xml" || fail "the GPU topology could not be made" || return 1
    on_guest sh -c 'cat > /etc/slurm/vmnode-gpus.xml' < "$work/vmnode-gpus.xml" || return 1
    on_guest sh -c '
        for g in 0 1; do [ -e /dev/nvidia$g ] || mknod -m 0666 /dev/nvidia$g c 195 $g; done
        mountpoint -q /proc/driver || mount -t tmpfs -o mode=0755 nvidia-driver /proc/driver
        for card in 0:0000:41:00.0 1:0000:82:00.0; do
            minor=${card%%:*} bus=${card#*:}
            mkdir -p /proc/driver/nvidia/gpus/$bus
            printf "Model: \t\t fake\nDevice Minor: \t %s\nBus Location: \t %s\n" $minor $bus > /proc/driver/nvidia/gpus/$bus/information
        done
        printf "AutoDetect=off\nName=gpu File=/dev/nvidia0 Cores=0-3\nName=gpu File=/dev/nvidia1 Cores=4-7\n" > /etc/slurm/gres.conf' \
        || fail "the fake GPUs could not be made" || return 1
    local rc=0
    with_config 's/^\(NodeName=vmnode .*\)$/\1 Gres=gpu:2/;$aGresTypes=gpu' 's/^ConstrainDevices=no/ConstrainDevices=yes/' \
        gpus_constrained_v2 's|spank_lama.so|& topology=/etc/slurm/vmnode-gpus.xml|' || rc=1
    # A GRES configuration slurmctld refused leaves the node drained: the next tests need it.
    nodes_idle || { on_guest scontrol update nodename=vmnode state=resume; wait_for 60 nodes_idle; }
    return $rc
}
