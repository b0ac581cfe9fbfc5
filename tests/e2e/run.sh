#!/usr/bin/env bash
# End-to-end tests on the running docker cluster (docker/cluster.sh up). Every assertion is on
# what the kernel reports inside the tasks (Cpus_allowed_list) or what Slurm prints to the
# user. Expectations come from the `lama` command run on each node's own topology and cpuset,
# and a few are written out by hand so that a bug shared by both cannot hide.
#
#   tests/e2e/run.sh [TEST...]     (default: all tests, in order)
#   tests/e2e/run.sh --base        only the tests that need no plugin (the cluster may have none:
#                                  LAMA_PLUGIN=none docker/cluster.sh up)
# LAMA_SLURM=24.11|26.05 is the cluster's Slurm flavour and LAMA_CLUSTER=NAME the cluster
# (docker/cluster.sh's; defaults 24.11 and that flavour's project).
# Ends with "e2e: N passed, N failed"; exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib.sh"
# Every step placed by a layout also runs its tasks under `lama verify` (tests/lib.sh).
verify_each=${LAMA_VERIFY_EACH:-1}
cluster=$top/docker/cluster.sh
flavour=${LAMA_SLURM:-24.11}
# The Slurm release (src-24.11 is 24.11 built from source).
slurm_release=${flavour#src-}
# Runs a command as root in one member, named by its container or its NodeName (the two
# differ in the row node-name: NodeName lama3 on node3).
declare -A host_of=()
on() { local m=$1; shift; "$cluster" exec "${host_of[$m]:-$m}" "$@"; }
# The running Slurm's SlurmdSpoolDir and PluginDir (Debian's /var/lib/slurm/slurmd and
# /usr/lib/x86_64-linux-gnu/slurm-wlm; Slurm's defaults /var/spool/slurmd and
# PREFIX/lib/slurm for the source-built one): the plugin reads the first, the package
# installs into the second.
show_config() { on node1 scontrol show config | awk -v k="$1" '$1 == k { print $3; exit }'; }
spool=$(show_config SlurmdSpoolDir)
plugindir=$(show_config PluginDir)
[ -n "$spool" ] && [ -n "$plugindir" ] || { echo "e2e: scontrol show config on node1 failed: is the cluster up?" >&2; exit 1; }
# Where steps find the node's topology: the machine text of LAMA's own cache, written when
# slurmd starts beside its XML and read without hwloc, before Slurm's cached XML (up to 24.11;
# from 25.05 on Slurm no longer writes one) and LAMA's XML.
step_source="LAMA's cached $spool/lama_topology.machine"

# --- helpers -------------------------------------------------------------------------------

# Runs a command as the unprivileged user on the controller (the submit host).
as_user() { "$cluster" exec -u tester slurmctld "$@"; }
# The cluster's nodes: node1-node3, and node4-node8 with the row many-nodes (sinfo -N lists a
# node once per partition).
mapfile -t nodes < <(as_user sinfo -h -N -o %N | sort -uV)
while read -r name host; do host_of[$name]=$host; done < <(as_user sinfo -h -N -o '%N %n' | sort -u)
[ ${#nodes[@]} -ge 3 ] || { echo "e2e: sinfo lists no nodes: is the cluster up?" >&2; exit 1; }
# What sinfo says when every node is idle.
all_idle=$(printf '%s idle ' "${nodes[@]}")
node_states() { as_user sinfo -h -N -o '%N %T' | sort -uV | tr '\n' ' '; }

# Runs BODY (shell lines) as a batch job with SBATCH-ARGS and waits; the output (from the job's
# first node, NODE) lands in $work/out, task report lines only, sorted by rank.
run_batch() { # NODE BODY SBATCH-ARGS...
    local node=$1 body=$2; shift 2
    printf '#!/bin/bash\n%s\n' "$body" | as_user sh -c 'cat > /tmp/lama-batch.sh' || return 1
    as_user sbatch --parsable --wait -o /tmp/lama-batch.out "$@" /tmp/lama-batch.sh > /dev/null || return 1
    on "$node" cat /tmp/lama-batch.out | grep -E '^[0-9]+ ' | sort -n > "$work/out"
}

nodes_idle() { [ "$(node_states)" == "$all_idle" ]; }
# The cpuset.cpus of a job's cgroup (cgroup v1, task/cgroup) on NODE: job_cpuset NODE JOBID.
# Under slurm_NODE/ where Slurm is built with --enable-multiple-slurmd (Debian's), slurm/ where
# it is not (the source-built one).
job_cpuset() { on "$1" sh -c "cat /sys/fs/cgroup/cpuset/slurm_$1/uid_*/job_$2/cpuset.cpus /sys/fs/cgroup/cpuset/slurm/uid_*/job_$2/cpuset.cpus 2>/dev/null"; }

# Writes the plugin's plugstack line on every member (srun reads it too), with extra args.
set_plugstack() {
    local line kind
    line="$(grep -v -e '^#' -e '^[[:space:]]*$' "$top/plugstack.conf.example" | sed "s|@PLUGINDIR@|$plugindir|") $*"
    # A configuration row may make the plugin line optional (docker/configs/optional.conf).
    kind=$(on slurmctld sh -c "awk '\$1 == \"plugstack\" { print \$2 }' /opt/lama/config.overlay 2>/dev/null")
    [ -n "$kind" ] && line="$kind ${line#required }"
    for m in slurmctld "${nodes[@]}"; do
        on "$m" sh -c "echo '$line' > /etc/slurm/plugstack.conf.d/lama.conf"
    done
}
reset_plugstack() { set_plugstack ""; }

# --- tests ---------------------------------------------------------------------------------

t_setup() {
    for h in "${nodes[@]}"; do
        # (The XML is named after the host, which need not be the NodeName.)
        on "$h" cat "/etc/slurm/topology/${host_of[$h]:-$h}.xml" > "$work/$h.xml" || return 1
    done
    # Nodes may still be completing the jobs of an earlier run.
    wait_for 60 nodes_idle || fail "nodes not idle: $(as_user sinfo -h -N -o '%N %T' | tr '\n' ' ')" || return 1
    [ -n "$base_only" ] && return 0
    [ -x "$lama" ] || fail "$lama is missing (docker/cluster.sh plugin builds it)" || return 1
    # The row no-plugin checks the cluster has none (t_row_no_plugin).
    [ "${LAMA_NO_PLUGIN:-0}" == 1 ] && return 0
    on slurmctld dpkg-query -W spank-lama > /dev/null 2>&1 || fail "the cluster has no plugin (LAMA_PLUGIN=none?)" || return 1
    reset_plugstack
}

t_confinement() {
    # Real cgroup confinement (task/cgroup, ConstrainCores): a job holds CPU 0 of node3; the
    # task of a second job there, with Slurm's own binding turned off, sees only CPU 1.
    local holder
    holder=$(hold_cpus node3 1) || return 1
    local held; held=$(job_cpuset node3 "$holder")
    run_srun -w node3 -n1 --cpu-bind=none
    local rc=$? err; err=$(cat "$work/err")
    release "$holder" || return 1
    [ $rc -eq 0 ] || fail "srun failed: $err" || return 1
    assert_eq "cpuset.cpus of the holding job" "0" "$held" || return 1
    assert_eq "the second task's Cpus_allowed_list" "node3:1" "$(actual_cpus)" || return 1
    # Without the other job the same step gets CPU 0 (the first free one), and a step with
    # both CPUs sees both: the cpuset follows the allocation.
    run_srun -w node3 -n1 --cpu-bind=none || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "alone, the task's Cpus_allowed_list" "node3:0" "$(actual_cpus)" || return 1
    run_srun -w node3 -n1 -c2 --cpu-bind=none || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "with -c2, the task's Cpus_allowed_list" "node3:0-1" "$(actual_cpus)"
}

t_no_options_leaves_slurm_alone() {
    run_srun -N3 -n6 || fail "srun failed: $(cat "$work/err")" || return 1
    # Slurm's own binding (task/affinity, one CPU per task), no LAMA variables.
    assert_eq "bindings" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1
    assert_eq "LAMA_CPUS" "unset unset unset unset unset unset" "$(awk '{ printf "%s%s", (NR > 1 ? " " : ""), $4 }' "$work/out")"
}

check_layout() { # SRUN-LAMA-ARGS... -- LAMA-MAP-ARGS...
    local srun_args=() map_args=()
    while [ "$1" != "--" ]; do srun_args+=("$1"); shift; done
    shift
    map_args=("$@")
    run_srun -N3 -n6 "${srun_args[@]}" || fail "srun ${srun_args[*]} failed: $(cat "$work/err")" || return 1
    assert_eq "srun ${srun_args[*]}" "$(predict "${map_args[@]}")" "$(actual_cpus)"
}

t_bind_core() {
    check_layout --lama-map=scbnh --lama-bind=1c -- --map scbnh --bind 1c || return 1
    # By hand: node2 is one core with two threads, so both tasks get the whole core.
    assert_eq "by hand" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0 node3:1" "$(actual_cpus)"
}

t_bind_socket() {
    check_layout --lama-map=scbnh --lama-bind=1s -- --map scbnh --bind 1s || return 1
    # By hand: node1 has two sockets, node2 and node3 one.
    assert_eq "by hand" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0-1 node3:0-1" "$(actual_cpus)"
}

t_bind_hwthread() {
    check_layout --lama-map=hcsbn --lama-bind=1h -- --map hcsbn --bind 1h || return 1
    assert_eq "by hand" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1
    # That is also Slurm's own binding: LAMA bound them (LAMA_CPUS is each task's CPU), and
    # with --lama-bind=1c instead node2's two tasks share its core, as asked, and without a
    # warning: each has a thread of the core, which is what 1c with hcsbn means.
    # (LAMA's default binding never shares: on node2 it also gives a thread each, so only an
    # explicit width differs here; the guest tells 1h from the default.)
    assert_eq "LAMA_CPUS" "0 1 0 1 0 1" "$(report_field 4)" || return 1
    run_srun -N3 -n6 --lama-map=hcsbn --lama-bind=1c || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "with --lama-bind=1c, by hand" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0 node3:1" "$(actual_cpus)" || return 1
    ! grep -qF "makes tasks share CPUs" "$work/err" || fail "a warning for the expected sharing: $(cat "$work/err")"
}

t_bind_none_keeps_slurm_binding() {
    run_srun -N3 -n6 --lama-map=scbnh --lama-bind=none || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "bindings" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1
    # The placement is still described: LAMA_CPUS is set and empty for no binding (each of the
    # six lines has three fields, not "unset").
    assert_eq "lines with LAMA_CPUS set and empty" "6" "$(awk 'NF == 3' "$work/out" | wc -l)"
}

# (--lama-order and --lama-mppr are tested on the QEMU test node, tests/vm/run.sh
# t_order_sequential and t_mppr: with two tasks on two CPUs per node no order and no MPPR
# gives anything but what the same run without the option gives.)

t_alias() {
    check_layout --lama-map=socket --lama-bind=core -- --map socket --bind core || return 1
    assert_eq "by hand" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0 node3:1" "$(actual_cpus)"
}

t_sbatch_options_reach_steps() {
    # The options are #SBATCH lines only: they reach the script's srun step through Slurm.
    run_batch node1 "#SBATCH -N3 -n6 --lama-map=scbnh --lama-bind=1s
srun bash -c '$task_report'" || fail "batch job failed" || return 1
    report_complete 6 || return 1
    assert_eq "sbatch" "$(predict --map scbnh --bind 1s)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0-1 node3:0-1" "$(actual_cpus)"
}

t_salloc_options() {
    # A bad value stops salloc before it allocates anything.
    if as_user salloc -N1 --lama-map=xyz true > "$work/out" 2> "$work/err"; then
        fail "salloc --lama-map=xyz succeeded"; return 1
    fi
    grep -qF "invalid mapping layout 'xyz'" "$work/err" || fail "message: $(cat "$work/err")" || return 1
    # The allocation's options reach its srun steps.
    local srun_prefix=(salloc -N3 -n6 --lama-map=scbnh --lama-bind=1s)
    run_srun || fail "salloc failed: $(cat "$work/err")" || return 1
    assert_eq "salloc" "$(predict --map scbnh --bind 1s)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0-1 node3:0-1" "$(actual_cpus)"
}

# True once JOBID's cgroup v1 cpuset on NODE is written: job_cpuset_set NODE JOBID
job_cpuset_set() { [ -n "$(job_cpuset "$1" "$2" 2>/dev/null)" ]; }

t_step_cpuset_is_honoured() {
    # Another job holds one CPU of node3: it must really run, with exactly one of node3's two
    # CPUs in its cgroup cpuset, and still run when the step does. The step gets the other CPU
    # and LAMA places inside it (csbnh 1c alone would take CPU 0, the first core).
    local holder held n3
    holder=$(hold_cpus node3 1) || return 1
    wait_for 30 job_cpuset_set node3 "$holder"
    held=$(job_cpuset node3 "$holder")
    n3=$(slurmd_log_lines node3)
    run_srun -w node3 -n1 --lama-map=csbnh --lama-bind=1c
    local rc=$? holder_state
    holder_state=$(job_state "$holder")
    release "$holder" || return 1
    [ $rc -eq 0 ] || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "the holding job $holder while the step ran" "RUNNING" "$holder_state" || return 1
    [ "$held" == 0 ] || [ "$held" == 1 ] || fail "the holding job's cpuset.cpus: expected one CPU of node3 (0 or 1), got [$held]" || return 1
    local free=$((1 - held))
    # By hand: the step's task is on the CPU the holder does not have.
    assert_eq "the task beside the holder (holding CPU $held)" "node3:$free" "$(actual_cpus)" || return 1
    assert_eq "placement" "$(predict --restrict "$free" --map csbnh --bind 1c)" "$(actual_cpus)" || return 1
    # The plugin says where the step's CPUs came from: cgroup v1's step cpuset on this cluster.
    slurmd_log_since node3 "$n3" | grep -qE "lama: step CPUs $free from cgroup v1 /sys/fs/cgroup/cpuset/.*/job_[0-9]+/step_[0-9]+/cpuset.cpus \($free\) and allocated cores " \
        || fail "slurmd's log does not name the cgroup v1 step cpuset: $(slurmd_log_since node3 "$n3" | grep 'step CPUs')"
}

expect_refused() { # WHAT-STDERR-CONTAINS SRUN-ARGS...
    local want=$1; shift
    if run_srun -N1 -n1 "$@"; then fail "srun $* succeeded"; return 1; fi
    grep -qF -- "$want" "$work/err" || fail "srun $*: stderr lacks [$want]: $(cat "$work/err")" || return 1
    [ ! -s "$work/out" ] || fail "srun $* launched tasks: $(cat "$work/out")"
}

# The ids of every job slurmctld still knows, sorted as comm(1) wants them.
job_ids() { as_user squeue -h -t all -o %i | sort; }

t_bad_input_fails_before_launch() {
    # Compared by id, not by count: finished jobs age out of squeue (MinJobAge=30) while the
    # commands run, and a count once fell from 15 to 5 with no job created.
    local before new
    before=$(job_ids)
    expect_refused "invalid mapping layout 'xyz': unknown token 'x'" --lama-map=xyz || return 1
    expect_refused "invalid binding width '3q': unknown token 'q'" --lama-map=scbnh --lama-bind=3q || return 1
    expect_refused "invalid MPPR limit list 'a:b': 'a' is not a process count" --lama-map=scbnh --lama-mppr=a:b || return 1
    expect_refused "invalid rank ordering 'x': unknown ordering 'x'" --lama-map=scbnh --lama-order=x || return 1
    # The caret line of the diagnostic reaches the terminal too.
    expect_refused "example: scbnh" --lama-map=scbnx || return 1
    new=$(comm -13 <(echo "$before") <(job_ids) | paste -sd' ')
    assert_empty "jobs created by refused commands" "$new"
}

t_oversubscription() {
    # node3 has two cores: two tasks bound to two cores each do not fit.
    if run_srun -w node3 -n2 --lama-map=csbnh --lama-bind=2c; then
        fail "oversubscribed step ran"; return 1
    fi
    grep -qF "placed 1 of 2 processes: oversubscribed" "$work/err" || fail "message: $(cat "$work/err")" || return 1
    # An MPPR that cannot hold: two tasks, one core, at most one process per core.
    if run_srun -w node2 -n2 --lama-map=hcsbn --lama-bind=1h --lama-mppr=1:c; then
        fail "MPPR-oversubscribed step ran"; return 1
    fi
    grep -qF "and MPPR 1:c offers 1 positions" "$work/err" || fail "message: $(cat "$work/err")" || return 1
    # With --overcommit, three tasks on a two-core allocation run: a second pass.
    run_batch node3 "srun -n3 --overcommit --lama-map=csbnh --lama-bind=1c bash -c '$task_report'" -w node3 -n2 \
        || fail "overcommitted job failed" || return 1
    report_complete 3 || return 1
    assert_eq "with --overcommit" "$(predict --map csbnh --bind 1c --oversubscribe)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "node3:0 node3:1 node3:0" "$(actual_cpus)"
}

t_verbose_one_line_per_task() {
    run_srun -N3 -n6 --lama-map=scbnh --lama-bind=1c --lama-verbose || fail "srun failed" || return 1
    assert_eq "verbose lines" "6" "$(grep -c '^lama scbnh:1c - node[1-3], task' "$work/err")" || return 1
    grep -qE '^lama scbnh:1c - node2, task +[23] +[01] \[[0-9]+\]: cpus 0-1 package\[0\]\[core:0\]$' "$work/err" \
        || fail "node2's line: $(grep node2 "$work/err")"
}

t_site_default_and_policy() {
    set_plugstack "map=csbnh bind=1c"
    run_srun -N3 -n6 || { reset_plugstack; fail "srun failed: $(cat "$work/err")"; return 1; }
    local got; got=$(actual_cpus)
    local want; want=$(predict --map csbnh --bind 1c)
    # By hand: without the site default Slurm binds node2's tasks to one thread each; csbnh 1c
    # gives both the core (two threads).
    local by_hand="node1:0 node1:1 node2:0-1 node2:0-1 node3:0 node3:1"
    # A site default that cannot be placed degrades to Slurm's binding with a warning.
    set_plugstack "map=csbnh bind=2c"
    run_srun -w node3 -n2
    local rc=$?
    local warned; warned=$(grep -c "warning: the site's default placement was not applied" "$work/err")
    # With user_options=no, users cannot override the site.
    set_plugstack "map=csbnh user_options=no"
    run_srun -N1 -n1 --lama-map=scbnh
    local refused=$?
    grep -qF "does not allow --lama-* options" "$work/err"
    local said=$?
    reset_plugstack
    assert_eq "site default" "$want" "$got" || return 1
    assert_eq "site default, by hand" "$by_hand" "$got" || return 1
    [ $rc -eq 0 ] || fail "site default failure failed the step" || return 1
    [ "$warned" -ge 1 ] || fail "no warning for the failed site default" || return 1
    [ $refused -ne 0 ] && [ $said -eq 0 ] || fail "user option not refused: $(cat "$work/err")"
}

# The number of lines in a node's slurmd log, and the lines after that many.
slurmd_log_lines() { on "$1" sh -c 'wc -l < /var/log/slurm/slurmd.log'; }
slurmd_log_since() { on "$1" sh -c "tail -n +$2 /var/log/slurm/slurmd.log"; }
# The Slurm version a node runs (slurmd -V: "slurm 24.11.5").
slurm_version() { on "$1" slurmd -V | awk '{ print $2 }'; }

t_topology_sources() {
    local n1
    n1=$(slurmd_log_lines node1)
    run_srun -w node1 -n2 --lama-map=scbnh --lama-bind=1c || fail "srun failed: $(cat "$work/err")" || return 1
    slurmd_log_since node1 "$n1" | grep -qF "source=$step_source" \
        || fail "$step_source was not used: $(slurmd_log_since node1 "$n1" | grep lama)" || return 1
    # A corrupt admin file, then a stale one (4 CPUs on a 2-CPU node): skipped with a logged
    # reason, and the job still runs correctly from the next source.
    for m in "${nodes[@]}"; do
        on "$m" sh -c 'echo "<topology><broken" > /etc/slurm/topology/corrupt-$(hostname -s).xml; lstopo-no-graphics -i "pack:2 core:2 pu:1" --of xml /etc/slurm/topology/stale-$(hostname -s).xml 2>/dev/null'
    done
    local kind
    for kind in corrupt stale; do
        set_plugstack "topology=/etc/slurm/topology/$kind-%n.xml"
        n1=$(slurmd_log_lines node1)
        run_srun -N3 -n6 --lama-map=scbnh --lama-bind=1c
        local rc=$?
        reset_plugstack
        [ $rc -eq 0 ] || fail "$kind admin XML: srun failed: $(cat "$work/err")" || return 1
        assert_eq "$kind admin XML" "node1:0 node1:1 node2:0-1 node2:0-1 node3:0 node3:1" "$(actual_cpus)" || return 1
        local want="not a valid hwloc XML topology"; [ $kind == stale ] && want="is stale: it describes CPUs 0-3"
        slurmd_log_since node1 "$n1" | grep "topology source skipped" | grep -qF "$want" \
            || fail "$kind: no logged reason: $(slurmd_log_since node1 "$n1" | grep lama)" || return 1
    done
}

# Restarts slurmd on a node (its supervisor starts it again) and waits until the node is back.
restart_slurmd() {
    on "$1" pkill -x slurmd || { fail "no slurmd on $1"; return 1; }
    wait_for 30 on "$1" pgrep -x slurmd && wait_for 60 nodes_idle || fail "slurmd on $1 did not come back"
}

t_topology_cache() {
    # When slurmd started (SPANK slurmd context) the plugin cached each node's topology:
    # logged, mode 0644, owned by root, the same topology as the node's.
    local m cache=$spool/lama_topology.xml
    for m in "${nodes[@]}"; do
        on "$m" grep -qF "lama: topology cached in $cache (" /var/log/slurm/slurmd.log \
            || fail "$m: no 'topology cached' line in slurmd's log" || return 1
        assert_eq "$m: mode and owner" "644 root" "$(on "$m" stat -c '%a %U' "$cache")" || return 1
        assert_eq "$m: cached topology" \
            "$(on "$m" lstopo-no-graphics -i "/etc/slurm/topology/$m.xml" --of synthetic)" \
            "$(on "$m" lstopo-no-graphics -i "$cache" --of synthetic)" || return 1
    done
    # Steps use the flavour's source, and say so in slurmd's log.
    local n1
    n1=$(slurmd_log_lines node1)
    run_srun -w node1 -n2 --lama-map=scbnh --lama-bind=1c || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "placement" "node1:0 node1:1" "$(actual_cpus)" || return 1
    slurmd_log_since node1 "$n1" | grep -qF "source=$step_source" \
        || fail "$step_source was not used: $(slurmd_log_since node1 "$n1" | grep lama)" || return 1
    # The machine text beside the XML: root's, mode 0644, the node's PUs in logical order.
    for m in "${nodes[@]}"; do
        assert_eq "$m: the machine text's mode and owner" "644 root" "$(on "$m" stat -c '%a %U' "${cache%.xml}.machine")" || return 1
        assert_eq "$m: the machine text" "lama-machine 1|pus	0 1" "$(on "$m" head -n2 "${cache%.xml}.machine" | paste -sd'|')" || return 1
    done
    # The cache cannot be written (its directory does not exist): slurmd starts anyway and
    # says why; steps fall back to the next source with the reason logged.
    set_plugstack "topology_cache=/nonexistent/lama_topology.xml"
    n1=$(slurmd_log_lines node1)
    restart_slurmd node1 || { reset_plugstack; restart_slurmd node1; return 1; }
    run_srun -w node1 -n2 --lama-map=scbnh --lama-bind=1c
    local rc=$? log
    log=$(slurmd_log_since node1 "$n1")
    reset_plugstack
    restart_slurmd node1 || return 1
    echo "$log" | grep "lama: topology not cached (cannot write /nonexistent/lama_topology.xml: No such file or directory" | grep -qF "steps use the next topology source" \
        || fail "no logged reason for the failed export: $(echo "$log" | grep lama)" || return 1
    [ $rc -eq 0 ] || fail "srun failed without the cache: $(cat "$work/err")" || return 1
    assert_eq "placement without the cache" "node1:0 node1:1" "$(actual_cpus)" || return 1
    # 24.11: Slurm's own cache comes first and is still there. Later releases: none is left.
    [ "$slurm_release" == 24.11 ] && return 0
    grep -qF "topology source skipped: LAMA's cached machine: /nonexistent/lama_topology.machine does not exist" <<< "$log" \
        || fail "no reason logged for the missing machine text: $(echo "$log" | grep lama)" || return 1
    grep -qF "topology source skipped: LAMA's cached topology: /nonexistent/lama_topology.xml does not exist" <<< "$log" \
        || fail "no reason logged for the missing cache: $(echo "$log" | grep lama)" || return 1
    grep -qF "source=live discovery" <<< "$log" \
        || fail "live discovery was not used: $(echo "$log" | grep lama)"
}

t_install_refuses_other_slurm() {
    # The plugin in this cluster was installed by scripts/install-plugin.sh, which checked it
    # against the node's Slurm. A copy marked as built for another release is refused with a
    # message that names both versions, and nothing is installed.
    local so=$plugindir/spank_lama.so built running
    built=$(on node1 sh -c "grep -ao 'spank-lama built for Slurm [0-9.]*' $so" | awk '{ print $NF }')
    running=$(slurm_version node1)
    assert_eq "the installed plugin's Slurm" "$running" "$built" || return 1
    on node1 sh -c "sed 's/spank-lama built for Slurm $built/spank-lama built for Slurm 23.02.9/' $so > /tmp/other.so; rm -f /tmp/installed.so"
    on node1 sh /opt/lama/install-plugin.sh /tmp/other.so /tmp/installed.so > "$work/install" 2>&1 \
        && { fail "a plugin for Slurm 23.02.9 was installed on Slurm $running"; return 1; }
    grep -qF "refusing /tmp/other.so: it was built for Slurm 23.02.9, but this node runs Slurm $running" "$work/install" \
        || fail "message: $(cat "$work/install")" || return 1
    on node1 test ! -e /tmp/installed.so || fail "the refused plugin was installed"
}

t_package_installed() {
    # Every member runs the plugin from the Debian package built for its Slurm: manual pages,
    # the options in srun --help, lama --version naming the Slurm, completions, the conffile.
    local running
    running=$(slurm_version node1)
    assert_eq "package version" "+slurm${slurm_release}" "$(on node1 dpkg-query -W -f '${Version}' spank-lama | grep -o '+slurm.*')" || return 1
    on node1 sh -c 'MANWIDTH=100 man spank-lama' > "$work/man8" 2>&1 || fail "man spank-lama: $(head -3 "$work/man8")" || return 1
    grep -q -- "--lama-map=LAYOUT" "$work/man8" && grep -q "topology_cache=" "$work/man8" \
        || fail "spank-lama(8) lacks options or settings: $(head -20 "$work/man8")" || return 1
    on node1 sh -c 'MANWIDTH=100 man lama' > "$work/man1" 2>&1 || fail "man lama: $(head -3 "$work/man1")" || return 1
    grep -q "EXIT STATUS" "$work/man1" && grep -q -- "--cpus-per-task" "$work/man1" || fail "lama(1) is incomplete" || return 1
    as_user srun --help > "$work/help" 2>&1
    grep -q -- "--lama-map=layout" "$work/help" && grep -q -- "--lama-membind=local|preferred|none" "$work/help" \
        || fail "srun --help lacks the options: $(grep -i lama "$work/help")" || return 1
    assert_eq "lama --version" "plugin: $plugindir/spank_lama.so, built for Slurm $running" \
        "$(on node1 lama --version | tail -n1)" || return 1
    on node1 test -s /usr/share/bash-completion/completions/lama || fail "no bash completion" || return 1
    assert_eq "conffile" "/etc/slurm/plugstack.conf.d/lama.conf" \
        "$(on node1 dpkg-query -W -f '${Conffiles}' spank-lama | awk '{ print $1 }')"
}

t_package_refused_on_other_slurm() {
    # The package built for the other supported Slurm is refused by dpkg before anything is
    # unpacked, with a message naming both releases; the installed package is untouched.
    local other deb installed target
    if [ "$slurm_release" == 24.11 ]; then other=26.05; else other=24.11; fi
    target=$( . "$top/scripts/lib.sh" && slurm_flavour "$other" "$top" && echo "$target")
    deb=$(ls "$target"/debian/spank-lama_*+slurm${other}_amd64.deb 2>/dev/null | head -n1)
    [ -n "$deb" ] || fail "no package for Slurm $other in target/debian: build it with scripts/package.sh $other" || return 1
    installed=$(on node1 dpkg-query -W -f '${Version}' spank-lama)
    on node1 sh -c 'cat > /tmp/other.deb' < "$deb"
    on node1 dpkg -i /tmp/other.deb > "$work/dpkg" 2>&1 && { fail "dpkg installed the Slurm $other package"; return 1; }
    local has
    if [ "$flavour" == src-24.11 ]; then
        has="(none: slurm-wlm-basic-plugins is not installed)"
    else
        has="$(on node1 dpkg-query -W -f '${Version}' slurm-wlm-basic-plugins) (the slurm-wlm-basic-plugins package)"
    fi
    grep -qF "spank-lama: this package is built for Slurm $other, but this machine has Slurm $has." "$work/dpkg" \
        || fail "dpkg's message: $(cat "$work/dpkg")" || return 1
    if [ "$flavour" == src-24.11 ]; then
        # This cluster's package names no Slurm package (its Slurm is built from source): its
        # preinst asks the Slurm commands, and refuses when they are another release.
        on node1 sh -c 'mkdir -p /tmp/fake && printf "#!/bin/sh\necho slurm 26.05.1\n" > /tmp/fake/slurmd && chmod +x /tmp/fake/slurmd'
        on node1 sh -c 'PATH=/tmp/fake:$PATH sh /var/lib/dpkg/info/spank-lama.preinst install' > "$work/pre" 2>&1 \
            && { fail "the preinst accepted a slurmd of 26.05.1"; return 1; }
        grep -qF "this package is built for Slurm 24.11, but this machine has Slurm 26.05.1 (slurmd -V)." "$work/pre" \
            || fail "the preinst's message: $(cat "$work/pre")" || return 1
        on node1 sh /var/lib/dpkg/info/spank-lama.preinst install > "$work/pre" 2>&1 \
            || fail "the preinst refused this node's Slurm: $(cat "$work/pre")" || return 1
    fi
    assert_eq "installed package" "$installed" "$(on node1 dpkg-query -W -f '${Version}' spank-lama)" || return 1
    assert_eq "its status" "install ok installed" "$(on node1 dpkg-query -W -f '${Status}' spank-lama)"
}

t_package_removal_keeps_srun_working() {
    # Removing the package (not purging) keeps its conffile; its enabled `required` line would
    # name a plugin that is gone and every step on the node would fail. The package disables
    # the line on removal and enables it again when installed again (packaging/postrm).
    local deb plugin
    plugin=$(on node1 sh -c "awk '\$1 == \"required\" { print \$2 }' /etc/slurm/plugstack.conf.d/lama.conf")
    [ -n "$plugin" ] || fail "node1's lama.conf has no enabled line" || return 1
    deb=$(on node1 sh -c 'ls /opt/lama/spank-lama_*.deb' | head -n1)
    [ -n "$deb" ] || fail "no package in node1's /opt/lama" || return 1
    on node1 dpkg -r spank-lama > "$work/dpkg" 2>&1 || fail "dpkg -r: $(cat "$work/dpkg")" || return 1
    removed_checks "$plugin"
    local rc=$?
    # Installed again: the line is the site's again, and LAMA places the step.
    on node1 dpkg -i "$deb" > "$work/dpkg" 2>&1 || fail "dpkg -i: $(cat "$work/dpkg")" || return 1
    [ $rc -eq 0 ] || return 1
    assert_eq "the line after reinstalling" "required $plugin" "$(plugin_line "$plugin")" || return 1
    run_srun -w node1 -n2 --lama-map=scbnh || fail "srun after reinstalling: $(cat "$work/err")" || return 1
    assert_eq "placed again after reinstalling" "node1:0 node1:1" "$(actual_cpus)"
}
t_package_upgrade_from_one_package() {
    # Until 0.2.0 one package, spank-lama, held the plugin and lama; now spank-lama is the plugin
    # and spank-lama-tools has lama (scripts/make-deb.sh). Such a package, made here of the two
    # packages' files as it was (version 0.1.0), goes in place of the two; beside it dpkg refuses
    # the tools package alone (it Breaks spank-lama < 0.2.0); then both packages together
    # upgrade it: /usr/bin/lama passes to spank-lama-tools, and the plugin places steps.
    local deb tools version
    deb=$(on node1 sh -c 'ls /opt/lama/spank-lama_*.deb' | head -n1)
    tools=${deb%/*}/spank-lama-tools_${deb##*/spank-lama_}
    version=$(on node1 dpkg-query -W -f '${Version}' spank-lama)
    on node1 sh -c "set -e; rm -rf /tmp/one; mkdir -p /tmp/one; dpkg-deb -R $deb /tmp/one/p; dpkg-deb -x $tools /tmp/one/p
        rm -rf /tmp/one/p/usr/share/doc/spank-lama-tools
        sed -i -e 's/^Version: [^+]*+/Version: 0.1.0+/' -e '/^Recommends:/d' /tmp/one/p/DEBIAN/control
        cd /tmp/one/p && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums
        dpkg-deb --root-owner-group -Zgzip -b /tmp/one/p /tmp/one/old.deb > /dev/null" 2> "$work/err" \
        || fail "making the one package: $(cat "$work/err")" || return 1
    on node1 dpkg -r spank-lama-tools > "$work/dpkg" 2>&1 && on node1 dpkg -i /tmp/one/old.deb > "$work/dpkg" 2>&1 \
        || fail "installing the one package: $(cat "$work/dpkg")" || return 1
    assert_eq "lama's package before" "spank-lama: /usr/bin/lama" "$(on node1 dpkg -S /usr/bin/lama)" || return 1
    on node1 dpkg -i "$tools" > "$work/dpkg" 2>&1 && { fail "dpkg installed the tools beside spank-lama 0.1.0"; return 1; }
    grep -qF "spank-lama-tools breaks spank-lama (<< 0.2.0~)" "$work/dpkg" || fail "dpkg's refusal: $(cat "$work/dpkg")" || return 1
    on node1 dpkg -i "$deb" "$tools" > "$work/dpkg" 2>&1 || fail "the upgrade: $(cat "$work/dpkg")" || return 1
    assert_eq "lama's package after" "spank-lama-tools: /usr/bin/lama" "$(on node1 dpkg -S /usr/bin/lama)" || return 1
    assert_eq "the versions after" "$version $version" \
        "$(on node1 dpkg-query -W -f '${Version} ' spank-lama spank-lama-tools | sed 's/ $//')" || return 1
    on node1 lama --version > /dev/null || fail "lama after the upgrade" || return 1
    on node1 rm -rf /tmp/one
    run_srun -w node1 -n2 --lama-map=scbnh || fail "srun after the upgrade: $(cat "$work/err")" || return 1
    assert_eq "placed after the upgrade" "node1:0 node1:1" "$(actual_cpus)"
}

t_row_plugin_only() {
    # The row plugin-only: the compute nodes have the plugin's package alone, which depends on
    # Slurm's plugins, hwloc and libc only (no Scotch, no lama); the submit host has both.
    local n deps
    for n in "${nodes[@]}"; do
        assert_eq "$n: packages" "spank-lama" "$(on "$n" dpkg-query -W -f '${db:Status-Abbrev}${Package}\n' 'spank-lama*' | awk '$1 == "ii" { print $2 }' | paste -sd' ')" || return 1
        on "$n" sh -c 'command -v lama' > /dev/null && { fail "$n has lama"; return 1; }
    done
    deps=$(on node1 dpkg-query -W -f '${Depends}' spank-lama)
    [[ "$deps" == *libhwloc15* && "$deps" == *slurm-wlm-basic-plugins* || "$flavour" == src-24.11 ]] \
        || fail "the plugin's dependencies: $deps" || return 1
    assert_empty "dependencies beyond libc, libgcc, hwloc and Slurm's plugins" \
        "$(tr ',' '\n' <<< "$deps" | awk '{ print $1 }' | grep -vx -e libc6 -e libgcc-s1 -e libhwloc15 -e slurm-wlm-basic-plugins)" || return 1
    on slurmctld lama --version > /dev/null || fail "the submit host has no lama"
}

# node1's line naming the plugin in lama.conf, without trailing blanks.
plugin_line() { on node1 grep -F "$1" /etc/slurm/plugstack.conf.d/lama.conf | sed 's/[[:space:]]*$//'; }
removed_checks() { # PLUGIN: what holds while the package is removed from node1
    on node1 test ! -e "$1" || fail "$1 is still there after dpkg -r" || return 1
    grep -qF "disabled the plugin's line" "$work/dpkg" || fail "dpkg -r said: $(cat "$work/dpkg")" || return 1
    assert_eq "the line after removal" "#lama-removed# required $1" "$(plugin_line "$1")" || return 1
    # A step on node1 still runs.
    as_user srun -w node1 -n1 true > "$work/out" 2> "$work/err" \
        || fail "srun on node1 after the package's removal: $(cat "$work/err")"
}

t_openmp_variables() {
    local report='echo "$SLURM_PROCID $(hostname -s) $OMP_PLACES $OMP_PROC_BIND $OMP_NUM_THREADS"'
    # node1: two sockets of one core; a task given both CPUs and bound to the node gets two places.
    as_user srun -w node1 -n1 -c2 --lama-map=scbnh --lama-bind=1n --lama-omp bash -c "$report" > "$work/omp" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "node1" "0 node1 {0},{1} close 2" "$(cat "$work/omp")" || return 1
    as_user env OMP_NUM_THREADS=7 srun -w node2 -n1 -c2 --lama-map=scbnh --lama-bind=1c --lama-omp bash -c "$report" > "$work/omp" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    # With -c2 Slurm gave the task two CPUs, which on node2 are the core's two threads: two
    # places. The user's OMP_NUM_THREADS is kept.
    assert_eq "node2" "0 node2 {0},{1} close 7" "$(cat "$work/omp")" || return 1
    # Without --lama-omp nothing OpenMP is set.
    as_user srun -w node1 -n1 --lama-map=scbnh bash -c 'echo "${OMP_PLACES-unset}"' > "$work/omp" 2>&1
    assert_eq "without --lama-omp" "unset" "$(cat "$work/omp")"
}

t_bad_site_configuration() {
    # An unknown key: the plugin refuses to load, and (being required) stops the command with
    # a message that names the key.
    set_plugstack "mapp=scbnh"
    run_srun -N1 -n1
    local rc=$?
    reset_plugstack
    [ $rc -ne 0 ] || fail "srun ran with a broken site configuration" || return 1
    grep -qF "lama: invalid site configuration in plugstack.conf: unknown key 'mapp' (known keys:" "$work/err" \
        || fail "message: $(cat "$work/err")" || return 1
    # Fixed configuration, working jobs again.
    run_srun -N1 -n1 --lama-map=scbnh || fail "srun after the fix: $(cat "$work/err")"
}

t_broken_plugstack_batch_job_drains_nothing() {
    # node3's plugin line is broken (sbatch's and srun's, on the submit host, are fine). A batch
    # job there runs its script; the script's srun fails with the plugin's reason; node3 stays
    # in service. (On Slurm 24.11 a failed init in a batch job's slurmstepd drains the node,
    # "batch job complete failure": the plugin's init no longer fails in slurmstepd.)
    local line rc out
    line=$(on node3 cat /etc/slurm/plugstack.conf.d/lama.conf)
    echo "$line mapp=scbnh" | on node3 sh -c 'cat > /etc/slurm/plugstack.conf.d/lama.conf'
    printf '#!/bin/bash\necho script ran\nsrun -n1 --lama-map=scbnh true\necho "srun rc=$?"\n' \
        | as_user sh -c 'cat > /tmp/lama-broken.sh'
    # (A node drained by the job's failure requeues the job: sbatch --wait would wait forever.)
    as_user timeout 120 sbatch --parsable --wait -w node3 -n1 -o /tmp/lama-broken.out /tmp/lama-broken.sh > /dev/null 2> "$work/err"
    rc=$?
    echo "$line" | on node3 sh -c 'cat > /etc/slurm/plugstack.conf.d/lama.conf'
    out=$(on node3 cat /tmp/lama-broken.out)
    grep -q "script ran" <<< "$out" || fail "the batch script did not run (sbatch $rc: $(cat "$work/err")): $out" || return 1
    grep -q "srun rc=[1-9]" <<< "$out" || fail "the script's srun ran with node3's broken line: $out" || return 1
    # (The script's srun runs on node3 too, reads the same line, and refuses itself.)
    grep -qF "invalid site configuration in plugstack.conf: unknown key 'mapp'" <<< "$out" \
        || fail "the job's output does not say why: $out" || return 1
    wait_for 30 nodes_idle || fail "a node was taken out of service: $(as_user sinfo -N -o '%N %T %E')"
}

t_garbage_inherited_option_drains_nothing() {
    # A user exports garbage under the names through which Slurm hands a job's --lama-*
    # options to its batch step (_SLURM_SPANK_OPTION_lama_*) before sbatch: sbatch does not
    # read them; the batch step takes them as its options (and removes them from the script's
    # environment: spank.c `spank_clear_remote_options_env`) and, a batch step being never
    # placed, runs the script; its srun inherits nothing and runs; every node stays idle.
    local out
    as_user timeout 120 env "_SLURM_SPANK_OPTION_lama_lama_map=sx\\yz" _SLURM_SPANK_OPTION_lama_lama_bind=99q \
        sbatch --parsable --wait -w node1 -n1 -o /tmp/lama-garbage.out \
        --wrap 'echo script ran; srun -n1 true; echo "srun rc=$?"' > /dev/null 2> "$work/err" \
        || fail "sbatch: $(cat "$work/err")" || return 1
    out=$(on node1 cat /tmp/lama-garbage.out)
    grep -q "script ran" <<< "$out" || fail "the batch script did not run: $out" || return 1
    grep -q "srun rc=0" <<< "$out" || fail "the script's srun failed: $out" || return 1
    # The name sbatch itself reads as an option's value (SLURM_SPANK_ + Slurm's variable):
    # refused before anything is submitted, with the option's own message.
    as_user env "SLURM_SPANK__SLURM_SPANK_OPTION_lama_lama_map=sx\\yz" sbatch -w node1 -n1 --wrap true \
        > "$work/out" 2> "$work/err" && { fail "sbatch submitted a garbage option: $(cat "$work/out")"; return 1; }
    grep -qF "invalid mapping layout" "$work/err" || fail "sbatch's message: $(cat "$work/err")" || return 1
    wait_for 30 nodes_idle || fail "a node was taken out of service: $(as_user sinfo -N -o '%N %T %E')"
}

t_node_configuration_error_fails_the_job_not_the_node() {
    # Only node3's plugin line is broken (srun's, on the submit host, is fine): the step fails
    # there with the plugin's message in slurmd's log, and node3 stays in service; not drained
    # (Slurm 26.05 would drain it by default: the plugin sets slurm_spank_init_failure_mode).
    local n3 line
    n3=$(slurmd_log_lines node3)
    line=$(on node3 cat /etc/slurm/plugstack.conf.d/lama.conf)
    echo "$line mapp=scbnh" | on node3 sh -c 'cat > /etc/slurm/plugstack.conf.d/lama.conf'
    run_srun -w node3 -n1 --lama-map=scbnh
    local rc=$?
    echo "$line" | on node3 sh -c 'cat > /etc/slurm/plugstack.conf.d/lama.conf'
    [ $rc -ne 0 ] || fail "the step ran with node3's broken configuration" || return 1
    slurmd_log_since node3 "$n3" | grep -qF "lama: invalid site configuration in plugstack.conf: unknown key 'mapp'" \
        || fail "no message in node3's log: $(slurmd_log_since node3 "$n3" | grep -i error)" || return 1
    wait_for 30 nodes_idle || fail "node3 was taken out of service: $(as_user sinfo -N -o '%N %T %E')" || return 1
    run_srun -w node3 -n2 --lama-map=scbnh || fail "srun after the fix: $(cat "$work/err")" || return 1
    assert_eq "after the fix" "node3:0 node3:1" "$(actual_cpus)"
}

# --- hybrid jobs: -c, memory binding, the distribution hint -----------------------------------

t_cpus_per_task_widen_the_binding() {
    # Without --lama-bind, -c2 binds each task to two CPUs: two sockets on node1, the core's
    # two threads on node2, two cores on node3; --lama-omp gives two places and two threads.
    local report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) $LAMA_BIND $OMP_PLACES $OMP_NUM_THREADS"'
    local node
    for node in "${nodes[@]}"; do
        as_user srun -w "$node" -n1 -c2 --lama-map=scbnh --lama-omp bash -c "$report" > "$work/omp" 2> "$work/err" \
            || fail "$node: srun failed: $(cat "$work/err")" || return 1
        local bind=2c; [ "$node" == node2 ] && bind=1c
        assert_eq "$node" "0 $node 0-1 $bind {0},{1} 2" "$(cat "$work/omp")" || return 1
        grep -q warning "$work/err" && { fail "$node: unexpected warning: $(cat "$work/err")"; return 1; }
    done
    # All three nodes in one step, against `lama map --cpus-per-task 2` on each node.
    run_srun -N3 -n3 -c2 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "-N3 -n3 -c2" "node1:0-1 node2:0-1 node3:0-1" "$(actual_cpus)" || return 1
    assert_eq "predicted" "$(predict --map scbnh --cpus-per-task 2)" "$(actual_cpus)" || return 1
    # Without -c nothing changes: one core per task.
    run_srun -w node3 -n2 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "without -c" "node3:0 node3:1" "$(actual_cpus)"
}

t_narrower_bind_warns_once() {
    # An explicit binding narrower than -c runs as asked and says so once per step, even when
    # the step spans nodes.
    run_srun -N2 -w node1,node3 -n2 -c2 --lama-map=scbnh --lama-bind=1c || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "bound as asked" "node1:0 node3:0" "$(actual_cpus)" || return 1
    assert_eq "warnings" "1" "$(grep -c 'warning: binding 1c gives a task 1 CPU(s) (threads, as Slurm counts them here) but -c/--cpus-per-task asks for 2' "$work/err")" || return 1
    # The same for the site's default binding.
    set_plugstack "map=scbnh bind=1c"
    run_srun -w node3 -n1 -c2
    local rc=$?
    reset_plugstack
    [ $rc -eq 0 ] || fail "srun with the site default failed: $(cat "$work/err")" || return 1
    assert_eq "site default bound as asked" "node3:0" "$(actual_cpus)" || return 1
    assert_eq "site default warnings" "1" "$(grep -c 'warning: binding 1c' "$work/err")"
}

t_membind() {
    # The kernel's view of each task's memory: Mems_allowed_list (the cpuset) and the policy
    # /proc/self/numa_maps shows (a child process inherits it, like the application would).
    local report='echo "$SLURM_PROCID $(hostname -s) ${LAMA_MEMS-unset} ${LAMA_MEMBIND-unset} $(grep Mems_allowed_list /proc/self/status | cut -f2) $(awk "NR == 1 { print \$2 }" /proc/self/numa_maps)"'
    as_user srun -N3 -n3 --lama-map=scbnh --lama-membind=local bash -c "$report" 2> "$work/err" | sort -n > "$work/mem" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "local" "0 node1 0 local 0 bind:0
1 node2 0 local 0 bind:0
2 node3 0 local 0 bind:0" "$(cat "$work/mem")" || return 1
    as_user srun -w node1 -n1 --lama-map=scbnh --lama-membind=preferred bash -c "$report" > "$work/mem" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "preferred" "0 node1 0 preferred 0 prefer:0" "$(cat "$work/mem")" || return 1
    # Without a CPU binding memory is left alone, and --lama-verbose says so.
    as_user srun -w node1 -n1 --lama-map=scbnh --lama-bind=none --lama-membind=local --lama-verbose bash -c "$report" > "$work/mem" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "no CPU binding" "0 node1 unset unset 0 default" "$(cat "$work/mem")" || return 1
    grep -qF "memory not bound (local needs a CPU binding)" "$work/err" || fail "verbose: $(cat "$work/err")" || return 1
    # The verbose line shows the nodes.
    as_user srun -w node1 -n1 --lama-map=scbnh --lama-membind=local --lama-verbose true 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    grep -qF ": cpus 0 package[0][core:0], mems 0 local" "$work/err" || fail "verbose: $(cat "$work/err")" || return 1
    # The site default, and a bad value refused before launch.
    set_plugstack "membind=local"
    as_user srun -w node1 -n1 --lama-map=scbnh bash -c "$report" > "$work/mem" 2> "$work/err"
    local rc=$?
    reset_plugstack
    [ $rc -eq 0 ] || fail "srun with membind=local failed: $(cat "$work/err")" || return 1
    assert_eq "site default" "0 node1 0 local 0 bind:0" "$(cat "$work/mem")" || return 1
    as_user srun -n1 --lama-map=scbnh --lama-membind=strict true > /dev/null 2> "$work/err" \
        && { fail "srun ran with --lama-membind=strict"; return 1; }
    grep -qF "lama: --lama-membind: invalid memory binding 'strict'" "$work/err" || fail "message: $(cat "$work/err")"
}

t_one_distribution_hint() {
    # One hint per step, from the first node, saying what it assumed.
    as_user srun -N3 -n6 --lama-map=scbnh --lama-verbose true > /dev/null 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "hints" "1" "$(grep -c 'spreads ranks over nodes' "$work/err")" || return 1
    grep -qF "assuming the step's 3 nodes are shaped like node1" "$work/err" || fail "hint: $(grep spreads "$work/err")" || return 1
    # `lama map` with every node's topology gives the exact node assignment; srun -m arbitrary
    # with its SLURM_HOSTFILE runs every rank on the node lama said, bound as lama said.
    "$lama" map --topology "$work/node1.xml" --topology "$work/node2.xml" --topology "$work/node3.xml" \
        --np 6 --map nscbh --node-names 'node[1-3]' -m arbitrary --hostfile "$work/hosts" > "$work/plan" \
        || fail "lama map failed" || return 1
    as_user sh -c 'cat > /tmp/lama-hosts' < "$work/hosts" || return 1
    local srun_prefix=(env SLURM_HOSTFILE=/tmp/lama-hosts)
    run_srun -m arbitrary -n6 --lama-map=nscbh || fail "srun -m arbitrary failed: $(cat "$work/err")" || return 1
    assert_eq "nodes of the ranks" "$(tr '\n' ' ' < "$work/hosts" | sed 's/ $//')" "$(report_field 2)" || return 1
    assert_eq "bindings" "$(predict --map nscbh)" "$(actual_cpus)"
}

t_preview_is_srun() {
    # One `lama map` over the three nodes (2 sockets, 1 core with 2 threads, 2 cores) with
    # srun's own options prints exactly the CPUs every task of the step got: srun deals the
    # ranks (2,2,1 of 5 on whole nodes), each node places its own; node2 binds one thread per
    # task (its one core cannot give two tasks a core each), the others one core. (Without
    # --exclusive, select/cons_tres gives node2 one task, its one core: 2,1,2; the preview's
    # counts are those of whole nodes, --tasks-per-node takes a shared job's.)
    local m
    for m in "" block cyclic plane=2; do
        run_srun --exclusive -N3 -n5 ${m:+-m "$m"} --lama-map=scbnh || fail "srun -m ${m:-default} failed: $(cat "$work/err")" || return 1
        assert_eq "srun -N3 -n5 -m ${m:-default}" "$(preview --map scbnh ${m:+-m "$m"})" "$(actual_cpus)" || return 1
        # The srun line pasted as it is: lama map -- srun ...
        assert_eq "lama map -- srun -N3 -n5 -m ${m:-default}" \
            "$(preview_line --exclusive -N3 -n5 ${m:+-m "$m"} --lama-map=scbnh)" "$(actual_cpus)" || return 1
        # By hand: cyclic puts ranks 0,3 on node1 (sockets 0 and 1), 1,4 on node2 (threads 0
        # and 1), 2 on node3 (core 0).
        [ "$m" != cyclic ] || assert_eq "cyclic by hand" "node1:0 node2:0 node3:0 node1:1 node2:1" "$(actual_cpus)" || return 1
    done
    # -c and --ntasks-per-node from the line (by hand: one task per node, -c2 binds both CPUs
    # of each node; node1 and node3, whose -c2 binding is the same, 2c: lama map previews
    # nodes of different -c bindings one at a time).
    run_srun --exclusive -w node1,node3 -N2 -n2 -c2 --ntasks-per-node=1 --lama-map=scbnh || fail "srun -c2: $(cat "$work/err")" || return 1
    assert_eq "srun -N2 -n2 -c2 by hand" "node1:0-1 node3:0-1" "$(actual_cpus)" || return 1
    assert_eq "lama map -- srun -N2 -n2 -c2 --ntasks-per-node=1" \
        "$(preview_line --exclusive -N2 -n2 -c2 --ntasks-per-node=1 --lama-map=scbnh)" "$(actual_cpus)" || return 1
    # LAMA's own order across nodes (-m arbitrary) is not what plain srun does: nscbh puts
    # rank 1 on node2, srun's block on node1.
    run_srun --exclusive -N3 -n5 --lama-map=nscbh || return 1
    assert_eq "srun -N3 -n5 nscbh" "$(preview --map nscbh)" "$(actual_cpus)" || return 1
    local own
    own=$(preview --map nscbh -m arbitrary)
    [ "$own" != "$(actual_cpus)" ] || fail "-m arbitrary previewed what plain srun does: $own" || return 1
    # Per-node restrictions: beside a job holding CPU 0 of node3, the step has CPU 1 there
    # only; `--restrict node3=1` previews it (without it, rank 3 would be on CPU 0). -n4:
    # Slurm gives node1 2 tasks, node2 and node3 one each, as srun's block deals 4 over 2,2,1.
    local hold rc
    hold=$(hold_cpus node3 1) || return 1
    run_srun -N3 -n4 --lama-map=scbnh
    rc=$?
    release "$hold" || return 1
    [ $rc -eq 0 ] || fail "srun beside the held CPU failed: $(cat "$work/err")" || return 1
    assert_eq "beside the held CPU, by hand" "node3:1" "$(awk '$1 == 3 { print $2 ":" $3 }' "$work/out")" || return 1
    assert_eq "beside the held CPU" "$(preview --map scbnh --restrict node3=1)" "$(actual_cpus)"
}

t_slurm_own_placement() {
    # Without LAMA, `lama map` shows what Slurm itself gives each task (lama map --slurm, and a
    # pasted line without --lama-map): for each line, every task's Cpus_allowed_list equals
    # the preview's over the three nodes (2 sockets; 1 core of 2 threads; 2 cores). Steps in
    # a job holding the nodes (salloc --exclusive) have every CPU of the job; srun's own
    # --exclusive, and -c, make the step exact. By hand (task/affinity's dist_tasks.c):
    # 2 tasks a node bind to sockets on node1, threads on node2, cores on node3; cores binding
    # gives node2's one task its whole core; mask_cpu:0x2,0x1 puts each node's first task on
    # CPU 1; an exact step of one task a node has one core of node1 and node3 (bound to it)
    # and node2's one core (its 2 threads, which fill its one socket).
    local srun_prefix=(salloc -N3 --exclusive) line
    local lines=("-N3 -n3" "-N3 -n6" "-N3 -n3 --cpu-bind=threads" "-N3 -n3 --cpu-bind=cores"
        "-N3 -n3 --cpu-bind=map_cpu:1" "-N3 -n6 --cpu-bind=mask_cpu:0x2,0x1"
        "-N3 -n6 -m block:block --cpu-bind=sockets" "-N3 -n3 --hint=nomultithread" "-N3 -n3 -c2"
        "-N3 -n3 --ntasks-per-socket=1" "-N3 -n6 -m cyclic:fcyclic --cpu-bind=threads"
        "-N3 -n3 --threads-per-core=1")
    for line in "${lines[@]}" "EXACT --exclusive -N3 -n3"; do
        if [[ $line == EXACT* ]]; then srun_prefix=(); line=${line#EXACT }; fi
        # shellcheck disable=SC2086
        run_srun $line || fail "srun $line failed: $(cat "$work/err")" || return 1
        # shellcheck disable=SC2086
        assert_eq "srun $line (Slurm's own)" "$(preview_line $line)" "$(actual_cpus)" || return 1
        case $line in
            "-N3 -n6") assert_eq "$line by hand" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1 ;;
            "-N3 -n3 --cpu-bind=cores") assert_eq "$line by hand" "node1:0 node2:0-1 node3:0" "$(actual_cpus)" || return 1 ;;
            *mask_cpu*) assert_eq "$line by hand" "node1:1 node1:0 node2:1 node2:0 node3:1 node3:0" "$(actual_cpus)" || return 1 ;;
            "--exclusive -N3 -n3") assert_eq "$line by hand" "node1:0 node2:0-1 node3:0" "$(actual_cpus)" || return 1 ;;
        esac
    done
    # The same through --slurm: the options as lama map's own, one line.
    srun_prefix=(salloc -N3 --exclusive)
    run_srun -N3 -n6 --cpu-bind=cores || return 1
    assert_eq "lama map --slurm --cpu-bind cores" "$(preview --slurm --cpu-bind cores)" "$(actual_cpus)"
}

