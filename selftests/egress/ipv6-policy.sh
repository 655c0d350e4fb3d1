#!/bin/bash
# Guarantee: errandctl doctor says sessions are dual-stack where the agent's namespace has an IPv6 route out; pins, grants, open mode with sandbox.egressPorts, errandctl show and observe work for IPv6 addresses as for IPv4 ones, and one session's IPv6 entries open nothing in another session (neither at connect nor at its backstop).
# shellcheck disable=SC2016 # $NS expands in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_v6
world_dns "v6only.test AAAA $HOST6_A 60" "other6.test AAAA $HOST6_B 60" || exit 1
W_CONFIG=$(dns_config dns6 "" '"egressPorts": [443, 8080]')
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# A pin to an IPv6 address, a forbidden one among them: the operator vouched.
errand_run --pin p6.test="[$HOST6_PRIV]:443" --egress p6.test -- sh -c "$(session_ns_sh)$(probe_script \
	dns 'dns $NS p6.test --type AAAA' \
	pinned "tcp $HOST6_PRIV 443" \
	other "tcp $HOST6_B 443")"
assert_match "$(result dns)" "^answer NOERROR addrs=$HOST6_PRIV " "a pinned name answers its IPv6 address"
assert_match "$(result pinned)" "^ok hello \[?$HOST6_PRIV\]?:443" "the pinned unique-local address is reached (pinned)"
assert_eq "$(result other)" EPERM "nothing else is"

# Open mode: any public IPv6 address on sandbox.egressPorts, nothing else.
errand_run --egress open -- sh -c "$(probe_script \
	o443 "tcp $HOST6_A 443" \
	o8080 "tcp $HOST6_A 8080" \
	o22 "tcp $HOST6_A 22" \
	opriv "tcp $HOST6_PRIV 443")"
assert_match "$(result o443)" "^ok hello \[?$HOST6_A\]?:443" "open mode reaches [$HOST6_A]:443"
assert_match "$(result o8080)" "^ok hello \[?$HOST6_A\]?:8080" "... and :8080, in egressPorts"
assert_eq "$(result o22)" EPERM "... not :22"
assert_eq "$(result opriv)" EPERM "... nor a unique-local address"
assert_match "$(event_count "addr=$HOST6_A port=22 reason=port hook=connect6")" '^[1-9]' "the port refusal is an event with the IPv6 address"

agent_start || exit 1
# Every session's refusals, as they happen.
observe_start --json
# Two sessions: A is granted v6only.test while it runs; B, with no hosts,
# gets nothing of A's.
errand_start -- sh -c "$(session_ns_sh)"'while :; do
	echo "dns=$('"$PROBE"' dns $NS v6only.test --type AAAA 2>&1 | tail -n 1)"
	echo "c=$('"$PROBE"' tcp '"$HOST6_A"' 443 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
A=$SESSION A_PID=$BG_PID A_OUT=$BG_OUT A_ERR=$BG_ERR
bg_rounds 1 10
assert_match "$(bg_result dns)" "^answer NXDOMAIN" "before a grant, v6only.test does not exist for A"
assert_eq "$(bg_result c)" EPERM "... and [$HOST6_A]:443 is refused"
out=$(ctl grant "$A" v6only.test always 2>&1)
assert_eq "$?" 0 "errandctl grant $A v6only.test always: $out"
bg_rounds 2 10
assert_match "$(bg_result dns)" "^answer NOERROR addrs=$HOST6_A " "after the grant, A's AAAA answer is the address"
assert_match "$(bg_result c)" "^ok hello \[?$HOST6_A\]?:443" "... and A reaches it"
show=$(ctl show "$A" --json)
assert_eq "$(jq_py "[e['port'] for e in d['allowMap'] if e['addr'] == '$HOST6_A']" <<<"$show")" "[443]" \
	"errandctl show lists A's IPv6 entry [$HOST6_A]:443"
assert_match "$(jq_py "d['policy']['address6'], d['policy']['gateway6'], d['policy']['route6']" <<<"$show")" \
	"^fd65:7272:616e::[0-9a-f:]+ fd65:7272:616e::[0-9a-f:]+ True$" "show: A's IPv6 address, gateway and route"
assert_match "$(ctl show "$A")" "^address6  fd65:7272:616e::[0-9a-f:]+ via fd65:7272:616e::[0-9a-f:]+$" \
	"show, as text: A's IPv6 address via its gateway"

# (observe picks a new session's stream up within half a second: B waits)
errand_start -- sh -c "sleep 1.5; echo \"c=\$($PROBE tcp $HOST6_A 443 2>&1 | tail -n 1)\"; sleep 60" || exit 1
B=$SESSION
bg_wait '^c=' || exit 1
assert_eq "$(bg_result c)" EPERM "B's connect to [$HOST6_A]:443 is refused: A's entry is A's"
sess6=$(in_session "$B" "$IP" -6 -o addr show dev eth0 scope global | awk '{ sub("/.*", "", $4); print $4 }')
mac=$(in_host "$IP" -o link show "eh$B" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
: >"$W_DIR/wan-sniff.log"
assert_eq "$(in_session "$B" "$PROBE" ip6 eth0 plain --mac "$mac" --src "$sess6" --dst $HOST6_A --tcp 443)" sent \
	"root in B's namespace writes a SYN to [$HOST6_A]:443"
sleep 0.5
observe_stop
assert_empty "$(cat "$W_DIR/wan-sniff.log")" "... which never reaches the wan"
assert_eq "$(grep -c "\"addr\":\"$HOST6_A\",\"port\":443,\"reason\":\"not-allowed\",\"hook\":\"tc\"" "$OBSERVE_OUT")" 1 \
	"observe shows the SYN dropped at B's backstop as not-allowed, with its IPv6 address"
assert_eq "$(grep "\"session\":\"$B\"" "$OBSERVE_OUT" | grep -c "\"addr\":\"$HOST6_A\",\"port\":443,\"reason\":\"not-allowed\",\"hook\":\"connect6\"")" 1 \
	"... and B's refused connect, with its IPv6 address"
errand_stop
SESSION=$A BG_PID=$A_PID BG_OUT=$A_OUT BG_ERR=$A_ERR
errand_stop
assert_eq "$(ctl doctor --json | jq_py "d['checks']['ipv6']['state']")" ok "errandctl doctor: sessions are dual-stack here (check ipv6: ok)"
agent_stop
assert_empty "$(leftovers)" "nothing of the sessions is left"
world_finish
