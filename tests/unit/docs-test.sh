#!/bin/bash
# Docs that match the code (issue #20, item 8):
#   1. every man page renders without a warning (man --warnings) and has its sections;
#   2. every long option a program's --help lists is in its rendered man page (migrate-vm,
#      hotmigd, hotmig-agent, hotmig-sriov);
#   3. hotmigd(8)'s CONFIGURATION section names every key of the groups hotmigd reads, each
#      group in an entry of its own (the section once rendered garbled);
#   4. every ```ini example of the docs (docs/*.md, README.md, ansible/README.md) passes
#      `migrate-vm config check --skip-files` (the examples name files of a real host);
#   5. migrate-vm's exit codes are the same in its --help, its man page and docs/operations.md.
#
#   docs-test.sh SOURCE_DIR MIGRATE_VM HOTMIGD HOTMIG_AGENT HOTMIG_SRIOV
set -uo pipefail
src=$1
mv=$2
declare -A prog=([migrate-vm.1]=$2 [hotmigd.8]=$3 [hotmig-agent.8]=$4 [hotmig-sriov.8]=$5)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "docs-test: FAIL: $*" >&2; exit 1; }

# render PAGE: plain ASCII text, wide lines (no hyphenation splits an option).
render() { LC_ALL=C MANWIDTH=250 man -l "$1" 2>/dev/null | col -bx; }

for page in "$src"/man/*.[0-9]; do
    name=$(basename "$page")
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "man -l $name warns: $warnings"
    render "$page" >"$tmp/$name.txt"
    for section in NAME SYNOPSIS DESCRIPTION "EXIT STATUS"; do
        grep -qx "$section" "$tmp/$name.txt" || fail "$name has no $section section"
    done
    bin=${prog[$name]:-}
    [ -n "$bin" ] || fail "no program known for the man page $name: add it to docs-test.sh"
    "$bin" --help >"$tmp/help" 2>&1 || fail "$bin --help failed"
    for opt in $(grep -oE '^ +(-[A-Za-z], )?--[a-z][a-z0-9-]*' "$tmp/help" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        case $opt in --help | --help-all) continue ;; esac
        grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" "$tmp/$name.txt" ||
            fail "$name does not document $opt, which $(basename "$bin") --help lists"
    done
done
echo "docs-test: man pages render, every --help option documented"

# hotmigd(8) CONFIGURATION: one entry per group, every key of that group named in it.
sed -n '/^CONFIGURATION$/,/^[A-Z][A-Z ]*$/p' "$tmp/hotmigd.8.txt" | sed '$d' >"$tmp/conf.txt"
"$mv" config sample >"$tmp/sample"
for group in hotmigd pool scheduler alerts; do
    # The entry: from its tag line to the next tag line (or the end).
    awk -v tag="[$group]" '
        $1 == tag && !seen { on = 1; seen = 1; print; next }
        on && /^       \[/ { on = 0 }
        on { print }
    ' "$tmp/conf.txt" >"$tmp/entry"
    [ -s "$tmp/entry" ] || fail "hotmigd(8) CONFIGURATION has no entry for [$group]: $(cat "$tmp/conf.txt")"
    for key in $(awk -v g="[$group]" '/^#?\[/ { cur = $0 } cur == g && /^#[a-z-]+ = ?/ { sub(/^#/, "", $1); print $1 }' "$tmp/sample"); do
        grep -qE -- "(^|[^a-z-])$key([^a-z-]|$)" "$tmp/entry" ||
            fail "hotmigd(8) CONFIGURATION [$group] does not name '$key'"
    done
done
echo "docs-test: hotmigd(8) CONFIGURATION names every key of [hotmigd], [pool], [scheduler], [alerts]"

# The docs' configuration examples.
n=0
for doc in "$src"/docs/*.md "$src/README.md" "$src/ansible/README.md"; do
    awk -v out="$tmp/example" '
        /^```ini$/ { n++; on = 1; file = out "-" n; printf "" >file; next }
        on && /^```$/ { on = 0; close(file); next }
        on { print >>file }
    ' "$doc"
    for example in "$tmp"/example-*; do
        [ -e "$example" ] || continue
        n=$((n + 1))
        "$mv" config check --skip-files "$example" >"$tmp/check.out" 2>&1 ||
            fail "an ini example of $(basename "$doc") does not pass config check: $(cat "$tmp/check.out")
--- the example:
$(cat "$example")"
        rm -f "$example"
    done
done
[ "$n" -ge 3 ] || fail "found only $n ini examples in the docs"
echo "docs-test: $n configuration examples of the docs pass migrate-vm config check"

# migrate-vm's exit codes: --help, the man page, operations.md.
"$mv" --help | sed -n '/^Exit status/,/^$/p' | grep -oE '^  [0-9]+ ' | tr -d ' ' | sort -n >"$tmp/codes.help"
sed -n '/^EXIT STATUS$/,/^[A-Z][A-Z ]*$/p' "$tmp/migrate-vm.1.txt" | grep -oE '^       [0-9]+( |$)' | tr -d ' ' | sort -n >"$tmp/codes.man"
sed -n '/^### Exit status/,/^## /p' "$src/docs/operations.md" | grep -oE '^\| [0-9]+ \|' | tr -d '| ' | sort -n >"$tmp/codes.ops"
[ "$(wc -l <"$tmp/codes.help")" -ge 10 ] || fail "read only $(wc -l <"$tmp/codes.help") exit codes from --help"
cmp -s "$tmp/codes.help" "$tmp/codes.man" || fail "exit codes: --help has $(tr '\n' ' ' <"$tmp/codes.help"), migrate-vm(1) $(tr '\n' ' ' <"$tmp/codes.man")"
cmp -s "$tmp/codes.help" "$tmp/codes.ops" || fail "exit codes: --help has $(tr '\n' ' ' <"$tmp/codes.help"), operations.md $(tr '\n' ' ' <"$tmp/codes.ops")"
echo "docs-test: ok"
