#!/bin/bash
# Starts one cluster member: `entrypoint.sh controller` or `entrypoint.sh node`.
set -euo pipefail
role=${1:?usage: entrypoint.sh controller|node}

# cgroup v1 hierarchies that Slurm uses (cpuset for ConstrainCores, freezer for
# proctrack/cgroup, memory), read-write and rooted at this container's private cgroup
# namespace. Docker mounts them read-only; a fresh mount of the controller over it
# (CAP_SYS_ADMIN) is writable. A controller that cannot be mounted is a fatal error.
remount_cgroups() {
    local ctrls=(cpuset freezer memory)
    # ConstrainDevices=yes (a configuration row, in any spelling Slurm takes for true) also
    # needs the devices controller.
    grep -qiE '^ConstrainDevices=(yes|true|1|up)$' /etc/slurm/cgroup.conf && ctrls+=(devices)
    for ctrl in "${ctrls[@]}"; do
        mount -t cgroup -o "$ctrl" cgroup "/sys/fs/cgroup/$ctrl" \
            || { echo "entrypoint: cannot mount the $ctrl cgroup read-write" >&2; exit 1; }
    done
}

# The plugin under test, installed from its Debian package as a site would (the package's
# preinst refuses a package built for another Slurm release), then enabled by uncommenting the
# line of its conffile /etc/slurm/plugstack.conf.d/lama.conf. No staged package: the cluster
# runs without the plugin.
install_plugin() {
    local deb
    # (ls fails when nothing is staged: under pipefail and errexit that alone would end the
    # entrypoint with status 2 before the message below.)
    deb=$(ls /opt/lama/spank-lama_*.deb 2>/dev/null | head -n1) || deb=
    if [ -n "$deb" ]; then
        # The lama command's package beside it (spank-lama-tools), except on the compute nodes
        # of the row plugin-only ("packages plugin-only"), which get the plugin's alone.
        local tools=${deb%/*}/spank-lama-tools_${deb##*/spank-lama_} debs=("$deb")
        if [ "$(hostname -s)" == slurmctld ] || ! grep -qx 'packages plugin-only' /opt/lama/config.overlay 2>/dev/null; then
            [ -f "$tools" ] || { echo "entrypoint: no $tools beside $deb" >&2; exit 1; }
            debs+=("$tools")
        fi
        dpkg -i "${debs[@]}" >&2 || { echo "entrypoint: the packages ${debs[*]} were not installed" >&2; exit 1; }
        sed -i 's|^# required |required |' /etc/slurm/plugstack.conf.d/lama.conf
        grep -q '^required ' /etc/slurm/plugstack.conf.d/lama.conf \
            || { echo "entrypoint: no plugin line to enable in lama.conf" >&2; exit 1; }
        echo "entrypoint: installed $(dpkg-query -W -f '${Package} ${Version}' spank-lama), plugin line enabled" >&2
    else
        rm -f /etc/slurm/plugstack.conf.d/lama.conf
        echo "entrypoint: no plugin in /opt/lama; running without it" >&2
    fi
}

start_munge() {
    install -o munge -g munge -m 0400 /opt/lama/munge.key /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
}

# A configuration row of the test matrix (docker/configs/NAME.conf, staged by cluster.sh as
# /opt/lama/config.overlay): each line "slurm.conf KEY=VALUE" or "cgroup.conf KEY=VALUE" sets a
# key (replacing the line that sets it, else appended), "node NAME KEY=VALUE" adds to that
# node's NodeName line, "plugstack optional" makes the plugin line optional, "host-topology
# NAME" lets that node's slurmd (and the plugin) discover the host's real topology instead of
# its made-up XML (benchmarks of live discovery; NAME's slurm.conf line must match the host),
# "add-node NAME KEY=VALUE..." adds a node (NodeName=NAME KEY=VALUE..., before the partitions;
# its container is a service of compose.yaml's profile many-nodes, its topology NAME.xml from
# topologies.txt), "partition NAME KEY=VALUE..." adds a partition, "rename-node HOST NAME" gives
# the node on host HOST the NodeName NAME (NodeHostname=HOST, in the partition's list too),
# "packages plugin-only" installs the plugin's package alone on the nodes (install_plugin). Applied on every member so
# that all daemons read the same configuration.
host_topology=  # the nodes that discover the host's real topology (host-topology NAME)
apply_overlay() {
    local overlay=/opt/lama/config.overlay what a b key
    [ -f "$overlay" ] || return 0
    while read -r what a b; do
        case "$what" in
            ''|'#'*) ;;
            slurm.conf|cgroup.conf)
                key=${a%%=*}
                if grep -q "^$key=" "/etc/slurm/$what"; then
                    sed -i "s|^$key=.*|$a|" "/etc/slurm/$what"
                else
                    echo "$a" >> "/etc/slurm/$what"
                fi
                ;;
            node) sed -i "s|^NodeName=$a .*|& $b|" /etc/slurm/slurm.conf ;;
            host-topology) host_topology+=" $a" ;;
            add-node)
                grep -q "^NodeName=$a " /etc/slurm/slurm.conf \
                    || sed -i "0,/^PartitionName=/s|^PartitionName=|NodeName=$a $b\n&|" /etc/slurm/slurm.conf
                ;;
            rename-node)
                sed -i -e "s|^NodeName=$a |NodeName=$b NodeHostname=$a |" \
                    -e "/^PartitionName=/s|Nodes=node\[1-3\]|Nodes=node[1-2],$b|" /etc/slurm/slurm.conf
                ;;
            partition) grep -q "^PartitionName=$a " /etc/slurm/slurm.conf || echo "PartitionName=$a $b" >> /etc/slurm/slurm.conf ;;
            plugstack)
                [ -f /etc/slurm/plugstack.conf.d/lama.conf ] && sed -i "s|^required |$a |" /etc/slurm/plugstack.conf.d/lama.conf
                ;;
            packages) ;;  # read by install_plugin
            *) echo "entrypoint: bad line in $overlay: $what $a $b" >&2; exit 1 ;;
        esac
    done < "$overlay"
    echo "entrypoint: configuration row $(head -n1 "$overlay" | sed 's/^# *//') applied" >&2
}

