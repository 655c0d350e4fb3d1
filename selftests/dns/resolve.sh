#!/bin/bash
# Guarantee: an allowed name resolves through errand's DNS responder (the session's resolv.conf names it, so getaddrinfo works) and only its answer opens the name's addresses, on the ports of the host rules that matched; before any answer the same connect is refused (not-allowed).
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

# Control: the world's upstream knows api.test.
assert_eq "$(in_host "$PROBE" dns $DNS_UPSTREAM api.test)" \
	"answer NOERROR addrs=$HOST_A ttl=60 from $DNS_UPSTREAM:53" "control: the upstream answers api.test"
: >"$DNS_LOG"

# The session's gateway, from /proc/net/route (no netlink in a session).
gw_sh='g=$(awk '"'"'$2 == "00000000" { print $3 }'"'"' /proc/net/route | head -n 1); echo "gw=$(printf "%d.%d.%d.%d" 0x$(echo $g | cut -c7-8) 0x$(echo $g | cut -c5-6) 0x$(echo $g | cut -c3-4) 0x$(echo $g | cut -c1-2))"; '
errand_run --egress api.test -- sh -c "$gw_sh$(session_ns_sh)echo \"ns=\$NS\"; $(probe_script \
	before "tcp $HOST_A 443" \
	dns 'dns $NS api.test' \
	after "tcp $HOST_A 443" \
	port "tcp $HOST_A 8080" \
	other "tcp $HOST_B 443" \
	case 'dns $NS API.Test')"
assert_eq "$RUN_RC" 0 "the session ran"
ns=$(result ns)
assert_eq "$ns" "$(result gw)" "the session's resolv.conf names its gateway ($(result gw))"
assert_eq "$(result before)" EPERM "before any answer, $HOST_A:443 is refused"
assert_eq "$(result dns)" "answer NOERROR addrs=$HOST_A ttl=60 from $ns:53" \
	"api.test resolves to $HOST_A with the upstream's TTL, from the gateway"
assert_eq "$(result after)" "ok hello $HOST_A:443" "after the answer, $HOST_A:443 is reached"
assert_eq "$(result port)" EPERM "... but not $HOST_A:8080 (the rule is api.test, port 443)"
assert_eq "$(result other)" EPERM "... nor another host, $HOST_B:443"
assert_match "$(result case)" "^answer NOERROR addrs=$HOST_A ttl=[0-9]+ from " "names are case-insensitive (API.Test)"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 reason=not-allowed hook=connect4")" 1 \
	"one not-allowed event for $HOST_A:443 (the connect before the answer)"
assert_eq "$(event_count "addr=$HOST_A port=8080 reason=not-allowed")" 1 "one not-allowed event for $HOST_A:8080"
assert_eq "$(event_count "addr=$HOST_B port=443 reason=not-allowed")" 1 "one not-allowed event for $HOST_B:443"
assert_eq "$(denial_count .)" 0 "no denied-name event"
assert_match "$(dns_queries "^query api.test A ")" "from $AGENT_ADDR:" "the upstream got the query for api.test from the agent"

# getaddrinfo, as an ordinary program calls it; the rule's own port.
errand_run --egress api.test:8080 -- sh -c "$(probe_script \
	before "tcp $HOST_A 8080" \
	gai "resolve api.test" \
	gaiconn "resolve api.test 8080" \
	p443 "tcp $HOST_A 443" \
	none "resolve nowhere.test")"
assert_eq "$(result before)" EPERM "before the lookup, $HOST_A:8080 is refused"
assert_eq "$(result gai)" "resolved $HOST_A" "getaddrinfo(api.test) gives $HOST_A"
assert_eq "$(result gaiconn)" "ok hello $HOST_A:8080" "getaddrinfo then connect reaches $HOST_A:8080"
assert_eq "$(result p443)" EPERM "$HOST_A:443 stays refused (the rule names port 8080)"
assert_eq "$(result none)" "noname EAI_NONAME" "getaddrinfo of a name no rule allows: EAI_NONAME"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=not-allowed")" 1 "one not-allowed event for $HOST_A:443"

# Two rules for one name: the answer opens both ports.
errand_run --egress api.test:443 --egress api.test:8080 -- sh -c "$(session_ns_sh)$(probe_script \
	dns 'dns $NS api.test --tcp' \
	p443 "tcp $HOST_A 443" \
	p8080 "tcp $HOST_A 8080")"
assert_match "$(result dns)" "^answer NOERROR addrs=$HOST_A ttl=60 from " "api.test resolves over TCP"
assert_eq "$(result p443)" "ok hello $HOST_A:443" "both rules' ports are opened: $HOST_A:443"
assert_eq "$(result p8080)" "ok hello $HOST_A:8080" "... and $HOST_A:8080"
assert_eq "$(event_count .)" 0 "no refusal event"

assert_empty "$(leftovers)" "nothing left behind"
world_finish
