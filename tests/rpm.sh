#!/usr/bin/env bash
# The site's routes that need no cluster, tried here as an admin would:
#   t_old_slurm_refused   ./configure refuses Slurm 22.05's headers (Debian bookworm's
#                         libslurm-dev, this host's own release) with the reason, and so does
#                         the C file cargo compiles, for a build that skips configure
#   t_configure_finds     ./configure against each test cluster's headers names its release,
#                         and an unknown option or a missing headers directory is an error
#   t_make_install        make install into a staging root (DESTDIR), again over an edited
#                         lama.conf (kept; the new one beside it), then make uninstall (the
#                         line disabled, the files gone)
#   t_rpm_spec            make dist, then rpmbuild -ta (--nodeps: no RHEL here) for Slurm
#                         24.11's headers: the plugin's and the tools' packages' files are where
#                         the spec's macros put them, its requirements are real (the libraries the binaries link, the
#                         Slurm package at this release), the plugin carries the release, and
#                         the scriptlets refuse another release or no Slurm, disable the line on
#                         erase (not on upgrade) and enable it again on reinstall
#   t_rpm_upgrade_from_one_package   the one package of before 0.2.0 upgraded to the plugin's
#                         and the tools' packages (rpm --root)
#   t_rpm_spec_without_slurm_package   rpmspec: no Slurm requirement when the Slurm is not an
#                         RPM (a source build), the release in the package's name all the same
# Ends with "rpm: N passed, N failed"; exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib.sh"
. "$top/scripts/lib.sh"
cd "$top"
out=$top/target/rpm
mkdir -p "$out"

t_old_slurm_refused() {
    local dir=$out/slurm-22.05
    if [ ! -f "$dir/usr/include/slurm/slurm_version.h" ]; then
        rm -rf "$dir" && mkdir -p "$dir"
        (cd "$dir" && apt-get download -q libslurm-dev >/dev/null 2>&1) \
            || { fail "cannot download this host's libslurm-dev (Debian 12: Slurm 22.05)"; return 1; }
        dpkg-deb -x "$dir"/libslurm-dev_*.deb "$dir" || return 1
    fi
    CONFIG_MK=$work/old.mk ./configure --with-slurm="$dir/usr" 2> "$work/err" \
        && { fail "configure accepted Slurm 22.05's headers"; return 1; }
    grep -qE "Slurm 22\.05\.[0-9]+ \(headers in $dir/usr/include/slurm\) is too old: spank-lama needs Slurm 23\.02 or later\." "$work/err" \
        || fail "configure's refusal: $(cat "$work/err")" || return 1
    [ ! -e "$work/old.mk" ] || fail "configure wrote a configuration for 22.05" || return 1
    cc -fsyntax-only -I"$dir/usr/include" spank-lama/csrc/slurm_conf.c 2> "$work/err" \
        && { fail "the C file compiled against Slurm 22.05's headers"; return 1; }
    grep -qF "spank-lama needs the headers of Slurm 23.02 or later" "$work/err" \
        || fail "the C file's refusal: $(cat "$work/err")"
}

