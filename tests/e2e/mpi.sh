#!/usr/bin/env bash
# End-to-end tests with real MPI programs on the running docker cluster (docker/cluster.sh up):
# Open MPI and MPICH from Debian's packages, and the test program tests/mpi/mpitest.c built
# with each (/opt/lama-tests/mpitest-ompi, /opt/lama-tests/mpitest-mpich, in the node image).
#
#   tests/e2e/mpi.sh [TEST...]     (default: all tests for the cluster's Slurm, in order)
#
# Direct launch: `srun --mpi=pmix` runs Open MPI, `srun --mpi=pmi2` MPICH. Each rank reports
# MPI_Comm_rank, its host, its sched_getaffinity, LAMA_CPUS, SLURM_PROCID, MPI_Comm_size and,
# for each OpenMP thread, the CPU it ran on and its mask (tests/mpi/mpitest.c). The checks:
# MPI rank = SLURM_PROCID = the rank LAMA placed, the mask each MPI process reports is the one
# `lama map` predicts and the one written here by hand (the MPI library did not re-bind it),
# and the same srun without the --lama-* option gives something else.
# `mpirun` in a batch script (Open MPI's launcher starts its daemons with an srun of its own):
# the daemons are not pinned by LAMA, the ranks run, and srun direct launch in the same script
# is placed by LAMA. Debian sid's Slurm 26.05 has no mpi/pmix plugin (docker/README.md): there
# Open MPI runs only through mpirun, and a test checks that the failure is still the documented one.
#
# LAMA_SLURM=24.11|26.05 and LAMA_CLUSTER=NAME as for tests/e2e/run.sh. Ends with
# "mpi: N passed, N failed"; exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib.sh"
cluster=$top/docker/cluster.sh
nodes=(node1 node2 node3)
flavour=${LAMA_SLURM:-24.11}
bin=/opt/lama-tests

as_user() { "$cluster" exec -u tester slurmctld "$@"; }
on() { local m=$1; shift; "$cluster" exec "$m" "$@"; }
nodes_idle() { [ "$(as_user sinfo -h -N -o '%N %T' | sort | tr '\n' ' ')" == "node1 idle node2 idle node3 idle " ]; }

# Whether this cluster's Slurm has the mpi/pmix plugin (Debian sid's 26.05.5 has none).
pmix_in_slurm() { as_user srun --mpi=list 2>&1 | grep -qw pmix; }
# Environment for the next run_mpi (Open MPI's monitoring, below).
mpi_env=()
# The srun --mpi= type of each library.
declare -A mpi_type=([ompi]=pmix [mpich]=pmi2)

# mpi_launch ARGS...: `timeout 120 srun ARGS` as the test user (with $mpi_env), stdout in
# $work/all, stderr in $work/err; srun's status returned. Every MPI step runs with
# --kill-on-bad-exit, so a rank that dies ends the step at once instead of leaving the others
# waiting in MPI_Init until the bound. Run once: Open MPI 5.0.7's crash in MPI_Init under
# Slurm's PMIx tree fences is gone with the ring (docker/mpi.conf), and the two hangs seen once
# on a machine stalled for minutes (a PMIx fence on 24.11, a heterogeneous MPICH step's PMI2
# startup on 26.05) are not run again: a step that hangs fails (docs/testing.md).
mpi_launch() {
    as_user env "${mpi_env[@]}" timeout 120 srun --kill-on-bad-exit=1 "$@" > "$work/all" 2> "$work/err"
}

# run_mpi LIB SRUN-ARGS... [-- PROGRAM-ARGS...]: srun --mpi=TYPE SRUN-ARGS mpitest-LIB
# PROGRAM-ARGS (default: report), through mpi_launch. The rank report, sorted, in $work/out;
# rank 0's other lines (the halo summary) in $work/extra; stderr in $work/err. Fails unless
# srun succeeded and the report has one line for each rank 0..N-1.
run_mpi() {
    local lib=$1 args=() prog=(report)
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
    if [ "${1:-}" == -- ]; then shift; prog=("$@"); fi
    mpi_launch --mpi="${mpi_type[$lib]}" "${args[@]}" "$bin/mpitest-$lib" "${prog[@]}"
    local rc=$?
    grep -E '^[0-9]+ ' "$work/all" | sort -n > "$work/out"
    grep -vE '^[0-9]+ ' "$work/all" > "$work/extra"
    [ $rc -eq 0 ] || { fail "srun --mpi=${mpi_type[$lib]} ${args[*]} failed ($rc): $(tail -n 5 "$work/err")"; return 1; }
    report_complete "$(ntasks_of "${args[@]}")"
}