t_verify() {
    # `lama verify` as each task of the step: what every thread runs on, the variables, the
    # GPUs, against the task's LAMA_* and the preview (`lama map --json` with srun's options,
    # copied to each node); `--collect` sums the step up, and fails on empty input.
    local h rc d
    for d in block cyclic; do
        "$lama" map --topology "$work/node1.xml" --topology "$work/node2.xml" --topology "$work/node3.xml" \
            --node-names node1,node2,node3 --np 5 --map scbnh -m $d --json > "$work/$d.json" 2> "$work/map.err" || fail "lama map -m $d failed" || return 1
        for h in node1 node2 node3; do
            on "$h" sh -c "cat > /tmp/lama-$d.json && chmod 644 /tmp/lama-$d.json" < "$work/$d.json" || return 1
        done
    done
    as_user srun --exclusive -N3 -n5 --lama-map=scbnh lama verify --expect /tmp/lama-block.json --json > "$work/out" 2> "$work/err" \
        || fail "lama verify in the step failed: $(cat "$work/out" "$work/err")" || return 1
    "$lama" verify --collect --np 5 < "$work/out" > "$work/sum" || fail "collect: $(cat "$work/sum")" || return 1
    assert_eq "the step confirms the preview" "lama verify: 5 tasks on 3 nodes: 5 agree" "$(cat "$work/sum")" || return 1
    "$lama" verify --collect < /dev/null > /dev/null && { fail "--collect passed on no input"; return 1; }
    # A preview of another distribution (cyclic; srun dealt block) is caught: rank 1 is on
    # node1's CPU 1, the preview puts it on node2.
    as_user srun --exclusive -N3 -n5 --lama-map=scbnh lama verify --expect /tmp/lama-cyclic.json > "$work/out" 2> "$work/err" \
        && { fail "lama verify passed against the cyclic preview"; return 1; }
    grep -q "^lama verify: rank 1 on node1: DIFFERS: the preview gives rank 1 CPUs 0, the plugin bound 1$" "$work/out" \
        || fail "no difference for rank 1: $(cat "$work/out")" || return 1
    # An affinity changed behind the task's back (taskset inside the task) is caught; the same
    # step without it agrees.
    for h in "" taskset; do
        as_user srun -w node1 -N1 -n2 --exclusive --lama-map=scbnh bash -c \
            "${h:+taskset -pc \$((1 - SLURM_LOCALID)) \$\$ > /dev/null && }exec lama verify" > "$work/out" 2> "$work/err"
        rc=$?
        sort -o "$work/out" "$work/out"
        if [ -z "$h" ]; then
            [ $rc -eq 0 ] || fail "lama verify failed: $(cat "$work/out" "$work/err")" || return 1
            assert_eq "untouched tasks" "lama verify: rank 0 on node1: agrees: 1 thread on CPUs 0 (1c)
lama verify: rank 1 on node1: agrees: 1 thread on CPUs 1 (1c)" "$(cat "$work/out")" || return 1
        else
            [ $rc -ne 0 ] || fail "lama verify passed after taskset: $(cat "$work/out")" || return 1
            assert_eq "after taskset" "rank 0 on node1: DIFFERS: thread runs on CPUs 1, not LAMA_CPUS 0
rank 1 on node1: DIFFERS: thread runs on CPUs 0, not LAMA_CPUS 1" \
                "$(sed 's/^lama verify: //; s/thread [0-9]* (lama) of pid [0-9]*/thread/' "$work/out")" || return 1
        fi
    done
    # A thread started before the binding keeps the wide mask (latethread before), one started
    # after it agrees; lama verify watches the program's threads while it runs. (-c2 gives the
    # step both CPUs, --lama-bind=1c binds the task to one: the wide mask is the step's.)
    for h in after before; do
        as_user srun -w node1 -N1 -n1 -c2 --exclusive --lama-map=scbnh --lama-bind=1c lama verify -- /opt/lama-tests/latethread $h 1 > "$work/out" 2> "$work/err"
        rc=$?
        if [ $h == after ]; then
            [ $rc -eq 0 ] || fail "latethread after: $(cat "$work/out" "$work/err")" || return 1
            assert_eq "latethread after" "lama verify: rank 0 on node1: agrees: 2 threads on CPUs 0 (1c)" "$(cat "$work/out")" || return 1
        else
            [ $rc -ne 0 ] || fail "latethread before passed: $(cat "$work/out")" || return 1
            assert_eq "latethread before" "lama verify: rank 0 on node1: DIFFERS: thread runs on CPUs 0-1, not LAMA_CPUS 0" \
                "$(sed 's/thread [0-9]* (latethread) of pid [0-9]*/thread/' "$work/out")" || return 1
        fi
    done
    # GPUs: with --gpu-bind=none each task may open the node's four GPUs, and names its own
    # and its card, which CUDA opens first.
    as_user srun -w node1 -n2 --gpus-per-task=1 --gpu-bind=none --lama-map=gcsbnh lama verify > "$work/out" 2> "$work/err" \
        || fail "lama verify of a GPU step failed: $(cat "$work/out" "$work/err")" || return 1
    assert_eq "GPU step" "2" "$(grep -cE '^lama verify: rank [01] on node1: agrees: 1 thread on CPUs [01] \(1c\), GPUs [0-3] on card\(s\) 0000:[0-9a-f]{2}:00\.0 \(4 device\(s\) open\)$' "$work/out")" \
        || fail "$(cat "$work/out")" || return 1
    # A task of a two-GPU step with its CUDA_VISIBLE_DEVICES turned by one: CUDA would open
    # the other card first.
    as_user srun -w node1 -n1 --gpus=2 --lama-map=gcsbnh \
        sh -c 'v=$CUDA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES=${v#*,},${v%%,*} exec lama verify' > "$work/out" 2> "$work/err" \
        && { fail "lama verify agreed with another card first: $(cat "$work/out")"; return 1; }
    grep -qE '^lama verify: rank 0 on node1: DIFFERS: CUDA opens the card 0000:[0-9a-f]{2}:00\.0 as its device 0, not the task.s card 0000:[0-9a-f]{2}:00\.0$' "$work/out" \
        || fail "lama verify of another card first: $(cat "$work/out" "$work/err")"
}

