#!/bin/bash
# The lab's InfiniBand fabric mode (docs/lab.md "InfiniBand fabric mode"; issue 29, item 1):
# two guests booted with --fabric ib, one on A and one on B, whose unmodified verbs programs see
# the VF stand-in as an IB port. Asserts:
# - ibv_devinfo -v: link_layer InfiniBand, PORT_ACTIVE, port_lid = the LID of the guest's host
#   slot (A 0x100+N, B 0x200+N: the SM's table), sm_lid 1, one GID: fe80::/64 + the node GUID;
#   sysfs (link_layer, lid, sm_lid, state, gids/0) says the same;
# - ibv_rc_pingpong without -g (LID-routed, no GRH) and ib_write_bw without -x pass between A
#   and B;
# - after migrate-vm moves the A guest to B, its port was INIT with LID 0 (seen by ibv_devinfo
#   in a loop in the guest) until the SM's sweep ($SM_DELAY s after the plug), then ACTIVE with
#   B's slot LID; migrate-vm's resume waited for it; the node GUID and GID 0 are the same as
#   before; ibv_rc_pingpong and ibv_ud_pingpong without -g pass, now between two guests on B;
#   the mover's old (A) LID reaches nobody, its new one reaches it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
g1=ibf-1
g2=ibf-2
sm_delay=${SM_DELAY:-6}
tmp=$(mktemp -d)
old_delay=$("$lab" sm-delay)
trap 'cleanup; "$lab" sm-delay "$old_delay" || true; rm -rf "$tmp"' EXIT

[ -e "$build/lab/libhm-ib-emu.so" ] && [ -x "$build/lab/hm-ib-sma" ] ||
    fail "lab/libhm-ib-emu.so and lab/hm-ib-sma are not built in $build"
guests+=("$g2" "$g1")
"$lab" guest "$g2" --host B --peer "$g1" --bin-dir "$build" --fabric ib >/dev/null
"$lab" guest "$g1" --host A --peer "$g2" --bin-dir "$build" --fabric ib >/dev/null
for g in "$g2" "$g1"; do
    "$lab" wait "$g" 'HMLAB booted' --timeout 240 >/dev/null || fail "$g did not boot"
done
i1=$("$lab" index "$g1")
i2=$("$lab" index "$g2")

# ibport GUEST LID: the port is ACTIVE with LID (after the SMA said so) as verbs and sysfs show
# it; prints the GID 0 ibv_devinfo shows
ibport() {
    local g=$1 lid=$2 out guid gid0
    "$lab" wait "$g" "HMLAB ib port [a-z0-9]* ACTIVE lid=$(printf '0x%04x' "$lid")" --timeout 120 \
        >/dev/null || fail "$g: the SM did not activate its port with LID $(printf '0x%04x' "$lid")"
    out=$("$lab" exec "$g" 'ibv_devinfo -v -d rxe0; for f in link_layer lid sm_lid state gids/0; do echo "sysfs $f: $(cat /sys/class/infiniband/rxe0/ports/1/$f)"; done' \
        --timeout 60) || fail "$g: ibv_devinfo failed"
    echo "$out" | grep -E 'node_guid|state:|lid:|link_layer|gid_tbl_len|GID\[|sysfs' | sed "s/^/  $g: /" >&2
    guid=$(echo "$out" | awk '/node_guid:/ {print $2}')
    [ -n "$guid" ] || fail "$g: ibv_devinfo shows no node GUID"
    gid0=$(echo "$out" | awk '/GID\[ *0\]:/ {print $3}')
    echo "$out" | grep -Eq 'link_layer:[[:space:]]+InfiniBand$' || fail "$g: link layer is not InfiniBand"
    echo "$out" | grep -Eq 'state:[[:space:]]+PORT_ACTIVE' || fail "$g: port not ACTIVE"
    echo "$out" | grep -Eq "port_lid:[[:space:]]+$lid$" || fail "$g: port_lid is not $lid"
    echo "$out" | grep -Eq 'sm_lid:[[:space:]]+1$' || fail "$g: sm_lid is not 1"
    echo "$out" | grep -Eq 'gid_tbl_len:[[:space:]]+1$' || fail "$g: more than one GID"
    # fe80::/64 + the port GUID (the node GUID, XXXX:XXXX:XXXX:XXXX), as inet_ntop prints it
    # (the lab's GUIDs have no zero group, so the only zero run is the prefix's)
    local -a w
    IFS=: read -r -a w <<<"$guid"
    [ "$gid0" = "fe80::$(printf '%x:%x:%x:%x' "0x${w[0]}" "0x${w[1]}" "0x${w[2]}" "0x${w[3]}")" ] ||
        fail "$g: GID 0 '$gid0' is not fe80::/64 + the port GUID $guid"
    echo "$out" | grep -q '^sysfs link_layer: InfiniBand$' || fail "$g: sysfs link_layer is not InfiniBand"
    echo "$out" | grep -q "^sysfs lid: $(printf '0x%x' "$lid")$" || fail "$g: sysfs lid is not $(printf '0x%x' "$lid")"
    echo "$out" | grep -q '^sysfs sm_lid: 0x1$' || fail "$g: sysfs sm_lid is not 0x1"
    echo "$out" | grep -q '^sysfs state: 4: ACTIVE$' || fail "$g: sysfs state is not ACTIVE"
    echo "$out" | grep -q "^sysfs gids/0: fe80:0000:0000:0000:$guid$" || fail "$g: sysfs gids/0 is not fe80::/64 + $guid"
    echo "$gid0"
}

