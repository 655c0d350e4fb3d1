#!/bin/bash
# Guarantee: a DNS query to a native IPv6 address (UDP sendto, connected UDP, TCP) is redirected to errand's responder on the gateway's own IPv6 address and answered under the address asked (never ENOTSUPP); the session's IPv6 is that on-link pair alone (no default route), every other IPv6 destination stays refused, and the backstop admits only the session's IPv6 DNS to the responder.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns6)
V6=2001:4860::8888

sess="$(probe_script \
	udp "dns $V6 api.test" \
	conn "dns $V6 api.test --connected" \
	tcp "dns $V6 api.test --tcp" \
	aaaa "dns $V6 api.test --type AAAA" \
	denied "dns $V6 evil.test" \
	allowed "tcp $HOST_A 443" \
	tcp6 "tcp $V6 443" \
	udp6 "udp $V6 123")"
sess+='echo "routes6=$(awk '"'"'$10 != "lo" { print $1 "/" $2 " " $10 }'"'"' /proc/net/ipv6_route | tr "\n" " ")"'
errand_run --egress api.test -- sh -c "$sess"
assert_eq "$RUN_RC" 0 "the session ran"
for k in udp conn tcp; do
	assert_match "$(result $k)" "^answer NOERROR addrs=$HOST_A ttl=(60|59|58) from \[$V6\]:53\$" \
		"$k query to [$V6]:53: errand's answer ($HOST_A), from [$V6]:53 as asked"
done
assert_match "$(result aaaa)" "^answer NOERROR addrs= ttl=- from \[$V6\]:53\$" "an AAAA query there too (NODATA)"
assert_match "$(result denied)" "^answer NXDOMAIN .* from \[$V6\]:53\$" "a name not allowed: NXDOMAIN from errand"
assert_eq "$(result allowed)" "ok hello $HOST_A:443" "the answer opened $HOST_A:443"
assert_eq "$(result tcp6)" EPERM "a TCP connect to [$V6]:443 stays refused"
assert_eq "$(result udp6)" EPERM "UDP to [$V6]:123 stays refused"
assert_match "$(result routes6)" "^fd657272616e0{12}[0-9a-f]{8}/7e eth0 fd657272616e0{12}[0-9a-f]{8}/80 eth0 ff0{30}/08 eth0 $" "the session's IPv6 routes: its on-link pair: $(result routes6)"
assert_no_match "$(result routes6)" "0{32}/00 " "... and no default IPv6 route (nor any other off the link)"
assert_eq "$(dns_query_count evil.test)" 0 "the name not allowed never went upstream"

# The backstop, against root in the session's namespace (outside its cgroup,
# so no hook): IPv6 DNS to the responder passes, IPv6 elsewhere does not.
errand_start --egress api.test || exit 1
gw6=$(in_host "$IP" -6 -o addr show dev "eh$SESSION" | awk '{ sub("/.*", "", $4); print $4 }' | head -n 1)
assert_match "$gw6" "^fd65:7272:616e::" "the gateway's IPv6 address is in errand's ULA /48 (the default addressPool6)"
world_serve host "$W_DIR/gw6.log" "udp:[$gw6]:9999" "[$gw6]:9999" || exit 1
assert_match "$(in_session "$SESSION" "$PROBE" dns "$gw6" api.test)" "^answer NOERROR addrs=$HOST_A " \
	"root's IPv6 DNS to the responder passes the backstop"
in_session "$SESSION" "$PROBE" udp "$gw6" 9999 >/dev/null 2>&1
assert_match "$(in_session "$SESSION" "$PROBE" tcp "$gw6" 9999 --timeout 1)" "^(timeout|ETIMEDOUT)" \
	"root's IPv6 TCP to the gateway's port 9999 is dropped"
sleep 0.3
assert_empty "$(cat "$W_DIR/gw6.log")" "... and the server there saw nothing"
errand_stop
assert_match "$(events 'reason=ipv6')" "reason=ipv6" "the backstop's refusal is an event"
world_finish
