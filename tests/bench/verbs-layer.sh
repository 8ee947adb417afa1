#!/bin/bash
# The verbs layer's data-path cost on the lab, interleaved on the same guest pair: perftest's
# ib_send_lat (t_avg) and ib_write_bw (BW average), each ROUNDS times without and with
# LD_PRELOAD=libhotmig-verbs.so, alternating. Prints one line per run and the medians with
# their ratio ("VERBS-BENCH ..."). It measures; it asserts nothing about the figures.
# Blackouts per migration come from tests/e2e/verbs-*.sh (the layers' "paused ... ms" lines).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/../e2e/verbs-lib.sh"
rounds=${ROUNDS:-3}
c=vbench-c
s=vbench-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

vpair "$c" "$s"
si=$("$lab" index "$s")
gid=$(vgid "$s")
run_no=0

# one TAG TOOL ARGS PRELOAD(0|1): the client's figure row into $tmp/row (called directly, not
# in $(...): the lab's exec in a command substitution left the next exec of that guest hanging)
one() {
    local tag=$1 tool=$2 args=$3 pre=$4 env=''
    [ "$pre" = 1 ] &&
        env="LD_PRELOAD=libhotmig-verbs.so HOTMIG_VERBS_PEERS=$(vpeers "$c"),$(vpeers "$s") HOTMIG_VERBS_KEY=$HM_VERBS_KEY"
    vtool "$s" "$tag" "$env $tool -d rxe0 -x $gid --use_old_post_send $args"
    sleep 2
    vtool "$c" "$tag" "$env $tool -d rxe0 -x $gid --use_old_post_send $args 198.51.100.$si"
    vwait "$c" "$tag rc=" 1 600 || fail "$tool did not finish"
    vwait "$s" "$tag rc=" 1 60 || fail "$tool's server did not finish"
    vlog "$c" "$tag" | grep -q '^rc=0$' || fail "$tool failed: $(vlog "$c" "$tag")"
    vlog "$c" "$tag" | grep -E '^ *[0-9]+ +[0-9]+ ' | tail -n 1 | tr -s ' ' >"$tmp/row"
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

for tool in "ib_send_lat -n ${LAT_ITERS:-1000} 6" "ib_write_bw -n ${BW_ITERS:-300} 4"; do
    read -r name opt iters col <<<"$tool"
    : >"$tmp/$name.0"
    : >"$tmp/$name.1"
    for r in $(seq 1 "$rounds"); do
        for pre in 0 1; do
            run_no=$((run_no + 1))
            one "VB$run_no" "$name" "$opt $iters" "$pre"
            row=$(cat "$tmp/row")
            v=$(awk -v c="$col" '{print $c}' <<<"$row")
            echo "VERBS-BENCH-RUN tool=$name round=$r layer=$pre value=$v row='$row'"
            echo "$v" >>"$tmp/$name.$pre"
        done
    done
    m0=$(median <"$tmp/$name.0")
    m1=$(median <"$tmp/$name.1")
    unit=$([ "$name" = ib_send_lat ] && echo t_avg_usec || echo bw_avg_MBps)
    echo "VERBS-BENCH tool=$name metric=$unit rounds=$rounds without=$m0 with=$m1" \
        "ratio=$(awk -v a="$m1" -v b="$m0" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')"
done
