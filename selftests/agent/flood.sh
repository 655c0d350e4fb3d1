#!/bin/bash
# Guarantee: one session's flood of refused connects never wedges the agent: refusal events are rate-limited in the kernel per session (what is held back is counted, shown by errandctl show and observe), and meanwhile another session's DNS is answered within its resolver timeout, and errandctl sessions, show, grant, revoke and stop return promptly and take effect.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config flood)
agent_start || exit 1
ctl() { in_host timeout -k 2 30 "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# runs "$@", prints how long it took in ms (its output goes to $W_DIR/timed.out)
timed() {
	local t0
	t0=$(now_ms)
	"$@" >"$W_DIR/timed.out" 2>&1
	echo $(($(now_ms) - t0))
}
FLOOD_S=10

# The quiet session: it asks for api.test every 0.2 s, and for other.test and
# $HOST_B:443 (opened by a grant below), printing each query's time.
errand_start --egress api.test -- sh -c "$(session_ns_sh)"'P='"$PROBE"'
while :; do
	t0=$(date +%s%N)
	r=$($P dns $NS api.test --timeout 2 2>&1 | tail -n 1)
	echo "q=$((($(date +%s%N) - t0) / 1000000)) $r"
	$P dns $NS other.test --timeout 2 >/dev/null 2>&1
	echo "b=$($P tcp '"$HOST_B"' 443 --timeout 1 2>&1 | tail -n 1)"
	sleep 0.2
done' || exit 1
Q_SESSION=$SESSION Q_OUT=$BG_OUT Q_PID=$BG_PID
bg_wait '^q=' 10 || { world_finish; exit 1; }
assert_match "$(grep '^q=' "$Q_OUT" | tail -n 1)" "^q=[0-9]+ answer NOERROR addrs=$HOST_A " "the quiet session resolves api.test"
assert_match "$(ctl grant "$Q_SESSION" other.test always 2>&1)" "^granted" "grant the quiet session other.test"
mark_q=$(wc -l <"$Q_OUT")

# The flooding session: one process of refused connects to the private host
# (5000 ports, so targets are new to the agent), three more a second later.
observe_start --json
OBS_JSON_PID=$OBSERVE_PID OBS_JSON_OUT=$OBSERVE_OUT
errand_start --egress open -- sh -c 'P='"$PROBE"'
echo flooding
$P flood '"$HOST_PRIV"' 1000 '"$FLOOD_S"' 5000 &
sleep 1
for i in 1 2 3; do $P flood '"$HOST_PRIV"' 1000 '"$((FLOOD_S - 1))"' 5000 & done
wait
echo flood-done
sleep 60' || exit 1
F_SESSION=$SESSION F_PID=$BG_PID F_OUT=$BG_OUT
observe_start "$F_SESSION"
OBS_TEXT_PID=$OBSERVE_PID OBS_TEXT_OUT=$OBSERVE_OUT
OBSERVE_PID=$OBS_JSON_PID OBSERVE_OUT=$OBS_JSON_OUT
bg_wait '^flooding' 10
t_flood=$(now_ms)
sleep 2.5
trace "the flood is at full strength (4 processes); control commands now"

ms=$(timed ctl sessions)
assert_le "$ms" 2000 "errandctl sessions during the flood returns within 2 s (took $ms ms)"
assert_contains "$(cat "$W_DIR/timed.out")" "$F_SESSION" "... and lists the flooding session"
ms=$(timed ctl show "$F_SESSION" --json)
assert_le "$ms" 2000 "errandctl show during the flood returns within 2 s (took $ms ms)"
sup=$(jq_py "d['counters'].get('eventsSuppressed', 0)" <"$W_DIR/timed.out")
assert_match "$sup" '^[1-9][0-9]*$' "show --json counts the events the kernel held back (eventsSuppressed $sup)"
assert_match "$(ctl show "$F_SESSION")" "eventsSuppressed +[1-9]" "... and so does show"
ref=$(jq_py "d['counters']['refused']" <"$W_DIR/timed.out")
assert_match "$ref" '^[0-9]{5,}$' "the kernel refused tens of thousands of connects ($ref)"

# revoke: the quiet session's $HOST_B:443 closes at once.
assert_match "$(grep '^b=' "$Q_OUT" | tail -n 1)" "^b=ok hello $HOST_B:443" "the quiet session reaches other.test's $HOST_B:443 through its grant"
mark_b=$(wc -l <"$Q_OUT")
t0=$(now_ms)
ms=$(timed ctl revoke "$Q_SESSION" other.test)
assert_le "$ms" 2000 "errandctl revoke during the flood returns within 2 s (took $ms ms)"
n=0
while ! tail -n +"$((mark_b + 1))" "$Q_OUT" | grep -q '^b=EPERM' && [ $n -lt 100 ]; do
	sleep 0.05
	n=$((n + 1))
done
ms=$(($(now_ms) - t0))
assert_le "$ms" 3000 "... and $HOST_B:443 is refused to the quiet session within 3 s of it (took $ms ms)"

# stop: the flooding session ends at once, its floods still running.
ms=$(timed ctl stop "$F_SESSION")
assert_le "$ms" 2000 "errandctl stop during the flood returns within 2 s (took $ms ms)"
n=0
while kill -0 "$F_PID" 2>/dev/null && [ $n -lt 60 ]; do
	sleep 0.05
	n=$((n + 1))
done
assert_le "$(($(now_ms) - t_flood))" $(((FLOOD_S - 1) * 1000)) "the flooding session ended before its flood did"
assert_eq "$(grep -c '^flood-done' "$F_OUT")" 0 "... its floods never finished"
wait "$F_PID" 2>/dev/null
sleep 0.5

# The quiet session's DNS through it all: every query answered within its
# timeout (2 s), none lost.
tail -n +"$((mark_q + 1))" "$Q_OUT" | grep '^q=' >"$W_DIR/q.lines"
trace "quiet session's queries during the flood: $(wc -l <"$W_DIR/q.lines"), slowest $(sed 's/^q=\([0-9]*\).*/\1/' "$W_DIR/q.lines" | sort -n | tail -n 1) ms"
assert_le 5 "$(wc -l <"$W_DIR/q.lines")" "the quiet session kept asking during the flood"
assert_eq "$(grep -vc "^q=[0-9]* answer NOERROR addrs=$HOST_A " "$W_DIR/q.lines")" 0 "every one of its queries was answered"
assert_le "$(sed 's/^q=\([0-9]*\).*/\1/' "$W_DIR/q.lines" | sort -n | tail -n 1)" 2000 "... each within 2 s"

observe_stop
assert_match "$OBSERVE_TEXT" "\"event\":\"suppressed\",\"session\":\"$F_SESSION\",\"count\":[1-9]" "observe --json reports what the bucket held back"
assert_le "$(grep -c '"event":"refused"' "$OBSERVE_OUT")" 2000 "observe got a bounded number of refusal events ($(grep -c '"event":"refused"' "$OBSERVE_OUT"))"
OBSERVE_PID=$OBS_TEXT_PID OBSERVE_OUT=$OBS_TEXT_OUT
observe_stop
assert_match "$OBSERVE_TEXT" "errand: session=$F_SESSION suppressed count=[1-9][0-9]* total=" "observe prints a suppressed line"

errand_stop
agent_stop
world_finish
