#!/bin/bash
# Guarantee: a query flood from one session costs bounded upstream work: a TTL-0 answer is kept 1 s and a negative one (NXDOMAIN) 5 s, the same question already upstream is asked once, and a session's upstream queries are a token bucket (100, then 50 a second; over it SERVFAIL, counted and logged), while another session's queries are answered meanwhile; denied names are events at the kernel's refusals' rate (200, then 100 a second), the rest counted in the agent's log.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config flood '"maxNames": 1024, "maxWildcardNames": 1024')
agent_start || exit 1

# Another session, resolving through the same agent while the flood runs.
errand_start --egress api.test --egress other.test -- sh -c "$(session_ns_sh)"'
P='"$PROBE"'
while :; do
	echo "api=$($P dns $NS api.test --timeout 2 2>&1 | tail -n 1)"
	echo "other=$($P dns $NS other.test --timeout 2 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
bg_wait '^round$' 10
other_out=$BG_OUT

: >"$DNS_LOG"
# The flood: zero.test (TTL 0) and gone.test (NXDOMAIN upstream) for 4 s,
# then a name of its own each query under *.flood.test for 2 s. At most 64
# queries wait at once: the flood goes as fast as the responder answers, on
# this host or in a VM without KVM, where it answers ten times more slowly,
# and an answer not given is a query lost, not one the flood outran.
errand_run --egress zero.test --egress gone.test --egress '*.flood.test' -- sh -c "$(session_ns_sh)$(probe_script \
	same 'dns-flood --window 64 $NS 4 zero.test gone.test' \
	distinct 'dns-flood --window 64 $NS 2 r#.flood.test' \
	denied 'dns-flood --window 64 $NS 2 d#.nope.test' \
	after 'dns $NS api.test')"
assert_eq "$RUN_RC" 0 "the flooding session ran"
assert_match "$(result same)" "^flood sent=[0-9]{4,} answered=[0-9]+" "the session sent thousands of queries: $(result same)"
sent=$(result same | sed -n 's/.*sent=\([0-9]*\).*/\1/p')
answered=$(result same | sed -n 's/.*answered=\([0-9]*\).*/\1/p')
assert_le $((sent - answered)) $((sent / 10)) "... and the responder answered nearly all of them (from its cache)"
# zero.test: kept 1 s, asked once a second at most over 4 s (+1 at the edges).
assert_le "$(dns_query_count zero.test)" 6 "TTL 0: upstream saw zero.test at most once a second"
assert_ne "$(dns_query_count zero.test)" 0 "... and did see it"
# gone.test: NXDOMAIN kept 5 s: once (+1 at the edge).
assert_le "$(dns_query_count gone.test)" 2 "NXDOMAIN: upstream saw gone.test once in 4 s"
# Distinct names: the bucket (100) and 50 a second over 2 s, and slack.
distinct=$(dns_queries 'query r[0-9]+\.flood\.test ' | wc -l)
assert_le "$distinct" 210 "distinct names: upstream saw at most 100 + 50/s of them"
assert_ne "$distinct" 0 "... and did see some"
assert_match "$(result distinct)" "servfail=[1-9]" "queries over the rate got SERVFAIL: $(result distinct)"
assert_match "$(cat "$AGENT_LOG")" "DNS queries over the upstream rate limit \(50 a second\) answered SERVFAIL" \
	"the agent logged the refused queries, counted"
assert_le "$(grep -c 'over the upstream rate limit' "$AGENT_LOG")" 2 "... in at most a line every 10 s"

# Denied names, one of its own each query, for 2 s: events at the kernel's
# refusals' rate (a burst of 200, then 100 a second), the rest counted.
assert_match "$(result denied)" "^flood sent=[0-9]{3,}" "the session asked hundreds of names it may not: $(result denied)"
assert_le "$(grep -c 'denied name=d[0-9]*\.nope\.test' "$AGENT_LOG")" 450 \
	"denied names reach the agent's log at the event rate at most"
assert_match "$(cat "$AGENT_LOG")" "denied DNS names over the event rate \(100 a second\) not reported one by one" \
	"... and the rest are counted there"

# The other session, meanwhile.
bg_rounds 1 10
rounds=$(grep -c '^round$' "$other_out")
assert_eq "$(grep -c '^api=answer NOERROR' "$other_out")" "$rounds" "the other session's api.test was answered every round"
assert_eq "$(grep -c '^other=answer NOERROR' "$other_out")" "$rounds" "... and other.test too"
errand_stop
world_finish
