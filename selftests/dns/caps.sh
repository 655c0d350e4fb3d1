#!/bin/bash
# Guarantee: the responder's caps hold: a name with more addresses than dns.maxAddresses, a name beyond dns.maxNames in a session, a name beyond dns.maxWildcardNames under one wildcard rule each get SERVFAIL (a denied-name event, reason=cap) and open nothing; what was opened before stays open.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
# Connects to 198.18.4.0/22 that errand lets out meet wan's reset.
assert_eq "$(in_host "$PROBE" tcp 198.18.4.1 443)" ECONNREFUSED "control: a connect to 198.18.4.1:443 is reset by wan"

# dns.maxAddresses 4: many.test has 8 addresses (198.18.6.1-8).
W_CONFIG=$(dns_config addrs '"maxAddresses": 4')
errand_run --egress many.test --egress api.test -- sh -c "$(session_ns_sh)$(probe_script \
	many 'dns $NS many.test' \
	c1 "tcp 198.18.6.1 443" \
	c8 "tcp 198.18.6.8 443" \
	api 'dns $NS api.test')"
assert_match "$(result many)" "^answer SERVFAIL addrs= ttl=- from " "8 addresses, maxAddresses 4: SERVFAIL"
assert_eq "$(result c1)" EPERM "... and none of them is opened (198.18.6.1:443)"
assert_eq "$(result c8)" EPERM "... (198.18.6.8:443)"
assert_match "$(result api)" "^answer NOERROR addrs=$HOST_A " "another name still resolves"
assert_eq "$(denial_count "name=many.test type=A reason=cap")" 1 "a denied event for many.test, reason cap"

W_CONFIG=$(dns_config addrs8 '"maxAddresses": 8')
errand_run --egress many.test -- sh -c "$(session_ns_sh)$(probe_script \
	many 'dns $NS many.test' \
	c8 "tcp 198.18.6.8 443")"
assert_match "$(result many)" "^answer NOERROR addrs=198\.18\.6\.1,(198\.18\.6\.[0-9],){6}198\.18\.6\.[0-9] " \
	"maxAddresses 8: the 8 addresses are answered"
assert_eq "$(result c8)" ECONNREFUSED "... and opened (198.18.6.8:443 reaches wan)"

# dns.maxNames 3: m1-m3.test resolve, m4.test does not; m1.test again does.
W_CONFIG=$(dns_config names '"maxNames": 3')
errand_run --egress m1.test --egress m2.test --egress m3.test --egress m4.test -- sh -c "$(session_ns_sh)$(probe_script \
	m1 'dns $NS m1.test' \
	m2 'dns $NS m2.test' \
	m3 'dns $NS m3.test' \
	m4 'dns $NS m4.test' \
	m4tcp 'dns $NS m4.test --tcp' \
	m1again 'dns $NS m1.test' \
	c3 "tcp 198.18.5.3 443" \
	c4 "tcp 198.18.5.4 443" \
	c1 "tcp 198.18.5.1 443")"
for k in m1 m2 m3; do
	assert_match "$(result $k)" "^answer NOERROR addrs=198\.18\.5\.${k#m} " "maxNames 3: $k.test resolves"
done
assert_match "$(result m4)" "^answer SERVFAIL addrs= " "the fourth name, m4.test, gets SERVFAIL"
assert_match "$(result m4tcp)" "^answer SERVFAIL addrs= " "... over TCP too"
assert_match "$(result m1again)" "^answer NOERROR addrs=198\.18\.5\.1 " "a name already counted, m1.test, resolves again"
assert_eq "$(result c3)" ECONNREFUSED "m3.test's 198.18.5.3:443 is open (reaches wan)"
assert_eq "$(result c4)" EPERM "m4.test's 198.18.5.4:443 is not"
assert_eq "$(result c1)" ECONNREFUSED "m1.test's 198.18.5.1:443 is still open"
assert_eq "$(denial_count "name=m4.test type=A reason=cap")" 1 "a denied event for m4.test, reason cap"

# dns.maxWildcardNames 5: n1-n5.wild.test resolve under *.wild.test, n6 does
# not; an exact rule is not counted with the wildcard's names.
W_CONFIG=$(dns_config wild '"maxWildcardNames": 5')
errand_run --egress '*.wild.test' --egress api.test -- sh -c "$(session_ns_sh)"'
for i in 1 2 3 4 5 6; do echo "n$i=$('"$PROBE"' dns $NS n$i.wild.test 2>&1 | tail -n 1)"; done
'"$(probe_script \
	x 'dns $NS x.wild.test' \
	api 'dns $NS api.test' \
	n1again 'dns $NS n1.wild.test' \
	c5 "tcp 198.18.4.5 443" \
	c6 "tcp 198.18.4.6 443" \
	xconn "tcp $HOST_A 443")"
for i in 1 2 3 4 5; do
	assert_match "$(result n$i)" "^answer NOERROR addrs=198\.18\.4\.$i " "maxWildcardNames 5: n$i.wild.test resolves"
done
assert_match "$(result n6)" "^answer SERVFAIL addrs= " "the sixth name under *.wild.test, n6.wild.test, gets SERVFAIL"
assert_match "$(result x)" "^answer SERVFAIL addrs= " "... and so does x.wild.test"
assert_match "$(result api)" "^answer NOERROR addrs=$HOST_A " "an exact rule's name still resolves"
assert_match "$(result n1again)" "^answer NOERROR addrs=198\.18\.4\.1 " "a name already counted, n1.wild.test, resolves again"
assert_eq "$(result c5)" ECONNREFUSED "n5.wild.test's 198.18.4.5:443 is open"
assert_eq "$(result c6)" EPERM "n6.wild.test's 198.18.4.6:443 is not"
assert_eq "$(result xconn)" "ok hello $HOST_A:443" "api.test's $HOST_A:443 is open"
assert_eq "$(denial_count "name=n6.wild.test type=A reason=cap")" 1 "a denied event for n6.wild.test, reason cap"

# The default dns.maxWildcardNames (64).
W_CONFIG=$(dns_config wild64)
errand_run --egress '*.wild.test' -- sh -c "$(session_ns_sh)"'
ok=0; i=1
while [ $i -le 64 ]; do
	case "$('"$PROBE"' dns $NS n$i.wild.test 2>&1)" in "answer NOERROR addrs=198.18.4.$i "*) ok=$((ok + 1)) ;; esac
	i=$((i + 1))
done
echo "ok=$ok"
'"$(probe_script \
	n65 'dns $NS n65.wild.test' \
	c64 "tcp 198.18.4.64 443" \
	c65 "tcp 198.18.4.65 443")"
assert_eq "$(result ok)" 64 "by default, 64 names under *.wild.test resolve"
assert_match "$(result n65)" "^answer SERVFAIL addrs= " "the 65th gets SERVFAIL"
assert_eq "$(result c64)" ECONNREFUSED "the 64th name's 198.18.4.64:443 is open"
assert_eq "$(result c65)" EPERM "the 65th name's 198.18.4.65:443 is not"

world_finish
