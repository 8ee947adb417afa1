#!/bin/bash
# The InfiniBand identity of a VF in the lab's IB fabric mode (issue 29, item 1; docs/ib-identity.md
# "Stand-ins"): the GUIDs belong to the VF and hotmigd sets them through the identity path a real
# VF uses (POST /v1/vfs/VF/ib-identity, the netlink adapter's stand-in PF driver [pool]
# standin-guids, which the lab's SM hands to the guest's port). Guest vib-p-c on A, its peer
# vib-p-s on B, ibv_rc_pingpong -e (LID-routed) under the verbs layer between them. Asserts:
# - B's VF of the guest's slot starts with GUIDs of its own (written into B's stand-in driver as
#   another host's PF driver would have them);
# - with B's hotmigd failing every GUID set (HOTMIG_FAULT_INJECT=netlink_vf_set_guid), a move
#   A->B fails in the unplug phase (exit 14) and is rolled back: the guest runs on A with its
#   VF, the same node GUID, GID 0 and LID, its pingpong resumed;
# - then A->B and B->A succeed, each giving the destination VF the guest's GUIDs ("for VF TAP:
#   node GUID ..., port GUID ... set" in the unplug phase, hotmigd's answer); after
#   each the guest's node GUID (ibv_devinfo, sysfs) and GID 0 are those it booted with (not B's
#   VF's own, not A's home GUIDs that A's hotmigd gave its VF when the guest left), and its LID
#   is the destination slot's (A 0x100+N, B 0x200+N);
# - the pingpong ran on after each of the three (its server's layer counts more sends at each
#   suspend), its server's layer reconnected after each and followed the client's LID, and
#   neither end failed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
E2E_FABRIC=ib
c=vib-p-c
s=vib-p-s
# Iterations: more than the test lasts (under load a round trip takes 100 ms); the guests go
# with the test.
iters=${ITERS:-1000000}
tmp=$(mktemp -d)
state=$(dirname "$HOTMIG_CONFIG")
trap 'cleanup; HOTMIG_FAULT_INJECT= "$lab" restart-hotmigd B >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

[ -e "$build/lab/libhm-ib-emu.so" ] && [ -x "$build/lab/hm-ib-sma" ] ||
    fail "lab/libhm-ib-emu.so and lab/hm-ib-sma are not built in $build"
grep -q '^standin-guids = ' "$state/hosts/B/hotmigd/hotmig.conf" ||
    fail "the lab's hotmigds have no stand-in PF driver ([pool] standin-guids): a hotmigd built before it? (HOTMIG_LAB_BIN_DIR, then 'hotmig-lab up')"
vpair "$c" "$s"
vibready "$s" "$c"
n=$("$lab" index "$c")
tap=hmlab${HOTMIG_LAB_INSTANCE:-0}vf$n

# ibid GUEST LID SINCE: the port ACTIVE with LID (the SMA's console line after offset SINCE), as
# ibv_devinfo and sysfs show it; prints "NODE_GUID GID0"
ibid() {
    local g=$1 lid=$2 since=$3 out guid gid0 hex try
    hex=$(printf '0x%04x' "$lid")
    "$lab" wait "$g" "HMLAB ib port [a-z0-9]* ACTIVE lid=$hex" --since "$since" --timeout 120 \
        >/dev/null || fail "$g: the SM did not activate its port with LID $hex"
    # three tries: one exec in a loaded lab has been seen not to answer within 60 s (after a
    # rollback's re-plug here; lib.sh agent_signal), and a later one answers
    for try in 1 2 3; do
        out=$("$lab" exec "$g" 'ibv_devinfo -v -d rxe0; echo "sysfs node_guid: $(cat /sys/class/infiniband/rxe0/node_guid)"; echo "sysfs gids/0: $(cat /sys/class/infiniband/rxe0/ports/1/gids/0)"' \
            --timeout 60) && break
        log "$g: ibv_devinfo did not answer (try $try of 3)"
        out=
    done
    [ -n "$out" ] || fail "$g: ibv_devinfo failed"
    echo "$out" | grep -E 'node_guid|port_lid|GID\[|sysfs' | sed "s/^/  $g: /" >&2
    guid=$(echo "$out" | awk '/^[[:space:]]*node_guid:/ {print $2}')
    gid0=$(echo "$out" | awk '/GID\[ *0\]:/ {print $3}')
    [ -n "$guid" ] && [ -n "$gid0" ] || fail "$g: ibv_devinfo shows no node GUID or GID 0"
    echo "$out" | grep -Eq "port_lid:[[:space:]]+$lid$" || fail "$g: port_lid is not $lid"
    echo "$out" | grep -q "^sysfs node_guid: $guid$" || fail "$g: sysfs node_guid is not $guid"
    echo "$out" | grep -q "^sysfs gids/0: fe80:0000:0000:0000:" || fail "$g: sysfs gids/0 is not fe80::/64 + a GUID"
    echo "$guid $gid0"
}

# guids_of HOST: the GUIDs HOST's stand-in driver holds for the guest's VF ("NODE PORT")
guids_of() {
    echo "$(cat "$state/hosts/$1/standin-guids/$tap/node") $(cat "$state/hosts/$1/standin-guids/$tap/port")"
}

