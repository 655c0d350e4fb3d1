#!/bin/bash
# Guarantee: a restarted errand-agent lists this namespace's addresses once for all the sessions it adopts, not once or more for each: with a thousand sessions running, a listing a session made the restart O(n^2).
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
command -v strace >/dev/null || skip "no strace"
world_up
world_dns || exit 1
# No networks prepared ahead: each would list the addresses for its own pick.
W_CONFIG=$(dns_config adopt "" '"pool": 0')
N=4
agent_start || exit 1
ids=() bgs=() outs=() errs=()
for _ in $(seq 1 $N); do
	errand_start --egress api.test || exit 1
	ids+=("$SESSION") bgs+=("$BG_PID") outs+=("$BG_OUT") errs+=("$BG_ERR")
done
agent_kill9

# The next agent under strace: every address listing is an RTM_GETADDR dump
# it sends, one for each family.
TRACE=$W_DIR/agent.trace
: >"$W_DIR/agent2.log"
(exec nsenter --net="/run/netns/$W-host" strace -f -qq -e signal=none -e trace=sendto,sendmsg \
	-o "$TRACE" "$ROOT/build/bin/errand-agent" --foreground --config "$W_CONFIG" \
	</dev/null >>"$W_DIR/agent2.log" 2>&1) &
tracer=$!
W_PIDS+=("$tracer")
for _ in $(seq 1 300); do
	grep -q "session(s) adopted" "$W_DIR/agent2.log" && break
	sleep 0.1
done
sed 's/^/# agent: /' "$W_DIR/agent2.log"
assert_match "$(cat "$W_DIR/agent2.log")" "listening on .*, $N session\(s\) adopted" \
	"the restarted agent adopted the $N sessions"
# Its stop (strace's child) ends the trace; the sessions run on.
agent=$(pgrep -P "$tracer" -x errand-agent)
trace "the restarted agent: pid $agent"
kill -TERM "$agent"
wait "$tracer" 2>/dev/null
dumps=$(grep -c 'nlmsg_type=RTM_GETADDR' "$TRACE")
trace "RTM_GETADDR dumps: $dumps"
# One listing: an IPv4 dump and an IPv6 one (a dump the kernel says was
# interrupted is asked for again: at most one listing more).
assert_le "$dumps" 4 "the agent listed this namespace's addresses once for the $N adopted sessions"

for i in $(seq 0 $((N - 1))); do
	SESSION=${ids[$i]} BG_PID=${bgs[$i]} BG_OUT=${outs[$i]} BG_ERR=${errs[$i]}
	errand_stop >/dev/null
done
world_finish
