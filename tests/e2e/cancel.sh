#!/bin/bash
# Ctrl-C during the live migration: migrate-vm aborts the libvirt job and undoes the earlier
# phases. Asserts exit 5, the guest back on A with its VF, the workload resumed with 0 lost.
# SIGNAL=HUP: the same for a hang-up (an SSH session that drops mid-migration).
source "$(dirname "$0")/lib.sh"
sig=${SIGNAL:-INT}
c=cx-c
s=cx-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

start_pair "$c" "$s" lazy 1

log "migrate-vm at 8 MiB/s, SIG$sig once the migration runs"
"$migrate_vm" --connect "$A" "$c" "$B" --verbose --bandwidth 8 >"$tmp/out" 2>"$tmp/err" &
pid=$!
timeout 120 bash -c "until grep -q ' migrate *started' '$tmp/err'; do sleep 0.05; done" ||
    { cat "$tmp/err" >&2; fail "migrate-vm never started migrating"; }
sleep 1
kill -"$sig" "$pid"
set +e
wait "$pid"
rc=$?
set -e
cat "$tmp/err" >&2
cat "$tmp/out" >&2
[ "$rc" -eq 5 ] || fail "migrate-vm exited $rc after SIG$sig, expected 5 (cancelled and undone)"
require_where "$c" A
has_vf "$c" "$A" || fail "$c lost its VF"
[ ! -e "$HOTMIG_STATE_DIR/journal/$c.journal" ] || fail "journal left after a clean undo"

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.ok and .lost == 0 and .corrupt == 0' >/dev/null || fail "workload: $result"
log "ok: cancelled by SIG$sig and undone"
