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

[ -e "$build/guest-agent/verbs/libhotmig-verbs.so" ] || fail "libhotmig-verbs.so is not built"
start_guest "$s" B "$c"
start_guest "$c" A "$s"
"$lab" wait "$s" 'HMLAB booted' --timeout 240 >/dev/null || fail "$s did not boot"
"$lab" wait "$c" 'HMLAB booted' --timeout 240 >/dev/null || fail "$c did not boot"
si=$("$lab" index "$s")
gid=$(vgid "$s")
vf_if=$(grep -a 'HMLAB vf up' "$("$lab" console "$c")" | tail -n 1 | awk '{print $4}')
[ -n "$gid" ] && [ -n "$vf_if" ] || fail "no GID index or VF interface in the consoles"

# burn: each ibv_ud_pingpong server creates a QP and an MR and waits for a client; stop it
"$lab" exec "$c" "for i in 1 2 3 4 5 6; do ibv_ud_pingpong -d rxe0 -g $gid -p 1900\$i & p=\$!; sleep 1; kill \$p; done; wait" \
    --timeout 120 >/dev/null || true

env_s="LD_PRELOAD=libhotmig-verbs.so HOTMIG_VERBS_PEERS=$(vpeers "$c") HOTMIG_VERBS_DEBUG=1"
env_c="LD_PRELOAD=libhotmig-verbs.so HOTMIG_VERBS_PEERS=$(vpeers "$s") HOTMIG_VERBS_DEBUG=1"
run="ibv_rc_pingpong -d rxe0 -g $gid -n $iters"
vtool "$s" VSW "$env_s $run"
sleep 1
vtool "$c" VSW "$env_c $run 198.51.100.$si"
vconnected "$c" 120 || fail "the pingpong did not connect"
vqpn=$("$lab" exec "$c" "rdma res show qp | sed -n 's/.*lqpn \\([0-9]*\\) .*type RC state RTS.*/\\1/p'" --timeout 30 | tr -d '\r' | head -n 1)
[ -n "$vqpn" ] || fail "no local QPN printed"
log "client QPN $vqpn (virtual from now on)"

# the agent's host channel: sync, protocol 2, prepare ... resume
sock=$("$lab" channel "$c")
coproc AG { exec socat - "UNIX-CONNECT:$sock"; }
# bash closes a coproc's descriptors in subshells ($(...), pipelines): use copies
exec {ag_in}>&"${AG[1]}" {ag_out}<&"${AG[0]}"
agent() { # JSON -> prints the reply line
    printf '%s\n' "$1" >&"$ag_in"
    local line
    IFS= read -r -t 90 line <&"$ag_out" || fail "the agent did not answer $1"
    printf '%s\n' "${line#$'\xff'}"
}
printf '\xff' >&"$ag_in"
agent '{"execute":"sync","arguments":{"id":7}}' | grep -q '"return":7' || fail "no sync"
agent '{"execute":"info","arguments":{"protocol":2}}' >/dev/null
t0=$(date +%s%N)
prep=$(agent '{"execute":"prepare","arguments":{"timeout_ms":30000}}')
echo "prepare: $prep" >&2
jq -e '.return.failed == [] and (.return.quiesced | length) == 1' <<<"$prep" >/dev/null ||
    fail "prepare did not quiesce the layer: $prep"
"$lab" exec "$c" "rdma link del rxe0 && rdma link add rxe0 type rxe netdev $vf_if" --timeout 60 ||
    fail "cannot re-create rxe0"
res=$(agent '{"execute":"resume","arguments":{"timeout_ms":60000}}')
t1=$(date +%s%N)
echo "resume: $res" >&2
jq -e '.return.failed == [] and (.return.resumed | length) == 1' <<<"$res" >/dev/null ||
    fail "the layer did not resume: $res"
kill "$AG_PID" 2>/dev/null || true

for g in "$c" "$s"; do
    vwait "$g" 'VSW rc=' 1 400 || fail "$g: the pingpong did not finish"
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
echo "VERBS device-swap virtual_qpn=$vqpn physical_qpn=$pq swap_ms=$(((t1 - t0) / 1000000))"
log "ok: device swap with translation (virtual QPN $vqpn, physical $pq)"
