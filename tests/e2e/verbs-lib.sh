# Helpers of the verbs layer's e2e tests (sourced after lib.sh). A tool runs in the background
# in a guest with its output (and the layer's log lines) on the guest's console, prefixed by a
# tag: the test reads the console log from the host, so it needs no guest shell while the tool
# busy-polls the guest's one vCPU.

# vtool GUEST TAG 'COMMAND': starts COMMAND; its output goes to the console as "TAG line", its
# exit status as "TAG rc=N".
# Every descriptor of the background job is redirected: one left on the debug shell's virtio
# port keeps it open, and the lab's next exec cannot open the port. awk flushes each line:
# the initramfs's /dev/console is not a tty, so sed would hold its output in a 4 KiB buffer.
# The tool's own stdout is a pipe (fully buffered until it exits): wait for the layer's lines.
vtool() {
    "$lab" exec "$1" "( ( $3; echo \"rc=\$?\" ) 2>&1 | awk '{ print \"$2 \" \$0; fflush() }' >/dev/console 2>&1 ) </dev/null >/dev/null 2>&1 &" \
        --timeout 180 || fail "cannot start '$3' in $1"
}

# vcount GUEST PATTERN: console lines matching PATTERN (grep -E)
vcount() { grep -acE -- "$2" "$("$lab" console "$1")" || true; }

# vwait GUEST PATTERN N TIMEOUT_S: until the console has N lines matching PATTERN
vwait() {
    for _ in $(seq 1 $(($4 * 2))); do
        [ "$(vcount "$1" "$2")" -ge "$3" ] && return 0
        sleep 0.5
    done
    return 1
}

# vlog GUEST TAG: the tool's lines (tag removed) since the guest booted
vlog() { grep -a "$2 " "$("$lab" console "$1")" | sed "s/^.*$2 //" | tr -d '\r'; }

# vstuck GUEST PROGRAM: what a tool that did not finish is doing, for the failure's report:
# each thread of each PROGRAM process with its state, kernel wait channel, system call
# (number, arguments, stack and instruction pointers) and kernel stack, then the process's
# mappings (to name the library and the lock behind a futex address, offline). Best effort:
# a tool busy-polling the guest's one vCPU may starve the shell.
vstuck() {
    echo "---- $1: the threads of $2 that did not finish" >&2
    "$lab" exec "$1" 'for p in $(pidof '"$2"'); do echo "pid $p"; for t in /proc/$p/task/*; do '\
'echo "thread ${t##*/} $(cat $t/comm) state=$(cut -d" " -f3 $t/stat) wchan=$(cat $t/wchan) syscall=$(cat $t/syscall)"; '\
'sed "s/^/    /" $t/stack 2>/dev/null; done; cat /proc/$p/maps; done' --timeout 30 >&2 ||
        echo "(the guest's shell did not answer)" >&2
}

# vpeers GUEST: the layer's HOTMIG_VERBS_PEERS entry for GUEST (its VF address = its RoCE GID,
# its control address = where its agent routes peers)
vpeers() {
    local i
    i=$("$lab" index "$1")
    echo "192.0.2.$i=198.51.100.$i"
}

# vgid GUEST: the GID index of the guest's IPv4 RoCE GID
vgid() {
    grep -a 'HMLAB vf up' "$("$lab" console "$1")" | tail -n 1 | sed 's/.*gid=//' | tr -d '\r'
}

# vconnected GUEST TIMEOUT_S: until the guest has an RC QP of a process in state RTS (the
# tool's own "connected" output is buffered in its pipe until it exits)
vconnected() {
    for _ in $(seq 1 "$2"); do
        "$lab" exec "$1" "rdma res show qp | grep -q 'type RC state RTS.*pid'" --timeout 30 && return 0
        sleep 1
    done
    return 1
}

# vpair CLIENT SERVER: boots the server on B and the client on A (test guests, destroyed at
# exit) and waits until both booted; fails without the layer built
vpair() {
    [ -e "$build/guest-agent/verbs/libhotmig-verbs.so" ] || fail "libhotmig-verbs.so is not built"
    start_guest "$2" B "$1"
    start_guest "$1" A "$2"
    "$lab" wait "$2" 'HMLAB booted' --timeout 240 >/dev/null || fail "$2 did not boot"
    "$lab" wait "$1" 'HMLAB booted' --timeout 240 >/dev/null || fail "$1 did not boot"
}

