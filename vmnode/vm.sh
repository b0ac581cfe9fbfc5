#!/usr/bin/env bash
# The QEMU test node (see vmnode/README.md): one Debian guest under QEMU's software emulation
# with a real multi-socket NUMA topology (2 packages x 2 dies, one NUMA node and one L3 per
# die, 4 cores per package, 2 threads per core: 16 CPUs) and cgroup v2, running Slurm's
# slurmctld and slurmd (cgroup/v2, task/cgroup,task/affinity, proctrack/cgroup) with the
# plugin installed from its Debian package. Two flavours, as the docker clusters have:
# LAMA_SLURM=24.11 (the default: Debian trixie, Slurm 24.11) or 26.05 (Debian sid, Slurm
# 26.05); each has its own image cache and run directory, so the two never clash.
#   vmnode/vm.sh build     the guest image (vmnode/image.sh; cached by a hash of its inputs)
#   vmnode/vm.sh up        build, the plugin's package for the flavour's Slurm
#                          (scripts/package.sh), boot, install the package, write Slurm's
#                          configuration with the node line of the guest's own hwloc discovery,
#                          start munge, slurmctld, slurmd; each step waits on readiness and
#                          names what is late
#   vmnode/vm.sh down      stop the guest (its disk is a snapshot: nothing of a run is kept)
#   vmnode/vm.sh exec [-u USER] CMD...   run a command in the guest (root by default), stdin
#                          passed through, its exit status returned
#   vmnode/vm.sh logs      slurmctld's and slurmd's logs, and the guest's console
#   vmnode/vm.sh status    the guest, its daemons and sinfo
#   vmnode/vm.sh running   exit status 0 if the guest's QEMU runs
#   vmnode/vm.sh check     whether this machine can run the guest; prints the reason if not
#   vmnode/vm.sh test [TEST...]  check, up, tests/vm/run.sh, logs on failure, down
# Environment:
#   LAMA_SLURM=24.11|26.05 the guest's Slurm (default 24.11); every command acts on that
#                          flavour's guest
#   LAMA_VM_CGROUP_JOB_ID_PATHS=yes  (26.05 only) up/test write CgroupJobIdPaths=yes in
#                          cgroup.conf: job cgroups named job_<id> as before 26.05, instead of
#                          26.05's default, the job's SLUID
#   LAMA_VM=0              check (and so scripts/test.sh) says the guest tests are not wanted
#   LAMA_VM_BOOT_TIMEOUT=S bound on the boot, up to the guest's sshd answering (default 900:
#                          about 60 s on an idle machine; a CI machine slower than ours took
#                          more than 340 s beside the docker suites)
#   LAMA_VM_TEST_TIMEOUT=S test: bound on tests/vm/run.sh (default 3300: the 24.11 guest's
#                          tests took 664 s on an idle machine, up to 1,352 s beside the
#                          docker suites and about 2,000 s with a developer's builds beside
#                          them too; docs/testing.md gives the reasoning)
#   LAMA_VM_PORT=P         the first loopback port of the host tried for forwarding to the
#                          guest's sshd (default 10022; the first free one from there is used)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
. "$top/scripts/lib.sh"
flavour=${LAMA_SLURM:-24.11}
# The flavour's Debian suite (scripts/lib.sh, shared with the docker clusters; it also sets
# the docker build directory, which this script does not use: its own follows).
slurm_flavour "$flavour" "$top" || exit 2
# tests/vm/run.sh, run by `test`, calls this script again: the same flavour.
export LAMA_SLURM=$flavour
# Per flavour: the image cache and the run directory (pid file, port, console, ssh socket),
# and QEMU's process name. 24.11 keeps the first guest's places.
case $flavour in
    24.11) build=$here/.build; qemu_name=lama-vmnode ;;
    *) build=$here/.build/slurm-$flavour; qemu_name=lama-vmnode-${flavour/./} ;;
