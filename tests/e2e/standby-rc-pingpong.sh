#!/bin/bash
# The standby path (issue 30) with unmodified ibv_rc_pingpong under LD_PRELOAD=libhotmig-verbs.so:
# both guests' agents run with --standby on their control NIC; the client's guest moves A->B.
# At each move the client's layer runs the connection over the standby devices (soft-RoCE on
# the control NICs) from its quiesce to its resume instead of pausing it, the server's layer
# follows (SWITCH) and comes back (RECONNECT). Asserts: every migrate-vm succeeds; at each
# move both layers switched, and both say the standby path carried sends and receives (the
# tool's iterations went on while the VF was away); the server's other end came back to its
# VF; both ends exit 0 with their figures; migrate-vm's JSON report shows the switch (prepare:
# >= 1 connection switched) and what the standby path carried (resume: sends and receives > 0),
# and at the move whose peer cannot follow >= 1 paused connection. Prints "STANDBY ..." with the
# mover's pause at the switch and at the switch back, what the standby path carried, and the
# report's figures.
# TOOL=srq: the same with unmodified ibv_srq_pingpong (4 RC QPs sharing one SRQ at each end):
# the server's SRQ gets a twin on its standby device and its receives follow once all 4 QPs
# switched (docs/design.md "Standby path").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
tool=${TOOL:-rc}
case $tool in
rc) prog="ibv_rc_pingpong" ;;
srq) prog="ibv_srq_pingpong -q 4" ;;
*) fail "TOOL must be rc or srq, not '$tool'" ;;
esac
c=vsb-c
s=vsb-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
# both agents again with --standby on their control NIC
for g in "$s" "$c"; do
    "$lab" wait "$g" 'agent started' --timeout 300 >/dev/null || fail "$g: no agent"
done
vagents_standby "$s" "$c"
gid_s=$(vgid "$s")
[ -n "$gid_s" ] || fail "$s printed no GID index"
env_s=$(venv "$c")
env_c=$(venv "$s")
# The iterations must outlast both moves, which carry traffic now: the count comes from a short
# run's rate (the lab's speed varies with its load), for about SECONDS of traffic (default 150)
vcalibrate "$c" "$s" "$prog -d rxe0 -g $gid_s" "198.51.100.$si" "$env_s" "$env_c" \
    "${SECONDS_OF_TRAFFIC:-110}" 500000 || fail "$vcal_err"
run="$prog -d rxe0 -g $gid_s -n $iters"
vtool "$s" VPP "$env_s $run"
sleep 1
vtool "$c" VPP "$env_c $run 198.51.100.$si"
vconnected "$c" 120 || fail "the pingpong did not connect"

# a phase's standby figure in move $1's JSON report ("standby" of phase $2, member $3; 0 when
# the phase has none)
sbfig() { jq -r --arg p "$2" --arg f "$3" '.phases[] | select(.name == $p) | .standby[$f] // 0' "$tmp/m$1.json"; }
sbphase() { jq -c --arg p "$2" '.phases[] | select(.name == $p) | {detail, standby}' "$tmp/m$1.json"; }

n=0
for move in "$A $B"; do
    read -r from to <<<"$move"
    n=$((n + 1))
    [ "$(vcount "$c" 'VPP rc=')" = 0 ] || fail "the client ended before move $n"
    migrate "$c" "$from" "$to" "$tmp/m$n.json"
    jq -e '.ok' "$tmp/m$n.json" >/dev/null || fail "move $n of $c not ok"
    vwait "$c" 'VPP hotmig-verbs.*switched [1-9][0-9]* of [0-9]+ QPs to the standby device' "$n" 30 ||
        fail "move $n: the client's layer did not switch to the standby device"
    vwait "$s" 'VPP hotmig-verbs.*switched to the standby device for its moving peer' "$n" 30 ||
        fail "move $n: the server's layer did not follow onto its standby device"
    vwait "$c" 'VPP hotmig-verbs.*resumed on' "$n" 30 || fail "move $n: the client did not resume"
    vwait "$s" 'VPP hotmig-verbs.*back on its own device; the standby path carried [1-9][0-9]* sends and [1-9][0-9]* receives' "$n" 30 ||
        fail "move $n: the server's end did not come back, or carried nothing over the standby path"
    vwait "$c" 'VPP hotmig-verbs.*the standby path carried [1-9][0-9]* sends and [1-9][0-9]* receives' "$n" 30 ||
        fail "move $n: the client's standby path carried nothing"
    [ "$(sbfig "$n" prepare switched)" -ge 1 ] ||
        fail "move $n: the report's prepare phase shows no connection switched: $(sbphase "$n" prepare)"
    [ "$(sbfig "$n" resume sends)" -gt 0 ] && [ "$(sbfig "$n" resume receives)" -gt 0 ] ||
        fail "move $n: the report's resume phase shows nothing carried over the standby path: $(sbphase "$n" resume)"
