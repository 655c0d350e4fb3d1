#!/bin/bash
# Guarantee: the tc backstop drops what leaves a session's namespace with a source that is not the session's address (spoof) and IP fragments, and passes the responder's exact address and port.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_start --pin a.test=$HOST_A:443 --egress a.test:443 || { world_finish; exit 1; }
gw=$(in_session "$SESSION" "$IP" route show default | awk '{ print $3 }')
sess=$(in_session "$SESSION" "$IP" -4 -o addr show dev eth0 | awk '{ print $4 }' | cut -d/ -f1)
assert_match "$gw" '^10\.213\.' "the session's gateway is in the pool"
assert_match "$sess" '^10\.213\.' "the session's address is in the pool"

# Root in the session netns gives eth0 a second address and sends from it.
spoof=192.0.2.99
in_session "$SESSION" "$IP" addr add $spoof/32 dev eth0
# The gateway's neighbour entry made permanent first: the host side's strict
# rp_filter refuses an ARP request sent from the spoofed address, so without
# it the spoofed SYN would die in the session's own namespace and the gateway
# could look unreachable afterwards, and the backstop would not be tested.
gw_mac=$(in_host "$IP" -o link show "eh$SESSION" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
assert_match "$gw_mac" '^[0-9a-f:]{17}$' "the gateway's link address is known"
in_session "$SESSION" "$IP" neigh replace "$gw" lladdr "$gw_mac" dev eth0 nud permanent
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443 --from $spoof --timeout 2)" ETIMEDOUT \
	"a connect to the pinned host from another source address ($spoof) is dropped"
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443 --from "$sess")" "ok hello $HOST_A:443" \
	"... while from the session's own address it passes (control)"

# The responder's address and port pass; fragments do not, even there. A UDP
# listener on the gateway's port 53 in the agent namespace tells what arrived:
# bound to the session's link, as the responder's socket is, and made after
# it, so it takes the datagrams (when nothing else holds that port without
# SO_REUSEADDR).
GWLOG=$W_DIR/gw-dns.log
if world_serve host "$GWLOG" "udp:$gw:53@eh$SESSION" 2>/dev/null; then
	listener=1
else
	listener=0
	trace "port 53 on $gw is taken (a responder?): checking events only"
fi
assert_eq "$(in_session "$SESSION" "$PROBE" udp "$gw" 53 --size 100)" ok "root in the session netns sends a small datagram to $gw:53"
assert_eq "$(in_session "$SESSION" "$PROBE" udp "$gw" 53 --size 4000)" ok "... and a 4000-byte one (fragmented on a 1500-byte link)"
assert_eq "$(in_session "$SESSION" "$PROBE" udp $HOST_A 443)" ok "... and one to the pinned host's TCP port over UDP"
sleep 0.5
if [ $listener = 1 ]; then
	assert_eq "$(grep -c "recv udp $gw:53 from $sess:" "$GWLOG")" 1 \
		"the agent namespace got the small datagram, not the fragmented one"
fi
# The backstop's counts (kept beside the session's key, per CPU) reach show.
counters=$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json |
	python3 -c 'import json,sys; c=json.load(sys.stdin)["counters"]; print(c["tcPassed"], c["tcDropped"])')
assert_le 4 "${counters% *}" "show counts what the backstop passed (the control connection, the small datagram)"
assert_le 5 "${counters#* }" "... and what it dropped (the spoofed SYN and its retry, three fragments, the datagram to 443)"

# A flood of spoofed datagrams: each is dropped, and what the session's event
# bucket (a burst of 200) holds back of the backstop's refusals is counted at
# the veth, shown, and reported to observe like the hooks'.
observe_start --json
sleep 1 # observe is connected
assert_eq "$(in_session "$SESSION" "$PROBE" udp $HOST_A 9 --from $spoof --count 1000)" ok \
	"root in the session netns sends 1000 datagrams from $spoof"
sleep 2.5
observe_stop
sup=$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"].get("eventsSuppressed", 0))')
assert_le 700 "$sup" "show counts the backstop's refusals past the event bucket (eventsSuppressed $sup)"
assert_match "$OBSERVE_TEXT" "\"event\":\"suppressed\",\"session\":\"$SESSION\",\"count\":[1-9]" \
	"observe reports what the bucket held back of the backstop's refusals"
errand_stop

assert_match "$(event_count "addr=$HOST_A port=0 reason=spoof hook=tc")" '^[1-9][0-9]*$' "spoof events from tc for the other source"
assert_le "$(event_count "reason=spoof hook=tc")" 300 "... no more of them than the event bucket lets through"
assert_match "$(event_count "proto=udp addr=$gw port=0 reason=fragment hook=tc")" '^[1-9]' "fragment events from tc"
assert_eq "$(event_count "proto=udp addr=$gw port=53 ")" 0 "no event for the small datagram to the responder's port"
assert_eq "$(event_count "proto=udp addr=$HOST_A port=443 reason=udp hook=tc")" 1 "one tc udp event for UDP to the pinned host"
assert_eq "$(grep -c "from $spoof" "$W_DIR/wan-serve.log")" 0 "no server saw a connection from $spoof"

world_finish
