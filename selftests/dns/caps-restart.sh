#!/bin/bash
# Guarantee: a session's DNS name caps outlast its agent: every name it has spent under dns.maxNames and dns.maxWildcardNames (each name asked upstream, found or not) is kept in its record directory (root's, mode 0600), so after the agent is killed -9 and restarted, the new agent and the new DNS worker of the adopted session refuse a new name over a cap with SERVFAIL without asking upstream, while a name already spent still resolves and opens.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
# 4 names in all, 2 under *.wild.test; q1 and q2.wild.test are NXDOMAIN
# upstream (asked, so spent: a query name is a data channel).
# shellcheck disable=SC2034 # agent_start and errand_start read it
W_CONFIG=$(dns_config capsrestart '"maxNames": 4, "maxWildcardNames": 2')
agent_start || exit 1

errand_start --egress m1.test --egress m2.test --egress m3.test --egress '*.wild.test' -- sh -c "$(session_ns_sh)$(probe_script \
	m1 'dns $NS m1.test' \
	m2 'dns $NS m2.test' \
	q1 'dns $NS q1.wild.test' \
	q2 'dns $NS q2.wild.test')$(bg_wait_sh)$(probe_script \
	m3 'dns $NS m3.test --timeout 3' \
	q3 'dns $NS q3.wild.test --timeout 3' \
	m1again 'dns $NS m1.test --timeout 3' \
	q1again 'dns $NS q1.wild.test --timeout 3' \
	c1 'tcp 198.18.5.1 443' \
	c3 'tcp 198.18.5.3 443')"'echo done=1; sleep 60' || exit 1
bg_wait '^waiting=1' 20 || exit 1
assert_match "$(bg_result m1)" "^answer NOERROR addrs=198\.18\.5\.1 " "control: m1.test resolves"
assert_match "$(bg_result m2)" "^answer NOERROR addrs=198\.18\.5\.2 " "control: m2.test resolves"
assert_match "$(bg_result q1)" "^answer NXDOMAIN " "control: q1.wild.test is asked upstream (NXDOMAIN)"
assert_match "$(bg_result q2)" "^answer NXDOMAIN " "control: q2.wild.test too: 4 names spent, the cap"
assert_eq "$(dns_query_count q2.wild.test)" 1 "control: upstream saw q2.wild.test"

rec=$W_DIR/state/sessions/$SESSION
trace "its record: $(ls -l "$rec" 2>&1 | tr '\n' '|')"
assert_eq "$(stat -c '%u %a' "$rec/dns-names" 2>&1)" "0 600" "the names spent are in its record directory, root's, mode 0600"

agent_kill9
agent_start || exit 1
bg_go || exit 1
bg_wait '^done=1' 40 || exit 1
assert_match "$(bg_result m3)" "^answer SERVFAIL addrs= " "after the agent's kill -9 and restart, a fifth name (m3.test) gets SERVFAIL"
assert_eq "$(dns_query_count m3.test)" 0 "... and is never asked upstream"
assert_match "$(bg_result q3)" "^answer SERVFAIL addrs= " "a third name under *.wild.test gets SERVFAIL"
assert_eq "$(dns_query_count q3.wild.test)" 0 "... and is never asked upstream"
assert_match "$(bg_result m1again)" "^answer NOERROR addrs=198\.18\.5\.1 " "a name spent before the restart (m1.test) still resolves"
assert_match "$(bg_result q1again)" "^answer NXDOMAIN " "... and so does q1.wild.test (NXDOMAIN)"
assert_eq "$(bg_result c1)" ECONNREFUSED "m1.test's 198.18.5.1:443 opens (reaches wan)"
assert_eq "$(bg_result c3)" EPERM "m3.test's 198.18.5.3:443 does not"
errand_stop
world_finish
