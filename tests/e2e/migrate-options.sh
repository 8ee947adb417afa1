#!/bin/bash
# migrate-vm's virsh options on the lab, checked against what libvirt and QEMU did, one guest
# (with the agent, no workload) moved A -> B -> A -> B -> A, then a migration that is aborted:
#   refused   --postcopy with --parallel (also parallel from the configuration), --postcopy-after
#             or --timeout-postcopy without --postcopy, --timeout-abort without --timeout,
#             --migrateuri ftp://, --undefinesource with --no-undefinesource: exit 2, the message
#             names the options (or the configuration line), no report, nothing changed
#   A -> B    --live --p2p --persistent --undefinesource --migrateuri --bandwidth 10 --parallel 2
#             --auto-converge --json, the domain defined on A: while the job runs, QEMU on A has
#             multifd and auto-converge on, 2 multifd channels, max-bandwidth 10 MiB/s, and three
#             connections to the --migrateuri port; after it, the domain is defined on B with the
#             VF in that definition, gone from A, and the job moved at most ~10 MiB/s
#   B -> A    --postcopy --postcopy-after 2 --bandwidth 4 without --persistent: A's domain is
#             transient (its plug must not touch a definition), B keeps its own shut off; the
#             source saw the switch ("Suspended Post-copy") and the copy ended long before 4 MiB/s
#             could have moved the memory
#   A -> B    --timeout 2 --timeout-suspend --bandwidth 8: the guest paused on A for most of the
#             job (libvirt's downtime) and runs on B, which was defined before: the VF went into
#             B's definition
#   B -> A    a configuration with persistent and auto-converge on, --no-persistent
#             --no-auto-converge --postcopy --timeout 2 --timeout-postcopy: QEMU has post-copy
#             on and auto-converge off, the switch happened on the timeout, A's domain is transient
#   A -> B    --timeout 2 --timeout-abort --bandwidth 3: exit 15, the job aborted, the domain runs
#             on A with its VF, B's definition untouched
#   A -> B    --persistent with every plug on B failing (fault injection): exit 16, migrated
#             back, A's domain still transient, no definition left on B
#   A -> B    --connect A (a [host NAME]) --postcopy --postcopy-after-precopy --bandwidth 4: the
#             switch after the first pass of pre-copy (hm-memck dirties 8 MiB every 10 ms so that
#             the first pass cannot end the copy), no guest write lost
# Every report is --json: each run's migrate detail says what libvirt was asked.
source "$(dirname "$0")/lib.sh"
g=opt-g
tmp=$(mktemp -d)
events_pid=
read -r b_addr b_min _ < <("$lab" migration-ports B)
# Not the first port of B's range (libvirt's own choice): the data must go where we said.
b_port=$((b_min + 5))

# run RC OUT ARGS...: migrate-vm --json ARGS must exit RC; stderr in OUT.err.
run() {
    local want=$1 out=$2 rc=0
    shift 2
    log "migrate-vm $*"
    "$migrate_vm" --json "$@" >"$out" 2>"$out.err" || rc=$?
    if [ -s "$out" ]; then
        jq -r '.phases[] | "  \(.name) \(.status) \(.ms) ms \(.detail // "")"' "$out" >&2 || cat "$out" >&2
    fi
    [ "$rc" -eq "$want" ] || { cat "$out.err" >&2; fail "migrate-vm $* exited $rc, expected $want"; }
}

# migrated_with OUT TEXT: the report's migrate detail holds TEXT (what was done, asked).
migrated_with() {
    local detail
    detail=$(jq -r '.phases[] | select(.name == "migrate") | .detail' "$1")
    [[ $detail == *"$2"* ]] || fail "$(basename "$1"): migrate detail '$detail' lacks '$2'"
}

# wait_job URI: until the domain's outgoing migration on URI has moved data.
wait_job() {
    timeout 60 bash -c "until virsh -c '$1' domjobinfo '$g' 2>/dev/null |
        grep -qE '^Data processed: +[0-9.]+ [KMG]iB'; do sleep 0.1; done" ||
        fail "no migration job of $g came up on $1"
}