# The report's own consistency for LIB with N ranks: MPI_Comm_rank (field 1) equals
# SLURM_PROCID (field 5) on every line, MPI_Comm_size is N, the program is LIB's build.
check_ranks() { # LIB N
    local n=$2
    assert_eq "MPI_Comm_rank = SLURM_PROCID" "$(seq 0 $((n - 1)) | paste -sd' ')" "$(report_field 5)" || return 1
    assert_eq "MPI_Comm_size" "$(yes "$n" | head -n "$n" | paste -sd' ')" "$(report_field 6)" || return 1
    assert_eq "library" "$(yes "$1" | head -n "$n" | paste -sd' ')" "$(report_field 7)"
}

# The halo summary of the last run: "halo ranks=N grid=G ... errors=0".
check_halo() { # N GRID
    local line; line=$(grep '^halo ' "$work/extra")
    [ -n "$line" ] || { fail "no halo summary in the output: $(cat "$work/extra" "$work/err" | tail -n 5)"; return 1; }
    assert_eq "halo ranks, grid, errors" "ranks=$1 grid=$2 errors=0" \
        "$(echo "$line" | grep -oE '(ranks|grid|errors)=[^ ]+' | paste -sd' ')"
}

# Every --lama-* argument left out.
without_lama() { local a; for a in "$@"; do [[ $a == --lama-* ]] || printf '%s\n' "$a"; done; }

# check_mpi_layout LIB BY-HAND "SRUN-ARGS" "LAMA-MAP-ARGS" [PROGRAM-ARGS...]: the step's MPI
# processes report LAMA's masks (predicted and by hand), LAMA_CPUS is the mask each reports,
# ranks are consistent; without the --lama-* options the masks differ.
check_mpi_layout() {
    local lib=$1 hand=$2 srun_args map_args
    read -r -a srun_args <<< "$3"
    read -r -a map_args <<< "$4"
    shift 4
    local prog=("$@"); [ ${#prog[@]} -gt 0 ] || prog=(report)
    local n; n=$(ntasks_of "${srun_args[@]}")
    run_mpi "$lib" "${srun_args[@]}" -- "${prog[@]}" || return 1
    check_ranks "$lib" "$n" || return 1
    assert_eq "$lib ${srun_args[*]}: masks against lama map" "$(predict "${map_args[@]}")" "$(actual_cpus)" || return 1
    assert_eq "$lib ${srun_args[*]}: masks by hand" "$hand" "$(actual_cpus)" || return 1
    assert_eq "$lib ${srun_args[*]}: LAMA_CPUS" "$(report_field 3)" "$(report_field 4)" || return 1
    if [[ " ${prog[*]} " == *" halo "* ]]; then
        check_halo "$n" "$(halo_grid "$n")" || return 1
    fi
    local with; with=$(actual_cpus)
    local plain; mapfile -t plain < <(without_lama "${srun_args[@]}")
    run_mpi "$lib" "${plain[@]}" -- report || return 1
    check_ranks "$lib" "$n" || return 1
    assert_ne "$lib ${plain[*]} (without the --lama-* options): masks" "$with" "$(actual_cpus)" || return 1
    assert_eq "$lib ${plain[*]}: LAMA_CPUS" "$(yes unset | head -n "$n" | paste -sd' ')" "$(report_field 4)"
}
# MPI_Dims_create's 2-D grid for N ranks (the counts used here).
halo_grid() { case $1 in 2) echo 2x1 ;; 3) echo 3x1 ;; 4) echo 2x2 ;; 6) echo 3x2 ;; *) echo "?" ;; esac; }

# --- tests ---------------------------------------------------------------------------------

t_mpi_setup() {
    local h
    for h in "${nodes[@]}"; do
        on "$h" cat "/etc/slurm/topology/$h.xml" > "$work/$h.xml" || return 1
        on "$h" test -x "$bin/mpitest-ompi" -a -x "$bin/mpitest-mpich" \
            || fail "$h has no $bin/mpitest-ompi or mpitest-mpich (node image without MPI?)" || return 1
    done
    [ -x "$lama" ] || fail "$lama is missing (docker/cluster.sh plugin builds it)" || return 1
    on slurmctld dpkg-query -W spank-lama > /dev/null 2>&1 || fail "the cluster has no plugin (LAMA_PLUGIN=none?)" || return 1
    wait_for 60 nodes_idle || fail "nodes not idle: $(as_user sinfo -h -N -o '%N %T' | tr '\n' ' ')"
}

