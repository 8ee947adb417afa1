#!/bin/bash
# e2e-verbs-hostile-peer (issue 28): unmodified ibv_rc_pingpong under LD_PRELOAD=libhotmig-verbs.so
# between two lab guests (the job's key in both ranks' environment) while two attackers without
# the key, with busybox nc only, try what finding 1 did: a third guest on the same control
# segment (root there: it sees the segment's traffic) and an unprivileged user inside the
# server's guest. Each scans ROUTE over QPNs 17-40 (without a tag, and with a made-up one), then
# routes to the server's QP with its tag (the third guest as if it had read it off the segment,
# the user as if told: the test computes it from the key) and sends forged SUSPEND, RECONNECT
# (naming the client's QPN and a QP 99 at another GID), LOOKUP, KEYMAP, UDMAP, UDHOLD and a frame
# with a made-up MAC; the user also tries to read the route record and list the run directory.
# Then both flood the server's agent with 100 silent connections each, during which the client's
# guest migrates (its quiesce SUSPENDs the server through that agent). Asserts: every scan was
# answered NOROUTE (none routed), the record and the directory were not readable, the server's
# layer refused each forged request and said why, no QP was reconnected to QP 99, the migration
# succeeded and both layers reconnected, and both ends finish with their figures.
# Not covered here: a direct connection to the layer's socket by another user (busybox nc has no
# Unix sockets; verbs-peer-check-test's test_server_bounds).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
# enough iterations that the pingpong outlasts both attacks and the move on an idle machine
# (12 ms an iteration; 45-50 under load: vfinish waits 400 s after the move)
iters=${ITERS:-6000}
c=vhp-c
s=vhp-s
x=vud-c # the third guest: a name another test uses (no VF: the pool is not asked)
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vtrio "$c" "$s" "$x" vhp
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

# the attackers: no key, busybox nc
agent="198.51.100.$si 7475"
tag=$(vtag "$sq")
[ ${#tag} = 32 ] || fail "no route tag for QP $sq"
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
n=${#forged[@]}
script="for q in \$(seq 17 40); do printf 'ROUTE %s\\n' \$q | nc -w 1 $agent;"
script+=" printf 'ROUTE %s %s\\n' \$q ${zero:0:32} | nc -w 1 $agent; done 2>&1 | sed 's/^/SCAN /';"
for m in "${forged[@]}"; do
    script+=" printf 'ROUTE %s %s\\n%s\\n' $sq $tag '$m' | nc -w 3 $agent 2>&1 | sed 's/^/FORGED /';"
done
# attack GUEST OUT USER SCRIPT: SCRIPT in GUEST (as USER when not empty: an unprivileged user
# made for it), its output in OUT
attack() {
    local run="sh /tmp/hvx.sh"
    [ -z "${3:-}" ] || run="grep -q '^$3:' /etc/passwd 2>/dev/null || { echo '$3:x:4242:4242::/tmp:/bin/sh' >>/etc/passwd; echo '$3:x:4242:' >>/etc/group; }; su $3 -c 'sh /tmp/hvx.sh'"
    "$lab" exec "$1" "mkdir -p /tmp && chmod 1777 /tmp && echo $(printf '%s\n' "$4" | base64 -w0) | base64 -d >/tmp/hvx.sh && chmod 755 /tmp/hvx.sh && $run" \
        --timeout 300 >"$2" || fail "the attack from $1 ${3:+(user $3) }did not run"
}
user_script="cat /run/hotmig/verbs/qp-$sq 2>&1 | sed 's/^/READ /'; ls /run/hotmig/verbs 2>&1 | sed 's/^/LIST /'; $script"
attack "$x" "$tmp/third.out" "" "$script"
attack "$s" "$tmp/user.out" hvevil "$user_script"
for w in third user; do
    sed "s/^/  $w: /" "$tmp/$w.out" >&2
    [ "$(grep -c '^SCAN NOROUTE' "$tmp/$w.out")" -ge 48 ] || fail "$w: a ROUTE of the scan was not answered NOROUTE"
    ! grep -q '^SCAN ROUTED' "$tmp/$w.out" || fail "$w: a ROUTE without the key was routed"
    [ "$(grep -c '^FORGED CHALLENGE' "$tmp/$w.out")" -ge "$n" ] ||
        fail "$w: the forged requests did not reach the layer (routed with the tag)"
done
grep -q '^READ .*[Pp]ermission denied' "$tmp/user.out" || fail "the user could read the route record"
grep -q '^LIST .*[Pp]ermission denied' "$tmp/user.out" || fail "the user could list the run directory"
vwait "$s" "VHP hotmig-verbs.*a peer's request refused: not an authenticated frame" $((2 * (n - 1))) 30 ||
    fail "the server's layer did not refuse every unauthenticated request"
vwait "$s" "VHP hotmig-verbs.*a peer's request refused: its MAC does not verify" 2 30 ||
    fail "the server's layer did not refuse the frames with a made-up MAC"
[ "$(vcount "$s" 'reconnected to its peer.s new QP 99')" = 0 ] ||
    fail "a forged RECONNECT was applied"

# the floods, then the client's guest moves through them
# (no descriptor on the lab shell's port: it stays free for the next exec)
flood="for i in \$(seq 1 100); do ( (sleep 40 | nc $agent) </dev/null >/dev/null 2>&1 &); done"
"$lab" exec "$x" "$flood" --timeout 120 >/dev/null || fail "the third guest's flood did not start"
"$lab" exec "$s" "echo $(printf '%s\n' "$flood" | base64 -w0) | base64 -d >/tmp/hvf.sh && su hvevil -c 'sh /tmp/hvf.sh'" \
    --timeout 120 >/dev/null || fail "the user's flood did not start"
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
