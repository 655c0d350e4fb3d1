#!/bin/bash
# Guarantee: each refusal names its true reason: a connect or send to 0.0.0.0, ::, or the session's own address is refused as "own" (not "forbidden" or "udp"), an MPTCP socket is refused and logged as mptcp (not tcp), and the log's once-per-30-s limit counts a target and its reason together, so a target refused for a new reason is logged again.
# shellcheck disable=SC2016 # $own, $NS and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1

# The session's own address, read in the session from its routing table.
own_sh='own=$(awk '\''/\/32 host LOCAL/ { print prev } { prev = $2 }'\'' /proc/net/fib_trie | grep -v "^127\." | head -n 1); echo "own=$own"; '
W_CONFIG=$(world_config open '"egressPorts": [443, 9999]')
errand_run --egress open -- sh -c "$own_sh"'echo "mptcpon=$(cat /proc/sys/net/mptcp/enabled 2>/dev/null)"; P='"$PROBE"'
echo "any=$($P tcp 0.0.0.0 443 2>&1 | tail -n 1)"
echo "self=$($P tcp $own 443 2>&1 | tail -n 1)"
echo "selfudp=$($P udp $own 9999 2>&1 | tail -n 1)"
echo "self6=$($P tcp ::ffff:$own 9999 2>&1 | tail -n 1)"
echo "any6=$($P tcp :: 443 2>&1 | tail -n 1)"
echo "mptcp=$($P mptcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
echo "pub=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"'
assert_eq "$RUN_RC" 0 "the session ran"
own=$(result own)
assert_match "$own" '^10\.213\.[0-9]+\.[0-9]+$' "the session's own address is in the pool"
assert_eq "$(result pub)" "ok hello $HOST_A:443" "open mode reaches $HOST_A:443 (control)"
assert_eq "$(result any)" EPERM "a connect to 0.0.0.0:443 is refused"
assert_eq "$(event_count "proto=tcp addr=0.0.0.0 port=443 reason=own hook=connect4")" 1 "... as own"
assert_eq "$(result self)" EPERM "a connect to the session's own address $own:443 is refused"
assert_eq "$(event_count "proto=tcp addr=$own port=443 reason=own hook=connect4")" 1 "... as own"
assert_eq "$(result selfudp)" EPERM "a datagram to its own address $own:9999 is refused"
assert_eq "$(event_count "proto=udp addr=$own port=9999 reason=own hook=sendmsg4")" 1 "... as own"
assert_eq "$(result self6)" EPERM "a connect to ::ffff:$own is refused"
assert_eq "$(event_count "proto=tcp addr=$own port=9999 reason=own hook=connect6")" 1 "... as own"
assert_eq "$(result any6)" EPERM "a connect to [::]:443 is refused"
assert_eq "$(event_count "proto=tcp addr=:: port=443 reason=own hook=connect6")" 1 "... as own"
assert_eq "$(event_count "reason=forbidden")" 0 "none of them is called forbidden"
if [ "$(result mptcpon)" = 1 ]; then
	assert_eq "$(result mptcp)" EPERM "an MPTCP socket is refused"
	assert_eq "$(event_count "proto=mptcp addr=:: port=0 reason=socket hook=sock_create")" 1 "... and logged as mptcp"
	assert_eq "$(event_count "proto=tcp .*hook=sock_create")" 0 "... never as tcp"
elif [ -n "${ERRAND_MUST_WORK:-}" ]; then
	_notok "MPTCP is not enabled in the session's namespace (net.mptcp.enabled=$(result mptcpon))"
else
	trace "MPTCP is not enabled in the session's namespace: its part is not checked"
fi

# One target, two reasons within 30 s: not allowed before the answer, expired
# after it (short.test has TTL 2; ttlFloor 1, grace 0). Both are logged.
W_CONFIG=$(dns_config reasons)
errand_run --egress short.test -- sh -c "$(session_ns_sh)"'P='"$PROBE"'
echo "before=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
echo "dns=$($P dns $NS short.test 2>&1 | tail -n 1)"
echo "fresh=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
sleep 3.5
echo "after=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
echo "again=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"'
assert_eq "$(result before)" EPERM "before the answer, $HOST_A:443 is refused"
assert_eq "$(result fresh)" "ok hello $HOST_A:443" "after it, reached"
assert_eq "$(result after)" EPERM "past the TTL, refused again"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 reason=not-allowed hook=connect4")" 1 \
	"the log has the not-allowed refusal"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 reason=expired hook=connect4")" 1 \
	"... and the expired one for the same target, seconds later"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 ")" 2 "... and the same refusal again is not logged twice"

world_finish
