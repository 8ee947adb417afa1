#!/bin/sh
# libhotmig is linked into MPI processes: it may need libc (and libpthread on old glibc, the
# sanitizers' runtimes in a sanitized build) and nothing else.
#   libhotmig-deps.sh LIBHOTMIG.so
set -eu
lib=$1
dyn=$(readelf -d "$lib") || { echo "libhotmig-deps: readelf -d '$lib' failed" >&2; exit 1; }
needed=$(printf '%s\n' "$dyn" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "libhotmig-deps: '$lib' has no NEEDED entry (not a shared library?)" >&2; exit 1; }
extra=$(printf '%s\n' "$needed" | grep -v -E '^(libc|libpthread|libasan|libubsan|ld-linux[-a-z0-9_]*)\.so' || true)
[ -z "$extra" ] || { echo "libhotmig-deps: '$lib' needs more than libc: $extra" >&2; exit 1; }
echo "libhotmig-deps: $lib needs $(printf '%s' "$needed" | tr '\n' ' ')"