esac
run=$build/run
cgroup_job_id_paths=${LAMA_VM_CGROUP_JOB_ID_PATHS:-no}
case $cgroup_job_id_paths in
    yes | no) ;;
    *) echo "vmnode: LAMA_VM_CGROUP_JOB_ID_PATHS=$cgroup_job_id_paths: use yes or no" >&2; exit 2 ;;
esac
if [ "$cgroup_job_id_paths" == yes ] && [ "$flavour" == 24.11 ]; then
    echo "vmnode: LAMA_VM_CGROUP_JOB_ID_PATHS=yes is for Slurm 26.05 (24.11 names job cgroups job_<id> always and has no CgroupJobIdPaths)" >&2
    exit 2
fi

# The machine: two packages of two dies; each die one NUMA node of 1 GiB with its own L3 (QEMU
# shares L3 per die); two cores per die, two threads per core. Cascadelake-Server, an Intel
# model: QEMU exposes dies (CPUID leaf 0x1F) and two threads per core for it under TCG, where
# -cpu max on an AMD host warns that it cannot do hyperthreading. NUMA distances as a
# sub-NUMA-clustered two-socket server reports them: 12 within a package, 21 across.
# One host thread runs all 16 vCPUs (thread=single): with one thread per vCPU (thread=multi)
# the kernel's live code patching raced under TCG. A static key flipped while other vCPUs run
# (the scheduler's keys when its domains are built, sched_clock's when the clocksource
# watchdog finds the emulated TSC unstable) is patched with an int3 first; a vCPU thread that
# was still running a translation of the patched page hit that int3 after the patch had
# finished, which the kernel takes for a stray breakpoint: "Oops: int3" in sched_clock_cpu or
# update_sd_lb_stats, then "Fatal exception in interrupt" (seen 2.6-5.8 s into the boot, in
# up to four boots of ten under load). With one thread a vCPU runs only between the others'
# translation blocks, after every write of a patch has invalidated them. It also leaves the
# second core of a 2-core machine to the run beside the guest (scripts/test.sh).
qemu_machine=(-accel tcg,thread=single -machine q35 -cpu Cascadelake-Server
    -smp 16,sockets=2,dies=2,cores=2,threads=2 -m 4G)
for n in 0 1 2 3; do
    qemu_machine+=(-object "memory-backend-ram,id=mem$n,size=1G"
        -numa "node,nodeid=$n,cpus=$((n * 4))-$((n * 4 + 3)),memdev=mem$n")
done
for pair in 0:1 2:3; do qemu_machine+=(-numa "dist,src=${pair%:*},dst=${pair#*:},val=12"); done
for pair in 0:2 0:3 1:2 1:3; do qemu_machine+=(-numa "dist,src=${pair%:*},dst=${pair#*:},val=21"); done
# I/O locality as a real server's firmware reports it (ACPI _PXM of a host bridge): two PCI
# Express expander bridges, each bound to a NUMA node, with devices behind root ports: an e1000e
# NIC on NUMA node 1 (CPUs 4-7), a virtio NIC and a display adapter (bochs) on node 3 (CPUs
# 12-15). They are there to be seen: each is plugged into an empty hub (no DHCP server, no
# address), and the guest configures only the ssh NIC (by its MAC address, image.sh), so no
# other interface ever holds the ssh address.
# (The disk and the ssh NIC are placed on the root bus by name: QEMU would otherwise put them
# behind the last expander bridge, which takes only bridges.)
qemu_machine+=(-device pxb-pcie,id=pxb1,bus_nr=64,numa_node=1,bus=pcie.0
    -device pcie-root-port,id=rp1,bus=pxb1,chassis=11,slot=0
    -netdev hubport,id=io1,hubid=1 -device e1000e,netdev=io1,bus=rp1,mac=52:54:00:00:01:01
    -device pxb-pcie,id=pxb3,bus_nr=128,numa_node=3,bus=pcie.0
    -device pcie-root-port,id=rp3,bus=pxb3,chassis=13,slot=0
    -netdev hubport,id=io3,hubid=3 -device virtio-net-pci,netdev=io3,bus=rp3,mac=52:54:00:00:01:03
    -device pcie-root-port,id=rp3d,bus=pxb3,chassis=14,slot=1
    -device bochs-display,bus=rp3d)