# --- communication-aware plans -----------------------------------------------------------------

# plan_for NAME MATRIX-TEXT: `lama plan` for -N3 -n6 over the three nodes' topologies, written
# to $work/NAME.{lama,hosts} and copied to the submit host as /tmp/NAME.{lama,hosts}.
plan_for() {
    printf '%s\n' "$2" > "$work/$1.mat"
    "$lama" plan --matrix "$work/$1.mat" --np 6 --topology "$work/%n.xml" --node-names 'node[1-3]' \
        --bind hwthread --out "$work/$1" > "$work/$1.txt" 2>&1 || { fail "lama plan $1: $(cat "$work/$1.txt")"; return 1; }
    as_user sh -c "cat > /tmp/$1.lama" < "$work/$1.lama" && as_user sh -c "cat > /tmp/$1.hosts" < "$work/$1.hosts"
}


t_plan_ring_and_stencil() {
    local ring stencil name
    # A ring of 6 and a 3 x 2 stencil, dense and sparse.
    ring=$(for i in 0 1 2 3 4 5; do for j in 0 1 2 3 4 5; do
        if [ $(( (i + 1) % 6 )) -eq $j ] || [ $(( (j + 1) % 6 )) -eq $i ]; then printf '10 '; else printf '0 '; fi
    done; echo; done)
    stencil=$(printf '# i j volume\n0 1 5\n1 2 5\n3 4 5\n4 5 5\n0 3 5\n1 4 5\n2 5 5\n')
    plan_for ring "$ring" || return 1
    plan_for stencil "$stencil" || return 1
    for name in ring stencil; do
        grep -q "wins with cost" "$work/$name.txt" || fail "$name: $(cat "$work/$name.txt")" || return 1
        as_user env SLURM_HOSTFILE=/tmp/$name.hosts srun -m arbitrary -n6 --lama-plan=/tmp/$name.lama \
            bash -c "$task_report; env | grep -c LAMA_PLAN_TEXT >&2; true" > "$work/out" 2> "$work/err" \
            || fail "$name: srun failed: $(cat "$work/err")" || return 1
        sort -n -o "$work/out" "$work/out"
        report_complete 6 || return 1
        assert_eq "$name: each task as planned" "$(planned_cpus "$name")" "$(actual_cpus)" || return 1
        # The plan's text reached the plugin, not the application.
        assert_eq "$name: LAMA_PLAN_TEXT in the tasks" "0 0 0 0 0 0" "$(tr '\n' ' ' < "$work/err" | sed 's/ $//')" || return 1
    done
}

