#!/bin/bash
# UCX in its InfiniBand mode on the lab's IB fabric (docs/lab.md "InfiniBand fabric mode";
# issue 29, item 1): the two root-image guests of fixture 'mpi-ib' booted with --fabric ib
# (tests/e2e/mpi.sh E2E_FABRIC=ib PHASE=up: ibu-1 on A, ibu-2 on B, one control segment), no
# UCX_IB_GID_INDEX, no UCX_UD_ETH_DGID_CHECK. Asserts:
# - ucx_info -d lists rc_verbs and ud_verbs on rxe0:1, rc_verbs with a 4-byte device address
#   (a LID; on RoCE it carries the GID);
# - ucx_perftest tag_lat between the guests with UCX_TLS=rc_verbs,ud_verbs,self passes;
# - Open MPI's ScaLAPACK LU driver (tests/e2e/mpi/LU.dat) over UCX, 2 ranks on A and B,
#   without the verbs layer: exit 0, 6 tests, every scaled residual below 1.0, and UCX chose
#   rc_verbs on rxe0:1 between the guests.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/verbs-lib.sh"
g1=ibu-1
g2=ibu-2
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT

[ -e "$build/lab/libhm-ib-emu.so" ] && [ -x "$build/lab/hm-ib-sma" ] ||
    fail "lab/libhm-ib-emu.so and lab/hm-ib-sma are not built in $build"
keep_guests=1 # the fixture's
guests+=("$g1" "$g2")
place "$g1" A "$tmp"
place "$g2" B "$tmp"
for g in "$g1" "$g2"; do
    "$lab" wait "$g" 'HMLAB ib port [a-z0-9]* ACTIVE' --timeout 120 >/dev/null || fail "$g: no ACTIVE IB port"
done
i2=$("$lab" index "$g2")

info=$("$lab" exec "$g1" 'UCX_NET_DEVICES=rxe0:1 ucx_info -d' --timeout 180) || fail "ucx_info -d failed"
echo "$info" | grep -E 'Transport|Device|device address' >&2
echo "$info" | awk '/Transport: rc_verbs/ {t=1} t && /device address:/ {print; exit}' | grep -q '4 bytes' ||
    fail "ucx_info: rc_verbs on rxe0:1 has no 4-byte (LID) device address"
echo "$info" | grep -q 'Transport: ud_verbs' || fail "ucx_info: no ud_verbs"

ucx_env="UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=rxe0:1"
vtool "$g2" IBUP "$ucx_env timeout 300 ucx_perftest -p 13370"
sleep 3
vtool "$g1" IBUP "$ucx_env timeout 300 ucx_perftest -p 13370 198.51.100.$i2 -t tag_lat -n 2000"
vwait "$g1" "IBUP rc=" 1 360 || { vstuck "$g1" ucx_perftest; fail "ucx_perftest did not finish"; }
vlog "$g1" IBUP >"$tmp/perftest.log"
cat "$tmp/perftest.log" >&2
grep -q '^rc=0$' "$tmp/perftest.log" || fail "ucx_perftest failed"
grep -Eq '^Final: +2000 ' "$tmp/perftest.log" || fail "ucx_perftest printed no final figures"

cp "$top/tests/e2e/mpi/LU.dat" "$tmp/LU.dat"
"$lab" job start ibu --mpi openmpi --guests "$g1,$g2" --ranks 2 --layer off \
    --env GFORTRAN_UNBUFFERED_PRECONNECTED=y --env UCX_LOG_LEVEL=info --file "$tmp/LU.dat" \
    -- /usr/lib/x86_64-linux-gnu/scalapack/openmpi-tests/xdlu >"$tmp/job.log" 2>&1 ||
    { cat "$tmp/job.log" >&2; fail "the Open MPI job did not start"; }
"$lab" job wait ibu --timeout 900 >>"$tmp/job.log" 2>&1 ||
    { cat "$tmp/job.log" >&2; fail "the Open MPI job failed"; }
grep -E '^WALL|^\|\||^Finished|ep_cfg' "$tmp/job.log" >&2
! grep -q 'UCX_IB_GID_INDEX\|UCX_UD_ETH_DGID_CHECK' "$tmp/job.log" ||
    fail "the job set RoCE-only UCX settings on IB guests"
grep -q 'ep_cfg\[[0-9]*\]: tag(rc_verbs/rxe0:1)' "$tmp/job.log" ||
    fail "UCX did not use rc_verbs on rxe0:1 between the ranks"
[ "$(grep -c '^WALL' "$tmp/job.log")" = 6 ] || fail "the LU driver did not run its 6 tests"
awk '/^\|\|/ { r = $NF + 0; n++; if (r >= 1.0) bad++ } END { exit !(n >= 12 && !bad) }' "$tmp/job.log" ||
    fail "a scaled residual is not below 1.0 (or residuals are missing)"
echo "IBUCX perftest_final=$(grep -E '^Final:' "$tmp/perftest.log" | tr -s ' ' | cut -d' ' -f3) lu_tests=6"
