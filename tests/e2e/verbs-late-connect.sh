#!/bin/bash
# A connection made after a swap: unmodified ibv_rc_pingpong under libhotmig-verbs. The server
# creates its QP, posts its receives and waits for a client; then its guest's device is swapped
# (agent prepare, rxe0 deleted and created again, resume), QPNs burned first, so the server's QP
# gets a new physical number. Only then the client starts and connects to the number the server
# handed out: a virtual one, which the client's layer must look up (LOOKUP, docs/protocol.md)
# before its RTR. Asserts: the server's QP is physical N != virtual V after the swap, the
# client's layer looked V up as N, both ends exit 0 with their figures.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
c=vlate-c
s=vlate-s
iters=${ITERS:-500}
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
gid=$(vgid "$s")
vf_if=$(vvfif "$s")
[ -n "$gid" ] && [ -n "$vf_if" ] || fail "no GID index or VF interface in the consoles"

vburn "$s" "$gid"

env_s=$(venv "$c")
env_c=$(venv "$s")
run="ibv_rc_pingpong -d rxe0 -g $gid -n $iters"
vtool "$s" VLC "$env_s $run"
# rc_qpn GUEST: the QPN of the guest's RC QP in state INIT that a process owns (empty when none);
# the lab's exec is retried: on a loaded machine one may not finish in time
rc_qpn() {
    local q
    for _ in $(seq 1 60); do
        if q=$("$lab" exec "$1" "rdma res show qp | sed -n 's/.*lqpn \\([0-9]*\\) .*type RC state INIT.*pid.*/\\1/p'" \
            --timeout 30 | tr -d '\r' | head -n 1) && [ -n "$q" ]; then
            echo "$q"
            return 0
        fi
        sleep 1
    done
}

# the server's QP exists (INIT) before the swap; the client is not started yet
vqpn=$(rc_qpn "$s")
[ -n "$vqpn" ] || fail "the server created no QP"
log "server QPN $vqpn (virtual from now on)"

vswap "$s" "$vf_if"
pq=$(rc_qpn "$s")
[ -n "$pq" ] && [ "$pq" != "$vqpn" ] ||
    fail "the server's physical QPN after the swap ($pq) equals the virtual one ($vqpn): burn more"
log "server QP: virtual $vqpn, physical $pq after the swap"

vtool "$c" VLC "$env_c $run 198.51.100.$si"
vfinish VLC ibv_rc_pingpong "$iters" "$c" "$s" late-connect
grep -q "its peer QP $vqpn is physical QPN $pq" "$tmp/$c.log" ||
    fail "the client's layer did not look up the server's QP $vqpn as $pq"
echo "VERBS late-connect virtual_qpn=$vqpn physical_qpn=$pq swap_ms=$vswap_ms"
log "ok: a connection made after the peer's swap (virtual QPN $vqpn looked up as $pq)"