t_mpi_pmix_in_slurm() {
    local list; list=$(as_user srun --mpi=list 2>&1)
    [ -n "$list" ] || { fail "srun --mpi=list printed nothing"; return 1; }
    grep -qw pmi2 <<< "$list" || fail "srun --mpi=list has no pmi2: $list" || return 1
    case $flavour in
        24.11)
            grep -qw pmix <<< "$list" || fail "srun --mpi=list has no pmix: $list" || return 1
            # Every PMIx fence by the ring (docker/mpi.conf: Open MPI crashes in MPI_Init
            # under the tree), as slurmctld read it.
            as_user scontrol show config | grep -qE '^PMIxCollFence +=[[:space:]]+ring$' \
                || fail "PMIxCollFence is not ring: $(as_user scontrol show config | grep PMIxCollFence)"
            ;;
        *)
            # Debian sid's slurm-wlm 26.05.5-1 is built without PMIx ("Remove pmix" in its
            # changelog): no mpi_pmix*.so, so `srun --mpi=pmix` cannot run Open MPI. When this
            # test fails because pmix is there, enable the Open MPI direct-launch tests below.
            if grep -qw pmix <<< "$list"; then
                fail "Slurm $flavour now lists mpi/pmix: run the Open MPI direct-launch tests on it (tests/e2e/mpi.sh, docker/README.md)"
                return 1
            fi
            assert_empty "mpi_pmix plugins on node1" "$(on node1 sh -c 'ls /usr/lib/*/slurm-wlm/ | grep mpi_pmix')" || return 1
            as_user srun --mpi=pmix -n1 true > "$work/out" 2> "$work/err" && { fail "srun --mpi=pmix succeeded"; return 1; }
            grep -q 'Cannot create context for mpi/pmix' "$work/err" \
                || fail "srun --mpi=pmix: not the documented error: $(cat "$work/err")"
            ;;
    esac
}

# Several layouts and bindings across nodes (two CPUs a node; node2 is one core of two
# threads, so an explicit core or socket binding cannot hold two of its tasks).
mpi_layouts() { # LIB
    local lib=$1
    # Round-robin over sockets, socket-wide binding, on node1 (two sockets) and node3 (one
    # socket of two cores): node3's two ranks share its socket; Slurm alone gives one CPU each.
    check_mpi_layout "$lib" "node1:0 node1:1 node3:0-1 node3:0-1" \
        "-w node1,node3 -N2 -n4 --lama-map=scbnh --lama-bind=1s" "--map scbnh --bind 1s" \
        report halo 65536 3 || return 1
    # Two CPUs per task, bound to one core each (narrower than -c, as asked): node2's core is
    # its two threads; Slurm alone binds each task to both CPUs of its node.
    check_mpi_layout "$lib" "node1:0 node2:0-1 node3:0" \
        "-N3 -n3 -c2 --lama-map=scbnh --lama-bind=1c" "--map scbnh --bind 1c" || return 1
    # Hardware threads first, one thread each.
    check_mpi_layout "$lib" "node1:0 node2:0 node3:0" \
        "-N3 -n3 -c2 --lama-map=hcsbn --lama-bind=1h" "--map hcsbn --bind 1h" || return 1
    # Every CPU of the three nodes, default binding (one hardware thread each on node2), and a
    # halo exchange over a 3x2 grid: the masks are Slurm's too, so here the run without the
    # option differs in LAMA_CPUS only (checked apart from check_mpi_layout).
    run_mpi "$lib" -N3 -n6 --lama-map=scbnh -- report halo 8192 3 || return 1
    check_ranks "$lib" 6 || return 1
    assert_eq "$lib -n6 scbnh: masks against lama map" "$(predict --map scbnh)" "$(actual_cpus)" || return 1
    assert_eq "$lib -n6 scbnh: masks by hand" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1
    assert_eq "$lib -n6 scbnh: LAMA_CPUS" "0 1 0 1 0 1" "$(report_field 4)" || return 1
    check_halo 6 3x2 || return 1
    run_mpi "$lib" -N3 -n6 -- report || return 1
    assert_ne "$lib -n6 without --lama-map: LAMA_CPUS" "0 1 0 1 0 1" "$(report_field 4)"
}
t_mpi_layouts_ompi() { mpi_layouts ompi; }
t_mpi_layouts_mpich() { mpi_layouts mpich; }

