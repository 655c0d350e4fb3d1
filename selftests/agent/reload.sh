#!/bin/bash
# Guarantee: a configuration reload (errandctl reload, or SIGHUP) reaches sessions started after it, while running sessions keep the policy they started with, even across a restart of the agent (kill -9, or SIGTERM, which stops the agent alone); a configuration that does not load is refused and the agent keeps its own.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 150
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config reload "" "" '"allow": ["api.test"]')
cp "$W_CONFIG" "$W_DIR/first.json"
agent_start || exit 1
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
loop='while :; do
	echo "api=$('"$PROBE"' dns $NS api.test 2>&1 | tail -n 1)"
	echo "other=$('"$PROBE"' dns $NS other.test 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done'

errand_start -- sh -c "$(session_ns_sh)$loop" || exit 1
old=$SESSION old_pid=$BG_PID old_out=$BG_OUT
bg_rounds 1 10
assert_match "$(bg_result api)" "^answer NOERROR" "control: the first configuration allows api.test"
assert_match "$(bg_result other)" "^answer NXDOMAIN" "control: ... and not other.test"

# The file changes: other.test instead of api.test; reloaded.
sed 's/"allow": \["api.test"\]/"allow": ["other.test"]/' "$W_DIR/first.json" >"$W_CONFIG"
assert_eq "$(ctl reload)" "errand-agent reloaded its configuration" "errandctl reload"
bg_rounds 2 10
assert_match "$(bg_result api)" "^answer NOERROR" "the running session keeps its policy: api.test"
assert_match "$(bg_result other)" "^answer NXDOMAIN" "... and still not other.test"

errand_start -- sh -c "$(session_ns_sh)$loop" || exit 1
bg_rounds 1 10
assert_match "$(bg_result other)" "^answer NOERROR" "a session started after the reload has the new policy: other.test"
assert_match "$(bg_result api)" "^answer NXDOMAIN" "... and not api.test"
errand_stop

# Across a restart the running session still has its own.
agent_kill9
agent_start || exit 1
SESSION=$old BG_PID=$old_pid BG_OUT=$old_out BG_ERR=$old_out
bg_rounds 2 20
assert_match "$(bg_result api)" "^answer NOERROR" "re-adopted after a restart, the session keeps its policy: api.test"
assert_match "$(bg_result other)" "^answer NXDOMAIN" "... and not other.test"

# SIGTERM stops the agent alone: the session runs on and is adopted again.
agent_stop
assert_eq "$(kill -0 "$BG_PID" 2>/dev/null && echo alive)" alive "SIGTERM to the agent: errandctl run of the session still waits"
agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "stopping; 1 session\(s\) keep running" "the agent said it leaves the session running"
bg_rounds 2 20
assert_match "$(bg_result api)" "^answer NOERROR" "adopted again after SIGTERM and a start, with its own policy"

# SIGHUP, with a broken file: refused, the agent keeps the configuration it had.
echo '{"sandbox": {"egress": {"alow": []}}}' >"$W_CONFIG"
kill -HUP "$AGENT_PID"
sleep 0.5
assert_match "$(cat "$AGENT_LOG")" "did you mean sandbox.egress.allow" "a broken configuration on SIGHUP is refused in the log"
out=$(ctl reload 2>&1); rc=$?
assert_eq "$rc" 125 "errandctl reload of a broken configuration: exit 125"
assert_match "$out" "unknown key sandbox.egress.alow; did you mean sandbox.egress.allow" "... in one line naming the key"
assert_eq "$(kill -0 "$AGENT_PID" && echo alive)" alive "the agent is still running"
errand_stop
world_finish
