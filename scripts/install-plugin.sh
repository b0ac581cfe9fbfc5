#!/bin/sh
# Installs spank_lama.so on a Slurm node, refusing a plugin built for another Slurm.
#   scripts/install-plugin.sh [--check] PLUGIN.so [DEST]
# The plugin carries the Slurm version whose headers it was built against ("spank-lama built
# for Slurm 24.11.5"); Slurm loads only plugins of its own major.minor release, and a
# `required` plugin it cannot load stops every srun. This compares that version with the Slurm
# installed here: `slurmd -V`, else `scontrol version`, else slurm/slurm_version.h. With
# --check nothing is installed. DEST defaults to spank_lama.so in the first directory of the
# node's PluginDir (scontrol show config); without an answer DEST must be given. The file is
# installed as a new file, never rewritten in place under a running daemon. POSIX sh: runs on
# the nodes.
set -eu
check=
if [ "${1:-}" = --check ]; then check=1; shift; fi
plugin=${1:?usage: install-plugin.sh [--check] PLUGIN.so [DEST]}
dest=${2:-}

[ -r "$plugin" ] || { echo "install-plugin: cannot read $plugin" >&2; exit 1; }
built=$(grep -ao 'spank-lama built for Slurm [0-9]*\.[0-9]*\.[0-9]*' "$plugin" | head -n1 | awk '{ print $NF }')
[ -n "$built" ] || {
    echo "install-plugin: $plugin is not a spank-lama plugin (no 'spank-lama built for Slurm' marker)" >&2
    exit 1
}

installed=
for cmd in "slurmd -V" "scontrol version" "srun --version"; do
    installed=$($cmd 2>/dev/null | awk '$1 == "slurm" { print $2; exit }') || true
    [ -n "$installed" ] && break
done
if [ -z "$installed" ]; then
    header=${SLURM_INCLUDE:-/usr/include}/slurm/slurm_version.h
    if [ -r "$header" ]; then
        n=$(awk '$2 == "SLURM_VERSION_NUMBER" { print $3 }' "$header")
        [ -n "$n" ] && installed=$(printf '%d.%02d.%d' $((n >> 16)) $(((n >> 8) & 255)) $((n & 255)))
    fi
fi
[ -n "$installed" ] || {
    echo "install-plugin: cannot tell which Slurm is installed here (no slurmd -V, scontrol version or slurm_version.h)" >&2
    exit 1
}

release() { echo "$1" | cut -d. -f1-2; }
if [ "$(release "$built")" != "$(release "$installed")" ]; then
    echo "install-plugin: refusing $plugin: it was built for Slurm $built, but this node runs Slurm $installed." >&2
    echo "install-plugin: Slurm loads only plugins built for its own release ($(release "$installed")); rebuild against this Slurm's headers (README, \"Building for your Slurm\")." >&2
    exit 1
fi
echo "install-plugin: $plugin was built for Slurm $built; this node runs Slurm $installed" >&2
[ -n "$check" ] && exit 0
if [ -z "$dest" ]; then
    dir=$(scontrol show config 2>/dev/null | awk '$1 == "PluginDir" { print $3; exit }' | cut -d: -f1)
    [ -n "$dir" ] || {
        echo "install-plugin: scontrol show config gave no PluginDir: name the destination (PluginDir/spank_lama.so)" >&2
        exit 1
    }
    dest=$dir/spank_lama.so
fi
install -D -m 0755 "$plugin" "$dest"
echo "install-plugin: installed $dest" >&2
