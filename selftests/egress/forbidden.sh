#!/bin/bash
# Guarantee: forbidden ranges (private, metadata, the agent namespace's own addresses, v4 carried in v6 forms) are refused even in open mode; only an operator's pin reaches a private address; without sandbox.egress.treatAsPublic a session has no public-range maps and a host in a forbidden range (the world's 198.18.0.0/15) is refused in open mode too.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# The gateway is known only inside the session, as its nameserver: read it
# there, then probe it.
# shellcheck disable=SC2016
gw_probe='gw=$(sed -n "s/^nameserver *//p" /etc/resolv.conf); echo "gw=$gw"; echo "gwtcp=$('"$PROBE"' tcp "$gw" 9999 2>&1 | tail -n 1)"; '
W_CONFIG=$(world_config open '"egressPorts": [443, 80, 8080, 9000]')
errand_run --egress open -- sh -c "$(net_script)$gw_probe$(probe_script \
	pub "tcp $HOST_A 443" \
	priv "tcp $HOST_PRIV 443" \
	meta "tcp $HOST_META 80" \
	agent "tcp $AGENT_ADDR 9000" \
	mapped "tcp ::ffff:$HOST_PRIV 8443" \
	nat64 "tcp 64:ff9b::a63:a 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result pub)" "ok hello $HOST_A:443" "open mode reaches the public host $HOST_A:443 (control)"
assert_eq "$(result priv)" EPERM "the private host $HOST_PRIV:443 is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_PRIV port=443 reason=forbidden hook=connect4")" 1 \
	"one forbidden event for $HOST_PRIV:443"
assert_eq "$(result meta)" EPERM "the metadata address $HOST_META:80 is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_META port=80 reason=forbidden hook=connect4")" 1 \
	"one forbidden event for $HOST_META:80"
gw=$(result gw)
assert_match "$gw" '^10\.213\.[0-9]+\.[0-9]+$' "the session's gateway is in the pool (10.213.0.0/16)"
assert_eq "$(result gwtcp)" EPERM "the gateway $gw:9999 (the agent namespace) is refused"
assert_eq "$(event_count "proto=tcp addr=$gw port=9999 reason=self hook=connect4")" 1 \
	"one self event for the gateway"
assert_eq "$(result agent)" EPERM "the agent namespace's own address $AGENT_ADDR:9000 is refused though inside treatAsPublic"
assert_eq "$(event_count "proto=tcp addr=$AGENT_ADDR port=9000 reason=self hook=connect4")" 1 \
	"one self event for $AGENT_ADDR:9000"
assert_eq "$(result mapped)" EPERM "::ffff:$HOST_PRIV (v4-mapped) port 8443 is refused"
assert_eq "$(event_count "reason=forbidden hook=connect6")" 2 \
	"forbidden events from connect6 for the v4-mapped and the NAT64 form"
assert_eq "$(result nat64)" EPERM "64:ff9b::a63:a (NAT64 of $HOST_PRIV) port 443 is refused"
assert_empty "$(grep -v "^accept $HOST_A:443 " "$W_DIR/wan-serve.log")" "no forbidden server saw a connection"
assert_empty "$(cat "$W_DIR/host-serve.log")" "the agent's service on $AGENT_ADDR:9000 saw no connection"

# Restricted mode: the operator's pin is the one way to a private address.
W_CONFIG=$(world_config default)
errand_run --pin priv.test=$HOST_PRIV:443 --egress priv.test:443 -- sh -c "$(probe_script \
	priv "tcp $HOST_PRIV 443" \
	meta "tcp $HOST_META 80")"
assert_eq "$(result priv)" "ok hello $HOST_PRIV:443" "a pinned private host $HOST_PRIV:443 is reached"
assert_eq "$(result meta)" EPERM "... while the metadata address stays refused"
errand_run --egress priv.test:443 -- sh -c "$(probe_script priv "tcp $HOST_PRIV 443")"
assert_eq "$(result priv)" EPERM "without the pin, $HOST_PRIV:443 is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_PRIV port=443 reason=forbidden")" 1 \
	"... with reason forbidden"

# The agent namespace's own address stays refused even when pinned.
errand_run --pin me.test=$AGENT_ADDR:9000 --egress me.test:9000 -- sh -c "$(probe_script me "tcp $AGENT_ADDR 9000")"
assert_eq "$RUN_RC" 125 "a pin to the agent's own address $AGENT_ADDR is refused at start"
assert_contains "$RUN_STDERR" "own addresses" "... saying it names this host's own address"
assert_empty "$(leftovers)" "... and leaving nothing behind"
assert_empty "$(cat "$W_DIR/host-serve.log")" "the agent's service on $AGENT_ADDR:9000 saw no connection"

# Without treatAsPublic: the world's hosts are in 198.18.0.0/15, a forbidden
# range, and no map of the session's excepts any of it.
W_PUBLIC=
W_CONFIG=$(world_config nopublic)
errand_start --egress open -- sh -c "while :; do $(probe_script a "tcp $HOST_A 443") echo round; sleep 0.2; done" ||
	{ world_finish; exit 1; }
bg_rounds 1 10
maps=$(session_pins map)
assert_contains "$maps" "allow config counters events flows" "without treatAsPublic, the session has its maps"
assert_not_contains "$maps" "public" "... but no public-range map ($maps)"
assert_eq "$(bg_result a)" EPERM "$HOST_A:443, in a forbidden range, is refused in open mode"
kill "$BG_PID" 2>/dev/null
wait "$BG_PID" 2>/dev/null
assert_ge "$(event_count "proto=tcp addr=$HOST_A port=443 reason=forbidden")" 1 "... with reason forbidden"
assert_empty "$(leftovers)" "... and leaving nothing behind"

world_finish
