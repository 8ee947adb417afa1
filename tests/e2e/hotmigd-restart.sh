#!/bin/bash
# A hotmigd killed in the middle of a migration it runs (issue 15, item 8): A's hotmigd drains
# A (asked of A's own local socket, so A runs the schedule and drives the move); when the move's
# journal says 'migrate' (the guest quiesced, its VF unplugged, the libvirt job running) A's
# hotmigd is killed with SIGKILL and started again. The new hotmigd recovers the journal at its
# start, as `migrate-vm --recover` would.
# Asserts: A's log says it recovered the domain at the start (rolled back or finished); the
# journal is gone; the guest runs on exactly one host with its VF stand-in; every quiesce of
# the workload was followed by a resume, the workload lost and corrupted no message and its
# verbs traffic resumed; a `migrate-vm --recover` after that finds nothing to do.
# Prints "HOTMIGD-RESTART ..." with the outcome.
source "$(dirname "$0")/lib.sh"
c=hr-c
s=hr-s
tmp=$(mktemp -d)
conf=$("$lab" config)
state=$(dirname "$conf")
# A's hotmigd runs again whatever happened (the next test needs it).
a_alive() { kill -0 "$(cat "$state/hosts/A/hotmigd.pid" 2>/dev/null || echo 0)" 2>/dev/null; }
restart_a() { "$lab" restart-hotmigd A >/dev/null 2>&1 || echo "could not restart A's hotmigd" >&2; }
trap 'a_alive || restart_a; cleanup; rm -rf "$tmp"' EXIT

sock_a=$("$lab" hotmigd-socket A)
hmlogA=$state/hosts/A/hotmigd.log
journal=$state/hosts/A/hotmigd/state/journal/$c.journal
[ -S "$sock_a" ] || fail "A's hotmigd has no local socket at $sock_a (is hotmigd built?)"

start_pair "$c" "$s" lazy 0 "--max-seconds 300"
require_where "$c" A
has_vf "$c" "$A" || fail "$c has no VF on A"

log "migrate-vm drain A (asked of A's hotmigd), SIGKILL to A's hotmigd in the migrate phase"
mark=$(stat -c %s "$hmlogA")
newlog() { tail -c "+$((mark + 1))" "$hmlogA"; }
cmark=$("$lab" mark "$c")
"$migrate_vm" drain A --socket "$sock_a" --reason "e2e hotmigd restart" --json >"$tmp/drain.json" \
    2>"$tmp/drain.err" || fail "migrate-vm drain A: $(cat "$tmp/drain.err")"
if ! timeout 120 bash -c "until grep -qE '\"event\" *: *\"migrate\"' '$journal' 2>/dev/null; do sleep 0.02; done"; then
    newlog | tail -n 20 >&2
    fail "the move of $c never reached its migrate phase (journal $journal)"
fi
pid=$(cat "$state/hosts/A/hotmigd.pid")
kill -9 "$pid"
log "A's hotmigd (pid $pid) killed; the journal says: $(grep -oE '"event" *: *"[a-z-]+"' "$journal" | tr '\n' ' ')"
for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[ -f "$journal" ] || fail "the journal of $c is gone although hotmigd was killed mid-migration"

mark=$(stat -c %s "$hmlogA")
"$lab" restart-hotmigd A >&2 || fail "A's hotmigd did not start again"
timeout 180 bash -c "until tail -c +$((mark + 1)) '$hmlogA' | grep -q \"Recovery of domain '$c' at the start: \"; do sleep 0.2; done" ||
    fail "A's hotmigd did not recover $c at its start: $(newlog | tail -n 10)"
line=$(newlog | grep "Recovery of domain '$c' at the start: " | tail -n 1)
echo "$line" >&2
outcome=$(sed -E "s/.*at the start: ([a-z ]+),? .*/\1/" <<<"$line")
case "$outcome" in
"rolled back" | finished) ;;
*) fail "recovery at the start of A's hotmigd: '$line'" ;;
esac
[ ! -f "$journal" ] || fail "the journal of $c is still there after the recovery"

sleep 2 # an unplug the killed hotmigd asked for completes asynchronously (~0.5 s)
now=$("$lab" where "$c") || fail "$c runs nowhere after the recovery"
[ "$now" = A ] || [ "$now" = B ] || fail "$c is not on exactly one host: '$now'"
has_vf "$c" "$("$lab" uri "$now")" || fail "$c has no VF on $now after the recovery"

# The workload: resumed after its quiesce.
console=$("$lab" console "$c")
timeout 60 bash -c "until [ \$(tail -c +$((cmark + 1)) '$console' | grep -ac 'HMWL .*\"event\":\"resumed\".*\"side\":\"local\"') -ge \$(tail -c +$((cmark + 1)) '$console' | grep -ac 'HMWL .*\"event\":\"quiesced\".*\"side\":\"local\"') ]; do sleep 0.2; done" ||
    fail "the workload of $c was not resumed after the recovery"
q=$(tail -c +"$((cmark + 1))" "$console" | grep -ac 'HMWL .*"event":"quiesced".*"side":"local"' || true)
[ "$q" -eq 1 ] || fail "$q quiesces of the workload, expected 1 (the move's)"

# Nothing left for migrate-vm --recover (hotmigd's state directory is the one it shares).
HOTMIG_STATE_DIR=$state/hosts/A/hotmigd/state "$migrate_vm" --recover "$c" --json >"$tmp/rec.json" 2>"$tmp/rec.err" ||
    [ "$(jq -r '.[0].outcome' "$tmp/rec.json" 2>/dev/null)" = "nothing to do" ] ||
    fail "migrate-vm --recover after hotmigd's: $(cat "$tmp/rec.json" "$tmp/rec.err")"
jq -e '.[0].outcome == "nothing to do"' "$tmp/rec.json" >/dev/null ||
    fail "migrate-vm --recover found something left: $(cat "$tmp/rec.json")"

stopped=0
for _ in 1 2 3; do
    "$lab" exec "$c" 'kill -USR1 $(pidof hm-pingpong)' --timeout 20 >/dev/null 2>&1 && { stopped=1; break; }
done
((stopped)) || log "cannot reach $c's shell to stop the workload: waiting for its limit"
result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.lost == 0 and .corrupt == 0' >/dev/null || fail "messages lost or corrupt: $result"
echo "$result" | jq -e '[.cycles[] | .resumed and .delivered_after > 0] | all' >/dev/null ||
    fail "traffic did not resume after the recovery: $result"

echo "HOTMIGD-RESTART outcome='$outcome' on=$now $(echo "$result" | jq -c '{sent,received,lost,corrupt}')"
log "ok: $c recovered by A's restarted hotmigd ($outcome), on $now with its VF"
