#!/bin/bash
# e2e-verbs-hostile-peer (issue 28): unmodified ibv_rc_pingpong under LD_PRELOAD=libhotmig-verbs.so
# between two lab guests (the job's key in both ranks' environment) while a process without the
# key, in the client's guest, with busybox nc only, tries what finding 1 did: a ROUTE scan, then
# forged SUSPEND, RECONNECT (naming the client's QPN and a QP 99 at another GID), LOOKUP,
# KEYMAP, UDMAP, UDHOLD and a frame with a made-up MAC, each routed to the server's QP, then a
# flood of 100 silent connections to the server's agent, during which the client's guest
# migrates (its quiesce SUSPENDs the server through that agent). Asserts: the server's layer
# refused each forged request and said why, no QP was reconnected to QP 99, the migration
# succeeded and both layers reconnected, and both ends finish with their figures.
# Not covered here: an unprivileged user inside the server's guest (the lab's initramfs has
# root only; the route-record checks are agent-peer-test's) and a third guest (the forger runs
# in the client's guest: the same control segment, and the address the real requests come from).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
iters=${ITERS:-3000}
c=vhp-c
s=vhp-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
gid_s=$(vgid "$s")
[ -n "$gid_s" ] || fail "$s printed no GID index"
vtool "$s" VHP "$(venv "$c") ibv_rc_pingpong -d rxe0 -g $gid_s -n $iters"
sleep 1
vtool "$c" VHP "$(venv "$s") ibv_rc_pingpong -d rxe0 -g $gid_s -n $iters 198.51.100.$si"
vconnected "$c" 120 || fail "the pingpong did not connect"
vwait "$s" 'VHP hotmig-verbs.*QP [0-9]+ connected to QP [0-9]+' 1 60 ||
    fail "the server's layer logged no connection"
read -r sq cq < <(vlog "$s" VHP | grep -o 'QP [0-9]* connected to QP [0-9]*' | tail -n 1 |
    awk '{print $2, $6}')
log "the server's QP $sq is connected to the client's QP $cq"

# the forger: no key, busybox nc, from the client's guest
agent="198.51.100.$si 7475"
evil=00000000000000000000ffffc0000263
zero=0000000000000000000000000000000000000000000000000000000000000000
forged=(
    "SUSPEND $sq $cq 0"
    "RECONNECT $sq $cq 99 1 2 $evil 0 0"
    "LOOKUP $sq $cq $evil"
    "KEYMAP $sq $cq 1 1:2"
    "UDMAP $sq $evil 0 1 11:18"
    "UDHOLD $sq $evil"
    "AUTH 22222222222222222222222222222222 1 $evil $zero RECONNECT $sq $cq 99 1 2 $evil 0 0"
)
script="for q in \$(seq 17 40); do printf 'ROUTE %s\\n' \$q | nc -w 1 $agent; done >/dev/null 2>&1;"
for m in "${forged[@]}"; do
    script+=" printf 'ROUTE %s\\n%s\\n' $sq '$m' | nc -w 3 $agent | sed 's/^/VHA /' >/dev/console 2>&1;"
done
"$lab" exec "$c" "$script" --timeout 240 >/dev/null || fail "the forger did not run"
n=${#forged[@]}
vwait "$s" "VHP hotmig-verbs.*a peer's request refused: not an authenticated frame" $((n - 1)) 30 ||
    fail "the server's layer did not refuse every unauthenticated request"
vwait "$s" "VHP hotmig-verbs.*a peer's request refused: its MAC does not verify" 1 30 ||
    fail "the server's layer did not refuse the frame with a made-up MAC"
[ "$(vcount "$s" 'reconnected to its peer.s new QP 99')" = 0 ] ||
    fail "a forged RECONNECT was applied"
[ "$(vcount "$c" 'VHA CHALLENGE')" -ge "$n" ] || fail "the forger was not routed to the layer"

# the flood, then the client's guest moves through it
"$lab" exec "$c" "for i in \$(seq 1 100); do (sleep 40 | nc $agent >/dev/null 2>&1 &); done" \
    --timeout 120 >/dev/null || fail "the flood did not start"
sleep 2
[ "$(vcount "$c" 'VHP rc=')" = 0 ] || fail "the client ended before the move"
migrate "$c" "$A" "$B" "$tmp/m.json"
jq -e '.ok' "$tmp/m.json" >/dev/null || fail "the move of $c under the flood was not ok"
vwait "$c" 'VHP hotmig-verbs.*resumed on' 1 30 || fail "the client's layer did not resume"
vwait "$s" 'VHP hotmig-verbs.*reconnected to its peer' 1 30 ||
    fail "the server's layer did not reconnect"
[ "$(vcount "$s" 'reconnected to its peer.s new QP 99')" = 0 ] ||
    fail "a forged RECONNECT was applied"
vfinish VHP ibv_rc_pingpong "$iters" "$c" "$s" hostile=1
log "ok: forged requests refused, the move under a flood succeeded, the pingpong finished"
