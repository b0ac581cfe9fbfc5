#!/usr/bin/env bash
# Builds the RPM for one Slurm release from the same built files as the Debian package:
#   scripts/package-rpm.sh [24.11|26.05]     (default: LAMA_SLURM, else 24.11)
# → target/rpm/slurm-<release>/spank-lama-<version>-1.slurm<release>.x86_64.rpm
# scripts/package.sh builds the plugin against that release's headers first (and the Debian
# package); the files are staged in RHEL's paths (the plugin in /usr/lib64/slurm, the plugstack
# line naming it there) and packed by rpmbuild from packaging/rpm/spank-lama.spec.in. No RHEL
# install is tested here: tests/rpm.sh checks the package's contents, dependencies and
# scriptlets (the release refusal, removal and reinstallation) on this machine.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
. scripts/lib.sh
flavour=${1:-${LAMA_SLURM:-24.11}}
slurm_flavour "$flavour" "$top"
"$top/scripts/package.sh" "$flavour" >/dev/null

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
major=${flavour%.*} minor=${flavour#*.}
next=$major.$(printf %02d $((10#$minor + 1)))
out=$top/target/rpm/slurm-$flavour
stage=$out/stage
rm -rf "$out"
mkdir -p "$stage"/usr/lib64/slurm "$stage"/usr/bin "$stage"/etc/slurm/plugstack.conf.d \
    "$stage"/usr/share/man/man1 "$stage"/usr/share/man/man8 \
    "$stage"/usr/share/bash-completion/completions "$stage"/usr/share/zsh/site-functions \
    "$stage"/usr/share/fish/vendor_completions.d "$stage"/usr/share/doc/spank-lama \
    "$stage"/usr/share/licenses/spank-lama
strip --strip-unneeded -o "$stage/usr/lib64/slurm/spank_lama.so" "$target/release/libspank_lama.so"
strip --strip-unneeded -o "$stage/usr/bin/lama" "$top/target/release/lama"
chmod 0755 "$stage/usr/lib64/slurm/spank_lama.so"
# The plugstack line, commented out and naming RHEL's plugin directory.
sed -e 's|^required |# required |' -e 's|/usr/lib/x86_64-linux-gnu/slurm-wlm/|/usr/lib64/slurm/|' \
    plugstack.conf.example > "$stage/etc/slurm/plugstack.conf.d/lama.conf"
grep -q '^# required /usr/lib64/slurm/spank_lama.so' "$stage/etc/slurm/plugstack.conf.d/lama.conf"
"$target/release/examples/manpage" | gzip -9n > "$stage/usr/share/man/man8/spank-lama.8.gz"
"$stage/usr/bin/lama" manpage | gzip -9n > "$stage/usr/share/man/man1/lama.1.gz"
"$stage/usr/bin/lama" completions bash > "$stage/usr/share/bash-completion/completions/lama"
"$stage/usr/bin/lama" completions zsh > "$stage/usr/share/zsh/site-functions/_lama"
"$stage/usr/bin/lama" completions fish > "$stage/usr/share/fish/vendor_completions.d/lama.fish"
cp README.md plugstack.conf.example "$stage/usr/share/doc/spank-lama/"
cp LICENSE-MIT LICENSE-APACHE "$stage/usr/share/licenses/spank-lama/"
sed -e "s|@VERSION@|$version|g" -e "s|@SLURM_RELEASE@|$flavour|g" -e "s|@NEXT_RELEASE@|$next|g" \
    -e "s|@STAGE@|$stage|g" packaging/rpm/spank-lama.spec.in > "$out/spank-lama.spec"
rpmbuild --quiet -bb "$out/spank-lama.spec" --define "_topdir $out/build" \
    --define "_rpmdir $out" --define '_build_id_links none' --define '__strip /bin/true' \
    --define '_binary_payload w9.gzdio' --define '__os_install_post %{nil}' >/dev/null
rpm=$(ls "$out"/x86_64/spank-lama-"$version"-1.slurm"$flavour".x86_64.rpm)
mv "$rpm" "$out/" && rmdir "$out/x86_64"
rpm=$out/$(basename "$rpm")
log "built ${rpm#"$top"/} ($(du -k "$rpm" | cut -f1) KiB)"
echo "$rpm"
