#!/bin/bash
# Guarantee: IPv4 carried in the IPv6 forms IPv4-compatible (::a.b.c.d), SIIT (::ffff:0:a.b.c.d) and ISATAP (...:5efe:a.b.c.d, ...:200:5efe:a.b.c.d under any /64) is judged by the hooks as the IPv4 it carries: a private host in any of them is refused with reason forbidden, in open mode too.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# $HOST_PRIV is 10.99.0.10 (0a63:000a); $HOST_A is 198.18.1.10 (c612:010a),
# public in this world.
W_CONFIG=$(world_config open '"egressPorts": [443]')
errand_run --egress open -- sh -c "$(probe_script \
	compat "tcp ::a63:a 443" \
	siit "tcp ::ffff:0:a63:a 443" \
	isatap "tcp 2606:4700::5efe:a63:a 443" \
	isatapg "tcp 2606:4700::200:5efe:a63:a 443" \
	isatapmeta "tcp 2a00:1450:4001:1::5efe:a9fe:a9fe 443" \
	compatpub "tcp ::c612:10a 443" \
	isatappub "tcp 2606:4700::5efe:c612:10a 443" \
	plain6 "tcp 2606:4700::1 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result compat)" EPERM "IPv4-compatible ::10.99.0.10 is refused at connect"
assert_eq "$(event_count "proto=tcp addr=::a63:a port=443 reason=forbidden hook=connect6")" 1 "... as forbidden"
assert_eq "$(result siit)" EPERM "SIIT ::ffff:0:10.99.0.10 is refused at connect"
assert_eq "$(event_count "proto=tcp addr=::ffff:0:a63:a port=443 reason=forbidden hook=connect6")" 1 "... as forbidden"
assert_eq "$(result isatap)" EPERM "ISATAP 2606:4700::5efe:10.99.0.10 (a public /64) is refused at connect"
assert_eq "$(event_count "proto=tcp addr=2606:4700::5efe:a63:a port=443 reason=forbidden hook=connect6")" 1 "... as forbidden"
assert_eq "$(result isatapg)" EPERM "ISATAP with the global bit (200:5efe) of 10.99.0.10 is refused"
assert_eq "$(event_count "proto=tcp addr=2606:4700::200:5efe:a63:a port=443 reason=forbidden hook=connect6")" 1 "... as forbidden"
assert_eq "$(result isatapmeta)" EPERM "ISATAP of the metadata address is refused"
assert_eq "$(result compatpub)" EPERM "IPv4-compatible is a forbidden form even for a public IPv4 ($HOST_A)"
assert_eq "$(event_count "proto=tcp addr=::c612:10a port=443 reason=forbidden hook=connect6")" 1 "... as forbidden"
# Sessions have no IPv6: what the hooks admit fails in the stack, not with EPERM.
assert_match "$(result isatappub)" '^E(NETUNREACH|ADDRNOTAVAIL)$' "ISATAP of the public $HOST_A under a public /64 is judged public (admitted; the session has no IPv6)"
assert_match "$(result plain6)" '^E(NETUNREACH|ADDRNOTAVAIL)$' "a plain public IPv6 address is admitted by the hooks (control)"
assert_eq "$(event_count "addr=2606:4700::5efe:c612:10a ")" 0 "... with no event"
assert_empty "$(grep -v "^accept $HOST_A:443 " "$W_DIR/wan-serve.log")" "no forbidden server saw a connection"

world_finish
