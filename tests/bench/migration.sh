#!/bin/bash
# What hotmig costs on top of a plain live migration, on the lab (which must be up:
# hotmig-lab up). Prints ONE JSON object on stdout (progress on stderr):
#
#   HM_BUILD=build ROUNDS=3 bash tests/bench/migration.sh
#
# A benchmark: it measures and prints, it asserts nothing about the figures. Parts, in this
# order (BENCH_PARTS, default "baselines ratio fallback evacuation"; each boots its guests and destroys
# them before the next, so that at most four TCG guests share the cores):
#
# ratio       Two guests of the same size (BENCH_MEMORY MiB, default 256) on A: 'bench-vf' holds
#             the VF stand-in and runs the RDMA ping-pong client (its server 'bench-srv' runs on
#             B), 'bench-novf' has no VF. ROUNDS round trips A->B->A of each, interleaved:
#             'virsh migrate --live --p2p' for the guest without VF, migrate-vm for the one with
#             it. Medians of both, their ratio, migrate-vm's per-phase medians, and for each
#             migrate-vm run "migration complete -> verbs traffic resumed on the target":
#             from migrate-vm's own 'migrate ok' progress line to the workload's first
#             {"event":"resumed","side":"local"} console line after it (its RC QP is connected
#             on the new device; the client posts its next message at once). Both are stamped
#             with this machine's clock as they appear (migrate-vm -v's stderr through a pipe,
#             the guest's serial console file through tail -F), so guest clocks play no part.
#             The same stamps give the steps in between: the guest's "HMLAB vf up" (RDMA port
#             ACTIVE), the agent seeing the device, the process answering RESUME.
# fallback    A pair 'bench-fb' (client, A) / 'bench-fbs' (server, B) running hm-pingpong
#             --fallback tcp: ROUNDS round trips of the client with migrate-vm. Per migration,
#             the workload's blackout (its cycle's blackout_ms: the longest gap between echoes,
#             on RDMA or TCP, from the quiesce to RDMA again) minus the downtime libvirt
#             reported for that migration (the report's migrate detail "downtime N ms").
# baselines   One guest 'bench-vf' (VF stand-in, RDMA ping-pong client; server 'bench-srv' on B)
#             moved six times a round, interleaved: bare 'virsh migrate' with the VF detached
#             beforehand, the manual sequence (detach, wait for the guest, virsh migrate,
#             attach) and migrate-vm, each once per direction. Medians with min/max, the
#             limit (bare + unplug + port-up) and hotmig's share (migrate-vm minus it). Each
#             move's libvirt job time (domjobinfo --completed on the destination) beside it,
#             to tell the copy from what a caller spends around it; each bare move's
#             switch-over (the destination's "Resumed Migrated" event), and the limits and
#             shares against it (migrate-vm plugs from its switch-over on).
# evacuation  EVAC_GUESTS (4) guests of EVAC_MEMORY MiB (default 192: four 256 MiB TCG guests
#             with traffic do not fit two cores) on A, each with the VF stand-in and the agent;
#             with EVAC_WORKLOAD=1 (default) they run ping-pong pairs among themselves (guest
#             1 client of guest 2, 3 of 4). All of them evacuated A->B, then back B->A, with
#             concurrency 1, 2 and 4 (that many migrate-vm processes at once, a bash job pool),
#             the levels' order rotating each round; makespan medians per level (both
#             directions count).
#
#             Also per migrate-vm run: the workload's own quiesce and reconnect (its HMWL lines'
#             ms), and hotmig's share less them.
#
# ROUNDS (default 5). HM_BUILD: the build directory. Knobs for comparisons (docs/benchmarks.md):
# BENCH_COMPARE=PATH (baselines: a second migrate-vm, e.g. an older build, moved in each round
# right after ours), BENCH_AGENT_NICE=N (baselines: the guest agent's nice, 0 by default),
# BENCH_SPIN=N (baselines: N busy loops in the guest, as polling MPI ranks), BENCH_RTO_MIN=T
# (fallback: TCP's rto_min on both guests' control route).
source "$(dirname "$0")/../e2e/lib.sh"
rounds=${ROUNDS:-5}
parts=${BENCH_PARTS:-baselines ratio fallback evacuation}
memory=${BENCH_MEMORY:-256}
evac_n=${EVAC_GUESTS:-4}
evac_memory=${EVAC_MEMORY:-192}
evac_workload=${EVAC_WORKLOAD:-1}
tmp=$(mktemp -d /tmp/hm-bench.XXXXXX)
stampers=()
trap 'for p in "${stampers[@]}"; do kill -- -"$p" 2>/dev/null; done; cleanup; [[ -n ${BENCH_KEEP:-} ]] || rm -rf "$tmp"' EXIT

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# stamp: prefixes each line of stdin with this machine's clock (seconds, microseconds).
stamp() {
    local l
    while IFS= read -r l; do
        printf '%s %s\n' "$EPOCHREALTIME" "$l"
    done
}

# console_stamp NAME: from now on, the guest's console lines land stamped in $tmp/NAME.con.
console_stamp() {
    local console
    console=$("$lab" console "$1")
    : >"$tmp/$1.con"
    setsid bash -c 'tail -n0 -F "$0" 2>/dev/null | while IFS= read -r l; do
        printf "%s %s\n" "$EPOCHREALTIME" "$l"; done' "$console" >>"$tmp/$1.con" &
    stampers+=($!)
}

# stamped_first FILE AFTER REGEX: the stamp of the first line of FILE stamped at or after AFTER
# that matches REGEX (awk), or nothing.
stamped_first() {
    awk -v t="$2" -v re="$3" '$1 >= t && $0 ~ re { print $1; exit }' "$1"
}

