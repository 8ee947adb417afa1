#!/bin/bash
# A real hotmigd on 127.0.0.1 with a throwaway PKI (tests/unit/test-pki.sh) and a fixture pool:
# the ConnectX-6 sysfs tree of tests/fixtures (5 VFs 15b3:101c) and 8 stand-in net devices made
# in the tree's class/net; libvirt's test driver (test:///default) says which domains use PCI
# VFs. curl is the client, so the API is checked as any client sees it. No lab, no root needed
# beyond what the build needs; about 10 s.
#   - 16 clients race for the 8 stand-ins: exactly 8 leases granted, no VF twice;
#   - 16 clients race for "the first free 15b3:101c": exactly 5 granted, 11 told "no free VF";
#   - unconfirmed leases expire (lease-ttl 2 s): the VF of a client that died is leasable again;
#     confirmed ones do not;
#   - a restarted hotmigd keeps the confirmed leases;
#   - clients without a valid certificate (none, self-signed, another CA's, expired) are refused
#     at the handshake, and the log says why; a client that does not trust the daemon's CA
#     refuses it;
#   - vfio: a VF on vfio-pci already is left alone; bad configurations exit 4, bad certificates 1;
#   - SIGHUP reloads (what waits for a restart is named; a bad file is refused, the daemon goes
#     on); --check-config reports every problem, reads $HOTMIG_CONFIG.
#   - 1100 idle TCP connections (loopback) do not keep a client out: a request and the local
#     socket's status answer within 5 s (issue 15: the connection cap, the handshake and idle
#     timeouts).
#
#   hotmigd-test.sh HOTMIGD SOURCE_DIR MIGRATE_VM
set -uo pipefail
hotmigd=$1
src=$2
migrate_vm=$3
# hotmigd gets an ordinary descriptor limit: connections beyond it must not lock clients out.
ulimit -Sn 1024
tmp=$(mktemp -d /tmp/hm-hotmigd-test.XXXXXX)
pid=
cleanup() {
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "hotmigd-test: FAIL: $*" >&2
    [ -f "$tmp/hotmigd.log" ] && { echo "--- hotmigd log" >&2; tail -n 30 "$tmp/hotmigd.log" >&2; }
    exit 1
}
log() { echo "hotmigd-test: $(date +%T.%N | cut -c1-12) $*" >&2; }
command -v curl >/dev/null || fail "curl is not installed (tests/install-deps)"
command -v jq >/dev/null || fail "jq is not installed (tests/install-deps)"

bash "$src/tests/unit/test-pki.sh" "$tmp/pki" || fail "test-pki.sh failed: $(cat "$tmp/pki/openssl.log")"
pki=$tmp/pki
cp -a "$src/tests/fixtures/sysfs/cx6-ib" "$tmp/sys"
standins=()
for i in 0 1 2 3 4 5 6 7; do
    mkdir -p "$tmp/sys/class/net/hmt$i"
    standins+=("hmt$i")
done

# A port nobody listens on (hotmigd exits 1 when it cannot listen: then try the next).
port=$((20000 + ($$ % 20000)))
runs=0
url=
CURL=(curl -sS --max-time 10 --cacert "$pki/ca.pem" --cert "$pki/client.pem" --key "$pki/client-key.pem")

write_config() {
    cat >"$tmp/hotmig.conf" <<EOF
[hotmigd]
listen = 127.0.0.1
port = $port
server-cert = $pki/server.pem
server-key = $pki/server-key.pem
ca-cert = $pki/ca.pem
run-dir = $tmp/run
socket = $tmp/run/hotmigd.sock
sysfs-root = $tmp/sys
lease-ttl = 2
connect = test:///default
operators = hotmig-test-client
file-roots = $tmp/files

[pool]
pfs = 0001:af:00.0, 0001:af:00.1
standins = $(IFS=,; echo "${standins[*]}")

# The failure-prediction hook is hotmigd-alerts-test.sh's.
[alerts]
port = 0
socket =
EOF
}