# qmp URI COMMAND: QEMU's answer on the host running the domain.
qmp() {
    virsh -c "$1" qemu-monitor-command "$g" "{\"execute\":\"$2\"}"
}

# start_events URI / stop_events: libvirt's events of the domain on URI, into $tmp/events.
start_events() {
    virsh -c "$1" event --domain "$g" --all --loop --timeout 300 >"$tmp/events" 2>&1 &
    events_pid=$!
}
stop_events() {
    if [ -n "$events_pid" ]; then
        kill "$events_pid" 2>/dev/null || true
        wait "$events_pid" 2>/dev/null || true
        events_pid=
    fi
}

# jobinfo URI OUT: the finished job as the destination recorded it (kept for a later look).
jobinfo() {
    virsh -c "$1" domjobinfo --completed --keep-completed "$g" >"$2" ||
        fail "no completed job of $g on $1"
}

# field FILE KEY: the number of a jobinfo line ("Time elapsed:  5471  ms" -> 5471).
field() {
    local value
    value=$(sed -n "s/^$2: *\([0-9.][0-9.]*\).*/\1/p" "$1")
    [ -n "$value" ] || fail "no '$2' in the job info: $(cat "$1")"
    echo "$value"
}

# (grep -q in a pipeline would exit early: with pipefail, virsh's SIGPIPE fails it.)
persistent_on() {
    virsh -c "$1" dominfo "$g" | grep -E '^Persistent: +yes' >/dev/null
}

finish() {
    stop_events
    virsh -q -c "$A" undefine "$g" >/dev/null 2>&1 || true
    virsh -q -c "$B" undefine "$g" >/dev/null 2>&1 || true
    cleanup
    rm -rf "$tmp"
}
trap finish EXIT

start_guest "$g" A opt-peer
"$lab" wait "$g" 'HMLAB booted' --timeout 180 >/dev/null || fail "$g did not boot"
virsh -c "$A" dumpxml "$g" >"$tmp/def.xml"
virsh -q -c "$A" define "$tmp/def.xml" >/dev/null || fail "cannot define $g on A"
persistent_on "$A" || fail "$g is not persistent on A"

# ---- refused combinations: nothing done --------------------------------------------------
sed '/^\[migrate\]$/a parallel = 2' "$HOTMIG_CONFIG" >"$tmp/parallel.conf"
parallel_line=$(grep -n '^parallel = 2$' "$tmp/parallel.conf" | cut -d: -f1)
mark=$("$lab" mark "$g")
refused() {
    local pattern=$1
    shift
    run 2 "$tmp/refused.json" --connect "$A" "$@" "$g" "$B"
    [ ! -s "$tmp/refused.json" ] || fail "a refused migration printed a report: $(cat "$tmp/refused.json")"
    grep -qE -- "$pattern" "$tmp/refused.json.err" ||
        fail "migrate-vm $* said '$(cat "$tmp/refused.json.err")', expected '$pattern'"
}
refused "--postcopy and --parallel exclude each other: QEMU does not combine post-copy with parallel" \
    --postcopy --parallel 2
refused "--postcopy and parallel = 2 \\($tmp/parallel.conf:$parallel_line\\) exclude each other" \
    --config "$tmp/parallel.conf" --postcopy
refused "--postcopy-after needs --postcopy" --postcopy-after 2
refused "--timeout-postcopy needs --postcopy" --timeout 5 --timeout-postcopy
refused "--timeout-abort needs --timeout" --timeout-abort
refused "--migrateuri 'ftp://$b_addr:$b_port': libvirt takes tcp://" --migrateuri "ftp://$b_addr:$b_port"
refused "--undefinesource and --no-undefinesource exclude each other" --undefinesource --no-undefinesource
require_where "$g" A
has_vf "$g" "$A" || fail "$g lost its VF on A after a refused migration"
persistent_on "$A" || fail "$g is no longer defined on A after a refused migration"
[ "$(virsh -c "$A" domstate "$g")" = running ] || fail "$g is not running on A"
tail -c +"$((mark + 1))" "$("$lab" console "$g")" | grep -a 'HMLAB vf gone' >/dev/null &&
    fail "a refused migration unplugged the VF"