# stamped_wait FILE AFTER REGEX TIMEOUT_S: as stamped_first, waiting for the line.
stamped_wait() {
    local deadline=$(($(now_ms) + $4 * 1000)) t
    while :; do
        t=$(stamped_first "$1" "$2" "$3")
        [[ -n $t ]] && { echo "$t"; return 0; }
        (($(now_ms) < deadline)) || return 1
        sleep 0.05
    done
}

# ms_between T0 T1: milliseconds from stamp T0 to T1 (one decimal).
ms_between() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'
}

# mv_run NAME SRC DST OUT: migrate-vm -v --json; the report in OUT.json, its progress lines
# stamped in OUT.mv. Returns migrate-vm's status.
mv_run() {
    local rc
    set +e
    "${MV_BIN:-$migrate_vm}" -v --connect "$2" "$1" "$3" --json 2>&1 >"$4.json" | stamp >"$4.mv"
    rc=${PIPESTATUS[0]}
    set -e
    ((rc == 0)) || log "migrate-vm $1: exit status $rc"
    return "$rc"
}

# workload_own START MV PORTUP: what the workload itself spent inside the migrate-vm run whose
# stamped progress is MV (started at START), as JSON: quiesce_ms, its own quiesce (the HMWL
# quiesced line's ms: closing its verbs resources, inside the prepare phase); reconnect_ms, its
# reconnect after the port came up (PORTUP, the "HMLAB vf up" stamp) and before migrate-vm's
# end: from the later of its RESUME (the resumed line's stamp less its ms) and PORTUP to the
# earlier of its QP connected again and migrate-vm's end (what of it falls before the port is
# up is in port-up already, a lazy reconnect may end after the agent answered).
workload_own() {
    local tend q r
    tend=$(tail -n 1 "$2" | cut -d' ' -f1)
    q=$(awk -v t="$1" '$1 >= t && /HMWL .*"event":"quiesced".*"side":"local"/ { print; exit }' \
        "$tmp/bench-vf.con")
    r=$(awk -v t="$1" '$1 >= t && /HMWL .*"event":"resumed".*"side":"local"/ { print; exit }' \
        "$tmp/bench-vf.con")
    jq -nc --arg q "$q" --arg r "$r" --arg tend "$tend" --arg up "${3:-}" '
        def ms: capture("\"ms\":(?<v>[0-9]+)").v | tonumber;
        def at: split(" ")[0] | tonumber;
        {quiesce_ms: (if $q == "" then null else ($q | ms) end),
         reconnect_ms: (if $r == "" or $up == "" then null else
            ([([($r | at), ($tend | tonumber)] | min)
              - ([($r | at) - ($r | ms) / 1000, ($up | tonumber)] | max), 0] | max)
            | . * 10000 | round / 10 end)}'
}

# bench_guest NAME HOST PEER MEMORY [WORKLOAD ARGS]: boots a guest (destroyed at exit).
bench_guest() {
    local wl=()
    [[ -n ${5:-} ]] && wl=(--workload "$5")
    guests+=("$1")
    "$lab" guest "$1" --host "$2" --peer "$3" --memory "$4" --bin-dir "$build" "${wl[@]}" >/dev/null
}

destroy_guests() {
    local g uri
    for g in "$@"; do
        for uri in "$A" "$B"; do
            virsh -q -c "$uri" destroy "$g" >/dev/null 2>&1 || true
        done
    done
}

machine_json() {
    local os cpu libvirt qemu
    os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
    cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
    libvirt=$(libvirtd --version 2>/dev/null | awk '{print $NF}')
    qemu=$(qemu-system-x86_64 --version 2>/dev/null | head -n 1 | awk '{print $4}')
    jq -n --arg os "$os" --arg cpu "$cpu" --arg kernel "$(uname -r)" --arg libvirt "$libvirt" \
        --arg qemu "$qemu" --argjson cpus "$(nproc)" \
        --argjson mem "$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)" \
        --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
        '{cpus: $cpus, cpu_model: $cpu, memory_gib: $mem, os: $os, kernel: $kernel,
          libvirt: $libvirt, qemu: $qemu, accel: "tcg (lab guests, 1 vCPU each)",
          loadavg_at_start: $load}'
}

jq_median='def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                       else (.[length / 2 - 1] + .[length / 2]) / 2 end;'

how_traffic='host clock: from migrate-vm -v progress line "migrate ok" to the client'"'"'s first HMWL {"event":"resumed","side":"local"} console line after it (RC QP connected on the new device; the next message is posted at once); steps: "HMLAB vf up" (port ACTIVE), the agent'"'"'s "RDMA device active", its "process answered ... RESUME"'
how_fallback='per migration: the client cycle'"'"'s blackout_ms (longest gap between delivered echoes, RDMA or TCP, from the quiesce to RDMA again) minus the downtime of migrate-vm'"'"'s report (libvirt job statistics)'
how_baselines='one guest with the VF stand-in and the RDMA ping-pong client, moved A<->B six times a round (bare, manual, migrate-vm, each once per direction). bare: VF detached and gone before the clock starts, then virsh migrate --live --p2p alone. manual: detach-device-alias + virsh event device-removed, virsh migrate, attach-device, timed from the detach. to_traffic: host clock from the start of the move (bare: of the detach) to the client'"'"'s first HMWL resumed line. port_up: migrate-vm'"'"'s "migrate ok" line to the guest'"'"'s "HMLAB vf up". hotmig_share = migrate-vm total - bare median - that run'"'"'s unplug phase - its port_up; hotmig_share_outside_copy = the same with the run'"'"'s own migrate phase for the bare median (what migrate-vm adds around the copy, free of the copies'"'"' spread). libvirt_job_ms: each move'"'"'s completed job on the destination (virsh domjobinfo --completed, Time elapsed: from the job'"'"'s start, the destination QEMU'"'"'s start included, to the end of the copy); migrate_step_beyond_job_ms: the move'"'"'s migrate step (virsh migrate, or migrate-vm'"'"'s migrate phase) less it: libvirt'"'"'s finish and confirm and the caller'"'"'s own calls; hotmig_share_same_copy = migrate-vm total - its unplug - its port_up - (its own libvirt job + the bare moves'"'"' median migrate step beyond their job): the share against a bare move whose copy took as long as this one'"'"'s. Since migrate-vm plugs at the switch-over (the destination'"'"'s Resumed Migrated event) instead of when libvirt'"'"'s call returns, its "migrate ok" and so port_up start there; the limit above still counts the whole bare call. bare_switch_over_ms: from virsh migrate'"'"'s start to the destination'"'"'s Resumed Migrated (virsh event --timestamp); bare_after_switch_over_ms: the rest of the call (libvirt'"'"'s Confirm); limit_overlapped_ms_median = bare switch-over median + unplug + port_up medians; hotmig_share_overlapped = total - bare switch-over median - unplug - port_up; hotmig_share_overlapped_same_copy = total - unplug - port_up - (own job + the bare moves'"'"' median switch-over beyond their job)'
how_evacuation='wall clock from the first migrate-vm start to the last one'"'"'s end, CONCURRENCY processes at once; both directions of each round count'