# Hybrid MPI + OpenMP: -c2 with --lama-omp, two threads a rank, each bound to one place of its
# task's binding and running there. (With OMP_PROC_BIND set, the OpenMP runtime binds the main
# thread to the first place before main(): the process's own mask, field 3, is that place;
# the task's binding is LAMA_CPUS and the union of the threads' masks.)
mpi_hybrid() { # LIB
    local lib=$1
    run_mpi "$lib" -N3 -n3 -c2 --lama-map=scbnh --lama-omp || return 1
    check_ranks "$lib" 3 || return 1
    # What lama map predicts for -c2, in LAMA_CPUS, and by hand: each node's two CPUs.
    local lama_cpus; lama_cpus=$(awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $4 }' "$work/out")
    assert_eq "$lib hybrid: LAMA_CPUS against lama map" "$(predict --map scbnh --cpus-per-task 2)" "$lama_cpus" || return 1
    assert_eq "$lib hybrid: LAMA_CPUS by hand" "node1:0-1 node2:0-1 node3:0-1" "$lama_cpus" || return 1
    # By hand: thread 0 on CPU 0 bound to {0}, thread 1 on CPU 1 bound to {1}, on every node.
    assert_eq "$lib hybrid: threads (CPU/mask)" "0/0|1/1 0/0|1/1 0/0|1/1" "$(report_field 8)" || return 1
    # In general: each thread runs inside its own mask, one CPU of its task's binding.
    local bad
    bad=$(awk '{ n = split($8, t, "|"); for (i = 1; i <= n; i++) { split(t[i], cm, "/");
            if (cm[1] != cm[2]) print "rank " $1 " thread " i - 1 ": " t[i] } }' "$work/out")
    assert_empty "$lib hybrid: threads not on their one-CPU place" "$bad" || return 1
    local with; with=$(report_field 8)
    # Without --lama-omp no OpenMP binding: each thread may run on both CPUs of the task.
    run_mpi "$lib" -N3 -n3 -c2 --lama-map=scbnh || return 1
    assert_ne "$lib hybrid without --lama-omp: threads" "$with" "$(report_field 8)" || return 1
    assert_eq "$lib hybrid without --lama-omp: thread masks" "0-1 0-1 0-1 0-1 0-1 0-1" \
        "$(report_field 8 | tr ' |' '\n\n' | cut -d/ -f2 | paste -sd' ')"
}
t_mpi_hybrid_ompi() { mpi_hybrid ompi; }
t_mpi_hybrid_mpich() { mpi_hybrid mpich; }

# Runs SCRIPT as a batch job of the test user (node1 runs the batch step) and keeps its
# output in $work/batch: run_batch NAME SCRIPT
run_batch() {
    local name=$1 script=$2
    printf '%s\n' "$script" | as_user sh -c "cat > /tmp/$name.sh" || return 1
    on node1 rm -f "/tmp/$name.out"
    as_user timeout 300 sbatch --parsable --wait -o "/tmp/$name.out" "/tmp/$name.sh" > /dev/null 2> "$work/err" \
        || { fail "the batch job failed: $(cat "$work/err"; on node1 tail -n 20 "/tmp/$name.out")"; return 1; }
    on node1 cat "/tmp/$name.out" > "$work/batch"
}

# The task lines of the section "== NAME" of $work/batch, by rank.
section() { awk -v s="== $1" '/^== / { on = ($0 == s); next } on && /^[0-9]+ / { print }' "$work/batch" | sort -n; }