virsh -c "$B" dominfo "$g" >/dev/null 2>&1 && fail "a refused migration left $g on B"

# ---- A -> B: persistent, undefinesource, migrateuri, bandwidth, parallel, auto-converge --
run 0 "$tmp/r1.json" --connect "$A" --live --p2p --persistent --undefinesource \
    --migrateuri "tcp://$b_addr:$b_port" --bandwidth 10 --parallel 2 --auto-converge "$g" "$B" &
mv_pid=$!
wait_job "$A"
qmp "$A" query-migrate-capabilities >"$tmp/caps.json"
qmp "$A" query-migrate-parameters >"$tmp/params.json"
ss -tnH state established "( dport = :$b_port )" >"$tmp/conns"
wait "$mv_pid" || fail "A -> B with the virsh options failed"
caps=$(jq -c '[.return[] | select(.state) | .capability] | sort' "$tmp/caps.json")
log "QEMU on A during the job: capabilities $caps, $(jq -c '.return | {"max-bandwidth", "multifd-channels"}' "$tmp/params.json"), $(wc -l <"$tmp/conns") connections to $b_addr:$b_port"
jq -e '[.return[] | select(.state) | .capability] | (index("multifd") != null) and
    (index("auto-converge") != null) and (index("postcopy-ram") == null)' "$tmp/caps.json" >/dev/null ||
    fail "QEMU's capabilities during --parallel --auto-converge: $caps"
jq -e '.return["multifd-channels"] == 2 and .return["max-bandwidth"] == 10 * 1048576' \
    "$tmp/params.json" >/dev/null || fail "QEMU's parameters: $(cat "$tmp/params.json")"
# The main channel and one per multifd channel, all to the --migrateuri port.
[ "$(wc -l <"$tmp/conns")" -eq 3 ] || fail "connections to $b_addr:$b_port: $(cat "$tmp/conns")"
jq -e '.ok' "$tmp/r1.json" >/dev/null || fail "A -> B report not ok"
migrated_with "$tmp/r1.json" "options: live, p2p, persistent, undefinesource, migrateuri tcp://$b_addr:$b_port, bandwidth 10 MiB/s, parallel 2, auto-converge"
require_where "$g" B
has_vf "$g" "$B" || fail "$g has no VF on B"
persistent_on "$B" || fail "--persistent: $g is not defined on B"
virsh -c "$B" dumpxml --inactive "$g" | grep "alias name='ua-hmvf0'" >/dev/null ||
    fail "--persistent: the VF plugged on B is not in B's definition"
virsh -c "$A" dominfo "$g" >/dev/null 2>&1 && fail "--undefinesource: $g is still defined on A"
jobinfo "$B" "$tmp/job1"
bw=$(field "$tmp/job1" 'Memory bandwidth')
moved=$(field "$tmp/job1" 'Data processed')
ms=$(field "$tmp/job1" 'Time elapsed')
grep -E '^Data processed: +[0-9.]+ MiB' "$tmp/job1" >/dev/null || fail "job info: $(cat "$tmp/job1")"
log "A -> B job: $moved MiB in $ms ms, $bw MiB/s"
awk -v bw="$bw" -v moved="$moved" -v ms="$ms" 'BEGIN { exit !(moved >= 50 && bw > 0 && bw <= 11.5 && moved / (ms / 1000) <= 11.5) }' ||
    fail "--bandwidth 10: the job moved $moved MiB in $ms ms ($bw MiB/s)"

