#!/usr/bin/env bash
# `make install` into a temporary PREFIX, then what a user of the installed
# library does: build a program with `pkg-config --cflags --libs blobcask`
# (nothing from this tree) and run it. Checks the layout on the way: the
# header, libblobcask.so.MAJOR.MINOR with the soname libblobcask.so.MAJOR
# and no symbol table, the soname and dev links, the static library, and a
# .pc file that names the PREFIX.
# Usage (from bindings-c/, as `make install-check` runs it): tests/install_check.sh MAKE CC
set -euo pipefail
MAKE=${1:-make} CC=${2:-cc}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/blobcask-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fail() { echo "install check: $*" >&2; exit 1; }

"$MAKE" --no-print-directory -s install PREFIX="$prefix" >/dev/null
major=$(sed -n 's/^#define BC_ABI_MAJOR \([0-9]*\)$/\1/p' "$prefix/include/blobcask.h")
minor=$(sed -n 's/^#define BC_ABI_MINOR \([0-9]*\)$/\1/p' "$prefix/include/blobcask.h")
[ -n "$major" ] && [ -n "$minor" ] || fail "the installed header has no BC_ABI_MAJOR/BC_ABI_MINOR"
lib=$prefix/lib
real=libblobcask.so.$major.$minor
[ -f "$lib/$real" ] && [ ! -L "$lib/$real" ] || fail "no $real in $lib"
[ "$(readlink "$lib/libblobcask.so.$major")" = "$real" ] || fail "libblobcask.so.$major is not a link to $real"
[ "$(readlink "$lib/libblobcask.so")" = "libblobcask.so.$major" ] || fail "libblobcask.so is not a link to libblobcask.so.$major"
[ -f "$lib/libblobcask.a" ] || fail "no libblobcask.a"
soname=$(readelf -d "$lib/$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libblobcask.so.$major" ] || fail "soname is '$soname', not libblobcask.so.$major"
if readelf -SW "$lib/$real" | grep -qE ' \.(symtab|debug_[a-z_]+) '; then fail "$real is not stripped"; fi

export PKG_CONFIG_PATH=$lib/pkgconfig
pkg-config --exists blobcask || fail "pkg-config does not find blobcask.pc in $lib/pkgconfig"
[ "$(pkg-config --variable=prefix blobcask)" = "$prefix" ] || fail "blobcask.pc names another prefix"
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
"$CC" -std=c11 -Wall -Wextra -Werror tests/install_check.c $(pkg-config --cflags --libs blobcask) \
  -o "$prefix/install_check"
# The program records the soname and finds it in the PREFIX (no rpath: as a
# user with the library in a non-default place, through LD_LIBRARY_PATH).
readelf -d "$prefix/install_check" | grep -q "Shared library: \[libblobcask.so.$major\]" \
  || fail "the program does not need libblobcask.so.$major"
found=$(LD_LIBRARY_PATH=$lib ldd "$prefix/install_check" | sed -n 's/.*libblobcask.so[^ ]* => \([^ ]*\).*/\1/p')
[ "$found" = "$lib/libblobcask.so.$major" ] || fail "the program loads '$found', not the installed library"
LD_LIBRARY_PATH=$lib "$prefix/install_check" "$prefix/store.blobcask"
size=$(stat -c %s "$lib/$real")
echo "install check: $real ($((size / 1024)) KiB, stripped), soname libblobcask.so.$major, blobcask.pc $(pkg-config --modversion blobcask)"
