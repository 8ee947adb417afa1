#!/bin/bash
# Boots one lab guest (the lab must be up: hotmig-lab up), runs hm-agent-bench in it and prints
# its HMBENCH lines. ROUNDS (default 100) prepares per process count.
source "$(dirname "$0")/../e2e/lib.sh"
g=bench-agent
start_guest "$g" A bench-peer
"$lab" wait "$g" 'HMLAB booted' --timeout 180 >/dev/null || fail "$g did not boot"
out=$("$lab" exec "$g" "hm-agent-bench --agent /usr/bin/hotmig-agent --rounds ${ROUNDS:-100} 2>&1" \
    --timeout 1500) || { echo "$out" >&2; fail "hm-agent-bench failed"; }
echo "$out" | tr -d '\r' | grep '^HMBENCH' || fail "hm-agent-bench printed nothing"
