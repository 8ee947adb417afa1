#!/bin/bash
# An alert about a host whose hotmigd is down (docs/alerts.md, "Who acts"): A's hotmigd is
# stopped (its libvirtd goes on), an Alertmanager webhook "evacuate A" reaches B's alert
# listener. B cannot forward it to A, so B acts for A: it evacuates A's guest to B, driving the
# migration itself over libvirt (A's hotmigd would drive it, but it does not answer).
# Asserts:
#   - B's log says it acts for A and migrates the guest "here" because A's hotmigd cannot be
#     reached; B's status shows the move done, driven here, with a report of one VF attached;
#   - the guest runs on B with its VF stand-in, the workload lost and corrupted no message and
#     its verbs traffic resumed after the move;
#   - one evacuation: a second firing of the same alert is merged on B;
#   - the resolved alert lifts A on B; A's hotmigd, started again, lists no schedule or move of
#     the guest (it was down).
# Prints "DEPUTY ..." with the figures.
source "$(dirname "$0")/lib.sh"
c=dp-c
s=dp-s
tmp=$(mktemp -d)
restart_a() { "$lab" restart-hotmigd A >/dev/null 2>&1 || echo "could not restart A's hotmigd" >&2; }
trap 'restart_a; cleanup; rm -rf "$tmp"' EXIT

for tool in curl jq; do
    command -v $tool >/dev/null || fail "$tool is not installed (apt-get install curl jq)"
done
conf=$("$lab" config)
state=$(dirname "$conf")
token=$(cat "$state/pki/alert-token") || fail "no alert token in $state/pki"
urlB=$("$lab" alerts B)
sock_b=$("$lab" hotmigd-socket B)
hmlogB=$state/hosts/B/hotmigd.log
mark=$(stat -c %s "$hmlogB")
newlog() { tail -c "+$((mark + 1))" "$hmlogB"; }
metric() { # metric 'name{label="value"}': B's value (0 when the family has no such sample);
    # fails, printing nothing, when /metrics cannot be read or lacks the family.
    local body v name=${1%%\{*}
    body=$(curl -fsS --max-time 10 "$urlB/metrics") || { echo "cannot read $urlB/metrics" >&2; return 1; }
    grep -q "^# TYPE $name " <<<"$body" || { echo "$urlB/metrics has no family $name" >&2; return 1; }
    v=$(grep -F "$1 " <<<"$body" | awk '{print $2}')
    echo "${v:-0}"
}
hook() { # hook STATUS: posts an "evacuate A" alert in that status to B's webhook; prints the HTTP code
    curl -sS --max-time 30 -o "$tmp/hook.out" -w '%{http_code}' -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' "$urlB/v1/alerts/alertmanager" -d "$(
            jq -cn --arg st "$1" '{version: "4", status: $st, alerts: [{status: $st,
                labels: {alertname: "HostFailurePredicted", host: "A", hotmig_action: "evacuate"},
                annotations: {summary: "e2e deputy: host A fails soon", deadline: "600s"},
                fingerprint: "e2e-deputy"}]}'
        )"
}

start_pair "$c" "$s" lazy 1
require_where "$c" A
has_vf "$c" "$A" || fail "$c has no VF on A"

"$lab" stop-hotmigd A >&2
t0=$(date +%s.%N)
code=$(hook firing)
[ "$code" = 200 ] || [ "$code" = 202 ] || fail "B's webhook answered $code: $(cat "$tmp/hook.out")"
wait_evacuation_started newlog A
newlog | grep -q "this host acts for it" || fail "B's log does not say it acts for A: $(newlog | tail -n 8)"

wait_moved "$c" B
t_moved=$(date +%s.%N)
wait_log newlog "evacuation done" || true
newlog | grep -q "Migrating '$c' from 'A' here: its hotmigd cannot be reached" ||
    fail "B's log does not say it drove the move itself: $(newlog | grep -i "$c" | tail -n 5)"