machine=$(machine_json)
log "machine: $(jq -c . <<<"$machine")"
echo '{}' >"$tmp/ratio.json"
echo '{}' >"$tmp/fallback.json"
echo '{}' >"$tmp/evacuation.json"
echo '{}' >"$tmp/baselines.json"

# ---- ratio: migrate-vm against virsh migrate, and the resume ---------------------------------
part_ratio() {
    local r leg t0 tmig ttraffic out
    bench_guest bench-srv B bench-vf "$memory" "--role server --mode lazy"
    bench_guest bench-vf A bench-srv "$memory" \
        "--role client --peer 198.51.100.$("$lab" index bench-srv) --mode lazy --cycles $((2 * rounds)) --tail 3"
    guests+=(bench-novf)
    "$lab" guest bench-novf --host A --peer bench-none --no-vf --memory "$memory" \
        --bin-dir "$build" >/dev/null
    "$lab" wait bench-srv 'HMWL .*"event":"ready"' --timeout 240 >/dev/null || fail "bench-srv did not get ready"
    "$lab" wait bench-vf 'HMWL .*"event":"progress"' --timeout 240 >/dev/null || fail "bench-vf sends no traffic"
    "$lab" wait bench-novf 'HMLAB booted' --timeout 240 >/dev/null || fail "bench-novf did not boot"
    console_stamp bench-vf

    : >"$tmp/virsh"
    : >"$tmp/hotmig"
    : >"$tmp/resumes"
    for ((r = 1; r <= rounds; r++)); do
        for leg in "$A $B" "$B $A"; do
            set -- $leg
            t0=$(now_ms)
            virsh -q -c "$1" migrate --live --p2p bench-novf "$2" >/dev/null || fail "virsh migrate failed"
            echo $(($(now_ms) - t0)) >>"$tmp/virsh"
            out=$tmp/mv-ratio-$r-$([[ $1 == "$A" ]] && echo ab || echo ba)
            mv_run bench-vf "$1" "$2" "$out" || { cat "$out.json" "$out.mv" >&2; fail "migrate-vm failed"; }
            tmig=$(awk '$3 == "migrate" && $4 == "ok:" { print $1; exit }' "$out.mv")
            [[ -n $tmig ]] || fail "no 'migrate ok' progress line from migrate-vm"
            ttraffic=$(stamped_wait "$tmp/bench-vf.con" "$tmig" \
                'HMWL .*"event":"resumed".*"side":"local"' 30) ||
                fail "no verbs traffic on the target within 30 s of the migration"
            echo "$out $tmig $ttraffic" >>"$tmp/resumes"
            log "round $r $1 -> $2: virsh $(tail -n 1 "$tmp/virsh") ms, migrate-vm $(jq .total_ms "$out.json") ms, migration complete -> verbs traffic $(ms_between "$tmig" "$ttraffic") ms"
        done
    done
    # The steps in between, once the console has them all (the guest may print its "vf up"
    # after the traffic resumed): the first of each after its migration.
    local tvf tagent tproc
    while read -r out tmig ttraffic; do
        tvf=$(stamped_first "$tmp/bench-vf.con" "$tmig" '^[0-9.]+ HMLAB vf up ')
        tagent=$(stamped_first "$tmp/bench-vf.con" "$tmig" 'resume: RDMA device active')
        tproc=$(stamped_first "$tmp/bench-vf.con" "$tmig" 'process answered: .*request=RESUME')
        jq -c --argjson traffic "$(ms_between "$tmig" "$ttraffic")" \
            --argjson vf "$([[ -n $tvf ]] && ms_between "$tmig" "$tvf" || echo null)" \
            --argjson agent "$([[ -n $tagent ]] && ms_between "$tmig" "$tagent" || echo null)" \
            --argjson proc "$([[ -n $tproc ]] && ms_between "$tmig" "$tproc" || echo null)" \
            '{total: .total_ms, phases: ([.phases[] | {(.name): .ms}] | add),
              to_traffic: $traffic, to_port_active: $vf, to_agent_sees_device: $agent,
              to_process_resumed: $proc}' "$out.json" >>"$tmp/hotmig"
    done <"$tmp/resumes"

    local result
    result=$(result_of bench-vf)
    jq -n --slurpfile v <(jq -s . "$tmp/virsh") --slurpfile h <(jq -s . "$tmp/hotmig") \
        --argjson wl "$result" --argjson mem "$memory" --arg how "$how_traffic" "$jq_median"'
        ($v[0] | median) as $vm | ([$h[0][].total] | median) as $hm |
        {benchmark: "migration", memory_mib: $mem, migrations_each: ($v[0] | length),
         virsh_ms_median: $vm, migrate_vm_ms_median: $hm,
         ratio: (($hm / $vm) * 1000 | round / 1000),
         phases_ms_median: ($h[0][0].phases | keys_unsorted
                            | map({(.): ([$h[0][].phases[.]] | median)}) | add),
         workload: ($wl | {sent, received, lost, corrupt, longest_gap_ms}),
         migration_complete_to_verbs_traffic_ms: {
           median: ([$h[0][].to_traffic] | median),
           values: [$h[0][].to_traffic],
           steps_median: {
             port_active: ([$h[0][].to_port_active | select(. != null)] | median),
             agent_sees_device: ([$h[0][].to_agent_sees_device | select(. != null)] | median),
             process_resumed: ([$h[0][].to_process_resumed | select(. != null)] | median),
             verbs_traffic: ([$h[0][].to_traffic] | median)},
           blackout_without_fallback_ms_median: ([$wl.cycles[].blackout_ms | select(. != null)] | median),
           how: $how}}' \
        >"$tmp/ratio.json"
    destroy_guests bench-vf bench-srv bench-novf
}

