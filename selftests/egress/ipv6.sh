#!/bin/bash
# Guarantee: where the agent's namespace has an IPv6 route out, a session is dual-stack (an address from sandbox.addressPool6, a default route via its gateway, NAT66): DNS to any IPv6 address is still answered by errand, a name with only AAAA records resolves and connects, a host with both is reached either way, and AAAA answers are filtered and programmed exactly like A answers: unique-local, link-local, loopback, the host's own IPv6, and the NAT64 and 6to4 forms of a private IPv4 are dropped from answers and refused at connect.
# shellcheck disable=SC2016 # $NS expands in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_v6
nat64_priv=64:ff9b::a63:a     # 10.99.0.10
sixtofour_priv=2002:a63:a::1 # 10.99.0.10
world_dns "v6only.test AAAA $HOST6_A 60" \
	"dual.test A $HOST_A 60" "dual.test AAAA $HOST6_B 60" \
	"ula.test AAAA $HOST6_PRIV" "ll.test AAAA fe80::1" "lo6.test AAAA ::1" \
	"self6.test AAAA $AGENT_ADDR6" "nat64.test AAAA $nat64_priv" \
	"sixtofour.test AAAA $sixtofour_priv" \
	"mixed6.test AAAA $HOST6_PRIV" "mixed6.test AAAA $HOST6_B" || exit 1
W_CONFIG=$(dns_config dns6)

allow=()
for n in v6only dual ula ll lo6 self6 nat64 sixtofour mixed6; do allow+=(--egress "$n.test"); done
errand_run "${allow[@]}" -- sh -c "$(session_ns_sh)$(probe_script \
	before6 "tcp $HOST6_A 443" \
	resolve 'resolve v6only.test 443' \
	aaaa 'dns $NS v6only.test --type AAAA' \
	a_none 'dns $NS v6only.test' \
	dual_a 'dns $NS dual.test' \
	dual_aaaa 'dns $NS dual.test --type AAAA' \
	dual4 "tcp $HOST_A 443" \
	dual6 "tcp $HOST6_B 443" \
	port6 "tcp $HOST6_A 8080" \
	ula 'dns $NS ula.test --type AAAA' \
	ula_c "tcp $HOST6_PRIV 443" \
	ll 'dns $NS ll.test --type AAAA' \
	lo6 'dns $NS lo6.test --type AAAA' \
	self6 'dns $NS self6.test --type AAAA' \
	self6_c "tcp $AGENT_ADDR6 443" \
	nat64 'dns $NS nat64.test --type AAAA' \
	nat64_c "tcp $nat64_priv 443" \
	sixtofour 'dns $NS sixtofour.test --type AAAA' \
	sixtofour_c "tcp $sixtofour_priv 443" \
	mixed6 'dns $NS mixed6.test --type AAAA' \
	mixed6_priv "tcp $HOST6_PRIV 443" \
	mixed6_pub "tcp $HOST6_B 443" \
	dns6 "dns $HOST6_B v6only.test --type AAAA" \
	dns6tcp "dns $HOST6_B v6only.test --type AAAA --tcp")"'echo "routes6=$(awk '"'"'$10 != "lo" { print $1 "/" $2 " " $5 " " $10 }'"'"' /proc/net/ipv6_route | tr "\n" " ")"'
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$(result routes6)" "(^| )0{32}/00 fd657272616e0{12}0a[0-9a-f]{6} eth0 " \
	"the session has an IPv6 default route via its gateway in the default addressPool6: $(result routes6)"
assert_eq "$(result before6)" EPERM "before any answer, [$HOST6_A]:443 is refused"
assert_match "$(result resolve)" "^ok hello \[?$HOST6_A\]?:443" "a name with only AAAA resolves (getaddrinfo) and connects over IPv6"
assert_match "$(result aaaa)" "^answer NOERROR addrs=$HOST6_A ttl=" "its AAAA answer is the public address"
assert_match "$(result a_none)" "^answer NOERROR addrs= " "its A query gets no address"
assert_match "$(result dual_a)" "^answer NOERROR addrs=$HOST_A " "dual.test has its A ..."
assert_match "$(result dual_aaaa)" "^answer NOERROR addrs=$HOST6_B " "... and its AAAA"
assert_eq "$(result dual4)" "ok hello $HOST_A:443" "the host with both is reached over IPv4"
assert_match "$(result dual6)" "^ok hello \[?$HOST6_B\]?:443" "... and over IPv6"
assert_eq "$(result port6)" EPERM "the answer opened port 443 only: [$HOST6_A]:8080 is refused"
for k in ula ll lo6 self6 nat64 sixtofour; do
	assert_match "$(result $k)" "^answer NOERROR addrs= " "$k.test's forbidden AAAA is dropped from the answer"
done
assert_eq "$(result ula_c)" EPERM "a unique-local address is refused at connect"
assert_eq "$(result self6_c)" EPERM "the agent's own IPv6 address is refused at connect"
assert_eq "$(result nat64_c)" EPERM "the NAT64 form of a private IPv4 is refused at connect"
assert_eq "$(result sixtofour_c)" EPERM "the 6to4 form of a private IPv4 is refused at connect"
assert_match "$(result mixed6)" "^answer NOERROR addrs=$HOST6_B " "a name with a forbidden and a public AAAA keeps the public one"
assert_eq "$(result mixed6_priv)" EPERM "... and its unique-local one stays refused"
assert_match "$(result mixed6_pub)" "^ok hello \[?$HOST6_B\]?:443" "... while the public one connects"
for k in dns6 dns6tcp; do
	assert_match "$(result $k)" "^answer NOERROR addrs=$HOST6_A ttl=[0-9]+ from \[$HOST6_B\]:53\$" \
		"$k: DNS to a public IPv6 address, with a route there, is answered by errand under the address asked"
done
assert_eq "$(dns_queries '^query v6only.test ' | awk '{ print $3 }' | sort | tr '\n' ' ')" "A AAAA " \
	"the upstream was asked for v6only.test once a type (the cache answered the rest)"
assert_eq "$(dns_queries '^query v6only.test ' | grep -vc "from $AGENT_ADDR:")" 0 "... each time by the agent"
assert_match "$(event_count "proto=tcp addr=$HOST6_PRIV port=443 reason=forbidden hook=connect6")" '^[1-9]' \
	"the unique-local connect is a forbidden event from connect6"
assert_match "$(event_count "addr=$AGENT_ADDR6 port=443 reason=self hook=connect6")" '^[1-9]' \
	"the agent's own address is a self event"
assert_eq "$(grep -c "$HOST6_PRIV" "$W_DIR/wan6-serve.log")" 0 "the unique-local host in the wan saw nothing"
assert_match "$(grep -c "from \[\?$AGENT_ADDR6" "$W_DIR/wan6-serve.log")" '^[1-9]' \
	"what reached the wan came from the agent's address (NAT66): $(head -c 300 "$W_DIR/wan6-serve.log")"
assert_empty "$(leftovers)" "nothing of the session is left (ip and ip6 tables, links)"
world_finish
