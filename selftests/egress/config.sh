#!/bin/bash
# Guarantee: the configuration file says what the flags say: sandbox.egress.allow with sandbox.egress.pins, sandbox.egress.mode open with sandbox.egressPorts, and sandbox.network none.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

W_CONFIG=$(world_config allow '' '"allow": ["a.test"], "pins": { "a.test": "'$HOST_A':443" }')
errand_run -- sh -c "$(probe_script a "tcp $HOST_A 443" b "tcp $HOST_B 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result a)" "ok hello $HOST_A:443" "sandbox.egress.allow + pins: the pinned host is reached"
assert_eq "$(result b)" EPERM "... and another host refused"
assert_eq "$(event_count "addr=$HOST_B port=443 reason=not-allowed")" 1 "... with reason not-allowed"

W_CONFIG=$(world_config openmode '"egressPorts": [8080]' '"mode": "open"')
errand_run -- sh -c "$(probe_script a8080 "tcp $HOST_A 8080" a443 "tcp $HOST_A 443" priv "tcp $HOST_PRIV 443")"
assert_eq "$(result a8080)" "ok hello $HOST_A:8080" "sandbox.egress.mode open with egressPorts [8080] reaches $HOST_A:8080"
assert_eq "$(result a443)" EPERM "... and refuses $HOST_A:443"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=port")" 1 "... with reason port"
assert_eq "$(result priv)" EPERM "... and refuses the private host"

W_CONFIG=$(world_config nonet '"network": "none"')
errand_run -- sh -c "$(net_script)$(probe_script a "tcp $HOST_A 443")"
assert_eq "$(result links)" "lo " "sandbox.network none: only lo"
assert_eq "$(result a)" EPERM "... and every connect refused"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=no-network")" 1 "... with reason no-network"

world_finish
