#!/bin/bash
# A real MPI job survives migrate-vm (issue 18). The program is Debian's ScaLAPACK LU test
# driver (scalapack-mpi-test: xdlu, built for Open MPI and for MPICH), in the lab's root image
# 'mpi', ranks over UCX's verbs transports on rxe0 with libhotmig-verbs.so preloaded
# ('hotmig-lab job', docs/lab.md). Each test runs the same input twice on the same guests:
# once without a move (the reference), once with moves while it runs; a test whose job (MPI,
# ranks, guests, input) an earlier test of the fixture ran takes that reference's results.
#
# The guests are a fixture shared by the MPI tests (one boot for all of them):
#   PHASE=up: builds the root image 'mpi' unless cached, boots mpi-g1, mpi-g2 on A and mpi-g3
#   on B (one control segment); PHASE=down destroys them.
#   MPI=openmpi|mpich (PHASE unset): 2 ranks on mpi-g1 (A) and mpi-g3 (B); mpi-g1 moves
#   A->B->A mid-run.
#   DRAIN=1 (Open MPI): 4 ranks over mpi-g1, mpi-g2 (A) and mpi-g3 (B), on a 2x2 grid; host A
#   is drained by hotmigd (migrate-vm drain A --wait, asked of B's hotmigd) mid-run.
#   BOTH=1: 2 ranks on mpi-g1 (A) and mpi-g3 (B); both guests move at once (two migrate-vm
#   started together: mpi-g1 A->B while mpi-g3 B->A), then both back at once: each end of
#   every connection is quiesced and resumed in the same event (docs/verbs-layer.md, both ends
#   moving).
#   STANDBY=1 (issue 30; not in tests/run: it fails today, docs/design.md "Standby path": each
#   rank's rc_verbs SRQ serves its loopback QP too, so the peer's rank refuses SWITCH): the
#   2-rank case (or BOTH=1's) with both guests' agents run with --standby on their control NIC:
#   at each move the mover's rank runs its connections over the standby devices (soft-RoCE on
#   the control NICs) instead of pausing them, its peer's rank follows (its QPs share a receive
#   queue: UCX's rc_verbs); asserts that both ends switched,
#   that (without BOTH) the standby path carried sends and receives at every move: the job went
#   on while the VF was away. The agents are restarted as the guest's init starts them at the
#   end.
#   E2E_FABRIC=ib: the same cases (not the drain) on the lab's InfiniBand fabric mode (docs/lab.md),
#   fixture 'mpi-ib': ibu-1 on A and ibu-2 on B (segment ibu, booted with --fabric ib), the
#   job's UCX in its IB mode (LID-routed rc_verbs and ud_verbs, no RoCE-only settings); ibu-1
#   moves (A->B->A), or both at once; each move gives the mover its destination slot's LID.
# No job names its peers (HOTMIG_VERBS_PEERS): the layers find each other in the agents' peer
# directory (hotmig-lab job's default, as on a cluster where nobody writes a list).
# A test first puts the guests where it needs them (a failed earlier test may have left
# mpi-g1 on B; the drain leaves mpi-g1 and mpi-g2 on B).
# Asserts: both runs exit 0; every scaled residual is below 1.0 (what xdlu's own threshold 1.0
# checks; LU.dat's threshold 0 makes it print them all); the residuals and the tests' parameters
# are identical in both runs; the moves happened while the job ran (after its first test's line,
# before its "done" line) and paused ranks that had QPs; before the first move, migrate-vm
# --dry-run names the peer rank's guest among the connections the move pauses. Prints "MPI ..." with the runs' times
# and each rank's pause.
source "$(dirname "$0")/lib.sh"
phase=${PHASE:-test}
mpi=${MPI:-openmpi}
drain=${DRAIN:-0}
both=${BOTH:-0}
standby=${STANDBY:-0}
fabric=${E2E_FABRIC:-roce}
case $mpi in openmpi | mpich) ;; *) fail "MPI must be openmpi or mpich, not '$mpi'" ;; esac
case $fabric in roce | ib) ;; *) fail "E2E_FABRIC must be roce or ib, not '$fabric'" ;; esac
if [ "$fabric" = ib ]; then
    [ "$drain" = 0 ] || fail "DRAIN=1 runs on the RoCE fixture only"
    # the mover, then its peer (the 2-rank cases' guests)
    fixture=(ibu-1:A ibu-2:B)
    segment=ibu
    pair=(ibu-1 ibu-2)
    tag=ib-
