#!/bin/bash
# Guarantee: errandctl revoke ends the revoked grant's open connections before it returns (with errand-agent and without it), and a duration grant's end ends them when it comes: the backstop passes no more of their segments in either direction (counted as flowEnded), while a connection the policy admitted lives on.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
# flow.test: a host that sends "tick N" every 100 ms on a held connection and
# logs each "up N" the session sends it.
FLOW_ADDR=198.18.1.20
ip -n "$W-wan" addr add $FLOW_ADDR/32 dev "$W_HOSTS_IF"
world_dns "$(dns_test_zone)" "flow.test A $FLOW_ADDR 60" || exit 1
TICK_LOG=$W_DIR/tick.log
: >"$TICK_LOG"
_start_ready wan "$W_DIR/tick.out" "$PROBE" tick-serve --log "$TICK_LOG" $FLOW_ADDR:443 || exit 1
W_CONFIG=$(dns_config flows)
agent_start || exit 1
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# what passed so far: lines the session got, lines the host got
down() { grep -ac '^got tick' "$BG_OUT"; }
up() { grep -ac '^recv up' "$TICK_LOG"; }
# Resolves flow.test until it is granted, then holds one connection to it.
talk='while ! '"$PROBE"' dns $NS flow.test 2>&1 | grep -q "^answer NOERROR addrs='"$FLOW_ADDR"'"; do sleep 0.1; done
exec '"$PROBE"' tcp-talk '"$FLOW_ADDR"' 443 40'

# always, then revoke
errand_start -- sh -c "$(session_ns_sh)$talk" || exit 1
ctl grant "$SESSION" flow.test always >/dev/null
bg_wait '^got tick 5$' 10
d0=$(down) u0=$(up)
sleep 1
assert_le 5 $(($(down) - d0)) "granted always: the held connection carries the host's data to the session"
assert_le 5 $(($(up) - u0)) "... and the session's data to the host"
assert_eq "$(ctl revoke "$SESSION" flow.test --json | jq_py "d['result']")" revoked "revoke"
# what was already on the wire when revoke returned may still land
sleep 0.3
d1=$(down) u1=$(up)
sleep 2
assert_eq "$(down)" "$d1" "after revoke returns, nothing more reaches the session on the held connection"
assert_eq "$(up)" "$u1" "... and nothing more of the session's reaches the host"
assert_le 1 "$(ctl show "$SESSION" --json | jq_py "d['counters']['flowEnded']")" "... the backstop dropped them as an ended flow's"
errand_stop

# a duration grant: its end ends the connection too
: >"$TICK_LOG"
errand_start -- sh -c "$(session_ns_sh)$talk" || exit 1
ctl grant "$SESSION" flow.test 4s >/dev/null
granted=$(date +%s%N)
bg_wait '^got tick 5$' 10
d0=$(down) u0=$(up)
sleep 0.5
assert_le 3 $(($(down) - d0)) "granted 4s: the held connection carries data"
assert_le 3 $(($(up) - u0)) "... both ways"
left=$(((4300000000 - ($(date +%s%N) - granted)) / 1000000))
[ "$left" -gt 0 ] && sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
d1=$(down) u1=$(up)
sleep 2
assert_eq "$(down)" "$d1" "once the 4 s are over, nothing more reaches the session on the held connection"
assert_eq "$(up)" "$u1" "... and nothing more of the session's reaches the host"
errand_stop

# the policy's own host: revoking a grant leaves its connection alone
: >"$TICK_LOG"
errand_start --egress flow.test -- sh -c "$(session_ns_sh)$talk" || exit 1
ctl grant "$SESSION" api.test always >/dev/null
bg_wait '^got tick 5$' 10
ctl revoke "$SESSION" api.test >/dev/null
sleep 0.3
d1=$(down) u1=$(up)
sleep 1
assert_le 5 $(($(down) - d1)) "a connection the policy admitted lives on past another grant's revoke"
assert_le 5 $(($(up) - u1)) "... both ways"
errand_stop

# without errand-agent: the session's agent is errandctl run's own, and
# errandctl revoke ends the connections itself, through the session's pins
agent_stop
: >"$TICK_LOG"
errand_start -- sh -c "$(session_ns_sh)$talk" || exit 1
ctl grant "$SESSION" flow.test always >/dev/null
bg_wait '^got tick 5$' 10
ctl revoke "$SESSION" flow.test >/dev/null
sleep 0.3
d1=$(down) u1=$(up)
sleep 2
assert_le 5 "$d1" "without the agent: the held connection carried data before the revoke"
assert_eq "$(down)" "$d1" "... and after errandctl revoke returns, nothing more reaches the session"
assert_eq "$(up)" "$u1" "... nor the host"
errand_stop
world_finish