t_configure_finds() {
    local f release
    for f in 24.11 26.05; do
        slurm_flavour "$f" "$top"
        CONFIG_MK=$work/c.mk ./configure --with-slurm="$build/slurm-include/usr" \
            --plugindir=/usr/lib64/slurm 2> "$work/err" || { fail "$f: $(cat "$work/err")"; return 1; }
        release=$(awk '$1 == "SLURM_RELEASE" { print $3 }' "$work/c.mk")
        assert_eq "$f: the release configure found" "$f" "$release" || return 1
        grep -qF "configure: Slurm $f." "$work/err" || fail "$f: configure does not say the release" || return 1
    done
    # --without-scotch: lama built without Scotch (make passes the features to cargo).
    assert_eq "lama's features by default" "LAMA_FEATURES :=" "$(grep '^LAMA_FEATURES' "$work/c.mk" | sed 's/ *$//')" || return 1
    CONFIG_MK=$work/n.mk SCOTCH_INCLUDE_DIR=/nonexistent ./configure --with-slurm="$build/slurm-include/usr" \
        --plugindir=/usr/lib64/slurm --without-scotch 2> "$work/err" || { fail "--without-scotch: $(cat "$work/err")"; return 1; }
    assert_eq "lama's features --without-scotch" "LAMA_FEATURES := --no-default-features" "$(grep '^LAMA_FEATURES' "$work/n.mk")" || return 1
    grep -qF "no Scotch (--without-scotch)" "$work/err" || fail "configure does not say it: $(cat "$work/err")" || return 1
    # The minimums of the other tools: an hwloc 2.2 (RHEL 8's) and a Rust 1.80, each found
    # first, are refused with the reason.
    mkdir -p "$work/pc" "$work/bin"
    printf 'Name: hwloc\nDescription: hwloc\nVersion: 2.2.0\nCflags:\nLibs: -lhwloc\n' > "$work/pc/hwloc.pc"
    PKG_CONFIG_PATH=$work/pc CONFIG_MK=$work/c.mk ./configure --with-slurm="$build/slurm-include/usr" \
        --plugindir=/usr/lib64/slurm 2> "$work/err" && { fail "hwloc 2.2 was accepted"; return 1; }
    grep -qF "hwloc 2.2.0 is too old: spank-lama needs hwloc 2.4.0 or later" "$work/err" || fail "hwloc 2.2: $(cat "$work/err")" || return 1
    printf '#!/bin/sh\necho "rustc 1.80.0 (051478957 2024-07-21)"\n' > "$work/bin/rustc" && chmod +x "$work/bin/rustc"
    PATH=$work/bin:$PATH CONFIG_MK=$work/c.mk ./configure --with-slurm="$build/slurm-include/usr" \
        --plugindir=/usr/lib64/slurm 2> "$work/err" && { fail "Rust 1.80 was accepted"; return 1; }
    grep -qF "Rust 1.80.0 is older than 1.85" "$work/err" || fail "Rust 1.80: $(cat "$work/err")" || return 1
    # --option VALUE as autoconf takes it; the help is the header's text, every line of it.
    slurm_flavour 24.11 "$top"
    CONFIG_MK=$work/space.mk ./configure --with-slurm "$build/slurm-include/usr" --plugindir /usr/lib64/slurm \
        2> "$work/err" || { fail "--with-slurm DIR: $(cat "$work/err")"; return 1; }
    assert_eq "--with-slurm DIR" 24.11 "$(awk '$1 == "SLURM_RELEASE" { print $3 }' "$work/space.mk")" || return 1
    ./configure --help > "$work/help" || { fail "./configure --help failed"; return 1; }
    head -n1 "$work/help" | grep -q '^Configures the build' && tail -n1 "$work/help" | grep -q 'The plugin never uses Scotch.$' \
        || fail "configure --help: $(head -n1 "$work/help") ... $(tail -n1 "$work/help")" || return 1
    ./configure --with-slurmm=/usr 2> "$work/err" && { fail "an unknown option was accepted"; return 1; }
    grep -qF "unknown option --with-slurmm=/usr" "$work/err" || fail "unknown option: $(cat "$work/err")" || return 1
    CONFIG_MK=$work/none.mk ./configure --with-slurm="$work" 2> "$work/err" && { fail "a prefix without headers was accepted"; return 1; }
    grep -qF "no include/slurm/spank.h there" "$work/err" || fail "no headers: $(cat "$work/err")" || return 1
    # A prefix that does not exist is named in the message.
    CONFIG_MK=$work/none.mk ./configure --with-slurm=/missing/slurm 2> "$work/err" && { fail "a missing prefix was accepted"; return 1; }
    grep -qF -- "--with-slurm=/missing/slurm: no such directory" "$work/err" || fail "missing prefix: $(cat "$work/err")" || return 1
    # A Slurm under a prefix of its own (/opt/slurm): slurm.conf in PREFIX/etc is where
    # lama.conf goes; without one there, /etc/slurm with a warning that says so.
    local opt=$work/opt-slurm
    mkdir -p "$opt/include" "$opt/etc" && ln -sfn "$build/slurm-include/usr/include/slurm" "$opt/include/slurm"
    CONFIG_MK=$work/opt.mk ./configure --with-slurm="$opt" --plugindir="$opt/lib/slurm" 2> "$work/err" \
        || { fail "/opt prefix: $(cat "$work/err")"; return 1; }
    grep -qF "warning: no running Slurm said where slurm.conf is, and $opt/etc has none" "$work/err" \
        || fail "no warning for /etc/slurm: $(cat "$work/err")" || return 1
    touch "$opt/etc/slurm.conf"
    CONFIG_MK=$work/opt.mk ./configure --with-slurm="$opt" --plugindir="$opt/lib/slurm" 2> "$work/err" \
        || { fail "/opt prefix with slurm.conf: $(cat "$work/err")"; return 1; }
    assert_eq "the /opt prefix's configuration directory" "$opt/etc" "$(awk '$1 == "SYSCONFDIR" { print $3 }' "$work/opt.mk")"
}