# ---- B -> A: post-copy after 2 s, into a transient domain --------------------------------
start_events "$B"
run 0 "$tmp/r2.json" --connect "$B" --postcopy --postcopy-after 2 --bandwidth 4 "$g" "$A"
stop_events
grep -q "event 'device-removed'" "$tmp/events" || fail "the event listener started too late: $(cat "$tmp/events")"
grep -q "event 'lifecycle' for domain '$g': Suspended Post-copy" "$tmp/events" ||
    fail "B -> A: libvirt did not switch to post-copy: $(cat "$tmp/events")"
migrated_with "$tmp/r2.json" "post-copy started after 2 s of pre-copy; options: live, p2p, bandwidth 4 MiB/s, postcopy, postcopy-after 2 s"
# ~100 MiB at 4 MiB/s is 25 s of pre-copy; post-copy moves the rest at full speed.
jq -e '.phases[] | select(.name == "migrate") | .ms < 15000' "$tmp/r2.json" >/dev/null ||
    fail "B -> A: the migration took as long as pre-copy would have"
require_where "$g" A
has_vf "$g" "$A" || fail "$g has no VF on A after post-copy"
persistent_on "$A" && fail "without --persistent $g was defined on A"
[ "$(virsh -c "$B" domstate "$g")" = "shut off" ] || fail "B's definition of $g is gone"

# ---- A -> B: --timeout-suspend, into a domain defined there before -----------------------
run 0 "$tmp/r3.json" --connect "$A" --timeout 2 --timeout-suspend --bandwidth 8 "$g" "$B"
migrated_with "$tmp/r3.json" "guest suspended after the 2 s timeout; options: live, p2p, bandwidth 8 MiB/s, timeout 2 s then suspend"
jobinfo "$B" "$tmp/job3"
downtime=$(field "$tmp/job3" 'Total downtime')
log "A -> B with --timeout-suspend: downtime $downtime ms"
[ "$downtime" -ge 1000 ] || fail "--timeout-suspend: the guest was paused only $downtime ms"
require_where "$g" B
[ "$(virsh -c "$B" domstate "$g")" = running ] || fail "$g does not run on B after --timeout-suspend"
has_vf "$g" "$B" || fail "$g has no VF on B"
persistent_on "$B" || fail "$g, defined on B before, is not persistent there"
virsh -c "$B" dumpxml --inactive "$g" | grep "alias name='ua-hmvf0'" >/dev/null ||
    fail "the VF plugged on B is not in the definition $g had there"

# ---- B -> A: --no-persistent --no-auto-converge over the configuration, post-copy on timeout
sed '/^\[migrate\]$/a persistent = true\nauto-converge = true' "$HOTMIG_CONFIG" >"$tmp/on.conf"
start_events "$B"
run 0 "$tmp/r4.json" --config "$tmp/on.conf" --connect "$B" --no-persistent \
    --no-auto-converge --postcopy --timeout 2 --timeout-postcopy --bandwidth 4 "$g" "$A" &
mv_pid=$!
wait_job "$B"
qmp "$B" query-migrate-capabilities >"$tmp/caps.json"
wait "$mv_pid" || fail "B -> A with --no-persistent --no-auto-converge failed"
stop_events
caps=$(jq -c '[.return[] | select(.state) | .capability] | sort' "$tmp/caps.json")
log "QEMU on B during the job: capabilities $caps"
jq -e '[.return[] | select(.state) | .capability] | (index("postcopy-ram") != null) and
    (index("auto-converge") == null)' "$tmp/caps.json" >/dev/null ||
    fail "QEMU's capabilities with --no-auto-converge --postcopy: $caps"
grep -q "event 'lifecycle' for domain '$g': Suspended Post-copy" "$tmp/events" ||
    fail "B -> A: no switch to post-copy on the timeout: $(cat "$tmp/events")"
migrated_with "$tmp/r4.json" "post-copy started after the 2 s timeout; options: live, p2p, bandwidth 4 MiB/s, postcopy, timeout 2 s then postcopy"
require_where "$g" A
has_vf "$g" "$A" || fail "$g has no VF on A"
persistent_on "$A" && fail "--no-persistent: $g was defined on A"