# vtrio CLIENT SERVER THIRD SEGMENT: like vpair, but the three guests share the control segment
# SEGMENT (a hub: each sees the others' control traffic), the server on B, the client on A with
# THIRD beside it, without a VF (it uses the control network only)
vtrio() {
    local g
    [ -e "$build/guest-agent/verbs/libhotmig-verbs.so" ] || fail "libhotmig-verbs.so is not built"
    guests+=("$2" "$1" "$3")
    "$lab" guest "$2" --host B --segment "$4" --bin-dir "$build" >/dev/null || fail "cannot start $2"
    "$lab" guest "$1" --host A --segment "$4" --bin-dir "$build" >/dev/null || fail "cannot start $1"
    "$lab" guest "$3" --host A --segment "$4" --no-vf --bin-dir "$build" >/dev/null ||
        fail "cannot start $3"
    for g in "$2" "$1" "$3"; do
        "$lab" wait "$g" 'HMLAB booted' --timeout 240 >/dev/null || fail "$g did not boot"
    done
}

# vtag VQPN: the route tag of QP VQPN under the test's job key (hv_auth_route_tag(): the first
# 16 bytes of HMAC-SHA256(key, "hotmig-verbs-route 1" NUL, VQPN as 4 bytes big-endian), hex)
vtag() {
    { printf 'hotmig-verbs-route 1\0'; printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) \
        $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; } |
        openssl dgst -sha256 -hmac "$HM_VERBS_KEY" -r | cut -c1-32
}

# vfinish TAG TOOL ITERS CLIENT SERVER [WORD...]: both ends of the pingpong TOOL (tagged TAG on
# the consoles) finish with status 0 and their "ITERS iters in ... usec/iter" figures (their
# lines kept in $tmp/GUEST.log, shown on stderr); then one "VERBS tool=TOOL WORD... iters=..."
# line with the client's figure and each end's quiesce and resume times (ms, one per move).
vfinish() {
    local tag=$1 tool=$2 iters=$3 c=$4 s=$5 g
    shift 5
    for g in "$c" "$s"; do
        vwait "$g" "$tag rc=" 1 400 || { vstuck "$g" "$tool"; fail "$g: $tool did not finish"; }
        vlog "$g" "$tag" >"$tmp/$g.log"
        cat "$tmp/$g.log" >&2
        grep -q '^rc=0$' "$tmp/$g.log" || fail "$g: $tool failed"
        grep -q "^$iters iters in .* usec/iter" "$tmp/$g.log" || fail "$g printed no figures"
    done
    echo "VERBS tool=$tool" "$@" "iters=$iters" \
        "client_usec_per_iter=$(grep -o '[0-9.]* usec/iter' "$tmp/$c.log" | cut -d' ' -f1)" \
        "client_quiesce_ms=$(grep -o 'quiesced in [0-9]*' "$tmp/$c.log" | awk '{print $3}' | paste -sd, -)" \
        "client_resume_ms=$(grep -o 'resumed on [^ ]* in [0-9]*' "$tmp/$c.log" | awk '{print $5}' | paste -sd, -)" \
        "server_quiesce_ms=$(grep -o 'quiesced in [0-9]*' "$tmp/$s.log" | awk '{print $3}' | paste -sd, -)" \
        "server_resume_ms=$(grep -o 'resumed on [^ ]* in [0-9]*' "$tmp/$s.log" | awk '{print $5}' | paste -sd, -)"
}

# vswap GUEST VF_IF: a device swap without a VM move, through the agent's host channel (sync,
# protocol 2, prepare), rxe0 deleted and created again on VF_IF (a fresh device restarts its QP
# numbers and memory keys), resume; fails unless exactly one process (the layer) quiesced and
# resumed. Sets vswap_ms (prepare to resume answered).
# vcalibrate CLIENT SERVER "TOOL ARGS" SERVER_ADDR SERVER_ENV CLIENT_ENV SECONDS MAX: a
# 200-iteration run of TOOL between the guests (the lab's speed varies with its load); sets usec
# (its time per iteration) and iters (about SECONDS of traffic at that rate, 1000..MAX; $ITERS
# wins). Returns 1 with vcal_err set when the run fails.
vcalibrate() {
    local c=$1 s=$2 cal="$3 -n 200" addr=$4 env_s=$5 env_c=$6 secs=$7 max=$8
    vtool "$s" CAL "$env_s $cal"
    sleep 1
    vtool "$c" CAL "$env_c $cal $addr"
    vwait "$c" 'CAL rc=' 1 300 || { vcal_err="the calibration run did not finish"; return 1; }
    vwait "$s" 'CAL rc=' 1 60 || { vcal_err="the calibration run's server did not finish"; return 1; }
    usec=$(vlog "$c" CAL | grep -o '[0-9.]* usec/iter' | cut -d' ' -f1)
    [ -n "$usec" ] || { vcal_err="the calibration run printed no figures: $(vlog "$c" CAL | tail -3)"; return 1; }
    iters=${ITERS:-$(awk -v u="$usec" -v t="$secs" -v m="$max" 'BEGIN { n = int(t * 1e6 / u); if (n < 1000) n = 1000; if (n > m) n = m; print n }')}
    log "calibration: $usec usec/iter: $iters iterations"
}

