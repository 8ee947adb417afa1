#!/bin/bash
# The failure-prediction hook of two real hotmigds, A and B, on 127.0.0.1 with a throwaway PKI
# (tests/unit/test-pki.sh) and two stand-ins each; curl, socat and a predictor script as the
# inputs (docs/alerts.md). No lab, no evacuation (the cmocka test alerts-daemon-test covers
# acting on the book with fakes); about 15 s.
#   - the webhook: no token, a wrong token, another scheme: 401 and nothing changes; a body
#     that is not JSON or misses a field: 400 naming it; an unknown host: 422 naming it,
#     nothing of the body applied; over 1 MiB: 413; no Content-Length: 411; other paths and
#     methods: 404, 405;
#   - an alert about A at A: quarantined; the same again: merged; resolved: lifted;
#   - an alert about B at A: forwarded to B, which applies it (A counts "forwarded");
#   - B stopped: an alert about B at A is applied by A, the first host in configuration order
#     whose hotmigd answers;
#   - /v1/alerts of the mutual-TLS API: 409 for another host without deputy, 422, 400;
#   - the Unix socket (mode 0600): accepted, merged, ignored, error, forwarded, one reply line
#     per event;
#   - the command: run with the host's name, its lines applied; one that hangs is killed at
#     exec-interval, with what it started; one that fails is logged with its standard error;
#   - /metrics in the text format, counting all of the above;
#   - the blast radius: with [alerts] max-unavailable = 1, 200 webhook bodies at once, each naming
#     both hosts: every body answered, B held back, never two hosts quarantined; the local API
#     and a plan (a fresh inventory) answer during the burst.
#
#   hotmigd-alerts-test.sh HOTMIGD SOURCE_DIR
set -uo pipefail
hotmigd=$1
src=$2
tmp=$(mktemp -d /tmp/hm-alerts-test.XXXXXX)
declare -A pid=() port=() aport=()
cleanup() {
    local h
    for h in "${!pid[@]}"; do
        [ -z "${pid[$h]}" ] || { kill "${pid[$h]}" 2>/dev/null; wait "${pid[$h]}" 2>/dev/null; }
    done
    [ -n "${KEEP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    local h
    echo "hotmigd-alerts-test: FAIL: $*" >&2
    for h in A B; do
        [ -f "$tmp/$h.log" ] && { echo "--- hotmigd $h log" >&2; tail -n 25 "$tmp/$h.log" >&2; }
    done
    exit 1
}
log() { echo "hotmigd-alerts-test: $(date +%T.%N | cut -c1-12) $*" >&2; }
for tool in curl jq socat ss; do
    command -v $tool >/dev/null || fail "$tool is not installed (tests/install-deps)"
done

bash "$src/tests/unit/test-pki.sh" "$tmp/pki" || fail "test-pki.sh failed: $(cat "$tmp/pki/openssl.log")"
pki=$tmp/pki
for i in 0 1; do mkdir -p "$tmp/sys/class/net/hmt$i"; done
printf 'alert-token-%s\n' "$$" >"$tmp/token"
chmod 600 "$tmp/token"
token=$(head -n 1 "$tmp/token")

# Free TCP ports on 127.0.0.1, each another: 24000-31999, below the kernel's ephemeral range
# (a client connection's local port there made a bind fail now and then) and above the lab's
# ports, and used by no socket at all.
next_port=$((24000 + ($$ % 8000)))
free_port() { # free_port VAR: sets VAR
    while ss -Htan "sport = :$next_port" | grep -q .; do next_port=$((next_port + 1)); done
    printf -v "$1" %s "$next_port"
    next_port=$((next_port + 1))
}
for h in A B; do
    free_port "port[$h]"
    free_port "aport[$h]"
done

# The predictor A runs: it says which host it was run for, then does what the files say.
cat >"$tmp/predictor.sh" <<EOF
#!/bin/sh
echo "\$1" >"$tmp/predictor.host"
[ -e "$tmp/hang" ] && sleep 60.$$
[ -e "$tmp/predict" ] && cat "$tmp/predict"
[ -e "$tmp/fail" ] && { echo "sensor unreadable" >&2; exit 3; }
exit 0
EOF
chmod +x "$tmp/predictor.sh"

# Each host's hotmigd presents its own client certificate, named by its [host] identity (the
# tests' curl uses A's: client.pem).
declare -A ccert=([A]=client [B]=peer2)

write_config() {
    local h=$1
    mkdir -p "$tmp/$h/run"
    cat >"$tmp/$h.conf" <<EOF
[migrate]
client-cert = $pki/${ccert[$h]}.pem
client-key = $pki/${ccert[$h]}-key.pem
ca-cert = $pki/ca.pem

[hotmigd]
name = $h
listen = 127.0.0.1
port = ${port[$h]}
server-cert = $pki/server.pem
server-key = $pki/server-key.pem
ca-cert = $pki/ca.pem
run-dir = $tmp/$h/run
state-dir = $tmp/$h/state
socket = $tmp/$h/run/hotmigd.sock
sysfs-root = $tmp/sys
connect = test:///default

[pool]
standins = hmt0, hmt1

[alerts]
listen = 127.0.0.1
port = ${aport[$h]}
token-file = $tmp/token
socket = $tmp/$h/alerts.sock
min-confidence = 60
max-unavailable = ${maxu:-2}
$([ "$h" = A ] && echo "exec = $tmp/predictor.sh" && echo "exec-interval = 2")

[host A]
uri = test:///default
hotmigd = https://127.0.0.1:${port[A]}
identity = hotmig-test-client

[host B]
uri = test:///default
hotmigd = https://127.0.0.1:${port[B]}
identity = node02.test
EOF
}

start() {
    local h=$1 i
    write_config "$h"
    "$hotmigd" --config "$tmp/$h.conf" >>"$tmp/$h.log" 2>&1 &
    pid[$h]=$!
    for i in $(seq 1 100); do
        grep -q "listening on https://127.0.0.1:${port[$h]} " "$tmp/$h.log" && return 0
        kill -0 "${pid[$h]}" 2>/dev/null || break
        sleep 0.1
    done
    fail "hotmigd $h did not start"
}

stop() {
    local h=$1 rc
    kill -TERM "${pid[$h]}" 2>/dev/null
    wait "${pid[$h]}"
    rc=$?
    pid[$h]=
    [ "$rc" -eq 0 ] || fail "hotmigd $h exited $rc on SIGTERM, expected 0"
}

# hook HOST [curl args...] : POST to HOST's webhook with the token; body then status.
hook() {
    local h=$1
    shift
    curl -sS --max-time 20 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -w '\n%{http_code}\n' "$@" "http://127.0.0.1:${aport[$h]}/v1/alerts/alertmanager"
}

# expect STATUS OUTPUT: OUTPUT's last line is STATUS; prints the rest.
expect() {
    local want=$1 out=$2
    [ "$(tail -n 1 <<<"$out")" = "$want" ] || fail "answered $(tail -n 1 <<<"$out"), expected $want: $out"
    sed '$d' <<<"$out"
}

# webhook BODY: one alert, Alertmanager's way; $1 labels, $2 status, $3 fingerprint.
webhook() {
    echo "{\"version\":\"4\",\"status\":\"$2\",\"receiver\":\"hotmig\",\"alerts\":[{\"status\":\"$2\",\"labels\":{$1},\"annotations\":{\"deadline\":\"600s\"},\"startsAt\":\"2026-01-01T00:00:00Z\",\"endsAt\":\"0001-01-01T00:00:00Z\",\"fingerprint\":\"$3\"}]}"
}

metric() { # metric HOST 'name{label="value"}': its value
    curl -sS --max-time 10 "http://127.0.0.1:${aport[$1]}/metrics" | grep -F "$2 " | awk '{print $2}'
}

expect_metric() { # expect_metric HOST SAMPLE VALUE
    local got
    got=$(metric "$1" "$2")
    [ "$got" = "$3" ] || fail "$1: $2 is '$got', expected $3"
}

tls_alerts() { # tls_alerts HOST [curl args]: /v1/alerts of the mutual-TLS API, body then status
    local h=$1
    shift
    curl -sS --max-time 10 --cacert "$pki/ca.pem" --cert "$pki/client.pem" --key "$pki/client-key.pem" \
        -w '\n%{http_code}\n' "$@" "https://127.0.0.1:${port[$h]}/v1/alerts"
}

start B
start A
grep -q "Alerts for A: webhook and /metrics on http://127.0.0.1:${aport[A]}, socket '$tmp/A/alerts.sock', command '$tmp/predictor.sh'" "$tmp/A.log" ||
    fail "A does not say where its alert inputs are"
log "A: hotmigd ${port[A]}, alerts ${aport[A]}; B: hotmigd ${port[B]}, alerts ${aport[B]}"

# ---- /metrics ----------------------------------------------------------------------------------
curl -sS -D "$tmp/metrics.h" "http://127.0.0.1:${aport[A]}/metrics" >"$tmp/metrics" || fail "GET /metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/metrics.h" || fail "/metrics content type: $(cat "$tmp/metrics.h")"
for want in '# TYPE hotmig_migrations_total counter' 'hotmig_migrations_total{result="ok"} 0' \
    '# TYPE hotmig_phase_duration_seconds summary' 'hotmig_phase_duration_seconds_count{phase="migrate"} 0' \
    'hotmig_vf_leases{state="free"} 2' 'hotmig_hosts{state="ok"} 2' 'hotmig_alerts_total{action="evacuate"} 0'; do
    grep -qxF "$want" "$tmp/metrics" || fail "/metrics lacks '$want': $(cat "$tmp/metrics")"
done

# ---- the token ----------------------------------------------------------------------------------
body=$(webhook '"alertname":"HostFailurePredicted","host":"A","hotmig_action":"quarantine"' firing fpA1)
url=http://127.0.0.1:${aport[A]}/v1/alerts/alertmanager
out=$(curl -sS -D "$tmp/h" -w '\n%{http_code}\n' -d "$body" "$url")
expect 401 "$out" | grep -q "not authorized: no Authorization header" || fail "no token: $out"
grep -qi '^www-authenticate: Bearer' "$tmp/h" || fail "401 without WWW-Authenticate: Bearer"
out=$(curl -sS -w '\n%{http_code}\n' -H "Authorization: Bearer ${token}x" -d "$body" "$url")
expect 401 "$out" | grep -q "wrong bearer token" || fail "wrong token: $out"
out=$(curl -sS -w '\n%{http_code}\n' -H "Authorization: Bearer ${token:0:5}" -d "$body" "$url")
expect 401 "$out" >/dev/null
out=$(curl -sS -w '\n%{http_code}\n' -u "user:$token" -d "$body" "$url")
expect 401 "$out" | grep -q "is not 'Bearer TOKEN'" || fail "basic auth: $out"
expect_metric A 'hotmig_alerts_total{action="quarantine"}' 0
[ "$(expect 200 "$(tls_alerts A)" | jq '[.hosts[].alerts[]] | length')" = 0 ] || fail "refused requests changed A's book"
log "webhook without a token, with a wrong one, with basic auth: 401, nothing changed"

# ---- bad bodies -----------------------------------------------------------------------------------
out=$(hook A -d '{"alerts": [')
expect 400 "$out" | grep -q '"webhook: not JSON' || fail "not JSON: $out"
out=$(hook A -d '{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"X"}}]}')
expect 400 "$out" | grep -qF 'webhook: alerts[0].labels.instance: missing (and no labels.host)' || fail "missing host: $out"
two=$(jq -c '.alerts += [.alerts[0] | .labels.host = "C" | .fingerprint = "fpC"]' <<<"$body")
out=$(hook A -d "$two")
expect 422 "$out" | grep -qF "webhook: alerts[1]: host 'C' is not one of the cluster's hosts (the [host NAME] groups: A, B): nothing of the body was applied" ||
    fail "unknown host: $out"
head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$tmp/big"
out=$(hook A --data-binary "@$tmp/big")
expect 413 "$out" | grep -q "more than the limit of 1048576" || fail "oversized: $out"
out=$(hook A -H 'Transfer-Encoding: chunked' -d "$body")
expect 411 "$out" >/dev/null
out=$(curl -sS -w '\n%{http_code}\n' "$url")
expect 405 "$out" >/dev/null
out=$(curl -sS -w '\n%{http_code}\n' "http://127.0.0.1:${aport[A]}/alert")
expect 404 "$out" >/dev/null
expect_metric A 'hotmig_alerts_total{action="rejected"}' 3
expect_metric A 'hotmig_hosts{state="ok"}' 2
[ "$(expect 200 "$(tls_alerts A)" | jq '[.hosts[].alerts[]] | length')" = 0 ] || fail "refused bodies changed A's book"
log "webhook: 400 naming the field, 422 naming the host, 413, 411, 405, 404; nothing changed"

# ---- good alerts at A ---------------------------------------------------------------------------------
out=$(expect 200 "$(hook A -d "$body")")
[ "$(jq -r '.results[0] | "\(.result) \(.actor) \(.action) \(.state)"' <<<"$out")" = "accepted A quarantine quarantined" ] ||
    fail "quarantine alert: $out"
out=$(expect 200 "$(hook A -d "$body")")
[ "$(jq -r '.results[0] | "\(.result) \(.action)"' <<<"$out")" = "merged none" ] || fail "repeat: $out"
expect_metric A 'hotmig_alerts_total{action="quarantine"}' 1
expect_metric A 'hotmig_alerts_total{action="merged"}' 1
expect_metric A 'hotmig_hosts{state="quarantined"}' 1
[ "$(expect 200 "$(tls_alerts A)" | jq -r '.hosts[] | select(.name == "A") | "\(.state) \(.alerts[0].key)"')" = "quarantined fpA1" ] ||
    fail "A's book: $(tls_alerts A)"
resolved=$(webhook '"alertname":"HostFailurePredicted","host":"A","hotmig_action":"quarantine"' resolved fpA1)
out=$(expect 200 "$(hook A -d "$resolved")")
[ "$(jq -r '.results[0] | "\(.result) \(.action) \(.state)"' <<<"$out")" = "accepted lift ok" ] || fail "resolved: $out"
log "A at A: quarantined, the repeat merged, resolved: lifted"

# ---- an alert about B at A: B applies it ---------------------------------------------------------------
bodyB=$(webhook '"alertname":"DiskFailing","instance":"B:9100","severity":"warning"' firing fpB1)
out=$(expect 200 "$(hook A -d "$bodyB")")
[ "$(jq -r '.results[0] | "\(.result) \(.actor) \(.action) \(.state)"' <<<"$out")" = "accepted B quarantine quarantined" ] ||
    fail "B's alert at A: $out"
expect_metric A 'hotmig_alerts_total{action="forwarded"}' 1
expect_metric B 'hotmig_alerts_total{action="quarantine"}' 1
expect_metric A 'hotmig_hosts{state="quarantined"}' 1 # as B said
[ "$(expect 200 "$(tls_alerts B)" | jq -r '.hosts[] | select(.name == "B") | .state')" = quarantined ] || fail "B's book"
[ "$(expect 200 "$(tls_alerts A)" | jq '[.hosts[] | select(.name == "B") | .alerts[]] | length')" = 0 ] ||
    fail "A applied B's alert itself"
grep -q "forwarded to the hotmigd of 'B': accepted" "$tmp/A.log" || fail "A does not log the forward"
log "B's alert at A: forwarded, applied by B"

# ---- /v1/alerts of the mutual-TLS API ------------------------------------------------------------------
ev='"host":"A","severity":"quarantine","key":"direct"'
out=$(tls_alerts B -H 'Content-Type: application/json' -d "{\"from\":\"A\",\"deputy\":false,$ev}")
expect 409 "$out" | grep -q "this is the hotmigd of 'B', not of 'A'" || fail "not deputy: $out"
out=$(tls_alerts B -H 'Content-Type: application/json' -d '{"from":"A","deputy":true,"host":"Z","severity":"urgent"}')
expect 422 "$out" | grep -q "host 'Z' is not one of the cluster's hosts" || fail "unknown host: $out"
out=$(tls_alerts B -H 'Content-Type: application/json' -d "{\"from\":\"A\",\"deputy\":false,\"host\":\"B\",\"severity\":\"high\"}")
expect 400 "$out" | grep -q "event: severity: must be quarantine, evacuate or urgent, not 'high'" || fail "bad severity: $out"
out=$(tls_alerts B -H 'Content-Type: application/json' -d "{\"from\":\"A\",\"deputy\":false,\"host\":\"B\",\"colour\":1}")
expect 400 "$out" | grep -q "unknown member 'colour'" || fail "unknown member: $out"
log "/v1/alerts: 409 without deputy, 422, 400"

# ---- the Unix socket -----------------------------------------------------------------------------------
[ "$(stat -c %a "$tmp/A/alerts.sock")" = 600 ] || fail "socket mode $(stat -c %a "$tmp/A/alerts.sock")"
{
    echo '{"host":"A","severity":"quarantine","key":"s1","confidence":0.9}'
    echo '{"host":"A","severity":"quarantine","key":"s1","confidence":0.9}'
    echo '{"host":"A","severity":"evacuate","key":"s2","confidence":0.1}'
    echo '{"host":"A","severity":"high"}'
    echo '{"host":"Z","severity":"quarantine"}'
    echo ''
    echo '{"host":"B","severity":"quarantine","key":"s3"}'
} | socat -t 10 - "UNIX-CONNECT:$tmp/A/alerts.sock" >"$tmp/socket.out" || fail "socat"
mapfile -t replies <"$tmp/socket.out"
[ "${#replies[@]}" = 6 ] || fail "6 replies expected: $(cat "$tmp/socket.out")"
[[ ${replies[0]} == "accepted: host 'A': alert 's1' from socket (quarantine"*"quarantined" ]] || fail "reply 1: ${replies[0]}"
[[ ${replies[1]} == "merged: host 'A': alert 's1' from socket"*"repeats: merged, nothing changes" ]] || fail "reply 2: ${replies[1]}"
[[ ${replies[2]} == "ignored: "*"below the threshold 0.60" ]] || fail "reply 3: ${replies[2]}"
[[ ${replies[3]} == "error: event: severity: must be quarantine, evacuate or urgent, not 'high'" ]] || fail "reply 4: ${replies[3]}"
[[ ${replies[4]} == "error: host 'Z' is not one of the cluster's hosts"* ]] || fail "reply 5: ${replies[4]}"
[[ ${replies[5]} == "accepted (by B): host 'B': alert 's3'"* ]] || fail "reply 6: ${replies[5]}"
{ head -c 70000 /dev/zero | tr '\0' 'x'; echo; echo '{"host":"A","severity":"quarantine","key":"s1"}'; } |
    socat -t 5 - "UNIX-CONNECT:$tmp/A/alerts.sock" >"$tmp/socket.out"
[ "$(sed -n 1p "$tmp/socket.out")" = "error: event: longer than 65536 bytes (the line is dropped)" ] &&
    [[ $(sed -n 2p "$tmp/socket.out") == "merged: host 'A': alert 's1'"* ]] ||
    fail "a long line, then a good one: $(cat "$tmp/socket.out")"
log "socket: accepted, merged, ignored, error, error, accepted (by B); a long line refused, the next one read"

# ---- the command -------------------------------------------------------------------------------------
echo '{"host":"A","severity":"quarantine","key":"smart-sda","confidence":0.95}' >"$tmp/predict"
for _ in $(seq 1 50); do
    grep -q "Alert from command 'predictor.sh' (line 1): accepted: host 'A': alert 'smart-sda' from exec:predictor.sh" "$tmp/A.log" && break
    sleep 0.2
done
grep -q "Alert from command 'predictor.sh' (line 1): accepted" "$tmp/A.log" || fail "the predictor's line was not applied"
[ "$(cat "$tmp/predictor.host")" = A ] || fail "the predictor was run for '$(cat "$tmp/predictor.host")', not A"
rm -f "$tmp/predict"
touch "$tmp/hang"
for _ in $(seq 1 50); do
    grep -q "Alert command 'predictor.sh' killed after .*still running after exec-interval (2 s)" "$tmp/A.log" && break
    sleep 0.2
done
grep -q "Alert command 'predictor.sh' killed after" "$tmp/A.log" || fail "a hanging predictor was not killed"
sleep 0.5
pgrep -fx "sleep 60.$$" >/dev/null && fail "the predictor's child (sleep) outlived it"
rm -f "$tmp/hang"
touch "$tmp/fail"
for _ in $(seq 1 50); do
    grep -q "Alert command 'predictor.sh' failed with exit status 3 .*: sensor unreadable" "$tmp/A.log" && break
    sleep 0.2
done
grep -q "failed with exit status 3 .*: sensor unreadable" "$tmp/A.log" || fail "a failing predictor is not logged"
rm -f "$tmp/fail"
log "command: run with the host's name, its line applied; a hanging one killed; a failing one logged"

# ---- B down: A acts for it ----------------------------------------------------------------------------
stop B
bodyB2=$(webhook '"alertname":"FanFailing","host":"B","hotmig_action":"quarantine"' firing fpB2)
out=$(expect 200 "$(hook A -d "$bodyB2")")
[ "$(jq -r '.results[0] | "\(.result) \(.actor) \(.action)"' <<<"$out")" = "accepted A quarantine" ] &&
    jq -r '.results[0].reason' <<<"$out" | grep -q "acting for 'B', whose hotmigd does not answer" ||
    fail "B down: $out"
grep -q "The hotmigd of host 'B' does not answer" "$tmp/A.log" || fail "A does not log that B is down"
[ "$(expect 200 "$(tls_alerts A)" | jq -r '.hosts[] | select(.name == "B") | "\(.state) \(.alerts[0].key)"')" = "quarantined fpB2" ] ||
    fail "A's book for B: $(tls_alerts A)"
log "B down: A applied B's alert itself"

# ---- /metrics counts it all ------------------------------------------------------------------------------
expect_metric A 'hotmig_alerts_total{action="forwarded"}' 2
expect_metric A 'hotmig_alerts_total{action="ignored"}' 1
expect_metric A 'hotmig_alerts_total{action="lift"}' 1
curl -sS "http://127.0.0.1:${aport[A]}/metrics" | grep '^hotmig_alerts_total\|^hotmig_hosts' | tr '\n' ' ' >&2
echo >&2
stop A
[ -e "$tmp/A/alerts.sock" ] && fail "A left its socket behind"

# ---- the blast radius (issue 15, item 9): 200 webhook bodies at once, each naming every host ----
# Fresh daemons with [alerts] max-unavailable = 1: A quarantines itself, B's alert is held back
# in every body; each body is answered (200, 502 with the held result, or 503: too many at
# once); meanwhile the local API answers and a plan takes a fresh inventory. (B is stopped.)
maxu=1
rm -rf "$tmp/A/state" "$tmp/B/state"
start B
start A
# The alert listener starts after the HTTPS one (start waits for that): wait for it too.
timeout 10 bash -c "until [ \$(grep -c 'Alerts for A: webhook' '$tmp/A.log') -ge 2 ]; do sleep 0.05; done" ||
    fail "A's alert listener did not start again"
migrate_vm=$(dirname "$hotmigd")/../migrate-vm/migrate-vm
both='{"version":"4","status":"firing","receiver":"hotmig","alerts":['
for h in A B; do
    both+="{\"status\":\"firing\",\"labels\":{\"alertname\":\"Burst\",\"host\":\"$h\",\"hotmig_action\":\"quarantine\"},\"annotations\":{},\"startsAt\":\"2026-01-01T00:00:00Z\",\"endsAt\":\"0001-01-01T00:00:00Z\",\"fingerprint\":\"burst-$h\"}"
    [ $h = A ] && both+=,
done
both+=']}'
curls=()
for i in $(seq 1 200); do
    curl -sS --max-time 30 -o "$tmp/burst.$i" -w '%{http_code}\n' -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' -d "$both" \
        "http://127.0.0.1:${aport[A]}/v1/alerts/alertmanager" >"$tmp/burst.$i.code" 2>"$tmp/burst-err.$i" &
    curls+=($!)
done
t0=$(date +%s.%N)
timeout 10 "$migrate_vm" status --socket "$tmp/A/run/hotmigd.sock" >"$tmp/burst.status" 2>&1 ||
    fail "the local API did not answer during the burst: $(cat "$tmp/burst.status")"
t1=$(date +%s.%N)
timeout 30 "$migrate_vm" plan drain B --socket "$tmp/A/run/hotmigd.sock" >"$tmp/burst.plan" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "a plan (a fresh inventory) did not answer within 30 s during the burst"
grep -qi "inventory\|drain\|plan\|B" "$tmp/burst.plan" || fail "plan during the burst: $(cat "$tmp/burst.plan")"
t2=$(date +%s.%N)
wait "${curls[@]}"
codes=$(cat "$tmp"/burst.*.code | sort | uniq -c | tr -s ' ' | tr '\n' ',')
for f in "$tmp"/burst.*.code; do
    case "$(cat "$f")" in
    200 | 502 | 503) ;;
    *) fail "a webhook body of the burst was answered '$(cat "$f")' ($codes)" ;;
    esac
done
held=$(cat "$tmp"/burst.[0-9]* 2>/dev/null | grep -c "held back: host 'B' stays in service: \[alerts\] max-unavailable is 1" || true)
[ "$held" -ge 1 ] || fail "no body was answered with B held back ($codes)"
for h in A B; do
    states=$(expect 200 "$(tls_alerts $h)" | jq -r '[.hosts[] | .state] | map(select(. == "quarantined" or . == "evacuating")) | length')
    [ "$states" -le 1 ] || fail "$h sees $states hosts quarantined or evacuating, the limit is 1"
done
[ "$(expect 200 "$(tls_alerts B)" | jq -r '.hosts[] | select(.name == "B") | .state')" = ok ] ||
    fail "B was quarantined although A was: $(tls_alerts B)"
[ "$(expect 200 "$(tls_alerts A)" | jq -r .max_unavailable)" = 1 ] || fail "GET /v1/alerts does not report the limit"
[ "$(metric A 'hotmig_alerts_total{action="held"}')" -ge 1 ] || fail "A's /metrics counts nothing held"
log "burst: 200 bodies answered ($codes), $held with B held back; local API $(echo "$t1 - $t0" | bc) s, plan $(echo "$t2 - $t1" | bc) s"
stop A
stop B
log "ok"
