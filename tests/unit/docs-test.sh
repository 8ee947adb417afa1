#!/bin/bash
# Docs that match the code (issue #20, item 8):
#   1. every man page renders without a warning (man --warnings) and has its sections;
#   2. every long option a program's --help lists is in its rendered man page (migrate-vm,
#      hotmigd, hotmig-agent, hotmig-sriov);
#   3. hotmigd(8)'s CONFIGURATION section names every key of the groups hotmigd reads, each
#      group in an entry of its own (the section once rendered garbled);
#   4. every ```ini example of the docs (docs/*.md, README.md, ansible/README.md) passes
#      `migrate-vm config check --skip-files` (the examples name files of a real host);
#   5. migrate-vm's exit codes are the same in its --help, its man page and docs/operations.md;
#   6. every long option the docs (docs/*.md, README.md, ansible/README.md: code spans and
#      blocks) and the man pages give one of the programs is in that program's --help (for
#      migrate-vm, its subcommands' too), and every option of migrate-vm's subcommands' --help
#      is in migrate-vm(1) (the programs' own --help: check 2);
#   7. every `[group] key` the docs and the man pages name is a key of the configuration, and
#      the other way round: migrate-vm(1) names every [migrate] key, hotmigd(8) every key of a
#      [host NAME] group (the other groups: check 3) (issue 32).
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

