#!/bin/bash
# The failure-prediction hook end to end (docs/alerts.md): a real Prometheus Alertmanager on
# loopback whose webhook receiver points at both hosts' alert listeners with the lab's bearer
# token. An alert "host A will fail" is posted to Alertmanager with amtool; Alertmanager fires
# it at both hotmigds: A's applies it and evacuates its VMs to B, B's forwards its copy to A,
# where it merges. A guest on A runs the RDMA ping-pong with its peer on B.
# Asserts:
#   - bad input through curl (no token, a wrong one, malformed JSON, an unknown host, over
#     1 MiB) is refused with 401, 400, 422, 413 and changes nothing (A's book, its counters);
#   - the guest ends on B with its VF, the workload lost and corrupted no message, and its
#     traffic resumed after the move;
#   - one evacuation: A's /metrics counts evacuate 1 and merged >= 1 (B's copy, Alertmanager's
#     repeats, a second firing of the same alert), its log says "started" once;
#   - the alert resolved in Alertmanager lifts A's quarantine.
# Prints the figures as "ALERTMANAGER ...".
source "$(dirname "$0")/lib.sh"
c=am-c
s=am-s
tmp=$(mktemp -d)
am_pid=
trap '[ -z "$am_pid" ] || { kill "$am_pid" 2>/dev/null; wait "$am_pid" 2>/dev/null; }; cleanup; rm -rf "$tmp"' EXIT

for tool in prometheus-alertmanager amtool curl jq; do
    command -v $tool >/dev/null || fail "$tool is not installed (apt-get install prometheus-alertmanager curl jq)"
