#!/bin/bash
# Guarantee: a name no host rule allows does not exist: the responder answers NXDOMAIN (UDP, connected UDP, TCP, getaddrinfo) without asking upstream (a query name is a data channel), opens nothing, and reports a denied-name event (reason=not-allowed).
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)
: >"$DNS_LOG"

errand_run --egress api.test -- sh -c "$(session_ns_sh)$(probe_script \
	udp 'dns $NS other.test' \
	conn 'dns $NS other.test --connected' \
	tcp 'dns $NS other.test --tcp' \
	gai "resolve other.test" \
	aaaa 'dns $NS other.test --type AAAA' \
	sub 'dns $NS exfil-4a6f686e.api.test' \
	suffix 'dns $NS api.test.evil.test' \
	prefix 'dns $NS xapi.test' \
	conn443 "tcp $HOST_B 443" \
	allowed 'dns $NS api.test')"
assert_eq "$RUN_RC" 0 "the session ran"
for k in udp conn tcp aaaa; do
	assert_match "$(result $k)" "^answer NXDOMAIN addrs= ttl=- from " "other.test ($k): NXDOMAIN, no address"
done
assert_eq "$(result gai)" "noname EAI_NONAME" "getaddrinfo(other.test): EAI_NONAME"
assert_match "$(result sub)" "^answer NXDOMAIN " "a name below an allowed one (exfil-4a6f686e.api.test): NXDOMAIN"
assert_match "$(result suffix)" "^answer NXDOMAIN " "an allowed name with a suffix (api.test.evil.test): NXDOMAIN"
assert_match "$(result prefix)" "^answer NXDOMAIN " "an allowed name with a prefix (xapi.test): NXDOMAIN"
assert_eq "$(result conn443)" EPERM "other.test's address $HOST_B:443 stays refused"
assert_match "$(result allowed)" "^answer NOERROR addrs=$HOST_A " "control: the allowed api.test resolves"
sleep 0.3
for n in other.test exfil-4a6f686e.api.test api.test.evil.test xapi.test; do
	assert_eq "$(dns_query_count $n)" 0 "the upstream never saw $n"
done
assert_ne "$(dns_query_count api.test)" 0 "control: the upstream saw api.test"
assert_match "$(denials "name=other.test ")" "^errand: session=[0-9a-f]+ denied name=other\.test type=(A|AAAA) reason=not-allowed$" \
	"a denied event for other.test, reason not-allowed"
assert_eq "$(denial_count "name=exfil-4a6f686e.api.test type=A reason=not-allowed")" 1 \
	"a denied event for exfil-4a6f686e.api.test"
assert_eq "$(denial_count "name=api.test ")" 0 "no denied event for the allowed name"
assert_eq "$(event_count "addr=$HOST_B port=443 reason=not-allowed")" 1 "one not-allowed event for $HOST_B:443"

# No rule at all: every name is NXDOMAIN, and nothing goes upstream.
: >"$DNS_LOG"
errand_run -- sh -c "$(session_ns_sh)$(probe_script \
	api 'dns $NS api.test' \
	tcp 'dns $NS api.test --tcp' \
	gai "resolve api.test" \
	conn "tcp $HOST_A 443")"
assert_match "$(result api)" "^answer NXDOMAIN addrs= ttl=- from " "no host rules: api.test is NXDOMAIN"
assert_match "$(result tcp)" "^answer NXDOMAIN " "... over TCP too"
assert_eq "$(result gai)" "noname EAI_NONAME" "... and for getaddrinfo"
assert_eq "$(result conn)" EPERM "... and $HOST_A:443 stays refused"
sleep 0.3
assert_empty "$(dns_queries)" "the upstream saw no query at all"

# JSON events.
errand_run --json -- sh -c "$(session_ns_sh)$(probe_script api 'dns $NS api.test')"
assert_match "$(denials)" '"event" *: *"denied".*"name" *: *"api\.test".*"reason" *: *"not-allowed"' \
	"--json: the denied event is a JSON object"

world_finish
