#!/bin/bash
# Each lab host's hotmigd answers over mutual TLS with the lab's client certificate, through
# the client migrate-vm uses (hm-hotmigd-call, tests/e2e/hotmigd-call.c): a lease on B's stand-in for a
# guest's VF tap is taken, refused to a second asker, confirmed, kept across a restart of B's
# hotmigd, and released. A client that does not trust the lab CA refuses the daemon.
source "$(dirname "$0")/lib.sh"

call="$build/tests/hm-hotmigd-call"
conf=$("$lab" config)
[ -x "$call" ] || fail "$call is not built"

for h in A B; do
    out=$("$call" "$conf" "$h" host) || fail "hotmigd of host $h does not answer: $out"
    want=hm-lab-$(tr 'AB' 'ab' <<<"$h")
    grep -qx "name $want" <<<"$out" || fail "hotmigd of host $h says: $out"
    log "host $h: $(tr '\n' ' ' <<<"$out")"
done

# A guest's VF stand-in is a tap that exists once the guest does.
g=e2e-hmd
start_guest "$g" A e2e-hmd-peer
tap=hmlab${HOTMIG_LAB_INSTANCE:-0}vf$("$lab" index "$g")
"$call" "$conf" B list | grep -q "^$tap standin free - -$" ||
    fail "B's pool does not list $tap as a free stand-in: $("$call" "$conf" B list | grep "^$tap ")"

id=$("$call" "$conf" B lease "$tap" e2e "e2e lease of $g" "$g" 120) || fail "lease of $tap on B failed"
log "leased $tap on B: $id"
"$call" "$conf" B list | grep -q "^$tap standin leased $id -$" || fail "B does not list the lease"
rc=0
"$call" "$conf" B lease "$tap" thief "a second asker" other 2>"$HOTMIG_STATE_DIR/err" || rc=$?
if [ "$rc" != 3 ] || ! grep -q "refused POST /v1/leases (409 Conflict): VF '$tap' is leased by 'e2e'" "$HOTMIG_STATE_DIR/err"; then
    fail "a second lease of $tap: exit $rc, $(cat "$HOTMIG_STATE_DIR/err")"
fi
note=$("$call" "$conf" B ib-identity "$tap" 0x0002c90300000001 0x0002c90300000002) || fail "ib-identity failed"
grep -q "stand-in" <<<"$note" || fail "ib-identity on a stand-in: $note"
"$call" "$conf" B confirm "$tap" "$id" | grep -qx "$tap assigned" || fail "confirm failed"
"$lab" restart-hotmigd B >/dev/null || fail "restart-hotmigd B failed"
"$call" "$conf" B list | grep -q "^$tap standin assigned $id $g$" ||
    fail "B's restarted hotmigd lost the lease: $("$call" "$conf" B list | grep "^$tap ")"
"$call" "$conf" B release "$tap" "$id" || fail "release failed"
"$call" "$conf" B release "$tap" "$id" || fail "a second release failed (it is idempotent)"
"$call" "$conf" B list | grep -q "^$tap standin free - -$" || fail "$tap is not free after the release"
log "B: $tap leased, refused to a second asker, confirmed, kept across a restart, released"

# A's hotmigd has its own leases: none on the tap there, which A's libvirt shows in use by the
# guest that runs on A (plugged when the guest was created, without a lease).
"$call" "$conf" A list | grep -q "^$tap standin in-use - $g$" ||
    fail "A's pool shows $tap as: $("$call" "$conf" A list | grep "^$tap ")"

# A client that does not trust the lab CA refuses the daemon's certificate.
sed "s|^ca-cert = .*|ca-cert = $(dirname "$conf")/pki/client.pem|" "$conf" >"$HOTMIG_STATE_DIR/bad.conf"
rc=0
"$call" "$HOTMIG_STATE_DIR/bad.conf" B host 2>"$HOTMIG_STATE_DIR/err" || rc=$?
if [ "$rc" != 1 ] || ! grep -q "certificate of hotmigd at https://127.0.0.3:[0-9]* not signed by CA" "$HOTMIG_STATE_DIR/err"; then
    fail "a client with the wrong CA: exit $rc, $(cat "$HOTMIG_STATE_DIR/err")"
fi
log "ok"
