#!/bin/bash
# A real MPI job survives migrate-vm (issue 18). The program is Debian's ScaLAPACK LU test
# driver (scalapack-mpi-test: xdlu, built for Open MPI and for MPICH), in the lab's root image
# 'mpi', ranks over UCX's verbs transports on rxe0 with libhotmig-verbs.so preloaded
# ('hotmig-lab job', docs/lab.md). Each test runs the same input twice on the same guests:
# once without a move (the reference), once with moves while it runs.
#   MPI=openmpi|mpich, DRAIN unset: 2 ranks on g1 (A) and g2 (B); g1 moves A->B->A mid-run.
#   DRAIN=1 (Open MPI): 4 ranks over g1, g2 (A) and g3 (B), on a 2x2 grid; host A is drained
#   by hotmigd (migrate-vm drain A --wait, asked of B's hotmigd) mid-run.
# Asserts: both runs exit 0; every scaled residual is below 1.0 (what xdlu's own threshold 1.0
# checks; LU.dat's threshold 0 makes it print them all); the residuals and the tests' parameters
# are identical in both runs; the moves happened while the job ran (its "done" line came after
# them). Prints "MPI ..." with both runs' times.
source "$(dirname "$0")/lib.sh"
mpi=${MPI:-openmpi}
drain=${DRAIN:-0}
case $mpi in openmpi | mpich) ;; *) fail "MPI must be openmpi or mpich, not '$mpi'" ;; esac
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT
if [ "$drain" = 1 ]; then
    p=mpid
    placement=("$p-g1:A" "$p-g2:A" "$p-g3:B")
    ranks=4
    # A 2x2 process grid for 4 ranks.
    sed -e 's/^1\t\t\tvalues of P/2\t\t\tvalues of P/' -e 's/^2\t\t\tvalues of Q/2\t\t\tvalues of Q/' \
        "$top/tests/e2e/mpi/LU.dat" >"$tmp/LU.dat"
else
    p=mpi-$mpi
    placement=("$p-g1:A" "$p-g2:B")
    ranks=2
    cp "$top/tests/e2e/mpi/LU.dat" "$tmp/LU.dat"
fi
names=()
for gh in "${placement[@]}"; do
    g=${gh%:*}
    guests+=("$g")
    names+=("$g")
    "$lab" guest "$g" --host "${gh#*:}" --segment "$p" --image mpi --memory 512 --bin-dir "$build" >/dev/null ||
        fail "cannot start guest $g"
done
for g in "${names[@]}"; do
    "$lab" wait "$g" 'HMLAB booted' --timeout 300 >/dev/null || fail "$g did not boot"
    "$lab" wait "$g" 'HMLAB vf up' --timeout 60 >/dev/null || fail "$g has no rxe0"
done
glist=$(IFS=,; echo "${names[*]}")
prog=/usr/lib/x86_64-linux-gnu/scalapack/$mpi-tests/xdlu

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

log "reference run (no move): $mpi, $ranks ranks on $glist"
t0=$(date +%s)
"$lab" job run "$p-ref" --mpi "$mpi" --guests "$glist" --ranks "$ranks" --layer on \
    --file "$tmp/LU.dat" -- "$prog" >"$tmp/$p-ref.out" 2>"$tmp/$p-ref.err" ||
    { cat "$tmp/$p-ref.err" "$tmp/$p-ref.out" >&2; fail "reference job failed"; }
ref_s=$(($(date +%s) - t0))
check_run "$p-ref"

log "migrated run"
t0=$(date +%s)
"$lab" job start "$p-mig" --mpi "$mpi" --guests "$glist" --ranks "$ranks" --layer on \
    --file "$tmp/LU.dat" -- "$prog" 2>"$tmp/$p-mig.err" ||
    { cat "$tmp/$p-mig.err" >&2; fail "cannot start the job"; }
launcher=${names[0]}
"$lab" wait "$launcher" "HMLAB job $p-mig started" --timeout 60 >/dev/null || fail "job did not start"
# Move only once the ranks compute over their QPs: the driver printed its first test's line.
for _ in $(seq 1 120); do
    "$lab" job output "$p-mig" 2>/dev/null | grep -q '^WALL' && break
    sleep 5
done
"$lab" job output "$p-mig" 2>/dev/null | grep -q '^WALL' || fail "the job computed nothing within 10 minutes"
if [ "$drain" = 1 ]; then
    sock_b=$("$lab" hotmigd-socket B)
    log "migrate-vm drain A --wait (asked of B's hotmigd)"
    "$migrate_vm" drain A --socket "$sock_b" --reason "e2e mpi drain" --wait --json \
        >"$tmp/drain.json" 2>"$tmp/drain.err" ||
        { cat "$tmp/drain.err" "$tmp/drain.json" >&2; fail "migrate-vm drain A failed"; }
    jq -e '.state == "finished" and .ok' "$tmp/drain.json" >/dev/null ||
        fail "drain not finished ok: $(cat "$tmp/drain.json")"
    for g in "$p-g1" "$p-g2"; do
        wait_moved "$g" B
    done
else
    migrate "$p-g1" "$A" "$B" "$tmp/ab.json"
    require_where "$p-g1" B
    migrate "$p-g1" "$B" "$A" "$tmp/ba.json"
    require_where "$p-g1" A
fi
# The moves paused ranks that had QPs (the layer says how many it quiesced).
"$lab" job output "$p-mig" 2>/dev/null | grep -q 'hotmig-verbs.*quiesced in .* ([1-9][0-9]* QPs)' ||
    fail "no rank with QPs was paused by the moves: $("$lab" job output "$p-mig" 2>/dev/null | grep 'quiesced in' | tr '\n' ' ')"
# A rank the layer could not resume stalls the job: say so at once, with the agent's line.
for g in "${names[@]}"; do
    bad=$(grep -a "request=RESUME.*result=failed" "$("$lab" console "$g")" | tail -n 1 || true)
    [ -z "$bad" ] || fail "the verbs layer did not resume a rank on $g: $bad; the layer said: $("$lab" job output \
        "$p-mig" 2>/dev/null | grep 'hotmig-verbs.*fail' | tr '\n' ' ')"
done
since=$(grep -ac "HMLAB job $p-mig done" "$("$lab" console "$launcher")" || true)
[ "$since" = 0 ] || fail "the job ended before the moves were done: give LU.dat larger problems"
"$lab" job wait "$p-mig" --timeout 1500 >"$tmp/$p-mig.out" 2>"$tmp/$p-mig.err" ||
    { cat "$tmp/$p-mig.err" "$tmp/$p-mig.out" >&2; fail "migrated job failed"; }
mig_s=$(($(date +%s) - t0))
check_run "$p-mig"

if ! diff "$tmp/$p-ref.res" "$tmp/$p-mig.res" >"$tmp/diff"; then
    cat "$tmp/diff" >&2
    fail "results differ between the reference and the migrated run"
fi
n=$(grep -c '^||' "$tmp/$p-ref.res")
echo "MPI mpi=$mpi ranks=$ranks drain=$drain residuals=$n identical=yes reference_s=$ref_s migrated_s=$mig_s"
log "ok: $n residuals identical; reference $ref_s s, with moves $mig_s s"