# Starts hotmigd and waits (10 s at most) until it listens.
start() {
    local i
    # Each run logs to a fresh hotmigd.log (the earlier ones are kept as hotmigd.log.N).
    runs=$((runs + 1))
    [ ! -f "$tmp/hotmigd.log" ] || mv "$tmp/hotmigd.log" "$tmp/hotmigd.log.$runs"
    for i in 1 2 3 4 5; do
        write_config
        "$hotmigd" --config "$tmp/hotmig.conf" --foreground >>"$tmp/hotmigd.log" 2>&1 &
        pid=$!
        for _ in $(seq 1 100); do
            grep -q "listening on https://127.0.0.1:$port " "$tmp/hotmigd.log" && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null && grep -q "listening on https://127.0.0.1:$port " "$tmp/hotmigd.log"; then
            url=https://127.0.0.1:$port
            return 0
        fi
        grep -q "Cannot listen" "$tmp/hotmigd.log" || fail "hotmigd did not start"
        pid=
        port=$((port + 1))
    done
    fail "no free port for hotmigd"
}

stop() {
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    local rc=$?
    pid=
    [ "$rc" -eq 0 ] || fail "hotmigd exited $rc on SIGTERM, expected 0"
}

# api METHOD PATH [BODY]: prints the body, then a last line with the status.
api() {
    if [ $# -ge 3 ]; then
        "${CURL[@]}" -X "$1" -H 'Content-Type: application/json' -d "$3" -w '\n%{http_code}\n' "$url$2"
    else
        "${CURL[@]}" -X "$1" -w '\n%{http_code}\n' "$url$2"
    fi
}

# expect_status STATUS METHOD PATH [BODY]: the reply's body on stdout.
expect_status() {
    local want=$1 out status
    shift
    out=$(api "$@") || fail "curl $* failed"
    status=$(tail -n 1 <<<"$out")
    [ "$status" = "$want" ] || fail "$1 $2 answered $status, expected $want: $out"
    sed '$d' <<<"$out"
}

lease_body() { # lease_body WHAT HOLDER [TTL]: without TTL the daemon's lease-ttl (2 s)
    echo "{$1, \"holder\": \"$2\", \"reason\": \"hotmigd-test\", \"domain\": \"vm-$2\"${3:+, \"ttl\": $3}}"
}

start
log "hotmigd listens on $url"
expect_status 200 GET /v1/host >"$tmp/host.json"
[ "$(jq -r .pool.size "$tmp/host.json")" = 13 ] || fail "pool size: $(cat "$tmp/host.json")"
[ "$(jq -r .pool.free "$tmp/host.json")" = 13 ] || fail "pool not all free: $(cat "$tmp/host.json")"

# ---- 16 clients, 8 stand-ins: each tries them all, from its own starting point -------------
clients=()
for c in $(seq 0 15); do
    (
        for k in $(seq 0 7); do
            vf=hmt$(((c + k) % 8))
            out=$(api POST /v1/leases "$(lease_body "\"vf\": \"$vf\"" "c$c" 120)") || exit 1
            tail -n 1 <<<"$out" >>"$tmp/tries1.$c"
            if [ "$(tail -n 1 <<<"$out")" = 201 ]; then
                sed '$d' <<<"$out" | jq -r '"\(.vf) \(.id)"' >"$tmp/race1.$c"
                exit 0
            fi
            [ "$(tail -n 1 <<<"$out")" = 409 ] || { echo "$out" >"$tmp/race1.$c.err"; exit 1; }
        done
    ) &
    clients+=($!)
done
wait "${clients[@]}"
ls "$tmp"/race1.*.err >/dev/null 2>&1 && fail "a racing client got an unexpected answer: $(cat "$tmp"/race1.*.err)"
granted=$(cat "$tmp"/race1.* 2>/dev/null | wc -l)
distinct=$(cat "$tmp"/race1.* 2>/dev/null | cut -d' ' -f1 | sort -u | wc -l)
[ "$granted" = 8 ] || fail "16 clients for 8 stand-ins: $granted leases granted, expected 8"
[ "$distinct" = 8 ] || fail "16 clients for 8 stand-ins: $distinct distinct VFs among 8 leases"
expect_status 200 GET /v1/vfs >"$tmp/vfs.json"
while read -r vf id; do
    [ "$(jq -r --arg vf "$vf" '.vfs[] | select(.id == $vf) | .lease.id' "$tmp/vfs.json")" = "$id" ] ||
        fail "GET /v1/vfs does not show lease $id on $vf"
done < <(cat "$tmp"/race1.*)
log "race 1: 16 clients, 8 stand-ins: 8 leases granted, 8 distinct VFs ($(cat "$tmp"/tries1.* | wc -l) requests, $(cat "$tmp"/tries1.* | grep -c 409) answered 409)"

# ---- 16 clients, "the first free 15b3:101c" (5 VFs) ----------------------------------------
clients=()
for c in $(seq 0 15); do
    (
        out=$(api POST /v1/leases "$(lease_body '"vendor_id": "0x15b3", "device_id": "0x101c"' "m$c" 120)") || exit 1
        echo "$out" >"$tmp/race2.$c"
    ) &
    clients+=($!)
done
wait "${clients[@]}"
granted=$(for f in "$tmp"/race2.*; do tail -n 1 "$f"; done | grep -c '^201$')
refused=$(for f in "$tmp"/race2.*; do tail -n 1 "$f"; done | grep -c '^409$')
distinct=$(for f in "$tmp"/race2.*; do [ "$(tail -n 1 "$f")" = 201 ] && sed '$d' "$f" | jq -r .vf; done | sort -u | wc -l)
[ "$granted" = 5 ] || fail "16 clients for 5 VFs of a model: $granted granted, expected 5"
[ "$refused" = 11 ] || fail "16 clients for 5 VFs of a model: $refused refused with 409, expected 11"
[ "$distinct" = 5 ] || fail "16 clients for 5 VFs of a model: $distinct distinct VFs among 5 leases"
grep -q "no free VF 15b3:101c on .*: the pool has 5 of that model (5 leased)" "$tmp"/race2.* ||
    fail "the refusal does not say what was looked for: $(cat "$tmp/race2.0")"
log "race 2: 16 clients, 5 VFs 15b3:101c: 5 granted, 11 told 'no free VF'"

# ---- confirm some, release the others; a client that dies leaves leases that expire ---------
race1=("$tmp"/race1.*)
confirmed=()
for f in "${race1[@]:0:4}"; do
    read -r vf id <"$f"
    expect_status 200 POST "/v1/leases/$vf/$id/confirm" >/dev/null
    confirmed+=("$vf $id")
done
for f in "${race1[@]:4:4}"; do
    read -r vf id <"$f"
    expect_status 200 DELETE "/v1/leases/$vf/$id" >/dev/null
    expect_status 200 DELETE "/v1/leases/$vf/$id" >/dev/null # idempotent
done
for f in "$tmp"/race2.*; do
    [ "$(tail -n 1 "$f")" = 201 ] || continue
    read -r vf id < <(sed '$d' "$f" | jq -r '"\(.vf) \(.id)"')
    expect_status 200 DELETE "/v1/leases/$vf/$id" >/dev/null
done
read -r dead_vf dead_id <"${race1[7]}"
# The client leases a stand-in and a PCI VF with the daemon's lease-ttl (2 s) and is killed:
# nobody confirms or releases them.
(bash -c '"$@" >"'"$tmp"'/dead.out"; kill -9 $$' dead "${CURL[@]}" -X POST -d "$(lease_body "\"vf\": \"$dead_vf\"" dead)" "$url/v1/leases"; true) 2>/dev/null
dead_id=$(jq -r .id "$tmp/dead.out")
if [ -z "$dead_id" ] || [ "$dead_id" = null ]; then
    fail "the client that dies got no lease: $(cat "$tmp/dead.out")"
fi
(bash -c '"$@" >"'"$tmp"'/dead2.out"; kill -9 $$' dead "${CURL[@]}" -X POST -d "$(lease_body '"vendor_id": 5555, "device_id": 4124' dead)" "$url/v1/leases"; true) 2>/dev/null
dead2_vf=$(jq -r .vf "$tmp/dead2.out")
# Both leases were granted with the daemon's lease-ttl, as their replies say (asking the pool
# for them now would race their 2 s on a loaded machine).
for f in dead.out dead2.out; do
    [ "$(jq -r .state "$tmp/$f")" = leased ] || fail "the dying client's lease is not leased: $(cat "$tmp/$f")"
    ttl=$(($(date -d "$(jq -r .expires "$tmp/$f")" +%s) - $(date -d "$(jq -r .created "$tmp/$f")" +%s)))
    [ "$ttl" = 2 ] || fail "the dying client's lease lasts $ttl s, not the daemon's lease-ttl (2 s): $(cat "$tmp/$f")"
done
sleep 3 # lease-ttl is 2 s: asserting the state after expiry, not when it happened
expect_status 200 GET /v1/vfs >"$tmp/vfs.json"
for c in "${confirmed[@]}"; do
    read -r vf id <<<"$c"
    [ "$(jq -r --arg vf "$vf" '.vfs[] | select(.id == $vf) | .state' "$tmp/vfs.json")" = assigned ] ||
        fail "confirmed lease on $vf did not stay assigned: $(jq -c --arg vf "$vf" '.vfs[] | select(.id == $vf)' "$tmp/vfs.json")"
done
for vf in "$dead_vf" "$dead2_vf"; do
    [ "$(jq -r --arg vf "$vf" '.vfs[] | select(.id == $vf) | .state' "$tmp/vfs.json")" = free ] ||
        fail "the dead client's lease on $vf did not expire"
done
expect_status 409 POST "/v1/leases/$dead_vf/$dead_id/confirm" >/dev/null
expect_status 201 POST /v1/leases "$(lease_body "\"vf\": \"$dead_vf\"" again 120)" >/dev/null
expect_status 201 POST /v1/leases "$(lease_body "\"vf\": \"$dead2_vf\"" again 120)" >/dev/null
log "expiry: 4 confirmed leases stayed; the dead client's leases expired and were leased again"

