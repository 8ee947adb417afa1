#!/bin/bash
# The hotmig_host role documents every key of hotmig.conf with its default, in the comments of
# defaults/main.yml ("#   key: default   what it is" under a comment naming "group [NAME]").
# They must be exactly the keys and defaults of `migrate-vm config sample` (but [pool] pfs,
# which the role writes from hotmig_sriov_pfs), so the role's documentation cannot drift from
# the program's.
#   defaults-test.sh MIGRATE_VM DEFAULTS_YML
set -euo pipefail
mv=$1
yml=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "ansible-defaults-test: FAIL: $*" >&2; exit 1; }

# "GROUP KEY=DEFAULT" for every key of the sample ("[group]" headers, "#key = default" lines).
"$mv" config sample | awk '
    /^\[[a-z]+\]$/ { group = substr($0, 2, length($0) - 2); next }
    /^#\[/ { group = "" }   # the commented [host NAME] example
    group && /^#[a-z-]+ = ?/ { key = substr($1, 2); print group " " key "=" substr($0, length(key) + 5) }
' | grep -v '^pool pfs=' | sort >"$tmp/program"
# The same from the role's comments ("" stands for the empty default).
awk '
    match($0, /group \[[a-z]+\]/) { group = substr($0, RSTART + 7, RLENGTH - 8) }
    /^#   [a-z-]+: / { key = $2; sub(/:$/, "", key); value = $3; if (value == "\"\"") value = "";
                      print group " " key "=" value }
' "$yml" | sort >"$tmp/role"
[ "$(wc -l <"$tmp/program")" -gt 40 ] || fail "read only $(wc -l <"$tmp/program") keys from the sample"
diff -u --label "migrate-vm config sample" --label "$yml" "$tmp/program" "$tmp/role" >&2 ||
    fail "$yml does not document the keys and defaults migrate-vm has (- program, + role)"
echo "ansible-defaults-test: ok ($(wc -l <"$tmp/role") keys)"
