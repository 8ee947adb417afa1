#!/bin/bash
# What hotmig costs on top of a plain live migration, on the lab (which must be up:
# hotmig-lab up). Two guests of the same size on A: 'bench-vf' holds the VF stand-in and runs
# the RDMA ping-pong client (its server runs on B), 'bench-novf' has no VF. Runs ROUNDS
# (default 5) round trips A->B->A of each, interleaved: 'virsh migrate --live --p2p' for the
# guest without VF, migrate-vm for the one with it. Prints one JSON object with the medians,
# their ratio and migrate-vm's per-phase medians. A benchmark: it measures, asserts nothing.
source "$(dirname "$0")/../e2e/lib.sh"
rounds=${ROUNDS:-5}
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

start_pair bench-vf bench-srv lazy $((2 * rounds))
guests+=(bench-novf)
"$lab" guest bench-novf --host A --peer bench-none --no-vf --bin-dir "$build" >/dev/null
"$lab" wait bench-novf 'HMLAB booted' --timeout 180 >/dev/null || fail "bench-novf did not boot"

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

: >"$tmp/virsh"
: >"$tmp/hotmig"
for ((r = 1; r <= rounds; r++)); do
    for leg in "$A $B" "$B $A"; do
        set -- $leg
        t0=$(now_ms)
        virsh -q -c "$1" migrate --live --p2p bench-novf "$2" >/dev/null || fail "virsh migrate failed"
        echo $(($(now_ms) - t0)) >>"$tmp/virsh"
        "$migrate_vm" --connect "$1" bench-vf "$2" --json >"$tmp/mv.json" || fail "migrate-vm failed"
        jq -c '{total: .total_ms, phases: [.phases[] | {(.name): .ms}] | add}' "$tmp/mv.json" >>"$tmp/hotmig"
        echo "round $r $1 -> $2: virsh $(tail -n 1 "$tmp/virsh") ms, migrate-vm $(jq .total_ms "$tmp/mv.json") ms" >&2
    done
done

result=$(result_of bench-vf)
jq -n --slurpfile v <(jq -s . "$tmp/virsh") --slurpfile h <(jq -s . "$tmp/hotmig") \
    --argjson wl "$result" '
    def median: sort | if length % 2 == 1 then .[length / 2 | floor]
                       else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    ($v[0] | median) as $vm | ([$h[0][].total] | median) as $hm |
    {benchmark: "migration", migrations_each: ($v[0] | length),
     virsh_ms_median: $vm, migrate_vm_ms_median: $hm,
     ratio: (($hm / $vm) * 1000 | round / 1000),
     phases_ms_median: ($h[0][0].phases | keys_unsorted | map({(.): ([$h[0][].phases[.]] | median)}) | add),
     workload: ($wl | {sent, received, lost, corrupt, longest_gap_ms})}'
