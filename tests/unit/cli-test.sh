#!/bin/bash
# migrate-vm's command line, without a hypervisor: --version, --help (options and the exit
# status table), option combinations libvirt refuses (exit 2 before anything is done), the
# configuration (--config, config check|sample, exit 4 naming FILE:LINE), the --no-X forms
# that turn off what the configuration turns on (as --dry-run's 'options' line shows), exit 10
# for a connect failure (a URI no libvirt driver serves), and the subcommands that ask hotmigd
# without one (usage 2, unreachable 1).
#   cli-test.sh MIGRATE_VM SOURCE_DIR
set -uo pipefail
mv=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOTMIG_STATE_DIR=$tmp/state
fail() { echo "cli-test: FAIL: $*" >&2; exit 1; }

# expect RC PATTERN ARGS...: exits RC, stdout+stderr match PATTERN (grep -E).
expect() {
    local want=$1 pattern=$2 rc
    shift 2
    "$mv" "$@" >"$tmp/out" 2>&1
    rc=$?
    [ "$rc" -eq "$want" ] || fail "migrate-vm $* exited $rc, expected $want: $(cat "$tmp/out")"
    grep -qE -- "$pattern" "$tmp/out" || fail "migrate-vm $*: output lacks '$pattern': $(cat "$tmp/out")"
}

