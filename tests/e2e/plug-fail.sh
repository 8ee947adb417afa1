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

HOTMIG_FAULT_INJECT=device_attach@destination \
    migrate_undone "$c" A B "$tmp/out.json" 16 plug "Phase 'plug' failed"

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.ok and .lost == 0 and .corrupt == 0' >/dev/null || fail "workload: $result"
echo "$result" | jq -e '.cycles[0].delivered_after > 0' >/dev/null || fail "no traffic after resume"
log "ok: rolled back in $(jq .total_ms "$tmp/out.json") ms"
