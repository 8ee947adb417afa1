# Shared helpers for the end-to-end tests on the lab (sourced). Each test boots its own guests,
# named after the test, and destroys them at exit; the lab itself is a CTest fixture.
set -euo pipefail

top=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
# A relative HM_BUILD is taken from where the test was started (hotmig-lab works elsewhere).
build=$(readlink -f "${HM_BUILD:-$top/build}")
lab="$top/lab/hotmig-lab"
migrate_vm="$build/migrate-vm/migrate-vm"
A=$("$lab" uri A)
B=$("$lab" uri B)
# migrate-vm reaches each host's hotmigd with the lab's client certificate and [host] groups.
HOTMIG_CONFIG=$("$lab" config)
export HOTMIG_CONFIG
guests=()
# Each test keeps its migration journals to itself.
HOTMIG_STATE_DIR=$(mktemp -d /tmp/hotmig-e2e-state.XXXXXX)
export HOTMIG_STATE_DIR

log() {
    echo "[$(date +%T)] $*" >&2
}

# What a guest kernel prints when it crashes or finds itself broken (an oops, a BUG, a panic, a
# general protection fault).
oops_regex='Oops:|BUG: |kernel BUG at|Kernel panic|general protection fault|Unable to handle|invalid opcode:'

# guest_oops NAME: prints NAME's console from its first kernel oops/panic on (60 lines) and
# succeeds, or fails when the console has none.
guest_oops() {
    local console line
    console=$("$lab" console "$1" 2>/dev/null) || return 1
    [ -f "$console" ] || return 1
    line=$(grep -anE "$oops_regex" "$console" | head -n 1 | cut -d: -f1)
    [ -n "$line" ] || return 1
    tail -n +"$((line > 5 ? line - 5 : 1))" "$console" | head -n 60 | tr -d '\r'
}

# crash_check: when a guest's kernel crashed, says so distinctly (printing the oops) and exits
# 3: a crashed guest is not a hotmig failure, and a hotmig failure is not a crash.
crash_check() {
    local g crashed=0 text
    for g in "${guests[@]}"; do
        text=$(guest_oops "$g") || continue
        crashed=1
        echo "GUEST KERNEL CRASH: the kernel of guest '$g' oopsed or panicked (a guest crash, not a hotmig verdict):" >&2
        echo "$text" | sed "s/^/  $g| /" >&2
    done
    ((crashed == 0)) || exit 3
}

fail() {
    # A failure that follows a guest crash is the crash's consequence: report the crash.
    crash_check
    echo "FAIL: $*" >&2
    for g in "${guests[@]}"; do
        echo "---- last console lines of $g" >&2
        tail -n 40 "$("$lab" console "$g")" >&2 || true
    done
    exit 1
}

cleanup() {
    local rc=$?
    rm -rf "$HOTMIG_STATE_DIR"
    # Every test, passed or failed, scans its guests' consoles for kernel oopses and panics
    # (fail() has done so already when it exited with 1).
    if ((rc != 3)); then
        (crash_check) || rc=3
    fi
    # keep_guests=1: the guests belong to a fixture (tests/e2e/mpi.sh), another test destroys them.
    ((${keep_guests:-0})) || for g in "${guests[@]}"; do
        for uri in "$A" "$B"; do
            virsh -q -c "$uri" destroy "$g" >/dev/null 2>&1 || true
        done
    done
    # A failed run may leave a lease of its guests' VFs behind (a migration whose recovery
    # could not finish): release it, so that the next run of the test (same guest names, same
    # stand-ins) does not meet it for the lease's 5 minutes. A passing run releases nothing.
    ((rc == 0)) || release_leases
    ((rc != 3)) || exit 3
}

release_leases() {
    local call="$build/tests/hm-hotmigd-call" h id lease dom g
    [ -x "$call" ] || return 0
    for h in A B; do
        while read -r id lease dom; do
            for g in "${guests[@]}"; do
                [ "$dom" = "$g" ] || continue
                if "$call" "$HOTMIG_CONFIG" "$h" release "$id" "$lease" >/dev/null 2>&1; then
                    echo "cleanup: released the lease of $h's $id for $g" >&2
                fi
            done
        done < <("$call" "$HOTMIG_CONFIG" "$h" leases 2>/dev/null || true)
    done
}
trap cleanup EXIT