else
    fixture=(mpi-g1:A mpi-g2:A mpi-g3:B)
    segment=mpi
    pair=(mpi-g1 mpi-g3)
    tag=
fi
mover=${pair[0]}
peer=${pair[1]}
for gh in "${fixture[@]}"; do
    guests+=("${gh%:*}")
done
keep_guests=1
tmp=$(mktemp -d)
source "$(dirname "$0")/verbs-lib.sh"
# the agents as the guest's init starts them (STANDBY=1 restarted them with --standby)
trap 'vagents_restore; cleanup; rm -rf "$tmp"' EXIT

if [ "$phase" = down ]; then
    keep_guests=0
    exit 0
fi
# The reference runs' results, per job (fabric, MPI, ranks, guests, LU.dat): the same job gives
# the same residuals (each test asserts it against its own moves), so a later test of this
# fixture compares with the first one's reference instead of running it again (CI time).
refdir=$build/tests/mpi-ref.${HOTMIG_LAB_INSTANCE:-0}
if [ "$phase" = up ]; then
    rm -rf "$refdir"
    t0=$(date +%s)
    for g in "${guests[@]}"; do
        for uri in "$A" "$B"; do
            virsh -q -c "$uri" destroy "$g" >/dev/null 2>&1 || true
        done
    done
    "$lab" image mpi >/dev/null || fail "cannot build the root image 'mpi'"
    t1=$(date +%s)
    keep_guests=0 # a failed bring-up leaves nothing behind
    for gh in "${fixture[@]}"; do
        "$lab" guest "${gh%:*}" --host "${gh#*:}" --segment "$segment" --image mpi --memory 512 \
            --fabric "$fabric" --bin-dir "$build" >/dev/null || fail "cannot start guest ${gh%:*}"
    done
    for g in "${guests[@]}"; do
        "$lab" wait "$g" 'HMLAB booted' --timeout 400 >/dev/null || fail "$g did not boot"
        "$lab" wait "$g" 'HMLAB vf up' --timeout 60 >/dev/null || fail "$g has no rxe0"
    done
    if [ "$fabric" = ib ]; then
        source "$(dirname "$0")/verbs-lib.sh"
        vibready "${guests[@]}"
    fi
    # The lab shell answers (the first exec after a boot was once slow on a loaded machine).
    for g in "${guests[@]}"; do
        "$lab" exec "$g" true --timeout 300 >/dev/null || fail "$g: the lab shell does not answer"
    done
    keep_guests=1
    echo "MPI fixture image_s=$((t1 - t0)) boot_s=$(($(date +%s) - t1))"
    exit 0
fi

# An earlier test that failed may have left its job's ranks running (registered with the
# agents: a move would pause them, or fail to): end them first. Each step says so first: a
# run that hung before its first line (CI run 8.5) could not say where.
log "$mpi (drain=$drain both=$both): ending ranks an earlier test may have left"
for g in "${guests[@]}"; do
    "$lab" exec "$g" "pkill -9 -f 'xdlu|mpirun|orted|hydra_pmi_proxy' || true" --timeout 60 >/dev/null ||
        log "$g: could not look for leftover ranks"
done

if [ "$drain" = 1 ]; then
    p="mpi-drain"
    names=(mpi-g1 mpi-g2 mpi-g3)
    ranks=4
    # A 2x2 process grid for 4 ranks, without the largest size (two ranks share mpi-g1's one
    # vCPU: each test takes ~4 times as long as with 2 ranks).
    sed -e 's/^1\t\t\tvalues of P/2\t\t\tvalues of P/' -e 's/^2\t\t\tvalues of Q/2\t\t\tvalues of Q/' \
        -e 's/^3\t\t\tnumber of problems sizes/2\t\t\tnumber of problems sizes/' \
        -e 's/^31 57 100\t\tvalues of \([MN]\)/31 57\t\t\tvalues of \1/' \
        "$top/tests/e2e/mpi/LU.dat" >"$tmp/LU.dat"
    grep -qP '^2\t\t\tvalues of P' "$tmp/LU.dat" && grep -qP '^31 57\t\t\tvalues of N' "$tmp/LU.dat" ||
        fail "tests/e2e/mpi/LU.dat changed: the drain's 2x2 variant no longer applies"
else
    p=mpi-$tag$mpi
    [ "$both" = 1 ] && p=mpi-both-$tag$mpi
    if [ "$standby" = 1 ]; then
        p=mpi-standby-$tag$mpi
        [ "$both" = 0 ] || p=$p-both
    fi
    names=("${pair[@]}")
    ranks=2
    cp "$top/tests/e2e/mpi/LU.dat" "$tmp/LU.dat"
