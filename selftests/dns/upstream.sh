#!/bin/bash
# Guarantee: when the upstream fails (silent, or its port closed) an allowed name gets SERVFAIL within the 5 s upstream timeout (a denied-name event, reason=upstream) and opens nothing; the responder keeps answering other queries meanwhile; a pinned name is answered from its pin without any upstream query.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

# Pins are answered from the pin: pinned.test is $HOST_B upstream, pinned to $HOST_A.
: >"$DNS_LOG"
errand_run --pin pinned.test=$HOST_A --egress pinned.test -- sh -c "$(session_ns_sh)$(probe_script \
	pin 'dns $NS pinned.test' \
	pintcp 'dns $NS pinned.test --tcp' \
	gai "resolve pinned.test 443" \
	b "tcp $HOST_B 443")"
assert_match "$(result pin)" "^answer NOERROR addrs=$HOST_A ttl=[0-9]+ from " "pinned.test is answered with its pin, $HOST_A"
assert_match "$(result pintcp)" "^answer NOERROR addrs=$HOST_A ttl=[0-9]+ from " "... over TCP too"
assert_eq "$(result gai)" "ok hello $HOST_A:443" "getaddrinfo(pinned.test) then connect reaches $HOST_A:443"
assert_eq "$(result b)" EPERM "the upstream's address for it, $HOST_B:443, stays refused"
sleep 0.3
assert_eq "$(dns_query_count pinned.test)" 0 "the upstream never saw pinned.test"

# A silent upstream: SERVFAIL after the timeout, not a hang; meanwhile the
# responder answers other queries at once, and pins still resolve.
world_dns --silent || exit 1
: >"$DNS_LOG"
sess='NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
P='"$PROBE"'
ms() { echo $(($(date +%s%N) / 1000000)); }
(t=$(ms); r=$($P dns $NS api.test --timeout 15 2>&1 | tail -n 1); echo "api=$r"; echo "apims=$(($(ms) - t))") &
sleep 0.5
t=$(ms); echo "other=$($P dns $NS other.test 2>&1 | tail -n 1)"; echo "otherms=$(($(ms) - t))"
echo "pin=$($P dns $NS pinned.test 2>&1 | tail -n 1)"
wait
echo "conn=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
t=$(ms); echo "gai=$($P resolve api.test 2>&1 | tail -n 1)"; echo "gaims=$(($(ms) - t))"'
errand_run --egress api.test --pin pinned.test=$HOST_B --egress pinned.test -- sh -c "$sess"
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$(result api)" "^answer SERVFAIL addrs= ttl=- from " "silent upstream: api.test gets SERVFAIL"
assert_le "$(result apims)" 7000 "... within 7 s (the 5 s upstream timeout): $(result apims) ms"
assert_match "$(result other)" "^answer NXDOMAIN " "meanwhile a name not allowed gets NXDOMAIN"
assert_le "$(result otherms)" 1500 "... at once, not behind the pending query: $(result otherms) ms"
assert_match "$(result pin)" "^answer NOERROR addrs=$HOST_B " "meanwhile the pinned name is answered from its pin"
assert_eq "$(result conn)" EPERM "SERVFAIL opened nothing: $HOST_A:443 is refused"
assert_match "$(result gai)" "^noname EAI_(AGAIN|FAIL)$" "getaddrinfo(api.test) fails (temporary failure)"
assert_le "$(result gaims)" 30000 "... and returns: $(result gaims) ms"
assert_ne "$(dns_query_count api.test)" 0 "the silent upstream did get errand's query for api.test"
assert_eq "$(dns_query_count pinned.test)" 0 "... and none for the pinned name"
assert_match "$(denials "name=api.test ")" "denied name=api\.test type=(A|AAAA) reason=upstream$" \
	"a denied event for api.test, reason upstream"

# The upstream gone (its port closed): SERVFAIL, quickly.
world_dns_stop
errand_run --egress api.test -- sh -c '
ms() { echo $(($(date +%s%N) / 1000000)); }
NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
t=$(ms); echo "api=$('"$PROBE"' dns $NS api.test --timeout 15 2>&1 | tail -n 1)"; echo "apims=$(($(ms) - t))"
echo "conn=$('"$PROBE"' tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"'
assert_match "$(result api)" "^answer SERVFAIL addrs= ttl=- from " "no upstream server: api.test gets SERVFAIL"
assert_le "$(result apims)" 7000 "... within 7 s: $(result apims) ms"
assert_eq "$(result conn)" EPERM "... and $HOST_A:443 stays refused"

# Back up: the same name resolves again, in a new session.
world_dns || exit 1
errand_run --egress api.test -- sh -c "$(session_ns_sh)$(probe_script api 'dns $NS api.test' conn "tcp $HOST_A 443")"
assert_match "$(result api)" "^answer NOERROR addrs=$HOST_A " "upstream back: api.test resolves"
assert_eq "$(result conn)" "ok hello $HOST_A:443" "... and $HOST_A:443 is reached"

world_finish
