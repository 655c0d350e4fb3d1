#!/bin/bash
# Guarantee: the tc backstop drops IPv4 packets carrying options (a loose or strict source route through the gateway, even to the responder's port 53) before anything passes, and the host side of every session's veth has accept_source_route=0, accept_redirects=0, send_redirects=0 and rp_filter=1, whatever the agent namespace's defaults.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# The agent namespace (the world's host namespace, never the root one)
# accepts source routes on all its links, as a careless host might.
in_host sysctl -qw net.ipv4.conf.all.accept_source_route=1
assert_eq "$(in_host sysctl -n net.ipv4.conf.all.accept_source_route)" 1 \
	"the world's agent namespace accepts source routes (conf/all)"
# Who sees what arrives in the wan: TCP and UDP, whatever the payload.
: >"$W_DIR/srr-sniff.log"
_start_ready wan "$W_DIR/srr-sniff.out" "$PROBE" sniff --log "$W_DIR/srr-sniff.log" 6 17 || exit 1
world_serve wan "$W_DIR/srr-serve.log" "udp:$HOST_PRIV:53" "tcp:$HOST_A:53" || exit 1

errand_start --egress open || { world_finish; exit 1; }
gw=$(in_session "$SESSION" "$IP" route show default | awk '{ print $3 }')
host_if=$(in_host "$IP" -o -4 addr show | awk -v g="$gw" '$4 ~ "^" g "/" { print $2 }')
sess=$(in_session "$SESSION" "$IP" -4 -o addr show dev eth0 | awk '{ print $4 }' | cut -d/ -f1)
assert_match "$gw" '^10\.213\.' "the session's gateway is in the pool"
assert_match "$host_if" '^eh' "the host side of the session's veth is $host_if"

for knob in accept_source_route accept_redirects send_redirects; do
	assert_eq "$(in_host cat "/proc/sys/net/ipv4/conf/$host_if/$knob")" 0 "$host_if: $knob is 0"
done
assert_eq "$(in_host cat "/proc/sys/net/ipv4/conf/$host_if/rp_filter")" 1 "$host_if: rp_filter is 1 (strict)"

# Root in the session's namespace (outside its cgroup: no hook, only the
# backstop) source-routes through the gateway, to its port 53 first.
assert_eq "$(in_session "$SESSION" "$PROBE" srr $HOST_PRIV 53 --via "$gw")" sent \
	"root in the session sends UDP to $gw:53, loose-source-routed on to $HOST_PRIV:53"
assert_eq "$(in_session "$SESSION" "$PROBE" srr $HOST_PRIV 53 --via "$gw" --strict)" sent \
	"... and strict-source-routed"
assert_eq "$(in_session "$SESSION" "$PROBE" srr $HOST_A 53 --via "$gw" --tcp)" ETIMEDOUT \
	"a TCP SYN to $gw:53 source-routed on to $HOST_A:53 gets no answer"
assert_eq "$(in_session "$SESSION" "$PROBE" srr $HOST_A 443 --via "$gw" --tcp)" ETIMEDOUT \
	"a TCP SYN source-routed to the public $HOST_A:443 (open mode) gets no answer"
sleep 0.5
assert_eq "$(grep -c "dst=$HOST_PRIV" "$W_DIR/srr-sniff.log")" 0 "nothing source-routed reached $HOST_PRIV"
assert_eq "$(grep -c "dst=$HOST_A" "$W_DIR/srr-sniff.log")" 0 "nothing source-routed reached $HOST_A"
assert_empty "$(cat "$W_DIR/srr-serve.log")" "no server on port 53 in the wan saw anything"
# Control: without options, open mode reaches the same host from the same place.
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" \
	"without options, $HOST_A:443 is reached from there (control)"
sleep 0.2
assert_match "$(grep -c "proto=6 src=.* dst=$HOST_A" "$W_DIR/srr-sniff.log")" '^[1-9]' "... and the sniffer saw it (control)"

# IPv6 the same way, straight onto the session's link: the backstop drops
# IPv6 from an address not the session's, and one with a routing header, however deep in
# its chain of extension headers, is named for it.
observe_start "$SESSION" --json
sleep 0.3
for kind in plain rh hbh-rh long; do
	assert_eq "$(in_session "$SESSION" "$PROBE" ip6 eth0 $kind)" sent "root in the session writes an IPv6 datagram ($kind) onto eth0"
done
sleep 0.5
observe_stop
assert_eq "$(grep -c '"addr":"2606:4700::1","port":0,"reason":"spoof","hook":"tc"' "$OBSERVE_OUT")" 1 \
	"the plain IPv6 datagram (from fe80::1, not the session's address) is dropped as spoof"
assert_eq "$(grep -c '"addr":"::","port":0,"reason":"ip-options","hook":"tc"' "$OBSERVE_OUT")" 3 \
	"those with a routing header (first, after hop-by-hop options, past 8 extension headers) as ip-options"
errand_stop

assert_match "$(event_count "addr=$gw port=0 reason=ip-options hook=tc")" '^[1-9]' \
	"the source-routed packets are ip-options events from tc"

world_finish
