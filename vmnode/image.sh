#!/usr/bin/env bash
# Builds the guest image of the QEMU test node from Debian packages (run by vmnode/vm.sh build,
# which caches the result by a hash of this file, the suite and the mirror):
#   vmnode/image.sh OUTDIR SUITE MIRROR      (SUITE trixie: Slurm 24.11; sid: Slurm 26.05)
# OUTDIR gets
#   root.img     ext4 file system of a Debian SUITE system (mmdebstrap + mkfs.ext4 -d): kernel,
#                initramfs, systemd, sshd, Slurm's daemons and client, munge, hwloc, numactl
#   vmlinux      the kernel, uncompressed: QEMU boots an ELF kernel directly (its PVH entry)
#   initrd.img   Debian's initramfs (virtio disk and ext4 are modules)
#   id_ed25519   the key the host logs in with (root's authorized key in the guest)
# Nothing of Slurm's configuration is in the image: vmnode/vm.sh up writes it, with the node
# line from the guest's own hwloc discovery (slurmd -C), installs the plugin's package and only
# then starts the daemons.
set -euo pipefail
out=$1 suite=$2 mirror=$3
root=$out/root

# Open MPI and MPICH at run time only (the MPI test programs are built in the docker node image
# of the same Debian suite and copied in by vm.sh up).
packages=(linux-image-amd64 initramfs-tools zstd udev kmod systemd-sysv dbus openssh-server
    slurmd slurmctld slurm-client munge hwloc libhwloc15 procps iproute2 util-linux numactl
    openmpi-bin mpich libgomp1)

sources=("$mirror")
if [ "$suite" == sid ]; then
    # sid's kernel (7.2.13 when this was written) panics while booting under QEMU's TCG more
    # often than not ("Oops: int3" at a patched jump-label site, 3 to 4 s in: cross-modifying
    # code between vCPUs); trixie's (6.12) boots every time. The sid guest takes trixie's
    # kernel: what is tested is sid's Slurm, whose cgroup v2 use is the same on either.
    packages=("${packages[@]/#linux-image-amd64/linux-image-amd64/trixie}")
    sources+=("deb $mirror trixie main")
fi
opts=(--quiet --variant=minbase --include="$(IFS=,; echo "${packages[*]}")")
# sid's Release file is valid for a week only: a mirror that is a snapshot older than that is
# refused (seen here, as docker/cluster.sh saw it), so sid is fetched without the date check.
[ "$suite" != sid ] || opts+=(--aptopt='Acquire::Check-Valid-Until "false"')

rm -rf "$out"
mkdir -p "$out"
mmdebstrap "${opts[@]}" "$suite" "$root" "${sources[@]}"

# The kernel without its self-decompressing wrapper (QEMU boots an ELF vmlinux under TCG; the
# bzImage does not boot that way here). The payload is the first stream of a known compressor
# whose output is an ELF file; Debian compresses with zstd.
extract_vmlinux() {
    local img=$1 dest=$2 magic tool off
    for pair in '\x28\xb5\x2f\xfd|zstd -dcq' '\xfd\x37\x7a\x58\x5a\x00|xz -dcq' '\x1f\x8b\x08|gzip -dcq'; do
        magic=${pair%%|*} tool=${pair#*|}
        for off in $(LC_ALL=C grep -aboP "$magic" "$img" | cut -d: -f1); do
            tail -c +$((off + 1)) "$img" | $tool > "$dest" 2> /dev/null || true
            [ "$(head -c 4 "$dest" | od -An -c | tr -d ' ')" == '177ELF' ] && return 0
        done
    done
    echo "image: no ELF kernel found inside $img" >&2
    return 1
}
extract_vmlinux "$(ls "$root"/boot/vmlinuz-* | head -n1)" "$out/vmlinux"
cp "$(ls "$root"/boot/initrd.img-* | head -n1)" "$out/initrd.img"

# The system: its name (resolved without a network), root file system, the network card that
# carries ssh (QEMU's user-mode network, restricted: only the host's forwarded ssh port reaches
# it; matched by the MAC address vm.sh gives it, so that the NICs that are only there to be
# seen by hwloc get no address and never answer in its place), the host's key for root, the
# unprivileged user that submits the jobs.
echo vmnode > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvmnode\n' > "$root/etc/hosts"
echo '/dev/vda / ext4 rw,relatime 0 1' > "$root/etc/fstab"
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nMACAddress=52:54:00:00:00:22\n\n[Network]\nAddress=10.0.2.15/24\nLinkLocalAddressing=no\n' \
    > "$root/etc/systemd/network/10-user.network"
ln -sf /usr/lib/systemd/system/systemd-networkd.service \
    "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
ssh-keygen -q -t ed25519 -N '' -C vmnode -f "$out/id_ed25519"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$out/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
chroot "$root" useradd -m -u 1000 -s /bin/bash tester

# Boot straight to the services: no graphical target, no first-boot update units (the image is
# made up to date here), no timers.
ln -sf /usr/lib/systemd/system/multi-user.target "$root/etc/systemd/system/default.target"
chroot "$root" ldconfig
touch "$root/etc/.updated" "$root/var/.updated"
rm -f "$root"/etc/systemd/system/timers.target.wants/*
# No login prompt on the serial console (console=ttyS0 would start one): the console is a file
# the host reads when something fails, and nothing logs in there.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"

# Slurm: directories, the plugstack include the plugin's package drops its line into, and no
# daemon started at boot (vm.sh up starts them once their configuration and the plugin exist).
rm -f "$root"/etc/systemd/system/multi-user.target.wants/slurm*.service
mkdir -p "$root"/var/log/slurm "$root"/var/lib/slurm/slurmctld "$root"/var/lib/slurm/slurmd \
    "$root"/etc/slurm/plugstack.conf.d
chroot "$root" chown slurm:slurm /var/log/slurm /var/lib/slurm/slurmctld
echo 'include /etc/slurm/plugstack.conf.d/*.conf' > "$root/etc/slurm/plugstack.conf"
# `mpirun` is Open MPI's, as in the docker node image; sid's Open MPI restricts its TCP
# transport to loopback in openmpi-mca-params.conf (docker/Dockerfile): the line is commented
# out there too, though one node needs no network transport.
chroot "$root" update-alternatives --quiet --set mpirun /usr/bin/mpirun.openmpi
sed -i 's/^btl_tcp_if_include/# btl_tcp_if_include/' "$root/etc/openmpi/openmpi-mca-params.conf"
# man-db would rebuild its index on every dpkg -i of the plugin.
rm -f "$root/var/lib/man-db/auto-update"

# The root file system, sized to what it holds plus room for the tests (the disk is a snapshot:
# writes go to a temporary file and are dropped when the guest stops).
size=$(( $(du -sm "$root" | cut -f1) + 1024 ))
mkfs.ext4 -q -F -L root -d "$root" "$out/root.img" "${size}M"
rm -rf "$root"
