#!/bin/bash
# Guarantee: answers carry the upstream TTL clamped to [dns.ttlFloor, dns.ttlCap] (TTL 0 gets the floor); an answer opens its addresses for that TTL plus dns.grace: after that a new connect is refused (reason=expired) until a fresh answer, while a connection opened before the expiry lives on.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
world_serve wan "$W_DIR/echo.log" $HOST_A:8443/echo || exit 1

# Clamping, with the default floor (5) and cap (300).
W_CONFIG=$(world_config defaults)
errand_run --egress zero.test --egress long.test --egress api.test -- sh -c "$(session_ns_sh)$(probe_script \
	zero 'dns $NS zero.test' \
	long 'dns $NS long.test' \
	api 'dns $NS api.test')"
assert_match "$(result zero)" "^answer NOERROR addrs=$HOST_A ttl=5 from " "TTL 0 is answered with the default floor, 5"
assert_match "$(result long)" "^answer NOERROR addrs=$HOST_A ttl=300 from " "TTL 100000 is answered with the default cap, 300"
assert_match "$(result api)" "^answer NOERROR addrs=$HOST_A ttl=60 from " "TTL 60 is kept"

W_CONFIG=$(dns_config floor1)
errand_run --egress zero.test -- sh -c "$(session_ns_sh)$(probe_script zero 'dns $NS zero.test')"
assert_match "$(result zero)" "^answer NOERROR addrs=$HOST_A ttl=1 from " "ttlFloor 1: TTL 0 is answered with 1"

# Expiry: short.test has TTL 2; ttlFloor 1, grace 0. The rules open 443 and
# 8443 (an echo server, for the held connection).
sess='NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
P='"$PROBE"'
echo "dns=$($P dns $NS short.test 2>&1 | tail -n 1)"
(echo "hold=$($P tcp-hold '"$HOST_A"' 8443 5 2>&1 | tail -n 1)") &
sleep 0.3
echo "fresh=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
sleep 3.5
echo "expired=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
echo "expired8443=$($P tcp '"$HOST_A"' 8443 --timeout 1 2>&1 | tail -n 1)"
wait
echo "again=$($P dns $NS short.test 2>&1 | tail -n 1)"
echo "renewed=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"'
errand_run --egress short.test --egress short.test:8443 -- sh -c "$sess"
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$(result dns)" "^answer NOERROR addrs=$HOST_A ttl=2 from " "short.test: TTL 2"
assert_eq "$(result fresh)" "ok hello $HOST_A:443" "within the TTL, $HOST_A:443 is reached"
assert_eq "$(result expired)" EPERM "3.8 s after the answer (TTL 2, grace 0), a new connect to $HOST_A:443 is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 reason=expired hook=connect4")" 1 "... with reason expired"
assert_eq "$(result expired8443)" EPERM "... and so is one to $HOST_A:8443"
assert_eq "$(result hold)" "ok held 5 s, echo ping" "a connection opened before the expiry lives on past it"
assert_match "$(result again)" "^answer NOERROR addrs=$HOST_A ttl=[12] from " "a fresh query answers again"
assert_eq "$(result renewed)" "ok hello $HOST_A:443" "... and opens $HOST_A:443 again"

# Grace: the entry outlives the answer's TTL by dns.grace (2 s here), and the
# answer still says the TTL alone.
W_CONFIG=$(dns_config grace '"grace": 2')
sess='NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
P='"$PROBE"'
echo "dns=$($P dns $NS short.test 2>&1 | tail -n 1)"
sleep 3
echo "ingrace=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
sleep 2.5
echo "expired=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"'
errand_run --egress short.test -- sh -c "$sess"
assert_match "$(result dns)" "^answer NOERROR addrs=$HOST_A ttl=2 from " "with grace 2, the answer's TTL is still 2"
assert_eq "$(result ingrace)" "ok hello $HOST_A:443" "3 s after the answer (TTL 2 + grace 2), $HOST_A:443 is reached"
assert_eq "$(result expired)" EPERM "5.5 s after it, a new connect is refused"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=expired")" 1 "... with reason expired"

# A name past the cap, asked again 2 s later, is answered from the worker's
# cache with what the allow entries written for the first answer still
# cover: less than the cap, so the entries outlive it, and no new write (a
# round trip to the agent each answer, before). Under the floor, the entries
# are written again and the answer has the floor.
sess='NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
P='"$PROBE"'
echo "first=$($P dns $NS long.test 2>&1 | tail -n 1)"
sleep 2
echo "cached=$($P dns $NS long.test 2>&1 | tail -n 1)"
echo "within=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"'
W_CONFIG=$(dns_config cap10 '"ttlCap": 10')
errand_run --egress long.test -- sh -c "$sess"
assert_match "$(result first)" "^answer NOERROR addrs=$HOST_A ttl=10 from " "ttlCap 10: long.test is answered with 10"
assert_match "$(result cached)" "^answer NOERROR addrs=$HOST_A ttl=[1-7] from " "2 s later, with what its entries still cover (7 or less), not the cap"
assert_eq "$(result within)" "ok hello $HOST_A:443" "... and the address is reached within it"
W_CONFIG=$(dns_config cap10floor8 '"ttlCap": 10, "ttlFloor": 8')
errand_run --egress long.test -- sh -c "$sess"
assert_match "$(result cached)" "^answer NOERROR addrs=$HOST_A ttl=8 from " "with ttlFloor 8, what is left of the cached cap is under the floor: the entries are written again, the answer has the floor"
assert_eq "$(result within)" "ok hello $HOST_A:443" "... and the address is reached"

# The worker's cache keeps a name no longer than the cap either: asked
# again once the cap is over, the name is asked upstream again, so a change
# of its addresses is seen within ttlCap, not within the upstream's TTL.
sess='NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
P='"$PROBE"'
echo "first=$($P dns $NS long.test 2>&1 | tail -n 1)"
sleep 3
echo "again=$($P dns $NS long.test 2>&1 | tail -n 1)"'
W_CONFIG=$(dns_config cap2 '"ttlCap": 2, "ttlFloor": 1')
before=$(dns_query_count long.test)
errand_run --egress long.test -- sh -c "$sess"
assert_match "$(result again)" "^answer NOERROR addrs=$HOST_A ttl=2 from " "ttlCap 2: long.test asked 3 s later is answered with the cap"
assert_eq "$(($(dns_query_count long.test) - before))" 2 "... and was asked upstream twice: the cache kept it no longer than the cap"

world_finish