# `mpirun` inside a batch script with #SBATCH --lama-map: Open MPI's launcher starts one daemon
# per other node with its own `srun --cpu-bind=none` (no --lama-* option of its own), which
# LAMA leaves alone; its ranks are Open MPI's, not Slurm tasks, and LAMA does not place them.
# srun direct launch in the same script is placed by LAMA.
t_mpirun_in_batch() {
    local direct
    if pmix_in_slurm; then direct="srun --mpi=pmix $bin/mpitest-ompi report"
    else direct="srun --mpi=pmi2 $bin/mpitest-mpich report"; fi
    local script
    script=$(cat <<EOF
#!/bin/bash
#SBATCH -N3 -n6 --lama-map=scbnh
echo "== daemons"
mpirun --bind-to none sh -c 'echo "\$OMPI_COMM_WORLD_RANK \$(hostname -s) \$(grep Cpus_allowed_list /proc/\$PPID/status | cut -f2) \${LAMA_CPUS-unset} \$(cat /proc/\$PPID/comm)"'
echo "== ranks"
mpirun $bin/mpitest-ompi report halo 4096 2
echo "== daemon launch with its own --lama-bind"
srun -N3 -n3 --ntasks-per-node=1 --cpu-bind=none --lama-bind=1c bash -c 'echo "\$SLURM_PROCID \$(hostname -s) \$(grep Cpus_allowed_list /proc/self/status | cut -f2) \${LAMA_CPUS-unset}"'
echo "== direct"
$direct
echo "== end"
EOF
)
    run_batch lama-mpirun "$script" || return 1

    # The daemons: each rank's parent is the daemon of its node (prted on node2 and node3;
    # mpirun itself, in the batch step, on node1), whose mask is the node's allocation (both
    # CPUs), not one CPU; LAMA set nothing.
    section daemons > "$work/out"
    report_complete 6 || return 1
    assert_eq "mpirun's daemons: parent, host, mask" \
        "node1:0-1:unset node1:0-1:unset node2:0-1:unset:prted node2:0-1:unset:prted node3:0-1:unset:prted node3:0-1:unset:prted" \
        "$(awk '{ printf "%s%s:%s:%s%s", (NR > 1 ? " " : ""), $2, $3, $4, ($2 == "node1" ? "" : ":" $5) }' "$work/out")" || return 1
    # Open MPI's ranks ran (its own binding, inside each node's allocation), the halo exchange
    # too; LAMA set nothing for them.
    section ranks > "$work/out"
    report_complete 6 || return 1
    assert_eq "mpirun's ranks: size, library" "$(yes "6 ompi" | head -n 6 | paste -sd' ')" \
        "$(awk '{ printf "%s%s %s", (NR > 1 ? " " : ""), $6, $7 }' "$work/out")" || return 1
    assert_eq "mpirun's ranks: hosts" "node1 node1 node2 node2 node3 node3" "$(report_field 2)" || return 1
    assert_empty "mpirun's ranks outside CPUs 0-1" "$(awk '$3 !~ /^(0|1|0-1)$/' "$work/out")" || return 1
    assert_eq "mpirun's ranks: LAMA_CPUS" "unset unset unset unset unset unset" "$(report_field 4)" || return 1
    grep '^halo ' "$work/batch" > "$work/extra"
    check_halo 6 3x2 || return 1
    # The same daemon launch with a --lama-* option of its own is placed by LAMA: one core per
    # daemon (node2's core is its two threads), what the daemons would get if LAMA took the
    # inherited option. (An option repeated with its inherited value counts as inherited:
    # `srun --lama-map=scbnh` here would be left alone too.)
    section "daemon launch with its own --lama-bind" > "$work/out"
    report_complete 3 || return 1
    assert_eq "srun --cpu-bind=none --lama-bind=1c: masks by hand" "node1:0 node2:0-1 node3:0" "$(actual_cpus)" || return 1
    assert_eq "srun --cpu-bind=none --lama-bind=1c: against lama map" "$(predict --map scbnh --bind 1c)" "$(actual_cpus)" || return 1
    assert_ne "mpirun's daemons against a daemon launch placed by LAMA" "node1:0-1 node2:0-1 node3:0-1" "$(actual_cpus)" || return 1
    # What to write instead: srun direct launch, placed by LAMA from #SBATCH --lama-map.
    section direct > "$work/out"
    report_complete 6 || return 1
    assert_eq "direct launch in the script: against lama map" "$(predict --map scbnh)" "$(actual_cpus)" || return 1
    assert_eq "direct launch in the script: by hand" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$(actual_cpus)" || return 1
    assert_eq "direct launch: MPI rank = SLURM_PROCID" "0 1 2 3 4 5" "$(report_field 5)" || return 1
    assert_eq "direct launch: LAMA_CPUS" "0 1 0 1 0 1" "$(report_field 4)"
}