guest_mem_mib=4096

# Prints the guest image's directory, built first unless the one for the current inputs (the
# suite, the mirror, the recipe) exists.
cmd_build() {
    local mirror hash dir t0=$SECONDS
    mirror=$(debian_mirror) || return 1
    hash=$( (printf '%s\n' "$suite" "$mirror"; cat "$here/image.sh") | sha256sum | cut -c1-12)
    dir=$build/image-$hash
    if [ -f "$dir/.done" ]; then
        echo "$dir"
        return 0
    fi
    log "building the Slurm $flavour guest image from Debian $suite packages ($mirror): ${dir#"$top"/}"
    # Images of earlier inputs of this flavour are removed: each is about 1 GiB. (The 24.11
    # cache is vmnode/.build/image-*, the others' vmnode/.build/slurm-R/image-*.)
    rm -rf "$build"/image-*
    "$here/image.sh" "$dir.tmp" "$suite" "$mirror" >&2 \
        || { echo "vmnode: building the guest image failed" >&2; rm -rf "$dir.tmp"; return 1; }
    mv "$dir.tmp" "$dir" && touch "$dir/.done" || return 1
    log "guest image built in $((SECONDS - t0))s"
    echo "$dir"
}

ssh_opts() {
    local dir
    dir=$(cat "$run/image")
    echo "-q -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5 -o ControlPath=$run/ssh.ctl -i $dir/id_ed25519 -p $(cat "$run/port")"
}

# Runs a shell command line in the guest as root: guest 'CMD LINE'
guest() {
    # shellcheck disable=SC2046
    ssh $(ssh_opts) root@127.0.0.1 -- "$1"
}

# Whether the guest's QEMU runs: the pid file's process, if it is ours (a stale pid file may
# name another process by now).
running() {
    local pid cmdline
    pid=$(cat "$run/qemu.pid" 2>/dev/null) || return 1
    # (No pipe into grep -q: under pipefail an early exit of grep fails the pipe.)
    cmdline=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmdline == *" -name $qemu_name "* ]]
}

# The first loopback port from P (default LAMA_VM_PORT, else 10022) nothing answers on.
free_port() {
    local p=${1:-${LAMA_VM_PORT:-10022}}
    while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
    echo "$p"
}

# Why this machine cannot run the guest, or nothing.
why_not() {
    [ "${LAMA_VM:-1}" != 0 ] || { echo "LAMA_VM=0 was given"; return; }
    command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 is not installed (scripts/deps.sh installs it)"; return; }
    qemu-system-x86_64 -accel help 2>/dev/null | grep -x tcg > /dev/null || { echo "this qemu-system-x86_64 has no TCG (software emulation)"; return; }
    # The plugin's package is built against the docker cluster's Slurm headers.
    docker info > /dev/null 2>&1 || { echo "docker does not answer (the plugin's package is built against the headers of the docker cluster's image)"; return; }
    local avail
    avail=$(awk '$1 == "MemAvailable:" { print int($2 / 1024) }' /proc/meminfo)
    [ "$avail" -ge $((guest_mem_mib + 1024)) ] || { echo "the guest needs $((guest_mem_mib + 1024)) MiB of free memory and the machine has $avail MiB"; return; }
    local disk
    mkdir -p "$build"
    disk=$(df -Pm "$build" | awk 'NR == 2 { print $4 }')
    [ "$disk" -ge 4096 ] || { echo "the guest image needs 4 GiB of free disk in $build and there are $disk MiB"; return; }
}

cmd_check() {
    local why
    why=$(why_not)
    if [ -n "$why" ]; then
        echo "vmnode: this machine cannot run the guest: $why" >&2
        return 1
    fi
}

