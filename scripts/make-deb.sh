#!/usr/bin/env bash
# `make deb`: the Debian package of what `make` built, for the Slurm ./configure found. Run by
# the Makefile, which passes config.mk's values in the environment (SLURM_RELEASE,
# SLURM_PACKAGE, SLURM_BINDIR, PLUGINDIR, SYSCONFDIR, VERSION, CONFIG_MK, CARGO_TARGET_DIR).
# → $CARGO_TARGET_DIR/debian/spank-lama_<version>+slurm<release>_<arch>.deb, the plugin (its
# path is the last line printed), and spank-lama-tools_<same>.deb beside it, the lama command;
# lintian on each when lintian is installed (errors fail the build).
# The files are `make install`ed into a staging directory with the Debian prefix /usr; the
# dependencies are the libraries the binaries link (dpkg-shlibdeps) and, for the plugin, when
# configure found one, the package that provides this Slurm's plugins, at this release only
# (slurm-wlm-basic-plugins for Debian's and Ubuntu's Slurm, slurm-smd for SchedMD's); the
# preinst refuses another release in any case (packaging/check-slurm.sh.in).
# DEB_COMPRESS=gzip packs faster (the test clusters use it); the default is xz.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
: "${SLURM_RELEASE:?run by make deb}" "${PLUGINDIR:?}" "${SYSCONFDIR:?}" "${VERSION:?}" "${CARGO_TARGET_DIR:?}"
case "$CARGO_TARGET_DIR" in /*) target=$CARGO_TARGET_DIR ;; *) target=$top/$CARGO_TARGET_DIR ;; esac
arch=$(dpkg --print-architecture)
deb_version=$VERSION+slurm$SLURM_RELEASE
out=$target/debian
stage=$target/debian/stage
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$out"

make --no-print-directory install DESTDIR="$stage" PREFIX=/usr \
    ZSHDIR=/usr/share/zsh/vendor-completions CONFIG_MK="${CONFIG_MK:-config.mk}" >/dev/null
# Two packages: spank-lama, the plugin (what every compute node and submit host needs: it links
# only Slurm's and hwloc's libraries and libc), and spank-lama-tools, the `lama` command with
# its manual page and completions (login nodes; compute nodes only for `lama verify` and `lama
# exec`). Until 0.2.0 one package held both: the tools package takes /usr/bin/lama over from it
# (Replaces and Breaks), and the plugin's package recommends the tools, so that an upgrade of
# the one package brings both again.
tools=$target/debian/stage-tools
rm -rf "$tools"
for f in usr/bin/lama usr/share/man/man1/lama.1.gz usr/share/bash-completion/completions/lama \
    usr/share/zsh/vendor-completions/_lama usr/share/fish/vendor_completions.d/lama.fish; do
    [ -e "$stage/$f" ] || { echo "make-deb: make install wrote no $f" >&2; exit 1; }
    mkdir -p "$tools/$(dirname "$f")" && mv "$stage/$f" "$tools/$f"
done
find "$stage/usr" -depth -type d -empty -delete
mkdir -p "$tools/DEBIAN"

# Debian's layout: the licence in copyright, the example under examples/, a changelog (the
# package's own history is the git log), dated by the last commit so that two builds of one
# commit are the same.
doc=$stage/usr/share/doc/spank-lama
rm -f "$doc/LICENSE-MIT" "$doc/LICENSE-APACHE"
mkdir -p "$doc/examples" && mv "$doc/plugstack.conf.example" "$doc/examples/"
# doc_files PACKAGE DOCDIR: copyright and changelog.gz.
doc_files() {
    mkdir -p "$2" && install -m 0644 packaging/copyright "$2/copyright"
    {
        echo "$1 ($deb_version) unstable; urgency=medium"
        echo
        echo "  * Built from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) for Slurm $SLURM_RELEASE."
        echo
        echo " -- The spank-lama developers <spank-lama@users.noreply.github.com>  $(git log -1 --format=%cD 2>/dev/null || date -R)"
    } | gzip -9n > "$2/changelog.gz"
}
doc_files spank-lama "$doc"
doc_files spank-lama-tools "$tools/usr/share/doc/spank-lama-tools"

# shlib_depends BINARY...: the packages of the shared libraries they link (dpkg-shlibdeps wants
# a debian/control beside it).
shlib=$(mktemp -d)
trap 'rm -rf "$shlib"' EXIT
mkdir -p "$shlib/debian"
printf 'Source: spank-lama\n\nPackage: spank-lama\nArchitecture: any\n' > "$shlib/debian/control"
shlib_depends() {
    local d
    d=$(cd "$shlib" && dpkg-shlibdeps -O "$@" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
    [ -n "$d" ] || { echo "make-deb: dpkg-shlibdeps found no dependencies of $*" >&2; return 1; }
    echo "$d"
}
depends=$(shlib_depends "$stage$PLUGINDIR/spank_lama.so") || exit 1
tools_depends=$(shlib_depends "$tools/usr/bin/lama") || exit 1
# Then this Slurm's package at this release (the plugin only: lama loads no Slurm library).
if [ -n "${SLURM_PACKAGE:-}" ]; then
    major=${SLURM_RELEASE%.*} minor=${SLURM_RELEASE#*.}
    next=$major.$(printf %02d $((10#$minor + 1)))
    depends+=", $SLURM_PACKAGE (>= $SLURM_RELEASE~), $SLURM_PACKAGE (<< $next~)"
fi
case "$depends" in *scotch*) echo "make-deb: the plugin would depend on Scotch: $depends" >&2; exit 1 ;; esac

# control STAGE PACKAGE FIELDS...: DEBIAN/control, with the size of what STAGE holds.
control() {
    local dir=$1 package=$2
    shift 2
    {
        echo "Package: $package"
        echo "Version: $deb_version"
        echo "Architecture: $arch"
        echo "Maintainer: The spank-lama developers <spank-lama@users.noreply.github.com>"
        echo "Installed-Size: $(du -sk --exclude=DEBIAN "$dir" | cut -f1)"
        printf '%s\n' "$@"
    } > "$dir/DEBIAN/control"
}
control "$stage" spank-lama "Depends: $depends" "Recommends: spank-lama-tools (= $deb_version)" \
    "Section: admin" "Priority: optional" \
    "Description: LAMA process placement for Slurm: the SPANK plugin" \
    " LAMA (the Locality-Aware Mapping Algorithm) places and binds every task of a" \
    " Slurm step by a layout you choose: srun --lama-map=scbnh --lama-bind=1s ./app." \
    " This package holds the SPANK plugin, built for Slurm $SLURM_RELEASE, for every" \
    " compute node and submit host. Installing it enables nothing: uncomment the" \
    " line in $SYSCONFDIR/plugstack.conf.d/lama.conf on every node and submit host." \
    " The lama command (previews, plans, verify, exec) is in spank-lama-tools."
control "$tools" spank-lama-tools "Depends: $tools_depends" \
    "Breaks: spank-lama (<< 0.2.0~)" "Replaces: spank-lama (<< 0.2.0~)" \
    "Section: admin" "Priority: optional" \
    "Description: LAMA process placement for Slurm: the lama command" \
    " The lama command of spank-lama, built for Slurm $SLURM_RELEASE: previews any" \
    " placement on any topology (lama map, and Slurm's own with --slurm), makes" \
    " communication-aware plans (lama plan), checks a running step (lama verify) and" \
    " places ranks under any MPI launcher (lama exec). For login nodes, and for" \
    " compute nodes where lama verify or lama exec run."
echo "$SYSCONFDIR/plugstack.conf.d/lama.conf" > "$stage/DEBIAN/conffiles"
make --no-print-directory scriptlets MANAGER=dpkg SCRIPTLET_DIR="$stage/DEBIAN" \
    CONFIG_MK="${CONFIG_MK:-config.mk}" >/dev/null

# build STAGE PACKAGE: the .deb, lintian-checked; prints its path.
build() {
    local dir=$1 deb=$out/$2_${deb_version}_$arch.deb
    (cd "$dir" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
        > "$dir/DEBIAN/md5sums"
    dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$dir" "$deb" >/dev/null || return 1
    echo "make-deb: built $deb ($(du -k "$deb" | cut -f1) KiB) for Slurm $SLURM_RELEASE; depends: $(dpkg-deb -f "$deb" Depends)" >&2
    if command -v lintian >/dev/null; then
        # A Slurm under /usr/local or /opt loads plugins only from there: Debian's policy for
        # its own packages (nothing under /usr/local) cannot hold for this one file.
        local suppress=() report
        case "$PLUGINDIR" in
            /usr/local/* | /opt/*) suppress=(--suppress-tags dir-in-usr-local,file-in-usr-local,file-in-unusual-dir,dir-or-file-in-opt) ;;
        esac
        report=$(lintian --fail-on error "${suppress[@]}" "$deb" 2>&1) \
            || { echo "$report" >&2; echo "make-deb: lintian reports errors in $deb" >&2; return 1; }
        echo "$report" | grep -v -e 'root privileges is not recommended' -e '^$' >&2 || true
    fi
    echo "$deb"
}
# (This release's packages of other versions go: scripts/package.sh takes the one there is.)
rm -f "$out"/spank-lama_*+slurm"${SLURM_RELEASE}"_"$arch".deb* "$out"/spank-lama-tools_*+slurm"${SLURM_RELEASE}"_"$arch".deb
build "$tools" spank-lama-tools >/dev/null || exit 1
deb=$(build "$stage" spank-lama) || exit 1
echo "$deb"
