#!/bin/bash
# Every command the test, lab and demo scripts call comes from a declared package: the ones in
# tests/deps.list and the lab's HOTMIG_LAB_PACKAGES (what tests/install-deps installs on a
# fresh machine), or an Essential/required Debian package (on every machine).
#
#   deps-check.sh TOP          checks the scripts of the tree at TOP
#   deps-check.sh --self-test  checks that an undeclared command is caught
#
# A command is a word in command position (line start, after | ; && || ( $( ` and the shell's
# keywords, after 'command -v', 'timeout N', 'env', VAR=value) that this machine resolves to a
# program (type -P); its package is dpkg -S of its real path. Words that resolve to nothing
# (functions, heredoc text, the project's own binaries) are not commands of a package.
set -euo pipefail

fail() {
    echo "deps-check: $*" >&2
    exit 1
}

# The scripts: every shell script under tests/ and the lab's host-side scripts (not lab/guest:
# that runs inside the guest on the initramfs' busybox).
scripts_of() {
    local top=$1
    {
        find "$top/tests" -type f \( -name '*.sh' -o -name run -o -name install-deps \) -not -path '*/corpus/*'
        for f in "$top"/lab/*; do
            [ -f "$f" ] && head -c 64 "$f" | grep -q '^#!.*\(ba\)\{0,1\}sh' && echo "$f"
        done
    } | sort -u
}

declared_of() {
    local top=$1 HOTMIG_LAB_PACKAGES=
    sed 's/#.*//' "$top/tests/deps.list" | tr -s ' \t' '\n' | sed '/^$/d'
    # shellcheck disable=SC1090
    source <(sed -n '/^HOTMIG_LAB_PACKAGES=/,/"$/p' "$top/lab/hotmig-lab")
    tr -s ' \t' '\n' <<<"$HOTMIG_LAB_PACKAGES" | sed '/^$/d'
}

# Words in command position of a shell script (a heuristic, see the top).
candidates_of() {
    sed -e 's/^[[:space:]]*#.*//' -e 's/[[:space:]]#[^!].*//' "$1" |
        sed -e 's/\$(/\n/g' -e 's/`/\n/g' -e 's/&&/\n/g' -e 's/||/\n/g' -e 's/[|;(]/\n/g' \
            -e 's/command -v /\n/g' -e 's/type -P /\n/g' |
        awk '{
            i = 1
            while (i <= NF) {
                w = $i
                if (w ~ /^(if|then|do|else|elif|while|until|!|time|exec|nice|env|sudo|xargs|\{|\}|\[\[|\[)$/ || w ~ /^[A-Za-z_][A-Za-z0-9_]*=/) { i++; continue }
                if (w == "timeout") { i++; while (i <= NF && $i ~ /^-|^[0-9.]+[smh]?$/) i++; continue }
                break
            }
            if (i <= NF && $i ~ /^[A-Za-z0-9][A-Za-z0-9._+-]*$/) print $i
        }' | sort -u
}

essential_packages() {
    dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' | awk '$2 == "yes" || $3 == "required" {print $1}'
}

# The declared packages and everything they depend on (what installing them brings).
declared_closure() {
    # shellcheck disable=SC2046
    apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances $(declared_of "$1") 2>/dev/null | sed -n 's/^\([^ <][^ ]*\)$/\1/p'
    declared_of "$1"
}

# "WORD PACKAGE" for each WORD on stdin that is a program here (PACKAGE '?' when no package
# owns it); one dpkg -S for all.
packages_of() {
    local word path real
    declare -A by_path=()
    while read -r word; do
        path=$(type -P "$word") || continue
        real=$(readlink -f "$path")
        by_path[$word]="$real"
    done
    ((${#by_path[@]})) || return 0
    local owners
    # usrmerge: a package may list /bin/x for /usr/bin/x, or the other way round.
    owners=$(for word in "${!by_path[@]}"; do
        real=${by_path[$word]}
        echo "$real"
        echo "/usr${real#/usr}"
        echo "${real#/usr}"
    done | sort -u | xargs dpkg -S 2>/dev/null | grep -v '^diversion by' || true)
    for word in "${!by_path[@]}"; do
        real=${by_path[$word]}
        awk -v a="$real" -v b="/usr${real#/usr}" -v c="${real#/usr}" -v w="$word" -F': ' '
            $2 == a || $2 == b || $2 == c { split($1, p, ", "); print w, p[1]; found = 1; exit }
            END { if (!found) print w, "?" }' <<<"$owners"
    done
}

check_tree() {
    local top=$1 script word pkg funcs bad=0 checked=0 tmp
    tmp=$(mktemp -d)
    declared_closure "$top" | sort -u >"$tmp/declared"
    essential_packages | sort -u >"$tmp/essential"
    compgen -b -k | sort -u >"$tmp/builtins"
    while read -r script; do
        funcs=$(sed -n 's/^[[:space:]]*\(function[[:space:]]\+\)\{0,1\}\([A-Za-z_][A-Za-z0-9_-]*\)[[:space:]]*()[[:space:]]*{\{0,1\}.*/\2/p' "$script" "$top/tests/e2e/lib.sh" | sort -u)
        candidates_of "$script" | grep -vxF -f "$tmp/builtins" | { grep -vxF -e "$funcs" || true; } |
            sed "s|^|${script#"$top"/} |"
    done < <(scripts_of "$top") >"$tmp/uses"
    cut -d' ' -f2 "$tmp/uses" | sort -u | packages_of >"$tmp/packages"
    while read -r script word; do
        pkg=$(awk -v w="$word" '$1 == w {print $2}' "$tmp/packages")
        [ -n "$pkg" ] || continue
        checked=$((checked + 1))
        if [ "$pkg" = "?" ]; then
            echo "deps-check: $script calls '$word' ($(type -P "$word")), which no Debian package provides" >&2
            bad=1
        elif ! grep -qxF -- "$pkg" "$tmp/declared" "$tmp/essential"; then
            echo "deps-check: $script calls '$word' from package '$pkg', which tests/deps.list does not declare" >&2
            bad=1
        fi
    done <"$tmp/uses"
    rm -rf "$tmp"
    ((checked > 0)) || fail "no command found in the scripts of $top: the scan is broken"
    ((bad == 0)) || return 1
    echo "deps-check: $checked command uses in $(scripts_of "$top" | wc -l) scripts, all from declared or essential packages"
}

self_test() {
    local t
    t=$(mktemp -d)
    trap 'rm -rf "$t"' RETURN
    mkdir -p "$t/tests/e2e" "$t/lab"
    printf 'HOTMIG_LAB_PACKAGES="jq"\n' >"$t/lab/hotmig-lab"
    : >"$t/tests/e2e/lib.sh"
    printf '# jq only\njq  # the JSON tool\n' >"$t/tests/deps.list"
    printf '#!/bin/bash\nx=$(jq -n 1 | sed s/1/2/)\nif ! timeout 5 curl -s http://127.0.0.1:1; then :; fi\n' >"$t/tests/e2e/t.sh"
    command -v curl >/dev/null && command -v jq >/dev/null || fail "self-test needs curl and jq installed"
    if check_tree "$t" 2>"$t/err"; then
        fail "self-test: curl (package curl) is not declared, yet the check passed"
    fi
    grep -q "calls 'curl' from package 'curl'" "$t/err" || fail "self-test: unexpected report: $(cat "$t/err")"
    grep -q "'jq'\|'sed'\|'timeout'" "$t/err" && fail "self-test: declared or essential commands reported: $(cat "$t/err")"
    echo 'curl' >>"$t/tests/deps.list"
    check_tree "$t" >/dev/null || fail "self-test: curl declared, yet the check failed"
    echo "deps-check: self-test ok"
}

case ${1:-} in
--self-test) self_test ;;
'' | -*) echo "usage: deps-check.sh TOP | --self-test" >&2; exit 2 ;;
*) check_tree "$1" ;;
esac
