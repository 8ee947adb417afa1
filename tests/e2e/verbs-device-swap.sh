#!/bin/bash
# A device swap without a VM move: unmodified ibv_rc_pingpong under libhotmig-verbs between two
# lab guests; in the client's guest the agent quiesces (host command `prepare` over its
# channel), rxe0 is deleted and created again (`rdma link del/add`: a fresh device restarts
# its QP numbers and memory keys), and the agent resumes. QPNs and MR keys are burned first
# (short-lived QPs and MRs) so that the client's numbers differ from the new device's: an
# identity mapping cannot hide a missed translation. Asserts: the layer resumed with a
# physical QPN different from the virtual one, and both ends exit 0 with their figures.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
c=vswap-c
s=vswap-s
iters=${ITERS:-2500}
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
gid=$(vgid "$s")
vf_if=$(vvfif "$c")
[ -n "$gid" ] && [ -n "$vf_if" ] || fail "no GID index or VF interface in the consoles"

vburn "$c" "$gid"

env_s=$(venv "$c")
env_c=$(venv "$s")
run="ibv_rc_pingpong -d rxe0 -g $gid -n $iters"
vtool "$s" VSW "$env_s $run"
sleep 1
vtool "$c" VSW "$env_c $run 198.51.100.$si"
vconnected "$c" 120 || fail "the pingpong did not connect"
vqpn=$("$lab" exec "$c" "rdma res show qp | sed -n 's/.*lqpn \\([0-9]*\\) .*type RC state RTS.*/\\1/p'" --timeout 30 | tr -d '\r' | head -n 1)
[ -n "$vqpn" ] || fail "no local QPN printed"
log "client QPN $vqpn (virtual from now on)"

vswap "$c" "$vf_if"

for g in "$c" "$s"; do
    vwait "$g" 'VSW rc=' 1 400 || { vstuck "$g" ibv_rc_pingpong; fail "$g: the pingpong did not finish"; }
    vlog "$g" VSW >"$tmp/$g.log"
    cat "$tmp/$g.log" >&2
    grep -q '^rc=0$' "$tmp/$g.log" || fail "$g: ibv_rc_pingpong failed"
    grep -q "^$iters iters in .* usec/iter" "$tmp/$g.log" || fail "$g printed no figures"
done
grep -q 'resumed on rxe0' "$tmp/$c.log" || fail "the client's layer did not resume"
grep -q 'reconnected to its peer' "$tmp/$s.log" || fail "the server's layer did not reconnect"
# the new device numbered the client's QP anew: the peer was told a different physical QPN
pq=$(grep -o "reconnected to its peer's new QP [0-9]*" "$tmp/$s.log" | awk '{print $NF}')
[ -n "$pq" ] && [ "$pq" != "$vqpn" ] ||
    fail "the physical QPN after the swap ($pq) equals the virtual one ($vqpn): burn more"
echo "VERBS device-swap virtual_qpn=$vqpn physical_qpn=$pq swap_ms=$vswap_ms"
log "ok: device swap with translation (virtual QPN $vqpn, physical $pq)"
