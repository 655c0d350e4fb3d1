#!/bin/bash
# Guarantee: errand-agent keeps serving sessions with more than 1024 descriptors open (a thousand sessions hold that many): it raises its own open-files limit to the hard limit, and libnftables (which waits with select(), limited to descriptors below 1024, and aborted the agent past it) runs in a child with only its pipe open.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config fds '"pool": 0')
# The agent inherits 1100 open descriptors, as if it held a thousand
# sessions' worth: every one it opens from then on is above 1024. Its soft
# limit starts at 1200, below what it needs; the hard one is higher.
ulimit -Sn 1200
ulimit -Hn 8192
fds=()
for _ in $(seq 1 1100); do
	exec {fd}</dev/null
	fds+=("$fd")
done
agent_start || { world_finish; exit 1; }
for fd in "${fds[@]}"; do
	exec {fd}<&-
done
assert_match "$(awk '/^Max open files/ { print $4 }' "/proc/$AGENT_PID/limits")" "^8192$" "the agent raised its open-files limit to the hard limit"
errand_run --pin "a.test=$HOST_A:443" --egress a.test:443 -- sh -c "$(probe_script pinned "tcp $HOST_A 443")"
assert_eq "$RUN_RC" 0 "a session starts with the agent's descriptors past 1024 (its NAT table made by libnftables)"
assert_eq "$(result pinned)" "ok hello $HOST_A:443" "... and reaches its pinned host through that NAT"
assert_eq "$(kill -0 "$AGENT_PID" 2>/dev/null && echo alive)" alive "the agent is alive after the session's end (its NAT table removed)"
agent_stop
assert_empty "$(leftovers)" "nothing left behind"
world_finish