t_plan_in_batch() {
    # sbatch checks the plan when the job is submitted; the script's srun (on node1) reads the
    # same path again, as on a cluster whose file systems are shared (here: a copy on node1).
    plan_for batchring "$(printf '0 1 1\n1 2 1\n2 3 1\n3 4 1\n4 5 1\n5 0 1\n')" || return 1
    "$cluster" exec -u tester node1 sh -c 'cat > /tmp/batchring.lama' < "$work/batchring.lama" || return 1
    run_batch node1 "#SBATCH -N3 -n6 --lama-plan=/tmp/batchring.lama
printf '%s\n' $(tr '\n' ' ' < "$work/batchring.hosts") > /tmp/batchring.hosts
SLURM_HOSTFILE=/tmp/batchring.hosts srun -m arbitrary -n6 bash -c '$task_report'" || fail "batch job failed" || return 1
    report_complete 6 || return 1
    assert_eq "sbatch --lama-plan" "$(planned_cpus batchring)" "$(actual_cpus)" || return 1
    # A malformed plan is refused by sbatch itself: nothing is submitted.
    printf 'lama-plan 1\nranks 2\nrank 0 node1 pu 0 cpus 0\n' | as_user sh -c 'cat > /tmp/short.lama'
    as_user sbatch -N1 -n2 --lama-plan=/tmp/short.lama --wrap true > "$work/out" 2> "$work/err" \
        && { fail "sbatch submitted a malformed plan: $(cat "$work/out")"; return 1; }
    grep -qF "lama: --lama-plan: /tmp/short.lama: line 3: 'ranks 2' announced but 1 rank line(s) follow" "$work/err" \
        || fail "sbatch: $(cat "$work/err")"
}

t_plan_of_1000_ranks() {
    # A plan of 1,000 ranks (26 KB, over the 4 KiB that bounds Slurm's own variables) reaches
    # every task: all on node1, oversubscribed, rank i bound to CPU (i * 7 mod 3) mod 2, a
    # pattern no layout gives.
    awk 'BEGIN { print "lama-plan 1"; print "ranks 1000";
                 for (i = 0; i < 1000; i++) { c = (i * 7 % 3) % 2; printf "rank %d node1 pu %d cpus %d\n", i, c, c } }' \
        > "$work/big.lama"
    [ "$(wc -c < "$work/big.lama")" -gt 20000 ] || { fail "the plan is only $(wc -c < "$work/big.lama") bytes"; return 1; }
    as_user sh -c 'cat > /tmp/big.lama' < "$work/big.lama" || return 1
    as_user salloc -w node1 -n2 srun -n1000 --overcommit --lama-plan=/tmp/big.lama \
        bash -c 'echo "$SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' > "$work/out" 2> "$work/err" \
        || fail "srun -n1000 --lama-plan failed: $(head -c 500 "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    assert_eq "tasks" "1000" "$(wc -l < "$work/out")" || return 1
    assert_eq "each rank as planned" "$(awk '$1 == "rank" { print $2, $7 }' "$work/big.lama")" "$(cat "$work/out")"
}

t_plan_by_file() {
    # A plan over the 120 KiB that travel in the environment is read by each node from its
    # file, as the job's user: 1,000 ranks on node1 and node2 (oversubscribed), rank i bound to
    # CPU (i * 7 mod 3) mod 2, written with a long comment as lama plan's notes could be. The
    # nodes share no file system here: the same file is copied to the same path on each.
    { awk 'BEGIN { for (i = 0; i < 1700; i++) printf "# traffic note %04d: %s\n", i, "recorded by the application, kept with the plan it produced" }'
      awk 'BEGIN { print "lama-plan 1"; print "ranks 1000";
                   for (i = 0; i < 1000; i++) { c = (i * 7 % 3) % 2; printf "rank %d node%d pu %d cpus %d\n", i, 1 + (i % 2), c, c } }'
    } > "$work/file.lama"
    local size; size=$(wc -c < "$work/file.lama")
    [ "$size" -gt 122880 ] || { fail "the plan is only $size bytes, not over 120 KiB"; return 1; }
    awk '$1 == "rank" { print $3 }' "$work/file.lama" > "$work/file.hosts"
    local m
    for m in slurmctld node1 node2; do
        "$cluster" exec -u tester "$m" sh -c 'rm -f /tmp/file.lama /tmp/file.hosts; cat > /tmp/file.lama' < "$work/file.lama" || return 1
    done
    as_user sh -c 'cat > /tmp/file.hosts' < "$work/file.hosts" || return 1
    local step="salloc -w node[1-2] -N2 -n4 env SLURM_HOSTFILE=/tmp/file.hosts srun -m arbitrary -n1000 --overcommit --lama-plan=/tmp/file.lama"
    as_user $step bash -c 'echo "$SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2) $(env | grep -c ^LAMA_PLAN_)"' > "$work/out" 2> "$work/err" \
        || fail "srun -n1000 with a $size-byte plan failed: $(head -c 500 "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    assert_eq "tasks" "1000" "$(wc -l < "$work/out")" || return 1
    # Checked by hand: rank 0 CPU 0, rank 1 CPU 1, rank 2 CPU 0, rank 3 CPU 0 (0, 7, 14, 21 mod 3 = 0, 1, 2, 0).
    assert_eq "ranks 0-3" "0 0 0|1 1 0|2 0 0|3 0 0" "$(head -4 "$work/out" | paste -sd'|')" || return 1
    assert_eq "each rank as planned, no LAMA_PLAN_TEXT or LAMA_PLAN_FILE in the tasks" \
        "$(awk '$1 == "rank" { print $2, $7, 0 }' "$work/file.lama")" "$(cat "$work/out")" || return 1
    # node2's copy differs from what srun read (one CPU changed, same length): refused there.
    "$cluster" exec -u tester node2 sed -i 's/^rank 1 node2 pu 1 cpus 1$/rank 1 node2 pu 0 cpus 0/' /tmp/file.lama || return 1
    as_user $step true > "$work/out" 2> "$work/err" && { fail "a plan changed on node2 was applied"; return 1; }
    grep -qF "the plan /tmp/file.lama changed after srun read it (length:hash $size:" "$work/err" \
        || fail "changed plan: $(head -c 600 "$work/err")" || return 1
    # Root can read node2's copy, the job's user cannot: the node reads it as the user.
    on node2 sh -c 'rm -f /tmp/file.lama; cat > /tmp/file.lama; chmod 600 /tmp/file.lama' < "$work/file.lama" || return 1
    as_user $step true > "$work/out" 2> "$work/err" && { fail "a plan only root can read was applied"; return 1; }
    grep -qF "cannot read the plan /tmp/file.lama on this node as the job's user (Permission denied" "$work/err" \
        || fail "unreadable plan: $(head -c 600 "$work/err")" || return 1
    on node2 rm -f /tmp/file.lama
}

t_odd_environment() {
    # A variable whose value is not UTF-8 (byte 0xff, set inside the container: docker exec
    # would carry it as U+FFFD) in srun's environment refuses no step, with or without LAMA.
    local odd='export X="$(printf "\377")"; [ "$(printf %s "$X" | od -An -tx1 | tr -d " ")" = ff ] || exit 9;'
    as_user bash -c "$odd srun -w node3 -n1 true" > "$work/out" 2> "$work/err" \
        || fail "srun without LAMA options in an environment with X=0xff failed: $(cat "$work/err")" || return 1
    as_user bash -c "$odd srun -w node3 -n2 --lama-map=scbnh --lama-bind=1c bash -c '$task_report'" > "$work/out" 2> "$work/err" \
        || fail "srun --lama-map in an environment with X=0xff failed: $(cat "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    report_complete 2 || return 1
    assert_eq "placed as without X (by hand: one core each, sockets alternate)" "node3:0 node3:1" "$(actual_cpus)" || return 1
    # The same in a batch script (sbatch's environment, then the script's srun).
    as_user bash -c "$odd sbatch --parsable --wait -w node3 -n2 --lama-map=scbnh -o /tmp/odd.out --wrap 'srun bash -c \"grep Cpus_allowed_list /proc/self/status | cut -f2\"'" > /dev/null 2> "$work/err" \
        || fail "sbatch in an environment with X=0xff failed: $(cat "$work/err")" || return 1
    assert_eq "the batch step" "0 1" "$(on node3 sort -n /tmp/odd.out | tr '\n' ' ' | sed 's/ $//')"
}

t_plan_in_heterogeneous_step() {
    # A plan over the heterogeneous step `srun -w node2 -n2 : -w node1,node3 -N2 -n4`. Slurm
    # numbers component 0's tasks 0-1 (node2) and component 1's 2-5 (2,3 on node1, 4,5 on
    # node3), while slurmstepd counts each component's own from 0: the plan's ranks are the
    # step's. Each node's CPUs reversed (rank 0 on CPU 1), which no layout gives.
    printf 'lama-plan 1\nranks 6\n' > "$work/het.lama"
    printf 'rank %s %s pu %s cpus %s\n' 0 node2 1 1  1 node2 0 0  2 node1 1 1  3 node1 0 0  4 node3 1 1  5 node3 0 0 \
        >> "$work/het.lama"
    [ "$(grep -c '^rank [0-5] node[1-3] pu [01] cpus [01]$' "$work/het.lama")" == 6 ] || fail "the plan: $(cat "$work/het.lama")" || return 1
    as_user sh -c 'cat > /tmp/het.lama' < "$work/het.lama" || return 1
    local p=(--lama-plan=/tmp/het.lama --lama-verbose)
    as_user timeout 120 srun -w node2 -n2 "${p[@]}" bash -c "$task_report" : -w node1,node3 -N2 -n4 "${p[@]}" bash -c "$task_report" \
        > "$work/out" 2> "$work/err" || fail "the heterogeneous step with a plan failed: $(cat "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    report_complete 6 || return 1
    assert_eq "each task as planned (by hand)" "node2:1 node2:0 node1:1 node1:0 node3:1 node3:0" "$(actual_cpus)" || return 1
    assert_eq "as the plan says" "$(planned_cpus het)" "$(actual_cpus)" || return 1
    assert_eq "verbose lines" 6 "$(grep -c '^lama plan - node[1-3], task ' "$work/err")" || return 1
    # Ranks 0-1 on node1 and 2-3 on node2: as many tasks per node as Slurm starts, but not the
    # ranks it gives there. Each task's SLURM_PROCID is checked: none of theirs runs (node3's,
    # planned as Slurm numbers them, may run before the step is stopped).
    sed -e 's/^rank \([0-1]\) node2 /rank \1 nodeX /' -e 's/^rank \([2-3]\) node1 /rank \1 node2 /' -e 's/ nodeX / node1 /' \
        "$work/het.lama" | as_user sh -c 'cat > /tmp/het-swapped.lama' || return 1
    p=(--lama-plan=/tmp/het-swapped.lama)
    as_user timeout 120 srun -w node2 -n2 "${p[@]}" bash -c "$task_report" : -w node1,node3 -N2 -n4 "${p[@]}" bash -c "$task_report" \
        > "$work/out" 2> "$work/err" && { fail "a plan against Slurm's ranks ran: $(cat "$work/out")"; return 1; }
    grep -qE "node2: task [23]: Slurm started rank [01] here where the plan has rank [23]" "$work/err" \
        || fail "swapped ranks: $(head -c 800 "$work/err")" || return 1
    assert_empty "tasks that ran on node1 or node2" "$(grep -E '^[0-9]+ node[12] ' "$work/out")"
}

