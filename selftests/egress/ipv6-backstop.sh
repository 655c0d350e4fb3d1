#!/bin/bash
# Guarantee: the tc backstop judges a session's IPv6 as its IPv4: the source must be the session's own address, extension headers are walked to the transport header (a chain past 8 is refused) and the transport judged by the same policy, fragments, routing headers, ICMPv6 (but neighbour discovery to the gateway) and UDP (but DNS to the responder) are dropped (the kernel's own MLD reports without an event or a count: an idle session's show reads tcDropped 0): raw IPv6 from root in the session's namespace reaches only what a connect could.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_v6

errand_start --egress open || { world_finish; exit 1; }
sess6=$(in_session "$SESSION" "$IP" -6 -o addr show dev eth0 scope global | awk '{ sub("/.*", "", $4); print $4 }')
gw6=$(in_session "$SESSION" "$IP" -6 route show default | awk '{ print $3 }')
host_if=eh$SESSION
mac=$(in_host "$IP" -o link show "$host_if" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
assert_match "$sess6" "^fd65:7272:616e::" "the session's IPv6 address is from the default addressPool6 ($sess6)"
assert_match "$gw6" "^fd65:7272:616e::" "its default IPv6 route is via its gateway ($gw6)"
assert_match "$mac" "^[0-9a-f:]{17}$" "the gateway's link address is $mac"

# The kernel's own MLD reports for the session's addresses are dropped
# without a count: an idle session's show has no drop it did not make.
sleep 1
assert_le 1 "$(in_session "$SESSION" awk '$1 == "Icmp6OutType143" { print $2 }' /proc/net/snmp6)" \
	"the session's kernel sent its MLD reports"
assert_eq "$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["tcDropped"])')" 0 \
	"... which show does not count as dropped (tcDropped 0 while the session is idle)"

send() { # KIND DST [ARGS...]: root in the session writes one IPv6 datagram to the gateway
	local kind=$1 dst=$2
	shift 2
	in_session "$SESSION" "$PROBE" ip6 eth0 "$kind" --mac "$mac" --src "$sess6" --dst "$dst" "$@"
}
observe_start "$SESSION" --json
sleep 0.3
: >"$W_DIR/wan-sniff.log"
assert_eq "$(send plain $HOST6_A --tcp 443)" sent "control: a TCP SYN to [$HOST6_A]:443 (open mode)"
assert_eq "$(send dst $HOST6_A --tcp 443)" sent "the same behind a destination-options header"
sleep 0.5
assert_eq "$(grep -c "proto=6 src=$AGENT_ADDR6 dst=$HOST6_A" "$W_DIR/wan-sniff.log")" 1 \
	"the plain SYN reached the wan, from the agent's address (NAT66)"
assert_eq "$(grep -c "proto=60 src=$AGENT_ADDR6 dst=$HOST6_A" "$W_DIR/wan-sniff.log")" 1 \
	"... and so did the one behind destination options: the walk found its TCP header"
: >"$W_DIR/wan-sniff.log"
assert_eq "$(send dst $HOST6_A --tcp 8080)" sent "a SYN behind destination options to [$HOST6_A]:8080 (not in egressPorts)"
assert_eq "$(send frag $HOST6_A --tcp 443)" sent "a first fragment of a SYN to [$HOST6_A]:443"
assert_eq "$(send frag $HOST6_A)" sent "a first fragment of a UDP datagram"
assert_eq "$(send long $HOST6_A --tcp 443)" sent "a SYN behind nine destination-options headers"
assert_eq "$(send rh $HOST6_A --tcp 443)" sent "a SYN with a routing header"
assert_eq "$(send icmp $HOST6_A)" sent "an ICMPv6 echo request"
assert_eq "$(send plain $HOST6_A)" sent "a UDP datagram to [$HOST6_A]:443"
assert_eq "$(send plain $HOST6_PRIV --tcp 443)" sent "a SYN to the unique-local [$HOST6_PRIV]:443"
assert_eq "$(send plain $AGENT_ADDR6 --tcp 9000)" sent "a SYN to the agent's own [$AGENT_ADDR6]:9000"
assert_eq "$(in_session "$SESSION" "$PROBE" ip6 eth0 plain --mac "$mac" --src 2001:2::99 --dst $HOST6_A --tcp 443)" sent \
	"a SYN to [$HOST6_A]:443 from a spoofed source"
sleep 0.5
observe_stop
assert_empty "$(cat "$W_DIR/wan-sniff.log")" "none of them reached the wan"
assert_empty "$(grep "$HOST6_PRIV" "$W_DIR/wan6-serve.log")" "the unique-local host saw nothing"
ev() { grep -c "\"addr\":\"$1\",\"port\":$2,\"reason\":\"$3\",\"hook\":\"tc\"" "$OBSERVE_OUT"; }
assert_eq "$(ev $HOST6_A 8080 port)" 1 "the SYN behind destination options is judged by its port: port"
assert_eq "$(ev $HOST6_A 0 fragment)" 2 "the fragments: fragment"
assert_eq "$(ev :: 0 ip-options)" 2 "the long chain and the routing header: ip-options"
assert_eq "$(ev $HOST6_A 0 proto)" 1 "the echo request: proto"
assert_eq "$(ev $HOST6_A 443 udp)" 1 "the UDP datagram: udp"
assert_eq "$(ev $HOST6_PRIV 443 forbidden)" 1 "the unique-local SYN: forbidden"
assert_eq "$(ev $AGENT_ADDR6 9000 self)" 1 "the agent's own address: self"
assert_eq "$(ev $HOST6_A 0 spoof)" 1 "the spoofed source: spoof"
errand_stop
world_finish