# ---- restart: confirmed leases stay -----------------------------------------------------------
stop
start
expect_status 200 GET /v1/vfs >"$tmp/vfs.json"
for c in "${confirmed[@]}"; do
    read -r vf id <<<"$c"
    [ "$(jq -r --arg vf "$vf" '.vfs[] | select(.id == $vf) | "\(.state) \(.lease.id)"' "$tmp/vfs.json")" = "assigned $id" ] ||
        fail "after a restart, $vf lost its confirmed lease $id: $(jq -c --arg vf "$vf" '.vfs[] | select(.id == $vf)' "$tmp/vfs.json")"
done
log "restart: the 4 confirmed leases are still there"
# Their domains do not run here (libvirt's test driver has none of them): a new lease of such a
# VF ends the stale one, and says so in the log.
read -r vf id <<<"${confirmed[0]}"
expect_status 201 POST /v1/leases "$(lease_body "\"vf\": \"$vf\"" thief)" >/dev/null
grep -q "VF '$vf': lease of domain '.*' ended: the domain does not hold it" "$tmp/hotmigd.log" ||
    fail "the stale lease of $vf was not ended in the log"
log "a confirmed lease whose domain is not here ends when its VF is asked for"

# ---- clients without a valid certificate -------------------------------------------------------
for who in none self other-client expired; do
    if [ "$who" = none ]; then
        args=(--cacert "$pki/ca.pem")
    else
        args=(--cacert "$pki/ca.pem" --cert "$pki/$who.pem" --key "$pki/$who-key.pem")
    fi
    if out=$(curl -sS --max-time 10 "${args[@]}" -w '%{http_code}' -X POST -d "$(lease_body "\"vf\": \"hmt0\"" "$who")" "$url/v1/leases" 2>&1); then
        fail "a client with certificate '$who' was answered: $out"
    fi