# Waits until CMD... succeeds (quietly), at most SECONDS; fails early when the guest is gone.
# wait_until SECONDS WHAT CMD...
wait_until() {
    local bound=$1 what=$2 deadline=$((SECONDS + $1))
    shift 2
    until "$@" >/dev/null 2>&1; do
        running || { echo "vmnode: the guest stopped while waiting for $what" >&2; return 1; }
        [ $SECONDS -lt $deadline ] || { echo "vmnode: $what: not ready after ${bound}s" >&2; return 1; }
        sleep 1
    done
}

console_tail() {
    echo "vmnode: the last lines of the guest's console ($run/console.log):" >&2
    tail -n 15 "$run/console.log" 2>/dev/null | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/^/    /' >&2
}

# QEMU's threads at a higher priority (nice -5, as root; quietly nothing otherwise): the
# emulated machine has one host thread for its 16 vCPUs, and on a 2-core machine that also
# builds and runs the docker clusters (scripts/test.sh) it was the longest lane, starved by
# tens of runnable processes beside it. Even so the 24.11 guest's QEMU had 54 % of a core over
# a whole run (1,044 s of CPU in 1,930 s, process accounting): the run is bound by its CPU
# work, both cores busy throughout, so a higher priority would only move the wait to the
# docker suites, whose end starts the second guest (docs/testing.md).
prioritise() {
    local t
    for t in /proc/"$1"/task/*; do renice -n -5 -p "${t##*/}" > /dev/null 2>&1 || true; done
}

# Emulated, the guest boots 5 to 50 times slower than a real machine, and on a loaded host it
# stalls for minutes at a time (soft lockups in its console): systemd's 90-s default for a
# unit to start failed systemd-networkd once, and so the ssh port never answered. Its units get
# 600 s here, under the boot's own bound.
slow_boot="systemd.default_timeout_start_sec=600"

# start_qemu DIR PORT: starts the guest's QEMU in a session of its own (it outlives this
# script, as a daemon would), its output and, when it ends, its exit status in qemu.log; returns
# once its pid file names a running QEMU that has opened the ssh port, 1 if it ended first.
# (Not -daemonize: a daemonized QEMU sends its later messages to /dev/null and nobody sees its
# exit status, so a guest that vanished in the middle of a run could not say why: CI lost the
# 26.05 guest that way once, between two tests, with nothing to read.)
start_qemu() {
    local dir=$1 port=$2
    rm -f "$run/qemu.pid" "$run/console.log" "$run/qemu.log"
    # The guest's writes go to a temporary snapshot; the image stays as built. Its only network
    # is QEMU's user-mode network, restricted (no route out of the guest), with the guest's
    # sshd forwarded to a loopback port of the host.
    setsid bash -c '"$@"; rc=$?; echo "vmnode: QEMU ended at $(date +%T) with exit status $rc"' qemu \
        qemu-system-x86_64 -name "$qemu_name" "${qemu_machine[@]}" \
        -kernel "$dir/vmlinux" -initrd "$dir/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 quiet panic=-1 $slow_boot" -no-reboot \
        -drive "file=$dir/root.img,if=none,id=root,format=raw,snapshot=on" \
        -device virtio-blk-pci,drive=root,bus=pcie.0 \
        -netdev "user,id=ssh,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
        -device virtio-net-pci,netdev=ssh,bus=pcie.0,mac=52:54:00:00:00:22 \
        -display none -monitor none -serial "file:$run/console.log" \
        -pidfile "$run/qemu.pid" < /dev/null > "$run/qemu.log" 2>&1 &
    # QEMU writes its pid file before it opens the forwarded port (where a taken port ends it)
    # and the serial file after both: started once the console file exists.
    local deadline=$((SECONDS + 60))
    until running && [ -e "$run/console.log" ]; do
        grep -q '^vmnode: QEMU ended' "$run/qemu.log" 2>/dev/null && return 1
        [ $SECONDS -lt $deadline ] || { echo "vmnode: QEMU started nothing in 60 s" >&2; return 1; }
        sleep 0.2
    done
}