"$migrate_vm" status --socket "$sock_b" --json >"$tmp/all.json" 2>"$tmp/status.err" ||
    fail "migrate-vm status: $(cat "$tmp/status.err")"
id=$(jq -r '[.schedules[] | select(.kind == "drain" and .host == "A")] | last | .id' "$tmp/all.json")
"$migrate_vm" status "$id" --socket "$sock_b" --json >"$tmp/status.json" 2>"$tmp/status.err" ||
    fail "migrate-vm status $id: $(cat "$tmp/status.err")"
jq -e --arg c "$c" '[.. | objects | select(.vm? == $c and .from? == "A" and .to? == "B"
        and .state? == "done" and .driven_by? == "here" and .report.vfs_attached? == 1)] | length >= 1' \
    "$tmp/status.json" >/dev/null || fail "B's status has no move of $c driven here: $(cat "$tmp/status.json")"

# The same alert again: merged, no second evacuation.
merged0=$(metric 'hotmig_alerts_total{action="merged"}')
code=$(hook firing)
[ "$code" = 200 ] || [ "$code" = 202 ] || fail "B's webhook answered $code the second time"
[ "$(metric 'hotmig_alerts_total{action="merged"}')" -gt "$merged0" ] || fail "the second firing was not merged"
[ "$(newlog | grep -c "Evacuation .* of host 'A' started")" = 1 ] ||
    fail "B started more than one evacuation of A: $(newlog | grep Evacuation)"

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.lost == 0 and .corrupt == 0' >/dev/null || fail "messages lost or corrupt: $result"
echo "$result" | jq -e '(.cycles | length) == 1 and .cycles[0].delivered_after > 0 and .ok' >/dev/null ||
    fail "verbs traffic did not resume after the evacuation: $result"

# Resolved: B's book lifts A. A's hotmigd started again, B's next look at the cluster (a plan
# takes a fresh inventory) finds A ok.
code=$(hook resolved)
[ "$code" = 200 ] || [ "$code" = 202 ] || fail "B's webhook answered $code to the resolved alert"
P=$state/pki
book_b() {
    curl -sS --max-time 10 --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client-key.pem" \
        "$("$lab" hotmigd B)/v1/alerts"
}
[ "$(book_b | jq '[.hosts[] | select(.name == "A") | .alerts[]] | length')" = 0 ] ||
    fail "the resolved alert is still active on B: $(book_b)"
"$lab" restart-hotmigd A >&2
# A's hotmigd was down the whole time: it ran no migration and no schedule of $c.
"$migrate_vm" status --socket "$("$lab" hotmigd-socket A)" --json >"$tmp/status-a.json" 2>"$tmp/status.err" ||
    fail "migrate-vm status on A: $(cat "$tmp/status.err")"
jq -e --arg c "$c" '(.schedules | type) == "array" and ([.. | objects | select(.vm? == $c or .domain? == $c)] | length == 0)' \
    "$tmp/status-a.json" >/dev/null || fail "A's hotmigd lists a migration of $c it cannot have run: $(cat "$tmp/status-a.json")"
"$migrate_vm" plan consolidate --socket "$sock_b" --json >"$tmp/plan.json" 2>"$tmp/plan.err" ||
    fail "migrate-vm plan consolidate: $(cat "$tmp/plan.err")"
[ "$(book_b | jq -r '.hosts[] | select(.name == "A") | .state')" = ok ] ||
    fail "A is not ok at B once its hotmigd answers and its alert is resolved: $(book_b)"

echo "DEPUTY alert_to_moved_s=$(awk "BEGIN {printf \"%.1f\", $t_moved - $t0}")" \
    "evacuations=$(metric 'hotmig_alerts_total{action="evacuate"}') lost=$(echo "$result" | jq .lost)" \
    "blackout_ms=$(echo "$result" | jq .blackout_ms)"
log "ok: B acted for A (hotmigd down): $c moved to B over libvirt by B, 0 lost, merged, lifted"