fi
log "placing the fixture's guests"
place "$mover" A "$tmp"
place "$peer" B "$tmp"
[ "$drain" = 1 ] && place mpi-g2 A "$tmp"
if [ "$drain" = 1 ]; then
    # the job's guests carry its id (what a cluster's scheduler would set, docs/hotmigd.md
    # "Jobs"): hotmigd's drain moves them one at a time, and its status names the job
    jobid=lu-$$
    for g in "${names[@]}"; do
        virsh -q -c "$("$lab" uri "$("$lab" where "$g")")" metadata "$g" urn:hotmig:1 --key hotmig \
            --set "<job>$jobid</job>" --live >/dev/null || fail "cannot set the job id of $g"
    done
fi
if [ "$standby" = 1 ]; then
    [ "$drain" = 0 ] || fail "STANDBY=1 runs the 2-rank cases only"
    vagents_standby "${names[@]}"
fi
glist=$(IFS=,; echo "${names[*]}")
launcher=${names[0]}
prog=/usr/lib/x86_64-linux-gnu/scalapack/$mpi-tests/xdlu
# Fortran's unit 6 unbuffered: each line reaches the launcher's console as it is printed.
jobargs=(--mpi "$mpi" --guests "$glist" --ranks "$ranks" --layer on
    --env GFORTRAN_UNBUFFERED_PRECONNECTED=y --file "$tmp/LU.dat")

# results FILE: what must not change with a move: each test's parameters and verdict (not its
# times) and every residual, in order.
results() {
    awk '/^WALL/ { print $2, $3, $4, $5, $6, $7, $8, $12; next }
         /^\|\|/ { print }
         /^Finished/ { print }' "$1"
}

# check_run NAME: exit 0, residuals all below 1.0, some tests ran.
check_run() {
    local name=$1 out=$tmp/$1.out
    [ -s "$out" ] || fail "job $name printed nothing"
    results "$out" >"$tmp/$name.res"
    grep -q '^Finished' "$tmp/$name.res" || { cat "$out" >&2; fail "job $name did not finish its tests"; }
    local bad
    bad=$(awk '/^\|\|/ { v = $NF; if (v !~ /^[0-9]*\.[0-9]+(E[-+][0-9]+)?$/ || v + 0 >= 1.0) print }' "$tmp/$name.res")
    [ -z "$bad" ] || fail "job $name: residuals not below 1.0: $bad"
}

refkey=$fabric-$mpi-$ranks-$glist-$(sha1sum <"$tmp/LU.dat" | cut -c1-12)
if [ -s "$refdir/$refkey.res" ]; then
    log "reference: the results of this fixture's earlier reference run of the same job ($refkey)"
    cp "$refdir/$refkey.res" "$tmp/$p-ref.res"
    ref_s=earlier
else
    log "reference run (no move): $mpi, $ranks ranks on $glist"
    t0=$(date +%s)
    "$lab" job start "$p-ref" "${jobargs[@]}" -- "$prog" 2>"$tmp/$p-ref.err" ||
        { cat "$tmp/$p-ref.err" >&2; fail "cannot start the reference job"; }
    "$lab" job wait "$p-ref" --timeout 900 >"$tmp/$p-ref.out" 2>>"$tmp/$p-ref.err" ||
        { cat "$tmp/$p-ref.err" "$tmp/$p-ref.out" >&2; fail "reference job failed"; }
    ref_s=$(($(date +%s) - t0))
    check_run "$p-ref"
    mkdir -p "$refdir"
    cp "$tmp/$p-ref.res" "$refdir/$refkey.res"
fi

log "migrated run"
since=$("$lab" mark "$launcher")
t0=$(date +%s)
"$lab" job start "$p-mig" "${jobargs[@]}" -- "$prog" 2>"$tmp/$p-mig.err" ||
    { cat "$tmp/$p-mig.err" >&2; fail "cannot start the job"; }
# Move only once the ranks compute over their QPs: the driver printed its first test's line
# (the launcher's console carries the job's output, 'hotmig-lab job').
"$lab" wait "$launcher" "HMLAB job $p-mig\\| WALL" --since "$since" --timeout 600 >/dev/null ||
    fail "the job computed nothing within 10 minutes"
