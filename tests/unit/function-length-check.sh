#!/bin/bash
# Checks the house style's short functions (STYLE.md, issue 14): no function of the project's C
# sources is longer than 100 lines, counted from the first line of its signature to its closing
# brace (issue 27: a long signature counts too). The sources follow .clang-format, so a
# signature starts at the start of a line, a function's body opens with a '{' alone at the start
# of a line and closes with the next '}' at the start of a line; a function whose '{' ends its
# signature line cannot be measured and is reported as such.
#
# Checked: the C files of common, xml, hotplug, policies, engine, hotmigd, migrate-vm and
# guest-agent (tests/ and lab/ are not).
#
# Usage: function-length-check.sh SOURCE_DIR    print every function over the limit, exit 1 if any
#        function-length-check.sh --self-test   prove the check catches what it claims to
set -u

MAX_LINES=100
FOLDERS="common xml hotplug policies engine hotmigd migrate-vm guest-agent"

# Prints "FILE:LINE: NAME() is N lines (more than MAX)" for each function over @max in FILEs.
check_files() {
    local max=$1
    shift
    awk -v max="$max" '
        FNR == 1 { sig = ""; sigline = 0; start = 0 }
        # A line at the start that opens a parameter list: a signature begins (or goes on).
        start == 0 && /^[A-Za-z_]/ && /\(/ { sig = $0; sigline = FNR }
        start == 0 && /^[A-Za-z_][^;=]*\)[ \t]*\{[ \t]*$/ {
            printf "%s:%d: the opening brace of a function is not on a line of its own: cannot measure it\n", FILENAME, FNR
            bad = 1
        }
        start == 0 && /^\{[ \t]*$/ { start = FNR; next }
        start > 0 && /^\}/ {
            n = FNR - sigline + 1
            if (n > max) {
                name = sig
                sub(/\(.*/, "", name)
                sub(/.*[ \t*]/, "", name)
                printf "%s:%d: %s() is %d lines (more than %d)\n", FILENAME, sigline, name, n, max
                bad = 1
            }
            start = 0; sig = ""
        }
        END { exit bad }
    ' "$@"
}

check_tree() {
    local src=$1 files=() f folder
    for folder in $FOLDERS; do
        [[ -d $src/$folder ]] || { echo "function-length-check: no folder '$src/$folder'" >&2; return 2; }
        while IFS= read -r -d '' f; do
            files+=("$f")
        done < <(find "$src/$folder" -name '*.c' -print0 | sort -z)
    done
    [[ ${#files[@]} -gt 0 ]] || { echo "function-length-check: no C files under '$src'" >&2; return 2; }
    check_files "$MAX_LINES" "${files[@]}"
}

# Writes a C file with function NAME of N lines (signature to closing brace) to FILE.
write_function() {
    local file=$1 name=$2 n=$3 i
    {
        printf 'static int %s(int a,\n                 int b)\n{\n' "$name"
        for ((i = 0; i < n - 5; i++)); do
            printf '    a += b;\n'
        done
        printf '    return a;\n}\n\n'
    } >>"$file"
}

self_test() {
    local dir out rc i
    dir=$(mktemp -d) || return 2
    trap 'rm -rf "$dir"' RETURN
    write_function "$dir/ok.c" at_limit "$MAX_LINES"
    write_function "$dir/ok.c" short 5
    out=$(check_files "$MAX_LINES" "$dir/ok.c") || { echo "self-test: a function of $MAX_LINES lines was refused: $out"; return 1; }
    write_function "$dir/long.c" short 5
    write_function "$dir/long.c" too_long $((MAX_LINES + 1))
    out=$(check_files "$MAX_LINES" "$dir/long.c")
    rc=$?
    [[ $rc -ne 0 && $out == *"long.c:7: too_long() is $((MAX_LINES + 1)) lines"* ]] ||
        { echo "self-test: a function of $((MAX_LINES + 1)) lines passed, or was misnamed: '$out'"; return 1; }
    [[ $out != *"short()"* ]] || { echo "self-test: a short function was reported: '$out'"; return 1; }
    printf 'int knr(void) {\n    return 0;\n}\n' >"$dir/knr.c"
    out=$(check_files "$MAX_LINES" "$dir/knr.c")
    rc=$?
    [[ $rc -ne 0 && $out == *"knr.c:1: the opening brace"* ]] ||
        { echo "self-test: a brace at the end of a signature passed: '$out'"; return 1; }
    # A table at file scope is no function, however long.
    { printf 'static const int table[] = {\n'; for ((i = 0; i < 150; i++)); do printf '    %d,\n' "$i"; done; printf '};\n'; } >"$dir/table.c"
    out=$(check_files "$MAX_LINES" "$dir/table.c") || { echo "self-test: a long table was reported: '$out'"; return 1; }
    echo "self-test: ok"
}

case "${1:-}" in
--self-test) self_test ;;
"" | -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    [[ -n ${1:-} ]]
    ;;
*) check_tree "$1" ;;
esac