# ---- A -> B: --timeout-abort ------------------------------------------------------------
mark=$("$lab" mark "$g")
run 15 "$tmp/r5.json" --connect "$A" --timeout 2 --timeout-abort --bandwidth 3 "$g" "$B"
jq -e '.failed_phase == "migrate" and .final_host == "source" and ([.rollback[].ok] | all)' \
    "$tmp/r5.json" >/dev/null || fail "--timeout-abort report: $(cat "$tmp/r5.json")"
jq -e '.error | contains("job aborted after the 2 s timeout")' "$tmp/r5.json" >/dev/null ||
    fail "--timeout-abort error: $(jq .error "$tmp/r5.json")"
require_where "$g" A
[ "$(virsh -c "$A" domstate "$g")" = running ] || fail "$g does not run on A after the abort"
has_vf "$g" "$A" || fail "$g did not get its VF back on A"
"$lab" wait "$g" 'HMLAB vf up' --since "$mark" --timeout 60 >/dev/null || fail "the VF did not come back up in $g"
[ "$(virsh -c "$B" domstate "$g")" = "shut off" ] || fail "the aborted migration changed B's definition of $g"
# ---- A -> B: --persistent, the plug on B fails: undone, no definition left on B ----------
virsh -q -c "$B" undefine "$g" >/dev/null || fail "cannot undefine $g on B"
HOTMIG_FAULT_INJECT=device_attach@destination \
    run 16 "$tmp/r6.json" --connect "$A" --persistent "$g" "$B"
jq -e '.failed_phase == "plug" and .final_host == "source" and ([.rollback[].ok] | all)' \
    "$tmp/r6.json" >/dev/null || fail "the undone --persistent migration: $(cat "$tmp/r6.json")"
require_where "$g" A
has_vf "$g" "$A" || fail "$g did not get its VF back on A"
persistent_on "$A" && fail "migrating back defined $g on A, where it was transient"
virsh -c "$B" dominfo "$g" >/dev/null 2>&1 && fail "the undone --persistent migration left $g defined on B"
# ---- A -> B: virsh's spellings: --postcopy-after-precopy, --parallel-connections, [host NAME]
# The switch waits for the first pass over the memory (QEMU's iteration event), not a time;
# the source is named by its [host NAME] group. --parallel-connections is refused with
# post-copy as --parallel is.
refused "--postcopy and --parallel exclude each other" --postcopy --parallel-connections 2
# An idle guest dirties about as much in the ~27 s first pass as 4 MiB/s moves within QEMU's
# 300 ms downtime limit: QEMU then completed the pre-copy at the end of that pass and the switch
# came too late ("post-copy refused ...: domain is not running"; once in a run on a loaded
# machine). hm-memck rewrites 8 MiB every 10 ms, so the first pass cannot end the copy, and it
# checks that post-copy lost none of those writes.
"$lab" exec "$g" '(setsid hm-memck 2048 10 </dev/null >/dev/console 2>&1 &)' --timeout 90 ||
    fail "cannot start hm-memck in $g"
"$lab" wait "$g" 'HMLAB memck started' --timeout 30 >/dev/null || fail "hm-memck did not start in $g"
start_events "$A"
run 0 "$tmp/r7.json" --connect A --postcopy --postcopy-after-precopy --bandwidth 4 "$g" "$B"
stop_events
sleep 2
lost=$(grep -a 'HMLAB memck LOST' "$("$lab" console "$g")" || true)
[ -z "$lost" ] || fail "--postcopy-after-precopy lost guest writes: $lost"
grep -q "event 'lifecycle' for domain '$g': Suspended Post-copy" "$tmp/events" ||
    fail "--postcopy-after-precopy: libvirt did not switch to post-copy: $(cat "$tmp/events")"
migrated_with "$tmp/r7.json" "post-copy started after the first pass of pre-copy; options: live, p2p, bandwidth 4 MiB/s, postcopy, postcopy-after-precopy"
require_where "$g" B
has_vf "$g" "$B" || fail "$g has no VF on B after --postcopy-after-precopy"
log "ok: every option did what it says"
