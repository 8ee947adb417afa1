#!/bin/bash
# The sandbox of hotmig's systemd units, as systemd rates it: fails when
# `systemd-analyze security --offline=true` rates a unit more exposed than its limit.
#   tests/packaging/unit-security.sh UNIT_FILE[,DROPIN...] MAX_EXPOSURE [...]
# (limits from docs/security.md: hotmigd.service 5.0, hotmig-agent.service 4.0, also with the
# peer broker's drop-ins). A unit's drop-ins are rated with it, as systemd would apply them
# (UNIT.d/ beside the unit). Prints every unit's rating and the settings it still misses.
set -euo pipefail
fail() { echo "unit-security: FAIL: $*" >&2; exit 1; }

command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (Debian package 'systemd', tests/install-deps)"
(($# >= 2 && $# % 2 == 0)) || fail "usage: unit-security.sh UNIT_FILE[,DROPIN...] MAX_EXPOSURE..."
while (($#)); do
    IFS=, read -r -a files <<<"$1"
    max=$2
    shift 2
    unit=${files[0]}
    [ -r "$unit" ] || fail "no unit file '$unit'"
    # The offline check reads the unit under its own name and its drop-ins from UNIT.d/ beside
    # it; a copy keeps the build tree clean.
    work=$(mktemp -d)
    cp "$unit" "$work/"
    name="$(basename "$unit")"
    for dropin in "${files[@]:1}"; do
        [ -r "$dropin" ] || { rm -rf "$work"; fail "no drop-in '$dropin'"; }
        mkdir -p "$work/$(basename "$unit").d"
        cp "$dropin" "$work/$(basename "$unit").d/"
        name="$name + $(basename "$dropin")"
    done
    out=$(cd "$work" && systemd-analyze security --offline=true --no-pager "$(basename "$unit")" 2>&1) ||
        { rm -rf "$work"; fail "systemd-analyze security on '$unit': $out"; }
    rm -rf "$work"
    level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
    [ -n "$level" ] || fail "no exposure level for '$unit' in: $out"
    echo "unit-security: $name: exposure $level (limit $max)"
    grep '^✗' <<<"$out" | sed 's/^/unit-security:   /' || true
    # The peer broker's drop-ins must have applied: IP sockets, to an allow list only.
    if ((${#files[@]} > 1)) && grep -q '^RestrictAddressFamilies=AF_INET' "${files[@]:1}"; then
        grep -q 'Service may allocate Internet sockets' <<<"$out" ||
            fail "$name: the drop-ins did not apply (no Internet sockets allowed): $out"
        grep -q 'IPAddressDeny=.*allow list with non-localhost entries' <<<"$out" ||
            fail "$name: no IP address allow list: $out"
    fi
    awk -v l="$level" -v m="$max" 'BEGIN { exit !(l + 0 <= m + 0) }' ||
        fail "$name is rated $level, above its limit $max"
done
