#!/bin/bash
# Bad input gets a clear error naming it and changes nothing: an unknown domain, an
# unreachable destination, a bad option, a guest whose agent does not answer (refused unless
# --no-agent), and a domain without a VF (migrates without unplug and plug, and says so).
source "$(dirname "$0")/lib.sh"
g=bi-g
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

start_guest "$g" A bi-peer
guests+=(bi-novf)
"$lab" guest bi-novf --host A --peer bi-peer2 --no-vf --bin-dir "$build" >/dev/null
"$lab" wait "$g" 'HMLAB booted' --timeout 180 >/dev/null || fail "$g did not boot"
"$lab" wait bi-novf 'HMLAB booted' --timeout 180 >/dev/null || fail "bi-novf did not boot"

unchanged() {
    require_where "$g" A
    has_vf "$g" "$A" || fail "$g lost its VF after: $1"
}

# expect_failure RC PATTERN ARGS...: migrate-vm exits RC and its stderr matches PATTERN.
# Exit codes (migrate-vm(1)): 2 usage, 10 connect failed, 13 prepare failed (the agent).
expect_failure() {
    local want=$1 pattern=$2 rc
    shift 2
    set +e
    "$migrate_vm" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    cat "$tmp/err" >&2
    [ "$rc" -eq "$want" ] || fail "migrate-vm $* exited $rc, expected $want"
    grep -q -- "$pattern" "$tmp/err" || fail "migrate-vm $*: error does not mention '$pattern'"
}

log "unknown domain"
expect_failure 10 "'no-such-vm'" --connect "$A" no-such-vm "$B"
unchanged "unknown domain"

log "unreachable destination"
expect_failure 10 "qemu+tcp://127.0.0.1:1/system" --connect "$A" "$g" qemu+tcp://127.0.0.1:1/system
unchanged "unreachable destination"

log "bad options"
expect_failure 2 "--plug-attempts" --connect "$A" "$g" "$B" --plug-attempts 0
expect_failure 2 "expected DOMAIN and DEST (a libvirt URI" --connect "$A" "$g"
expect_failure 2 "'nonsense'" --connect "$A" "$g" "$B" --target-vf nonsense
unchanged "bad options"

log "agent that does not answer"
"$lab" exec "$g" 'kill $(pidof hotmig-agent)' >/dev/null || fail "cannot stop the agent in $g"
expect_failure 13 "--no-agent" --connect "$A" "$g" "$B" --agent-timeout 3
unchanged "silent agent"

log "--no-agent goes on"
migrate "$g" "$A" "$B" "$tmp/noagent.json" --no-agent
jq -e '.ok and (.phases[] | select(.name == "prepare") | .status == "skipped")
       and (.phases[] | select(.name == "unplug") | .status == "ok")' "$tmp/noagent.json" >/dev/null ||
    fail "--no-agent run not as expected"
require_where "$g" B
has_vf "$g" "$B" || fail "$g has no VF on B"

log "domain without a VF"
migrate bi-novf "$A" "$B" "$tmp/novf.json"
jq -e '.ok and .vfs_total == 0
       and (.phases[] | select(.name == "inspect") | .detail | test("no VF"))
       and ([.phases[] | select(.name == "prepare" or .name == "unplug" or .name == "plug"
                                or .name == "resume") | .status == "skipped"] | all)' \
    "$tmp/novf.json" >/dev/null || fail "no-VF run not as expected"
require_where bi-novf B
log "ok"