t_make_install() {
    # The configuration and build of scripts/package.sh 24.11 (scripts/test.sh made them).
    local config=$top/target/config.mk root=$work/root plugindir conf line
    [ -f "$config" ] || scripts/package.sh 24.11 >/dev/null || { fail "scripts/package.sh 24.11 failed"; return 1; }
    plugindir=$(awk '$1 == "PLUGINDIR" { print $3 }' "$config")
    conf=$root/etc/slurm/plugstack.conf.d/lama.conf
    # Nothing built (another target directory): make install refuses, and builds nothing
    # (cargo is never run as root by it).
    make -s --no-print-directory install DESTDIR="$root" CONFIG_MK="$config" CARGO_TARGET_DIR="$work/empty" \
        CARGO=false > "$work/out" 2>&1 && { fail "make install with nothing built succeeded"; return 1; }
    grep -qF "is not built: run make (as yourself: it runs cargo), then make install (as root)" "$work/out" \
        || fail "make install with nothing built: $(cat "$work/out")" || return 1
    make -s --no-print-directory install DESTDIR="$root" CONFIG_MK="$config" CARGO_TARGET_DIR="$top/target" \
        > "$work/out" 2>&1 || { fail "make install: $(tail -n 5 "$work/out")"; return 1; }
    assert_eq "the plugin's mode" "755" "$(stat -c %a "$root$plugindir/spank_lama.so")" || return 1
    grep -aq "spank-lama built for Slurm 24\.11\." "$root$plugindir/spank_lama.so" || fail "the installed plugin is not 24.11's" || return 1
    "$root/usr/bin/lama" --help > /dev/null || fail "the installed lama does not run" || return 1
    line="# required $plugindir/spank_lama.so"
    assert_eq "the plugin line" "$line" "$(grep 'spank_lama.so$' "$conf")" || return 1
    # A second install keeps the site's line.
    sed -i 's|^# required |required |' "$conf"
    make -s --no-print-directory install DESTDIR="$root" CONFIG_MK="$config" CARGO_TARGET_DIR="$top/target" \
        > "$work/out" 2>&1 || { fail "make install again: $(tail -n 5 "$work/out")"; return 1; }
    assert_eq "the site's line after a second install" "required $plugindir/spank_lama.so" "$(grep 'spank_lama.so$' "$conf")" || return 1
    assert_eq "the new file beside it" "$line" "$(grep 'spank_lama.so$' "$conf.new")" || return 1
    make -s --no-print-directory uninstall DESTDIR="$root" CONFIG_MK="$config" > "$work/out" 2>&1 \
        || { fail "make uninstall: $(tail -n 5 "$work/out")"; return 1; }
    [ ! -e "$root$plugindir/spank_lama.so" ] && [ ! -e "$root/usr/bin/lama" ] || fail "make uninstall left the plugin or lama" || return 1
    assert_eq "the line after make uninstall" "#lama-removed# required $plugindir/spank_lama.so" "$(grep 'spank_lama.so$' "$conf")"
}