# A heterogeneous step: two components, each with its own --lama-* options, one MPI job
# (MPI_COMM_WORLD spans both: MPI rank = SLURM_PROCID = 0..3 across the components).
# `lama exec`: one LAMA command line places the ranks of every launcher the same way, with no
# --lama-* option for the plugin (which then leaves every step alone): Open MPI's mpirun and
# MPICH's hydra (mpiexec.mpich, whose proxies srun starts) inside a batch job, and srun itself;
# each rank's mask as the MPI program reads it after MPI_Init. All equal to what the plugin
# gives srun --lama-map=scbnh, and to lama map's preview.
t_lama_exec_launchers() {
    local script
    script=$(cat <<EOF
#!/bin/bash
#SBATCH -N3 -n6
echo "== ompi"
mpirun lama exec --map scbnh -- $bin/mpitest-ompi report
echo "== hydra"
mpiexec.mpich -n 6 lama exec --map scbnh -- lama verify --json -- $bin/mpitest-mpich report
echo "== srun"
srun --mpi=pmi2 lama exec --map scbnh -- $bin/mpitest-mpich report
echo "== impi"
env LD_LIBRARY_PATH=/opt/lama/impi/lib FI_PROVIDER_PATH=/opt/lama/impi/lib/prov FI_PROVIDER=tcp \
    I_MPI_DEBUG=4 /opt/lama/impi/bin/mpiexec.hydra -n 6 -ppn 2 lama exec --map scbnh -- $bin/mpitest-mpich report
echo "== plugin"
srun --mpi=pmi2 --lama-map=scbnh $bin/mpitest-mpich report
echo "== end"
EOF
)
    run_batch lama-exec "$script" || return 1
    section plugin > "$work/out"
    report_complete 6 || return 1
    local plugin; plugin=$(actual_cpus)
    # By hand: node1's two sockets of one core (CPUs 0 and 1), node2's one core of two threads
    # (the default binding cannot give two ranks a core each: one thread each), node3's two cores.
    assert_eq "the plugin, by hand" "node1:0 node1:1 node2:0 node2:1 node3:0 node3:1" "$plugin" || return 1
    assert_eq "the plugin against lama map" "$(predict --map scbnh)" "$plugin" || return 1
    # Intel MPI (docker/cluster.sh stages its run time at /opt/lama/impi): its hydra starts its
    # proxies through Slurm, two ranks per node, and its library (ABI-compatible with MPICH's,
    # in its place) says so at I_MPI_DEBUG=4.
    # (No pipe into grep -q: under pipefail an early exit of grep fails the pipe.)
    awk '/^== / { on = ($0 == "== impi"); next } on' "$work/batch" > "$work/impi"
    grep -q 'MPI startup(): Intel(R) MPI Library' "$work/impi" \
        || { fail "impi: Intel MPI's library did not start the ranks: $(head -n 5 "$work/impi")"; return 1; }
    local launcher
    for launcher in ompi hydra srun impi; do
        section $launcher > "$work/out"
        report_complete 6 || { fail "$launcher: $(cat "$work/batch")"; return 1; }
        assert_eq "lama exec under $launcher, after MPI_Init" "$plugin" "$(actual_cpus)" || return 1
        assert_eq "lama exec under $launcher: LAMA_CPUS" "0 1 0 1 0 1" "$(report_field 4)" || return 1
    done
    # lama verify, run by lama exec around the program, watches every thread of each rank
    # while the MPI program runs, under hydra's rank numbers. (Under Open MPI 5.0.7 it sees
    # the main thread of some ranks on another CPU for a moment during MPI_Init, whatever
    # mpirun's --bind-to; the masks read after MPI_Init, above, are LAMA's.)
    # Every rank's main thread must be on LAMA's CPUs; a helper thread a library starts with
    # its own affinity is said but not failed (once, on 26.05, MPICH's rank had a thread named
    # "fuse" on the whole cgroup for a moment: lama verify reported it, as it should).
    awk '/^== / { on = ($0 == "== hydra"); next } on && /^\{/' "$work/batch" > "$work/verify"
    local verdict mains
    verdict=$("$lama" verify --collect --np 6 < "$work/verify" 2>&1)
    mains=$(jq -r '[.threads[] | select(.tid == .pid)] as $m
        | if ($m | length) == 1 and $m[0].cpus == .cpus then "ok" else "rank \(.rank): main thread \($m)" end' \
        "$work/verify" | sort | uniq -c | sed 's/^ *//' | paste -sd' ')
    assert_eq "lama verify under hydra: every rank's main thread on LAMA_CPUS" "6 ok" "$mains" || return 1
    case "$verdict" in
        "lama verify: 6 tasks on 3 nodes: 6 agree") ;;
        "lama verify: 6 tasks on 3 nodes: "*) echo "    (lama verify under hydra saw a helper thread elsewhere: $verdict)" ;;
        *) fail "lama verify under hydra: $verdict"; return 1 ;;
    esac
}

