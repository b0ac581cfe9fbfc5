#!/usr/bin/env bash
# The RPM (scripts/package-rpm.sh) for each supported Slurm, checked on this machine: no RHEL
# system runs here, so the package is taken apart instead. Its files and their paths (the
# plugin in /usr/lib64/slurm, the commented plugstack line naming it there), its dependencies
# (the one Slurm release it was built for), and its scriptlets run in a shell against a
# scratch configuration, with a stand-in `rpm` that answers for the installed Slurm: the
# release refusal before install, the line disabled on erase but not on upgrade, and enabled
# again on reinstall.
#   tests/rpm.sh [RELEASE...]     (default: 24.11 26.05)
# Ends with "rpm: N passed, N failed"; exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib.sh"

releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=(24.11 26.05)

# scriptlet RPM TAG: a scriptlet's text, its configuration path moved into $work.
scriptlet() { rpm -qp --qf "%{$2}" "$1" | sed "s|/etc/slurm/plugstack.conf.d/lama.conf|$work/lama.conf|g"; }
# A stand-in for `rpm -q --qf %{VERSION} slurm`: $FAKE_SLURM, or "not installed".
fake_rpm() {
    mkdir -p "$work/bin"
    cat > "$work/bin/rpm" <<'FAKE'
#!/bin/sh
if [ -n "$FAKE_SLURM" ]; then printf '%s' "$FAKE_SLURM"; exit 0; fi
echo "package slurm is not installed"; exit 1
FAKE
    chmod +x "$work/bin/rpm"
}

check_release() { # RELEASE
    local r=$1 other rpm
    if [ "$r" == 24.11 ]; then other=26.05.1; else other=24.11.5; fi
    rpm=$("$top/scripts/package-rpm.sh" "$r" 2>/dev/null | tail -n1)
    [ -f "$rpm" ] || { fail "scripts/package-rpm.sh $r built nothing"; return 1; }
    assert_eq "$r: name, version, release" "spank-lama 0.1.0 1.slurm$r" \
        "$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE}' "$rpm")" || return 1
    assert_eq "$r: files" "/etc/slurm/plugstack.conf.d/lama.conf /usr/bin/lama /usr/lib64/slurm/spank_lama.so /usr/share/bash-completion/completions/lama /usr/share/doc/spank-lama/README.md /usr/share/doc/spank-lama/plugstack.conf.example /usr/share/fish/vendor_completions.d/lama.fish /usr/share/licenses/spank-lama/LICENSE-APACHE /usr/share/licenses/spank-lama/LICENSE-MIT /usr/share/man/man1/lama.1.gz /usr/share/man/man8/spank-lama.8.gz /usr/share/zsh/site-functions/_lama" \
        "$(rpm -qlp "$rpm" | paste -sd' ')" || return 1
    assert_eq "$r: the conffile" "/etc/slurm/plugstack.conf.d/lama.conf" "$(rpm -qcp "$rpm")" || return 1
    local next="${r%.*}.$(printf %02d $((10#${r#*.} + 1)))"
    assert_eq "$r: Slurm and hwloc dependencies" "hwloc-libs slurm < $next slurm >= $r" \
        "$(rpm -qp --requires "$rpm" | grep -E '^(slurm|hwloc)' | sort | paste -sd' ')" || return 1
    # The files themselves: the plugstack line, the plugin built for this Slurm.
    rm -rf "$work/x" && mkdir -p "$work/x"
    (cd "$work/x" && rpm2cpio "$rpm" | cpio -idm --quiet) || { fail "$r: rpm2cpio | cpio failed"; return 1; }
    assert_eq "$r: plugstack line" "# required /usr/lib64/slurm/spank_lama.so" \
        "$(grep 'spank_lama.so$' "$work/x/etc/slurm/plugstack.conf.d/lama.conf")" || return 1
    strings "$work/x/usr/lib64/slurm/spank_lama.so" | grep "built for Slurm $r" > /dev/null \
        || fail "$r: the plugin does not say it is built for Slurm $r" || return 1
    # %pre: refuses another release and no Slurm, accepts its own.
    fake_rpm
    scriptlet "$rpm" PREIN > "$work/pre"
    PATH=$work/bin:$PATH FAKE_SLURM=$r.5 sh "$work/pre" 2> "$work/err" \
        || fail "$r: %pre refused Slurm $r.5: $(cat "$work/err")" || return 1
    PATH=$work/bin:$PATH FAKE_SLURM=$other sh "$work/pre" 2> "$work/err" \
        && { fail "$r: %pre accepted Slurm $other"; return 1; }
    grep -qF "this package is built for Slurm $r, but this machine has Slurm $other." "$work/err" \
        || fail "$r: %pre's message: $(cat "$work/err")" || return 1
    PATH=$work/bin:$PATH FAKE_SLURM= sh "$work/pre" 2> "$work/err" && { fail "$r: %pre accepted no Slurm"; return 1; }
    grep -qF "(none: the slurm package is not installed)" "$work/err" || fail "$r: %pre without Slurm: $(cat "$work/err")" || return 1
    # %postun on erase disables an enabled line, not on upgrade; %post enables it again.
    local line="required /usr/lib64/slurm/spank_lama.so map=scbnh"
    printf '# comment\n%s\n' "$line" > "$work/lama.conf"
    scriptlet "$rpm" POSTUN > "$work/postun"
    scriptlet "$rpm" POSTIN > "$work/post"
    sh "$work/postun" 1 2> /dev/null
    assert_eq "$r: after an upgrade's %postun" "$line" "$(sed -n 2p "$work/lama.conf")" || return 1
    sh "$work/postun" 0 2> /dev/null
    assert_eq "$r: after erase" "#lama-removed# $line" "$(sed -n 2p "$work/lama.conf")" || return 1
    sh "$work/post" 1 2> /dev/null
    assert_eq "$r: after reinstalling" "$line" "$(sed -n 2p "$work/lama.conf")" || return 1
    # A line the site never enabled stays as it is.
    printf '# required /usr/lib64/slurm/spank_lama.so\n' > "$work/lama.conf"
    sh "$work/postun" 0 2> /dev/null
    assert_eq "$r: a commented line after erase" "# required /usr/lib64/slurm/spank_lama.so" "$(cat "$work/lama.conf")"
}

tests=()
for r in "${releases[@]}"; do
    eval "t_rpm_slurm_${r/./_}() { check_release $r; }"
    tests+=("t_rpm_slurm_${r/./_}")
done
run_tests rpm "${tests[@]}"
