#!/bin/bash
# libhotmig-verbs wraps every public export of the installed libibverbs, with its version, and
# every ibv_* symbol the known verbs programs import (ibverbs-utils, perftest, UCX's libuct_ib):
# a program handed a shadow object that reached an unwrapped libibverbs function would crash.
# Also: the layer needs no GLib (it is preloaded into MPI processes).
# Usage: verbs-layer-exports.sh LIBHOTMIG_VERBS_SO
set -euo pipefail
layer=$1
real=${HM_LIBIBVERBS:-/usr/lib/x86_64-linux-gnu/libibverbs.so.1}
fail() { echo "FAIL: $*" >&2; exit 1; }

# name@version of every defined, versioned symbol; '@@' (default) and '@' both as '@'
exports() {
    readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $8 ~ /@/ { print $8 }' |
        sed 's/@@/@/' | grep -v '^IBVERBS_' | sort -u
}
imports() {
    readelf --dyn-syms -W "$1" | awk '$7 == "UND" { print $8 }' |
        grep -E '^_?ibv_|^(mbps|mult)_to_ibv_rate' | sed 's/ (.*//; s/@@/@/' | sort -u
}

mine=$(exports "$layer")
want=$(exports "$real" | grep -v '@IBVERBS_PRIVATE_')
missing=$(comm -23 <(echo "$want") <(echo "$mine"))
extra=$(comm -13 <(echo "$want") <(echo "$mine"))
[ -z "$missing" ] || fail "public libibverbs exports the layer does not define: $missing"
[ -z "$extra" ] || fail "the layer exports what libibverbs does not: $extra"
echo "ok: all $(echo "$want" | wc -l) public exports of $real (name@version) are wrapped"
if grep -q '@IBVERBS_PRIVATE_' <(exports "$layer"); then
    fail "the layer interposes the provider interface (IBVERBS_PRIVATE_*)"
fi

needed=$(readelf -d "$layer" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
if echo "$needed" | grep -qE '^lib(glib|gio|gobject|json-glib)'; then
    fail "the layer links GLib: $needed"
fi

for tool in ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong ib_write_bw ib_read_lat ib_send_lat \
    /usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0; do
    case $tool in /*) path=$tool ;; *) path=$(command -v "$tool" || true) ;; esac
    [ -n "$path" ] && [ -e "$path" ] || fail "$tool is not installed (tests/install-deps)"
    imp=$(imports "$path")
    [ -n "$imp" ] || fail "$tool imports no ibv_* symbol: the check would prove nothing"
    # an unversioned import binds to the default version: any version of the name will do
    while read -r sym; do
        case $sym in
        *@*) grep -qxF "$sym" <<<"$mine" || fail "$tool imports $sym: not wrapped" ;;
        *) grep -q "^$sym@" <<<"$mine" || fail "$tool imports $sym: not wrapped" ;;
        esac
    done <<<"$imp"
    echo "ok: $tool: $(echo "$imp" | wc -l) ibv_* imports, all wrapped"
done
