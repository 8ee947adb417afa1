#!/bin/bash
# libhotmig-verbs sets UCX's UD peer timeout and keepalive interval for the programs it is
# preloaded into (docs/verbs-layer.md, "UCX"), unless the user set them, and not when disabled.
# Usage: verbs-ucx-env.sh LIBHOTMIG-VERBS.SO
set -euo pipefail
lib=$(readlink -f "$1")
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
# The layer needs the real libibverbs loaded after it (dlvsym RTLD_NEXT), as the lab preloads it.
# (awk reads all of ldconfig's output: an early exit would give ldconfig a SIGPIPE, which
# pipefail and set -e turned into a silent failure of this test now and then.)
verbs=$(ldconfig -p | awk '/libibverbs\.so\.1 .*x86-64/ && !found { print $NF; found = 1 }')
[ -n "$verbs" ] || fail "no libibverbs.so.1 on this machine"
# An ASan build of the layer needs the ASan runtime first in the preload list.
pre=$(ldd "$lib" | awk '$1 ~ /^lib(asan|ubsan)\.so/ { printf "%s:", $3 }')
run() {
    env -u UCX_UD_TIMEOUT -u UCX_KEEPALIVE_INTERVAL "$@" LD_PRELOAD="$pre$lib:$verbs" ASAN_OPTIONS=detect_leaks=0 \
        sh -c 'echo "${UCX_UD_TIMEOUT-unset} ${UCX_KEEPALIVE_INTERVAL-unset}"'
}
got=$(run)
[ "$got" = "300s 300s" ] || fail "defaults: got '$got', want '300s 300s'"
got=$(run UCX_UD_TIMEOUT=45s)
[ "$got" = "45s 300s" ] || fail "a user's UCX_UD_TIMEOUT must win: got '$got', want '45s 300s'"
got=$(run UCX_KEEPALIVE_INTERVAL=inf)
[ "$got" = "300s inf" ] || fail "a user's UCX_KEEPALIVE_INTERVAL must win: got '$got'"
got=$(run HOTMIG_VERBS_DISABLE=1)
[ "$got" = "unset unset" ] || fail "HOTMIG_VERBS_DISABLE=1 must leave UCX alone: got '$got'"
echo "ok: UCX defaults set by the layer, the user's values kept"
