#!/bin/bash
# hotmigd drains host A: two guests on A run the RDMA ping-pong with their peers on B;
# `migrate-vm drain A --wait` is asked of B's hotmigd, whose scheduler has A's hotmigd run each
# move (moves are driven from their source host: POST /v1/migrations to A).
# Asserts: the drain's schedule finished ok with both moves done, run by A; both guests run on
# B with their VF stand-ins; each workload lost and corrupted no message and went on over verbs
# after its move; `migrate-vm status` shows the finished schedule, and A's hotmigd lists the two
# migrations it ran for B. Prints "DRAIN ..." with the schedule and the workloads' figures.
source "$(dirname "$0")/lib.sh"
c1=dr-c1
s1=dr-s1
c2=dr-c2
s2=dr-s2
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

sock_a=$("$lab" hotmigd-socket A)
sock_b=$("$lab" hotmigd-socket B)
[ -S "$sock_b" ] || fail "B's hotmigd has no local socket at $sock_b (is hotmigd built?)"

# Two pairs: the servers on B, the clients on A (each client's VF is wired to its server's).
start_guest "$s1" B "$c1" "--role server --mode lazy"
start_guest "$s2" B "$c2" "--role server --mode lazy"
start_guest "$c1" A "$s1" \
    "--role client --peer 198.51.100.$("$lab" index "$s1") --mode lazy --cycles 1 --tail 3"
start_guest "$c2" A "$s2" \
    "--role client --peer 198.51.100.$("$lab" index "$s2") --mode lazy --cycles 1 --tail 3"
for g in "$s1" "$s2" "$c1" "$c2"; do
    "$lab" wait "$g" 'HMWL .*"event":"ready"' --timeout 240 >/dev/null || fail "$g did not get ready"
done
for g in "$c1" "$c2"; do
    "$lab" wait "$g" 'HMWL .*"event":"progress"' --timeout 60 >/dev/null || fail "$g sends no traffic"
done

# The plan first (nothing runs): both clients leave A for B.
"$migrate_vm" plan drain A --socket "$sock_b" --json >"$tmp/plan.json" 2>"$tmp/plan.err" ||
    fail "migrate-vm plan drain A: $(cat "$tmp/plan.err")"
jq -e --arg c1 "$c1" --arg c2 "$c2" \
    '.drained == "A" and ([.migrations[] | select(.to == "B") | .vm] | sort == ([$c1, $c2] | sort))' \
    "$tmp/plan.json" >/dev/null || fail "unexpected drain plan: $(cat "$tmp/plan.json")"
# Bad input changes nothing.
if "$migrate_vm" drain Z --socket "$sock_b" >"$tmp/bad.out" 2>&1; then
    fail "drain of an unknown host succeeded"
fi
grep -q "unknown host 'Z'" "$tmp/bad.out" || fail "drain Z: $(cat "$tmp/bad.out")"

log "migrate-vm drain A --wait (asked of B's hotmigd)"
start=$(date +%s.%N)
if ! "$migrate_vm" drain A --socket "$sock_b" --reason "e2e drain" --wait --json \
    >"$tmp/drain.json" 2>"$tmp/drain.err"; then
    cat "$tmp/drain.err" "$tmp/drain.json" >&2
    echo "--- hotmigd A" >&2
    tail -n 30 "$(dirname "$sock_a")/../../hotmigd.log" >&2 || true
    fail "migrate-vm drain A failed"
fi
took=$(echo "$(date +%s.%N) - $start" | bc)
cat "$tmp/drain.err" >&2
id=$(jq -r .id "$tmp/drain.json")
jq -e '.state == "finished" and .ok and .kind == "drain" and .host == "A"' "$tmp/drain.json" >/dev/null ||
    fail "drain report not finished ok: $(cat "$tmp/drain.json")"
jq -e '(.moves | length) == 2 and ([.moves[] | select(.state == "done" and .to == "B" and .driven_by == "A"
        and (.migration | type) == "string" and .report.ok and .report.vfs_attached == 1)] | length) == 2' \
    "$tmp/drain.json" >/dev/null || fail "drain moves not both done, driven by A: $(cat "$tmp/drain.json")"
jq -r '.moves[] | "  \(.vm) \(.from) -> \(.to) \(.state) by \(.driven_by) \(.report.total_ms | floor) ms"' \
    "$tmp/drain.json" >&2

for g in "$c1" "$c2"; do
    require_where "$g" B
    has_vf "$g" "$B" || fail "$g has no VF on B"
done

results=()
for g in "$c1" "$c2"; do
    r=$(result_of "$g")
    echo "$g result: $r" >&2
    echo "$r" | jq -e '.lost == 0 and .corrupt == 0' >/dev/null || fail "$g lost or corrupted messages: $r"
    echo "$r" | jq -e '(.cycles | length) == 1 and .cycles[0].migrated == "client"' >/dev/null ||
        fail "$g: expected one cycle, its own migration: $r"
    echo "$r" | jq -e '.cycles[0].delivered_after > 0 and .ok' >/dev/null ||
        fail "$g: verbs traffic did not resume after the move: $r"
    results+=("$g=$(echo "$r" | jq -c '{sent,received,lost,corrupt,blackout_ms}')")
done

# status: the schedule, finished; A's hotmigd ran both moves for B.
"$migrate_vm" status --socket "$sock_b" >"$tmp/status.txt" || fail "migrate-vm status failed"
cat "$tmp/status.txt" >&2
grep -q "^  $id  drain of A  finished ok  2 moves: 2 done" "$tmp/status.txt" ||
    fail "status does not show the finished drain $id"
"$migrate_vm" status "$id" --socket "$sock_b" --json >"$tmp/one.json" || fail "migrate-vm status $id failed"
jq -e '.ok and (.moves | length) == 2' "$tmp/one.json" >/dev/null || fail "status $id: $(cat "$tmp/one.json")"
"$migrate_vm" status --socket "$sock_a" --json >"$tmp/status-a.json" || fail "status of A's hotmigd failed"
jq -e --arg id "$id" '[.migrations[] | select(.plan == $id and .state == "done" and .destination == "B")] | length == 2' \
    "$tmp/status-a.json" >/dev/null || fail "A's hotmigd does not list the two migrations: $(jq -c .migrations "$tmp/status-a.json")"

echo "DRAIN id=$id moves=2 took_s=$took ${results[*]}"
log "ok: drain $id took $took s"
