#!/bin/bash
# Guarantee: a session whose allow map is full gets SERVFAIL for an answer that would need more room, at the cost of a lookup, not of a walk over the whole map each time: a flood of such queries is answered at least a fortieth as fast as one of a cached name (a walk made it about 7 ms a query), logged at most once a second (counted, not a line a query), and the answer opens nothing.
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
echo "base=$($P dns-flood --window 16 $NS 2 f1.full.test 2>&1 | tail -n 1)"
echo "flood=$($P dns-flood --window 16 $NS 2 f65.full.test 2>&1 | tail -n 1)"
echo "closed=$($P tcp 198.18.7.165 1 2>&1 | tail -n 1)"'
errand_run "${rules[@]}" -- sh -c "$sess"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result filled)" 64 "64 names resolved, filling the allow map"
assert_eq "$(result first)" ECONNREFUSED "... and opened (198.18.7.101:1 reaches wan)"
assert_match "$(result full)" "^answer SERVFAIL " "the 65th name, with no room left in the map, gets SERVFAIL"
# Each flood keeps 16 queries waiting at most and goes as fast as they are
# answered, so it measures the responder wherever it runs (a VM without KVM
# answers tens of times more slowly). The baseline: a name already answered,
# from the worker's cache. A full map's SERVFAIL costs a lookup and a round
# trip to the agent more (a quarter of the baseline's rate here, a tenth under
# TCG); a walk over the map's 4096 entries each query made it a few hundredths
# and less (about 7 ms a query on this host).
base=$(result base)
flood=$(result flood)
num() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" <<<"$2"; }
base_answered=$(num answered "$base")
sent=$(num sent "$flood")
answered=$(num answered "$flood")
servfail=$(num servfail "$flood")
assert_match "$base" "^flood sent=[0-9]{4,} " "a flood of an answered name, the baseline: $base"
assert_match "$flood" "^flood sent=[0-9]{3,} " "a flood of queries for the 65th: $flood"
assert_le $((sent - answered)) $((sent / 10)) "... every one answered (none dropped)"
assert_le "$((${base_answered:-0} / 40))" "${answered:-0}" "... at least a fortieth as fast as the baseline (not one map walk a query)"
assert_eq "$servfail" "$answered" "... every one SERVFAIL"
assert_eq "$(result closed)" EPERM "the 65th name's 198.18.7.165:1 stays closed"
# The flood asked hundreds of times a second for what does not fit: counted in the
# agent's log at most once a second, not a line a query.
assert_le "$(grep -c 'cannot program 198.18.7.165:1 for f65.full.test' <<<"$RUN_STDERR")" 6 \
	"the answers refused for want of room are logged at most once a second"
assert_match "$RUN_STDERR" "cannot program 198.18.7.165:1 for f65.full.test: .*; answering SERVFAIL \([0-9]{3,} answer\(s\) since the last such line\)" \
	"... each line counting the answers since the last"
world_finish