done
conf=$("$lab" config)
state=$(dirname "$conf")
token=$(cat "$state/pki/alert-token") || fail "no alert token in $state/pki (lab too old? hotmig-lab down && up)"
urlA=$("$lab" alerts A)
urlB=$("$lab" alerts B)
P=$state/pki
mtls=(curl -sS --max-time 10 --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client-key.pem")
hmlogA=$state/hosts/A/hotmigd.log
mark=$(stat -c %s "$hmlogA")

metric() { # metric URL 'name{label="value"}': its value (0 when the family has no such sample);
    # fails, printing nothing, when /metrics cannot be read or lacks the family.
    local body v name=${2%%\{*}
    body=$(curl -fsS --max-time 10 "$1/metrics") || { echo "cannot read $1/metrics" >&2; return 1; }
    grep -q "^# TYPE $name " <<<"$body" || { echo "$1/metrics has no family $name" >&2; return 1; }
    v=$(grep -F "$2 " <<<"$body" | awk '{print $2}')
    echo "${v:-0}"
}
book() { # book A|B: the alerts hotmigd of that host holds, as JSON
    "${mtls[@]}" "$("$lab" hotmigd "$1")/v1/alerts"
}
hook() { # hook URL [curl args]: POST to the webhook with the token; body, then the status
    local url=$1
    shift
    curl -sS --max-time 30 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -w '\n%{http_code}\n' "$@" "$url/v1/alerts/alertmanager"
}
status_of() { tail -n 1 <<<"$1"; }
newlog() { tail -c "+$((mark + 1))" "$hmlogA"; }

# ---- bad input changes nothing ---------------------------------------------------------------
[ "$(metric "$urlA" 'hotmig_alerts_total{action="evacuate"}')" = 0 ] || fail "A has evacuated before"
before=$(book A) || fail "GET /v1/alerts on A's hotmigd failed"
[ "$(jq '[.hosts[].alerts[]] | length' <<<"$before")" = 0 ] || fail "A's book is not empty: $before"
good='{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"Probe","host":"A","hotmig_action":"evacuate"},"annotations":{},"fingerprint":"probe"}]}'
out=$(curl -sS -w '\n%{http_code}\n' -d "$good" "$urlA/v1/alerts/alertmanager")
[ "$(status_of "$out")" = 401 ] || fail "no token: $out"
out=$(curl -sS -w '\n%{http_code}\n' -H "Authorization: Bearer wrong-$token" -d "$good" "$urlA/v1/alerts/alertmanager")
[ "$(status_of "$out")" = 401 ] && grep -q "wrong bearer token" <<<"$out" || fail "wrong token: $out"
out=$(hook "$urlA" -d '{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"X","host":"A"}}]}')
[ "$(status_of "$out")" = 400 ] && grep -qF "webhook: alerts[0].labels.hotmig_action: missing (and no labels.severity)" <<<"$out" ||
    fail "malformed: $out"
out=$(hook "$urlA" -d '{"alerts": [}')
[ "$(status_of "$out")" = 400 ] && grep -q "webhook: not JSON" <<<"$out" || fail "not JSON: $out"
out=$(hook "$urlA" -d "${good//\"host\":\"A\"/\"host\":\"hm-lab-z\"}")
[ "$(status_of "$out")" = 422 ] && grep -qF "host 'hm-lab-z' is not one of the cluster's hosts (the [host NAME] groups: A, B)" <<<"$out" ||
    fail "unknown host: $out"
head -c $((1024 * 1024 + 100)) /dev/zero | tr '\0' ' ' >"$tmp/big"
out=$(hook "$urlA" --data-binary "@$tmp/big")
[ "$(status_of "$out")" = 413 ] || fail "oversized: $out"
after=$(book A)
[ "$after" = "$before" ] || fail "refused requests changed A's book: $after"
for a in quarantine evacuate lift none merged ignored forwarded; do
    [ "$(metric "$urlA" "hotmig_alerts_total{action=\"$a\"}")" = 0 ] || fail "a refused request counted as $a"
done
log "bad input: 401 (no token, wrong token), 400 (malformed, not JSON), 422 (unknown host), 413 (oversized); nothing changed"

# ---- the guest: RDMA ping-pong, the client on A -------------------------------------------------
start_pair "$c" "$s" lazy 1
has_vf "$c" "$A" || fail "$c has no VF on A"
require_where "$c" A

# ---- Alertmanager on loopback ----------------------------------------------------------------------
am_port=$((19093 + 10 * ${HOTMIG_LAB_INSTANCE:-0}))
while ss -Hltn "sport = :$am_port" | grep -q .; do am_port=$((am_port + 1)); done
am=http://127.0.0.1:$am_port
cat >"$tmp/am.yml" <<EOF
# Alertmanager for the e2e test: one route, fast grouping; repeats every 5 s so that a firing
# alert keeps arriving (hotmigd merges it).
route:
  receiver: hotmig
  group_by: [host]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 5s
receivers:
  - name: hotmig
    webhook_configs:
      - url: $urlA/v1/alerts/alertmanager
        send_resolved: true
        http_config:
          authorization:
            credentials: $token
      - url: $urlB/v1/alerts/alertmanager
        send_resolved: true
        http_config:
          authorization:
            credentials: $token
EOF
mkdir -p "$tmp/am-data"
prometheus-alertmanager --config.file="$tmp/am.yml" --storage.path="$tmp/am-data" \
    --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$tmp/am.log" 2>&1 &
am_pid=$!
for _ in $(seq 1 100); do
    curl -sf "$am/-/ready" >/dev/null 2>&1 && break
    kill -0 "$am_pid" 2>/dev/null || fail "Alertmanager exited: $(tail -n 20 "$tmp/am.log")"
    sleep 0.1
done
curl -sf "$am/-/ready" >/dev/null || fail "Alertmanager not ready on $am: $(tail -n 20 "$tmp/am.log")"
log "Alertmanager $(prometheus-alertmanager --version 2>&1 | head -n 1 | awk '{print $3}') on $am"

# ---- the alert -------------------------------------------------------------------------------------
t0=$(date +%s.%N)
amtool --alertmanager.url="$am" alert add HostFailurePredicted host=A hotmig_action=evacuate \
    --annotation=deadline=600s --annotation=summary="e2e: host A fails soon" ||
    fail "amtool alert add failed"
wait_evacuation_started newlog A
t_start=$(date +%s.%N)
newlog | grep "Alert from alertmanager" | head -n 3 >&2

# The guest leaves A for B.
wait_moved "$c" B
t_moved=$(date +%s.%N)
"$lab" wait "$c" 'HMWL .*"event":"resumed".*"cycle":1' --timeout 120 >/dev/null || fail "no resume after the evacuation"
wait_log newlog "evacuation done" || true

# ---- the same alert again: merged -------------------------------------------------------------------
amtool --alertmanager.url="$am" alert add HostFailurePredicted host=A hotmig_action=evacuate \
    --annotation=deadline=600s --annotation=summary="e2e: host A fails soon (again)" ||
    fail "amtool alert add (again) failed"
merged0=$(metric "$urlA" 'hotmig_alerts_total{action="merged"}')
for _ in $(seq 1 100); do
    [ "$(metric "$urlA" 'hotmig_alerts_total{action="merged"}')" -gt "$merged0" ] && break
    sleep 0.2
done
merged=$(metric "$urlA" 'hotmig_alerts_total{action="merged"}')
[ "$merged" -gt "$merged0" ] || fail "the second firing was not merged on A (merged $merged)"
evacuations=$(metric "$urlA" 'hotmig_alerts_total{action="evacuate"}')
[ "$evacuations" = 1 ] || fail "A counts $evacuations evacuations, expected 1"
[ "$(newlog | grep -c "Evacuation .* of host 'A' started")" = 1 ] ||
    fail "A's log says more than one evacuation started: $(newlog | grep "Evacuation")"
forwarded=$(metric "$urlB" 'hotmig_alerts_total{action="forwarded"}')
[ "$forwarded" -ge 1 ] || fail "B forwarded nothing to A"
[ "$(metric "$urlB" 'hotmig_alerts_total{action="evacuate"}')" = 0 ] || fail "B evacuated too"
[ "$(book A | jq -r '.hosts[] | select(.name == "A") | .state')" != ok ] || fail "A is not held after the alert"

# ---- the workload ------------------------------------------------------------------------------------
result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.lost == 0' >/dev/null || fail "messages lost: $result"
echo "$result" | jq -e '.corrupt == 0' >/dev/null || fail "messages corrupt: $result"
echo "$result" | jq -e '(.cycles | length) == 1 and .cycles[0].delivered_after > 0' >/dev/null ||
    fail "verbs traffic did not resume after the evacuation: $result"
echo "$result" | jq -e '.ok and .received > 0' >/dev/null || fail "workload not ok: $result"

# ---- resolved: lifted ---------------------------------------------------------------------------------
amtool --alertmanager.url="$am" alert add HostFailurePredicted host=A hotmig_action=evacuate \
    --annotation=deadline=600s --end="$(date -u +%Y-%m-%dT%H:%M:%SZ)" || fail "amtool (resolve) failed"
for _ in $(seq 1 100); do
    [ "$(book A | jq -r '.hosts[] | select(.name == "A") | .state')" = ok ] && break
    sleep 0.2
done
[ "$(book A | jq -r '.hosts[] | select(.name == "A") | .state')" = ok ] ||
    fail "the resolved alert did not lift A: $(book A)"
[ "$(metric "$urlA" 'hotmig_alerts_total{action="lift"}')" -ge 1 ] || fail "no lift counted"

curl -sS "$urlA/metrics" | grep -E '^hotmig_(alerts_total|hosts|migrations_total)' | tr '\n' ' ' >&2
echo >&2
echo "ALERTMANAGER alert_to_evacuation_s=$(awk "BEGIN {printf \"%.1f\", $t_start - $t0}") alert_to_moved_s=$(awk "BEGIN {printf \"%.1f\", $t_moved - $t0}")" \
    "evacuations=$evacuations merged=$merged forwarded_by_B=$forwarded" \
    "lost=$(echo "$result" | jq .lost) blackout_ms=$(echo "$result" | jq .blackout_ms)"
log "ok: one evacuation of A ($c to B, 0 lost), the rest merged, lifted when resolved"