# vagent_restart GUEST ARGS...: GUEST's agent again, with ARGS, its log on the console (once the
# old one is gone; --daemonize returns once the new one listens and has the channel)
vagent_restart() {
    local g=$1
    shift
    "$lab" exec "$g" "kill \$(pidof hotmig-agent); for _ in \$(seq 100); do pidof hotmig-agent >/dev/null || break; sleep 0.2; done; hotmig-agent --daemonize --port org.hotmig.agent.0 --socket /run/hotmig/agent.sock $* >/dev/console 2>&1" --timeout 180 ||
        fail "$g: the agent did not start with $*"
}

# vagents_standby GUEST...: each guest's agent again with --standby on its control NIC (issue
# 30), recorded in vagents_restored; vagents_restore starts them as the guest's init does
# (--peer-listen on the control address; call it from the EXIT trap).
vagents_restored=()
vagents_standby() {
    local g ifc ip
    for g in "$@"; do
        read -r ifc ip <<<"$(vctl "$g")"
        [ -n "$ip" ] || fail "$g: no control NIC"
        vagents_restored+=("$g $ip")
        vagent_restart "$g" --peer-listen "$ip:7475" --standby "$ifc"
    done
}
vagents_restore() {
    local gi
    for gi in "${vagents_restored[@]}"; do
        vagent_restart "${gi%% *}" --peer-listen "${gi#* }:7475" || true
    done
}

# vctl GUEST: its control NIC's name and IPv4 address (hm.ctl_mac's, hm.ctl_ip's), one line
vctl() {
    local ifc ip
    ifc=$("$lab" exec "$1" 'm=$(sed -n "s/.*hm.ctl_mac=\([^ ]*\).*/\1/p" /proc/cmdline); for i in /sys/class/net/*; do [ "$(cat $i/address)" = "$m" ] && basename $i; done; true' --timeout 60)
    ip=$("$lab" exec "$1" 'sed -n "s/.*hm.ctl_ip=\([^/ ]*\).*/\1/p" /proc/cmdline' --timeout 60)
    [ -n "$ifc" ] && [ -n "$ip" ] || fail "$1: no control NIC"
    echo "$ifc $ip"
}

# vchannel_open GUEST: the agent's host channel on fds ag_in/ag_out (vagent asks on them),
# synced, protocol 2; vchannel_close ends it
vchannel_open() {
    local sock
    sock=$("$lab" channel "$1")
    coproc AG { exec socat - "UNIX-CONNECT:$sock"; }
    # bash closes a coproc's descriptors in subshells ($(...), pipelines): use copies
    exec {ag_in}>&"${AG[1]}" {ag_out}<&"${AG[0]}"
    printf '\xff' >&"$ag_in"
    vagent '{"execute":"sync","arguments":{"id":7}}' | grep -q '"return":7' || fail "no sync"
    vagent '{"execute":"info","arguments":{"protocol":2}}' >/dev/null
}

vchannel_close() {
    kill "$AG_PID" 2>/dev/null || true
    wait "$AG_PID" 2>/dev/null || true
    exec {ag_in}>&- {ag_out}<&-
}