version=$(sed -n 's/^project(hotmig VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
expect 0 "^migrate-vm $version\$" --version
expect 0 "--parallel=N" --help
for opt in --live --p2p --persistent --undefinesource --migrateuri --bandwidth --parallel \
    --postcopy --postcopy-after --auto-converge --timeout --timeout-suspend --timeout-postcopy \
    --timeout-abort --json --config --recover --dry-run --hotmigd --no-persistent \
    --no-undefinesource --no-auto-converge --no-postcopy --force; do
    grep -qE -- "(  |, )$opt" "$tmp/out" || fail "--help does not list $opt"
done
for code in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17; do
    grep -qE "^  $code +[a-z]" "$tmp/out" || fail "--help does not explain exit status $code"
done

# Usage errors: nothing is done (no connection is opened: the URI would fail with 10).
bad=qemu+tcp://127.0.0.1:1/system
expect 2 "expected DOMAIN and DEST \\(a libvirt URI or a \\[host NAME\\]" vm7
expect 2 "Unknown option --offline" --offline vm7 "$bad"
expect 2 "--postcopy-after needs --postcopy" --postcopy-after 5 vm7 "$bad"
expect 2 "--timeout-postcopy needs --postcopy" --timeout 30 --timeout-postcopy vm7 "$bad"
expect 2 "--postcopy and --parallel exclude each other" --postcopy --parallel 4 vm7 "$bad"
expect 2 "--timeout-abort needs --timeout" --timeout-abort vm7 "$bad"
expect 2 "exclude each other" --timeout 9 --timeout-abort --timeout-suspend vm7 "$bad"
expect 2 "--parallel must be between 1 and 255" --parallel 0 vm7 "$bad"
expect 2 "--parallel must be between 1 and 255" --parallel 256 vm7 "$bad"
expect 2 "--bandwidth must be between" --bandwidth -1 vm7 "$bad"
expect 2 "--timeout must be between 1 and 86400" --timeout 0 vm7 "$bad"
expect 2 "--plug-attempts must be between 1 and 100, not 0" --plug-attempts 0 vm7 "$bad"
expect 2 "--postcopy-after \\(60 s\\) must come before --timeout \\(30 s\\)" \
    --postcopy --postcopy-after 60 --timeout 30 vm7 "$bad"
expect 2 "--recover takes at most one DOMAIN" --recover a b
expect 2 "--dry-run and --recover exclude each other" --dry-run --recover
expect 2 "--dry-run and --recover exclude each other" --dry-run --recover vm7
expect 2 "--quiet and --verbose exclude each other" --quiet --verbose vm7 "$bad"
expect 2 "--hotmigd 'http://b:1' is not an https:// URL" --hotmigd http://b:1 vm7 "$bad"
expect 2 "--migrateuri 'ftp://b:1': libvirt takes tcp://HOST\[:PORT\]" --migrateuri ftp://b:1 vm7 "$bad"
expect 2 "--postcopy and --no-postcopy exclude each other" --postcopy --no-postcopy vm7 "$bad"
expect 2 "--persistent and --no-persistent exclude each other" --persistent --no-persistent \
    vm7 "$bad"
expect 2 "hotmigd.*'not a uri' listens: not a URI" vm7 "not a uri"

# Configuration.
expect 0 "^\\[migrate\\]$" config sample
"$mv" config sample >"$tmp/sample.conf"
cmp -s "$tmp/sample.conf" "$src/etc/hotmig.conf.sample" ||
    fail "etc/hotmig.conf.sample differs from 'migrate-vm config sample': regenerate it"
expect 0 "prepare-timeout = 30 +# default" config check --skip-files "$tmp/sample.conf"
# Without --skip-files the certificates the file names (here: the defaults) must be readable;
# every missing one is reported (this machine has no libvirt PKI at the default paths).
if [ ! -e /etc/pki/libvirt/clientcert.pem ] && [ ! -e /etc/pki/CA/cacert.pem ]; then
    expect 4 "\[migrate\] client-cert \(default\): cannot read '/etc/pki/libvirt/clientcert.pem'" \
        config check "$tmp/sample.conf"
    grep -q "\[hotmigd\] ca-cert (default): cannot read '/etc/pki/CA/cacert.pem'" "$tmp/out" ||
        fail "config check stopped at the first missing file: $(cat "$tmp/out")"
fi
printf '[migrate]\n# comment\nprepare-timeout = 45\nparallel = 2\n' >"$tmp/good.conf"
expect 0 "prepare-timeout = 45 +# $tmp/good.conf:3" config check --skip-files "$tmp/good.conf"
# $HOTMIG_CONFIG names the file when none is given, for config check as for a migration.
HOTMIG_CONFIG=$tmp/good.conf expect 0 "prepare-timeout = 45 +# $tmp/good.conf:3" config check --skip-files
# Trailing comments are refused, naming the value meant; every problem of the file at once.
printf '[hotmigd]\nname = node01 # this host\nlisten = node01\n[host node01]\nuri = node01\n' >"$tmp/meaning.conf"
expect 4 "meaning.conf:2: \[hotmigd\] name: 'node01 # this host' ends in a comment" \
    config check --skip-files "$tmp/meaning.conf"
sed -i 's/ # this host//' "$tmp/meaning.conf"
expect 4 "meaning.conf:3: \[hotmigd\] listen: 'node01' is not an IP address" \
    config check --skip-files "$tmp/meaning.conf"
grep -q "meaning.conf:5: \[host node01\] uri: 'node01' is not a libvirt URI" "$tmp/out" ||
    fail "config check did not report every problem: $(cat "$tmp/out")"
expect 2 "usage: migrate-vm config check \[--skip-files\] \[FILE\]" config check --bogus
# A syntax error does not hide what the rest means (issue 32): both in one report, each line
# of it with the program's name.
printf '[migrate]\nprepare-timeout = soon\nconnect = node02\n' >"$tmp/both.conf"
expect 4 "^migrate-vm: $tmp/both.conf:2: \[migrate\] prepare-timeout: 'soon'" \
    config check --skip-files "$tmp/both.conf"
grep -q "^migrate-vm: $tmp/both.conf:3: \[migrate\] connect: 'node02' is not a libvirt URI" "$tmp/out" ||
    fail "a syntax error hid the meaning checks: $(cat "$tmp/out")"
# listen '*' is every address and passes; loopback while other hosts are named is a warning
# (exit 0), as is an own URL that disagrees with listen.
printf '[hotmigd]\nlisten = *\nname = a\n[host a]\nuri = qemu+tls://a.example.org/system\n[host b]\nuri = qemu+tls://b.example.org/system\n' >"$tmp/star.conf"
expect 0 "^\[hotmigd\] listen = \*" config check --skip-files "$tmp/star.conf"
grep -q "warning" "$tmp/out" && fail "listen '*' was warned about: $(cat "$tmp/out")"
printf 'identity = b.example.org\n' >>"$tmp/star.conf"
expect 0 "^\[host b\] uri = qemu\+tls://b.example.org/system, identity = b.example.org  # $tmp/star.conf:6" \
    config check --skip-files "$tmp/star.conf"
sed -i '/^listen = /d' "$tmp/star.conf"
expect 0 "^migrate-vm: warning: $tmp/star.conf: \[hotmigd\] listen \(default\): hotmigd listens on 127.0.0.1, loopback only" \
    config check --skip-files "$tmp/star.conf"
printf '[hotmigd]\nname = a\nlisten = 10.0.0.2\n[host a]\nuri = qemu+tls://10.0.0.1/system\n[host b]\nuri = qemu+tls://10.0.0.2/system\n' >"$tmp/other.conf"
expect 0 "^migrate-vm: warning: $tmp/other.conf:3: \[hotmigd\] listen: hotmigd listens on 10.0.0.2, but the other hosts reach this host 'a' at 10.0.0.1" \
    config check --skip-files "$tmp/other.conf"
printf '[migrate]\n\nunplug-timeout = soon\n' >"$tmp/bad.conf"
expect 4 "$tmp/bad.conf:3: \\[migrate\\] unplug-timeout: 'soon' is not a whole number" \
    config check "$tmp/bad.conf"
expect 4 "$tmp/bad.conf:3: \\[migrate\\] unplug-timeout" --config "$tmp/bad.conf" vm7 "$bad"
# Every problem of the file on a line of its own, each naming the program.
printf '[migrate]\nunplug-timeout = soon\nresume-timeout = never\n' >"$tmp/two.conf"
expect 4 "^migrate-vm: $tmp/two.conf:3: \\[migrate\\] resume-timeout" --config "$tmp/two.conf" vm7 "$bad"
grep -q "^migrate-vm: $tmp/two.conf:2: \\[migrate\\] unplug-timeout" "$tmp/out" ||
    fail "a problem of a bad file lacks the program's name: $(cat "$tmp/out")"
expect 4 "Cannot open '$tmp/missing.conf'" --config "$tmp/missing.conf" vm7 "$bad"
expect 4 "Cannot open '$tmp/missing.conf'" config check "$tmp/missing.conf"
printf '[migrate]\npostcopy-after = 10\n' >"$tmp/combo.conf"
expect 4 "^migrate-vm: postcopy-after = 10 \\($tmp/combo.conf:2\\) needs --postcopy" \
    config check "$tmp/combo.conf"
# The configuration supplies values, the command line overrides them; a clash names the
# configuration's line.
printf '[migrate]\nparallel = 4\n' >"$tmp/par.conf"
expect 2 "--postcopy and parallel = 4 \\($tmp/par.conf:2\\) exclude each other" \
    --config "$tmp/par.conf" --postcopy vm7 "$bad"

# --no-X turns off what the configuration turns on. --dry-run prints what libvirt would be
# asked first (its 'options' line), before any host is asked.
printf '[migrate]\npersistent = true\nundefinesource = true\nauto-converge = true\npostcopy = true\npostcopy-after = 20\n' \
    >"$tmp/on.conf"
# options_line EXPECTED ARGS...: the dry run's options line is exactly EXPECTED.
options_line() {
    local want=$1 got
    shift
    "$mv" --dry-run --connect "test:///nonexistent-$$" "$@" vm7 "test:///nonexistent-$$" \
        >"$tmp/opt.out" 2>&1
    got=$(sed -n 's/^PASS  options  *libvirt will be asked: //p' "$tmp/opt.out")
    [ "$got" = "$want" ] || fail "--dry-run $*: options '$got', expected '$want': $(cat "$tmp/opt.out")"
}
options_line "live, p2p"
options_line "live, p2p, persistent, undefinesource, auto-converge, postcopy, postcopy-after 20 s" \
    --config "$tmp/on.conf"
options_line "live, p2p, undefinesource, auto-converge, postcopy, postcopy-after 20 s" \
    --config "$tmp/on.conf" --no-persistent
options_line "live, p2p, persistent, auto-converge, postcopy, postcopy-after 20 s" \
    --config "$tmp/on.conf" --no-undefinesource
options_line "live, p2p, persistent, undefinesource, postcopy, postcopy-after 20 s" \
    --config "$tmp/on.conf" --no-auto-converge
# --no-postcopy drops the configuration's postcopy-after with it; then --parallel is allowed.
options_line "live, p2p, persistent, undefinesource, parallel 2, auto-converge" \
    --config "$tmp/on.conf" --no-postcopy --parallel 2
options_line "live, p2p" --config "$tmp/on.conf" --no-persistent --no-undefinesource \
    --no-auto-converge --no-postcopy
options_line "live, p2p, migrateuri tcp://10.0.0.2:49152, bandwidth 10 MiB/s, parallel 2, timeout 30 s then abort" \
    --migrateuri tcp://10.0.0.2:49152 --bandwidth 10 --parallel 2 --timeout 30 --timeout-abort
# virsh's spellings: --parallel-connections N, --postcopy-after-precopy, --tls.
options_line "live, p2p, parallel 3, tls" --parallel-connections 3 --tls
options_line "live, p2p, parallel 3" --parallel 3 --parallel-connections 3
options_line "live, p2p, postcopy, postcopy-after-precopy" --postcopy --postcopy-after-precopy
expect 2 "--parallel 2 and --parallel-connections 3 disagree" --parallel 2 --parallel-connections 3 vm7 "$bad"
expect 2 "--parallel-connections must be between 1 and 255" --parallel-connections 0 vm7 "$bad"
expect 2 "--postcopy-after-precopy needs --postcopy" --postcopy-after-precopy vm7 "$bad"
expect 2 "--postcopy-after-precopy and --postcopy-after exclude each other" \
    --postcopy --postcopy-after 5 --postcopy-after-precopy vm7 "$bad"
expect 2 "--postcopy and --parallel exclude each other" --postcopy --parallel-connections 2 vm7 "$bad"
expect 2 "postcopy = true \\($tmp/on.conf:5\\) and --parallel exclude each other" \
    --config "$tmp/on.conf" --parallel 2 vm7 "$bad"
expect 2 "--postcopy-after needs --postcopy \\(or postcopy = true\\), which --no-postcopy turns off" \
    --config "$tmp/on.conf" --no-postcopy --postcopy-after 5 vm7 "$bad"
printf '[migrate]\npostcopy = true\ntimeout = 60\ntimeout-action = postcopy\n' >"$tmp/tpc.conf"
expect 0 "timeout-action = postcopy" config check --skip-files "$tmp/tpc.conf"
expect 2 "timeout-action = postcopy \\($tmp/tpc.conf:4\\) needs --postcopy.*which --no-postcopy turns off: give --timeout-suspend or --timeout-abort" \
    --config "$tmp/tpc.conf" --no-postcopy vm7 "$bad"
options_line "live, p2p, timeout 60 s then abort" --config "$tmp/tpc.conf" --no-postcopy --timeout-abort
printf '[migrate]\nplug-attempts = 0\n' >"$tmp/zero.conf"
expect 4 "zero.conf:2: \\[migrate\\] plug-attempts" --config "$tmp/zero.conf" vm7 "$bad"
expect 2 "usage: migrate-vm config check" config frobnicate

# A connection that cannot be opened: the connect phase fails, exit 10, nothing changed.
expect 10 "connect" --quiet --connect "test:///nonexistent-$$" vm7 "test:///nonexistent-$$"
"$mv" --quiet --json --connect "test:///nonexistent-$$" vm7 "test:///nonexistent-$$" \
    >"$tmp/fail.json" 2>/dev/null
grep -q '"failed_phase" *: *"connect"' "$tmp/fail.json" || fail "--json lacks failed_phase: $(cat "$tmp/fail.json")"
# --dry-run: one line per check, exit 8 when one fails; the hotmigd URL comes from the
# [host NAME] group of the destination (the name stands for its URI).
printf '[host b]\nuri = test:///nonexistent-%s\nhotmigd = https://127.0.0.1:9\n' $$ >"$tmp/hosts.conf"
"$mv" --config "$tmp/hosts.conf" --dry-run --connect "test:///nonexistent-$$" vm7 b \
    >"$tmp/dry.out" 2>&1 && fail "--dry-run passed against nonexistent hosts"
[[ $? -eq 8 ]] || fail "--dry-run exited $?, expected 8: $(cat "$tmp/dry.out")"
grep -qE "^FAIL +source +Cannot connect to source host 'test:///nonexistent-$$'" "$tmp/dry.out" ||
    fail "--dry-run did not report the source: $(cat "$tmp/dry.out")"
# The source too may be named by its [host NAME] group.
printf '[host a]\nuri = test:///nonexistent-a%s\n' $$ >>"$tmp/hosts.conf"
"$mv" --config "$tmp/hosts.conf" --dry-run --connect a vm7 b >"$tmp/dry-a.out" 2>&1
grep -qE "^FAIL +source +Cannot connect to source host 'test:///nonexistent-a$$'" "$tmp/dry-a.out" ||
    fail "--connect a did not take [host a]'s uri: $(cat "$tmp/dry-a.out")"
grep -qE "^SKIP +hotmigd +the source host failed \(the destination's is https://127.0.0.1:9\)" "$tmp/dry.out" ||
    fail "--dry-run did not name the hotmigd of [host b]: $(cat "$tmp/dry.out")"
# The source failed: every check of the destination is shown, skipped, none asked.
for check in domain destination agent vfs migration-port files target-vf cpu; do
    grep -qE "^SKIP +$check +the source host failed" "$tmp/dry.out" ||
        fail "--dry-run did not skip '$check' after the source failed: $(cat "$tmp/dry.out")"
done
[ "$(grep -c '^FAIL' "$tmp/dry.out")" = 1 ] || fail "--dry-run failed more than the source: $(cat "$tmp/dry.out")"

# The subcommands that ask hotmigd: bad usage is 2 before any socket; no daemon is 1, naming
# the socket; --socket beats the configuration's [hotmigd] socket.
nosock=$tmp/no-hotmigd.sock
expect 2 "usage: migrate-vm drain HOST" drain
expect 2 "--deadline must be" drain A --deadline -5
expect 2 "usage: migrate-vm status" status a b
expect 2 "usage: migrate-vm run PLAN_FILE" run
expect 2 "Cannot open 'nothere.json'" run nothere.json
expect 1 "Cannot reach hotmigd at '$nosock'" drain A --socket "$nosock"
expect 1 "Cannot reach hotmigd at '$nosock'" status --socket "$nosock"
expect 1 "Cannot reach hotmigd at '$nosock'" plan consolidate --socket "$nosock"
printf '[hotmigd]\nsocket = %s\n' "$tmp/conf.sock" >"$tmp/sock.conf"
expect 1 "Cannot reach hotmigd at '$tmp/conf.sock'" status --config "$tmp/sock.conf"
HOTMIG_CONFIG=$tmp/sock.conf expect 1 "Cannot reach hotmigd at '$tmp/conf.sock'" status
expect 4 "zero.conf:2: \\[migrate\\] plug-attempts" status --config "$tmp/zero.conf"
expect 2 "not with --snapshot" plan consolidate --snapshot x.json --socket "$nosock"
# Negative limits are refused, naming the value (-1 is not "unset").
expect 2 "--tolerance must be between 0 and 1, not -1" plan balance --snapshot x.json --tolerance=-1
expect 2 "--max-moves must be >= 0, not -1" plan balance --snapshot x.json --max-moves=-1
expect 2 "--min-stay must be >= 0 seconds, not -1" plan consolidate --snapshot x.json --min-stay=-1
expect 2 "--bandwidth must be > 0 MiB/s, not -1" plan consolidate --snapshot x.json --bandwidth=-1
# plan consolidate --snapshot: bad snapshots are 2 and no plan within --max-migrations is 1,
# each naming the entries, with nothing on stdout; --host-value trades hosts for migrations
# (default: the configuration's [scheduler] host-value); --json carries the front.
# expect_plan RC PATTERN ARGS...: as expect, and stdout stays empty unless RC is 0.
expect_plan() {
    local want=$1 pattern=$2 rc
    shift 2
    "$mv" plan consolidate "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "plan consolidate $* exited $rc, expected $want: $(cat "$tmp/out" "$tmp/err")"
    if [ "$want" -ne 0 ]; then
        [ ! -s "$tmp/out" ] || fail "plan consolidate $*: printed a plan although it failed: $(cat "$tmp/out")"
        grep -qE -- "$pattern" "$tmp/err" || fail "plan consolidate $*: error lacks '$pattern': $(cat "$tmp/err")"
    else
        grep -qE -- "$pattern" "$tmp/out" || fail "plan consolidate $*: output lacks '$pattern': $(cat "$tmp/out")"
    fi
}
hosts='{"name":"a","cpus":8,"memory_mib":10240},{"name":"b","cpus":8,"memory_mib":10240},{"name":"c","cpus":8,"memory_mib":10240}'
vm() { printf '{"name":"%s","host":"%s","vcpus":1,"memory_mib":%s,"cpu_util":0.1}' "$1" "$2" "$3"; }
printf '{"hosts":[%s],"vms":[%s,%s,%s,%s,%s]}\n' "$hosts" "$(vm a1 a 4096)" "$(vm a2 a 4096)" \
    "$(vm b1 b 4096)" "$(vm b2 b 4096)" "$(vm c1 c 1024)" >"$tmp/ok.json"
expect_plan 0 '"hosts_used":3,' --snapshot "$tmp/ok.json" --json --host-value 0
expect_plan 0 '"hosts_used":2,.*"migration_bound":1,"host_value":2,.*"front":\[\{"hosts":2,"migrations":1,"moved_mib":1024,"migration_bound":1\},\{"hosts":3,"migrations":0,"moved_mib":0,"migration_bound":0\}\],"chosen":0' \
    --snapshot "$tmp/ok.json" --json --no-timing --host-value 2
# A tie in cost (2 hosts + 1 migration = 3 hosts + 0 at host value 1): less memory moved wins.
expect_plan 0 '"hosts_used":3,.*"chosen":1' --snapshot "$tmp/ok.json" --json --host-value 1
printf '[scheduler]\nhost-value = 0\n' >"$tmp/hv0.conf"
expect_plan 0 '"hosts_used":3,.*"host_value":0,' --snapshot "$tmp/ok.json" --json --config "$tmp/hv0.conf"
expect_plan 0 'a host is worth 64 migrations' --snapshot "$tmp/ok.json" --config "$tmp/sock.conf"
expect_plan 2 "--max-migrations must be at least 1, not 0" --snapshot "$tmp/ok.json" --max-migrations 0
expect_plan 2 "--host-value must be between 0 and 1000000 migrations, not -4" --snapshot "$tmp/ok.json" --host-value=-4
expect 2 "--host-value and --max-migrations are for consolidate" plan drain a --snapshot "$tmp/ok.json" --host-value 3
printf '{"hosts":[%s],"vms":[%s,%s,%s]}\n' "$hosts" "$(vm a1 a 8192)" "$(vm a2 a 4096)" \
    "$(vm b1 b 4096)" >"$tmp/over.json"
expect_plan 2 "1 host is already over capacity, nothing planned: host 'a' memory \(MiB\) 12288 > 10240" \
    --snapshot "$tmp/over.json"
printf '{"hosts":[%s],"vms":[%s,%s]}\n' "$hosts" "$(vm a1 a 1024)" "$(vm a1 b 1024)" >"$tmp/dup.json"
expect_plan 2 "vms\[1\]: VM 'a1' is listed twice" --snapshot "$tmp/dup.json"
printf '{"hosts":[%s],"vms":[%s]}\n' "$hosts" "$(vm a1 zz 1024)" >"$tmp/unknown.json"
expect_plan 2 "vms\[0\]: VM 'a1': unknown host 'zz'" --snapshot "$tmp/unknown.json"
printf '{"hosts":[%s,{"name":"e","cpus":8,"memory_mib":10240,"state":"evacuating"}],"vms":[%s,%s,%s]}\n' \
    "$hosts" "$(vm e1 e 1024)" "$(vm e2 e 1024)" "$(vm e3 e 1024)" >"$tmp/evac.json"
expect_plan 1 "no consolidation within 2 migrations: 3 VMs must leave evacuating hosts: 'e1' on 'e', 'e2' on 'e', 'e3' on 'e'" \
    --snapshot "$tmp/evac.json" --max-migrations 2
expect_plan 0 '"hosts_used":1,' --snapshot "$tmp/evac.json" --max-migrations 3 --json
echo "cli-test: ok"
