#!/bin/bash
# Guarantee: DNS rebinding gets nowhere: forbidden addresses (loopback, private, metadata, v4-mapped private, the agent's own) are dropped from every answer and never opened, so their connects stay EPERM (loopback stays the session's own); a name whose answer held only such addresses gets NODATA, a mixed answer keeps its public addresses, and each loss is a denied-name event (reason=forbidden).
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)
: >"$W_DIR/wan-serve.log"

errand_run --egress rebind-lo.test --egress rebind-ten.test --egress rebind-priv.test \
	--egress rebind-meta.test:80 --egress rebind-mapped.test --egress rebind-agent.test:9000 \
	--egress mixed.test -- sh -c "$(session_ns_sh)$(probe_script \
	lo 'dns $NS rebind-lo.test' \
	loconn "tcp 127.0.0.1 443" \
	ten 'dns $NS rebind-ten.test' \
	tenconn "tcp 10.0.0.1 443 --timeout 1" \
	priv 'dns $NS rebind-priv.test' \
	privtcp 'dns $NS rebind-priv.test --tcp' \
	privconn "tcp $HOST_PRIV 443" \
	meta 'dns $NS rebind-meta.test' \
	metaconn "tcp $HOST_META 80" \
	mapped 'dns $NS rebind-mapped.test --type AAAA' \
	mappedconn "tcp ::ffff:10.0.0.1 8443" \
	agent 'dns $NS rebind-agent.test' \
	agentconn "tcp $AGENT_ADDR 9000" \
	mixed 'dns $NS mixed.test' \
	mixedpub "tcp $HOST_A 443" \
	mixedpriv "tcp $HOST_PRIV 443" \
	gaipriv "resolve rebind-priv.test" \
	gaimixed "resolve mixed.test")"
assert_eq "$RUN_RC" 0 "the session ran"
for k in lo ten priv privtcp meta mapped agent; do
	assert_match "$(result $k)" "^answer NOERROR addrs= ttl=- from " "$k: the forbidden address is dropped, NODATA"
done
assert_match "$(result mixed)" "^answer NOERROR addrs=$HOST_A ttl=[0-9]+ from " \
	"mixed.test: the public $HOST_A kept, the private $HOST_PRIV dropped"
assert_eq "$(result mixedpub)" "ok hello $HOST_A:443" "mixed.test's public address $HOST_A:443 is reached"
assert_eq "$(result loconn)" ECONNREFUSED "127.0.0.1 is the session's own loopback (nothing listens: ECONNREFUSED)"
assert_eq "$(result tenconn)" EPERM "10.0.0.1:443 stays refused"
assert_eq "$(result privconn)" EPERM "$HOST_PRIV:443 stays refused"
assert_eq "$(result mixedpriv)" EPERM "... also after mixed.test's answer"
assert_eq "$(result metaconn)" EPERM "$HOST_META:80 stays refused"
assert_eq "$(result mappedconn)" EPERM "::ffff:10.0.0.1:8443 stays refused"
assert_eq "$(result agentconn)" EPERM "the agent's own $AGENT_ADDR:9000 stays refused"
assert_match "$(result gaipriv)" "^noname EAI_" "getaddrinfo(rebind-priv.test) finds no address"
assert_eq "$(result gaimixed)" "resolved $HOST_A" "getaddrinfo(mixed.test) gives only $HOST_A"
assert_eq "$(event_count "proto=tcp addr=10.0.0.1 port=443 reason=forbidden")" 1 "10.0.0.1:443: a forbidden event"
assert_eq "$(event_count "proto=tcp addr=$HOST_PRIV port=443 reason=forbidden")" 1 \
	"$HOST_PRIV:443: a forbidden event (once, the log's limit)"
assert_eq "$(event_count "proto=tcp addr=$HOST_META port=80 reason=forbidden")" 1 "$HOST_META:80: a forbidden event"
assert_eq "$(event_count "port=8443 reason=forbidden hook=connect6")" 1 "::ffff:10.0.0.1:8443: a forbidden event from connect6"
assert_eq "$(event_count "proto=tcp addr=$AGENT_ADDR port=9000 reason=self")" 1 "$AGENT_ADDR:9000: a self event"
for n in rebind-lo.test rebind-ten.test rebind-priv.test rebind-meta.test rebind-mapped.test rebind-agent.test mixed.test; do
	assert_eq "$(denial_count "name=$n type=(A|AAAA) reason=forbidden")" 1 "a denied event for $n, reason forbidden"
done
assert_empty "$(grep -v "^accept $HOST_A:443 " "$W_DIR/wan-serve.log")" "no server but $HOST_A:443 saw a connection"
assert_empty "$(cat "$W_DIR/host-serve.log")" "the agent's service saw no connection"

world_finish
