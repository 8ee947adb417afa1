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
