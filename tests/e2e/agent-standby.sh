#!/bin/bash
# The agent's standby RDMA device (issue 30, item 1) in a lab guest, with the real kernel and
# rdma_rxe: the agent restarted with --standby on the guest's control NIC makes soft-RoCE there
# at each prepare (the inventory says ready, with the time the kernel took; ibv_devinfo sees its
# port ACTIVE), hands the processes the VF's device at resume (never the standby) and removes
# the standby after it; three rounds. Then the kernel's refusal (the VF's NIC, which has rxe0)
# and --standby on a NIC the guest lacks: the inventory says why, and prepare/resume work
# without a standby. Prints "STANDBY made_ms=..."
# with the kernel's times.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
g=sb-g
start_guest "$g" A sb-peer
"$lab" wait "$g" 'agent started' --timeout 300 >/dev/null || fail "$g: no agent"
read -r ifc _ <<<"$(vctl "$g")"
[ -n "$ifc" ] || fail "$g: no control NIC"
"$lab" exec "$g" "test -d /sys/module/rdma_rxe" --timeout 60 || fail "$g: no rdma_rxe"

standby() { vagent '{"execute":"inventory"}' | jq -c '.return.standby'; }

vagent_restart "$g" --standby "$ifc"
vchannel_open "$g"
s=$(standby)
jq -e --arg i "$ifc" '.netdev == $i and .device == "hmsb0" and .state == "absent"' <<<"$s" >/dev/null ||
    fail "before a move the inventory's standby is not absent: $s"
made=()
for n in 1 2 3; do
    p=$(vagent '{"execute":"prepare","arguments":{"timeout_ms":30000}}')
    jq -e '.return.device == "rxe0"' <<<"$p" >/dev/null || fail "prepare $n: $p"
    s=$(standby)
    jq -e '.state == "ready" and .created_ms >= 0' <<<"$s" >/dev/null || fail "prepare $n made no standby: $s"
    made+=("$(jq -r .created_ms <<<"$s")")
    "$lab" exec "$g" "ibv_devinfo -d hmsb0 | grep -q PORT_ACTIVE && rdma link show hmsb0/1 | grep -q 'netdev $ifc'" --timeout 180 ||
        fail "prepare $n: hmsb0 is not an active soft-RoCE port on $ifc"
    r=$(vagent '{"execute":"resume","arguments":{"timeout_ms":60000}}')
    jq -e '.return.device == "rxe0"' <<<"$r" >/dev/null || fail "resume $n handed another device than the VF's: $r"
    gone=0
    for _ in $(seq 1 60); do
        [ "$(standby | jq -r .state)" = absent ] && { gone=1; break; }
        sleep 0.5
    done
    [ "$gone" = 1 ] || fail "resume $n: the standby was not removed: $(standby)"
done
vchannel_close

# The kernel's refusal through netlink: the VF's NIC carries rxe0 already (EEXIST).
vf=$(vvfif "$g")
[ -n "$vf" ] || fail "$g: no VF NIC"
vagent_restart "$g" --standby "$vf" --standby-device hmsb1
vchannel_open "$g"
p=$(vagent '{"execute":"prepare","arguments":{"timeout_ms":30000}}')
jq -e '.return.device == "rxe0"' <<<"$p" >/dev/null || fail "prepare with a refused standby: $p"
s=$(standby)
jq -e '.state == "absent" and (.error | test("rdma link add .hmsb1. type rxe netdev"))' <<<"$s" >/dev/null ||
    fail "the kernel's refusal is not said: $s"
echo "refused by the kernel: $(jq -r .error <<<"$s")"
r=$(vagent '{"execute":"resume","arguments":{"timeout_ms":60000}}')
jq -e '.return.device == "rxe0"' <<<"$r" >/dev/null || fail "resume after a refused standby: $r"
vchannel_close

vagent_restart "$g" --standby nosuch0
vchannel_open "$g"
s=$(standby)
jq -e '.state == "unavailable" and (.error | test("No network interface .nosuch0."))' <<<"$s" >/dev/null ||
    fail "a missing NIC is not said: $s"
p=$(vagent '{"execute":"prepare","arguments":{"timeout_ms":30000}}')
jq -e '.return.device == "rxe0"' <<<"$p" >/dev/null || fail "prepare without a standby: $p"
r=$(vagent '{"execute":"resume","arguments":{"timeout_ms":60000}}')
jq -e '.return.device == "rxe0"' <<<"$r" >/dev/null || fail "resume without a standby: $r"
vchannel_close
vagent_restart "$g" # as the guest's init starts it

removed=$(grep -ao "standby RDMA device 'hmsb0' removed in [0-9]*" "$("$lab" console "$g")" | awk '{print $NF}' | paste -sd, -)
echo "STANDBY netdev=$ifc made_ms=$(IFS=,; echo "${made[*]}") removed_ms=$removed"
log "ok: the standby device made at each prepare, never handed out, removed at resume; a missing NIC said"