first_s=$(($(date +%s) - t0))
t1=$(date +%s)
if [ "$drain" = 1 ]; then
    sock_b=$("$lab" hotmigd-socket B)
    log "migrate-vm drain A --wait (asked of B's hotmigd)"
    "$migrate_vm" drain A --socket "$sock_b" --reason "e2e mpi drain" --wait --json \
        >"$tmp/drain.json" 2>"$tmp/drain.err" ||
        { cat "$tmp/drain.err" "$tmp/drain.json" >&2; fail "migrate-vm drain A failed"; }
    jq -e '.state == "finished" and .ok' "$tmp/drain.json" >/dev/null ||
        fail "drain not finished ok: $(cat "$tmp/drain.json")"
    for g in mpi-g1 mpi-g2; do
        jq -e --arg g "$g" --arg j "$jobid" '[.. | objects | select(.vm? == $g) | .job] | any(. == $j)' \
            "$tmp/drain.json" >/dev/null || fail "the drain's moves do not name $g's job $jobid: $(cat "$tmp/drain.json")"
    done
    for g in mpi-g1 mpi-g2; do
        wait_moved "$g" B
    done
elif [ "$both" = 1 ]; then
    # two migrate-vm at once, each in a subshell (its fail exits only the subshell)
    for hosts in "A B" "B A"; do
        read -r h1 h3 <<<"$hosts"
        log "$mover $h1 -> $h3 and $peer $h3 -> $h1 at once"
        (migrate "$mover" "$("$lab" uri "$h1")" "$("$lab" uri "$h3")" "$tmp/g1-$h3.json") &
        p1=$!
        (migrate "$peer" "$("$lab" uri "$h3")" "$("$lab" uri "$h1")" "$tmp/g3-$h1.json") &
        p3=$!
        wait "$p1" || { wait "$p3" || true; fail "migrate-vm $mover $h1 -> $h3 failed (both moving)"; }
        wait "$p3" || fail "migrate-vm $peer $h3 -> $h1 failed (both moving)"
        require_where "$mover" "$h3"
        require_where "$peer" "$h1"
    done
else
    # --dry-run names the connections the move pauses: the mover's rank's to its peer's (not
    # its loopback QPs to its own GID: they pause no other guest). A guest's GID: on RoCE its
    # VF's IPv4 address, on IB the subnet prefix + its port GUID (GID 0).
    gid_of() {
        if [ "$fabric" = ib ]; then
            "$lab" exec "$1" 'ibv_devinfo -v -d rxe0' --timeout 60 | awk '/GID\[ *0\]:/ { print $3; exit }'
        else
            echo "::ffff:192.0.2.$("$lab" index "$1")"
        fi
    }
    gid_mover=$(gid_of "$mover")
    gid_peer=$(gid_of "$peer")
    [ -n "$gid_mover" ] && [ -n "$gid_peer" ] || fail "no GID for $mover or $peer"
    "$migrate_vm" --connect "$A" "$mover" "$B" --dry-run >"$tmp/dry.out" 2>&1 || true
    jobs_line=$(grep -E '^(PASS|FAIL|WARN) +jobs ' "$tmp/dry.out" || true)
    log "dry-run: $jobs_line"
    grep -qF "$gid_peer QP" <<<"$jobs_line" && grep -q "verbs:xdlu" <<<"$jobs_line" ||
        { cat "$tmp/dry.out" >&2; fail "--dry-run does not name the peer rank on $peer ($gid_peer)"; }
    ! grep -qF "$gid_mover QP" <<<"$jobs_line" ||
        fail "--dry-run lists $mover's own loopback QPs as peers: $jobs_line"
    migrate "$mover" "$A" "$B" "$tmp/ab.json"
    require_where "$mover" B
    migrate "$mover" "$B" "$A" "$tmp/ba.json"
    require_where "$mover" A
fi
moves_s=$(($(date +%s) - t1))
# A rank the layer could not resume stalls the job: say so at once, with the agent's line.
for g in "${names[@]}"; do
    bad=$(tail -c "+$((since + 1))" "$("$lab" console "$g")" | grep -a "request=RESUME.*result=failed" |
        tail -n 1 || true)
    [ -z "$bad" ] || fail "the verbs layer did not resume a rank on $g: $bad; the layer said: $(grep -a \
        'hotmig-verbs.*fail' "$("$lab" console "$launcher")" | tail -n 3 | tr '\n' ' ')"
done
done_n=$(tail -c "+$((since + 1))" "$("$lab" console "$launcher")" | grep -ac "HMLAB job $p-mig done" || true)
[ "$done_n" = 0 ] || fail "the job ended before the moves were done: give LU.dat larger problems"
"$lab" job wait "$p-mig" --timeout 900 >"$tmp/$p-mig.out" 2>>"$tmp/$p-mig.err" ||
    { cat "$tmp/$p-mig.err" "$tmp/$p-mig.out" >&2; fail "migrated job failed"; }
