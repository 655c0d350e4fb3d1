#!/bin/bash
# Guarantee: a session's port-53 traffic (UDP sendto, connected UDP, TCP) goes to the agent's responder whatever address it names, never to that address; DNS over TLS (853) is refused.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
DNSLOG=$W_DIR/wan-dns.log
world_serve wan "$DNSLOG" udp:$HOST_A:53 $HOST_A:53 || exit 1

# Control: the wan listeners on $HOST_A:53 log what reaches them.
in_host "$PROBE" udp $HOST_A 53 >/dev/null
assert_eq "$(in_host "$PROBE" tcp $HOST_A 53)" "ok hello $HOST_A:53" "control: the agent namespace reaches TCP $HOST_A:53"
for _ in $(seq 40); do [ "$(wc -l <"$DNSLOG")" -ge 2 ] && break; sleep 0.05; done
assert_match "$(cat "$DNSLOG")" "recv udp $HOST_A:53 from" "control: the UDP listener logs a datagram"
: >"$DNSLOG"

# Restricted, no hosts: DNS goes to the gateway (no responder in this world).
errand_run -- sh -c "$(probe_script \
	udp "dns $HOST_A example.com" \
	conn "dns $HOST_A example.com --connected" \
	tcp "dns $HOST_A example.com --tcp" \
	v6 "dns ::ffff:$HOST_A example.com" \
	dot "tcp $HOST_A 853")"
assert_eq "$RUN_RC" 0 "the session ran"
for k in udp conn tcp v6; do
	assert_match "$(result $k)" '^(timeout|ECONNREFUSED|answer .*)$' "DNS query ($k) to $HOST_A:53 is sent, not refused"
	# Once a responder answers, the answer must come back under the address asked.
	case $(result $k) in
	answer*) assert_match "$(result $k)" "from $HOST_A:53\$" "the answer ($k) comes from $HOST_A:53, as the resolver asked" ;;
	esac
done
assert_eq "$(event_count "port=53 ")" 0 "no refusal event for port-53 traffic"
assert_eq "$(result dot)" EPERM "DNS over TLS ($HOST_A:853) is refused"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=853 reason=dot hook=connect4")" 1 "one dot event for it"
sleep 0.3
assert_empty "$(cat "$DNSLOG")" "nothing reached $HOST_A:53 in wan: the queries were redirected"

# With no network there is no DNS either.
errand_run --egress none -- sh -c "$(probe_script udp "dns $HOST_A example.com")"
assert_eq "$(result udp)" EPERM "--egress none: a DNS query is refused"
assert_eq "$(event_count "proto=udp addr=$HOST_A port=53 reason=no-network")" 1 "... with one no-network event"
assert_empty "$(cat "$DNSLOG")" "nothing reached $HOST_A:53 in wan"

world_finish