# Why the guest's QEMU is gone, for a run that finds it gone: QEMU's own messages and exit
# status (137: SIGKILL, the host's OOM killer or a kill -9; 0 with a panic in the console: the
# guest's kernel panicked, panic=-1 and -no-reboot end QEMU) and the end of the console.
why_stopped() {
    echo "vmnode: the Slurm $flavour guest's QEMU is gone; its output:" >&2
    grep -v "TCG doesn't support requested feature" "$run/qemu.log" 2>/dev/null | tail -n 10 | sed 's/^/    /' >&2
    grep -q '^vmnode: QEMU ended' "$run/qemu.log" 2>/dev/null \
        || echo "    (no exit status: QEMU's wrapper was killed too, or QEMU is not this run's)" >&2
    grep -m 3 -E 'Kernel panic|Oops|BUG:|Out of memory' "$run/console.log" 2>/dev/null | tr -d '\r' | sed 's/^/    console: /' >&2
    console_tail
}

boot() {
    local dir=$1 port=${LAMA_VM_PORT:-10022} t0=$SECONDS try
    for try in 1 2 3; do
        port=$(free_port "$port")
        echo "$port" > "$run/port"
        log "booting the Slurm $flavour guest (QEMU TCG, 16 CPUs: 2 packages x 2 dies x 2 cores x 2 threads, 4 NUMA nodes; ssh on 127.0.0.1:$port)"
        start_qemu "$dir" "$port" && break
        # Another program may have taken the port between the look and the start.
        if grep -q 'host forwarding' "$run/qemu.log" && [ $try -lt 3 ]; then
            port=$((port + 1))
            continue
        fi
        echo "vmnode: qemu did not start:" >&2
        grep -v "TCG doesn't support requested feature" "$run/qemu.log" >&2
        return 1
    done
    prioritise "$(cat "$run/qemu.pid")"
    local bound=${LAMA_VM_BOOT_TIMEOUT:-900}
    if ! wait_until "$bound" "the guest's sshd" guest true; then
        if running; then console_tail; else why_stopped; fi
        return 1
    fi
    # One connection shared by every later command (a new one costs about a second under TCG).
    # shellcheck disable=SC2046
    ssh $(ssh_opts) -o ControlMaster=yes -o ControlPersist=yes -N -f root@127.0.0.1 < /dev/null > /dev/null 2>&1 || true
    log "the guest answers after $((SECONDS - t0))s"
}

# Writes Slurm's configuration in the guest: slurm.conf and cgroup.conf from this folder, the
# node line from `slurmd -C` (hwloc's discovery of the guest's real machine).
configure_slurm() {
    local node_line
    node_line=$(guest 'slurmd -C' | grep '^NodeName=') || { echo "vmnode: slurmd -C printed no node line" >&2; return 1; }
    # Memory is left to the jobs' defaults; RealMemory stays as slurmd measures it.
    { cat "$here/slurm.conf"; echo "$node_line"; echo "PartitionName=debug Nodes=vmnode Default=YES MaxTime=INFINITE State=UP"; } \
        | guest 'cat > /etc/slurm/slurm.conf' || return 1
    # 26.05 names a job's cgroup v2 directory by its SLUID unless CgroupJobIdPaths=yes.
    { cat "$here/cgroup.conf"
      if [ "$cgroup_job_id_paths" == yes ]; then
          echo "# LAMA_VM_CGROUP_JOB_ID_PATHS=yes: job_<id> directories, as before 26.05"
          echo "CgroupJobIdPaths=yes"
      fi; } | guest 'cat > /etc/slurm/cgroup.conf' || return 1
    echo "$node_line" > "$run/node-line"
}

