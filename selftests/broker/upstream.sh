#!/bin/bash
# Guarantee: the broker calls a provider only at a public address (403 otherwise), only over TLS verified against the system roots and trustedCa (502 otherwise, no fallback), and answers a name that does not resolve in 5 s with 504 and a dial that meets silence in 10 s with 502, before a client's own timeout; lookups that stall, and answers that do not come, hold up no other call.
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
# Four calls to PATH1..PATH4 left waiting (at most SECONDS), their pids in
# stalled; a second for the broker to take them in.
stall() { # SECONDS PATH
	stalled=()
	for i in 1 2 3 4; do
		in_host curl -sS -o /dev/null --max-time "$1" --interface "$SESS_A" -H "x-api-key: $S1" \
			"http://$BROKER_ADDR:$BROKER_PORT$2$i" 2>/dev/null &
		stalled+=($!)
	done
	sleep 1
}

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

# A thread of the broker serves many connections: four calls whose provider
# does not answer (one on each thread at least) hold up no other call.
stall 4 /providers/prov/stall
t0=$(date +%s%N)
st=$(c prov)
t1=$(date +%s%N)
assert_eq "$st" 200 "a call to the provider"
assert_le $(((t1 - t0) / 1000000)) 1000 "is answered at once while four others wait for its answers (ms)"
wait "${stalled[@]}"

world_dns --silent "slow.test A $PROV_ADDR" || exit 1
t0=$(date +%s%N)
assert_eq "$(c slow)" 504 "a name the resolver does not answer is 504"
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 6000 "within the 5 s lookup budget (ms)"
assert_contains "$(cat "$W_DIR/body")" "did not resolve in time" "the 504 says the name did not resolve in time"
assert_match "$(cat "$BROKER_LOG")" "provider=slow: .*slow.test, lookup" "the log names the host and the phase"

# Nor do four lookups stalling at once.
stall 30 /providers/slow/echo
t0=$(date +%s%N)
st=$(call $SESS_A GET /providers/prov/echo -H "x-api-key: not-the-stand-in")
t1=$(date +%s%N)
assert_eq "$st" 401 "a call with a wrong stand-in is refused by the broker itself"
assert_le $(((t1 - t0) / 1000000)) 1000 "at once, while four lookups stall (ms)"
wait "${stalled[@]}"
world_finish
