#!/bin/bash
# Guarantee: a DNS query the session sends to any address (UDP sendto, connected UDP, TCP; v4 or v4-mapped) is answered by errand's responder, under the address asked, and its answer opens the name as any other; the server at the address named sees nothing.
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

# Decoy servers on $HOST_B:53 and $HOST_PRIV:53 that answer api.test with
# another address: an answer from them would show.
printf '%s\n' "api.test A 198.18.1.99 99" >"$W_DIR/decoy.zone"
for a in $HOST_B $HOST_PRIV; do
	: >"$W_DIR/decoy-$a.log"
	_start_ready wan "$W_DIR/decoy-$a.out" "$PROBE" dns-serve --zone "$W_DIR/decoy.zone" \
		--log "$W_DIR/decoy-$a.log" "$a:53" || exit 1
done
assert_eq "$(in_host "$PROBE" dns $HOST_B api.test)" "answer NOERROR addrs=198.18.1.99 ttl=99 from $HOST_B:53" \
	"control: the decoy on $HOST_B:53 answers from the agent namespace"
assert_eq "$(in_host "$PROBE" dns $HOST_B api.test --tcp)" "answer NOERROR addrs=198.18.1.99 ttl=99 from $HOST_B:53" \
	"control: ... over TCP too"
: >"$W_DIR/decoy-$HOST_B.log"

errand_run --egress api.test -- sh -c "$(probe_script \
	before "tcp $HOST_A 443" \
	udp "dns $HOST_B api.test" \
	conn "dns $HOST_B api.test --connected" \
	tcp "dns $HOST_B api.test --tcp" \
	mapped "dns ::ffff:$HOST_B api.test" \
	mappedtcp "dns ::ffff:$HOST_B api.test --tcp" \
	priv "dns $HOST_PRIV api.test" \
	privtcp "dns $HOST_PRIV api.test --tcp" \
	up "dns $DNS_UPSTREAM other.test" \
	after "tcp $HOST_A 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result before)" EPERM "before any answer, $HOST_A:443 is refused"
# TTL 60, or a little less once answered from errand's cache.
for k in udp conn tcp mapped mappedtcp; do
	assert_match "$(result $k)" "^answer NOERROR addrs=$HOST_A ttl=(60|59|58) from $HOST_B:53\$" \
		"$k query to $HOST_B:53: errand's answer ($HOST_A), from $HOST_B:53 as asked"
done
for k in priv privtcp; do
	assert_match "$(result $k)" "^answer NOERROR addrs=$HOST_A ttl=(60|59|58) from $HOST_PRIV:53\$" \
		"$k query to the private $HOST_PRIV:53: errand's answer, from $HOST_PRIV:53"
done
assert_match "$(result up)" "^answer NXDOMAIN addrs= ttl=- from $DNS_UPSTREAM:53$" \
	"a query sent straight to the upstream's address is errand's too (other.test: NXDOMAIN)"
assert_eq "$(result after)" "ok hello $HOST_A:443" "the answer opened $HOST_A:443"
assert_eq "$(event_count "port=53 ")" 0 "no refusal event for port-53 traffic"
sleep 0.3
assert_empty "$(cat "$W_DIR/decoy-$HOST_B.log")" "the server on $HOST_B:53 saw nothing"
assert_empty "$(cat "$W_DIR/decoy-$HOST_PRIV.log")" "the server on $HOST_PRIV:53 saw nothing"
assert_eq "$(dns_query_count other.test)" 0 "the upstream never saw other.test"

world_finish