done
for who in self-signed hotmig-other-client hotmig-expired-client; do
    grep -q "Refused the client certificate '.*CN=$who' of 127.0.0.1: " "$tmp/hotmigd.log" ||
        fail "the log does not say it refused '$who'"
done
grep -q "Refused the client certificate '.*CN=self-signed' of 127.0.0.1: not signed by the CA" "$tmp/hotmigd.log" ||
    fail "the log does not say why"
grep -q "CN=hotmig-expired-client' of 127.0.0.1: expired" "$tmp/hotmigd.log" || fail "the log does not say 'expired'"
if curl -sS --max-time 10 --cacert "$pki/other-ca.pem" --cert "$pki/client.pem" --key "$pki/client-key.pem" "$url/v1/host" >/dev/null 2>&1; then
    fail "a client trusting another CA accepted hotmigd's certificate"
fi
log "refused: no certificate, self-signed, another CA's, expired; and a client of another CA refused hotmigd"

# ---- 1100 idle connections: the cap and the timeouts keep the daemon serving -------------------
holder=
( ulimit -Sn 4096
  fds=()
  for _ in $(seq 1 1100); do
      # 'command': a failed redirection ends the loop, not the shell.
      command exec {fd}<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null || break
      fds+=("$fd")
  done
  echo "${#fds[@]}" >"$tmp/idle.count"
  sleep 90 ) &