t_forged_heterogeneous_environment() {
    # A user exports a heterogeneous job's variables under their old names (SLURM_PACK_SIZE,
    # SLURM_*_PACK_GROUP_1), with a node list of 100,000 names behind a 60,000-character prefix
    # (about 6 GB expanded), before a plain srun of a 1-rank plan. srun decides heterogeneity by
    # SLURM_HET_SIZE alone, and so does the plugin now: the step is a plain one, placed as planned (by hand:
    # CPU 1), and slurmstepd stays small (it grew to 6.1 GB on 24.11 and 6.0 GB on 26.05 when
    # the plugin expanded the list; about 11 MiB now). The task reads its parent's
    # (slurmstepd's) peak memory, bounded by what a step may grow slurmstepd by.
    printf 'lama-plan 1\nranks 1\nrank 0 node1 pu 1 cpus 1\n' | as_user sh -c 'cat > /tmp/forged.lama' || return 1
    local prefix report
    prefix=$(head -c 60000 /dev/zero | tr '\0' p)
    report='echo "$(grep Cpus_allowed_list /proc/self/status | cut -f2) $(awk "/^VmHWM/ { print \$2 }" /proc/$PPID/status) $(cat /proc/$PPID/comm)"'
    # (-c2: the step has both of node1's CPUs, and the plan takes CPU 1 of them, where Slurm
    # alone would bind the task to both.)
    as_user timeout 120 salloc -w node1 -n1 -c2 sh -c "export SLURM_PACK_SIZE=2 SLURM_JOB_ID_PACK_GROUP_1=\$SLURM_JOB_ID \
        SLURM_JOB_NODELIST_PACK_GROUP_1='${prefix}[0-99999]'; srun -n1 -c2 --lama-plan=/tmp/forged.lama sh -c '$report'" \
        > "$work/out" 2> "$work/err" || fail "the step failed: $(head -c 600 "$work/err")" || return 1
    local cpus kb comm
    read -r cpus kb comm < <(grep -E '^[0-9]' "$work/out")
    assert_eq "the planned CPU (by hand)" 1 "$cpus" || return 1
    assert_eq "the task's parent" slurmstepd "$comm" || return 1
    [[ "$kb" =~ ^[0-9]+$ ]] && [ "$kb" -lt $((64 * 1024)) ] \
        || fail "slurmstepd's peak memory: [$kb] kB, not under 64 MiB (the bound ARCHITECTURE.md states for a step)" || return 1
    echo "    slurmstepd's peak memory (VmHWM): $((kb / 1024)) MiB" >&2
    # The same before a step placed by GPU (a 'g' layout reads this node's name too): placed
    # beside its GPU, slurmstepd small.
    as_user timeout 120 salloc -w node1 -n1 --gres=gpu:1 sh -c "export SLURM_PACK_SIZE=2 SLURM_JOB_ID_PACK_GROUP_1=\$SLURM_JOB_ID \
        SLURM_JOB_NODELIST_PACK_GROUP_1='${prefix}[0-99999]'; srun -n1 --lama-map=gcsbnh sh -c '$report'" \
        > "$work/out" 2> "$work/err" || fail "the GPU step failed: $(head -c 600 "$work/err")" || return 1
    read -r cpus kb comm < <(grep -E '^[0-9]' "$work/out")
    assert_eq "the GPU step's task's parent" slurmstepd "$comm" || return 1
    [[ "$cpus" =~ ^[01]$ ]] || fail "the GPU step's task: CPUs [$cpus], not one core" || return 1
    [[ "$kb" =~ ^[0-9]+$ ]] && [ "$kb" -lt $((64 * 1024)) ] \
        || fail "slurmstepd's peak memory in the GPU step: [$kb] kB, not under 64 MiB (the bound ARCHITECTURE.md states for a step)" || return 1
    echo "    slurmstepd's peak memory in the GPU step (VmHWM): $((kb / 1024)) MiB" >&2
}