# pingpong N: ibv_rc_pingpong without -g, server g2, client g1 (tag IBPPN)
pingpong() {
    local tag=IBPP$1
    vtool "$g2" "$tag" "ibv_rc_pingpong -d rxe0 -n 100 -p 1870$1"
    sleep 2
    vtool "$g1" "$tag" "ibv_rc_pingpong -d rxe0 -n 100 -p 1870$1 198.51.100.$i2"
    vfinish "$tag" ibv_rc_pingpong 100 "$g1" "$g2" fabric=ib run="$1"
    for g in "$g1" "$g2"; do
        grep -q 'local address: *LID 0x0*[1-9a-f].*GID ::$' "$tmp/$g.log" ||
            fail "$g: ibv_rc_pingpong did not run LID-routed (no LID, or a GID)"
    done
}

lid1=$((0x100 + i1))
lid2=$((0x200 + i2))
gid_a=$(ibport "$g1" "$lid1") || exit $?
ibport "$g2" "$lid2" >/dev/null || exit $?
log "table of the lab's SM: $("$lab" sm-table | tr '\n' ';')"

pingpong 1
"$lab" exec "$g1" 'command -v ib_write_bw' --timeout 20 >/dev/null ||
    fail "perftest is not in the guest image (lab/hotmig-lab copies it when installed)"
vtool "$g2" IBBW "ib_write_bw -d rxe0 -n 200 -s 8192 -p 18720"
sleep 2
vtool "$g1" IBBW "ib_write_bw -d rxe0 -n 200 -s 8192 -p 18720 198.51.100.$i2"
for g in "$g1" "$g2"; do
    vwait "$g" "IBBW rc=" 1 300 || { vstuck "$g" ib_write_bw; fail "$g: ib_write_bw did not finish"; }
    vlog "$g" IBBW >"$tmp/$g-bw.log"
    cat "$tmp/$g-bw.log" >&2
    grep -q '^rc=0$' "$tmp/$g-bw.log" || fail "$g: ib_write_bw failed"
    grep -q 'Link type *: IB' "$tmp/$g-bw.log" || fail "$g: ib_write_bw did not see an IB link"
done
grep -Eq '^ *8192 +200 ' "$tmp/$g1-bw.log" || fail "ib_write_bw printed no figures"

# The move: the port of the plugged VF stays INIT until the SM sweeps.
"$lab" sm-delay "$sm_delay"
vtool "$g1" IBST 'seen=; for i in $(seq 1 400); do o=$(ibv_devinfo -d rxe0 2>/dev/null | awk "/state:/ {s=\$2} /port_lid:/ {l=\$2} END {print s, l}"); echo "port $o"; case "$o" in PORT_INIT*) seen=1 ;; PORT_ACTIVE*) [ -n "$seen" ] && break ;; esac; sleep 0.2; done'
sleep 2
migrate "$g1" "$A" "$B" "$tmp/m1.json"
resume_ms=$(jq -r '.phases[] | select(.name == "resume") | .ms' "$tmp/m1.json")
vwait "$g1" "IBST rc=" 1 120 || fail "$g1: the port watch did not end"
vlog "$g1" IBST | uniq >"$tmp/states.log"
cat "$tmp/states.log" >&2
grep -q '^port PORT_INIT 0$' "$tmp/states.log" || fail "$g1: the plugged port was never INIT (LID 0)"
[ "$(sed -n '/^port PORT_INIT/,$p' "$tmp/states.log" | grep -c '^port PORT_ACTIVE')" -ge 1 ] ||
    fail "$g1: the port did not go INIT -> ACTIVE"
grep -q "^port PORT_ACTIVE $((0x200 + i1))$" "$tmp/states.log" ||
    fail "$g1: the port did not become ACTIVE with B's slot LID $((0x200 + i1))"
log "resume (the agent's wait for an ACTIVE port included) took $resume_ms ms; SM delay $sm_delay s"
awk -v ms="$resume_ms" -v d="$sm_delay" 'BEGIN { exit !(ms >= (d - 2) * 1000) }' ||
    fail "resume took $resume_ms ms: it did not wait for the SM's sweep ($sm_delay s after the plug)"
"$lab" sm-delay "$old_delay"
gid_b=$(ibport "$g1" "$((0x200 + i1))") || exit $?
[ "$gid_a" = "$gid_b" ] || fail "$g1: GID 0 changed with the move ($gid_a -> $gid_b)"
log "$g1 kept GID 0 $gid_a; its LID went from $lid1 (A's slot $i1) to $((0x200 + i1)) (B's)"
pingpong 2
# UD address handles by LID (ibv_ud_pingpong without -g), now both on B.
vtool "$g2" IBUD "ibv_ud_pingpong -d rxe0 -n 100 -p 18730"
sleep 2
vtool "$g1" IBUD "ibv_ud_pingpong -d rxe0 -n 100 -p 18730 198.51.100.$i2"
vfinish IBUD ibv_ud_pingpong 100 "$g1" "$g2" fabric=ib run=ud
# A DLID routes to whoever holds the LID now: A's slot LID of the mover is held by nobody (its
# address answers no one), B's is the mover's.
"$lab" exec "$g2" "! ping -c 2 -W 2 198.18.$((lid1 >> 8)).$((lid1 & 255)) && ping -c 2 -W 5 198.18.$(((0x200 + i1) >> 8)).$(((0x200 + i1) & 255))" \
    --timeout 60 >&2 || fail "LID $lid1 still reaches a port, or $((0x200 + i1)) does not reach $g1"
echo "IBFABRIC lid_a=$lid1 lid_b=$((0x200 + i1)) gid0=$gid_a resume_ms=$resume_ms sm_delay_s=$sm_delay"
