#!/bin/bash
# Guarantee: with --egress none a session has no network at all (only lo, no route) and every connect and send is refused at once with EPERM, one no-network event each.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --egress none -- sh -c "$(net_script)$(probe_script \
	tcp "tcp $HOST_A 443" \
	udp "udp $HOST_A 443" \
	lo "tcp 127.0.0.1 9")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result links)" "lo " "the session has no link but lo"
assert_no_match "$(result routes)" 'default' "the session has no default route"
assert_eq "$(result tcp)" EPERM "TCP connect to $HOST_A:443 is refused with EPERM"
assert_eq "$(result udp)" EPERM "UDP send to $HOST_A:443 is refused with EPERM"
assert_eq "$(result lo)" ECONNREFUSED "loopback stays the session's own (nothing listens there: ECONNREFUSED, not EPERM)"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 reason=no-network hook=connect4")" 1 \
	"exactly one no-network event for the TCP connect"
assert_eq "$(event_count "proto=udp addr=$HOST_A port=443 reason=no-network hook=sendmsg4")" 1 \
	"exactly one no-network event for the UDP send"
assert_eq "$(event_count .)" 2 "no other refusal events"
assert_empty "$(cat "$W_DIR/wan-serve.log")" "nothing reached the wan servers"

world_finish
