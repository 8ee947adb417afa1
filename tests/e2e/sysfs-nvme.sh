#!/bin/bash
# SR-IOV discovery against a real kernel's sysfs: a lab guest with QEMU's emulated NVMe
# controller offering 4 SR-IOV VFs (hotmig-lab guest --nvme-sriov 4). In the guest, VFs are
# enabled through sriov_numvfs (with sriov_drivers_autoprobe 0, so no driver takes them) and
# hotmig-sriov, run on the real /sys as root, must list the PF and its VFs with the counts,
# virtfnN/physfn links and SR-IOV capability (read through libpci from the kernel's config
# file) that the kernel shows; then again with the VFs disabled. See docs/sriov.md.
source "$(dirname "$0")/lib.sh"
g=sn-g
vfs=4
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

[ -x "$build/hotplug/hotmig-sriov" ] || fail "$build/hotplug/hotmig-sriov is not built"
guests+=("$g")
"$lab" guest "$g" --host A --peer sn-peer --no-vf --nvme-sriov "$vfs" --bin-dir "$build" >/dev/null
"$lab" wait "$g" 'HMLAB booted' --timeout 240 >/dev/null || fail "$g did not boot"

# in_guest CMD: run CMD in the guest, its output on stdout; fail unless it exits 0.
in_guest() {
    "$lab" exec "$g" "$1" --timeout 120 || fail "in $g: '$1' failed"
}

in_guest 'command -v hotmig-sriov' >/dev/null
pf=$(in_guest 'for d in /sys/bus/pci/devices/*; do [ -e "$d/sriov_totalvfs" ] && echo "${d##*/}"; done')
[ "$(wc -l <<<"$pf")" = 1 ] && [ -n "$pf" ] || fail "expected one SR-IOV PF in $g, found: '$pf'"
dir=/sys/bus/pci/devices/$pf
log "PF $pf: sriov_totalvfs $(in_guest "cat $dir/sriov_totalvfs"), driver $(in_guest "basename \$(readlink $dir/driver)")"

# check JSON JQ_FILTER MESSAGE: the filter must hold on the last hotmig-sriov --json output.
check() {
    jq -e "$1" "$tmp/out.json" >/dev/null || { cat "$tmp/out.json" >&2; fail "$2"; }
}

log "before: VFs disabled"
in_guest 'hotmig-sriov --json' >"$tmp/out.json"
check ".pfs | length == 1" "hotmig-sriov does not list exactly one PF"
check ".pfs[0] | .address == \"$pf\" and .kind == \"pf\" and .vendor_id == \"1b36\"
       and .device_id == \"0010\" and .driver == \"nvme\" and .total_vfs == $vfs
       and .num_vfs == 0 and .vfs == [] and .config_checked == true
       and .vf_device_id == \"0010\" and .vf_offset >= 1
       and .device_name == \"QEMU NVM Express Controller\"" "the PF is not as the kernel shows it"

log "enabling $vfs VFs"
in_guest "echo 0 >$dir/sriov_drivers_autoprobe && echo $vfs >$dir/sriov_numvfs"
in_guest 'hotmig-sriov' >&2
in_guest 'hotmig-sriov --json' >"$tmp/out.json"
check ".pfs[0] | .num_vfs == $vfs and (.vfs | length) == $vfs and .config_checked == true" \
    "hotmig-sriov does not see $vfs VFs"
check "[.pfs[0].vfs[] | .kind == \"vf\" and .pf_address == \"$pf\" and .driver == null
        and .vendor_id == \"1b36\" and .device_id == \"0010\" and .total_vfs == null
        and .netdev == null and .iommu_group == null] | all" "a VF is not as expected"
check "[.pfs[0].vfs | to_entries[] | .key == .value.vf_index] | all" "VFs out of index order"
# The kernel's links, read in the guest, against what hotmig-sriov made of them.
for ((i = 0; i < vfs; i++)); do
    vf=$(in_guest "basename \$(readlink $dir/virtfn$i)")
    back=$(in_guest "basename \$(readlink /sys/bus/pci/devices/$vf/physfn)")
    [ "$back" = "$pf" ] || fail "the kernel's $vf/physfn points to '$back', not $pf"
    check ".pfs[0].vfs[$i].address == \"$vf\"" "VF $i: the kernel says $vf, hotmig-sriov does not"
done
first=$(jq -r '.pfs[0].vfs[0].address' "$tmp/out.json")
last=$(jq -r ".pfs[0].vfs[$((vfs - 1))].address" "$tmp/out.json")

log "one VF by address"
in_guest "hotmig-sriov --json --address $last" >"$tmp/out.json"
check ".function | .address == \"$last\" and .pf_address == \"$pf\" and .vf_index == $((vfs - 1))" \
    "hotmig-sriov --address $last is not VF $((vfs - 1)) of $pf"

log "not a PF or VF: an error naming the path, exit 1"
set +e
out=$("$lab" exec "$g" 'hotmig-sriov --address 0000:00:00.0; echo "rc=$?"')
set -e
grep -q "neither an SR-IOV PF (no '/sys/bus/pci/devices/0000:00:00.0/sriov_totalvfs')" <<<"$out" &&
    grep -q '^rc=1$' <<<"$out" || fail "hotmig-sriov --address 0000:00:00.0: $out"

log "disabling the VFs"
in_guest "echo 0 >$dir/sriov_numvfs"
in_guest 'hotmig-sriov --json' >"$tmp/out.json"
check ".pfs[0] | .num_vfs == 0 and .vfs == [] and .total_vfs == $vfs" "the VFs are still listed"

echo "PASS sysfs-nvme: PF $pf ($vfs VFs: $first .. $last) as the guest kernel shows it"