t_mpi_het_step() {
    local lib=mpich
    mpi_launch --mpi=pmi2 -w node1 -n2 --lama-map=scbnh --lama-bind=1c "$bin/mpitest-$lib" report \
        : -w node3 -n2 --lama-map=csbnh --lama-bind=1s "$bin/mpitest-$lib" report \
        || { fail "heterogeneous srun failed: $(tail -n 5 "$work/err")"; return 1; }
    grep -E '^[0-9]+ ' "$work/all" | sort -n > "$work/out"
    report_complete 4 || return 1
    check_ranks "$lib" 4 || return 1
    # By hand: component 0 one core each on node1 (two packages of one core), component 1 both
    # of node3's cores for each rank (one package: a package-wide binding, shared, as asked).
    assert_eq "het step: masks by hand" "node1:0 node1:1 node3:0-1 node3:0-1" "$(actual_cpus)" || return 1
    assert_eq "het step: LAMA_CPUS" "$(report_field 3)" "$(report_field 4)" || return 1
    local with; with=$(actual_cpus)
    mpi_launch --mpi=pmi2 -w node1 -n2 "$bin/mpitest-$lib" report \
        : -w node3 -n2 "$bin/mpitest-$lib" report \
        || { fail "heterogeneous srun without --lama-* failed: $(tail -n 5 "$work/err")"; return 1; }
    grep -E '^[0-9]+ ' "$work/all" | sort -n > "$work/out"
    report_complete 4 || return 1
    assert_ne "het step without --lama-*: masks" "$with" "$(actual_cpus)" || return 1
    assert_eq "het step without --lama-*: LAMA_CPUS" "unset unset unset unset" "$(report_field 4)"
}

# --- record, plan, rerun ------------------------------------------------------------------

# record NAME [VAR=VALUE...] SRUN-ARGS...: the halo exchange under Open MPI with its
# monitoring component on (pml_monitoring: each process writes PREFIX.<rank>.prof at
# MPI_Finalize, on its own node); the files of every node gathered in $work/NAME/.
record() {
    local name=$1 h vars=(); shift
    while [[ ${1:-} == *=* && ${1:-} != -* ]]; do vars+=("$1"); shift; done
    for h in "${nodes[@]}"; do
        on "$h" rm -rf "/tmp/rec-$name" && "$cluster" exec -u tester "$h" mkdir -p "/tmp/rec-$name" || return 1
    done
    mpi_env=("${vars[@]}" OMPI_MCA_pml_monitoring_enable=2 OMPI_MCA_pml_monitoring_enable_output=3
        OMPI_MCA_pml_monitoring_filename="/tmp/rec-$name/prof")
    run_mpi ompi "$@" -- report halo 65536 4
    local rc=$?
    mpi_env=()
    [ $rc -eq 0 ] || { fail "$name: $(tail -n 5 "$work/err")"; return 1; }
    check_ranks ompi 6 && check_halo 6 3x2 || return 1
    cp "$work/out" "$work/$name.report"
    rm -rf "${work:?}/$name" && mkdir -p "$work/$name"
    for h in "${nodes[@]}"; do
        on "$h" sh -c "cd /tmp/rec-$name && tar cf - ." | tar xf - -C "$work/$name" || return 1
    done
    [ "$(ls "$work/$name" | grep -c '\.prof$')" -eq 6 ] \
        || fail "$name: expected 6 monitoring files, found: $(ls "$work/$name" | tr '\n' ' ')"
}

