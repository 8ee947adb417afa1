#!/bin/bash
# Checks, from the object files' symbol tables, who calls whom between the files of one
# library (STYLE.md: "inside a folder ... files call downward only"). The include check
# (layering-check.sh) cannot see a call through a declaration in a shared header; this one
# reads the references the compiler left: file A uses a symbol file B defines.
#
#   calls-check.sh [--layers SPEC] --lib NAME OBJECT... [--lib NAME OBJECT...]...
#       each library's objects ($<TARGET_OBJECTS:...>): fails when two or more of its files call
#       each other in a circle, naming them. With --layers (then one library), also when a file
#       calls one of a higher layer. SPEC: "BASE=a.c,b.c PEER=c.c ...", bottom first (the verbs
#       layer's HM_VERBS_LAYER_* lists, guest-agent/CMakeLists.txt).
#   calls-check.sh --self-test
#       proves that the check catches a circle and an upward call, and passes a clean tree.
set -u

fail=0
say() {
    echo "calls-check: $*" >&2
    fail=1
}

# "A B" lines: the object A references a symbol that the object B defines (A != B). A, B: the
# source file's name (x.c of x.c.o).
edges() {
    local o b sym
    declare -A owner=()
    for o in "$@"; do
        while read -r sym; do owner[$sym]=$o; done < <(nm -g --defined-only "$o" | awk '{print $3}')
    done
    for o in "$@"; do
        while read -r sym; do
            b=${owner[$sym]:-}
            [ -n "$b" ] && [ "$b" != "$o" ] && echo "$(basename "$o" .o) $(basename "$b" .o)"
        done < <(nm -u "$o" | awk '{print $2}')
    done | sort -u
}

check_lib() {
    local dir=$1 spec=$2 e loop
    shift 2
    e=$(edges "$@")
    [ -n "$e" ] || return 0
    # tsort names the members of every circle it meets on stderr
    loop=$(echo "$e" | tsort 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //')
    if [ -n "$loop" ]; then
        say "$dir: files that call each other in a circle:" $loop
        echo "$e" | sed 's/^/    calls: /' >&2
    fi
    [ -n "$spec" ] || return 0
    declare -A rank=()
    local r=0 layer files f
    for layer in $spec; do
        files=${layer#*=}
        for f in ${files//,/ }; do rank[$(basename "$f")]=$r; done
        r=$((r + 1))
    done
    while read -r a b; do
        [ -n "${rank[$a]:-}" ] && [ -n "${rank[$b]:-}" ] || {
            say "$dir: '$a' or '$b' is in no layer of --layers"
            continue
        }
        ((rank[$b] > rank[$a])) && say "$dir: '$a' calls '$b', a file of a higher layer"
    done <<<"$e"
}

self_test() {
    local t
    t=$(mktemp -d) || exit 1
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/loop.dir" "$t/up.dir" "$t/ok.dir"
    printf 'void b(void);\nvoid a(void) { b(); }\n' >"$t/a.c"
    printf 'void a(void);\nvoid b(void) { a(); }\n' >"$t/b.c"
    printf 'void b(void) { }\n' >"$t/b0.c"
    cc -c "$t/a.c" -o "$t/loop.dir/a.c.o" && cc -c "$t/b.c" -o "$t/loop.dir/b.c.o" &&
        cc -c "$t/a.c" -o "$t/up.dir/a.c.o" && cc -c "$t/b0.c" -o "$t/up.dir/b.c.o" &&
        cc -c "$t/a.c" -o "$t/ok.dir/a.c.o" && cc -c "$t/b0.c" -o "$t/ok.dir/b.c.o" || exit 1
    "$0" --lib loop "$t"/loop.dir/*.o 2>/dev/null &&
        { echo "self-test: a circle a.c <-> b.c passed" >&2; exit 1; }
    "$0" --layers "LOW=a.c HIGH=b.c" --lib up "$t"/up.dir/*.o 2>/dev/null &&
        { echo "self-test: a.c (low) calling b.c (high) passed" >&2; exit 1; }
    "$0" --layers "LOW=b.c HIGH=a.c" --lib ok "$t"/ok.dir/*.o >/dev/null ||
        { echo "self-test: a clean tree failed" >&2; exit 1; }
    echo "self-test: ok (a circle and an upward call are caught, a clean tree passes)"
    exit 0
}

spec=
case ${1:-} in
--self-test) self_test ;;
--layers)
    spec=${2:-}
    shift 2
    ;;
esac
[ "${1:-}" = --lib ] && [ $# -ge 3 ] ||
    { echo "usage: calls-check.sh [--layers SPEC] --lib NAME OBJECT... | --self-test" >&2; exit 2; }
nlibs=0
while [ $# -gt 0 ]; do
    name=$2
    shift 2
    objs=()
    while [ $# -gt 0 ] && [ "$1" != --lib ]; do
        IFS=';' read -ra more <<<"$1" # $<TARGET_OBJECTS:...> reaches us as one ;-list
        objs+=("${more[@]}")
        shift
    done
    for o in "${objs[@]}"; do [ -f "$o" ] || say "$name: no object '$o' (build first)"; done
    check_lib "$name" "$spec" "${objs[@]}"
    nlibs=$((nlibs + 1))
done
((fail == 0)) && echo "calls-check: ok ($nlibs libraries: no circle${spec:+, no call upward})"
exit "$fail"