holder=$!
# Connecting waits for hotmigd to accept (its listen backlog): a minute at most.
for _ in $(seq 1 600); do
    [ -s "$tmp/idle.count" ] && break
    sleep 0.1
done
[ "$(cat "$tmp/idle.count" 2>/dev/null)" = 1100 ] || fail "opened $(cat "$tmp/idle.count" 2>/dev/null) of 1100 idle connections"
t0=$(date +%s%N)
out=$("${CURL[@]}" --max-time 5 -w '\n%{http_code}\n' "$url/v1/host") ||
    { kill "$holder"; fail "with 1100 idle connections GET /v1/host did not answer within 5 s"; }
[ "$(tail -n 1 <<<"$out")" = 200 ] || { kill "$holder"; fail "GET /v1/host under 1100 idle connections: $out"; }
t1=$(date +%s%N)
timeout 5 "$migrate_vm" status --socket "$tmp/run/hotmigd.sock" >"$tmp/status.out" 2>&1 ||
    { kill "$holder"; fail "with 1100 idle connections the local status did not answer within 5 s: $(cat "$tmp/status.out")"; }
t2=$(date +%s%N)
# The kernel hands hotmigd a silent connection only once TCP_DEFER_ACCEPT's time (the handshake
# timeout) has passed: wait for the daemon to close one, bounded, before the holder lets go.
for _ in $(seq 1 600); do
    grep -q "HTTPS connections: .*: closing one without a request" "$tmp/hotmigd.log" && break
    sleep 0.1
done
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
grep -q "HTTPS connections: .*: closing one without a request" "$tmp/hotmigd.log" ||
    fail "the log does not say idle connections were closed (waited 60 s)"
kill -0 "$pid" || fail "hotmigd died under 1100 idle connections"
log "1100 idle connections: GET /v1/host in $(((t1 - t0) / 1000000)) ms, local status in $(((t2 - t1) / 1000000)) ms"

# ---- vfio on the fixture, stop, exit codes ----------------------------------------------------
out=$(expect_status 201 POST /v1/leases "$(lease_body '"vf": "0001:af:00.3"' vfio 120)") || exit 1
out=$(expect_status 200 POST /v1/vfs/0001:af:00.3/vfio) || exit 1
[ "$(jq -r .note <<<"$out")" = "bound to vfio-pci already" ] || fail "vfio: $out"
# ---- SIGHUP reloads, --check-config ----------------------------------------------------------
# The reload checks the file as --check-config does, files included: [migrate]'s certificates.
cat >>"$tmp/hotmig.conf" <<EOF

[migrate]
client-cert = $pki/client.pem
client-key = $pki/client-key.pem
ca-cert = $pki/ca.pem
prepare-timeout = 40

[scheduler]
total = 9
EOF
"$hotmigd" --config "$tmp/hotmig.conf" --check-config >"$tmp/out" 2>&1 ||
    fail "--check-config refused the running file: $(cat "$tmp/out")"