mig_s=$(($(date +%s) - t0))
check_run "$p-mig"
# The moves paused ranks that had QPs (the layer says how many it quiesced).
grep -q 'hotmig-verbs.*quiesced in .* ([1-9][0-9]* QPs[;)]' "$tmp/$p-mig.out" ||
    fail "no rank with QPs was paused by the moves: $(grep 'quiesced in' "$tmp/$p-mig.out" | tr '\n' ' ')"
# On IB the mover took its destination slot's LID at each move: its peer's rank re-pointed
# its QPs to it (the layer's "moved from LID" line, one per QP and move).
if [ "$fabric" = ib ]; then
    grep -Eq 'hotmig-verbs.*moved from LID [0-9]+ to LID [0-9]+' "$tmp/$p-mig.out" ||
        fail "no rank followed the mover's new LID: $(grep -a 'hotmig-verbs' "$tmp/$p-mig.out" | tail -n 5 | tr '\n' ' ')"
fi

# The standby path: at each move the mover's rank switched its connections (and its peer's
# followed) and both said what the standby path carried while the VF was away.
sb_note=
if [ "$standby" = 1 ]; then
    out=$tmp/$p-mig.out
    moves=2
    [ "$both" = 1 ] && moves=4
    n_sw=$(grep -Ec 'hotmig-verbs.*switched [1-9][0-9]* of [0-9]+ QPs to the standby device' "$out" || true)
    n_fol=$(grep -Ec 'hotmig-verbs.*QP [0-9]+ switched to the standby device for its moving peer' "$out" || true)
    [ "$both" = 1 ] || [ "$n_sw" -ge "$moves" ] ||
        fail "the mover's rank switched at $n_sw of $moves moves: $(grep -a 'hotmig-verbs.*standby' "$out" | tail -n 6 | tr '\n' ' ')"
    [ "$both" = 1 ] || [ "$n_fol" -ge 1 ] ||
        fail "the peer's rank never followed onto its standby device: $(grep -a 'hotmig-verbs.*SWITCH\|hotmig-verbs.*standby' "$out" | tail -n 6 | tr '\n' ' ')"
    carried=$(sed -n 's/.*left the standby device .*: \([0-9]*\) QPs, \([0-9]*\) sends and \([0-9]*\) receives carried there.*/\1:\2:\3/p' "$out" | tr '\n' ' ')
    if [ "$both" = 0 ]; then
        n_car=$(grep -Ec 'left the standby device .*: [1-9][0-9]* QPs, [1-9][0-9]* sends and [1-9][0-9]* receives carried there' "$out" || true)
        [ "$n_car" -ge "$moves" ] ||
            fail "the standby path carried traffic at $n_car of $moves moves (QPs:sends:receives per move: $carried)"
    fi
    sb_note=" standby=yes switched=$n_sw followed=$n_fol carried(qps:sends:recvs)=[ $carried]"
    # where each switch's pause went (the layer's own breakdown)
    grep -a 'hotmig-verbs.*\(quiesced in\|QPs to the standby device\|for its moving peer\|followed onto\|left the standby\|resumed on\|reconnected to its peer\)' \
        "$out" | sed 's/^/  /' || true
fi

if ! diff "$tmp/$p-ref.res" "$tmp/$p-mig.res" >"$tmp/diff"; then
    cat "$tmp/diff" >&2
    fail "results differ between the reference and the migrated run"
fi
n=$(grep -c '^||' "$tmp/$p-ref.res")
# Each rank's pause per move, from the layer's "sends were paused for N ms" lines: the mover's
# "resumed ..." and, per QP, the staying peer's "QP N reconnected ...".
paused=$(sed -n 's/^hotmig-verbs\[\([0-9]*\)\]: .*sends were paused for \([0-9]*\) ms.*/\1:\2/p' \
    "$tmp/$p-mig.out" | tr '\n' ' ')
echo "MPI fabric=$fabric mpi=$mpi ranks=$ranks drain=$drain both=$both residuals=$n identical=yes reference_s=$ref_s" \
    "migrated_s=$mig_s first_test_s=$first_s moves_s=$moves_s paused_ms(pid:ms)=[ ${paused}]$sb_note"
log "ok: $n residuals identical; reference $ref_s s, with moves $mig_s s"
