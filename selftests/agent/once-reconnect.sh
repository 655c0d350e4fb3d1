#!/bin/bash
# Guarantee: a once grant admits one connection, whatever the socket does afterwards: a socket that connected once under it, disconnected with connect(AF_UNSPEC) and connected again is refused (grant-spent) on every later connect.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config once)
agent_start || exit 1
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }

# The session waits for its grant, resolves api.test, then one socket
# connects, disconnects and reconnects five times; a second socket tries after.
errand_start -- sh -c "$(session_ns_sh)$(bg_wait_sh)"'
echo "dns=$('"$PROBE"' dns $NS api.test 2>&1 | tail -n 1)"
echo "re=$('"$PROBE"' tcp-reconnect '"$HOST_A"' 443 5 2>&1 | tail -n 1)"
echo "other=$('"$PROBE"' tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
echo done=1
sleep 60' || exit 1
assert_eq "$(ctl grant "$SESSION" api.test once 2>&1 | head -n 1 | grep -c .)" 1 "errandctl grant ID api.test once"
bg_go || exit 1
bg_wait '^done=1' 20
assert_match "$(bg_result dns)" "^answer NOERROR addrs=$HOST_A " "the once grant makes api.test resolve"
assert_eq "$(bg_result re)" "ok EPERM EPERM EPERM EPERM" \
	"one socket: the first connect is admitted, each reconnect after connect(AF_UNSPEC) is refused"
assert_eq "$(bg_result other)" EPERM "... and so is another socket"
assert_eq "$(grep -c "^accept $HOST_A:443 " "$W_DIR/wan-serve.log")" 1 "$HOST_A:443 saw exactly one connection"
errand_stop
agent_stop
assert_match "$(grep -c "refused proto=tcp addr=$HOST_A port=443 reason=grant-spent" "$AGENT_LOG")" '^[1-9]' \
	"the agent logged the reconnects as grant-spent"

world_finish
