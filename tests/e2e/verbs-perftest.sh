#!/bin/bash
# Unmodified perftest under libhotmig-verbs across a live migration: ib_write_bw (RDMA WRITE
# with the peer's rkey, unsignaled sends with a signaled one every 100) and ib_read_lat (RDMA
# READ), each with --use_old_post_send (the ibv_wr_* API is refused by the layer). The
# client's guest moves A->B during ib_write_bw, back B->A during ib_read_lat. Asserts: both
# moves succeed, the client's layer resumed, both tools exit 0 on both ends and the client
# prints its figures.
# E2E_FABRIC=ib: the lab's InfiniBand fabric mode, the tools without -x (LID-routed, no GRH),
# no HOTMIG_VERBS_PEERS (the agents' directory); also asserts that the server's layer went to
# RTR at the mover's new LID (the LID belongs to the host's slot).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
fabric=${E2E_FABRIC:-roce}
c=vpt-c
s=vpt-s
# on IB the pingpong's names: each new name takes a lab index, and the VF pool has one VF per index
[ "$fabric" = ib ] && c=vib-p-c s=vib-p-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
"$lab" exec "$c" 'command -v ib_write_bw && command -v ib_read_lat' --timeout 20 >/dev/null ||
    fail "perftest is not in the guest image (lab/hotmig-lab copies it when installed)"
si=$("$lab" index "$s")
if [ "$fabric" = ib ]; then
    vibready "$s" "$c"
    addr=
else
    addr="-x $(vgid "$s")"
fi
env_s=$(venv "$c")
env_c=$(venv "$s")

n=0
for step in "ib_write_bw -D 40 $A $B" "ib_read_lat -n ${READ_ITERS:-60000} $B $A"; do
    read -r tool o1 o2 from to <<<"$step"
    n=$((n + 1))
    tag=VPT$n
    args="-d rxe0 $addr --use_old_post_send $o1 $o2"
    vtool "$s" "$tag" "$env_s $tool $args"
    sleep 2
    vtool "$c" "$tag" "$env_c $tool $args 198.51.100.$si"
    vconnected "$c" 120 || fail "$tool did not connect"
    sleep 5
    [ "$(vcount "$c" "$tag rc=")" = 0 ] || fail "$tool ended before the move: $(vlog "$c" "$tag")"
    migrate "$c" "$from" "$to" "$tmp/m$n.json"
    for g in "$c" "$s"; do
        vwait "$g" "$tag rc=" 1 300 || { vstuck "$g" "$tool"; fail "$g: $tool did not finish"; }
        vlog "$g" "$tag" >"$tmp/$g-$tool.log"
        cat "$tmp/$g-$tool.log" >&2
        grep -q '^rc=0$' "$tmp/$g-$tool.log" || fail "$g: $tool failed"
    done
    # the client prints the figures (ib_read_lat's server prints none)
    grep -qE '^ *[0-9]+ +[0-9]+' "$tmp/$c-$tool.log" || fail "$tool printed no figures"
    grep -q 'resumed on' "$tmp/$c-$tool.log" || fail "the client's layer did not resume ($tool)"
    echo "VERBS tool=$tool fabric=$fabric $(grep -E '^ *[0-9]+ +[0-9]+' "$tmp/$c-$tool.log" | tail -n 1 | tr -s ' ')"
    if [ "$fabric" = ib ]; then
        vwait "$s" "$tag hotmig-verbs.*moved from LID [0-9]+ to LID [0-9]+" 1 30 ||
            fail "the server's layer did not follow the client's new LID ($tool)"
    fi
done
log "ok: ib_write_bw and ib_read_lat ($fabric) across a migration each"
