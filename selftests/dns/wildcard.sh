#!/bin/bash
# Guarantee: a wildcard rule *.wild.test makes exactly the names one label below it exist (x.wild.test), never the apex (wild.test) nor deeper names (a.b.wild.test): those are NXDOMAIN, never asked upstream, and open nothing.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)
: >"$DNS_LOG"

errand_run --egress '*.wild.test' -- sh -c "$(session_ns_sh)$(probe_script \
	x 'dns $NS x.wild.test' \
	xconn "tcp $HOST_A 443" \
	y 'dns $NS Y.Wild.Test' \
	yconn "tcp $HOST_B 443" \
	apex 'dns $NS wild.test' \
	deep 'dns $NS a.b.wild.test' \
	deeptcp 'dns $NS a.b.wild.test --tcp' \
	gaiapex "resolve wild.test" \
	star 'dns $NS "*.wild.test"' \
	other 'dns $NS x.other.test')"
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$(result x)" "^answer NOERROR addrs=$HOST_A ttl=60 from " "x.wild.test (one label below) resolves"
assert_eq "$(result xconn)" "ok hello $HOST_A:443" "... and its address $HOST_A:443 is reached"
assert_match "$(result y)" "^answer NOERROR addrs=$HOST_B ttl=60 from " "Y.Wild.Test resolves (case-insensitive)"
assert_eq "$(result yconn)" "ok hello $HOST_B:443" "... and $HOST_B:443 is reached"
assert_match "$(result apex)" "^answer NXDOMAIN addrs= " "the apex wild.test is NXDOMAIN"
assert_match "$(result deep)" "^answer NXDOMAIN addrs= " "two labels below, a.b.wild.test, is NXDOMAIN"
assert_match "$(result deeptcp)" "^answer NXDOMAIN addrs= " "... over TCP too"
assert_match "$(result gaiapex)" "^noname EAI_NONAME$" "getaddrinfo(wild.test): EAI_NONAME"
assert_match "$(result star)" "^answer (NXDOMAIN|FORMERR|REFUSED) addrs= " "a query for the literal *.wild.test opens nothing"
assert_match "$(result other)" "^answer NXDOMAIN " "x.other.test is NXDOMAIN"
sleep 0.3
assert_ne "$(dns_query_count x.wild.test)" 0 "control: the upstream saw x.wild.test"
for n in wild.test a.b.wild.test x.other.test; do
	assert_eq "$(dns_query_count "$n")" 0 "the upstream never saw $n"
done
assert_eq "$(denial_count "name=wild.test .*reason=not-allowed")" 1 "a denied event for the apex"
assert_eq "$(denial_count "name=a.b.wild.test .*reason=not-allowed")" 1 "a denied event for a.b.wild.test"

# The refused names opened nothing: in a session that asks only for them,
# the addresses they have upstream stay refused.
errand_run --egress '*.wild.test' -- sh -c "$(session_ns_sh)$(probe_script \
	apex 'dns $NS wild.test' \
	deep 'dns $NS a.b.wild.test' \
	conn "tcp $HOST_A 443")"
assert_match "$(result apex)" "^answer NXDOMAIN " "wild.test is NXDOMAIN"
assert_eq "$(result conn)" EPERM "$HOST_A:443 (wild.test's and a.b.wild.test's address upstream) stays refused"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=not-allowed")" 1 "... with a not-allowed event"

# A wildcard rule with a port opens that port only.
errand_run --egress '*.wild.test:8080' -- sh -c "$(session_ns_sh)$(probe_script \
	x 'dns $NS x.wild.test' \
	p8080 "tcp $HOST_A 8080" \
	p443 "tcp $HOST_A 443")"
assert_match "$(result x)" "^answer NOERROR addrs=$HOST_A " "*.wild.test:8080: x.wild.test resolves"
assert_eq "$(result p8080)" "ok hello $HOST_A:8080" "... and opens $HOST_A:8080"
assert_eq "$(result p443)" EPERM "... not $HOST_A:443"

world_finish
