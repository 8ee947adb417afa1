#!/bin/bash
# Unmodified ibv_rc_pingpong (Debian's ibverbs-utils) under LD_PRELOAD=libhotmig-verbs.so between
# two lab guests, across four live migrations: the client's guest A->B->A, then the server's
# B->A->B. Asserts: every migrate-vm succeeds, both layers quiesced and resumed (or reconnected)
# at every move, the pingpong was still running after the last move, and both ends exit 0 and
# print their figures. EVENTS=1 runs the tool with -e (completion channel). Prints "VERBS ..."
# with the iteration time and each side's quiesce/resume times.
# E2E_FABRIC=ib: the lab's InfiniBand fabric mode, the tool without -g (LID-routed: no GRH),
# no HOTMIG_VERBS_PEERS (the layers find each other in the agents' directory); also asserts
# that each end went to RTR at the mover's new LID (the LID belongs to the host's slot).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
events=${EVENTS:-0}
case $events in 0) opt='' sfx=p ;; 1) opt='-e' sfx=e ;; *) fail "EVENTS must be 0 or 1" ;; esac
iters=${ITERS:-3000}
fabric=${E2E_FABRIC:-roce}
c=vrc-$sfx-c
s=vrc-$sfx-s
[ "$fabric" = ib ] && c=vib-$sfx-c s=vib-$sfx-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
if [ "$fabric" = ib ]; then
    vibready "$s" "$c"
    # LID-routed, and no list: the agents' directory knows who holds which GID and LID
    env_s=$(venv "$c")
    env_c=$(venv "$s")
    run="ibv_rc_pingpong -d rxe0 -n $iters $opt"
else
    gid_s=$(vgid "$s")
    [ -n "$gid_s" ] || fail "$s printed no GID index"
    # Each layer finds the peer guest's agent from the peer's RoCE GID (its VF address).
    env_s=$(venv "$c")
    env_c=$(venv "$s")
    run="ibv_rc_pingpong -d rxe0 -g $gid_s -n $iters $opt"
fi
vtool "$s" VPP "$env_s $run"
sleep 1
vtool "$c" VPP "$env_c $run 198.51.100.$si"
vconnected "$c" 120 || fail "the pingpong did not connect"

n=0
for move in "$c $A $B" "$c $B $A" "$s $B $A" "$s $A $B"; do
    read -r g from to <<<"$move"
    n=$((n + 1))
    [ "$(vcount "$c" 'VPP rc=')" = 0 ] || fail "the client ended before move $n"
    migrate "$g" "$from" "$to" "$tmp/m$n.json"
    jq -e '.ok' "$tmp/m$n.json" >/dev/null || fail "move $n of $g not ok"
    want=$n
    [ "$g" = "$s" ] && want=$((n - 2))
    vwait "$g" 'VPP hotmig-verbs.*resumed on' "$want" 30 ||
        fail "the layer in $g did not resume after move $n"
done
[ "$(vcount "$c" 'VPP rc=')" = 0 ] ||
    fail "the client ended before the last move completed: more iterations are needed"
vwait "$s" 'VPP hotmig-verbs.*reconnected to its peer' 2 30 ||
    fail "the server's layer did not reconnect twice"
vwait "$c" 'VPP hotmig-verbs.*reconnected to its peer' 2 30 ||
    fail "the client's layer did not reconnect twice"
if [ "$fabric" = ib ]; then
    # each end followed the other's LID at each of its moves (A's slots 0x1xx, B's 0x2xx)
    vwait "$s" 'VPP hotmig-verbs.*moved from LID [0-9]+ to LID [0-9]+' 2 30 ||
        fail "the server's layer did not follow the client's new LID twice"
    vwait "$c" 'VPP hotmig-verbs.*moved from LID [0-9]+ to LID [0-9]+' 2 30 ||
        fail "the client's layer did not follow the server's new LID twice"
fi

# both ends finish: exit status 0 and the figures
vfinish VPP ibv_rc_pingpong "$iters" "$c" "$s" "events=$events"
log "ok: ibv_rc_pingpong $opt ($fabric) survived 4 migrations"
