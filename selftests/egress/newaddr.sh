#!/bin/bash
# Guarantee: an address the agent's namespace gains while a session runs is refused at once in that session and in every other running beside it, in the kernel (reason self, even inside treatAsPublic and in open mode) and in DNS answers (dropped, also from the responder's cache), with the embedded agent and with errand-agent alike; one gained while no agent ran is refused once the restarted agent adopts the session; one gained after a session's start is refused to the next session started (which may take the agent's last listing of its addresses and catches up from it).
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
# 198.18.7.7 and 198.18.7.9: public hosts in wan (inside treatAsPublic), until
# the agent's namespace takes them as its own, with a server of its own there.
world_dns "$(dns_test_zone)" "newself.test A 198.18.7.7 60" "newself2.test A 198.18.7.9 60" \
	"newself3.test A 198.18.7.11 60" || exit 1
W_CONFIG=$(dns_config newaddr)
for a in 198.18.7.7 198.18.7.9 198.18.7.11; do
	in_wan "$IP" addr add $a/32 dev $W_HOSTS_IF
done
world_serve wan "$W_DIR/wan7.log" 198.18.7.7:443 198.18.7.9:443 198.18.7.11:443 || exit 1

loop() {
	echo "$(session_ns_sh)"'P='"$PROBE"'
while :; do
	echo "conn=$($P tcp '"$1"' 443 2>&1 | tail -n 1)"
	echo "dns=$($P dns $NS '"$2"' 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done'
}

# newaddr ADDR NAME WHO [two]: a running open-mode session reaches ADDR (a
# public host) until the agent's namespace takes ADDR; then it is refused.
# With two, a second session runs beside it and learns it too (one address
# watch serves every session of an agent).
newaddr() {
	local addr=$1 name=$2 who=$3 two=${4:-} o_pid o_out o_err o_session
	if [ -n "$two" ]; then
		errand_start --egress open -- sh -c "$(loop "$addr" "$name")" || return 1
		o_pid=$BG_PID o_out=$BG_OUT o_err=$BG_ERR o_session=$SESSION
		bg_rounds 1 10
		assert_eq "$(bg_result conn)" "ok hello $addr:443" "$who: control: a second session reaches $addr:443 too"
	fi
	errand_start --egress open --egress "$name" -- sh -c "$(loop "$addr" "$name")" || return 1
	bg_rounds 1 10
	assert_eq "$(bg_result conn)" "ok hello $addr:443" "$who: control: $addr:443 is a public host the session reaches"
	assert_match "$(bg_result dns)" "^answer NOERROR addrs=$addr ttl=" "$who: control: $name is answered with $addr"
	in_host "$IP" addr add "$addr/32" dev lo
	world_serve host "$W_DIR/host$addr.log" "$addr:443" || return 1
	bg_rounds 3 10
	assert_eq "$(bg_result conn)" EPERM "$who: once the agent's namespace has $addr, the session's connect to it is refused"
	assert_match "$(bg_result dns)" "^answer NOERROR addrs= ttl=- " "$who: ... and $name's answer no longer gives it (NODATA)"
	assert_empty "$(cat "$W_DIR/host$addr.log")" "$who: the host's own server at $addr:443 saw no connection"
	errand_stop
	if [ -n "$two" ]; then
		local b_session=$SESSION b_out=$RUN_OUT b_err=$RUN_ERR
		BG_PID=$o_pid BG_OUT=$o_out BG_ERR=$o_err SESSION=$o_session
		bg_rounds 2 10
		assert_eq "$(bg_result conn)" EPERM "$who: ... and so is the second session's, running beside it"
		errand_stop
		SESSION=$b_session RUN_OUT=$b_out RUN_ERR=$b_err
	fi
	# The embedded agent logs on errandctl's stderr, errand-agent in its log.
	local log=$RUN_ERR
	[ "$who" = errand-agent ] && log=$AGENT_LOG
	assert_match "$(grep -E "session=$SESSION refused " "$log")" "proto=tcp addr=$addr port=443 reason=self" \
		"$who: the refusal's reason is self"
	assert_match "$(grep -E "session=$SESSION denied name=$name " "$log")" "reason=forbidden" \
		"$who: the dropped answer is a denied-name event"
}

newaddr 198.18.7.7 newself.test "embedded agent"
agent_start || exit 1
newaddr 198.18.7.9 newself2.test "errand-agent" two

# An address gained while no agent ran: the restarted agent refuses it.
errand_start --egress open --egress newself3.test -- sh -c "$(loop 198.18.7.11 newself3.test)" || exit 1
bg_rounds 1 10
assert_eq "$(bg_result conn)" "ok hello 198.18.7.11:443" "agent down: control: 198.18.7.11:443 is reached"
agent_kill9
in_host "$IP" addr add 198.18.7.11/32 dev lo
world_serve host "$W_DIR/host11.log" 198.18.7.11:443 || exit 1
agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "session $SESSION adopted" "the restarted agent adopts the session"
bg_rounds 3 10
assert_eq "$(bg_result conn)" EPERM "an address gained while the agent was down is refused once it is back"
assert_match "$(bg_result dns)" "^answer NOERROR addrs= ttl=- " "... and dropped from answers"
errand_stop

# A start takes the agent's last listing of its addresses while a session
# holds the watch, and catches up with what the watch brought since: an
# address gained after one session's start is refused to the next one's.
in_wan "$IP" addr add 198.18.7.13/32 dev $W_HOSTS_IF
world_serve wan "$W_DIR/wan13.log" 198.18.7.13:443 || exit 1
errand_start --egress open -- sleep 60 || exit 1
errand_run --egress open -- sh -c "$(probe_script before "tcp 198.18.7.13 443")"
assert_eq "$(result before)" "ok hello 198.18.7.13:443" "control: a session started beside another reaches 198.18.7.13:443, a public host"
in_host "$IP" addr add 198.18.7.13/32 dev lo
world_serve host "$W_DIR/host13.log" 198.18.7.13:443 || exit 1
errand_run --egress open -- sh -c "$(probe_script after "tcp 198.18.7.13 443")"
assert_eq "$(result after)" EPERM "once the agent's namespace has it, a session started next is refused it (its listing caught up)"
assert_empty "$(cat "$W_DIR/host13.log")" "... and the host's own server there saw no connection"
errand_stop
world_finish