# Options given to our programs in the docs and man pages: in the program's --help.
# md_units FILE: the command-like text of a markdown file, one unit a line: every line of its
# fenced blocks (a line ending in '\' joined to the next) and every inline `code` span.
md_units() {
    awk '
        /^ *```/ { fence = !fence; next }
        fence { line = line $0; if (sub(/\\$/, "", line)) next; print line; line = ""; next }
        { s = $0; while (match(s, /`[^`]+`/)) { print substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) } }
    ' "$1"
}
# man_units TEXT: a rendered man page's lines, a line ending in '\' joined to the next.
man_units() { awk '{ line = line $0; if (sub(/\\$/, "", line)) next; print line; line = "" }' "$1"; }
# our_flags [PROGRAM]: "PROGRAM --FLAG" for every long option given to one of our programs in
# the units on stdin. A unit's words go to the program named last (or to PROGRAM, a man
# page's own, from the start of a unit whose first word is no other command), named where a
# command starts (first, after '|', ';', '&&', sudo, env or VAR=value; elsewhere when an
# option, or a subcommand of migrate-vm, follows the name); a separator ends it.
our_flags() {
    awk -v dflt="${1:-}" '
        {
            prog = ($1 ~ /^(curl|virsh|systemctl|systemd-run|openssl|mpirun|mpiexec|srun|ssh|socat|ansible-playbook|nft|ip|ibv_[a-z_]*|ib_[a-z_]*)$/) ? "" : dflt
            cmdpos = 1
            for (i = 1; i <= NF; i++) {
                w = $i
                if (w ~ /^(\||\|\||&&|;|&|\$|#)$/) { prog = ""; cmdpos = 1; continue }
                b = w; sub(/^.*\//, "", b)
                if (b ~ /^(migrate-vm|hotmigd|hotmig-agent|hotmig-sriov)$/ &&
                    (cmdpos || $(i + 1) ~ /^-/ ||
                     (b == "migrate-vm" && $(i + 1) ~ /^(config|plan|drain|run|status)$/))) {
                    prog = b; cmdpos = 0; continue
                }
                cmdpos = (w ~ /^(sudo|env|exec|[A-Z_][A-Z0-9_]*=.*)$/)
                if (prog == "" || w !~ /^--[a-z]/) continue
                f = w; sub(/=.*/, "", f); match(f, /^--[a-z][a-z0-9-]*/); f = substr(f, 1, RLENGTH)
                if (f !~ /-$/) print prog, f
            }
        }'
}
declare -A bin=([migrate-vm]=$2 [hotmigd]=$3 [hotmig-agent]=$4 [hotmig-sriov]=$5)
: >"$tmp/known"
for p in "${!bin[@]}"; do
    "${bin[$p]}" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' | sed "s/^/$p /" >>"$tmp/known"
done
for sub in plan drain run status; do
    "$mv" "$sub" --help >"$tmp/sub-help" 2>&1 || fail "migrate-vm $sub --help failed"
    grep -oE -- '--[a-z][a-z0-9-]*' "$tmp/sub-help" | sed 's/^/migrate-vm /' >>"$tmp/known"
    for opt in $(grep -oE '^ +(-[A-Za-z], )?--[a-z][a-z0-9-]*' "$tmp/sub-help" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        case $opt in --help | --help-all) continue ;; esac
        grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" "$tmp/migrate-vm.1.txt" ||
            fail "migrate-vm.1 does not document $opt, which migrate-vm $sub --help lists"
    done
done
sort -u -o "$tmp/known" "$tmp/known"
n=0
for doc in "$src"/docs/*.md "$src/README.md" "$src/ansible/README.md" "$src"/man/*.[0-9]; do
    case $doc in
    *.md) md_units "$doc" | our_flags ;;
    *) man_units "$tmp/$(basename "$doc").txt" | our_flags "$(basename "${doc%.*}")" ;;
    esac >"$tmp/flags"
    while read -r p flag; do
        n=$((n + 1))
        grep -qxF -- "$p $flag" "$tmp/known" ||
            fail "$(basename "$doc") gives $p the option $flag, which $p --help does not list"
    done <"$tmp/flags"
done
[ "$n" -ge 100 ] || fail "found only $n options given to the programs in the docs"
echo "docs-test: the $n options the docs and man pages give the programs are in their --help"

# Configuration keys named in the docs (`[group] key`) and the man pages (.B [group] key):
# keys of the schema; and every [migrate] key in migrate-vm(1), every [host NAME] key in
# hotmigd(8).
awk '/^\[[a-z]+\]$/ { g = substr($0, 2, length($0) - 2); next } /^#\[/ { g = "" }
     g && /^#[a-z-]+ = ?/ { sub(/^#/, "", $1); print g " " $1 }' "$tmp/sample" | sort -u >"$tmp/keys"
[ "$(wc -l <"$tmp/keys")" -gt 40 ] || fail "read only $(wc -l <"$tmp/keys") keys from the sample"
{
    grep -ohE '`\[(migrate|hotmigd|pool|scheduler|alerts)\] [a-z][a-z-]*[a-z]' "$src"/docs/*.md "$src/README.md" "$src/ansible/README.md"
    grep -hE '^\.(B|BR|RB|BI|IB) ' "$src"/man/*.[0-9] | grep -oE '\[(migrate|hotmigd|pool|scheduler|alerts)\] [a-z][a-z\\-]*[a-z]' | sed 's/\\-/-/g'
} | tr -d '`[]' | sort -u >"$tmp/named"
[ "$(wc -l <"$tmp/named")" -ge 20 ] || fail "found only $(wc -l <"$tmp/named") [group] keys named in the docs"
unknown=$(comm -23 "$tmp/named" "$tmp/keys" | sed 's/^\([a-z]*\) /[\1] /' | tr '\n' ',' | sed 's/,$//; s/,/, /g')
[ -z "$unknown" ] || fail "the docs name keys the configuration does not have: $unknown"
sed -n '/^FILES$/,/^[A-Z][A-Z ]*$/p' "$tmp/migrate-vm.1.txt" >"$tmp/files.txt"
for key in $(awk '$1 == "migrate" { print $2 }' "$tmp/keys"); do
    grep -qE -- "(^|[^a-z-])$key([^a-z-]|$)" "$tmp/files.txt" ||
        fail "migrate-vm(1) FILES does not name the [migrate] key '$key'"
done
awk '$1 == "[host" && !seen { on = 1; seen = 1; print; next } on && /^       \[/ { on = 0 } on { print }' \
    "$tmp/conf.txt" >"$tmp/host-entry"
for key in uri hotmigd identity; do
    grep -qE -- "(^|[^a-z-])$key([^a-z-]|$)" "$tmp/host-entry" ||
        fail "hotmigd(8) CONFIGURATION [host NAME] does not name '$key': $(cat "$tmp/host-entry")"
done
echo "docs-test: the $(wc -l <"$tmp/named") keys the docs name exist; every [migrate] and [host NAME] key is documented"
echo "docs-test: ok"
