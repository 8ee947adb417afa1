#!/bin/bash
# A guest running the RDMA ping-pong moves A -> B -> A with migrate-vm while traffic runs.
# Asserts: both migrations succeed with every phase ok, the VF is plugged where the guest
# runs, the workload lost and corrupted no message, and verbs traffic resumed after each move.
# MODE (lazy|threaded) chooses how the workload takes part in libhotmig.
source "$(dirname "$0")/lib.sh"
mode=${MODE:-lazy}
c=rt-$mode-c
s=rt-$mode-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

start_pair "$c" "$s" "$mode" 2

migrate "$c" "$A" "$B" "$tmp/ab.json"
require_where "$c" B
has_vf "$c" "$B" || fail "$c has no VF on B"
jq -e '.ok and ([.phases[] | select(.status != "ok")] | length == 0)' "$tmp/ab.json" >/dev/null ||
    fail "A->B report not all ok"
"$lab" wait "$c" 'HMWL .*"event":"resumed".*"cycle":1' --timeout 120 >/dev/null || fail "no resume after A->B"

migrate "$c" "$B" "$A" "$tmp/ba.json"
require_where "$c" A
has_vf "$c" "$A" || fail "$c has no VF on A"
jq -e '.ok' "$tmp/ba.json" >/dev/null || fail "B->A report not ok"

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.lost == 0' >/dev/null || fail "messages lost: $result"
echo "$result" | jq -e '.corrupt == 0' >/dev/null || fail "messages corrupt: $result"
echo "$result" | jq -e '(.cycles | length) == 2' >/dev/null || fail "expected 2 cycles: $result"
echo "$result" | jq -e '[.cycles[].delivered_after > 0] | all' >/dev/null ||
    fail "verbs traffic did not resume after every move: $result"
echo "$result" | jq -e '.ok and .received > 0' >/dev/null || fail "workload not ok: $result"
log "ok: A->B $(jq .total_ms "$tmp/ab.json") ms, B->A $(jq .total_ms "$tmp/ba.json") ms, $(echo "$result" | jq -c '{sent,received,lost,corrupt,longest_gap_ms}')"
