#!/usr/bin/env bash
# `make deb`: the Debian package of what `make` built, for the Slurm ./configure found. Run by
# the Makefile, which passes config.mk's values in the environment (SLURM_RELEASE,
# SLURM_PACKAGE, SLURM_BINDIR, PLUGINDIR, SYSCONFDIR, VERSION, CONFIG_MK, CARGO_TARGET_DIR).
# → $CARGO_TARGET_DIR/debian/spank-lama_<version>+slurm<release>_<arch>.deb (its path is the
# last line printed), then lintian on it when lintian is installed (errors fail the build).
# The files are `make install`ed into a staging directory with the Debian prefix /usr; the
# dependencies are the libraries the binaries link (dpkg-shlibdeps) and, when configure found
# one, the package that provides this Slurm's plugins, at this release only
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
doc=$stage/usr/share/doc/spank-lama
# Debian's layout: the licence in copyright, the example under examples/, a changelog (the
# package's own history is the git log), dated by the last commit so that two builds of one
# commit are the same.
rm -f "$doc/LICENSE-MIT" "$doc/LICENSE-APACHE"
install -m 0644 packaging/copyright "$doc/copyright"
mkdir -p "$doc/examples" && mv "$doc/plugstack.conf.example" "$doc/examples/"
{
    echo "spank-lama ($deb_version) unstable; urgency=medium"
    echo
    echo "  * Built from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) for Slurm $SLURM_RELEASE."
    echo
    echo " -- The spank-lama developers <spank-lama@users.noreply.github.com>  $(git log -1 --format=%cD 2>/dev/null || date -R)"
} | gzip -9n > "$doc/changelog.gz"

# Dependencies: the shared libraries of the binaries (dpkg-shlibdeps wants a debian/control
# beside it), then this Slurm's package at this release.
shlib=$(mktemp -d)
trap 'rm -rf "$shlib"' EXIT
mkdir -p "$shlib/debian"
printf 'Source: spank-lama\n\nPackage: spank-lama\nArchitecture: any\n' > "$shlib/debian/control"
depends=$(cd "$shlib" && dpkg-shlibdeps -O "$stage$PLUGINDIR/spank_lama.so" "$stage/usr/bin/lama" 2>/dev/null \
    | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "make-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
if [ -n "${SLURM_PACKAGE:-}" ]; then
    major=${SLURM_RELEASE%.*} minor=${SLURM_RELEASE#*.}
    next=$major.$(printf %02d $((10#$minor + 1)))
    depends+=", $SLURM_PACKAGE (>= $SLURM_RELEASE~), $SLURM_PACKAGE (<< $next~)"
fi

cat > "$stage/DEBIAN/control" <<EOF
Package: spank-lama
Version: $deb_version
Architecture: $arch
Maintainer: The spank-lama developers <spank-lama@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Section: admin
Priority: optional
Description: LAMA process placement for Slurm: SPANK plugin and the lama command
 LAMA (the Locality-Aware Mapping Algorithm) places and binds every task of a
 Slurm step by a layout you choose: srun --lama-map=scbnh --lama-bind=1s ./app.
 This package holds the SPANK plugin, built for Slurm $SLURM_RELEASE, and the lama
 command, which previews any placement on any topology. Installing it enables
 nothing: uncomment the line in $SYSCONFDIR/plugstack.conf.d/lama.conf on every
 node and submit host.
EOF
echo "$SYSCONFDIR/plugstack.conf.d/lama.conf" > "$stage/DEBIAN/conffiles"
make --no-print-directory scriptlets MANAGER=dpkg SCRIPTLET_DIR="$stage/DEBIAN" \
    CONFIG_MK="${CONFIG_MK:-config.mk}" >/dev/null
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    > "$stage/DEBIAN/md5sums"

deb=$out/spank-lama_${deb_version}_$arch.deb
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$stage" "$deb" >/dev/null
echo "make-deb: built $deb ($(du -k "$deb" | cut -f1) KiB) for Slurm $SLURM_RELEASE; depends: $depends" >&2
if command -v lintian >/dev/null; then
    # A Slurm under /usr/local or /opt loads plugins only from there: Debian's policy for its
    # own packages (nothing under /usr/local) cannot hold for this one file.
    suppress=()
    case "$PLUGINDIR" in
        /usr/local/* | /opt/*) suppress=(--suppress-tags dir-in-usr-local,file-in-usr-local,file-in-unusual-dir,dir-or-file-in-opt) ;;
    esac
    report=$(lintian --fail-on error "${suppress[@]}" "$deb" 2>&1) \
        || { echo "$report" >&2; echo "make-deb: lintian reports errors in $deb" >&2; exit 1; }
    echo "$report" | grep -v -e 'root privileges is not recommended' -e '^$' >&2 || true
fi
echo "$deb"
