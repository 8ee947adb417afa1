#!/bin/bash
# Unmodified ibv_ud_pingpong (Debian's ibverbs-utils; UD: address handles, remote QPN per send,
# no retransmission) under LD_PRELOAD=libhotmig-verbs.so between two lab guests, across two live
# migrations: the server's guest B->A, then the client's A->B. ibv_ud_pingpong stalls for good
# if one datagram is lost, so this asserts that the peer of each mover held its sends while the
# mover was away (UDHOLD) and followed it to its new QP (UDMAP), that both layers resumed, and
# that both ends exit 0 and print their figures. Prints "VERBS ..." with the iteration time and
# the movers' quiesce/resume times.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
iters=${ITERS:-3000}
c=vud-c
s=vud-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
gid_s=$(vgid "$s")
[ -n "$gid_s" ] || fail "$s printed no GID index"
env_s=$(venv "$c")
env_c=$(venv "$s")
run="ibv_ud_pingpong -d rxe0 -g $gid_s -n $iters"
vtool "$s" VUD "$env_s $run"
sleep 1
vtool "$c" VUD "$env_c $run 198.51.100.$si"
connected=0
for _ in $(seq 1 120); do
    "$lab" exec "$c" "rdma res show qp | grep -q 'type UD state RTS.*pid'" --timeout 30 &&
        { connected=1; break; }
    sleep 1
done
[ "$connected" = 1 ] || fail "the UD pingpong did not start"

n=0
for move in "$s $B $A" "$c $A $B"; do
    read -r g from to <<<"$move"
    n=$((n + 1))
    other=$c
    [ "$g" = "$c" ] && other=$s
    [ "$(vcount "$c" 'VUD rc=')" = 0 ] || fail "the client ended before move $n"
    migrate "$g" "$from" "$to" "$tmp/m$n.json"
    jq -e '.ok' "$tmp/m$n.json" >/dev/null || fail "move $n of $g not ok"
    vwait "$g" 'VUD hotmig-verbs.*resumed on' 1 30 ||
        fail "the layer in $g did not resume after move $n"
    vwait "$other" 'VUD hotmig-verbs.*UD: a peer moves: sends to it held' 1 30 ||
        fail "$other's layer was not asked to hold its UD sends during move $n"
    vwait "$other" "VUD hotmig-verbs.*UD: a peer's [0-9]+ UD QPs moved" 1 30 ||
        fail "$other's layer was not told where $g's UD QP went after move $n"
done
[ "$(vcount "$c" 'VUD rc=')" = 0 ] ||
    fail "the client ended before the last move completed: more iterations are needed"

vfinish VUD ibv_ud_pingpong "$iters" "$c" "$s"
log "ok: ibv_ud_pingpong survived 2 migrations"
