#!/bin/bash
# Guarantee: an allowed name behind a CNAME chain (alias.test -> mid.test -> api.test) is answered flattened: the name asked with the chain's final addresses, no CNAME records, TTL the chain's lowest clamped to [dns.ttlFloor, dns.ttlCap]; the addresses are opened for the name asked, while the chain's inner names stay NXDOMAIN when no rule allows them.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

# Control: upstream, the chain is two CNAMEs (TTL 30, 20) then api.test (60).
assert_eq "$(in_host "$PROBE" dns $DNS_UPSTREAM alias.test)" \
	"answer NOERROR addrs=$HOST_A ttl=60 other=CNAME,CNAME from $DNS_UPSTREAM:53" "control: the upstream answers the chain"
: >"$DNS_LOG"

errand_run --egress alias.test -- sh -c "$(session_ns_sh)$(probe_script \
	before "tcp $HOST_A 443" \
	a 'dns $NS alias.test' \
	conn "tcp $HOST_A 443" \
	tcp 'dns $NS alias.test --tcp' \
	aaaa 'dns $NS alias.test --type AAAA' \
	mid 'dns $NS mid.test' \
	api 'dns $NS api.test' \
	gai "resolve alias.test")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result before)" EPERM "before the answer, $HOST_A:443 is refused"
assert_match "$(result a)" "^answer NOERROR addrs=$HOST_A ttl=20 from " \
	"alias.test: $HOST_A, no CNAME in the answer, TTL 20 (the chain's lowest)"
assert_eq "$(result conn)" "ok hello $HOST_A:443" "$HOST_A:443 is reached after the answer"
assert_match "$(result tcp)" "^answer NOERROR addrs=$HOST_A ttl=(20|1[0-9]|[1-9]) from " "over TCP: the same flattened answer"
assert_match "$(result aaaa)" "^answer NOERROR addrs= ttl=- from " "AAAA of alias.test: NODATA, no CNAME either"
assert_match "$(result mid)" "^answer NXDOMAIN " "the chain's inner name mid.test, not allowed, is NXDOMAIN"
assert_match "$(result api)" "^answer NXDOMAIN " "... and so is its end, api.test"
assert_eq "$(result gai)" "resolved $HOST_A" "getaddrinfo(alias.test) gives $HOST_A"
sleep 0.3
assert_eq "$(dns_query_count mid.test)" 0 "mid.test was never asked upstream by itself"
assert_eq "$(denial_count "name=alias.test ")" 0 "no denied event for alias.test"

# A chain too long for a UDP answer: the upstream truncates it, and the
# worker asks again over TCP, on a connection the agent makes for it to the
# upstream (the worker makes none of its own).
assert_match "$(in_host "$PROBE" dns $DNS_UPSTREAM long.chain.test 2>&1)" "^answer NOERROR addrs= ttl=- tc from " \
	"control: over UDP the upstream's answer for long.chain.test is truncated"
: >"$DNS_LOG"
errand_run --egress long.chain.test -- sh -c "$(session_ns_sh)$(probe_script \
	a 'dns $NS long.chain.test' \
	conn "tcp $HOST_A 443")"
assert_match "$(result a)" "^answer NOERROR addrs=$HOST_A ttl=30 from " \
	"long.chain.test, truncated over UDP upstream: $HOST_A, asked again over TCP"
assert_eq "$(result conn)" "ok hello $HOST_A:443" "... and $HOST_A:443 is reached"
sleep 0.3
assert_match "$(dns_queries 'query long.chain.test A from .* tcp')" "tcp" "the upstream got the query over TCP"

# The TTL is clamped: a cap below the chain's lowest...
W_CONFIG=$(dns_config cap '"ttlCap": 10')
errand_run --egress alias.test -- sh -c "$(session_ns_sh)$(probe_script \
	a 'dns $NS alias.test' \
	conn "tcp $HOST_A 443")"
assert_match "$(result a)" "^answer NOERROR addrs=$HOST_A ttl=10 from " "ttlCap 10: the TTL is 10"
assert_eq "$(result conn)" "ok hello $HOST_A:443" "... and $HOST_A:443 is reached"

# ...and a floor above it.
W_CONFIG=$(dns_config floor '"ttlFloor": 25')
errand_run --egress alias.test -- sh -c "$(session_ns_sh)$(probe_script a 'dns $NS alias.test')"
assert_match "$(result a)" "^answer NOERROR addrs=$HOST_A ttl=25 from " "ttlFloor 25: the TTL is 25"

world_finish