vswap() {
    local g=$1 vf_if=$2 prep res t0
    vchannel_open "$g"
    t0=$(date +%s%N)
    prep=$(vagent '{"execute":"prepare","arguments":{"timeout_ms":30000}}')
    echo "prepare: $prep" >&2
    jq -e '.return.failed == [] and (.return.quiesced | length) == 1' <<<"$prep" >/dev/null ||
        fail "prepare did not quiesce the layer: $prep"
    if ! "$lab" exec "$g" "rdma link del rxe0 && rdma link add rxe0 type rxe netdev $vf_if" --timeout 60; then
        # Seen once (CI run 10.2): 'rdma link del' did not return. rxe cannot take a device
        # from a process that has it open, so its deletion waits for every uverbs file to be
        # closed: say who holds one, and where the kernel waits.
        "$lab" exec "$g" 'dmesg | tail -n 30; for f in /proc/[0-9]*/fd/*; do t=$(readlink "$f" 2>/dev/null); case $t in /dev/infiniband/*) echo "open: $f -> $t ($(tr "\0" " " <"${f%/fd/*}/cmdline"))" ;; esac; done; for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = rdma ] && { echo "$p (rdma) in the kernel:"; cat $p/stack; }; done' \
            --timeout 20 >&2 || true
        fail "cannot re-create rxe0"
    fi
    res=$(vagent '{"execute":"resume","arguments":{"timeout_ms":60000}}')
    vswap_ms=$((($(date +%s%N) - t0) / 1000000))
    echo "resume: $res" >&2
    jq -e '.return.failed == [] and (.return.resumed | length) == 1' <<<"$res" >/dev/null ||
        fail "the layer did not resume: $res"
    vchannel_close
}

# vagent JSON: one request on vswap's channel; prints the reply line
vagent() {
    local line
    printf '%s\n' "$1" >&"$ag_in"
    IFS= read -r -t 90 line <&"$ag_out" || fail "the agent did not answer $1"
    printf '%s\n' "${line#$'\xff'}"
}

# vvfif GUEST: the guest's VF interface (the stand-in NIC rxe0 sits on)
vvfif() {
    grep -a 'HMLAB vf up' "$("$lab" console "$1")" | tail -n 1 | awk '{print $4}'
}

# The test's job key (docs/security.md, "The verbs peer protocol"): both ends of its tools
# hold it, the layers refuse each other's requests without it. Fresh for each test.
HM_VERBS_KEY=${HM_VERBS_KEY:-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')}

# venv PEER: the environment of a tool under the layer whose peer runs on guest PEER
# (without HOTMIG_VERBS_PEERS when E2E_PEERS=directory or E2E_FABRIC=ib: the layers find each
# other in the agents' directory, as on a cluster where nobody writes a list)
venv() {
    local peers="HOTMIG_VERBS_PEERS=$(vpeers "$1") "
    [ "${E2E_PEERS:-list}" = directory ] || [ "${E2E_FABRIC:-roce}" = ib ] && peers=
    echo "LD_PRELOAD=libhotmig-verbs.so HOTMIG_VERBS_DEBUG=1 ${peers}HOTMIG_VERBS_KEY=$HM_VERBS_KEY"
}

# vburn GUEST GID_INDEX: uses up QP numbers and memory keys of GUEST's rxe0 (six short-lived
# ibv_ud_pingpong servers, each with a QP and an MR), so that a fresh device numbers the next
# QPs differently: an identity mapping cannot hide a missed translation
vburn() {
    "$lab" exec "$1" "for i in 1 2 3 4 5 6; do ibv_ud_pingpong -d rxe0 -g $2 -p 1900\$i & p=\$!; sleep 1; kill \$p; done; wait" \
        --timeout 120 >/dev/null || true
}

# vibready GUEST...: in the IB fabric mode, until the lab's SM activated each guest's port (with
# its slot's LID) and each guest's directory lists the IB ports of all of them with their LIDs
vibready() {
    local g n
    for g in "$@"; do # the lab's SM activates each port (and gives it its slot's LID)
        "$lab" wait "$g" 'HMLAB ib port [a-z0-9]* ACTIVE' --timeout 120 >/dev/null ||
            fail "$g: the SM did not activate its port"
    done
    # the agents' directory converges within a refresh (10 s) of their start: each guest's
    # file names every port with its LID before the programs exchange theirs
    for g in "$@"; do
        for _ in $(seq 1 60); do
            n=$("$lab" exec "$g" "awk 'NR > 1 && \$2 > 0' /run/hotmig/verbs/directory 2>/dev/null | wc -l" \
                --timeout 30 || echo 0)
            [ "${n:-0}" -ge $# ] && break
            sleep 1
        done
        [ "${n:-0}" -ge $# ] || fail "$g: the agents' directory does not list the $# IB ports"
        "$lab" exec "$g" 'cat /run/hotmig/verbs/directory' --timeout 30 | sed "s/^/  $g: /" >&2
    done
}