done
# A peer that cannot follow: the server's agent again without --standby (its process stays
# routed: the route records and its socket are the process's), the client moves back B->A: the
# server refuses SWITCH, that connection pauses as without the standby path, and goes on after
[ "$(vcount "$c" 'VPP rc=')" = 0 ] || fail "the client ended before move 2"
read -r _ sip <<<"$(vctl "$s")"
[ -n "$sip" ] || fail "$s: no control NIC"
vagent_restart "$s" --peer-listen "$sip:7475"
migrate "$c" "$B" "$A" "$tmp/m2.json"
jq -e '.ok' "$tmp/m2.json" >/dev/null || fail "move 2 of $c not ok"
vwait "$s" 'VPP hotmig-verbs.*QP [0-9]+ stays paused while its peer moves' 1 30 ||
    fail "move 2: the server's layer did not refuse the switch without a standby device"
vwait "$c" 'VPP hotmig-verbs.*QP [0-9]+ stays paused until the resume' 1 30 ||
    fail "move 2: the client's layer did not keep the refused connection paused"
[ "$(sbfig 2 prepare paused)" -ge 1 ] ||
    fail "move 2: the report's prepare phase shows no paused connection: $(sbphase 2 prepare)"
vwait "$c" 'VPP hotmig-verbs.*resumed on' 2 30 || fail "move 2: the client did not resume"
vwait "$s" 'VPP hotmig-verbs.*reconnected to its peer' 2 30 ||
    fail "move 2: the server's end did not reconnect"
[ "$(vcount "$c" 'VPP rc=')" = 0 ] ||
    fail "the client ended before the last move completed: more iterations are needed"
vfinish VPP "${prog%% *}" "$iters" "$c" "$s" "standby=1"
# one line: move 1 over the standby path (the client's pause at the switch and at the switch
# back, what the path carried), move 2 paused as without it (the peer could not follow); each
# with libvirt's downtime of that move
downtime() { jq -r '.phases[] | select(.name == "migrate") | .detail' "$tmp/m$1.json" | grep -o 'downtime [0-9]*' | cut -d' ' -f2; }
resumes=$(vlog "$c" VPP | grep -o 'resumed on .*sends were paused for [0-9]*' | grep -o '[0-9]*$')
echo "STANDBY move1_switch_pause_ms=$(vlog "$c" VPP | grep -o 'switched [0-9]* of [0-9]* QPs .* sends were paused for [0-9]*' | grep -o '[0-9]*$' | head -1)" \
    "move1_switch_back_pause_ms=$(sed -n 1p <<<"$resumes")" \
    "move1_carried=$(vlog "$c" VPP | grep -o 'QP [0-9]*: the standby path carried [0-9]* sends and [0-9]* receives' | awk '{print $7"/"$10}' | head -1)" \
    "move1_downtime_ms=$(downtime 1)" \
    "move2_paused_pause_ms=$(sed -n 2p <<<"$resumes")" "move2_downtime_ms=$(downtime 2)" \
    "report: move1_switched=$(sbfig 1 prepare switched) move1_paused=$(sbfig 1 prepare paused)" \
    "move1_switch_ms=$(sbfig 1 prepare ms) move1_carried=$(sbfig 1 resume sends)/$(sbfig 1 resume receives)" \
    "move1_switch_back_ms=$(sbfig 1 resume ms) move2_switched=$(sbfig 2 prepare switched)" \
    "move2_paused=$(sbfig 2 prepare paused)"
log "ok: ${prog%% *} kept running over the standby path across a migration, and paused at a second whose peer could not follow"
