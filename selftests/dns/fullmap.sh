#!/bin/bash
# Guarantee: a session whose allow map is full gets SERVFAIL for an answer that would need more room, at the cost of a lookup, not of a walk over the whole map each time: a flood of such queries is answered as fast as any other (it was about 7 ms a query), logged at most once a second (counted, not a line a query), and the answer opens nothing.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
# 65 names under *.full.test, each one address in 198.18.4.0/22 (wan's own:
# a connect errand lets out meets a reset); 64 rules give each 64 ports, so
# 64 names fill the allow map (4096 entries) and the 65th cannot be opened.
zone=()
for i in $(seq 1 65); do zone+=("f$i.full.test A 198.18.7.$((100 + i)) 300"); done
world_dns "${zone[@]}" || exit 1
W_CONFIG=$(dns_config fullmap '"maxWildcardNames": 100')
rules=()
for p in $(seq 1 64); do rules+=(--egress "*.full.test:$p"); done

sess="$(session_ns_sh)"'P='"$PROBE"'
ok=0; i=1
while [ $i -le 64 ]; do
	case "$($P dns $NS f$i.full.test 2>&1)" in "answer NOERROR "*) ok=$((ok + 1)) ;; esac
	i=$((i + 1))
done
echo "filled=$ok"
echo "first=$($P tcp 198.18.7.101 1 2>&1 | tail -n 1)"
echo "full=$($P dns $NS f65.full.test 2>&1 | tail -n 1)"
echo "flood=$($P dns-flood $NS 2 f65.full.test 2>&1 | tail -n 1)"
echo "closed=$($P tcp 198.18.7.165 1 2>&1 | tail -n 1)"'
errand_run "${rules[@]}" -- sh -c "$sess"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result filled)" 64 "64 names resolved, filling the allow map"
assert_eq "$(result first)" ECONNREFUSED "... and opened (198.18.7.101:1 reaches wan)"
assert_match "$(result full)" "^answer SERVFAIL " "the 65th name, with no room left in the map, gets SERVFAIL"
flood=$(result flood)
sent=$(sed -n 's/.*sent=\([0-9]*\).*/\1/p' <<<"$flood")
answered=$(sed -n 's/.*answered=\([0-9]*\).*/\1/p' <<<"$flood")
servfail=$(sed -n 's/.*servfail=\([0-9]*\).*/\1/p' <<<"$flood")
assert_match "$flood" "^flood sent=[0-9]{4,} " "a flood of queries for it: $flood"
assert_le $((sent - answered)) $((sent / 10)) "... is answered as fast as it comes (not one map walk a query)"
assert_eq "$servfail" "$answered" "... every one SERVFAIL"
assert_eq "$(result closed)" EPERM "the 65th name's 198.18.7.165:1 stays closed"
# The flood asked thousands of times for what does not fit: counted in the
# agent's log at most once a second, not a line a query.
assert_le "$(grep -c 'cannot program 198.18.7.165:1 for f65.full.test' <<<"$RUN_STDERR")" 6 \
	"the answers refused for want of room are logged at most once a second"
assert_match "$RUN_STDERR" "cannot program 198.18.7.165:1 for f65.full.test: .*; answering SERVFAIL \([0-9]{3,} answer\(s\) since the last such line\)" \
	"... each line counting the answers since the last"
world_finish
