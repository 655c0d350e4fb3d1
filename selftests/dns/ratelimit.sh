#!/bin/bash
# Guarantee: the log shows each target at most once per 30 s in a session (the same refused address, port and protocol; the same denied name), so a session cannot flood it; errandctl observe shows every event live, line or JSON, in the same format.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

# Three times the same refusal, three times the same denied name.
triple="$(session_ns_sh)$(probe_script \
	b1 "tcp $HOST_B 443" b2 "tcp $HOST_B 443" b3 "tcp $HOST_B 443" \
	b8080 "tcp $HOST_B 8080" \
	d1 'dns $NS other.test' d2 'dns $NS other.test --tcp' d3 'dns $NS OTHER.test' \
	e1 'dns $NS exfil1.test' e2 'dns $NS exfil2.test')"
errand_run --egress api.test -- sh -c "$triple"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result b1)$(result b2)$(result b3)" EPERMEPERMEPERM "$HOST_B:443 is refused three times"
assert_eq "$(event_count "proto=tcp addr=$HOST_B port=443 reason=not-allowed")" 1 "... and logged once"
assert_eq "$(event_count "proto=tcp addr=$HOST_B port=8080 reason=not-allowed")" 1 "another port is another target: logged"
for k in d1 d2 d3; do
	assert_match "$(result $k)" "^answer NXDOMAIN " "other.test ($k) is NXDOMAIN"
done
assert_eq "$(denial_count "name=other.test ")" 1 "other.test denied three times, logged once"
assert_eq "$(denial_count "name=exfil1.test ")$(denial_count "name=exfil2.test ")" 11 "distinct names are each logged"

# Another session is another log: its first refusal of the same target shows.
errand_run --egress api.test -- sh -c "$(session_ns_sh)$(probe_script b "tcp $HOST_B 443" d 'dns $NS other.test')"
assert_eq "$(event_count "addr=$HOST_B port=443 reason=not-allowed")" 1 "a new session logs its own refusal of $HOST_B:443"
assert_eq "$(denial_count "name=other.test ")" 1 "... and its own denied other.test"

# errandctl observe, lines and JSON, sees all three of each, live, while the
# session's own log still shows one.
errand_start --egress api.test -- sh -c "$(bg_wait_sh)$triple"'echo done=1; exec sleep 60' || { world_finish; exit 1; }
observe_start
OBS_TEXT_OUT=$OBSERVE_OUT
OBS_TEXT_PID=$OBSERVE_PID
observe_start "$SESSION" --json
OBS_JSON_OUT=$OBSERVE_OUT
OBS_JSON_PID=$OBSERVE_PID
sleep 1.5 # observe looks for new sessions every 0.5 s
bg_go || true
bg_wait '^done=1' 30 || true
sleep 1
OBSERVE_OUT=$OBS_TEXT_OUT OBSERVE_PID=$OBS_TEXT_PID observe_stop
text=$(cat "$OBS_TEXT_OUT")
OBSERVE_OUT=$OBS_JSON_OUT OBSERVE_PID=$OBS_JSON_PID observe_stop
json=$(cat "$OBS_JSON_OUT")
errand_stop
assert_eq "$(grep -c "^errand: session=$SESSION refused proto=tcp addr=$HOST_B port=443 reason=not-allowed hook=connect4$" <<<"$text")" 3 \
	"observe shows the three refusals of $HOST_B:443"
assert_eq "$(grep -c "^errand: session=$SESSION denied name=other.test type=A reason=not-allowed$" <<<"$text")" 3 \
	"observe shows the three denials of other.test"
assert_eq "$(grep -c "addr=$HOST_B port=8080 " <<<"$text")" 1 "observe shows the refusal of $HOST_B:8080"
assert_eq "$(grep -E -c '"event" *: *"refused".*"addr" *: *"'"$HOST_B"'".*"port" *: *443' <<<"$json")" 3 \
	"observe --json shows the three refusals as JSON objects"
assert_eq "$(grep -E -c '"event" *: *"denied".*"name" *: *"other\.test"' <<<"$json")" 3 \
	"observe --json shows the three denials as JSON objects"
assert_eq "$(grep -c -v '^{' <<<"$json")" 0 "observe --json prints only JSON objects"
assert_eq "$(event_count "addr=$HOST_B port=443 reason=not-allowed")" 1 "the session's log shows $HOST_B:443 once"
assert_eq "$(denial_count "name=other.test ")" 1 "... and other.test once"
assert_empty "$(leftovers)" "nothing left behind"

world_finish