t_forged_plan_file() {
    # A forged LAMA_PLAN_FILE: a plan of 2,000,000 ranks on as many nodes (about 60 MB) with
    # its true length and digest, whose reference claims the step's 2 ranks, before
    # srun -n2 --lama-plan= naming a file srun cannot read (so srun carries the inherited
    # reference and the nodes read the file). Before, each node's slurmstepd read it whole and
    # looked every line's node up among all the names seen so far: srun still waited after
    # 40 s, and the nodes stayed "completing" after the job was gone. Now each node refuses it
    # by its size before reading it. Then a running step of the same job is cancelled: every
    # node comes back idle, none drained, and the next step runs.
    awk 'BEGIN { print "lama-plan 1"; print "ranks 2000000"; for (i = 0; i < 2000000; i++) printf "rank %d n%d pu 0 cpus 0\n", i, i }' \
        > "$work/forged.lama"
    local digest m
    # lama_planfile::digest: the length and the 64-bit FNV-1a hash.
    digest=$(python3 -c 'import sys
h = 0xcbf29ce484222325
d = open(sys.argv[1], "rb").read()
for b in d:
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%d:%016x" % (len(d), h))' "$work/forged.lama") || return 1
    # On the nodes only: the submit host cannot read it (srun checks a plan it can read).
    for m in node1 node2; do
        "$cluster" exec -u tester "$m" sh -c 'rm -f /tmp/forged-big.lama; cat > /tmp/forged-big.lama' < "$work/forged.lama" || return 1
    done
    as_user timeout 300 salloc -w node[1-2] -N2 -n2 sh -c "
        export LAMA_PLAN_FILE='2 $digest /tmp/forged-big.lama'
        t0=\$(date +%s%N); srun -n2 --lama-plan=/nonexistent true; rc=\$?; t1=\$(date +%s%N)
        echo \"forged: rc \$rc ms \$(( (t1 - t0) / 1000000 ))\"
        unset LAMA_PLAN_FILE
        srun -n2 sleep 300 & sleep 5; scancel \$SLURM_JOB_ID; wait" > "$work/out" 2> "$work/err"
    local rc ms
    read -r _ _ rc _ ms < <(grep '^forged: ' "$work/out")
    [ -n "$rc" ] && [ "$rc" != 0 ] || fail "the forged plan's step ran or did not report: $(cat "$work/out") $(head -c 600 "$work/err")" || return 1
    grep -qE "the plan /tmp/forged-big.lama is [0-9]+ bytes, more than a plan of 2 ranks may be" "$work/err" \
        || fail "the refusal: $(head -c 600 "$work/err")" || return 1
    echo "    the forged plan refused in $ms ms (srun's whole step)" >&2
    # srun's whole step, launch and refusal on two nodes (before: more than 40 s).
    [ "$ms" -lt 15000 ] || fail "the forged plan took $ms ms to refuse" || return 1
    wait_for 120 nodes_idle || fail "after the cancel: $(node_states)" || return 1
    as_user sinfo -h -N -o '%N %T %E' | grep -iE 'drain|fail' && { fail "a node is drained"; return 1; }
    as_user srun -w node[1-2] -N2 -n2 true || fail "the next step did not run" || return 1
    for m in node1 node2; do on "$m" rm -f /tmp/forged-big.lama; done
}

t_bad_plan_refused() {
    plan_for ring6 "$(printf '0 1 1\n1 2 1\n2 3 1\n3 4 1\n4 5 1\n5 0 1\n')" || return 1
    # A plan edited by hand into nonsense: refused before launch, with its line.
    sed 's/^rank 3 \([a-z0-9]*\) pu \([0-9]*\) cpus .*/rank 3 \1 pu \2 cpus 0-x/' "$work/ring6.lama" | as_user sh -c 'cat > /tmp/bad.lama'
    as_user env SLURM_HOSTFILE=/tmp/ring6.hosts srun -m arbitrary -n6 --lama-plan=/tmp/bad.lama true > /dev/null 2> "$work/err" \
        && { fail "srun ran a malformed plan"; return 1; }
    grep -qF "lama: --lama-plan: /tmp/bad.lama: line 7: invalid CPU list" "$work/err" || fail "malformed: $(cat "$work/err")" || return 1
    # Another number of ranks: refused before launch.
    as_user srun -N2 -n4 --lama-plan=/tmp/ring6.lama true > /dev/null 2> "$work/err" \
        && { fail "srun ran a plan for 6 ranks with 4"; return 1; }
    grep -qF "is for 6 ranks but this step has 4 tasks" "$work/err" || fail "rank count: $(cat "$work/err")" || return 1
    # Slurm's own distribution instead of the plan's hosts: the step stops, no task runs.
    run_srun -N3 -n6 --lama-plan=/tmp/ring6.lama && { fail "srun ran ranks on nodes the plan did not name"; return 1; }
    grep -qE "rank [0-9]+ is planned on node[0-9] but Slurm started it on node[0-9]|the plan puts" "$work/err" \
        || fail "nodes: $(cat "$work/err")" || return 1
    assert_empty "tasks that ran" "$(cat "$work/out")" || return 1
    # A CPU outside the step's cpuset (another job holds CPU 0 of node3).
    printf 'lama-plan 1\nranks 1\nrank 0 node3 pu 0 cpus 0\n' | as_user sh -c 'cat > /tmp/cpu0.lama'
    local holder; holder=$(hold_cpus node3 1) || return 1
    run_srun -w node3 -n1 --lama-plan=/tmp/cpu0.lama
    local rc=$?
    release "$holder" || return 1
    [ $rc -ne 0 ] || fail "srun ran a plan outside its cpuset" || return 1
    grep -qF "rank 0 is planned on CPUs 0 but this step has only 1 on node3" "$work/err" || fail "cpuset: $(cat "$work/err")" || return 1
    # --lama-plan with --lama-map, or with a bad --lama-membind.
    as_user srun -n1 --lama-plan=/tmp/ring6.lama --lama-map=scbnh true > /dev/null 2> "$work/err" \
        && { fail "srun ran --lama-plan with --lama-map"; return 1; }
    grep -qF "cannot be combined with --lama-map" "$work/err" || fail "combined: $(cat "$work/err")" || return 1
    as_user srun -n6 --lama-plan=/tmp/ring6.lama --lama-membind=strict true > /dev/null 2> "$work/err" \
        && { fail "srun ran --lama-plan with --lama-membind=strict"; return 1; }
    grep -qF "invalid memory binding 'strict'" "$work/err" || fail "membind: $(cat "$work/err")"
}

# --- Slurm's node rank: topology order (Slurm 26.05) ----------------------------------------

# A key of the running controller's configuration (scontrol show config), and whether it has a
# value: controller_config KEY, controller_has KEY VALUE
controller_config() { on slurmctld scontrol show config | awk -v k="$1" '$1 == k { print $3; exit }'; }
controller_has() { [ "$(controller_config "$1")" == "$2" ]; }
# True once NODE's slurmd logged a start after line N of its log: slurmd_started_since NODE N
slurmd_started_since() { slurmd_log_since "$1" "$(($2 + 1))" | grep -q "slurmd started on"; }

# Applies a changed slurm.conf or topology.conf on every daemon: `scontrol reconfigure`, which
# from Slurm 23.11 on restarts slurmctld and every slurmd (new processes, in place under -D:
# slurmctld logs "Attempting to reconfigure", each slurmd "Caught SIGHUP. Triggering
# reconfigure" then "slurmd started on"). Waits until the controller reports TopologyPlugin
# PLUGIN, every slurmd has started again and every node is idle: reconfigure_cluster PLUGIN
reconfigure_cluster() {
    local want=$1 m marks=()
    for m in "${nodes[@]}"; do marks+=("$(slurmd_log_lines "$m")"); done
    on slurmctld scontrol reconfigure || { fail "scontrol reconfigure failed"; return 1; }
    wait_for 60 controller_has TopologyPlugin "$want" \
        || fail "the controller reports TopologyPlugin=$(controller_config TopologyPlugin), not $want" || return 1
    local i=0
    for m in "${nodes[@]}"; do
        wait_for 60 slurmd_started_since "$m" "${marks[$i]}" || fail "slurmd on $m did not start again" || return 1
        i=$((i + 1))
    done
    wait_for 60 nodes_idle || fail "nodes not idle after the reconfiguration: $(as_user sinfo -h -N -o '%N %T' | tr '\n' ' ')"
}

t_topology_node_order() {
    # Slurm 26.05 numbers a job's nodes in topology order: select/cons_tres takes each node's
    # rank from the topology plugin (job_res->node_ranks from topology_g_get_rank, unless
    # SelectTypeParameters has CR_NO_DIST_TOPO_BLOCK) and the step's layout deals the task ids
    # block-wise over the nodes sorted by it (slurm_step_layout.c, _task_layout_topo; srun's
    # default and -m block, not -m cyclic), while a node's
    # place in the step (S_JOB_NODEID, SLURM_NODEID) stays its place in the name-sorted node
    # list. topology/tree ranks a node by its leaf switch's place in topology.conf
    # (docker/configs/topology-order/topology.conf: node3, node1, node2); the default
    # topology/flat ranks nothing. With that file every assertion below is on real steps: which
    # node each rank runs on, what it is bound to, and what the plugin says. Slurm 24.11 has no
    # topology-aware task layout: the same configuration leaves the ranks in name order there,
    # and the same checks run in that order. The cluster is restored and reconfigured at the
    # end, whatever failed.
    local order
    if [ "$slurm_release" == 24.11 ]; then
        order=(node1 node2 node3)
        echo "    (Slurm 24.11 has no topology-aware task layout: ranks stay in name order with topology.conf; checked in that order)" >&2
    else
        order=(node3 node1 node2)
    fi
    local before m rc=0
    before=$(controller_config TopologyPlugin)
    [ -n "$before" ] || { fail "no TopologyPlugin in scontrol show config"; return 1; }
    for m in slurmctld "${nodes[@]}"; do
        on "$m" sh -c 'cp -p /etc/slurm/slurm.conf /etc/slurm/slurm.conf.before-test &&
            { [ ! -e /etc/slurm/topology.conf ] || mv /etc/slurm/topology.conf /etc/slurm/topology.conf.before-test; } &&
            cat > /etc/slurm/topology.conf &&
            sed -i "/^TopologyPlugin=/Id" /etc/slurm/slurm.conf && echo TopologyPlugin=topology/tree >> /etc/slurm/slurm.conf' \
            < "$top/docker/configs/topology-order/topology.conf" || rc=1
    done
    [ $rc -eq 0 ] && { topology_order_steps "${order[@]}" || rc=1; }
    for m in slurmctld "${nodes[@]}"; do
        on "$m" sh -c 'mv /etc/slurm/slurm.conf.before-test /etc/slurm/slurm.conf && rm -f /etc/slurm/topology.conf &&
            { [ ! -e /etc/slurm/topology.conf.before-test ] || mv /etc/slurm/topology.conf.before-test /etc/slurm/topology.conf; }' || rc=1
    done
    reconfigure_cluster "$before" || return 1
    # As found: ranks in name order again.
    local task_report='echo "$SLURM_PROCID $(hostname -s) $SLURM_NODEID"'
    run_srun -N3 -n3 || fail "srun after the restore failed: $(cat "$work/err")" || return 1
    assert_eq "after the restore: rank, node, SLURM_NODEID" "0 node1 0|1 node2 1|2 node3 2" "$(paste -sd'|' "$work/out")" || return 1
    return $rc
}

# The checks of t_topology_node_order with topology/tree loaded, given the nodes in the order
# Slurm deals ranks to them: topology_order_steps FIRST SECOND THIRD
topology_order_steps() {
    local order=("$@") other=(node1 node2 node3) n std_report=$task_report
    [ "${order[*]}" != "${other[*]}" ] || other=(node3 node1 node2)
    reconfigure_cluster topology/tree || return 1
    # The controller read the file: three leaf switches, in the file's order.
    assert_eq "leaf switches" "sw3:node3 sw1:node1 sw2:node2" \
        "$(as_user scontrol show topology | awk '/Level=0/ { s = ""; n = ""; for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "SwitchName") s = kv[2]; if (kv[1] == "Nodes") n = kv[2] } printf "%s%s:%s", (c++ ? " " : ""), s, n }')" || return 1
    # Node index in the step (SLURM_NODEID: node1 0, node2 1, node3 2) against rank order.
    local want=() r=0
    for n in "${order[@]}"; do want+=("$r $n $((${n#node} - 1))"); r=$((r + 1)); done
    local task_report='echo "$SLURM_PROCID $(hostname -s) $SLURM_NODEID"'
    run_srun -N3 -n3 || fail "srun -N3 -n3 failed: $(cat "$work/err")" || return 1
    assert_eq "srun -N3 -n3: rank, node, SLURM_NODEID" "$(IFS='|'; echo "${want[*]}")" "$(paste -sd'|' "$work/out")" || return 1
    # Only the block distribution takes the nodes' ranks (_task_layout_topo in
    # slurm_step_layout.c): -m cyclic and -m plane=2 deal over the nodes in name order.
    task_report='echo "$SLURM_PROCID $(hostname -s)"'
    run_srun -N3 -n3 -m cyclic || fail "srun -m cyclic failed: $(cat "$work/err")" || return 1
    assert_eq "-m cyclic: ranks in name order" "0 node1|1 node2|2 node3" "$(paste -sd'|' "$work/out")" || return 1
    run_srun -N3 -n6 -m plane=2 || fail "srun -m plane=2 failed: $(cat "$work/err")" || return 1
    assert_eq "-m plane=2: ranks in name order" "0 node1|1 node1|2 node2|3 node2|4 node3|5 node3" "$(paste -sd'|' "$work/out")" || return 1
    task_report=$std_report

    # A layout: each node places its own ranks (two each, in Slurm's order), as lama map
    # predicts and by hand (node1: a socket each, node2: both threads of its core, node3: a core
    # each); --lama-verbose names, for every task, its node, its rank and its CPUs; one hint.
    local cpus_of=([1]="0 1" [2]="0-1 0-1" [3]="0 1") hand=() verbose=() c l
    r=0
    for n in "${order[@]}"; do
        l=0
        for c in ${cpus_of[${n#node}]}; do hand+=("$n:$c"); verbose+=("$r $n $l $c"); r=$((r + 1)); l=$((l + 1)); done
    done
    run_srun -N3 -n6 --lama-map=scbnh --lama-bind=1c --lama-verbose || fail "srun --lama-map failed: $(cat "$work/err")" || return 1
    assert_eq "nodes of the ranks" "${order[0]} ${order[0]} ${order[1]} ${order[1]} ${order[2]} ${order[2]}" "$(report_field 2)" || return 1
    assert_eq "against lama map" "$(predict --map scbnh --bind 1c)" "$(actual_cpus)" || return 1
    assert_eq "by hand" "${hand[*]}" "$(actual_cpus)" || return 1
    assert_eq "--lama-verbose: rank, node, local id, CPUs" "$(IFS='|'; echo "${verbose[*]}")" \
        "$(grep '^lama scbnh:1c - ' "$work/err" \
            | sed -E 's/^lama scbnh:1c - (node[0-9]+), task +([0-9]+) +([0-9]+) \[[0-9]+\]: cpus ([0-9,-]+) .*/\2 \1 \3 \4/' \
            | sort -n | paste -sd'|')" || return 1
    # The hint comes once, from the step's node 0 (S_JOB_NODEID), which is node1, the first
    # name, wherever rank 0 runs; it names the node whose shape it assumed.
    assert_eq "hints" "1" "$(grep -c 'spreads ranks over nodes' "$work/err")" || return 1
    grep -qF "assuming the step's 3 nodes are shaped like node1" "$work/err" || fail "hint: $(grep spreads "$work/err")" || return 1

    # lama map previews the step given the nodes in Slurm's rank order (--topology and
    # --node-names in that order): srun --exclusive -N3 -n5 deals 2, 2, 1 over them.
    run_srun --exclusive -N3 -n5 --lama-map=scbnh || fail "srun -N3 -n5 failed: $(cat "$work/err")" || return 1
    local topo=() json
    for n in "${order[@]}"; do topo+=(--topology "$work/$n.xml"); done
    json=$("$lama" map "${topo[@]}" --node-names "$(IFS=,; echo "${order[*]}")" --np 5 --map scbnh --json 2> "$work/map.err") \
        || fail "lama map failed: $(cat "$work/map.err")" || return 1
    assert_eq "lama map over the nodes in rank order" \
        "$(echo "$json" | jq -r '[.nodes[].name] as $n | [.processes | sort_by(.rank)[] | "\($n[.node]):\(.cpus | map(tostring) | join(","))"] | join(" ")' | sed 's/:0,1/:0-1/g')" \
        "$(actual_cpus)" || return 1
    # By hand: two ranks on a node get a CPU each (LAMA's default binding, 1c, falls back to
    # a thread each on node2's one core), one rank gets node2's core or a core of the others.
    hand=()
    for n in "${order[@]:0:2}"; do hand+=("$n:0" "$n:1"); done
    n=${order[2]}
    if [ "$n" == node2 ]; then hand+=("$n:0-1"); else hand+=("$n:0"); fi
    assert_eq "srun -N3 -n5 by hand" "${hand[*]}" "$(actual_cpus)" || return 1

    # A plan that follows Slurm's rank order runs without -m arbitrary: each rank on the node
    # and the CPU the plan names (each node's two ranks on its CPUs in reverse, which no binding
    # of Slurm's gives), and --lama-verbose says so per rank. The same CPUs in name order (in
    # 26.05's topology order on 24.11) are refused by the node holding rank 0, before any task
    # runs.
    local name plan_nodes
    for name in ranked other; do
        if [ $name == ranked ]; then plan_nodes=("${order[@]}"); else plan_nodes=("${other[@]}"); fi
        { echo "lama-plan 1"; echo "ranks 6"
          r=0; for n in "${plan_nodes[@]}"; do
              echo "rank $r $n pu 1 cpus 1"; echo "rank $((r + 1)) $n pu 0 cpus 0"; r=$((r + 2))
          done; } > "$work/$name.lama"
        as_user sh -c "cat > /tmp/$name.lama" < "$work/$name.lama" || return 1
    done
    run_srun -N3 -n6 --lama-plan=/tmp/ranked.lama --lama-verbose || fail "the plan in rank order failed: $(cat "$work/err")" || return 1
    assert_eq "each task as planned" "$(planned_cpus ranked)" "$(actual_cpus)" || return 1
    assert_eq "the plan by hand" "${order[0]}:1 ${order[0]}:0 ${order[1]}:1 ${order[1]}:0 ${order[2]}:1 ${order[2]}:0" "$(actual_cpus)" || return 1
    assert_eq "--lama-verbose of the plan: rank, node, CPUs" "$(awk '$1 == "rank" { print $2, $3, $7 }' "$work/ranked.lama" | paste -sd'|')" \
        "$(grep '^lama plan - ' "$work/err" \
            | sed -E 's/^lama plan - (node[0-9]+), task +([0-9]+) +[0-9]+ \[[0-9]+\]: cpus ([0-9,-]+) .*/\2 \1 \3/' \
            | sort -n | paste -sd'|')" || return 1
    run_srun -N3 -n6 --lama-plan=/tmp/other.lama && { fail "a plan against Slurm's rank order ran"; return 1; }
    grep -qF "lama: ${order[0]}: --lama-plan: rank 0 is planned on ${other[0]} but Slurm started it on ${order[0]}" "$work/err" \
        || fail "the plan against the rank order: $(cat "$work/err")" || return 1
    assert_empty "tasks that ran" "$(cat "$work/out")" || return 1
    # lama plan's own route, -m arbitrary with its hosts file, does not depend on the order.
    plan_for toporing "$(printf '0 1 1\n1 2 1\n2 3 1\n3 4 1\n4 5 1\n5 0 1\n')" || return 1
    local srun_prefix=(env SLURM_HOSTFILE=/tmp/toporing.hosts)
    run_srun -m arbitrary -n6 --lama-plan=/tmp/toporing.lama || fail "the -m arbitrary plan failed: $(cat "$work/err")" || return 1
    assert_eq "-m arbitrary plan: each task as planned" "$(planned_cpus toporing)" "$(actual_cpus)" || return 1
    srun_prefix=()

    # A heterogeneous step: node2, then node1 and node3 in Slurm's rank order, each component
    # placed by LAMA (by hand: node2's tasks both threads, the others a CPU each by local id),
    # and LAMA's verbose lines number the tasks exactly as Slurm's own --cpu-bind=verbose lines
    # of the same step do (per component: node, task, local id).
    local het=() hand_het=(node2:0-1 node2:0-1) opts=(--cpu-bind=verbose --lama-map=scbnh --lama-bind=1c --lama-verbose)
    for n in "${order[@]}"; do [ "$n" == node2 ] || het+=("$n"); done
    hand_het+=("${het[0]}:0" "${het[0]}:1" "${het[1]}:0" "${het[1]}:1")
    as_user timeout 120 srun -w node2 -n2 "${opts[@]}" bash -c "$task_report" : -w node1,node3 -N2 -n4 "${opts[@]}" bash -c "$task_report" \
        > "$work/out" 2> "$work/err" || fail "the heterogeneous step failed: $(cat "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    report_complete 6 || return 1
    assert_eq "heterogeneous step by hand" "${hand_het[*]}" "$(actual_cpus)" || return 1
    local slurm_lines lama_lines
    slurm_lines=$(sed -nE 's/^cpu-bind=MASK - (node[0-9]+), task +([0-9]+) +([0-9]+) .*/\1 \2 \3/p' "$work/err" | sort | paste -sd'|')
    lama_lines=$(sed -nE 's/^lama scbnh:1c - (node[0-9]+), task +([0-9]+) +([0-9]+) .*/\1 \2 \3/p' "$work/err" | sort | paste -sd'|')
    assert_eq "heterogeneous step: Slurm's verbose lines, by hand" \
        "$(printf '%s\n' "${het[0]} 0 0" "${het[0]} 1 1" "${het[1]} 2 0" "${het[1]} 3 1" "node2 0 0" "node2 1 1" | sort | paste -sd'|')" "$slurm_lines" || return 1
    assert_eq "heterogeneous step: LAMA's verbose lines as Slurm's" "$slurm_lines" "$lama_lines"
}

# --- the configuration matrix (tests/e2e/matrix.sh runs each on its docker/configs/ row) -------

# The value of KEY in a member's slurm.conf: slurm_conf MEMBER KEY
slurm_conf() { on "$1" sh -c "grep -E '^$2=' /etc/slurm/slurm.conf | cut -d= -f2-"; }

t_gpu_placement() {
    # node1 has four GPUs (docker/gres.conf, docker/node1-gpus.xml): by hand from the XML, GPUs
    # 0 and 1 and mlx5_0 are near CPU 0 (socket 0), GPUs 2 and 3 and mlx5_1 near CPU 1.
    # The last field: which of /dev/nvidia0-3 the task may open (o) or not (d: denied by the
    # step's or the task's devices cgroup under ConstrainDevices=yes).
    local task_report='echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${LAMA_GPUS-unset} ${CUDA_VISIBLE_DEVICES-unset} ${LAMA_NICS-unset} ${UCX_NET_DEVICES-unset} ${SLURM_STEP_GPUS-unset} ${CUDA_DEVICE_ORDER-unset} $(for g in 0 1 2 3; do (: < /dev/nvidia$g) 2>&1 | grep -q "not permitted" && printf d || printf o; done)"'
    # (The contain-devices row spells it True: the plugin reads no spelling, only what each task
    # may open.)
    local constrained=no
    on node1 grep -qiE '^ConstrainDevices=(yes|true|1|up)$' /etc/slurm/cgroup.conf && constrained=yes
    # --gpus-per-task=1: Slurm binds one GPU to each task (per_task:1; under
    # ConstrainDevices=yes each task can open only that one), the free GPU closest to the CPU
    # mask task/affinity computed for the task (gres.c, _get_gres_per_task). LAMA keeps Slurm's
    # GPU, read in each task (its SLURM_STEP_GPUS, or under ConstrainDevices=yes, where that is
    # 0 for every task, the device file it may open), and runs the task on the CPU of its GPU's
    # socket, with that socket's card; the vendor variable is Slurm's, naming one GPU.
    per_task_gpus() {
        local rank host cpus gpus visible nic ucx step order open
        while read -r rank host cpus gpus visible nic ucx step order open; do
            [[ "$gpus" =~ ^[0-3]$ ]] || { fail "$1: rank $rank: LAMA_GPUS [$gpus]"; return 1; }
            assert_eq "$1: rank $rank's CPU (GPU $gpus)" "$((gpus / 2))" "$cpus" || return 1
            assert_eq "$1: rank $rank's NIC" "mlx5_$((gpus / 2))" "$nic" || return 1
            assert_eq "$1: rank $rank's UCX_NET_DEVICES" "mlx5_$((gpus / 2)):1" "$ucx" || return 1
            assert_eq "$1: rank $rank may open its GPU $gpus" "o" "${open:$gpus:1}" || return 1
            [[ "$visible" =~ ^[0-3]$ ]] || { fail "$1: rank $rank: Slurm's CUDA_VISIBLE_DEVICES [$visible] is not one GPU"; return 1; }
            if [ "$constrained" == yes ]; then
                assert_eq "$1: rank $rank opens only its GPU" 1 "$(echo "$open" | tr -cd o | wc -c)" || return 1
                assert_eq "$1: rank $rank: Slurm numbers the task's GPU 0" "0 0" "$visible $step" || return 1
            else
                assert_eq "$1: rank $rank: Slurm's own GPU for the task" "$gpus" "$step" || return 1
            fi
        done < "$work/out"
        assert_eq "$1: ranks" "0 1" "$(report_field 1)"
    }
    if [ "$constrained" == yes ]; then
        # Slurm's own numbers in each task (no LAMA): every task's SLURM_STEP_GPUS is 0, and
        # only the device file of its own GPU opens.
        as_user srun -w node1 -n2 --gpus-per-task=1 --cpu-bind=map_cpu:1,0 bash -c "$task_report" > "$work/out" 2> "$work/err" \
            || fail "srun without LAMA failed: $(cat "$work/err")" || return 1
        sort -n -o "$work/out" "$work/out"
        assert_eq "SLURM_STEP_GPUS in each task" "0 0" "$(report_field 8)" || return 1
        assert_eq "what each task may open (rank 0 holds GPU 2, rank 1 GPU 0)" "ddod oddd" "$(report_field 10)" || return 1
    fi
    run_srun -w node1 -n2 --gpus-per-task=1 --lama-map=gcsbnh || fail "srun failed: $(cat "$work/err")" || return 1
    per_task_gpus "--gpus-per-task=1" || return 1
    # Slurm's choice against index order: task/affinity binds task 0 to CPU 1, so Slurm gives
    # it a GPU of socket 1 (2 or 3) and task 1 one of socket 0. Each task runs beside the GPU
    # it was given (LAMA's own order would put rank 0 beside GPU 0 on CPU 0).
    run_srun -w node1 -n2 --gpus-per-task=1 --cpu-bind=map_cpu:1,0 --lama-map=gcsbnh || fail "srun map_cpu failed: $(cat "$work/err")" || return 1
    per_task_gpus "map_cpu:1,0" || return 1
    assert_eq "map_cpu:1,0: Slurm gave rank 0 a GPU of socket 1, rank 1 one of socket 0" "1 0" \
        "$(report_field 4 | tr ' ' '\n' | awk '{ printf "%s%d", (NR > 1 ? " " : ""), $1 / 2 }')" || return 1
    assert_eq "map_cpu:1,0: CPUs" "1 0" "$(report_field 3)" || return 1
    # --ntasks-per-gpu=1 (srun writes Slurm's single:1): each task its own GPU, chosen as it
    # starts by its mask as above; LAMA keeps it. With 2, tasks share a GPU and no task can tell
    # which of the GPU's tasks it is: refused before the tasks run.
    run_srun -w node1 -n2 --ntasks-per-gpu=1 --cpu-bind=map_cpu:1,0 --lama-map=gcsbnh || fail "srun --ntasks-per-gpu=1 failed: $(cat "$work/err")" || return 1
    per_task_gpus "--ntasks-per-gpu=1, map_cpu:1,0" || return 1
    assert_eq "--ntasks-per-gpu=1: CPUs" "1 0" "$(report_field 3)" || return 1
    as_user srun -w node1 -n2 --ntasks-per-gpu=2 --lama-map=gcsbnh true > "$work/out" 2> "$work/err" \
        && { fail "--ntasks-per-gpu=2 with a g layout ran"; return 1; }
    grep -qF "one GPU shared by up to 2 tasks" "$work/err" || fail "no message for --ntasks-per-gpu=2: $(cat "$work/err")" || return 1
    # A layout without 'g' under a Slurm binding LAMA cannot follow task by task (tasks sharing
    # a GPU, closest): the step runs, and the user is told a task may run away from its GPU.
    local bind_opt
    for bind_opt in --ntasks-per-gpu=2 --gpu-bind=closest; do
        local gres=(); [ "$bind_opt" == --gpu-bind=closest ] && gres=(--gres=gpu:2)
        as_user srun -w node1 -n2 "${gres[@]}" "$bind_opt" --lama-map=csbnh true > "$work/out" 2> "$work/err" \
            || fail "$bind_opt with csbnh failed: $(cat "$work/err")" || return 1
        grep -qF "may run away from the GPUs Slurm gives it" "$work/err" \
            || fail "$bind_opt with csbnh: no warning: $(cat "$work/err")" || return 1
    done
    # A layout without 'g' where Slurm's choice and the layout disagree: csbnh puts rank 0 on
    # CPU 0, but Slurm gives rank 0 a GPU of socket 1 (its task/affinity mask is CPU 1). Each
    # task stays beside the GPU Slurm gave it, placed by csbnh there.
    run_srun -w node1 -n2 --gpus-per-task=1 --cpu-bind=map_cpu:1,0 --lama-map=csbnh || fail "srun csbnh failed: $(cat "$work/err")" || return 1
    per_task_gpus "csbnh, map_cpu:1,0" || return 1
    assert_eq "csbnh under Slurm's per-task GPUs: CPUs" "1 0" "$(report_field 3)" || return 1
    # Two GPUs per task on node1 (one CPU per socket, two GPUs near each): the GPUs outnumber
    # the CPUs near them, so their slots share CPUs. Slurm runs the step, and so does LAMA
    # (before, it refused it as oversubscribed): each task beside the two GPUs it may open.
    local want g
    run_srun -w node1 -n2 --gpus-per-task=2 --lama-map=gscbnh || fail "srun --gpus-per-task=2 failed: $(cat "$work/err")" || return 1
    while read -r rank host cpus gpus visible nic ucx step order open; do
        [[ "$gpus" =~ ^[0-3],[0-3]$ ]] || { fail "--gpus-per-task=2: rank $rank: LAMA_GPUS [$gpus]"; return 1; }
        want=$(for g in ${gpus/,/ }; do echo $((g / 2)); done | sort -u | paste -sd- -)
        assert_eq "--gpus-per-task=2: rank $rank's CPUs (GPUs $gpus)" "$want" "$cpus" || return 1
        for g in ${gpus/,/ }; do
            assert_eq "--gpus-per-task=2: rank $rank may open its GPU $g" "o" "${open:$g:1}" || return 1
        done
        [ "$constrained" != yes ] || assert_eq "--gpus-per-task=2: rank $rank opens only its GPUs" 2 "$(echo "$open" | tr -cd o | wc -c)" || return 1
    done < "$work/out"
    assert_eq "--gpus-per-task=2: four distinct GPUs" 4 "$(report_field 4 | tr ' ,' '\n\n' | sort -u | wc -l)" || return 1
    # --gres-flags=allow-task-sharing: Slurm still binds one GPU to each task (per_task:1) but
    # lets every task open all the step's GPUs, and names the task's GPU in its SLURM_STEP_GPUS
    # by its place among the job's GPUs (gres.c consolidates the bitmap there). Every task runs
    # beside the GPU Slurm named for it, with a g layout and with a CPU layout, and may open
    # the others. (Before, under ConstrainDevices=yes the plugin refused every such task.) The
    # step's GPUs are the two tasks' GPUs, one each.
    local layout step_gpus
    for layout in gcsbnh csbnh; do
        as_user srun -w node1 -n2 --gpus-per-task=1 --gres-flags=allow-task-sharing --cpu-bind=map_cpu:1,0 \
            --lama-map=$layout bash -c "$task_report" > "$work/out" 2> "$work/err" \
            || fail "allow-task-sharing $layout: srun failed: $(cat "$work/err")" || return 1
        sort -n -o "$work/out" "$work/out"
        assert_eq "allow-task-sharing $layout: ranks" "0 1" "$(report_field 1)" || return 1
        read -r -a step_gpus <<< "$(report_field 4 | tr ' ' '\n' | sort -n | paste -sd' ' -)"
        while read -r rank host cpus gpus visible nic ucx step order open; do
            [[ "$gpus" =~ ^[0-3]$ ]] || { fail "allow-task-sharing $layout: rank $rank: LAMA_GPUS [$gpus]: $(cat "$work/err")"; return 1; }
            assert_eq "allow-task-sharing $layout: rank $rank's CPU (GPU $gpus)" "$((gpus / 2))" "$cpus" || return 1
            [ "$(echo "$open" | tr -cd o | wc -c)" -ge 2 ] || { fail "allow-task-sharing $layout: rank $rank may open only [$open]"; return 1; }
            # Slurm's number is the GPU's place among the step's GPUs (or its index).
            [ "$step" == "$gpus" ] || [ "${step_gpus[$step]:-}" == "$gpus" ] \
                || { fail "allow-task-sharing $layout: rank $rank runs beside GPU $gpus, Slurm named $step of the step's ${step_gpus[*]}"; return 1; }
        done < "$work/out"
        assert_eq "allow-task-sharing $layout: distinct GPUs" 2 "$(report_field 4 | tr ' ' '\n' | sort -u | wc -l)" || return 1
        ! grep -qF "LAMA binds nothing" "$work/err" || fail "allow-task-sharing $layout: $(cat "$work/err")" || return 1
    done
    # The same under a site default (map=csbnh, no --lama-* option): every task runs, each on
    # the CPU of the GPU Slurm named for it.
    set_plugstack "map=csbnh"
    as_user srun -w node1 -n2 --gpus-per-task=1 --gres-flags=allow-task-sharing --cpu-bind=map_cpu:1,0 \
        bash -c "$task_report" > "$work/out" 2> "$work/err"
    local rc=$?
    reset_plugstack
    [ $rc -eq 0 ] || fail "allow-task-sharing under the site default: $(cat "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    assert_eq "allow-task-sharing, site default: ranks" "0 1" "$(report_field 1)" || return 1
    while read -r rank host cpus gpus visible nic ucx step order open; do
        assert_eq "allow-task-sharing, site default: rank $rank's CPU (GPU $gpus)" "$((gpus / 2))" "$cpus" || return 1
    done < "$work/out"
    # With --gpu-bind=none LAMA chooses: both tasks may open both GPUs, each sees its own first.
    run_srun -w node1 -n2 --gpus-per-task=1 --gpu-bind=none --lama-map=gcsbnh || fail "srun --gpu-bind=none failed: $(cat "$work/err")" || return 1
    while read -r rank host cpus gpus visible nic ucx step order open; do
        [[ "$gpus" =~ ^[0-3]$ ]] || { fail "rank $rank: LAMA_GPUS [$gpus]"; return 1; }
        assert_eq "--gpu-bind=none: rank $rank's CPU (GPU $gpus)" "$((gpus / 2))" "$cpus" || return 1
        assert_eq "--gpu-bind=none: rank $rank: CUDA_DEVICE_ORDER" "PCI_BUS_ID" "$order" || return 1
        [ "$(echo "$visible" | tr ',' '\n' | wc -l)" -eq 2 ] || { fail "rank $rank sees [$visible], not the step's two GPUs"; return 1; }
        assert_eq "rank $rank may open its GPU $gpus" "o" "${open:$gpus:1}" || return 1
        # Its own GPU first: node1's number, or under ConstrainDevices=yes the step's (0 for
        # the lower of its two GPUs).
        [ "$constrained" == yes ] || assert_eq "rank $rank: own GPU first" "$gpus" "${visible%%,*}" || return 1
    done < "$work/out"
    assert_eq "--gpu-bind=none: each task's own GPU first, different GPUs" "2" \
        "$(report_field 5 | tr ' ' '\n' | cut -d, -f1 | sort -u | wc -l)" || return 1
    # Another Slurm binding is refused before the tasks run, naming the ways out.
    as_user srun -w node1 -n2 --gpus-per-task=1 --gpu-bind=closest --lama-map=gcsbnh true > "$work/out" 2> "$work/err" \
        && { fail "--gpu-bind=closest with a g layout ran"; return 1; }
    grep -qF -- "--gpu-bind=none to let LAMA choose" "$work/err" || fail "no message for --gpu-bind=closest: $(cat "$work/err")" || return 1
    # All four GPUs for two tasks, bound to the CPUs near each task's GPU (1g). Fewer tasks than
    # GPUs are spread over the sockets (by hand: GPUs 0,1 are near CPU 0 and 2,3 near CPU 1):
    # GPUs 0 and 2, not 0 and 1, which would leave socket 1 and its GPUs idle.
    run_srun -w node1 -n2 --gres=gpu:4 --lama-map=gcsbnh --lama-bind=1g || fail "srun 1g failed: $(cat "$work/err")" || return 1
    assert_eq "1g CPUs" "0 1" "$(report_field 3)" || return 1
    assert_eq "1g GPUs (one per socket)" "0 2" "$(report_field 4)" || return 1
    assert_eq "1g visible GPUs (own first)" "0,1,2,3 2,0,1,3" "$(report_field 5)" || return 1
    run_srun -w node1 -n2 --gres=gpu:4 --lama-map=scbnh || fail "srun scbnh failed: $(cat "$work/err")" || return 1
    assert_eq "without g" "0 1" "$(report_field 3)" || return 1
    assert_eq "without g, Slurm's CUDA_VISIBLE_DEVICES" "0,1,2,3 0,1,2,3" "$(report_field 5)" || return 1
    assert_eq "without g, no LAMA_GPUS" "unset unset" "$(report_field 4)" || return 1
    # Isolation: each task sees only its own GPU.
    run_srun -w node1 -n2 --gres=gpu:4 --lama-map=gcsbnh --lama-bind=1g --lama-gpu-isolate || fail "srun isolate failed: $(cat "$work/err")" || return 1
    assert_eq "isolated visible GPUs" "0 2" "$(report_field 5)" || return 1
    # At most one task per GPU with two GPUs: three tasks are refused on the node.
    as_user srun -w node1 -n3 -O --gres=gpu:2 --lama-map=gcsbnh --lama-mppr=1:g true > "$work/out" 2> "$work/err" \
        && { fail "three tasks on two GPUs with 1:g ran"; return 1; }
    grep -qF "3 tasks with at most 1 per GPU need 3 GPU(s)" "$work/err" || fail "no k:g message: $(cat "$work/err")" || return 1
    # A step without GPUs, and 1g without a g layout (refused by srun before launch).
    as_user srun -w node2 -n1 --lama-map=gcsbnh true > "$work/out" 2> "$work/err" \
        && { fail "a g layout without GPUs ran"; return 1; }
    grep -qF "SLURM_STEP_GPUS is not set" "$work/err" || fail "no message for a step without GPUs: $(cat "$work/err")" || return 1
    as_user srun -w node1 -n1 --lama-map=scbnh --lama-bind=1g true > "$work/out" 2> "$work/err" \
        && { fail "1g without a g layout ran"; return 1; }
    grep -qF "lead --lama-map with 'g'" "$work/err" || fail "no message for 1g alone: $(cat "$work/err")"
}

t_gpu_files() {
    # gres.conf lists node1's cards of socket 1 first, so Slurm's GPUs 0 and 1 are /dev/nvidia2
    # and /dev/nvidia3: by hand, the driver files entrypoint.sh writes give minors 2 and 3 to
    # the cards at 84:00.0 and 85:00.0, which node1-gpus.xml puts near CPU 1. The plugin reads
    # which card each file is; by index it would take Slurm's GPU 0 for the card at 04:00.0
    # (CPU 0).
    local task_report='echo "$SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${LAMA_GPUS-unset} ${SLURM_STEP_GPUS-unset} ${CUDA_VISIBLE_DEVICES-unset}"'
    on node1 cp /etc/slurm/gres.conf /etc/slurm/gres.conf.before-test || return 1
    on node1 sh -c "printf 'AutoDetect=off\nNodeName=node1 Name=gpu File=/dev/nvidia[2-3] Cores=1\nNodeName=node1 Name=gpu File=/dev/nvidia[0-1] Cores=0\nNodeName=node1 Name=shard Count=8 File=/dev/nvidia[0-3]\n' > /etc/slurm/gres.conf"
    local rc=0
    gpu_files_steps || rc=1
    on node1 mv /etc/slurm/gres.conf.before-test /etc/slurm/gres.conf
    restart_slurmd node1 || rc=1
    return $rc
}

gpu_files_steps() {
    restart_slurmd node1 || return 1
    # Each task beside the card of the GPU Slurm numbers: GPUs 0 and 1 near CPU 1, 2 and 3 near
    # CPU 0.
    near() { while read -r rank cpus gpus step visible; do
        [[ "$gpus" =~ ^[0-3]$ ]] || { fail "$1: rank $rank: LAMA_GPUS [$gpus]"; return 1; }
        assert_eq "$1: rank $rank's CPU (Slurm's GPU $gpus)" "$(( gpus < 2 ? 1 : 0 ))" "$cpus" || return 1
    done < "$work/out"; }
    # The card CUDA opens (CUDA_DEVICE_ORDER=PCI_BUS_ID reads a number as the card of that rank
    # by bus, which here is not Slurm's): its UUID, the driver's for the card of Slurm's GPU g
    # (by hand: GPU 0 is /dev/nvidia2, the card at 84:00.0, minor 2).
    first_card() { while read -r rank cpus gpus step visible; do
        assert_eq "$1: rank $rank opens the card beside it first" \
            "GPU-5a11e000-0000-4000-8000-$(printf %012d $(( gpus < 2 ? gpus + 2 : gpus - 2 )))" "${visible%%,*}" || return 1
    done < "$work/out"; }
    run_srun -w node1 -n2 --gres=gpu:4 --lama-map=gcsbnh --lama-bind=1g || fail "srun 1g failed: $(cat "$work/err")" || return 1
    near "1g" || return 1
    first_card "1g" || return 1
    assert_eq "1g: one task per socket" "0 1" "$(report_field 2 | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')" || return 1
    # The job's SLURM_CONF is the user's: one pointing at a copy of slurm.conf beside a
    # gres.conf in the other order (on the submit host, for srun, and on node1) changes
    # nothing, since slurmstepd's own configuration is read (by hand: the same CPUs as above).
    local m fake=/tmp/lama-user-conf
    for m in slurmctld node1; do
        "$cluster" exec -u tester "$m" sh -c "rm -rf $fake && mkdir $fake && { cp -r /etc/slurm/. $fake/ 2>/dev/null; test -f $fake/slurm.conf; } \
            && printf 'AutoDetect=off\nNodeName=node1 Name=gpu File=/dev/nvidia[0-3] Cores=0\n' > $fake/gres.conf" || return 1
    done
    local srun_prefix=(env SLURM_CONF=$fake/slurm.conf)
    run_srun -w node1 -n2 --gres=gpu:4 --lama-map=gcsbnh --lama-bind=1g || fail "srun 1g, user's SLURM_CONF: $(cat "$work/err")" || return 1
    near "1g with the user's SLURM_CONF" || return 1
    srun_prefix=()
    # Slurm's own per-task choice: task/affinity puts task 0 on CPU 1, and Slurm gives it the
    # free GPU whose Cores= hold CPU 1, GPU 0 or 1; LAMA keeps it there.
    run_srun -w node1 -n2 --gpus-per-task=1 --cpu-bind=map_cpu:1,0 --lama-map=gcsbnh || fail "srun map_cpu failed: $(cat "$work/err")" || return 1
    near "per_task" || return 1
    assert_eq "per_task: Slurm gave rank 0 GPU 0 or 1, rank 1 GPU 2 or 3" "0 1" \
        "$(report_field 3 | tr ' ' '\n' | awk '{ printf "%s%d", (NR > 1 ? " " : ""), ($1 >= 2) }')"
}

t_gpu_shards() {
    # gres/shard: docker/gres.conf gives node1 eight shards over its four GPUs. slurmd orders
    # the shard records as the GPU records (gres_c_s_init_share_devices in gres_c_s.c), and a
    # shard step gets SLURM_STEP_GPUS naming the GPUs its shards are on (gres_shard.c calls
    # gres_common_gpu_set_env) and SLURM_SHARDS_ON_NODE: each task runs beside such a GPU, by
    # hand GPUs 0 and 1 near CPU 0, 2 and 3 near CPU 1.
    local task_report='echo "$SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${LAMA_GPUS-unset} ${SLURM_STEP_GPUS-unset} ${SLURM_SHARDS_ON_NODE-unset}"'
    # Slurm may put both shards on one card, whose socket has one CPU here: 1g runs each task on
    # the CPUs near its card, shared by the tasks of one card as under 1g for whole GPUs.
    run_srun -w node1 -n2 --gres=shard:2 --lama-map=gcsbnh --lama-bind=1g || fail "srun shard:2 failed: $(cat "$work/err")" || return 1
    while read -r rank cpus gpus step shards; do
        [[ "$gpus" =~ ^[0-3]$ ]] || { fail "rank $rank: LAMA_GPUS [$gpus]"; return 1; }
        [[ ",$step," == *",$gpus,"* ]] || { fail "rank $rank: LAMA_GPUS $gpus is not among the step's GPUs $step"; return 1; }
        assert_eq "rank $rank's CPU (GPU $gpus)" "$((gpus / 2))" "$cpus" || return 1
        assert_eq "rank $rank: SLURM_SHARDS_ON_NODE" 2 "$shards" || return 1
    done < "$work/out"
    # Without a layout led by g the shards leave the tasks where Slurm put them.
    run_srun -w node1 -n2 --gres=shard:2 || fail "srun shard:2 without LAMA failed: $(cat "$work/err")" || return 1
    assert_eq "without LAMA: no LAMA_GPUS" "unset unset" "$(report_field 3)"
}

t_cpu_bind_and_lama() {
    # --cpu-bind and a LAMA binding together: LAMA binds last and wins; the user is told once.
    run_srun -N2 -w node1,node3 -n4 --cpu-bind=cores --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "LAMA's binding" "$(predict --map scbnh)" "$(actual_cpus)" || return 1
    assert_eq "warnings" "1" "$(grep -c 'warning: --cpu-bind=cores and LAMA both bind' "$work/err")" || return 1
    # Slurm's binding kept by --lama-bind=none, or no --cpu-bind: no warning.
    for args in "--cpu-bind=none --lama-map=scbnh" "--lama-map=scbnh" "--cpu-bind=cores --lama-map=scbnh --lama-bind=none"; do
        # shellcheck disable=SC2086
        run_srun -w node3 -n2 $args || fail "srun $args failed: $(cat "$work/err")" || return 1
        grep -q 'warning' "$work/err" && { fail "srun $args warned: $(cat "$work/err")"; return 1; }
    done
    # --exclusive, --hint=nomultithread and --threads-per-core=1 only shape the allocation;
    # LAMA places inside it.
    run_srun -w node2 -n1 --exclusive --lama-map=scbnh --lama-bind=1c || fail "srun --exclusive failed: $(cat "$work/err")" || return 1
    assert_eq "--exclusive" "node2:0-1" "$(actual_cpus)" || return 1
    if [ "$flavour" == 26.05 ]; then
        # Slurm 26.05 never creates a --hint=nomultithread or --threads-per-core=1 step in this
        # one-thread CR_CPU allocation of an SMT node: srun waits silently, with or without the
        # plugin (docker/README.md, "Slurm 26.05").
        echo "    (26.05: --hint=nomultithread and --threads-per-core=1 not run: Slurm never starts the step)" >&2
        return 0
    fi
    run_srun -w node2 -n1 --hint=nomultithread --lama-map=hcsbn --lama-bind=1h || fail "srun --hint failed: $(cat "$work/err")" || return 1
    assert_eq "--hint=nomultithread" "node2:0" "$(actual_cpus)" || return 1
    run_srun -w node2 -n1 --threads-per-core=1 --lama-map=scbnh || fail "srun --threads-per-core failed: $(cat "$work/err")" || return 1
    assert_eq "--threads-per-core=1 (cpuset of one thread, LAMA's 1c inside it)" "node2:0" "$(actual_cpus)"
}

t_row_contain_devices() {
    # ConstrainDevices=yes: a step may open only its own GPUs, and Slurm numbers them from 0 in
    # CUDA_VISIBLE_DEVICES while SLURM_STEP_GPUS keeps node1's numbers. A job holding two GPUs
    # and CPU 0 (gres.conf: GPUs 0 and 1 are near CPU 0) leaves GPUs 2 and 3 to the LAMA step.
    # Spelled True, as a YAML or Ansible boolean writes it (Slurm's s_p_handle_boolean takes it).
    assert_eq "ConstrainDevices" "True" "$(on node1 sh -c "sed -n 's/^ConstrainDevices=//p' /etc/slurm/cgroup.conf")" || return 1
    local holder
    holder=$(as_user sbatch --parsable -w node1 -n1 --gres=gpu:2 -o /dev/null --wrap 'sleep 300') || return 1
    wait_for 30 job_running "$holder" || { as_user scancel "$holder"; fail "the job holding two GPUs did not start"; return 1; }
    local held; held=$(as_user scontrol show job -d "$holder" | grep -o 'gpu:2(IDX:[0-9-]*)')
    local task_report='echo "$SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${LAMA_GPUS-unset} ${CUDA_VISIBLE_DEVICES-unset} ${SLURM_STEP_GPUS-unset} $(for g in 0 1 2 3; do (: < /dev/nvidia$g) 2>&1 | grep -q "not permitted" && printf d || printf o; done)"'
    run_srun -w node1 -n1 --gres=gpu:2 --lama-map=gcsbnh
    local rc=$? shared; shared=$(cat "$work/out")
    run_srun -w node1 -n1 --gres=gpu:2 --lama-map=gcsbnh --lama-gpu-isolate
    local rc_isolated=$? isolated; isolated=$(report_field 4)
    release "$holder" || return 1
    [ $rc -eq 0 ] && [ $rc_isolated -eq 0 ] || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "the holder's GPUs" "gpu:2(IDX:0-1)" "$held" || return 1
    # By hand: GPU 2 is the step's first GPU near CPU 1; Slurm's CUDA_VISIBLE_DEVICES for the
    # step is 0,1, so GPU 2 is 0 (ConstrainDevices=no would say 2,3); the step opens GPUs 2 and
    # 3 (o) and not 0 and 1 (d, denied by the devices cgroup).
    assert_eq "CPU, LAMA_GPUS, CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, devices" \
        "0 1 2 0,1 2,3 ddoo" "$shared" || return 1
    assert_eq "isolated: only its own GPU, numbered as the step sees it" "0" "$isolated"
}

t_row_no_plugin() {
    # A site without the plugin (the row starts the cluster with LAMA_PLUGIN=none): srun knows
    # no --lama-* option, and lama exec, built on this host and copied to each node, places
    # srun's tasks itself. Slurm binds local task 0 to CPU 1 and task 1 to CPU 0
    # (map_cpu:1,0); lama exec places them by scbnh among the step's CPUs, by hand on every
    # node: rank 2i on CPU 0, rank 2i+1 on CPU 1 (node2's one core of two threads: one thread
    # each, the plugin's exact fallback).
    on slurmctld dpkg-query -W spank-lama > /dev/null 2>&1 && { fail "the plugin is installed"; return 1; }
    as_user srun -n1 --lama-map=scbnh true > /dev/null 2>&1 && { fail "srun took --lama-map without the plugin"; return 1; }
    local m
    for m in "${nodes[@]}"; do
        on "$m" sh -c 'cat > /usr/local/bin/lama && chmod 0755 /usr/local/bin/lama' < "$lama" || return 1
    done
    run_srun -N3 -n6 --cpu-bind=map_cpu:1,0 /usr/local/bin/lama exec --map scbnh -- \
        || fail "srun lama exec failed: $(cat "$work/err")" || return 1
    report_complete 6 || return 1
    assert_eq "lama exec without the plugin, by hand" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1
    assert_eq "lama exec against lama map" "$(predict --map scbnh)" "$(actual_cpus)" || return 1
    assert_eq "LAMA_CPUS" "0 1 0 1 0 1" "$(report_field 4)" || return 1
    grep -qF "lama exec: the launcher bound this process to CPUs 1; LAMA places it among its cgroup's CPUs 0-1" "$work/err" \
        || fail "no note of Slurm's narrower mask: $(cat "$work/err")"
}

t_row_affinity_only() {
    # No cgroup cpuset: the plugin takes the step's allocated cores. A job holding CPU 0 of
    # node3 keeps it; the LAMA step gets the other core, as Slurm's own binding would.
    assert_eq "TaskPlugin" "task/affinity" "$(slurm_conf node3 TaskPlugin)" || return 1
    local holder; holder=$(hold_cpus node3 1) || return 1
    run_srun -w node3 -n1 --lama-map=scbnh
    local rc=$?
    release "$holder" || return 1
    [ $rc -eq 0 ] || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "the LAMA task beside the holder" "node3:1" "$(actual_cpus)" || return 1
    on node3 grep -qE "lama: step CPUs [0-9,-]+ from allocated cores \([0-9,-]+\); no step cpuset" /var/log/slurm/slurmd.log || fail "slurmd log: no allocated-cores fallback"
}

t_lama_exec_beside_another_job() {
    # Without core confinement (no cgroup cpuset: the row affinity-only) lama exec places among
    # the CPUs Slurm bound the task to, never onto another job's: a job holds CPU 0 of node3, and
    # the task of a second job there, placed by lama exec, runs on CPU 1 (by hand), saying where
    # its CPUs came from; also with Slurm's task binding off (--cpu-bind=none), where the task
    # still starts on its step's CPU (slurmstepd's own mask).
    local holder rc1 rc2 out1 err1 out2 err2
    holder=$(hold_cpus node3 1) || return 1
    as_user srun -w node3 -n1 lama exec --map scbnh -- bash -c "$task_report" > "$work/out" 2> "$work/err"
    rc1=$? out1=$(actual_cpus) err1=$(cat "$work/err")
    as_user srun -w node3 -n1 --cpu-bind=none lama exec --map scbnh -- bash -c "$task_report" > "$work/out" 2> "$work/err"
    rc2=$? out2=$(actual_cpus) err2=$(cat "$work/err")
    release "$holder" || return 1
    [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] || fail "srun lama exec: $err1 / $err2" || return 1
    assert_eq "lama exec beside the holder" "node3:1" "$out1" || return 1
    assert_eq "lama exec beside the holder, --cpu-bind=none" "node3:1" "$out2" || return 1
    grep -qF "which Slurm does not confine here: LAMA places this process among the CPUs Slurm bound it to, 1" <<< "$err1$err2" \
        || fail "lama exec's note: $err1 / $err2"
}

t_row_cgroup_only() {
    # A cpuset but no binding by Slurm: without LAMA every task sees the step's CPUs; with LAMA
    # each gets its own.
    assert_eq "TaskPlugin" "task/cgroup" "$(slurm_conf node3 TaskPlugin)" || return 1
    run_srun -w node3 -n2 || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "Slurm alone" "node3:0-1 node3:0-1" "$(actual_cpus)" || return 1
    run_srun -w node3 -n2 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "with LAMA" "node3:0 node3:1" "$(actual_cpus)"
}

t_row_cr_core() {
    # Whole cores: one task on node2 (one core of two threads) is given the core; LAMA's 1c
    # binds both threads, 1h one, and -c2 counts the core's two threads.
    local mem=(); [ "$(slurm_conf node2 SelectTypeParameters)" == CR_Core_Memory ] && mem=(--mem=100)
    run_srun -w node2 -n1 "${mem[@]}" --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "1c" "node2:0-1" "$(actual_cpus)" || return 1
    run_srun -w node2 -n1 "${mem[@]}" --lama-map=hcsbn --lama-bind=1h || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "1h" "node2:0" "$(actual_cpus)" || return 1
    run_srun -w node2 -n1 -c2 "${mem[@]}" --lama-map=scbnh --lama-omp || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "-c2" "node2:0-1" "$(actual_cpus)" || return 1
    check_layout "${mem[@]}" --lama-map=scbnh --lama-bind=1c -- --map scbnh --bind 1c
}

t_row_corespec() {
    # node3 keeps one core for its daemons: no LAMA task is ever placed there.
    local spec
    spec=$(as_user scontrol show node node3 | grep -oE 'CPUSpecList=[0-9,-]+' | cut -d= -f2)
    [ -n "$spec" ] || fail "node3 has no specialised CPU: $(as_user scontrol show node node3 | tr '\n' ' ')" || return 1
    run_srun -w node3 -n1 --lama-map=scbnh || fail "srun failed: $(cat "$work/err")" || return 1
    local got; got=$(actual_cpus)
    [[ $got =~ ^node3:[0-9]+$ ]] || fail "expected one CPU of node3, got [$got]" || return 1
    [ "${got#node3:}" != "$spec" ] || fail "the task is on the specialised CPU $spec" || return 1
    # Even a binding to the whole node stays off it: the step's cpuset leaves it out.
    run_srun -w node3 -n1 --lama-map=scbnh --lama-bind=1n || fail "srun failed: $(cat "$work/err")" || return 1
    got=$(actual_cpus)
    [[ $got =~ ^node3:[0-9,-]+$ ]] || fail "expected CPUs of node3, got [$got]" || return 1
    case ",${got#node3:}," in
        *",$spec,"*|*"-"*) fail "a whole-node binding reached the specialised CPU $spec: $got" ;;
    esac
}

t_row_optional() {
    # With "optional", Slurm ignores the plugin's errors: a bad value is printed, and the job
    # runs anyway, unbound by LAMA (so no task has anything for lama verify to check).
    local verify_each=0
    run_srun -w node3 -n1 --lama-map=scbnx || fail "srun did not run with an optional plugin: $(cat "$work/err")" || return 1
    grep -qF "lama: --lama-map: invalid mapping layout 'scbnx'" "$work/err" || fail "message: $(cat "$work/err")" || return 1
    assert_eq "LAMA_CPUS" "unset" "$(report_field 4)"
}

# --- faults (tests/e2e/faults.sh runs them; each ends with every node idle, no daemon crash, and
# the next job placed correctly) ----------------------------------------------------------------

# The next job after a fault: placed as lama map says, on every node.
next_job_placed() {
    wait_for 120 nodes_idle || fail "nodes not idle: $(as_user sinfo -h -N -o '%N %T' | tr '\n' ' ')" || return 1
    check_layout --lama-map=scbnh --lama-bind=1c -- --map scbnh --bind 1c
}

step_running_on() { as_user squeue -h -s -w "$1" -o %i | grep -q .; }

t_fault_slurmd_killed() {
    # slurmd is killed (-9) on node3 while a LAMA step runs there; its supervisor starts it
    # again. The step goes on, bound as placed, and ends normally.
    as_user srun -w node3 -n2 --lama-map=scbnh bash -c "sleep 6; $task_report" > "$work/fault" 2> "$work/err" &
    local srun_pid=$!
    wait_for 30 step_running_on node3 || { fail "the step did not start"; wait $srun_pid; return 1; }
    sleep 1
    on node3 pkill -9 -x slurmd || { fail "no slurmd to kill"; wait $srun_pid; return 1; }
    wait_for 30 on node3 pgrep -x slurmd || { fail "slurmd did not come back"; wait $srun_pid; return 1; }
    wait $srun_pid || fail "the step failed after slurmd was killed: $(cat "$work/err")" || return 1
    sort -n "$work/fault" > "$work/out"
    report_complete 2 || return 1
    assert_eq "the step's tasks" "node3:0 node3:1" "$(actual_cpus)" || return 1
    next_job_placed
}

t_fault_node_restarted() {
    # node3's container restarts during a job: Slurm decides what becomes of the job (here it
    # fails); the node comes back into service and the next job is placed correctly.
    local id
    id=$(as_user sbatch --parsable -N2 -w node1,node3 -n4 -o /dev/null --wrap "srun --lama-map=scbnh sleep 60") || return 1
    wait_for 30 job_running "$id" || { as_user scancel "$id"; fail "job $id did not start"; return 1; }
    wait_for 30 step_running_on node3 || { as_user scancel "$id"; fail "no step on node3"; return 1; }
    "$cluster" restart node3 > /dev/null 2>&1 || { fail "cannot restart node3"; return 1; }
    # Slurm ends or requeues the job; a requeued job would hold the nodes: cancel what is left.
    wait_for 90 job_gone "$id" || as_user scancel "$id"
    wait_for 60 job_gone "$id" || fail "job $id is still there" || return 1
    next_job_placed
}

t_fault_topology_file_replaced() {
    # The admin topology file is replaced while steps start: renamed over atomically (as `lama
    # export` + mv would), then truncated in place. Every step is placed correctly; the broken
    # file is skipped with its reason in slurmd's log.
    set_plugstack "topology=/etc/slurm/topology/%n.xml"
    on node1 sh -c 'cp /etc/slurm/topology/node1.xml /tmp/node1.orig'
    on node1 sh -c 'for i in $(seq 300); do cp /tmp/node1.orig /etc/slurm/topology/.n1.tmp && mv /etc/slurm/topology/.n1.tmp /etc/slurm/topology/node1.xml; done' &
    local writer=$!
    local i bad=0
    for i in 1 2 3 4 5 6; do
        run_srun -w node1 -n2 --lama-map=scbnh --lama-bind=1c || { bad=1; break; }
        [ "$(actual_cpus)" == "node1:0 node1:1" ] || { bad=2; break; }
    done
    wait $writer
    local rc=0
    [ $bad -eq 0 ] || { fail "step $i during renames: $(actual_cpus) $(cat "$work/err")"; rc=1; }
    if [ $rc -eq 0 ]; then
        on node1 sh -c 'head -c 700 /tmp/node1.orig > /etc/slurm/topology/node1.xml'
        run_srun -w node1 -n2 --lama-map=scbnh --lama-bind=1c || { fail "srun with a truncated file: $(cat "$work/err")"; rc=1; }
        [ $rc -eq 0 ] && { assert_eq "with a truncated file" "node1:0 node1:1" "$(actual_cpus)" || rc=1; }
        [ $rc -eq 0 ] && { on node1 grep -q "topology source skipped: admin topology: " /var/log/slurm/slurmd.log || { fail "slurmd log: no skip"; rc=1; }; }
    fi
    on node1 sh -c 'cp /tmp/node1.orig /etc/slurm/topology/node1.xml'
    reset_plugstack
    [ $rc -eq 0 ] && next_job_placed
}

t_fault_many_concurrent_steps() {
    # 50 LAMA steps at once in one allocation: 25 sharing it (--overlap), 25 each on a CPU of
    # its own (--exact). Every task is where LAMA puts it in its step's CPUs.
    run_batch node3 "#SBATCH -w node3 -n2
for i in \$(seq 25); do
    srun --overlap -n2 --lama-map=scbnh bash -c 'echo \"\$SLURM_PROCID o \$(grep Cpus_allowed_list /proc/self/status | cut -f2) \$LAMA_CPUS\"' &
    srun --exact -n1 --lama-map=scbnh bash -c 'echo \"\$SLURM_PROCID e \$(grep Cpus_allowed_list /proc/self/status | cut -f2) \$LAMA_CPUS\"' &
done
wait" || fail "batch job failed" || return 1
    assert_eq "--overlap tasks" "50" "$(awk '$2 == "o"' "$work/out" | wc -l)" || return 1
    assert_eq "--exact tasks" "25" "$(awk '$2 == "e"' "$work/out" | wc -l)" || return 1
    # Overlapping steps see both CPUs: rank 0 on CPU 0, rank 1 on CPU 1.
    assert_eq "--overlap placement" "0" "$(awk '$2 == "o" && !(($1 == 0 && $3 == "0") || ($1 == 1 && $3 == "1"))' "$work/out" | wc -l)" || return 1
    # An exact step's task is bound to its one CPU, as LAMA_CPUS says.
    assert_eq "--exact placement" "0" "$(awk '$2 == "e" && ($3 != $4 || $3 ~ /[-,]/)' "$work/out" | wc -l)"
}

t_fault_1024_tasks() {
    # One step of 1,024 tasks on node1 (in an allocation of both CPUs; srun --overcommit alone
    # would allocate one): every task bound, half on each socket, as LAMA's passes alternate.
    local t0=$SECONDS
    as_user salloc -w node1 -n2 srun -n1024 --overcommit --lama-map=scbnh bash -c 'grep Cpus_allowed_list /proc/self/status | cut -f2' > "$work/big" 2> "$work/err" \
        || fail "srun -n1024 failed: $(head -c 500 "$work/err")" || return 1
    echo "    (1,024 tasks in $((SECONDS - t0)) s)" >&2
    assert_eq "tasks" "1024" "$(wc -l < "$work/big")" || return 1
    assert_eq "per CPU" "512 0 512 1" "$(sort "$work/big" | uniq -c | awk '{ printf "%s%s %s", (NR > 1 ? " " : ""), $1, $2 }')"
}

t_fault_task_rebinds_itself() {
    # A task that changes its own affinity, or execs taskset, keeps what it chose: the plugin
    # binds once, before exec, and never again. (The step has both CPUs; LAMA binds CPU 0.)
    as_user srun -w node3 -n1 -c2 --lama-map=scbnh --lama-bind=1c bash -c 'taskset -pc 1 $$ > /dev/null; sleep 1; grep Cpus_allowed_list /proc/self/status | cut -f2' > "$work/t1" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "after taskset -p" "1" "$(cat "$work/t1")" || return 1
    as_user srun -w node3 -n1 -c2 --lama-map=scbnh --lama-bind=1c taskset -c 1 grep Cpus_allowed_list /proc/self/status > "$work/t1" 2> "$work/err" \
        || fail "srun failed: $(cat "$work/err")" || return 1
    assert_eq "exec taskset" "1" "$(cut -f2 "$work/t1")"
}

t_row_node_name() {
    # docker/configs/node-name.conf: node3's NodeName is lama3 and SlurmdSpoolDir ends in
    # .%n. slurmd finds its name itself; the plugin asks it (not the host name) and caches the
    # topology in slurmd's own spool directory, where the steps find it.
    local spool3=/var/lib/slurm/slurmd.lama3 n3
    on node3 test -d "$spool3" || fail "slurmd's spool directory $spool3 is not there" || return 1
    on node3 grep -qF "lama: topology cached in $spool3/lama_topology.xml (" /var/log/slurm/slurmd.log \
        || fail "no cache in $spool3: $(on node3 grep 'lama: topology' /var/log/slurm/slurmd.log | tail -n3)" || return 1
    n3=$(slurmd_log_lines node3)
    run_srun -w lama3 -n2 --lama-map=scbnh --lama-bind=1c || fail "srun on lama3: $(cat "$work/err")" || return 1
    assert_eq "placement on lama3 (by hand: its two cores; the task reports the host name)" "node3:0 node3:1" "$(actual_cpus)" || return 1
    slurmd_log_since node3 "$n3" | grep -qF "source=LAMA's cached $spool3/lama_topology.machine" \
        || fail "the step did not read the cache: $(slurmd_log_since node3 "$n3" | grep lama)" || return 1
}

t_row_many_nodes() {
    # Eight nodes (docker/configs/many-nodes.conf): the partition many holds node1-node8, of
    # three shapes (two sockets of one core; one core of two threads; one socket of two cores).
    assert_eq "the partition many" "node1 node2 node3 node4 node5 node6 node7 node8" \
        "$(as_user sinfo -h -p many -N -o %N | sort -uV | paste -sd' ')" || return 1
    # One `lama map` over the eight nodes prints exactly each task's CPUs: srun deals 13
    # tasks of whole nodes block-wise and cyclically, each node places its own.
    local m
    for m in "" cyclic; do
        run_srun -p many --exclusive -N8 -n13 ${m:+-m "$m"} --lama-map=scbnh \
            || fail "srun -N8 -n13 -m ${m:-default} failed: $(cat "$work/err")" || return 1
        assert_eq "srun -N8 -n13 -m ${m:-default}" "$(preview --map scbnh ${m:+-m "$m"})" "$(actual_cpus)" || return 1
    done
    # By hand, cyclic: ranks 0-7 one on each node, 8-12 the second task of node1-node5. Two
    # tasks on a node take its two sockets, threads or cores (CPU 0, then 1); a node's one
    # task a core: CPU 0, or both threads of node8's one core.
    assert_eq "cyclic by hand" "node1:0 node2:0 node3:0 node4:0 node5:0 node6:0 node7:0 node8:0-1 node1:1 node2:1 node3:1 node4:1 node5:1" \
        "$(actual_cpus)" || return 1
    # A plan of 1,000 ranks over the eight nodes (125 each, oversubscribed): rank i on node
    # 1 + i mod 8, CPU (i * 7 mod 3) mod 2, through -m arbitrary and the plan's hosts.
    awk 'BEGIN { print "lama-plan 1"; print "ranks 1000";
                 for (i = 0; i < 1000; i++) { c = (i * 7 % 3) % 2; printf "rank %d node%d pu %d cpus %d\n", i, 1 + i % 8, c, c } }' \
        > "$work/eight.lama"
    awk '$1 == "rank" { print $3 }' "$work/eight.lama" > "$work/eight.hosts"
    as_user sh -c 'cat > /tmp/eight.lama' < "$work/eight.lama" && as_user sh -c 'cat > /tmp/eight.hosts' < "$work/eight.hosts" || return 1
    as_user salloc -p many -N8 -n16 env SLURM_HOSTFILE=/tmp/eight.hosts srun -m arbitrary -n1000 --overcommit --lama-plan=/tmp/eight.lama \
        bash -c 'echo "$SLURM_PROCID $(hostname -s) $(grep Cpus_allowed_list /proc/self/status | cut -f2)"' > "$work/out" 2> "$work/err" \
        || fail "srun -n1000 --lama-plan over eight nodes failed: $(head -c 500 "$work/err")" || return 1
    sort -n -o "$work/out" "$work/out"
    report_complete 1000 || return 1
    # By hand: ranks 0-3 on node1-node4, CPUs 0, 1, 0, 0 (0, 7, 14, 21 mod 3 = 0, 1, 2, 0).
    assert_eq "ranks 0-3" "0 node1 0|1 node2 1|2 node3 0|3 node4 0" "$(head -4 "$work/out" | paste -sd'|')" || return 1
    assert_eq "each rank as planned" "$(awk '$1 == "rank" { print $2, $3, $7 }' "$work/eight.lama")" "$(cat "$work/out")"
}

t_daemons_still_up() {
    local state
    wait_for 60 nodes_idle
    assert_eq "nodes" "$all_idle" "$(node_states)" || return 1
    local m
    for m in slurmctld "${nodes[@]}"; do
        if on "$m" sh -c 'cat /var/log/slurm/*.log' | grep -E 'fatal|Segmentation|panicked|Caught panic' >&2; then
            fail "$m logged a crash"; return 1
        fi
    done
}

all_tests=(t_setup t_no_options_leaves_slurm_alone t_bind_core t_bind_socket t_bind_hwthread
    t_bind_none_keeps_slurm_binding t_alias t_sbatch_options_reach_steps
    t_salloc_options t_step_cpuset_is_honoured t_bad_input_fails_before_launch t_oversubscription
    t_verbose_one_line_per_task t_openmp_variables t_site_default_and_policy
    t_bad_site_configuration t_node_configuration_error_fails_the_job_not_the_node
    t_broken_plugstack_batch_job_drains_nothing t_garbage_inherited_option_drains_nothing t_topology_sources t_topology_cache t_install_refuses_other_slurm
    t_package_installed t_package_refused_on_other_slurm t_package_removal_keeps_srun_working
    t_package_upgrade_from_one_package
    t_cpus_per_task_widen_the_binding
    t_narrower_bind_warns_once t_membind t_one_distribution_hint t_preview_is_srun t_slurm_own_placement t_verify t_plan_ring_and_stencil
    t_plan_in_batch t_plan_of_1000_ranks t_plan_by_file t_plan_in_heterogeneous_step t_forged_heterogeneous_environment t_forged_plan_file t_bad_plan_refused t_odd_environment t_gpu_placement t_gpu_files t_gpu_shards
    t_cpu_bind_and_lama t_topology_node_order
    t_daemons_still_up)

# The tests that need no plugin (the brief's (a), (b), (c)).
base_tests=(t_setup t_confinement t_no_options_leaves_slurm_alone t_daemons_still_up)
all_tests=(t_setup t_confinement "${all_tests[@]:1}")

base_only=
if [ "${1:-}" == --base ]; then base_only=1; shift; set -- "${base_tests[@]}"; fi
selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${all_tests[@]}")
[ "${selected[0]}" == t_setup ] || selected=(t_setup "${selected[@]}")
run_tests e2e "${selected[@]}"
