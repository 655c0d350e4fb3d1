#!/bin/bash
# Guarantee: only A and AAAA (and CNAME) queries are resolved: TXT, MX, ANY and other types are REFUSED and never asked upstream (a denied-name event, reason=type); an allowed name without records of the type asked gets NODATA (NOERROR, no address).
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

assert_match "$(in_host "$PROBE" dns $DNS_UPSTREAM txt.test --type TXT)" "^answer NOERROR addrs= ttl=- other=TXT from " \
	"control: the upstream has a TXT record for txt.test"
: >"$DNS_LOG"

errand_run --egress txt.test --egress v4only.test -- sh -c "$(session_ns_sh)$(probe_script \
	txt 'dns $NS txt.test --type TXT' \
	txttcp 'dns $NS txt.test --type TXT --tcp' \
	mx 'dns $NS txt.test --type MX' \
	any 'dns $NS txt.test --type ANY' \
	spf 'dns $NS txt.test --type 99' \
	https 'dns $NS txt.test --type 65' \
	srv 'dns $NS txt.test --type SRV' \
	a 'dns $NS txt.test' \
	v4a 'dns $NS v4only.test' \
	v4aaaa 'dns $NS v4only.test --type AAAA' \
	v4aaaatcp 'dns $NS v4only.test --type AAAA --tcp' \
	gai "resolve v4only.test" \
	nottxt 'dns $NS other.test --type TXT')"
assert_eq "$RUN_RC" 0 "the session ran"
for k in txt txttcp mx any spf https srv; do
	assert_match "$(result $k)" "^answer REFUSED addrs= ttl=- from " "$k query for the allowed txt.test: REFUSED"
done
assert_match "$(result a)" "^answer NOERROR addrs=$HOST_A ttl=60 from " "control: txt.test's A record resolves"
assert_match "$(result v4a)" "^answer NOERROR addrs=$HOST_A ttl=60 from " "v4only.test's A record resolves"
assert_match "$(result v4aaaa)" "^answer NOERROR addrs= ttl=- from " "AAAA of v4only.test: NODATA"
assert_match "$(result v4aaaatcp)" "^answer NOERROR addrs= ttl=- from " "... over TCP too"
assert_eq "$(result gai)" "resolved $HOST_A" "getaddrinfo(v4only.test) (A and AAAA) gives $HOST_A"
assert_match "$(result nottxt)" "^answer (REFUSED|NXDOMAIN) addrs= " "TXT for a name not allowed: REFUSED or NXDOMAIN"
sleep 0.3
assert_empty "$(dns_queries ' (TXT|MX|ANY|SRV|HTTPS|99|65) ')" "the upstream saw no query of a type other than A/AAAA"
assert_eq "$(dns_query_count other.test)" 0 "the upstream never saw other.test"
assert_ne "$(dns_query_count txt.test)" 0 "control: the upstream saw txt.test (its A query)"
assert_eq "$(denial_count "name=txt.test type=TXT reason=type")" 1 \
	"one denied event for txt.test, type TXT, reason type (the log shows a name once per 30 s)"
assert_eq "$(denial_count "name=v4only.test ")" 0 "NODATA is no denial: no event for v4only.test"

world_finish