rpm_file=
build_rpm() {
    [ -z "$rpm_file" ] || return 0
    slurm_flavour 24.11 "$top"
    local tarball
    tarball=$(DIST_DIR=$out make -s --no-print-directory dist 2> "$work/err" | tail -n1) \
        || { fail "make dist: $(cat "$work/err")"; return 1; }
    # rpmbuild's tree and cargo's directory are kept in this machine's cache, as the docker
    # images are: the vendored crates' paths and times (scripts/make-dist.sh) are the same from
    # one run and one clone to the next, so cargo compiles them once per Cargo.lock and then
    # only the workspace. (Started from the 24.11 package's build instead, cargo compiled every
    # vendored crate again: their sources sit elsewhere.) One RPM build at a time.
    local cache=${LAMA_RPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spank-lama/rpm}
    mkdir -p "$cache" || { fail "cannot make $cache"; return 1; }
    exec 7> "$cache/.lock"
    flock 7
    rm -rf "$cache/top/RPMS" "$cache/top/SRPMS" "$cache/top/BUILDROOT"
    rpmbuild -ta --nodeps "$tarball" --define "_topdir $cache/top" \
        --define "slurm_include $build/slurm-include/usr/include" \
        --define "slurm_plugindir /usr/lib64/slurm" --define "slurm_package slurm" \
        --define "slurm_bindir /usr/bin" --define "cargo_target_dir $cache/cargo" \
        > "$out/rpmbuild.log" 2>&1 || { fail "rpmbuild -ta failed: $(tail -n 20 "$out/rpmbuild.log")"; return 1; }
    echo "    rpmbuild compiled $(grep -c '^ *Compiling ' "$out/rpmbuild.log") crate(s) (cargo's directory: $cache/cargo)" >&2
    rm -rf "$out/top" && mkdir -p "$out/top/RPMS" && cp "$cache"/top/RPMS/*/spank-lama-*.rpm "$out/top/RPMS/" || return 1
    rpm_file=$(ls "$out"/top/RPMS/spank-lama-[0-9]*.rpm)
    tools_rpm=$(ls "$out"/top/RPMS/spank-lama-tools-[0-9]*.rpm)
    echo "    built $rpm_file and $tools_rpm" >&2
}

# scriptlet TAG: a scriptlet's text, its configuration path moved into $work.
scriptlet() { rpm -qp --qf "%{$1}" "$rpm_file" | sed "s|/etc/slurm/plugstack.conf.d/lama.conf|$work/lama.conf|g"; }

t_rpm_spec() {
    build_rpm || return 1
    local r=24.11 version
    version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
    assert_eq "name, version, release" "spank-lama $version 1.slurm$r" \
        "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE}' "$rpm_file")" || return 1
    assert_eq "files (build-id links aside)" "/etc/slurm/plugstack.conf.d /etc/slurm/plugstack.conf.d/lama.conf /usr/lib64/slurm/spank_lama.so /usr/share/doc/spank-lama/README.md /usr/share/doc/spank-lama/plugstack.conf.example /usr/share/man/man8/spank-lama.8.gz" \
        "$(rpm -qlp "$rpm_file" | grep -v -e '^/usr/lib/.build-id' -e '^/usr/share/licenses/' | paste -sd' ')" || return 1
    # The lama command in a package of its own (login nodes), which takes it over from the one
    # package of before 0.2.0 (t_rpm_upgrade_from_one_package); the plugin's recommends it.
    assert_eq "the tools' name, version, release" "spank-lama-tools $version 1.slurm$r" \
        "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE}' "$tools_rpm")" || return 1
    assert_eq "the tools' files" "/usr/bin/lama /usr/share/bash-completion/completions/lama /usr/share/fish/vendor_completions.d/lama.fish /usr/share/man/man1/lama.1.gz /usr/share/zsh/site-functions/_lama" \
        "$(rpm -qlp "$tools_rpm" | grep -v -e '^/usr/lib/.build-id' -e '^/usr/share/licenses/' | paste -sd' ')" || return 1
    assert_eq "the tools' conflict" "spank-lama < 0.2.0" "$(rpm -qp --conflicts "$tools_rpm")" || return 1
    assert_eq "the plugin recommends the tools" "spank-lama-tools = $version-1.slurm$r" "$(rpm -qp --recommends "$rpm_file")" || return 1
    assert_eq "licences" "LICENSE-APACHE LICENSE-MIT" \
        "$(rpm -qlp "$rpm_file" | grep '^/usr/share/licenses/.*/LICENSE' | xargs -n1 basename | paste -sd' ')" || return 1
    assert_eq "the conffile" "/etc/slurm/plugstack.conf.d/lama.conf" "$(rpm -qcp "$rpm_file")" || return 1
    local requires
    requires=$(rpm -qp --requires "$rpm_file")
    assert_eq "Slurm at this release" "slurm < 24.12 slurm >= 24.11" \
        "$(echo "$requires" | grep '^slurm' | sort | paste -sd' ')" || return 1
    # The libraries come from the binaries (no AutoReqProv: no): hwloc, and the glibc
    # version of the host that built them.
    # (A here-string, not a pipe into grep -q: under pipefail an early exit of grep fails the
    # pipe, which once failed this check with the line there.)
    grep -qx 'libhwloc.so.15()(64bit)' <<< "$requires" || fail "no hwloc requirement: $requires" || return 1
    grep -q '^libc.so.6(GLIBC_2\.[0-9]*)(64bit)$' <<< "$requires" || fail "no glibc requirement: $requires" || return 1
    # Compute nodes need nothing else: no Scotch (EPEL on RHEL), no lama.
    ! grep -i -e scotch -e spank-lama-tools <<< "$requires" || fail "the plugin's package requires the above" || return 1
    rm -rf "$work/x" && mkdir -p "$work/x"
    (cd "$work/x" && rpm2cpio "$rpm_file" | cpio -idm --quiet) || { fail "rpm2cpio | cpio failed"; return 1; }
    assert_eq "plugstack line" "# required /usr/lib64/slurm/spank_lama.so" \
        "$(grep 'spank_lama.so$' "$work/x/etc/slurm/plugstack.conf.d/lama.conf")" || return 1
    grep -aq "spank-lama built for Slurm $r\." "$work/x/usr/lib64/slurm/spank_lama.so" \
        || fail "the plugin does not say it is built for Slurm $r" || return 1
    zcat "$work/x/usr/share/man/man8/spank-lama.8.gz" | grep -qF '/usr/lib64/slurm/spank_lama.so' \
        || fail "spank-lama(8) does not name the plugin directory of the build" || return 1
    # %pre, with a stand-in rpm that answers for the installed Slurm ($FAKE_SLURM).
    mkdir -p "$work/bin"
    printf '#!/bin/sh\nif [ -n "$FAKE_SLURM" ]; then printf %%s "$FAKE_SLURM"; exit 0; fi\necho "package slurm is not installed"; exit 1\n' > "$work/bin/rpm"
    chmod +x "$work/bin/rpm"
    scriptlet PREIN > "$work/pre"
    grep -qF 'rpm -q --qf "$tag{VERSION} " "$package"' "$work/pre" || fail "%pre's query was expanded by rpmbuild" || return 1
    PATH=$work/bin:$PATH FAKE_SLURM=$r.5 sh "$work/pre" 1 2> "$work/err" \
        || fail "%pre refused Slurm $r.5: $(cat "$work/err")" || return 1
    PATH=$work/bin:$PATH FAKE_SLURM=26.05.1 sh "$work/pre" 1 2> "$work/err" \
        && { fail "%pre accepted Slurm 26.05.1"; return 1; }
    grep -qF "this package is built for Slurm $r, but this machine has Slurm 26.05.1 (the slurm package)." "$work/err" \
        || fail "%pre's message: $(cat "$work/err")" || return 1
    # One transaction upgrading Slurm too: rpm lists the old and the new version; the wanted
    # release among them is enough, and one release alone twice is still refused.
    PATH=$work/bin:$PATH FAKE_SLURM=$'26.05.1\n'"$r.5" sh "$work/pre" 1 2> "$work/err" \
        || fail "%pre refused an upgrade to Slurm $r.5 from 26.05.1: $(cat "$work/err")" || return 1
    PATH=$work/bin:$PATH FAKE_SLURM=$'26.05.1\n26.05.2' sh "$work/pre" 1 2> "$work/err" \
        && { fail "%pre accepted Slurm 26.05.1 and 26.05.2"; return 1; }
    grep -qF "this machine has Slurm 26.05.1, 26.05.2 (the slurm package)." "$work/err" \
        || fail "%pre's message for two versions: $(cat "$work/err")" || return 1
    PATH=$work/bin:$PATH FAKE_SLURM= sh "$work/pre" 1 2> "$work/err" && { fail "%pre accepted no Slurm"; return 1; }
    grep -qF "(none: slurm is not installed)" "$work/err" || fail "%pre without Slurm: $(cat "$work/err")" || return 1
    # %postun on erase disables an enabled line, not on upgrade; %post enables it again.
    local line="required /usr/lib64/slurm/spank_lama.so map=scbnh"
    printf '# comment\n%s\n' "$line" > "$work/lama.conf"
    scriptlet POSTUN > "$work/postun"
    scriptlet POSTIN > "$work/post"
    sh "$work/postun" 1 2> /dev/null
    assert_eq "after an upgrade's %postun" "$line" "$(sed -n 2p "$work/lama.conf")" || return 1
    sh "$work/postun" 0 2> /dev/null
    assert_eq "after erase" "#lama-removed# $line" "$(sed -n 2p "$work/lama.conf")" || return 1
    sh "$work/post" 1 2> /dev/null
    assert_eq "after reinstalling" "$line" "$(sed -n 2p "$work/lama.conf")" || return 1
    printf '# required /usr/lib64/slurm/spank_lama.so\n' > "$work/lama.conf"
    sh "$work/postun" 0 2> /dev/null
    assert_eq "a commented line after erase" "# required /usr/lib64/slurm/spank_lama.so" "$(cat "$work/lama.conf")"
}

