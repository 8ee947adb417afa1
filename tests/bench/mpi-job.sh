#!/bin/bash
# An MPI job's cost of a migration on the lab (issues 18 and 30), printed, not asserted: Debian's
# ScaLAPACK LU driver (xdlu, Open MPI over UCX verbs, the verbs layer preloaded, LU.dat of
# tests/e2e/mpi) on the MPI fixture's guests mpi-g1 (A) and mpi-g3 (B), ROUNDS times each:
#   - the job without a move (its time, as the launcher's console line measured it);
#   - the job with one move of mpi-g1 A->B once its first test printed (the job's time,
#     migrate-vm's total and libvirt's downtime, each rank's pause from the layer's lines):
#     with STANDBY=1 (the default) twice, interleaved in the round: with --no-standby (every
#     connection pauses from the quiesce to the resume) and over the standby path (both agents
#     run with --standby on their control NIC: issue 30), mpi-g1 going back B->A between;
#   - the same move of the then idle VM back B->A (migrate-vm's total and downtime).
# Prints "MPI-BENCH ..." lines and, with STANDBY=1, per round the goals of issue 30: the largest
# rank pause over the standby path against libvirt's downtime + 500 ms, and the job's time with
# the move over its time without against 1 + pause / job time.
# Needs the fixtures lab and mpi (tests/e2e/e2e.cmake).
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/../e2e/verbs-lib.sh"
rounds=${ROUNDS:-1}
mpi=${MPI:-openmpi}
standby=${STANDBY:-1}
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

# moved_job NAME [MIGRATE-VM OPTION...]: the job with one move of mpi-g1 A->B once its first
# test printed; sets mig (its seconds), total, down, blackout (move_figures), paused (each
# rank's "pid:ms" pause lines) and pmax (the largest rank's pause in the move)
moved_job() {
    local name=$1 since
    shift
    since=$("$lab" mark mpi-g1)
    "$lab" job start "$name" "${jobargs[@]}" -- "$prog" 2>/dev/null || fail "cannot start the job"
    "$lab" wait mpi-g1 "HMLAB job $name\\| WALL" --since "$since" --timeout 600 >/dev/null ||
        fail "the job computed nothing"
    migrate mpi-g1 "$A" "$B" "$tmp/ab.json" "$@"
    "$lab" job wait "$name" --timeout 900 >"$tmp/mig.out" 2>/dev/null || fail "the migrated job failed"
    mig=$(job_seconds "$name")
    read -r total down blackout <<<"$(move_figures "$tmp/ab.json")"
    paused=$(sed -n 's/^hotmig-verbs\[\([0-9]*\)\]: .*sends were paused for \([0-9]*\) ms.*/\1:\2/p' \
        "$tmp/mig.out" | tr '\n' ' ')
    # a rank's pause in this move: its lines' sum (over the standby path, the switch and the
    # switch back; without it, one line from the quiesce to the resume)
    pmax=$(tr ' ' '\n' <<<"$paused" | awk -F: 'NF == 2 { t[$1] += $2 } END { for (r in t) if (t[r] > m) m = t[r]; print m + 0 }')
}

# The standby path: both agents with --standby on their control NIC (restored at the end).
trap 'vagents_restore; cleanup; rm -rf "$tmp"' EXIT
[ "$standby" = 0 ] || vagents_standby "${guests[@]}"

place mpi-g1 A
place mpi-g3 B
for r in $(seq 1 "$rounds"); do
    "$lab" job run "bench-ref-$r" "${jobargs[@]}" -- "$prog" >"$tmp/ref.out" 2>/dev/null ||
        fail "job without a move failed"
    ref=$(job_seconds "bench-ref-$r")

    if [ "$standby" = 1 ]; then
        moved_job "bench-nosb-$r" --no-standby
        echo "MPI-BENCH round=$r standby=0 job_s=$ref job_with_move_s=$mig move_ms=$total" \
            "downtime_ms=$down prepare_to_resume_ms=$blackout rank_paused_max_ms=$pmax" \
            "rank_paused_ms(pid:ms)=[ ${paused}]"
        nosb_pmax=$pmax
        migrate mpi-g1 "$B" "$A" "$tmp/back.json"
    fi
    moved_job "bench-mig-$r"
    echo "MPI-BENCH round=$r${standby:+ standby=$standby} job_s=$ref job_with_move_s=$mig" \
        "move_ms=$total downtime_ms=$down prepare_to_resume_ms=$blackout" \
        "rank_paused_max_ms=$pmax rank_paused_ms(pid:ms)=[ ${paused}]"
    if [ "$standby" = 1 ]; then
        carried=$(jq -r '.phases[] | select(.name == "resume") | .standby // {} |
            "\(.sends // 0)/\(.receives // 0)"' "$tmp/ab.json")
        echo "MPI-BENCH round=$r goals pause_ms=$pmax limit_ms=$((down + 500))" \
            "pause_goal=$([ "$pmax" -le $((down + 500)) ] && echo met || echo missed)" \
            "job_ratio=$(awk -v a="$mig" -v b="$ref" 'BEGIN { printf "%.3f", b ? a / b : 0 }')" \
            "ratio_limit=$(awk -v p="$pmax" -v b="$ref" 'BEGIN { printf "%.3f", b ? 1 + p / 1000 / b : 0 }')" \
            "pause_without_standby_ms=$nosb_pmax carried_sends_receives=$carried"
    fi

    migrate mpi-g1 "$B" "$A" "$tmp/ba.json"
    read -r total down blackout <<<"$(move_figures "$tmp/ba.json")"
    echo "MPI-BENCH round=$r idle_move_ms=$total idle_downtime_ms=$down idle_prepare_to_resume_ms=$blackout"
done