id0=$(ibid "$c" $((0x100 + n)) 0) || exit $?
log "$c on A: node GUID, GID 0: $id0; A's driver has $(guids_of A) for $tap"
# B's VF of this slot: GUIDs of B's own PF driver, not the guest's
echo 02:00:00:00:00:b0:00:01 >"$state/hosts/B/standin-guids/$tap/node"
echo 02:00:00:00:00:b0:00:02 >"$state/hosts/B/standin-guids/$tap/port"

# -e: completion events, so that the tools do not busy-poll the guests' one vCPU (the lab's
# exec, which the test uses throughout, would starve under load)
vtool "$s" VPP "$(venv "$c") ibv_rc_pingpong -d rxe0 -e -n $iters"
sleep 1
vtool "$c" VPP "$(venv "$s") ibv_rc_pingpong -d rxe0 -e -n $iters 198.51.100.$("$lab" index "$s")"
vconnected "$c" 120 || fail "the pingpong did not connect"

# 1. B's hotmigd cannot set GUIDs: the move is rolled back.
HOTMIG_FAULT_INJECT=netlink_vf_set_guid "$lab" restart-hotmigd B >/dev/null ||
    fail "restart-hotmigd B (with the fault) failed"
[ "$(vcount "$c" 'VPP rc=')" = 0 ] || fail "the pingpong ended before the first move: more iterations are needed"
mark=$("$lab" mark "$c")
migrate_undone "$c" A B "$tmp/m0.json" 14 unplug "injected fault: netlink_vf_set_guid"
vwait "$c" 'VPP hotmig-verbs.*resumed on' 1 60 || fail "the layer in $c did not resume after the rollback"
[ "$(ibid "$c" $((0x100 + n)) "$mark")" = "$id0" ] || fail "$c: its identity changed with the rollback"
HOTMIG_FAULT_INJECT= "$lab" restart-hotmigd B >/dev/null || fail "restart-hotmigd B failed"

# 2. A -> B -> A: the destination VF gets the guest's GUIDs each time.
want="$(cut -d' ' -f1 <<<"$id0")"
k=0
for move in "$A $B B $((0x200 + n))" "$B $A A $((0x100 + n))"; do
    read -r from to host lid <<<"$move"
    k=$((k + 1))
    mark=$("$lab" mark "$c")
    migrate "$c" "$from" "$to" "$tmp/m$k.json"
    jq -e '.ok' "$tmp/m$k.json" >/dev/null || fail "move $k of $c not ok"
    detail=$(jq -r '.phases[] | select(.name == "unplug") | .detail' "$tmp/m$k.json")
    grep -q "for VF $tap: node GUID $want, port GUID [0-9a-f:]* set" <<<"$detail" ||
        fail "move $k: the destination VF was not given the GUIDs: $detail"
    id=$(ibid "$c" "$lid" "$mark") || exit $?
    [ "$id" = "$id0" ] || fail "move $k to $host: node GUID and GID 0 are '$id', not '$id0' as at boot"
    # the driver of the destination's VF holds the guest's GUIDs (sysfs form vs ip-link form)
    [ "$(guids_of "$host" | cut -d' ' -f1 | tr -d ':')" = "$(tr -d ':' <<<"$want")" ] ||
        fail "move $k: $host's driver holds $(guids_of "$host") for $tap, not $want"
    log "move $k to $host: LID $(printf '0x%04x' "$lid"), identity $id kept"
done
log "A's and B's drivers now: A $(guids_of A), B $(guids_of B)"

# The pingpong went on after the rollback and after each move: the server's layer counted more
# sends at each suspend, reconnected three times, followed the client's LID both ways.
vwait "$s" 'VPP hotmig-verbs.*reconnected to its peer' 3 60 ||
    fail "the server's layer did not reconnect after the rollback and both moves"
sent=$(vlog "$s" VPP | sed -n 's/.*suspended for its peer QP [0-9]* (sent \([0-9]*\)).*/\1/p' | paste -sd' ' -)
log "the server's sends at each suspend: $sent"
read -r -a counts <<<"$sent"
[ "${#counts[@]}" -eq 3 ] && [ "${counts[1]}" -gt "${counts[0]}" ] && [ "${counts[2]}" -gt "${counts[1]}" ] ||
    fail "the pingpong did not run on after each move (the server's sends at each suspend: $sent)"
vwait "$s" "VPP hotmig-verbs.*moved from LID $((0x100 + n)) to LID $((0x200 + n))" 1 30 &&
    vwait "$s" "VPP hotmig-verbs.*moved from LID $((0x200 + n)) to LID $((0x100 + n))" 1 30 ||
    fail "the server's layer did not follow the client's LID A -> B -> A"
# a connection the last move broke fails the pingpong within its RC retries (7 x ~1 s)
sleep 15
for g in "$c" "$s"; do
    [ "$(vcount "$g" 'VPP rc=')" = 0 ] || { vlog "$g" VPP | tail -n 5 >&2; fail "$g: the pingpong ended"; }
done
echo "IBIDENTITY tap=$tap node_guid=$want gid0=$(cut -d' ' -f2 <<<"$id0") rollback_rc=14 sends=${sent// /,}"
log "ok: the guest's GUIDs followed it A -> B -> A through hotmigd; a failed GUID set was rolled back"
