#!/usr/bin/env bash
# make static: a statically linked `lama` for sites to copy to login nodes (no hwloc, Scotch or
# C library needed where it runs), written to target/static/lama (stripped).
# Built from the static archives of this machine's packages: hwloc (libhwloc-dev), Scotch
# (libscotch-dev, unless FEATURES=--no-default-features), zlib, bzip2, xz and the C library's;
# libudev, which hwloc names and no distribution ships static, is a stub that says udev is
# not there (scripts/static/udev-stub.c). Cargo's target directory: target/static.
# Environment: CARGO (default cargo), FEATURES (cargo flags, e.g. --no-default-features).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cargo=${CARGO:-cargo}
out=$top/target/static
triple=$(rustc -vV | sed -n 's/^host: //p')
mkdir -p "$out/stub"
cc=${CC:-cc}
"$cc" -O2 -c scripts/static/udev-stub.c -o "$out/stub/udev-stub.o"
ar rcs "$out/stub/libudev.a" "$out/stub/udev-stub.o"
for a in libhwloc.a libc.a; do
    [ -f "$("$cc" -print-file-name="$a")" ] \
        || { echo "static: no $a (install libhwloc-dev and libc6-dev)" >&2; exit 1; }
done
# shellcheck disable=SC2086
RUSTFLAGS="-C target-feature=+crt-static -L native=$out/stub" \
    "$cargo" build --release -p lama-cli ${FEATURES:-} --target "$triple" --target-dir "$out"
bin=$out/$triple/release/lama
if ! ldd "$bin" 2>&1 | grep -qE 'statically linked|not a dynamic executable'; then
    echo "static: $bin is linked dynamically: $(ldd "$bin" | tr '\n' ' ')" >&2
    exit 1
fi
strip -o "$out/lama" "$bin"
echo "static: built $out/lama ($(du -k "$out/lama" | cut -f1) KiB, statically linked)"
