#!/bin/bash
# Unmodified ibv_rc_pingpong (Debian's ibverbs-utils) under LD_PRELOAD=libhotmig-verbs.so between
# two lab guests, across four live migrations: the client's guest A->B->A, then the server's
# B->A->B. Asserts: every migrate-vm succeeds, both layers quiesced and resumed (or reconnected)
# at every move, the pingpong was still running after the last move, and both ends exit 0 and
# print their figures. EVENTS=1 runs the tool with -e (completion channel). Prints "VERBS ..."
# with the iteration time and each side's quiesce/resume times.
source "$(dirname "$0")/lib.sh"
events=${EVENTS:-0}
case $events in 0) opt='' sfx=p ;; 1) opt='-e' sfx=e ;; *) fail "EVENTS must be 0 or 1" ;; esac
iters=${ITERS:-6000}
c=vrc-$sfx-c
s=vrc-$sfx-s
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

[ -e "$build/guest-agent/verbs/libhotmig-verbs.so" ] || fail "libhotmig-verbs.so is not built"
start_guest "$s" B "$c"
start_guest "$c" A "$s"
"$lab" wait "$s" 'HMLAB booted' --timeout 240 >/dev/null || fail "$s did not boot"
"$lab" wait "$c" 'HMLAB booted' --timeout 240 >/dev/null || fail "$c did not boot"
si=$("$lab" index "$s")
ci=$("$lab" index "$c")
gid_s=$(grep -a 'HMLAB vf up' "$("$lab" console "$s")" | tail -n 1 | sed 's/.*gid=//' | tr -d '\r')
[ -n "$gid_s" ] || fail "$s printed no GID index"
# Each layer finds the peer guest's agent from the peer's RoCE GID (its VF address).
env_s="LD_PRELOAD=libhotmig-verbs.so HOTMIG_VERBS_PEERS=192.0.2.$ci=198.51.100.$ci"
env_c="LD_PRELOAD=libhotmig-verbs.so HOTMIG_VERBS_PEERS=192.0.2.$si=198.51.100.$si"
run="ibv_rc_pingpong -d rxe0 -g $gid_s -n $iters $opt"
"$lab" exec "$s" "$env_s $run >/tmp/pp.log 2>&1 & echo \$! >/tmp/pp.pid" --timeout 60 ||
    fail "cannot start the server"
sleep 1
"$lab" exec "$c" "$env_c $run 198.51.100.$si >/tmp/pp.log 2>&1 & echo \$! >/tmp/pp.pid" \
    --timeout 60 || fail "cannot start the client"
# traffic flows before the first move: the client's QP is registered and connected
for _ in $(seq 1 60); do
    "$lab" exec "$c" 'grep -q "remote address" /tmp/pp.log' --timeout 20 && break
    sleep 1
done
"$lab" exec "$c" 'grep -q "remote address" /tmp/pp.log' --timeout 20 || {
    "$lab" exec "$c" 'cat /tmp/pp.log' --timeout 20 >&2 || true
    fail "the pingpong did not connect"
}

alive() {
    "$lab" exec "$1" 'kill -0 $(cat /tmp/pp.pid)' --timeout 20
}

n=0
for move in "$c $A $B" "$c $B $A" "$s $B $A" "$s $A $B"; do
    read -r g from to <<<"$move"
    n=$((n + 1))
    alive "$c" || fail "the client ended before move $n"
    migrate "$g" "$from" "$to" "$tmp/m$n.json"
    jq -e '.ok' "$tmp/m$n.json" >/dev/null || fail "move $n of $g not ok"
    "$lab" exec "$g" "test \$(grep -c 'resumed on' /tmp/pp.log) -ge \$(( $( [ "$g" = "$c" ] && echo "$n" || echo "$((n - 2))") ))" \
        --timeout 20 || fail "the layer in $g did not resume after move $n"
done
alive "$c" || fail "the client ended before the last move completed: more iterations are needed"
"$lab" exec "$s" 'test $(grep -c "reconnected to its peer" /tmp/pp.log) -ge 2' --timeout 20 ||
    fail "the server's layer did not reconnect twice"
"$lab" exec "$c" 'test $(grep -c "reconnected to its peer" /tmp/pp.log) -ge 2' --timeout 20 ||
    fail "the client's layer did not reconnect twice"

# both ends finish: exit status 0 and the figures
for g in "$c" "$s"; do
    ok=0
    for _ in $(seq 1 150); do
        if ! alive "$g"; then ok=1; break; fi
        sleep 2
    done
    [ $ok = 1 ] || fail "$g: the pingpong did not finish"
done
for g in "$c" "$s"; do
    "$lab" exec "$g" 'cat /tmp/pp.log' --timeout 20 >"$tmp/$g.log" || true
    cat "$tmp/$g.log" >&2
    grep -q "^$iters iters in .* usec/iter" "$tmp/$g.log" || fail "$g printed no figures (it failed)"
done
echo "VERBS tool=ibv_rc_pingpong events=$events iters=$iters" \
    "client_usec_per_iter=$(grep -o '[0-9.]* usec/iter' "$tmp/$c.log" | cut -d' ' -f1)" \
    "client_quiesce_ms=$(grep -o 'quiesced in [0-9]*' "$tmp/$c.log" | awk '{print $3}' | paste -sd, -)" \
    "client_resume_ms=$(grep -o 'resumed on [^ ]* in [0-9]*' "$tmp/$c.log" | awk '{print $5}' | paste -sd, -)" \
    "server_quiesce_ms=$(grep -o 'quiesced in [0-9]*' "$tmp/$s.log" | awk '{print $3}' | paste -sd, -)" \
    "server_resume_ms=$(grep -o 'resumed on [^ ]* in [0-9]*' "$tmp/$s.log" | awk '{print $5}' | paste -sd, -)"
log "ok: ibv_rc_pingpong $opt survived 4 migrations"