# start_guest NAME HOST PEER [WORKLOAD ARGS]
# E2E_FABRIC=ib boots it in the lab's InfiniBand fabric mode (docs/lab.md).
start_guest() {
    local name=$1 host=$2 peer=$3 workload=${4:-}
    local fabric=()
    [ -n "${E2E_FABRIC:-}" ] && fabric=(--fabric "$E2E_FABRIC")
    guests+=("$name")
    if [ -n "$workload" ]; then
        "$lab" guest "$name" --host "$host" --peer "$peer" --workload "$workload" --bin-dir "$build" "${fabric[@]}" >/dev/null
    else
        "$lab" guest "$name" --host "$host" --peer "$peer" --bin-dir "$build" "${fabric[@]}" >/dev/null
    fi
}

# start_pair CLIENT SERVER MODE CYCLES [EXTRA CLIENT ARGS]: the server on B, the client on A.
start_pair() {
    local client=$1 server=$2 mode=$3 cycles=$4 extra=${5:-}
    start_guest "$server" B "$client" "--role server --mode $mode"
    start_guest "$client" A "$server" \
        "--role client --peer 198.51.100.$("$lab" index "$server") --mode $mode --cycles $cycles --tail 3 $extra"
    "$lab" wait "$server" 'HMWL .*"event":"ready"' --timeout 180 >/dev/null || fail "$server did not get ready"
    "$lab" wait "$client" 'HMWL .*"event":"ready"' --timeout 180 >/dev/null || fail "$client did not get ready"
    "$lab" wait "$client" 'HMWL .*"event":"progress"' --timeout 60 >/dev/null || fail "$client sends no traffic"
}

# migrate NAME SRC_URI DEST_URI OUT_JSON [migrate-vm options]: must succeed.
migrate() {
    local name=$1 src=$2 dst=$3 out=$4
    shift 4
    log "migrate-vm $name: $src -> $dst $*"
    if ! "$migrate_vm" --connect "$src" "$name" "$dst" --json "$@" >"$out"; then
        cat "$out" >&2
        fail "migrate-vm $name $src -> $dst failed"
    fi
    jq -r '.phases[] | "  \(.name) \(.status) \(.ms) ms \(.detail // "")"' "$out" >&2
}

# migrate_undone NAME FROM TO OUT_JSON CODE PHASE PATTERN: migrate-vm NAME from lab host FROM to
# TO (A, B; with a fault the caller sets in the environment, e.g. HOTMIG_FAULT_INJECT) must fail
# in PHASE and be undone: exit CODE, PATTERN (grep) in its error (kept in OUT_JSON.err), the
# report saying PHASE failed with the guest back on the source and its VF attached; the guest
# then runs on FROM with its VF.
migrate_undone() {
    local name=$1 from=$2 to=$3 out=$4 code=$5 phase=$6 pattern=$7 src dst rc
    src=$("$lab" uri "$from")
    dst=$("$lab" uri "$to")
    log "migrate-vm $name: $from -> $to, to fail in the $phase phase and be undone"
    set +e
    "$migrate_vm" --connect "$src" "$name" "$dst" --json >"$out" 2>"$out.err"
    rc=$?
    set -e
    cat "$out.err" >&2
    jq -r '.phases[] | "  \(.name) \(.status) \(.detail // "")"' "$out" >&2
    jq -r '.rollback[]? | "  undo \(.action) \(.ok) \(.detail // "")"' "$out" >&2
    [ "$rc" -eq "$code" ] || fail "migrate-vm exited $rc, expected $code ($phase failed, undone)"
    grep -q "$pattern" "$out.err" || fail "the error does not say '$pattern'"
    jq -e --arg phase "$phase" \
        '.failed_phase == $phase and .final_host == "source" and .vfs_attached == 1' "$out" \
        >/dev/null || fail "the report does not say the $phase phase failed and the VM is back"
    require_where "$name" "$from"
    has_vf "$name" "$src" || fail "$name lost its VF"
}

