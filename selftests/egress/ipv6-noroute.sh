#!/bin/bash
# Guarantee: where the agent's namespace has no IPv6 route out, the agent says so at start (and errandctl doctor, as information, not a gap), sessions get no IPv6 route (only the on-link pair that carries their DNS) and no NAT66 table, AAAA answers are still filtered and programmed, and IPv6 that root in the session routes out itself is dropped at the backstop (reason ipv6).
# shellcheck disable=SC2016 # $NS expands in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns "v6only.test AAAA $HOST6_A 60" "ula.test AAAA $HOST6_PRIV 60" || exit 1
W_PUBLIC='"198.18.0.0/15", "2001:2::/48"'
W_CONFIG=$(dns_config dns6)
assert_empty "$(in_host "$IP" -6 route show default)" "the world's agent namespace has no IPv6 default route"
agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "no IPv6 route out of this namespace: sessions get IPv6 for their DNS alone" \
	"the agent says at start that sessions get no IPv6 route"
assert_eq "$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json | python3 -c 'import json,sys; c=json.load(sys.stdin)["checks"]["ipv6"]; print(c["state"], "no IPv6 route out" in c["detail"])')" "info True" \
	"errandctl doctor says so too (check ipv6: info), not as a gap"

errand_start --egress v6only.test --egress ula.test -- sh -c "$(session_ns_sh)$(probe_script \
	aaaa 'dns $NS v6only.test --type AAAA' \
	ula 'dns $NS ula.test --type AAAA' \
	conn "tcp $HOST6_A 443")"'echo "routes6=$(awk '"'"'$10 != "lo" { print $1 "/" $2 }'"'"' /proc/net/ipv6_route | tr "\n" " ")"; sleep 60' ||
	exit 1
bg_wait '^routes6=' || exit 1
assert_match "$(bg_result aaaa)" "^answer NOERROR addrs=$HOST6_A " "an AAAA answer still carries the public address"
assert_match "$(bg_result ula)" "^answer NOERROR addrs= " "... and drops a unique-local one"
assert_eq "$(bg_result conn)" ENETUNREACH "a connect to it finds no IPv6 route"
assert_no_match "$(bg_result routes6)" "0{32}/00" "the session has no IPv6 default route: $(bg_result routes6)"
assert_match "$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION")" \
	"^address6  fd65:7272:616e::[0-9a-f:]+ via fd65:7272:616e::[0-9a-f:]+ \(DNS only: no IPv6 route out\)$" \
	"errandctl show gives the session's IPv6 pair as DNS only"
assert_eq "$(in_host nft list tables ip6 >/dev/null && echo listed)" listed "nft lists the agent namespace's ip6 tables"
assert_empty "$(in_host nft list tables ip6 | grep errand-)" "... and no NAT66 table was made"

# Root in the session's namespace routes IPv6 out by itself: the backstop
# lets only its DNS through.
gw6=$(in_host "$IP" -6 -o addr show dev "eh$SESSION" | awk '{ sub("/.*", "", $4); print $4 }' | head -n 1)
sess6=$(in_session "$SESSION" "$IP" -6 -o addr show dev eth0 scope global | awk '{ sub("/.*", "", $4); print $4 }')
mac=$(in_host "$IP" -o link show "eh$SESSION" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
in_session "$SESSION" "$IP" -6 route add default via "$gw6" dev eth0
observe_start "$SESSION" --json
sleep 0.3
assert_eq "$(in_session "$SESSION" "$PROBE" ip6 eth0 plain --mac "$mac" --src "$sess6" --dst $HOST6_A --tcp 443)" sent \
	"root in the session writes a SYN to [$HOST6_A]:443, whose AAAA answer the session has"
sleep 0.5
observe_stop
assert_eq "$(grep -c '"addr":"::","port":0,"reason":"ipv6","hook":"tc"' "$OBSERVE_OUT")" 1 "... dropped at the backstop as ipv6"
assert_match "$(in_session "$SESSION" "$PROBE" dns "$gw6" v6only.test --type AAAA)" "^answer NOERROR addrs=$HOST6_A " \
	"its IPv6 DNS to the responder still passes"
errand_stop
agent_stop
world_finish