install_plugin() {
    local deb=$1 tools=${1%/*}/spank-lama-tools_${1##*/spank-lama_}
    guest 'cat > /tmp/spank-lama.deb' < "$deb" && guest 'cat > /tmp/spank-lama-tools.deb' < "$tools" \
        || { echo "vmnode: copying $deb and $tools into the guest failed" >&2; return 1; }
    guest 'dpkg -i /tmp/spank-lama.deb /tmp/spank-lama-tools.deb >/dev/null && rm /tmp/spank-lama.deb /tmp/spank-lama-tools.deb' \
        || { echo "vmnode: the packages $(basename "$deb") and $(basename "$tools") were not installed in the guest" >&2; return 1; }
    guest "sed -i 's|^# required |required |' /etc/slurm/plugstack.conf.d/lama.conf && grep -q '^required ' /etc/slurm/plugstack.conf.d/lama.conf" \
        || { echo "vmnode: no plugin line to enable in the guest's lama.conf" >&2; return 1; }
}

# The MPI test programs (tests/mpi/mpitest.c built with Open MPI and with MPICH) from the docker
# node image of the same Debian suite (built first if missing), into /opt/lama-tests: the guest
# has the libraries' run time, and the same packages' versions as that image.
install_mpi_programs() {
    local image
    LAMA_SLURM=$flavour "$top/docker/cluster.sh" build >&2 || return 1
    # (In a subshell: scripts/lib.sh's slurm_flavour sets its own $build.)
    image=$(. "$top/scripts/lib.sh" && slurm_flavour "$flavour" "$top" && cat "$build/node-image") || return 1
    docker run --rm --entrypoint tar "$image" -C /opt/lama-tests -c . \
        | guest 'mkdir -p /opt/lama-tests && tar -x -C /opt/lama-tests && /opt/lama-tests/mpitest-mpich --help >/dev/null 2>&1; test -x /opt/lama-tests/mpitest-ompi' \
        || { echo "vmnode: the MPI test programs were not copied into the guest" >&2; return 1; }
}

# Intel MPI's run time (scripts/lib.sh intel_mpi_runtime), copied into the guest's /opt/impi.
install_intel_mpi() {
    local cache
    cache=$(intel_mpi_runtime "$top") || return 1
    tar -C "$cache" -c . | guest 'mkdir -p /opt/impi && tar -x -C /opt/impi && test -x /opt/impi/bin/mpiexec.hydra' \
        || { echo "vmnode: Intel MPI was not copied into the guest" >&2; return 1; }
}

# Starts one unit; systemctl returns once it is ready (munge forks, slurmctld and slurmd notify).
start_unit() {
    local unit=$1
    if ! guest "timeout 300 systemctl start $unit"; then
        echo "vmnode: $unit did not start within 300s:" >&2
        guest "systemctl status --no-pager $unit | tail -n 20" >&2 || true
        return 1
    fi
}

node_state() { guest 'sinfo -h -N -o %T' 2>/dev/null; }
node_idle() { [ "$(node_state)" == idle ]; }

cmd_up() {
    local dir deb t0=$SECONDS
    cmd_check || return 1
    dir=$(cmd_build) || return 1
    deb=$(LAMA_DEB_FAST=1 "$top/scripts/package.sh" "$flavour") || return 1
    cmd_down 2>/dev/null || true
    mkdir -p "$run" && echo "$dir" > "$run/image" || return 1
    # A kernel panic while booting ends QEMU at once (panic=-1, -no-reboot): the console says
    # why, and the boot is not tried again (see qemu_machine: the cause is gone, and a
    # panic now is a new one to look at).
    if ! boot "$dir"; then
        grep -q 'Kernel panic' "$run/console.log" 2>/dev/null \
            && echo "vmnode: the guest's kernel panicked while booting (console in ${run#"$top"/}/console.log)" >&2
        return 1
    fi
    install_plugin "$deb" || return 1
    install_mpi_programs || return 1
    install_intel_mpi || return 1
    configure_slurm || return 1
    local unit
    for unit in munge slurmctld slurmd; do start_unit "$unit" || return 1; done
    if ! wait_until 180 "slurmd registering with slurmctld" node_idle; then
        echo "vmnode: the node is '$(node_state)', not idle; slurmd's log:" >&2
        guest 'tail -n 20 /var/log/slurm/slurmd.log' >&2 || true
        return 1
    fi
    local paths=
    [ "$cgroup_job_id_paths" == no ] || paths=" (CgroupJobIdPaths=yes)"
    log "Slurm $(guest 'slurmd -V' | awk '{ print $2 }') is up in the guest after $((SECONDS - t0))s$paths: $(cat "$run/node-line")"
}

