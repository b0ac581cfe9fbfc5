# Shared shell helpers for the project's scripts (sourced, not run).

# The Debian mirror this host's apt uses (deb822 "URIs:" or one-line "deb URI suite ..."),
# skipping security mirrors; a URI ending in /debian is preferred. Never hard-coded: the
# cluster image is built from the same mirror.
debian_mirror() {
    local uris uri
    uris=$( {
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | awk 'tolower($1)=="uris:" { for (i = 2; i <= NF; i++) print $i }'
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '$1=="deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }'
    } | grep -E '^(https?|file)://' | grep -v -e security -e '-updates' || true)
    uri=$(echo "$uris" | grep -E '/debian/?$' | head -n1)
    [ -n "$uri" ] || uri=$(echo "$uris" | head -n1)
    [ -n "$uri" ] || { echo "cannot find a Debian mirror in /etc/apt/sources.list*" >&2; return 1; }
    echo "${uri%/}"
}

# apt-get with a private package list for Debian trixie, for single packages the host needs
# from the cluster's release (docker compose v2). Usage: trixie_apt ARGS...
trixie_apt() {
    local dir=${TRIXIE_APT_DIR:-/var/cache/spank-lama/trixie-apt}
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    if [ ! -f "$dir/sources.list" ]; then
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) trixie main" > "$dir/sources.list"
    fi
    apt-get -q -o Dir::Etc::sourcelist="$dir/sources.list" -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" \
        -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root "$@"
}

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# The supported Slurm releases ("flavours") and where each one's files go. Sets suite (Debian
# suite of the test cluster), build (docker/.build directory: headers, staging), target (the
# plugin's cargo target directory) and default_project (compose project). src-24.11 is Slurm
# 24.11 built from source (Debian trixie's slurm-wlm source) with SchedMD's default layout under
# /usr/local, on trixie without Debian's Slurm packages. Usage:
# slurm_flavour 24.11|26.05|src-24.11 TOP
slurm_flavour() {
    case "$1" in
        24.11) suite=trixie; build=$2/docker/.build; target=$2/target; default_project=spank-lama ;;
        26.05) suite=sid; build=$2/docker/.build/slurm-26.05; target=$2/target/slurm-26.05; default_project=spank-lama-2605 ;;
        src-24.11) suite=trixie; build=$2/docker/.build/slurm-src-24.11; target=$2/target/slurm-src-24.11; default_project=spank-lama-src ;;
        *) echo "LAMA_SLURM=$1 is not a supported Slurm: use 24.11 (Debian trixie), 26.05 (Debian sid) or src-24.11 (24.11 built from source under /usr/local)" >&2; return 2 ;;
    esac
}

# Starts a cargo target directory DIR from the 24.11 package's release build (TOP/target/release)
# when DIR has no release build yet: cargo then compiles only what differs (the crates that
# read the Slurm headers or LAMA_PLUGINDIR, and the workspace's crates where their sources sit
# elsewhere), not the dependencies again. A copy, not links: cargo replaces files in place.
# Taken under the 24.11 package's lock (scripts/package.sh), so never from a build half done;
# nothing to do where there is no such build. Usage: seed_target TOP DIR
seed_target() {
    local from=$1/target/release dir=$2
    [ ! -e "$dir/release" ] && [ -d "$from" ] && [ "$dir" != "$1/target" ] || return 0
    mkdir -p "$dir" || return 1
    (
        exec 8> "$1/target/.package.lock"
        flock 8
        rm -rf "$dir/release.seed" && cp -a "$from" "$dir/release.seed" && mv -T "$dir/release.seed" "$dir/release"
    ) || { rm -rf "$dir/release.seed"; return 1; }
    log "started ${dir#"$1"/} from target/release ($(du -sm "$dir/release" | cut -f1) MB)"
}

# Intel MPI's run time for the tests: impi-rt from the Python package index (its hydra,
# libmpi.so.12, and libfabric with its providers; 2021.18.1 is the last release that carries its
# own libfabric), kept once in TOP/docker/.build/impi-VERSION and its path printed. Intel MPI is
# ABI-compatible with MPICH: lib/libmpich.so.12 is Intel's library, so an MPICH program runs on
# it with LD_LIBRARY_PATH=DIR/lib (and FI_PROVIDER_PATH=DIR/lib/prov). Usage: intel_mpi_runtime TOP
impi_version=2021.18.1
intel_mpi_runtime() {
    local cache=$1/docker/.build/impi-$impi_version tmp
    if [ ! -x "$cache/bin/mpiexec.hydra" ]; then
        tmp=$(mktemp -d)
        python3 -m pip download --quiet --no-deps "impi-rt==$impi_version" -d "$tmp" >&2 \
            || { echo "impi-rt $impi_version could not be downloaded" >&2; rm -rf "$tmp"; return 1; }
        python3 - "$tmp"/impi_rt-*.whl "$tmp/rt" <<'PY' || { rm -rf "$tmp"; return 1; }
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
keep = {"bin/mpiexec.hydra": "bin", "bin/hydra_bstrap_proxy": "bin", "bin/hydra_pmi_proxy": "bin",
        "lib/libmpi.so.12": "lib", "lib/libfabric.so.1": "lib"}
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        rel = name.split(".data/data/", 1)[-1]
        dest = keep.get(rel) or ("lib/prov" if rel.startswith("lib/") and rel.endswith("-fi.so") else None)
        if dest:
            os.makedirs(os.path.join(out, dest), exist_ok=True)
            path = os.path.join(out, dest, os.path.basename(rel))
            with open(path, "wb") as f:
                f.write(z.read(name))
            os.chmod(path, 0o755)
PY
        ln -s libmpi.so.12 "$tmp/rt/lib/libmpich.so.12"
        [ -x "$tmp/rt/bin/mpiexec.hydra" ] || { echo "no mpiexec.hydra in impi-rt $impi_version" >&2; rm -rf "$tmp"; return 1; }
        mkdir -p "$(dirname "$cache")" && rm -rf "$cache.$$" && mv "$tmp/rt" "$cache.$$" \
            && { mv -T "$cache.$$" "$cache" 2>/dev/null || rm -rf "$cache.$$"; }
        rm -rf "$tmp"
    fi
    echo "$cache"
}
