#!/bin/bash
# Guarantee: the broker calls a provider only at a public address (403 otherwise), only over TLS verified against the system roots and trustedCa (502 otherwise, no fallback), and answers a name that does not resolve in 5 s with 504 and a dial that meets silence in 10 s with 502, before a client's own timeout.
. "$(dirname "$0")/common.sh"

broker_world
S1=$("$PROVIDER" mint)
p() { provider_json "$1" | sed "s|provider.test|$2|; $3"; }
CONFIG=$(broker_config upstream "$(provider_json prov), $(p forb forbidden.test), $(p closed closed.test), \
$(p black blackhole.test), $(p notrust provider.test 's|"trustedCa": "[^"]*", ||'), $(p wrongname untrusted.test), \
$(p slow slow.test)")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "prov=$S1" "forb=$S1" "closed=$S1" "black=$S1" "notrust=$S1" "wrongname=$S1" "slow=$S1")" \
	ok "a session registers"
c() { call $SESS_A GET "/providers/$1/echo" -H "x-api-key: $S1"; }
requests() { grep -c '^request ' "$W_DIR/provider.log"; }

assert_eq "$(c prov)" 200 "a provider at a public address (treatAsPublic) is called"
assert_eq "$(c forb)" 403 "a name resolving to a private address is 403"
assert_contains "$(cat "$W_DIR/body")" "not a public host" "the 403 says: not a public host"
assert_eq "$(c closed)" 502 "a provider refusing the connection is 502"
assert_contains "$(cat "$W_DIR/body")" "upstream unreachable" "the 502 says: upstream unreachable"
n0=$(requests)
assert_eq "$(c notrust)" 502 "a certificate from a CA not trusted is 502"
assert_contains "$(cat "$W_DIR/body")" "certificate not trusted" "the 502 says the certificate is not trusted"
assert_eq "$(c wrongname)" 502 "a certificate for another name is 502"
assert_eq "$(requests)" "$n0" "no call went over an unverified connection"

t0=$(date +%s%N)
assert_eq "$(c black)" 502 "a dial meeting silence is 502"
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 11500 "within the 10 s dial budget (ms)"
assert_contains "$(cat "$W_DIR/body")" "timed out" "the 502 says the dial timed out"

world_dns --silent "slow.test A $PROV_ADDR" || exit 1
t0=$(date +%s%N)
assert_eq "$(c slow)" 504 "a name the resolver does not answer is 504"
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 6000 "within the 5 s lookup budget (ms)"
assert_contains "$(cat "$W_DIR/body")" "did not resolve in time" "the 504 says the name did not resolve in time"
assert_match "$(cat "$BROKER_LOG")" "provider=slow: .*slow.test, lookup" "the log names the host and the phase"
world_finish
