#!/bin/bash
# Guest memory survives live migration on the lab: plain virsh (no hotmig), one guest running
# hm-memck (64 pages, each rewritten every 10 ms after checking it kept its last value), one
# round trip A -> B -> A at --bandwidth 4 MiB/s (a ~30 s pre-copy of several passes, as in
# migrate-options). Fails when any page arrived older than the source last wrote it, or when
# the guest's kernel crashed (lib.sh's scan).
#
# Under QEMU 7.2's TCG such writes are lost when the guest's RAM is a multiple of 256 KiB
# (docs/reliability.md, "Guest kernel crashes on the lab"); the lab's emulator, lab/qemu-lab,
# sizes it around that. HOTMIG_LAB_EMULATOR=/usr/bin/qemu-system-x86_64 shows the failure.
# The agent and the VF driver are stopped first: their wake-ups switch address spaces, which
# flushes TCG's TLB and so hides most lost writes; the guest's own kernel is what they break.
source "$(dirname "$0")/lib.sh"
g=mem-g
guests+=("$g")
"$lab" guest "$g" --host A --peer mem-peer --no-vf --bin-dir "$build" >/dev/null
"$lab" wait "$g" 'HMLAB booted' --timeout 180 >/dev/null || fail "$g did not boot"
"$lab" exec "$g" 'command -v hm-memck' --timeout 90 >/dev/null ||
    fail "the guest has no hm-memck (build the target hm-memck)"
"$lab" exec "$g" 'kill $(pidof hotmig-agent) $(pidof hm-vf-driver) 2>/dev/null; (setsid hm-memck 64 10 </dev/null >/dev/console 2>&1 &)' --timeout 90 ||
    fail "cannot start hm-memck in $g"
"$lab" wait "$g" 'HMLAB memck started' --timeout 30 >/dev/null || fail "hm-memck did not start"
console=$("$lab" console "$g")
read -r a_addr a_min _ < <("$lab" migration-ports A)
read -r b_addr b_min _ < <("$lab" migration-ports B)

# move FROM_URI TO_URI TO_HOST MIGRATEURI
move() {
    local start=$SECONDS lost mark
    virsh -c "$1" migrate --live --p2p "$g" "$2" --migrateuri "$4" --bandwidth 4 ||
        fail "virsh migrate $g to $3 failed"
    require_where "$g" "$3"
    # hm-memck checks every page in its next pass and says it is alive every 2 s: a lost write
    # can also stop the guest (a stale lock, timer or wait queue) without an oops.
    mark=$("$lab" mark "$g")
    "$lab" wait "$g" 'HMLAB memck alive' --since "$mark" --timeout 30 >/dev/null ||
        fail "hm-memck in $g said nothing for 30 s after the migration to $3"
    lost=$(grep -a 'HMLAB memck LOST' "$console" || true)
    [ -z "$lost" ] || fail "guest writes were lost in the migration to $3: $lost"
    log "to $3 in $((SECONDS - start)) s: every page as the source left it, hm-memck runs"
}
move "$A" "$B" B "tcp://$b_addr:$((b_min + 6))"
move "$B" "$A" A "tcp://$a_addr:$((a_min + 6))"
log "ok: 2 migrations at 4 MiB/s, no write lost"