t_rpm_upgrade_from_one_package() {
    # Until 0.2.0 one package, spank-lama, held the plugin and lama. One made as it was (version
    # 0.1.0, the two packages' files in one) is installed into an empty root (rpm --root, no
    # scriptlets, no dependencies: no RHEL here); the tools package alone is then refused (it
    # conflicts with spank-lama < 0.2.0), and both in one transaction upgrade it: /usr/bin/lama
    # passes to spank-lama-tools.
    build_rpm || return 1
    local one=$work/one root=$work/root version
    version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
    rm -rf "$one" "$root" && mkdir -p "$one/tree" "$one/top" "$root" || return 1
    (cd "$one/tree" && rpm2cpio "$rpm_file" | cpio -idm --quiet && rpm2cpio "$tools_rpm" | cpio -idm --quiet) \
        || { fail "rpm2cpio | cpio failed"; return 1; }
    rm -rf "$one/tree/usr/lib/.build-id" "$one/tree/usr/share/licenses"
    { printf 'Name: spank-lama\nVersion: 0.1.0\nRelease: 1\nSummary: one package\nLicense: MIT\nAutoReqProv: no\n'
      printf '%%description\none package\n%%install\ncp -a %s/. %%{buildroot}/\n%%files\n' "$one/tree"
      (cd "$one/tree" && find . -type f -o -type l) | sed 's|^\.||'; } > "$one/one.spec"
    rpmbuild -bb --define "_topdir $one/top" "$one/one.spec" > "$one/build.log" 2>&1 \
        || { fail "the one package: $(tail -n 5 "$one/build.log")"; return 1; }
    rpm --root "$root" --initdb || return 1
    rpm --root "$root" -i --nodeps --noscripts "$one"/top/RPMS/*/spank-lama-0.1.0-1.*.rpm 2> "$work/err" \
        || fail "installing the one package: $(cat "$work/err")" || return 1
    assert_eq "lama's package before" "spank-lama" "$(rpm --root "$root" -qf --qf '%{NAME}' /usr/bin/lama)" || return 1
    # (Without --nodeps, which skips conflicts too: the libraries' requirements, unmet in this
    # empty root, are listed beside the conflict.)
    rpm --root "$root" -i --noscripts "$tools_rpm" > "$work/err" 2>&1 \
        && { fail "rpm installed the tools beside spank-lama 0.1.0"; return 1; }
    grep -qF "spank-lama < 0.2.0 conflicts with spank-lama-tools-$version-" "$work/err" || fail "rpm's refusal: $(cat "$work/err")" || return 1
    rpm --root "$root" -U --nodeps --noscripts "$rpm_file" "$tools_rpm" 2> "$work/err" \
        || fail "the upgrade: $(cat "$work/err")" || return 1
    assert_eq "lama's package after" "spank-lama-tools" "$(rpm --root "$root" -qf --qf '%{NAME}' /usr/bin/lama)" || return 1
    assert_eq "installed after" "spank-lama spank-lama-tools" "$(rpm --root "$root" -qa --qf '%{NAME}\n' | sort | paste -sd' ')"
}

t_rpm_spec_without_slurm_package() {
    slurm_flavour 26.05 "$top"
    local version spec
    version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
    spec=$work/spank-lama.spec
    sed "s|@VERSION@|$version|g" packaging/rpm/spank-lama.spec.in > "$spec"
    local q=(--define "slurm_include $build/slurm-include/usr/include" --define "slurm_plugindir /opt/slurm/lib/slurm")
    assert_eq "release (the plugin's and the tools' packages)" "1.slurm26.05 1.slurm26.05" \
        "$(rpmspec -q --qf '%{RELEASE}\n' "${q[@]}" --define 'slurm_package none' "$spec" 2>/dev/null | paste -sd' ')" || return 1
    rpmspec -q --requires "${q[@]}" --define 'slurm_package none' "$spec" > "$work/requires" 2> "$work/err" \
        || { fail "rpmspec: $(cat "$work/err")"; return 1; }
    ! grep -i slurm "$work/requires" || fail "a Slurm requirement without a Slurm package" || return 1
    # rpmbuild --without scotch: no Scotch to build with (so no EPEL), and configure told so.
    assert_eq "Scotch among the build requirements, by default and --without scotch" "1 0" \
        "$(rpmspec -q --buildrequires "${q[@]}" "$spec" 2>/dev/null | grep -c scotch) $(rpmspec -q --buildrequires "${q[@]}" --without scotch "$spec" 2>/dev/null | grep -c scotch)" || return 1
    grep -q -- "--slurm-bindir=%{slurm_bindir} %{!?with_scotch:--without-scotch}" "$spec" || fail "the spec's configure line lost --without-scotch" || return 1
    assert_eq "with slurm-ohpc" "slurm-ohpc < 26.06 slurm-ohpc >= 26.05" \
        "$(rpmspec -q --requires "${q[@]}" --define 'slurm_package slurm-ohpc' "$spec" 2>/dev/null | grep slurm | sort | paste -sd' ')"
}

run_tests rpm t_old_slurm_refused t_configure_finds t_make_install t_rpm_spec t_rpm_upgrade_from_one_package t_rpm_spec_without_slurm_package
