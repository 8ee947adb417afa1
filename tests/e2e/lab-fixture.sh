#!/bin/bash
# The e2e tests' lab fixture: `up` (the lab of $HOTMIG_LAB_INSTANCE, after a `down` of whatever
# a dead run left there) and `down`. CTest runs it (its parent process); the CTest run that
# brought the instance's lab up owns it until its `down`. Another CTest run that is still alive
# and asks for the same instance is refused and changes nothing: two runs on one instance would
# tear each other's lab down in the middle of a test (both fail, and neither says why).
set -u
lab=$(dirname "$0")/../../lab/hotmig-lab
inst=${HOTMIG_LAB_INSTANCE:-0}
# Each down (the run's own, and the one before up of what a dead run left) keeps the lab's
# logs in the build tree (CTest runs this in it): lab-logs.K, the last run's.
export HOTMIG_LAB_KEEP_LOGS=${HOTMIG_LAB_KEEP_LOGS:-$PWD/lab-logs.$inst}
owner_file=/run/hotmig-lab-e2e.$inst.owner
me=$PPID

# prints the owner's pid when a live CTest run other than ours owns the instance
other_owner() {
    local o
    o=$(cat "$owner_file" 2>/dev/null) || return 1
    [[ $o =~ ^[0-9]+$ ]] && [ "$o" != "$me" ] || return 1
    [ "$(cat "/proc/$o/comm" 2>/dev/null)" = ctest ] || return 1
    echo "$o"
}

refuse() {
    echo "lab-fixture: error: lab instance $inst is in use by another CTest run (pid $1:" \
        "$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)); nothing changed." \
        "Run on a free instance: HOTMIG_LAB_INSTANCE=1..9" >&2
    exit 1
}

case ${1:-} in
up)
    if o=$(other_owner); then refuse "$o"; fi
    echo "$me" >"$owner_file"
    "$lab" down && "$lab" up
    ;;
down)
    if o=$(other_owner); then refuse "$o"; fi
    "$lab" down
    r=$?
    rm -f "$owner_file"
    exit $r
    ;;
*)
    echo "usage: lab-fixture.sh up|down" >&2
    exit 2
    ;;
esac
