#!/bin/bash
# The guest agent stops answering (SIGSTOP) in the middle of a prepare. migrate-vm gives up on
# the prepare; its undo cannot resume a frozen agent: exit 3, the guest still on A with its VF
# (no unplug happened), the journal kept. Once the agent runs again (SIGCONT), 'migrate-vm
# --recover' resumes it: the workload resumes and ends with 0 lost, 0 corrupt; a second
# --recover does nothing.
#
# The freeze goes through the lab's shell channel ('hotmig-lab exec', ~0.6 s), slower than a
# whole prepare on the lab (~0.3 s). So the client's workload holds every quiesce up for
# 3 s (--quiesce-delay): the agent waits for it with the prepare under way, which is the
# window the freeze must hit. If the freeze lands before the agent read the prepare instead,
# the request waits in the channel and the agent acts on it when it runs again, before the
# recovery's resume: the same end state, asserted the same way; the test says which it was.
# (A freeze before the handshake would be the refusal cell, exit 13, nothing asked: the
# handshake ends within milliseconds of 'prepare started', long before the exec lands.)
source "$(dirname "$0")/lib.sh"
c=as-c
s=as-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT
journal=$HOTMIG_STATE_DIR/journal/$c.journal

start_pair "$c" "$s" lazy 1 "--quiesce-delay 3000"
console=$("$lab" console "$c")
mark=$("$lab" mark "$c")

log "migrate-vm with --prepare-timeout 4 --agent-timeout 3; SIGSTOP to the agent once the prepare runs"
t0=$(date +%s.%N)
"$migrate_vm" --connect "$A" "$c" "$B" --verbose --prepare-timeout 4 --agent-timeout 3 \
    >"$tmp/out" 2>"$tmp/err" &
pid=$!
timeout 120 bash -c "until grep -q ' prepare *started' '$tmp/err'; do sleep 0.05; done" ||
    { cat "$tmp/err" >&2; fail "migrate-vm never reached the prepare"; }
agent_signal "$c" STOP || fail "could not freeze the agent"
log "agent frozen"
set +e
wait "$pid"
rc=$?
set -e
t1=$(date +%s.%N)
cat "$tmp/err" >&2
[ "$rc" -eq 3 ] || fail "migrate-vm exited $rc with the agent frozen, expected 3 (undo failed, journal kept)"
grep -q ' prepare *failed' "$tmp/err" || fail "the prepare did not fail"
! grep -q ' unplug *started' "$tmp/err" || fail "migrate-vm went on past the prepare"
log "exit 3 after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
require_where "$c" A
has_vf "$c" "$A" || fail "$c lost its VF although no unplug happened"
[ -s "$journal" ] || fail "no journal kept after the failed undo ($journal)"
jq -se 'any(.[]; .event == "prepare")' "$journal" >/dev/null ||
    fail "the journal does not record the prepare: $(cat "$journal")"

# Which order did the race take? The agent logs each prepare it starts on the console: if
# that is there before the agent runs again, it was frozen with the prepare under way.
if tail -c "+$((mark + 1))" "$console" | grep -aq 'hotmig-agent: prepare: '; then
    order="frozen with the prepare under way"
    tail -c "+$((mark + 1))" "$console" | grep -aq 'quiesce requested' &&
        order+=" (the workload had been asked to quiesce)"
else
    order="frozen before the agent read the prepare (it acts on it when it runs again)"
fi
log "order: $order"

agent_signal "$c" CONT || fail "could not thaw the agent"
log "agent running again; migrate-vm --recover"
t0=$(date +%s.%N)
if ! "$migrate_vm" --recover "$c" --json >"$tmp/rec.json" 2>"$tmp/rec.err"; then
    cat "$tmp/rec.json" "$tmp/rec.err" >&2
    fail "recovery failed"
fi
t1=$(date +%s.%N)
jq -c '.[] | {outcome, final_host, vfs_attached, actions: [.actions[] | "\(.action):\(.ok)"]}' \
    "$tmp/rec.json" >&2
log "recovery took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
jq -e '.[0].outcome == "rolled back" and .[0].final_host == "source" and .[0].vfs_attached == 1' \
    "$tmp/rec.json" >/dev/null || fail "unexpected recovery: $(cat "$tmp/rec.json")"
jq -e '[.[0].actions[] | select(.action == "agent-resume" and .ok)] | length == 1' \
    "$tmp/rec.json" >/dev/null || fail "the recovery did not resume the agent"
[ ! -e "$journal" ] || fail "journal left after the recovery"
require_where "$c" A
has_vf "$c" "$A" || fail "$c has no VF after the recovery"
"$migrate_vm" --recover "$c" --json >"$tmp/rec2.json" || fail "second recovery failed"
jq -e '.[0].outcome == "nothing to do"' "$tmp/rec2.json" >/dev/null ||
    fail "second recovery did something: $(cat "$tmp/rec2.json")"

# The workload was asked to quiesce (before the freeze or when the agent ran again): every
# quiesce must be followed by a resume.
timeout 60 bash -c "until [ \$(grep -ac 'HMWL .*\"event\":\"resumed\".*\"side\":\"local\"' '$console') -ge \$(grep -ac 'HMWL .*\"event\":\"quiesced\".*\"side\":\"local\"' '$console') ]; do sleep 0.2; done" ||
    fail "the workload did not resume"
result=$(result_of "$c")
echo "client result: $result" >&2
echo "$result" | jq -e '.ok and .lost == 0 and .corrupt == 0' >/dev/null || fail "workload: $result"
log "ok: exit 3, journal kept, recovered on A with its VF; $order"
