#!/bin/bash
# An MPI job's cost of a migration on the lab (issue 18), printed, not asserted: Debian's
# ScaLAPACK LU driver (xdlu, Open MPI over UCX verbs, the verbs layer preloaded, LU.dat of
# tests/e2e/mpi) on the MPI fixture's guests mpi-g1 (A) and mpi-g3 (B), ROUNDS times each:
#   - the job without a move (its time, as the launcher's console line measured it);
#   - the job with one move of mpi-g1 A->B once its first test printed (the job's time,
#     migrate-vm's total and libvirt's downtime, each rank's pause from the layer's lines);
#   - the same move of the then idle VM back B->A (migrate-vm's total and downtime).
# Prints "MPI-BENCH ..." lines. Needs the fixtures lab and mpi (tests/e2e/e2e.cmake).
source "$(dirname "$0")/../e2e/lib.sh"
rounds=${ROUNDS:-1}
mpi=${MPI:-openmpi}
guests=(mpi-g1 mpi-g3)
keep_guests=1
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT
prog=/usr/lib/x86_64-linux-gnu/scalapack/$mpi-tests/xdlu
jobargs=(--mpi "$mpi" --guests mpi-g1,mpi-g3 --ranks 2 --layer on
    --env GFORTRAN_UNBUFFERED_PRECONNECTED=y --file "$top/tests/e2e/mpi/LU.dat")

place() {
    local where
    where=$("$lab" where "$1") || fail "guest $1 of the MPI fixture is not running"
    [ "$where" = "$2" ] && return 0
    migrate "$1" "$("$lab" uri "$where")" "$("$lab" uri "$2")" "$tmp/place-$1.json"
}

# job_seconds NAME: the job's duration from the launcher's "done" line.
job_seconds() {
    grep -a "HMLAB job $1 done rc=0 " "$("$lab" console mpi-g1)" | tail -n 1 | sed 's/.*seconds=//' | tr -d '\r'
}

# move_figures JSON: "total_ms downtime_ms prepare..resume_ms"
move_figures() {
    jq -r '[(.phases | map(.ms) | add),
            ((.phases[] | select(.name == "migrate") | .detail | capture("downtime (?<d>[0-9]+) ms").d) // "?"),
            ([.phases[] | select(.name as $n | ["prepare", "unplug", "migrate", "plug", "resume"]
              | index($n))] | map(.ms) | add)]
           | map(if type == "number" then (. | floor) else . end) | join(" ")' "$1"
}

place mpi-g1 A
place mpi-g3 B
for r in $(seq 1 "$rounds"); do
    "$lab" job run "bench-ref-$r" "${jobargs[@]}" -- "$prog" >"$tmp/ref.out" 2>/dev/null ||
        fail "job without a move failed"
    ref=$(job_seconds "bench-ref-$r")

    since=$("$lab" mark mpi-g1)
    "$lab" job start "bench-mig-$r" "${jobargs[@]}" -- "$prog" 2>/dev/null || fail "cannot start the job"
    "$lab" wait mpi-g1 "HMLAB job bench-mig-$r\\| WALL" --since "$since" --timeout 600 >/dev/null ||
        fail "the job computed nothing"
    migrate mpi-g1 "$A" "$B" "$tmp/ab.json"
    "$lab" job wait "bench-mig-$r" --timeout 900 >"$tmp/mig.out" 2>/dev/null || fail "the migrated job failed"
    mig=$(job_seconds "bench-mig-$r")
    read -r total down blackout <<<"$(move_figures "$tmp/ab.json")"
    paused=$(sed -n 's/^hotmig-verbs\[\([0-9]*\)\]: .*sends were paused for \([0-9]*\) ms.*/\1:\2/p' \
        "$tmp/mig.out" | tr '\n' ' ')
    echo "MPI-BENCH round=$r job_s=$ref job_with_move_s=$mig move_ms=$total downtime_ms=$down" \
        "prepare_to_resume_ms=$blackout rank_paused_ms(pid:ms)=[ ${paused}]"

    migrate mpi-g1 "$B" "$A" "$tmp/ba.json"
    read -r total down blackout <<<"$(move_figures "$tmp/ba.json")"
    echo "MPI-BENCH round=$r idle_move_ms=$total idle_downtime_ms=$down idle_prepare_to_resume_ms=$blackout"
done
