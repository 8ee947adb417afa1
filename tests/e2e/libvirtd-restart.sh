#!/bin/bash
# libvirtd on the destination restarts (hotmig-lab restart-host B) while the live migration
# runs. Either the migration fails and is undone — the domain runs on A with its VF plugged
# back and the workload resumed, exit 15 — or libvirt completes it anyway and the domain ends
# on B with its VF, exit 0. Asserts that exactly one host runs the domain, with its VF, no
# journal is left, and the workload ends with 0 lost; says which case happened.
source "$(dirname "$0")/lib.sh"
c=lr-c
s=lr-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

start_pair "$c" "$s" lazy 1

log "migrate-vm A -> B at 8 MiB/s; restart B's libvirtd once the migration runs"
"$migrate_vm" --connect "$A" "$c" "$B" --verbose --bandwidth 8 >"$tmp/out" 2>"$tmp/err" &
pid=$!
timeout 120 bash -c "until grep -q ' migrate *started' '$tmp/err'; do sleep 0.05; done" ||
    { cat "$tmp/err" >&2; fail "migrate-vm never started migrating"; }
sleep 1
t0=$(date +%s.%N)
"$lab" restart-host B >&2 || fail "restarting host B's libvirtd failed"
t1=$(date +%s.%N)
log "host B's libvirtd restarted in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
# The restarted daemon reconnected to the QEMU it had: the server guest still runs on B.
require_where "$s" B
set +e
wait "$pid"
rc=$?
set -e
cat "$tmp/err" >&2

# Exactly one host runs the domain (an aborted incoming domain on B may take a moment to go).
states=""
for i in $(seq 1 60); do
    states=$(for h in A B; do
        if st=$(virsh -q -c "$("$lab" uri "$h")" domstate "$c" 2>/dev/null); then
            echo "$h:$st"
        fi
    done | tr '\n' ' ')
    [ "$(echo "$states" | wc -w)" -eq 1 ] && break
    sleep 0.5
done
[ "$(echo "$states" | wc -w)" -eq 1 ] || fail "$c is known to more than one host: $states"
[[ $states == *:running* ]] || fail "$c is not running: $states"
where=$("$lab" where "$c")
case $rc in
15)
    [ "$where" = A ] || fail "exit 15 but $c runs on $where"
    has_vf "$c" "$A" || fail "$c has no VF on A after the undo"
    grep -q ' migrate *failed' "$tmp/err" || fail "exit 15 without a failed migrate phase"
    outcome="the migration failed and was undone: $c on A with its VF (exit 15)"
    ;;
0)
    [ "$where" = B ] || fail "exit 0 but $c runs on $where"
    has_vf "$c" "$B" || fail "$c has no VF on B after the migration"
    outcome="libvirt completed the migration: $c on B with its VF (exit 0)"
    ;;
*)
    fail "migrate-vm exited $rc, expected 15 (failed and undone) or 0 (completed)"
    ;;
esac
[ ! -e "$HOTMIG_STATE_DIR/journal/$c.journal" ] || fail "journal left: $(cat "$HOTMIG_STATE_DIR/journal/$c.journal")"
log "$outcome"

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.ok and .lost == 0 and .corrupt == 0' >/dev/null || fail "workload: $result"
log "ok: $outcome; the workload lost nothing"