# ---- fallback: blackout over TCP minus libvirt's downtime --------------------------------------
part_fallback() {
    local r leg out downtime
    bench_guest bench-fbs B bench-fb "$memory" "--role server --mode lazy --fallback tcp"
    bench_guest bench-fb A bench-fbs "$memory" \
        "--role client --peer 198.51.100.$("$lab" index bench-fbs) --mode lazy --fallback tcp --cycles $((2 * rounds)) --tail 3"
    "$lab" wait bench-fbs 'HMWL .*"event":"ready"' --timeout 240 >/dev/null || fail "bench-fbs did not get ready"
    "$lab" wait bench-fb 'HMWL .*"event":"progress"' --timeout 240 >/dev/null || fail "bench-fb sends no traffic"
    # BENCH_RTO_MIN=T (e.g. 10ms): both guests' route to the control network, the fallback's,
    # with TCP's minimum retransmission timeout T (iproute2's rto_min; Linux's default is
    # 200 ms), as a fallback network for latency-sensitive jobs is set up (docs/benchmarks.md).
    local g
    for g in bench-fb bench-fbs; do
        [[ -n ${BENCH_RTO_MIN:-} ]] || break
        "$lab" exec "$g" "/usr/bin/ip route replace \$(/usr/bin/ip route show 198.51.100.0/24 | head -n 1) rto_min $BENCH_RTO_MIN && /usr/bin/ip route show 198.51.100.0/24" >&2 ||
            fail "cannot set rto_min $BENCH_RTO_MIN on $g's control route"
    done
    : >"$tmp/fb"
    for ((r = 1; r <= rounds; r++)); do
        for leg in "$A $B" "$B $A"; do
            set -- $leg
            local m
            m=$("$lab" mark bench-fb)
            out=$tmp/mv-fb-$r-$([[ $1 == "$A" ]] && echo ab || echo ba)
            mv_run bench-fb "$1" "$2" "$out" || { cat "$out.json" "$out.mv" >&2; fail "migrate-vm failed"; }
            downtime=$(jq -r '.phases[] | select(.name == "migrate") | .detail // ""' "$out.json" |
                sed -n 's/.*downtime \([0-9]*\) ms.*/\1/p')
            echo "${downtime:-null}" >>"$tmp/fb"
            "$lab" wait bench-fb 'HMWL .*"event":"resumed"' --since "$m" --timeout 60 >/dev/null ||
                fail "bench-fb did not resume"
            log "fallback round $r $1 -> $2: migrate-vm $(jq .total_ms "$out.json") ms, downtime $(tail -n 1 "$tmp/fb") ms"
        done
    done
    local result
    result=$(result_of bench-fb)
    jq -n --slurpfile d <(jq -s . "$tmp/fb") --argjson wl "$result" --arg how "$how_fallback" \
        --slurpfile p <(cat "$tmp"/mv-fb-*.json | jq -s '[.[] | [.phases[] | select(.name == "prepare" or .name == "unplug" or .name == "migrate") | .ms] | add]') \
        "$jq_median"'
        [$wl.cycles[].blackout_ms // null] as $b | $d[0] as $dt |
        [range(0; [($b | length), ($dt | length)] | min) | select($dt[.] != null and $b[.] != null)
         | $b[.] - $dt[.]] as $x |
        {migrations: ($dt | length),
         blackout_minus_downtime_ms_median: ($x | median), blackout_minus_downtime_ms: $x,
         blackout_at_ms_median: ([$wl.cycles[].blackout_at_ms | select(. != null)] | median),
         prepare_unplug_migrate_ms_median: ([$p[0][]] | median),
         blackout_ms_median: ([$b[] | select(. != null)] | median), downtime_ms_median: ([$dt[] | select(. != null)] | median),
         tcp_delivered: $wl.tcp_delivered, lost: $wl.lost, corrupt: $wl.corrupt, ok: $wl.ok,
         how: $how} + {rto_min: (if $rto == "" then "default (200ms)" else $rto end)}' \
        --arg rto "${BENCH_RTO_MIN:-}" >"$tmp/fallback.json"
    destroy_guests bench-fb bench-fbs
}

# ---- baselines: the same guest and workload moved three ways, interleaved ---------------------
# vf_detach_wait SRC: detaches bench-vf's VF stand-in and waits for the guest to let go
# (libvirt's device-removed event). Prints "MS STAMP" (STAMP: host clock at the detach).
# bare_move SRC DST: the VF detached by hand (untimed), then 'virsh migrate' timed alone, then
# the VF attached on DST (untimed). Prints "MS STAMP". Both hand-made moves quiesce the
# workload through the agent before the VF goes (untimed) and resume it after the attach.
# manual_move SRC DST: what a KubeVirt or Nova user gets, timed from its start: detach, wait
# for the guest to let go, 'virsh migrate', attach on DST. Prints "TOTAL DETACH MIGRATE ATTACH
# STAMP" (ms).
vf_detach_wait() {
    local ev=$tmp/ev.$$ pid t0 s0
    # The listener first (registered before the detach: the event may come before it returns).
    virsh -q -c "$1" event --domain bench-vf --event device-removed --timeout 60 >"$ev" 2>&1 &
    pid=$!
    sleep 0.3
    s0=$EPOCHREALTIME
    t0=$(now_ms)
    virsh -q -c "$1" detach-device-alias bench-vf "$vf_alias" --live >/dev/null ||
        fail "virsh detach-device-alias failed"
    wait "$pid" || true
    grep -q "device-removed" "$ev" || { cat "$ev" >&2; fail "no device-removed event for bench-vf"; }
    echo "$(($(now_ms) - t0)) $s0"
}

# agent_call HOST_URI COMMAND: prepare or resume through bench-vf's agent channel. Unplugging
# soft-RoCE under traffic crashes the lab's guest kernel (rxe_skb_tx_dtor oops), so the hand-made
# moves quiesce the workload first, as a user would stop it, and resume it after the attach.
agent_call() {
    local sock
    sock=$("$lab" channel bench-vf) || fail "no agent channel for bench-vf"
    "$top/tests/bench/agent-call.py" "$sock" "$2" 30000 >>"$tmp/agent-calls" ||
        fail "agent $2 on bench-vf failed: $(tail -n 1 "$tmp/agent-calls")"
}

bare_move() {
    local t0 ms detach s0 life=$tmp/life.$$ lpid sw switch=null
    agent_call "$1" prepare
    read -r detach s0 <<<"$(vf_detach_wait "$1")"
    # The switch-over: the destination's "Resumed Migrated" (all domains: bench-vf is not
    # defined there yet), with virsh's own time stamps (this machine's clock).
    virsh -q -c "$2" event --event lifecycle --loop --timestamp --timeout 120 >"$life" 2>&1 &
    lpid=$!
    sleep 0.3
    t0=$(now_ms)
    virsh -q -c "$1" migrate --live --p2p bench-vf "$2" >/dev/null || fail "virsh migrate failed"
    ms=$(($(now_ms) - t0))
    sleep 0.2
    kill "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null || true
    # "2026-11-28 07:38:26.019+0000: event 'lifecycle' for domain 'bench-vf': Resumed Migrated"
    sw=$(awk '/bench-vf/ && /Resumed Migrated/ { sub(/:$/, "", $2); print $1 " " $2; exit }' "$life")
    [[ -z $sw ]] || ! sw=$(date -d "$sw" +%s%3N) || switch=$((sw - t0))
    virsh -q -c "$2" attach-device bench-vf "$tmp/vf.xml" --live >/dev/null ||
        fail "virsh attach-device failed"
    agent_call "$2" resume
    echo "$ms $s0 $switch"
}

manual_move() {
    local t1 t2 t3 detach s0
    agent_call "$1" prepare
    read -r detach s0 <<<"$(vf_detach_wait "$1")"
    t1=$(now_ms)
    virsh -q -c "$1" migrate --live --p2p bench-vf "$2" >/dev/null || fail "virsh migrate failed"
    t2=$(now_ms)
    virsh -q -c "$2" attach-device bench-vf "$tmp/vf.xml" --live >/dev/null ||
        fail "virsh attach-device failed"
    t3=$(now_ms)
    agent_call "$2" resume
    echo "$((detach + t3 - t1)) $detach $((t2 - t1)) $((t3 - t2)) $s0"
}

# job_ms DST: libvirt's own figure for the migration of bench-vf that just ended on DST, from its
# completed job statistics there ('virsh domjobinfo --completed': "Time elapsed", from the job's
# start on the source, the destination's QEMU start included, to the end of the copy). What a
# move's migrate step takes beyond it is libvirt's finish and confirm (the source's QEMU
# stopped) and the caller's own calls around them. Prints the ms, or null.
job_ms() {
    virsh -q -c "$1" domjobinfo --completed bench-vf 2>/dev/null |
        awk '/^Time elapsed:/ { print $3; found = 1; exit } END { if (!found) print "null" }'
}

part_baselines() {
    local r k method src dst out m tstart tmig tvf ttraffic ms line d mg at job sw
    local methods=(bare manual hotmig bare manual hotmig)
    # BENCH_COMPARE=PATH: another migrate-vm (e.g. built from an older commit) moved the same
    # way in each round, right after ours: method "compare".
    [[ -z ${BENCH_COMPARE:-} ]] || methods=(bare manual hotmig compare bare manual hotmig compare)
    bench_guest bench-srv B bench-vf "$memory" "--role server --mode lazy"
    bench_guest bench-vf A bench-srv "$memory" \
        "--role client --peer 198.51.100.$("$lab" index bench-srv) --mode lazy --cycles $((${#methods[@]} * rounds)) --tail 3"
    "$lab" vf-xml bench-vf >"$tmp/vf.xml"
    vf_alias=$(sed -n "s/.*<alias name='\([^']*\)'.*/\1/p" "$tmp/vf.xml")
    [[ -n $vf_alias ]] || fail "no alias in the VF stand-in's XML"
    "$lab" wait bench-srv 'HMWL .*"event":"ready"' --timeout 240 >/dev/null || fail "bench-srv did not get ready"
    "$lab" wait bench-vf 'HMWL .*"event":"progress"' --timeout 240 >/dev/null || fail "bench-vf sends no traffic"
    # BENCH_AGENT_NICE=N: the agent at nice N (docs/benchmarks.md: no effect measured).
    # BENCH_SPIN=N: N busy loops in the guest beside the workload, as MPI ranks that poll
    # their completion queues keep every vCPU busy (hm-pingpong waits on its channel).
    [[ -z ${BENCH_AGENT_NICE:-} ]] || "$lab" exec bench-vf "renice -n $BENCH_AGENT_NICE -p \$(pidof hotmig-agent)" >&2
    for ((k = 0; k < ${BENCH_SPIN:-0}; k++)); do
        "$lab" exec bench-vf "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &" >&2
    done
    console_stamp bench-vf
    : >"$tmp/bl"
    # Six moves a round, each method once in each direction, directions alternating.
    src=$A
    dst=$B
    for ((r = 1; r <= rounds; r++)); do
        for ((k = 0; k < ${#methods[@]}; k++)); do
            method=${methods[k]}
            tstart=$EPOCHREALTIME
            case $method in
            bare)
                read -r ms tstart sw <<<"$(bare_move "$src" "$dst")"
                line=$(jq -nc --argjson ms "$ms" --argjson sw "$sw" \
                    '{method: "bare", migrate: $ms, switch: $sw}')
                ;;
            manual)
                read -r ms d mg at tstart <<<"$(manual_move "$src" "$dst")"
                line=$(jq -nc --argjson t "$ms" --argjson d "$d" --argjson mg "$mg" --argjson at "$at" \
                    '{method: "manual", total: $t, detach: $d, migrate: $mg, attach: $at}')
                ;;
            hotmig | compare)
                out=$tmp/mv-bl-$r-$k
                local bin=$migrate_vm
                [[ $method == hotmig ]] || bin=$BENCH_COMPARE
                MV_BIN=$bin mv_run bench-vf "$src" "$dst" "$out" ||
                    { cat "$out.json" "$out.mv" >&2; fail "$bin failed"; }
                tmig=$(awk '$3 == "migrate" && $4 == "ok:" { print $1; exit }' "$out.mv")
                [[ -n $tmig ]] || fail "no 'migrate ok' progress line from migrate-vm"
                line=$(jq -c --arg m "$method" --arg tmig "$tmig" '{method: $m, total: .total_ms,
                    phases: ([.phases[] | {(.name): .ms}] | add), tmig: ($tmig | tonumber)}' "$out.json")
                ;;
            esac
            job=$(job_ms "$dst")
            line=$(jq -c --argjson job "$job" '. + {job: $job}' <<<"$line")
            ttraffic=$(stamped_wait "$tmp/bench-vf.con" "$tstart" \
                'HMWL .*"event":"resumed".*"side":"local"' 60) ||
                fail "no verbs traffic on bench-vf within 60 s of the $method move"
            tvf=$(stamped_first "$tmp/bench-vf.con" "$tstart" '^[0-9.]+ HMLAB vf up ')
            [[ $method != hotmig && $method != compare ]] ||
                line=$(jq -c --argjson own "$(workload_own "$tstart" "$out.mv" "$tvf")" \
                    '. + $own' <<<"$line")
            line=$(jq -c --argjson to_traffic "$(ms_between "$tstart" "$ttraffic")" \
                --arg tvf "$tvf" --arg ttraffic "$ttraffic" \
                '. + {to_traffic: $to_traffic}
                 + (if .tmig then {port_up: (if $tvf == "" then null
                        else (($tvf | tonumber) - .tmig) * 10000 | round / 10 end)} else {} end)
                 | del(.tmig)' <<<"$line")
            echo "$line" >>"$tmp/bl"
            log "baselines round $r $method $([[ $src == "$A" ]] && echo A-B || echo B-A): $line"
            m=$src
            src=$dst
            dst=$m
        done
    done
    # hotmig's own share of a migrate-vm run: its total less what the guest and libvirt need
    # anyway (the bare migration's median, this run's unplug and port-up).
    jq -s --argjson mem "$memory" --arg how "$how_baselines" --arg compare "${BENCH_COMPARE:-}" "$jq_median"'
        def stats: {median: median, min: min, max: max, values: .};
        def share_outside: .total - .phases.migrate - .phases.unplug - .port_up
                           | . * 10 | round / 10;
        def share_less_workload: select(.port_up != null and .quiesce_ms != null
                                        and .reconnect_ms != null)
                                 | .total - .phases.migrate - .phases.unplug - .port_up
                                   - .quiesce_ms - .reconnect_ms | . * 10 | round / 10;
        [.[] | select(.method == "bare")] as $b | [.[] | select(.method == "manual")] as $m |
        [.[] | select(.method == "hotmig")] as $h | [.[] | select(.method == "compare")] as $c | ([$b[].migrate] | median) as $bare |
        [$b[] | select(.job != null) | .migrate - .job] as $bare_beyond_all |
        ($bare_beyond_all | median) as $bare_beyond |
        [$b[].switch | select(. != null)] as $bare_switches |
        ($bare_switches | median) as $bare_switch |
        ([$b[] | select(.switch != null and .job != null) | .switch - .job] | median)
            as $bare_switch_beyond |
        {memory_mib: $mem, moves_each: ($b | length),
         bare_virsh_migrate_ms: [$b[].migrate] | stats,
         bare_to_traffic_ms: [$b[].to_traffic] | stats,
         manual_total_ms: [$m[].total] | stats,
         manual_steps_ms_median: {detach: ([$m[].detach] | median), migrate: ([$m[].migrate] | median),
                                  attach: ([$m[].attach] | median)},
         manual_to_traffic_ms: [$m[].to_traffic] | stats,
         migrate_vm_total_ms: [$h[].total] | stats,
         migrate_vm_to_traffic_ms: [$h[].to_traffic] | stats,
         migrate_vm_phases_ms_median: ($h[0].phases | keys_unsorted
                                       | map({(.): ([$h[].phases[.]] | median)}) | add),
         migrate_vm_gaps_ms_median: ([$h[] | .total - ([.phases[]] | add)] | median),
         migrate_vm_port_up_ms: [$h[].port_up | select(. != null)] | stats,
         limit_ms_median: ($bare + ([$h[].phases.unplug] | median) + ([$h[].port_up | select(. != null)] | median)),
         hotmig_share_ms: [$h[] | select(.port_up != null) | .total - $bare - .phases.unplug - .port_up
                           | . * 10 | round / 10] | stats,
         migrate_phase_minus_bare_ms: [$h[] | .phases.migrate - $bare | . * 10 | round / 10] | stats,
         libvirt_job_ms: {bare: [$b[].job | select(. != null)] | stats,
                          manual: [$m[].job | select(. != null)] | stats,
                          migrate_vm: [$h[].job | select(. != null)] | stats},
         migrate_step_beyond_job_ms: {
             bare: $bare_beyond_all | stats,
             manual: [$m[] | select(.job != null) | .migrate - .job] | stats,
             migrate_vm: [$h[] | select(.job != null) | .phases.migrate - .job
                          | . * 10 | round / 10] | stats},
         hotmig_share_same_copy_ms: [$h[] | select(.port_up != null and .job != null
                                                   and $bare_beyond != null)
                                     | .total - .phases.unplug - .port_up - .job - $bare_beyond
                                     | . * 10 | round / 10] | stats,
         hotmig_share_outside_copy_ms: [$h[] | select(.port_up != null) | share_outside]
                                       | stats,
         bare_switch_over_ms: $bare_switches | stats,
         bare_after_switch_over_ms: [$b[] | select(.switch != null) | .migrate - .switch] | stats,
         limit_overlapped_ms_median: (if $bare_switch == null then null else
             $bare_switch + ([$h[].phases.unplug] | median)
             + ([$h[].port_up | select(. != null)] | median) end),
         hotmig_share_overlapped_ms: [$h[] | select(.port_up != null and $bare_switch != null)
                                      | .total - $bare_switch - .phases.unplug - .port_up
                                      | . * 10 | round / 10] | stats,
         hotmig_share_overlapped_same_copy_ms: [$h[] | select(.port_up != null and .job != null
                                                         and $bare_switch_beyond != null)
                                     | .total - .phases.unplug - .port_up - .job
                                       - $bare_switch_beyond | . * 10 | round / 10] | stats,
         workload_quiesce_ms: [$h[].quiesce_ms | select(. != null)] | stats,
         workload_reconnect_ms: [$h[].reconnect_ms | select(. != null)] | stats,
         hotmig_share_less_workload_ms: [$h[] | share_less_workload] | stats,
         compare: (if ($c | length) == 0 then null else
            {binary: $compare, moves: ($c | length),
             total_ms: [$c[].total] | stats,
             phases_ms_median: ($c[0].phases | keys_unsorted
                                | map({(.): ([$c[].phases[.]] | median)}) | add),
             hotmig_share_outside_copy_ms: [$c[] | select(.port_up != null) | share_outside]
                                           | stats,
             hotmig_share_less_workload_ms: [$c[] | share_less_workload] | stats} end),
         how: $how}' "$tmp/bl" >"$tmp/baselines.json"
    destroy_guests bench-vf bench-srv
}

# ---- evacuation: 4 guests off a host with 1, 2, 4 migrations at once ---------------------------
evac_names=()

# evacuate FROM TO CONCURRENCY TAG: migrates every evac guest, CONCURRENCY at a time; prints
# the makespan in ms.
evacuate() {
    local from=$1 to=$2 conc=$3 tag=$4 g t0 ms i=0 marks=()
    for g in "${evac_names[@]}"; do
        marks+=("$("$lab" mark "$g")")
    done
    t0=$(now_ms)
    for g in "${evac_names[@]}"; do
        while (($(jobs -rp | wc -l) >= conc)); do
            wait -n || true
        done
        (
            rc=0
            "$migrate_vm" -v --connect "$from" "$g" "$to" --json 2>&1 >"$tmp/ev-$tag-$g.json" |
                stamp >"$tmp/ev-$tag-$g.err"
            rc=${PIPESTATUS[0]}
            echo "$rc" >"$tmp/ev-$tag-$g.rc"
        ) &
    done
    wait
    ms=$(($(now_ms) - t0))
    # A failed migration is counted, not fatal (a loaded machine makes deadlines): the guest is
    # recovered (--recover) and moved where the others are; that makespan is left out.
    for g in "${evac_names[@]}"; do
        local rc error
        rc=$(cat "$tmp/ev-$tag-$g.rc")
        [[ $rc == 0 ]] && continue
        error=$(jq -r '.error // empty' "$tmp/ev-$tag-$g.json" 2>/dev/null || true)
        log "evacuation $tag: migrate-vm $g failed (exit status $rc): ${error:-no report}"
        jq -nc --arg tag "$tag" --arg g "$g" --argjson rc "$rc" --arg e "$error" \
            '{evacuation: $tag, guest: $g, exit_status: $rc, error: $e}' >>"$tmp/evac-failures"
        ms=failed
        "$migrate_vm" --recover "$g" >/dev/null 2>&1 || log "migrate-vm --recover $g failed"
        if [[ $("$lab" where "$g") != "$([[ $to == "$A" ]] && echo A || echo B)" ]]; then
            "$migrate_vm" --connect "$from" "$g" "$to" --json >"$tmp/ev-$tag-$g-again.json" ||
                fail "migrate-vm $g failed again after its recovery ($tag)"
        fi
    done
    echo "$ms"
    # Steady state before the next evacuation: every workload client connected again.
    if ((evac_workload)); then
        for ((i = 0; i + 1 < ${#evac_names[@]}; i += 2)); do
            "$lab" wait "${evac_names[i]}" 'HMWL .*"event":"progress".*"connected":true' \
                --since "${marks[i]}" --timeout 120 >/dev/null || fail "${evac_names[i]} did not reconnect"
        done
    fi
}

part_evacuation() {
    local i r c g ms
    for ((i = 1; i <= evac_n; i++)); do
        evac_names+=("bench-ev$i")
    done
    guests+=("${evac_names[@]}")
    # Servers (odd positions) first: a client needs its server's lab index.
    for i in $(seq 1 2 $((evac_n - 1))) $(seq 0 2 $((evac_n - 1))); do
        local name=${evac_names[i]} peer wl=()
        if ((i % 2 == 0)); then
            peer=${evac_names[i + 1]:-bench-ev-none}
            ((evac_workload)) && [[ $peer != bench-ev-none ]] &&
                wl=(--workload "--role client --peer 198.51.100.$("$lab" index "$peer") --mode lazy --cycles 0 --max-seconds 36000")
        else
            peer=${evac_names[i - 1]}
            ((evac_workload)) && wl=(--workload "--role server --mode lazy --max-seconds 36000")
        fi
        "$lab" guest "$name" --host A --peer "$peer" --memory "$evac_memory" --bin-dir "$build" \
            "${wl[@]}" >/dev/null
    done
    for g in "${evac_names[@]}"; do
        "$lab" wait "$g" 'HMLAB booted' --timeout 300 >/dev/null || fail "$g did not boot"
    done
    if ((evac_workload)); then
        for ((i = 0; i + 1 < evac_n; i += 2)); do
            "$lab" wait "${evac_names[i]}" 'HMWL .*"event":"progress".*"connected":true' --timeout 240 \
                >/dev/null || fail "${evac_names[i]} sends no traffic"
        done
    fi
    : >"$tmp/evac"
    : >"$tmp/evac-failures"
    local levels=(1 2 4)
    for ((r = 1; r <= rounds; r++)); do
        for ((i = 0; i < ${#levels[@]}; i++)); do
            c=${levels[(i + r - 1) % ${#levels[@]}]}
            ms=$(evacuate "$A" "$B" "$c" "r$r-c$c-ab")
            [[ $ms == failed ]] ||
                echo "{\"concurrency\":$c,\"direction\":\"A->B\",\"ms\":$ms}" >>"$tmp/evac"
            log "evacuation round $r: $evac_n guests A -> B, $c at once: $ms ms"
            ms=$(evacuate "$B" "$A" "$c" "r$r-c$c-ba")
            [[ $ms == failed ]] ||
                echo "{\"concurrency\":$c,\"direction\":\"B->A\",\"ms\":$ms}" >>"$tmp/evac"
            log "evacuation round $r: $evac_n guests B -> A, $c at once: $ms ms"
        done
    done
    jq -n --slurpfile e <(jq -s . "$tmp/evac") --slurpfile f <(jq -s . "$tmp/evac-failures") \
        --slurpfile per <(cat "$tmp"/ev-*.json | jq -s '[.[] | select(.ok) | {total_ms}]') \
        --argjson n "$evac_n" --argjson mem "$evac_memory" --argjson wl "$evac_workload" \
        --arg how "$how_evacuation" "$jq_median"'
        ($e[0] | group_by(.concurrency) | map({key: (.[0].concurrency | tostring),
                                              value: ([.[].ms] | median)}) | from_entries) as $m |
        {guests: $n, memory_mib: $mem,
         workload: (if $wl == 1 then "ping-pong pairs among the guests (1 client of 2, 3 of 4)"
                    else "none (VF and agent only)" end),
         makespan_ms_median: $m,
         speedup_vs_sequential: ($m | with_entries(.value = ((($m["1"] / .value) * 100 | round) / 100))),
         makespan_ms: ($e[0] | group_by(.concurrency)
                       | map({key: (.[0].concurrency | tostring), value: [.[].ms]}) | from_entries),
         migrate_vm_total_ms_median: ([$per[0][] | select(.total_ms != null) | .total_ms] | median),
         failures: $f[0],
         how: $how}' \
        >"$tmp/evacuation.json"
    destroy_guests "${evac_names[@]}"
}

for p in $parts; do
    case $p in
    baselines) part_baselines ;;
    ratio) part_ratio ;;
    fallback) part_fallback ;;
    evacuation) part_evacuation ;;
    *) fail "BENCH_PARTS: unknown part '$p'" ;;
    esac
done

machine=$(jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {loadavg_at_end: $load}' <<<"$machine")
jq -n --argjson m "$machine" --arg cmd "HM_BUILD=$build ROUNDS=$rounds bash tests/bench/migration.sh" \
    --slurpfile ratio "$tmp/ratio.json" --slurpfile fb "$tmp/fallback.json" \
    --slurpfile ev "$tmp/evacuation.json" --slurpfile bl "$tmp/baselines.json" '
    $ratio[0] + {baselines: $bl[0], fallback_tcp: $fb[0], evacuation: $ev[0], machine: $m, command: $cmd}
    | if .benchmark == null then {benchmark: "migration"} + . else . end'
