# migrate-vm --dry-run on the lab: a good case passes every check; then each bad case fails
# its own line with exit 8 and nothing changes: no free VF on the destination (B's hotmigd has
# the stand-in leased to someone else), an unknown domain, a silent agent (SIGSTOP), a
# destination whose hotmigd does not answer, and an incompatible destination: a libvirt host
# that cannot run the domain (the test driver offers no x86_64 QEMU guest). Two lab hosts on
# one machine cannot differ in CPU: the live CPU of a TCG guest is what TCG gave it, so the
# other lab host always provides it. Then a verbs program without the layer or libhotmig
# (ibv_rc_pingpong alone, holding the VF's device): the jobs check fails naming it, and a real
# move is refused before anything changed (exit 9).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"

c=dry-client
s=dry-server
start_pair "$c" "$s" lazy 1
hotmigd_call="$build/tests/hm-hotmigd-call"
out=$(mktemp /tmp/hotmig-dry.XXXXXX)
trap 'rm -f "$out"; cleanup' EXIT

# dry_run RC NAME DEST [options]: runs the dry run, expects exit RC, leaves the lines in $out.
dry_run() {
    local want=$1 name=$2 dst=$3 rc=0
    shift 3
    "$migrate_vm" --connect "$A" --dry-run "$name" "$dst" "$@" >"$out" 2>&1 || rc=$?
    sed 's/^/    /' "$out" >&2
    [ "$rc" -eq "$want" ] || fail "--dry-run $name -> $dst exited $rc, expected $want"
}

# expect_line STATUS CHECK PATTERN
expect_line() {
    grep -qE "^$1 +$2 +.*$3" "$out" || fail "no line '$1 $2 ...$3' in the dry run"
}

unchanged() {
    require_where "$c" A
    has_vf "$c" "$A" || fail "$c lost its VF on A"
    local pool
    # The pool must be read (an unreadable one would look free) and list the tap as free.
    pool=$("$hotmigd_call" "$HOTMIG_CONFIG" B list) || fail "cannot list B's VF pool: $pool"
    awk -v t="$1" '$1 == t && $3 == "free" {found = 1} END {exit !found}' <<<"$pool" ||
        fail "B's stand-in $1 is not free after the dry run: $(awk -v t="$1" '$1 == t' <<<"$pool")"
}

tap=$(virsh -c "$A" dumpxml "$c" | sed -n "s/.*<target dev='\(hmlab[0-9]*vf[0-9]*\)'.*/\1/p" | head -n 1)
[ -n "$tap" ] || fail "cannot find the stand-in tap of $c"

log "good case: the destination named by its [host B] group"
dry_run 0 "$c" B
for check in source domain destination agent vfs migration-port hotmigd files target-vf cpu; do
    expect_line PASS "$check" ""
done
expect_line PASS target-vf "ua-hmvf0 -> $tap"
expect_line PASS files "the destination has the domain's 2 file\\(s\\)"
unchanged "$tap"

log "a verbs program without the layer: ibv_rc_pingpong holds the VF's device"
gid=$(vgid "$c")
[ -n "$gid" ] || fail "$c printed no GID index"
vtool "$c" VRAW "ibv_rc_pingpong -d rxe0 -g $gid -p 18600 -n 5"
held=
for _ in $(seq 1 60); do # it opens the device, then waits for a client that never comes
    held=$("$lab" exec "$c" 'p=$(pidof ibv_rc_pingpong) && ls -l /proc/$p/fd | grep -q uverbs && echo $p' --timeout 30 | tr -d '\r') && [ -n "$held" ] && break
    sleep 1
done
[ -n "$held" ] || fail "ibv_rc_pingpong did not open the device in $c"
dry_run 8 "$c" B
expect_line FAIL jobs "process 'ibv_rc_pingpong' \\(pid $held\\) holds the RDMA device uverbs[0-9]+ without the hotmig verbs layer or libhotmig, which a migration cannot carry"
rc=0
"$migrate_vm" --connect "$A" "$c" B >"$out" 2>&1 || rc=$?
sed 's/^/    /' "$out" >&2
[ "$rc" -eq 9 ] || fail "migrate-vm moved (or failed otherwise, exit $rc) with ibv_rc_pingpong holding the device"
grep -q "process 'ibv_rc_pingpong' (pid $held) holds the RDMA device" "$out" ||
    fail "migrate-vm's refusal does not name ibv_rc_pingpong"
"$lab" exec "$c" "kill $held" --timeout 30 >/dev/null || fail "cannot stop ibv_rc_pingpong in $c"
vwait "$c" 'VRAW rc=' 1 30 || fail "ibv_rc_pingpong did not end in $c"
unchanged "$tap"
dry_run 0 "$c" B

log "no free VF: B's hotmigd has $tap leased to someone else"
lease=$("$hotmigd_call" "$HOTMIG_CONFIG" B lease "$tap" "e2e dry-run" "holding the VF" other-vm) ||
    fail "could not lease $tap on B"
dry_run 8 "$c" B
expect_line FAIL target-vf "'$tap' is leased by 'e2e dry-run' \\(holding the VF\\)"
"$hotmigd_call" "$HOTMIG_CONFIG" B release "$tap" "$lease" || fail "could not release $tap"
unchanged "$tap"

log "unknown domain"
dry_run 8 no-such-domain B
expect_line FAIL domain "'no-such-domain'"
expect_line SKIP agent ""

log "the agent does not answer"
agent_signal "$c" STOP || fail "could not freeze the agent"
dry_run 8 "$c" B --agent-timeout 2
expect_line FAIL agent "--no-agent"
expect_line PASS target-vf ""
agent_signal "$c" CONT || fail "could not thaw the agent"
dry_run 0 "$c" B
unchanged "$tap"

log "the destination's hotmigd does not answer"
dry_run 8 "$c" B --hotmigd https://127.0.0.3:9
expect_line FAIL hotmigd "https://127.0.0.3:9"
expect_line SKIP target-vf ""

log "an incompatible destination: a libvirt host without QEMU guests (the test driver)"
dry_run 8 "$c" test:///default --hotmigd "$("$lab" hotmigd B)"
expect_line FAIL cpu "destination host 'test:///default' cannot run type 'qemu', arch 'x86_64'"
expect_line PASS target-vf ""
unchanged "$tap"

echo "PASS dry-run: good case, a verbs program without the layer, no free VF, unknown domain, silent agent, hotmigd down, incompatible destination"
