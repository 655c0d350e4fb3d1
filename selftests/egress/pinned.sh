#!/bin/bash
# Guarantee: a pinned name allowed with --egress reaches exactly its pinned address and port; the same address on another port and any other host are refused with EPERM (not-allowed).
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --pin a.test=$HOST_A:443 --egress a.test:443 -- sh -c "$(probe_script \
	a443 "tcp $HOST_A 443" \
	a8080 "tcp $HOST_A 8080" \
	b443 "tcp $HOST_B 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result a443)" "ok hello $HOST_A:443" "the pinned host $HOST_A:443 is reached"
assert_eq "$(result a8080)" EPERM "the pinned host on another port ($HOST_A:8080) is refused"
assert_eq "$(result b443)" EPERM "another public host ($HOST_B:443) is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=8080 reason=not-allowed hook=connect4")" 1 \
	"one not-allowed event for $HOST_A:8080"
assert_eq "$(event_count "proto=tcp addr=$HOST_B port=443 reason=not-allowed hook=connect4")" 1 \
	"one not-allowed event for $HOST_B:443"
assert_eq "$(event_count "addr=$HOST_A port=443 ")" 0 "no refusal event for the allowed connect"
assert_match "$(cat "$W_DIR/wan-serve.log")" "^accept $HOST_A:443 from 198\.18\.0\.1:" \
	"the server saw the session's connection, NATed to the agent's address"
assert_eq "$(grep -c -v "^accept $HOST_A:443 " "$W_DIR/wan-serve.log")" 0 "no other server saw a connection"

# The pin's port is what --egress names: a pin without a port, allowed on 8080.
errand_run --pin a.test=$HOST_A --egress a.test:8080 -- sh -c "$(probe_script \
	a8080 "tcp $HOST_A 8080" \
	a443 "tcp $HOST_A 443")"
assert_eq "$(result a8080)" "ok hello $HOST_A:8080" "a port-less pin allowed on :8080 reaches $HOST_A:8080"
assert_eq "$(result a443)" EPERM "... and not $HOST_A:443"

# A pin without --egress for its name allows nothing.
errand_run --pin a.test=$HOST_A:443 -- sh -c "$(probe_script a443 "tcp $HOST_A 443")"
assert_eq "$(result a443)" EPERM "a pin alone, without --egress naming it, allows nothing"

world_finish