# The application's point-to-point traffic a recording holds: "src dst bytes" per E line, sorted.
traffic() { cat "$work/$1"/*.prof | awk -F'\t' '$1 == "E" { split($4, b, " "); print $2, $3, b[1] }' | sort -n -k1,1 -k2,2; }

# Bytes sent between nodes in a recording, by the hosts its run's report gives each rank
# (worked out here with awk, not by lama).
bytes_between_nodes() {
    awk 'NR == FNR { host[$1] = $2; next } { if (host[$1] != host[$2]) sum += $3 } END { print sum + 0 }' \
        "$work/$1.report" <(traffic "$1")
}

t_mpi_record_plan_rerun() {
    # Run 1: ranks cyclic over the nodes (srun -m cyclic, LAMA's nscbh on each node). The
    # halo's 3x2 periodic grid makes ranks 0-1, 2-3 and 4-5 exchange twice what the other
    # neighbours do (both of their north-south halos), and cyclic order puts each such pair
    # on two nodes.
    record first -N3 -n6 -m cyclic --lama-map=nscbh || return 1
    assert_eq "run 1: masks by hand" "node1:0 node2:0 node3:0 node1:1 node2:1 node3:1" "$(actual_cpus)" || return 1
    [ -n "$(traffic first)" ] || { fail "run 1 recorded no point-to-point traffic"; return 1; }
    # The plan, from the recorded files.
    "$lama" plan --format ompi --matrix "$work/first" --np 6 --topology "$work/%n.xml" \
        --node-names 'node[1-3]' --bind hwthread --explain --out "$work/recplan" > "$work/recplan.txt" 2>&1 \
        || { fail "lama plan from the recording: $(cat "$work/recplan.txt")"; return 1; }
    as_user sh -c 'cat > /tmp/recplan.lama' < "$work/recplan.lama" && as_user sh -c 'cat > /tmp/recplan.hosts' < "$work/recplan.hosts" || return 1
    # Its modelled cost is below run 1's placement (nscbh, a candidate of the plan).
    local planned before
    # (Whole costs are printed with their digits grouped: 1,234,567.)
    planned=$(sed -n 's/.* wins with cost \([0-9.,e+]*\).*/\1/p' "$work/recplan.txt" | head -n 1 | tr -d ,)
    before=$(awk '$1 == "nscbh" { gsub(",", "", $2); print $2 }' "$work/recplan.txt")
    [ -n "$planned" ] && [ -n "$before" ] || { fail "no costs in lama plan --explain: $(cat "$work/recplan.txt")"; return 1; }
    awk -v a="$planned" -v b="$before" 'BEGIN { exit !(a < b) }' \
        || fail "the plan (cost $planned) is not below run 1's placement nscbh ($before)" || return 1
    # Run 2: the plan, as lama plan prints it.
    record second SLURM_HOSTFILE=/tmp/recplan.hosts -m arbitrary -n6 --lama-plan=/tmp/recplan.lama || return 1
    assert_eq "run 2: each rank as planned" "$(planned_cpus recplan)" "$(actual_cpus)" || return 1
    # The same traffic, fewer bytes between nodes.
    assert_eq "the recorded traffic of both runs" "$(traffic first)" "$(traffic second)" || return 1
    local b1 b2; b1=$(bytes_between_nodes first) b2=$(bytes_between_nodes second)
    echo "    bytes between nodes: run 1 (cyclic) $b1, run 2 (the plan) $b2; modelled cost $before -> $planned"
    [ "$b2" -lt "$b1" ] || fail "run 2 sent $b2 bytes between nodes, run 1 $b1"
}

t_mpi_daemons_still_up() {
    wait_for 60 nodes_idle || fail "nodes not idle after the MPI tests" || return 1
    local m
    for m in slurmctld "${nodes[@]}"; do
        if on "$m" sh -c 'cat /var/log/slurm/*.log' | grep -E 'fatal|Segmentation|panicked|Caught panic' >&2; then
            fail "$m logged a crash"; return 1
        fi
    done
}

all_tests=(t_mpi_setup t_mpi_pmix_in_slurm t_mpi_layouts_mpich t_mpi_hybrid_mpich t_mpi_het_step)
# Open MPI direct launch needs Slurm's mpi/pmix (none in Debian sid's 26.05, above).
[ "$flavour" == 24.11 ] && all_tests+=(t_mpi_layouts_ompi t_mpi_hybrid_ompi t_mpi_record_plan_rerun)
all_tests+=(t_mpirun_in_batch t_lama_exec_launchers t_mpi_daemons_still_up)

selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${all_tests[@]}")
[ "${selected[0]}" == t_mpi_setup ] || selected=(t_mpi_setup "${selected[@]}")
run_tests mpi "${selected[@]}"
