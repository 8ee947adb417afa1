#!/bin/bash
# The destination refuses every VF plug (fault injection on the libvirt adapter): migrate-vm
# must migrate the guest back, plug its VF on the source, resume the workload, exit 16 (plug failed and undone) naming
# the plug phase; the workload then goes on over verbs and loses nothing.
source "$(dirname "$0")/lib.sh"
c=pf-c
s=pf-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

start_pair "$c" "$s" lazy 1

log "migrate-vm with the destination plug failing"
set +e
HOTMIG_FAULT_INJECT=device_attach@destination \
    "$migrate_vm" --connect "$A" "$c" "$B" --json >"$tmp/out.json" 2>"$tmp/err"
rc=$?
set -e
cat "$tmp/err" >&2
jq -r '.phases[] | "  \(.name) \(.status) \(.detail // "")"' "$tmp/out.json" >&2
jq -r '.rollback[] | "  undo \(.action) \(.ok) \(.detail // "")"' "$tmp/out.json" >&2
[ "$rc" -eq 16 ] || fail "migrate-vm exited $rc, expected 16 (plug failed, undone)"
grep -q "Phase 'plug' failed" "$tmp/err" || fail "error does not name the plug phase"
jq -e '.failed_phase == "plug" and .final_host == "source" and .vfs_attached == 1' \
    "$tmp/out.json" >/dev/null || fail "report does not say plug failed and the VM is back"
require_where "$c" A
has_vf "$c" "$A" || fail "$c lost its VF"

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.ok and .lost == 0 and .corrupt == 0' >/dev/null || fail "workload: $result"
echo "$result" | jq -e '.cycles[0].delivered_after > 0' >/dev/null || fail "no traffic after resume"
log "ok: rolled back in $(jq .total_ms "$tmp/out.json") ms"