# The daemons where this image's Slurm installed them: /usr/sbin from Debian's packages,
# /usr/local/sbin from a source build with SchedMD's default layout (LAMA_SLURM=src-24.11).
daemon() {
    command -v "$1" || { echo "entrypoint: no $1 on PATH ($PATH)" >&2; return 1; }
}

# A key of slurm.conf as the daemons will read it (after the overlay; keys are
# case-insensitive, the last setting wins), else the default given.
conf_value() {
    local v
    v=$(sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/Ip" /etc/slurm/slurm.conf | tail -n1)
    echo "${v:-$2}"
}

install_plugin
apply_overlay
start_munge
case "$role" in
    controller)
        slurmctld=$(daemon slurmctld)
        # slurmctld runs as SlurmUser and creates StateSaveLocation only where it may write:
        # the directory slurm.conf names (Slurm's compiled-in default is /var/spool) is made
        # here if it is missing. The Debian images have theirs already.
        state=$(conf_value StateSaveLocation /var/spool)
        [ -d "$state" ] || install -d -o slurm -g slurm -m 0755 "$state"
        exec runuser -u slurm -- "$slurmctld" -D -i
        ;;
    node)
        remount_cgroups
        node=$(hostname -s)
        # The GPUs gres.conf gives this node: fake character devices with distinct minors,
        # which is all Slurm looks at (AutoDetect=off).
        for minor in $(sed -n "s|^NodeName=$node Name=gpu File=/dev/nvidia\[\([0-9]*\)-\([0-9]*\)\].*|\1 \2|p" \
                /etc/slurm/gres.conf | while read -r a b; do seq "$a" "$b"; done); do
            [ -e "/dev/nvidia$minor" ] || mknod -m 0666 "/dev/nvidia$minor" c 195 "$minor"
        done
        # NVIDIA's driver files for those devices: /proc/driver/nvidia/gpus/<bus id>/information
        # gives each card's device minor, which the plugin reads to tell which card a gres.conf
        # file is, and its UUID (here made of the minor). The driver numbers the cards in PCI
        # bus order: minor k is the k-th NVIDIA display or 3D controller of the node's topology.
        xml=/etc/slurm/topology/$node.xml
        if [ -e /dev/nvidia0 ] && [ -f "$xml" ] && ! mountpoint -q /proc/driver; then
            mount -t tmpfs -o mode=0755 nvidia-driver /proc/driver
            minor=0
            for bus in $(grep -o 'pci_busid="[^"]*" pci_type="030[02] \[10de:' "$xml" | cut -d'"' -f2 | sort); do
                mkdir -p "/proc/driver/nvidia/gpus/$bus"
                printf 'Model: \t\t (none: a test node)\nGPU UUID: \t GPU-5a11e000-0000-4000-8000-%012d\nDevice Minor: \t %s\nBus Location: \t %s\n' \
                    "$minor" "$minor" "$bus" > "/proc/driver/nvidia/gpus/$bus/information"
                minor=$((minor + 1))
            done
            mount -o remount,ro /proc/driver
        fi
        if [[ " $host_topology " == *" $node "* ]]; then
            echo "entrypoint: $node discovers the host's real topology" >&2
        else
            export HWLOC_XMLFILE=/etc/slurm/topology/$node.xml HWLOC_THISSYSTEM=1
        fi
        # slurmd's SlurmdSpoolDir must exist before it starts ("Domain socket directory ...: No
        # such file or directory"): slurm.conf's, else Slurm's compiled-in default. Debian's
        # slurmd package ships its directory; a source build does not.
        # This host's NodeName: the one slurm.conf gives NodeHostname=$node (slurmd then finds
        # it itself, without -N), else the host name.
        name=$(sed -n "s/^NodeName=\([^ ]*\) NodeHostname=$node .*/\1/p" /etc/slurm/slurm.conf)
        dash_n=(-N "$node")
        [ -z "$name" ] || dash_n=()
        name=${name:-$node}
        spool=$(conf_value SlurmdSpoolDir /var/spool/slurmd)
        spool=${spool//%n/$name}
        spool=${spool//%h/$node}
        mkdir -p "$spool"
        slurmd=$(daemon slurmd)
        # slurmd under a supervisor, as systemd's Restart= keeps it on a real node: a slurmd
        # that dies (the fault tests kill it) is started again, and the steps it left running
        # go on. The container ends when it is stopped.
        trap 'kill -TERM "$pid" 2>/dev/null; exit 0' TERM INT
        while :; do
            "$slurmd" -D "${dash_n[@]}" &
            pid=$!
            status=0
            wait "$pid" || status=$?
            echo "entrypoint: slurmd exited with status $status; starting it again" >&2
            sleep 1
        done
        ;;
esac
