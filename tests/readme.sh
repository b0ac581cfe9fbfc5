#!/usr/bin/env bash
# The README's try-out (between <!-- try-out --> and <!-- /try-out -->), as a newcomer runs it:
#   t_readme_packages   every package its apt-get line names is one this Debian has (the line
#                       itself is not run: the machine's packages are scripts/deps.sh's, and
#                       its Debian may have another cargo)
#   t_readme_commands   every other command of its command blocks, exactly as written, in a
#                       clean clone of this repository (its committed files) whose target/ is
#                       target/readme here: the try-out's cargo build and target/release/lama
#                       never touch the target/release/lama that the end-to-end suites run
#                       beside it (a build there replaced it mid-run once); each must succeed
#   t_readme_output     each line of its output block is in what its commands print (a line
#                       ending in "..." is a prefix)
# Ends with "readme: N passed, N failed"; exits non-zero if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib.sh"
. "$top/scripts/lib.sh"
cd "$top"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The try-out's fenced blocks, each as one file: block-1, block-2, ...
awk -v dir="$work" '
    /^<!-- try-out/ { on = 1; next }
    /^<!-- \/try-out -->/ { on = 0 }
    on && /^```/ { if (inside) { inside = 0 } else { inside = 1; n++ }; next }
    on && inside { print > (dir "/block-" n) }
' README.md
[ -s "$work/block-1" ] || { echo "readme: no try-out block in README.md" >&2; exit 1; }

# A block of commands starts with one; an output block does not.
is_commands() { head -n1 "$1" | grep -qE '^(sudo |cargo |target/release/lama )'; }
# The block's commands, continuation lines joined.
commands_of() { sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$1" | sed 's/[[:space:]]*#[^"'"'"']*$//; s/[[:space:]]*$//' | grep -v '^$'; }

t_readme_packages() {
    local b line pkgs p
    for b in "$work"/block-*; do
        is_commands "$b" || continue
        while read -r line; do
            [[ "$line" == "sudo apt-get install"* ]] || continue
            pkgs=$(sed 's/^sudo apt-get install//; s/-y//' <<< "$line")
            for p in $pkgs; do
                apt-cache show "$p" > /dev/null 2>&1 || { fail "the README names package $p, which this Debian does not have"; return 1; }
            done
            return 0
        done < <(commands_of "$b")
    done
    fail "no apt-get line in the try-out"
}

t_readme_commands() {
    local b line n=0 clone="$work/clone"
    : > "$work/printed"
    git clone -q "$top" "$clone" || { fail "cannot clone $top"; return 1; }
    mkdir -p "$top/target/readme"
    # The dependencies as the 24.11 package compiled them (what a newcomer compiles is the
    # same, only colder): the try-out's build compiles the workspace's crates.
    seed_target "$top" "$top/target/readme" || { fail "cannot start target/readme from target/release"; return 1; }
    ln -s "$top/target/readme" "$clone/target" || return 1
    for b in "$work"/block-*; do
        is_commands "$b" || continue
        while read -r line; do
            [[ "$line" == "sudo "* ]] && continue
            (cd "$clone" && bash -c "$line") >> "$work/printed" 2> "$work/err" < /dev/null \
                || { fail "README command failed: $line: $(tail -n 5 "$work/err")"; return 1; }
            n=$((n + 1))
        done < <(commands_of "$b")
    done
    [ "$n" -ge 3 ] || fail "only $n commands in the try-out"
}

t_readme_output() {
    local b line shown=0
    [ -s "$work/printed" ] || { fail "the commands printed nothing (t_readme_commands first)"; return 1; }
    for b in "$work"/block-*; do
        is_commands "$b" && continue
        while IFS= read -r line; do
            [ "$line" == "..." ] && continue
            if [[ "$line" == *"..." ]]; then
                grep -qF -- "${line%...}" "$work/printed" || { fail "README output line not printed: $line"; return 1; }
            else
                grep -qxF -- "$line" "$work/printed" || { fail "README output line not printed: $line"; return 1; }
            fi
            shown=$((shown + 1))
        done < "$b"
    done
    [ "$shown" -ge 5 ] || fail "only $shown output lines checked"
}

run_tests readme t_readme_packages t_readme_commands t_readme_output
