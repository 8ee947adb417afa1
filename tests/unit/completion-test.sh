#!/bin/bash
# The bash completion of migrate-vm (contrib/bash-completion/migrate-vm): it loads, completes
# options, subcommands, and domain names from `virsh -c URI list --name` honoring --connect.
# A fake virsh on PATH records its arguments and lists domains per URI.
#   completion-test.sh COMPLETION_FILE
set -euo pipefail
file=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "completion-test: FAIL: $*" >&2; exit 1; }

cat >"$tmp/virsh" <<'FAKE'
#!/bin/bash
echo "$*" >>"$FAKE_VIRSH_LOG"
uri=default
while [ $# -gt 0 ]; do
    case $1 in -c) uri=$2; shift ;; esac
    shift
done
case $uri in
default) printf 'vm-default\n\n' ;;
qemu+tcp://hostA/system) printf 'vm7\nvm8\nweb1\n\n' ;;
*) exit 1 ;;
esac
FAKE
chmod +x "$tmp/virsh"
export PATH="$tmp:$PATH" FAKE_VIRSH_LOG="$tmp/log"

# shellcheck disable=SC1090
source "$file"
complete -p migrate-vm | grep -q -- '-F _migrate_vm' || fail "no completion registered"

# complete WORDS...: the cursor is on the last word; prints COMPREPLY sorted, one per line.
complete_line() {
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _migrate_vm
    printf '%s\n' "${COMPREPLY[@]}" | sort
}
expect() {
    local want=$1 got
    shift
    got=$(complete_line "$@" | tr '\n' ' ' | sed 's/ $//')
    [ "$got" = "$want" ] || fail "'$*' completed to '$got', expected '$want'"
}

expect "--p2p --parallel --parallel-connections --persistent --plug-attempts --postcopy --postcopy-after --postcopy-after-precopy --prepare-timeout" \
    migrate-vm --p
expect "--timeout --timeout-abort --timeout-postcopy --timeout-suspend" migrate-vm --time
expect "--no-agent --no-auto-converge --no-persistent --no-postcopy --no-standby --no-undefinesource" \
    migrate-vm --no-
expect "--force" migrate-vm --fo
expect "vm7 vm8" migrate-vm --connect qemu+tcp://hostA/system vm
grep -qx -- "-q -c qemu+tcp://hostA/system list --name" "$tmp/log" ||
    fail "virsh was not asked with the --connect URI: $(cat "$tmp/log")"
expect "vm7 vm8" migrate-vm -c qemu+tcp://hostA/system --verbose vm
expect "web1" migrate-vm --connect=qemu+tcp://hostA/system --parallel 4 w
expect "vm-default" migrate-vm --json vm
expect "config drain plan run status vm-default" migrate-vm ""
expect "check" migrate-vm config ch
expect "--skip-files" migrate-vm config check --sk
expect "--parallel-connections" migrate-vm --parallel-c
expect "--postcopy-after-precopy" migrate-vm --postcopy-after-p
expect "--tls" migrate-vm --tl
expect "consolidate" migrate-vm plan con
expect "--host-value" migrate-vm plan consolidate --host
expect "--max-migrations --max-moves" migrate-vm plan consolidate --max-m
expect "" migrate-vm plan consolidate --host-value ""
expect "--deadline" migrate-vm drain A --dead
expect "" migrate-vm drain A --deadline ""
expect "--socket" migrate-vm status --s
expect "qemu+ssh:// qemu+tcp:// qemu+tls://" migrate-vm -c qemu+tcp://hostA/system vm7 qemu
expect "" migrate-vm --recover vm7 x
expect "" migrate-vm --parallel ""
# The cursor on the domain, --connect after it.
COMP_WORDS=(migrate-vm we --connect qemu+tcp://hostA/system)
COMP_CWORD=1
COMPREPLY=()
_migrate_vm
[ "${COMPREPLY[*]}" = "web1" ] || fail "--connect after the cursor: got '${COMPREPLY[*]}'"
: >"$tmp/log"
expect "" migrate-vm --connect qemu:///nowhere v
echo "completion-test: ok"