cmd_down() {
    if running; then
        local pid
        pid=$(cat "$run/qemu.pid")
        # Nothing in the guest is kept (snapshot disk): stopping QEMU is enough.
        # shellcheck disable=SC2046
        ssh $(ssh_opts) -O exit root@127.0.0.1 > /dev/null 2>&1 || true
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$run/qemu.pid"
}

cmd_exec() {
    local user=root
    if [ "${1:-}" == -u ]; then
        [ $# -ge 2 ] || { echo "usage: vmnode/vm.sh exec [-u USER] CMD..." >&2; return 2; }
        user=$2
        shift 2
    fi
    [ $# -gt 0 ] || { echo "usage: vmnode/vm.sh exec [-u USER] CMD..." >&2; return 2; }
    running || { echo "vmnode: the guest is not running (vmnode/vm.sh up)" >&2; return 1; }
    local line
    line=$(printf '%q ' "$@")
    if [ "$user" == root ]; then guest "$line"; else guest "cd ~$user && runuser -u $user -- $line"; fi
}

# The daemons' logs (while the guest runs) and the console (also after it stopped).
cmd_logs() {
    local f
    if running; then
        for f in slurmctld slurmd; do
            echo "== $f"
            guest "cat /var/log/slurm/$f.log" || true
        done
    else
        echo "== the guest is not running: no daemon logs"
    fi
    echo "== console"
    tr -d '\r' < "$run/console.log" 2>/dev/null || echo "(no console log)"
}

cmd_test() {
    local t0=$SECONDS rc=0
    if ! cmd_check; then
        echo "vm: 0 passed, 0 failed, 1 skipped"
        return 0
    fi
    if ! cmd_up; then
        echo "vmnode: the guest did not come up" >&2
        cmd_down
        echo "vm: 0 passed, 1 failed"
        return 1
    fi
    # The guest is stopped however this ends (it runs detached from this process group).
    trap cmd_down EXIT
    trap 'exit 130' INT TERM
    # Bounded: a test waiting on an allocation that never comes must not hold CI.
    timeout "${LAMA_VM_TEST_TIMEOUT:-3300}" "$top/tests/vm/run.sh" "$@" || rc=1
    if [ $rc -ne 0 ]; then
        local logs=${TMPDIR:-/tmp}/spank-lama-vm-logs-$flavour.txt
        cmd_logs > "$logs" 2>&1 || true
        echo "vmnode: daemon logs and console in $logs" >&2
        running || why_stopped
    fi
    cmd_down
    log "Slurm $flavour guest: build, boot and tests took $((SECONDS - t0))s"
    return $rc
}

case "${1:-}" in
    build) cmd_build > /dev/null ;;
    up) cmd_up ;;
    down) cmd_down ;;
    exec) shift; cmd_exec "$@" ;;
    logs) cmd_logs ;;
    status)
        if running; then
            echo "guest running (pid $(cat "$run/qemu.pid"), ssh on 127.0.0.1:$(cat "$run/port"))"
            guest 'systemctl is-active munge slurmctld slurmd | paste -sd" "; sinfo -N -o "%N %T %c %z"'
        else
            echo "guest not running"
        fi
        ;;
    check) cmd_check && echo "vmnode: this machine can run the guest" ;;
    running) running ;;
    test) shift; cmd_test "$@" ;;
    *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
