#!/bin/bash
# The sandbox of hotmig's systemd units, as systemd rates it: fails when
# `systemd-analyze security --offline=true` rates a unit more exposed than its limit.
#   tests/packaging/unit-security.sh UNIT_FILE MAX_EXPOSURE [UNIT_FILE MAX_EXPOSURE]...
# (limits from docs/security.md: hotmigd.service 5.0, hotmig-agent.service 4.0). Prints every
# unit's rating and the settings it still misses.
set -euo pipefail
fail() { echo "unit-security: FAIL: $*" >&2; exit 1; }

command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (Debian package 'systemd', tests/install-deps)"
(($# >= 2 && $# % 2 == 0)) || fail "usage: unit-security.sh UNIT_FILE MAX_EXPOSURE..."
while (($#)); do
    unit=$1 max=$2
    shift 2
    [ -r "$unit" ] || fail "no unit file '$unit'"
    # The offline check reads the unit under its own name; a copy keeps the build tree clean.
    work=$(mktemp -d)
    cp "$unit" "$work/"
    out=$(cd "$work" && systemd-analyze security --offline=true --no-pager "$(basename "$unit")" 2>&1) ||
        { rm -rf "$work"; fail "systemd-analyze security on '$unit': $out"; }
    rm -rf "$work"
    level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
    [ -n "$level" ] || fail "no exposure level for '$unit' in: $out"
    echo "unit-security: $(basename "$unit"): exposure $level (limit $max)"
    grep '^✗' <<<"$out" | sed 's/^/unit-security:   /' || true
    awk -v l="$level" -v m="$max" 'BEGIN { exit !(l + 0 <= m + 0) }' ||
        fail "$(basename "$unit") is rated $level, above its limit $max"
done
