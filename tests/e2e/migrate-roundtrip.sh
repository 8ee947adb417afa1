#!/bin/bash
# A guest running the RDMA ping-pong moves A -> B -> A with migrate-vm while traffic runs.
# Asserts: both migrations succeed with every phase ok, the VF is plugged where the guest
# runs, the workload lost and corrupted no message, and verbs traffic resumed after each move.
# MODE (lazy|threaded) chooses how the workload takes part in libhotmig. FALLBACK=tcp passes
# `--fallback tcp` to both sides: traffic must then also flow over TCP during every migration.
# Prints the blackout (longest gap between two delivered messages) as "BLACKOUT ...".
source "$(dirname "$0")/lib.sh"
mode=${MODE:-lazy}
fallback=${FALLBACK:-none}
case $fallback in none | tcp) ;; *) fail "FALLBACK must be none or tcp, not '$fallback'" ;; esac
suffix=$mode$([ "$fallback" = tcp ] && echo -fb || true)
c=rt-$suffix-c
s=rt-$suffix-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

if [ "$fallback" = tcp ]; then
    start_guest "$s" B "$c" "--role server --mode $mode --fallback tcp"
    start_guest "$c" A "$s" \
        "--role client --peer 198.51.100.$("$lab" index "$s") --mode $mode --cycles 2 --tail 3 --fallback tcp"
    "$lab" wait "$s" 'HMWL .*"event":"ready"' --timeout 180 >/dev/null || fail "$s did not get ready"
    "$lab" wait "$c" 'HMWL .*"event":"ready"' --timeout 180 >/dev/null || fail "$c did not get ready"
    "$lab" wait "$c" 'HMWL .*"event":"progress"' --timeout 60 >/dev/null || fail "$c sends no traffic"
else
    start_pair "$c" "$s" "$mode" 2
fi

# all_phases_ok REPORT WHAT: the report is ok with each of the 8 phases present, in order, ok.
all_phases_ok() {
    jq -e '.ok and ([.phases[].name] == ["connect", "inspect", "target-vf", "prepare", "unplug",
        "migrate", "plug", "resume"]) and ([.phases[] | select(.status != "ok")] | length == 0)' \
        "$1" >/dev/null || fail "$2 report: not every phase ok: $(jq -c '[.phases[] | {name, status}]' "$1")"
}

migrate "$c" "$A" "$B" "$tmp/ab.json"
require_where "$c" B
has_vf "$c" "$B" || fail "$c has no VF on B"
all_phases_ok "$tmp/ab.json" A->B
"$lab" wait "$c" 'HMWL .*"event":"resumed".*"cycle":1' --timeout 120 >/dev/null || fail "no resume after A->B"

migrate "$c" "$B" "$A" "$tmp/ba.json"
require_where "$c" A
has_vf "$c" "$A" || fail "$c has no VF on A"
all_phases_ok "$tmp/ba.json" B->A

result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.lost == 0' >/dev/null || fail "messages lost: $result"
echo "$result" | jq -e '.corrupt == 0' >/dev/null || fail "messages corrupt: $result"
echo "$result" | jq -e '(.cycles | length) == 2' >/dev/null || fail "expected 2 cycles: $result"
echo "$result" | jq -e '[.cycles[].delivered_after > 0] | all' >/dev/null ||
    fail "verbs traffic did not resume after every move: $result"
echo "$result" | jq -e '.ok and .received > 0' >/dev/null || fail "workload not ok: $result"
if [ "$fallback" = tcp ]; then
    echo "$result" | jq -e '.fallback == "tcp" and ([.cycles[].delivered_tcp > 0] | all)' >/dev/null ||
        fail "traffic did not go on over TCP during every migration: $result"
fi
echo "BLACKOUT mode=$mode fallback=$fallback blackout_ms=$(echo "$result" | jq .blackout_ms)" \
    "tcp_delivered=$(echo "$result" | jq '.tcp_delivered // 0')" \
    "cycles=$(echo "$result" | jq -c '[.cycles[] | {delivered_tcp, delivered_after}]')"
log "ok: A->B $(jq .total_ms "$tmp/ab.json") ms, B->A $(jq .total_ms "$tmp/ba.json") ms, $(echo "$result" | jq -c '{sent,received,lost,corrupt,longest_gap_ms}')"
