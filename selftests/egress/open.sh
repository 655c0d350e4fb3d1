#!/bin/bash
# Guarantee: --egress open reaches any public address on sandbox.egressPorts (default 443) and nothing else: forbidden ranges and other ports stay refused.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --egress open -- sh -c "$(probe_script \
	a443 "tcp $HOST_A 443" \
	b443 "tcp $HOST_B 443" \
	a8080 "tcp $HOST_A 8080" \
	priv "tcp $HOST_PRIV 443" \
	meta "tcp $HOST_META 80" \
	udp "udp $HOST_A 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result a443)" "ok hello $HOST_A:443" "open mode reaches $HOST_A:443"
assert_eq "$(result b443)" "ok hello $HOST_B:443" "open mode reaches $HOST_B:443"
assert_eq "$(result a8080)" EPERM "a port outside egressPorts ($HOST_A:8080) is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=8080 reason=port hook=connect4")" 1 "one port event for it"
assert_eq "$(result priv)" EPERM "the private host $HOST_PRIV:443 is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_PRIV port=443 reason=forbidden hook=connect4")" 1 "one forbidden event for it"
assert_eq "$(result meta)" EPERM "the metadata address $HOST_META:80 is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_META port=80 reason=forbidden hook=connect4")" 1 "one forbidden event for it"
assert_eq "$(result udp)" EPERM "UDP other than DNS is refused in open mode too"
assert_eq "$(event_count "proto=udp addr=$HOST_A port=443 reason=udp hook=sendmsg4")" 1 "one udp event for it"
assert_empty "$(grep -Ev "^accept ($HOST_A|$HOST_B):443 " "$W_DIR/wan-serve.log")" "no other server saw a connection"

# egressPorts from the configuration replaces the default.
W_CONFIG=$(world_config ports '"egressPorts": [8080]')
errand_run --egress open -- sh -c "$(probe_script \
	a8080 "tcp $HOST_A 8080" \
	a443 "tcp $HOST_A 443")"
assert_eq "$(result a8080)" "ok hello $HOST_A:8080" "with egressPorts [8080], $HOST_A:8080 is reached"
assert_eq "$(result a443)" EPERM "... and $HOST_A:443 is refused"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=port")" 1 "... with reason port"

world_finish