# result_of NAME: the workload's final result object (waits for it).
result_of() {
    local name=$1
    "$lab" wait "$name" 'HMWL .*"event":"result"' --timeout 240 >/dev/null || fail "$name printed no result"
    grep -a 'HMWL .*"event":"result"' "$("$lab" console "$name")" | tail -n 1 | sed 's/.*HMWL //' | tr -d '\r'
}

# stop_workload NAME: SIGUSR1 to NAME's hm-pingpong, which then stops as its last cycle would
# (drain, DONE, result), through the lab's shell, tried three times: the shell does not always
# answer right after migrations (an exec timed out once in 9 kill-walk runs). Fails when no try
# got through.
stop_workload() {
    local i
    for i in 1 2 3; do
        "$lab" exec "$1" 'kill -USR1 $(pidof hm-pingpong)' --timeout 20 >/dev/null 2>&1 && return 0
        log "$1: stopping the workload failed (try $i of 3)"
    done
    return 1
}

# agent_signal NAME SIG: sends SIG (STOP, CONT) to NAME's hotmig-agent through the lab's exec,
# tried three times: one exec in a loaded lab has been seen not to answer within 60 s (CI,
# e2e-dry-run's thaw), and a later one answers (the lab kills a command at its deadline).
agent_signal() {
    local i
    for i in 1 2 3; do
        "$lab" exec "$1" "kill -$2 \$(pidof hotmig-agent)" --timeout 30 && return 0
        log "$1: sending SIG$2 to the agent failed (try $i of 3)"
    done
    return 1
}

# has_vf NAME URI: the domain's live XML holds the VF stand-in, under either of its aliases:
# ua-hmvf0, or ua-hmvf0-r once a recovery plugged it back after a kill inside the unplug
# (engine/recover.c recover_plug_alias(); the next such recovery goes back to ua-hmvf0).
has_vf() {
    local xml
    xml=$(virsh -c "$2" dumpxml "$1") || return 1
    grep -qE "<alias name='ua-hmvf0(-r)?'/>" <<<"$xml"
}

# place NAME HOST TMPDIR: fixture guest NAME runs on HOST (moved there first when an earlier
# test left it away; the move's JSON in TMPDIR)
place() {
    local where
    where=$("$lab" where "$1") || fail "guest $1 of the fixture is not running (its PHASE=up test)"
    [ "$where" = "$2" ] && return 0
    log "fixture: moving $1 back to $2"
    migrate "$1" "$("$lab" uri "$where")" "$("$lab" uri "$2")" "$3/place-$1.json"
}

require_where() {
    local name=$1 want=$2 got
    got=$("$lab" where "$name")
    [ "$got" = "$want" ] || fail "$name runs on $got, expected $want"
}

# wait_evacuation_started LOGFN HOST: waits (20 s) until the hotmigd log that LOGFN prints says
# the evacuation of HOST started (or could not start); fails naming WHO otherwise.
wait_evacuation_started() {
    local logfn=$1 host=$2
    for _ in $(seq 1 100); do
        "$logfn" | grep -q "Evacuation .* of host '$host' started" && return 0
        "$logfn" | grep -q "Cannot evacuate host '$host'" && break
        sleep 0.2
    done
    fail "no evacuation of $host started: $("$logfn" | grep -i -e alert -e evacuat | tail -n 8)"
}

# wait_moved NAME HOST: waits (5 min) until the guest runs on HOST with its VF stand-in.
wait_moved() {
    local name=$1 host=$2 uri
    for _ in $(seq 1 600); do
        [ "$("$lab" where "$name")" = "$host" ] && break
        sleep 0.5
    done
    require_where "$name" "$host"
    uri=$("$lab" uri "$host")
    has_vf "$name" "$uri" || fail "$name has no VF on $host"
}

# wait_log LOGFN PATTERN: waits (30 s) until the log LOGFN prints has PATTERN (grep -E).
wait_log() {
    for _ in $(seq 1 150); do
        "$1" | grep -qE "$2" && return 0
        sleep 0.2
    done
    return 1
}