grep -q "'$tmp/hotmig.conf' is valid" "$tmp/out" || fail "--check-config: $(cat "$tmp/out")"
sed -i "s|^lease-ttl = 2|lease-ttl = 7|" "$tmp/hotmig.conf" # read once, at the start
kill -HUP "$pid"
for _ in $(seq 1 50); do grep -q "Reloaded '$tmp/hotmig.conf'" "$tmp/hotmigd.log" && break; sleep 0.1; done
grep -q "Reloaded '$tmp/hotmig.conf': \[migrate\] and \[scheduler\] apply from now on" "$tmp/hotmigd.log" ||
    fail "SIGHUP did not reload"
grep -q "Reload: \[hotmigd\] lease-ttl changed; it takes effect when hotmigd restarts" "$tmp/hotmigd.log" ||
    fail "the reload does not name the key that waits for a restart"
kill -0 "$pid" 2>/dev/null || fail "hotmigd died on SIGHUP"
expect_status 200 GET /v1/host >/dev/null || exit 1
# A bad file is refused, every problem named, and the daemon goes on with the running one.
printf '\n[host a]\nuri = node02\n' >>"$tmp/hotmig.conf"
sed -i "s|^listen = 127.0.0.1|listen = 127.0.0.1 # loopback|" "$tmp/hotmig.conf"
kill -HUP "$pid"
for _ in $(seq 1 50); do grep -q "Reload refused" "$tmp/hotmigd.log" && break; sleep 0.1; done
grep -q "Reload refused, the running configuration stays: .*hotmig.conf:2: \[hotmigd\] listen: '127.0.0.1 # loopback' ends in a comment" "$tmp/hotmigd.log" ||
    fail "a bad file on SIGHUP was not refused with its problem"
kill -0 "$pid" 2>/dev/null || fail "hotmigd died on a SIGHUP with a bad file"
expect_status 200 GET /v1/host >/dev/null || exit 1
# --check-config reports every problem: fix the comment, the bad uri remains, add a bad name.
sed -i "s|^listen = 127.0.0.1 # loopback|listen = 127.0.0.1|; s|^run-dir = |name = nowhere\nrun-dir = |" "$tmp/hotmig.conf"
"$hotmigd" --config "$tmp/hotmig.conf" --check-config >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 4 ] || fail "--check-config on a bad file exited $rc, not 4: $(cat "$tmp/out")"
grep -q "uri: 'node02' is not a libvirt URI" "$tmp/out" || fail "--check-config missed the uri: $(cat "$tmp/out")"
grep -q "\[hotmigd\] name: 'nowhere' names no \[host NAME\] group (known: a)" "$tmp/out" ||
    fail "--check-config missed the name: $(cat "$tmp/out")"
HOTMIG_CONFIG=$tmp/hotmig.conf "$hotmigd" --check-config >"$tmp/out" 2>&1
[ $? = 4 ] || fail "--check-config does not read \$HOTMIG_CONFIG"
write_config
log "SIGHUP: [migrate]/[scheduler] reloaded, lease-ttl named as waiting for a restart, a bad file refused; --check-config names every problem"

stop
grep -q "Stopped" "$tmp/hotmigd.log" || fail "no 'Stopped' in the log after SIGTERM"
printf '[hotmigd]\nport = 0\n' >"$tmp/bad.conf"
"$hotmigd" --config "$tmp/bad.conf" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" != 4 ] || ! grep -q "bad.conf:2: \[hotmigd\] port" "$tmp/out"; then
    fail "a bad config: exit $rc, $(cat "$tmp/out")"
fi
sed -i "s|^server-cert = .*|server-cert = $tmp/nonexistent.pem|" "$tmp/hotmig.conf"
"$hotmigd" --config "$tmp/hotmig.conf" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" != 1 ] || ! grep -q "Cannot load the server certificate '$tmp/nonexistent.pem'" "$tmp/out"; then
    fail "a missing certificate: exit $rc, $(cat "$tmp/out")"
fi
"$hotmigd" --bogus >"$tmp/out" 2>&1
[ $? = 2 ] || fail "an unknown option does not exit 2"
log "ok"
