#!/bin/bash
# Guarantee: a stand-in is honoured only from the session it was minted for, only in the placement's header (401 naming it otherwise), never once that session stopped (its open connections are closed), and a provider's 401 makes the broker ask for the key again, which the agent's side reads afresh from its file.
. "$(dirname "$0")/common.sh"

broker_world
S1=$("$PROVIDER" mint)
S2=$("$PROVIDER" mint)
CONFIG=$(broker_config auth "$(provider_json prov), $(provider_json bear '"kind": "openai"' | sed 's/"placement": "x-api-key", //')")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "prov=$S1" "bear=$S1")" ok "session s1 registers"
assert_eq "$(broker_register s2 $SESS_B "prov=$S2" "bear=$S2")" ok "session s2 registers"
assert_eq "$(broker_register s3 $SESS_A "prov=$S2")" EEXIST "a second session cannot take s1's address"
requests() { grep -c '^request ' "$W_DIR/provider.log"; }

n0=$(requests)
assert_eq "$(call $SESS_A GET /providers/prov/echo -H "Authorization: Bearer $S1")" 401 \
	"the stand-in in Authorization, where x-api-key is the placement, is 401"
assert_contains "$(cat "$W_DIR/body")" "x-api-key" "the 401 names the header to use"
assert_eq "$(call $SESS_A GET /providers/prov/echo)" 401 "a call without a stand-in is 401"
assert_eq "$(call $SESS_A GET /providers/prov/echo -H "x-api-key: $S2")" 401 \
	"session s2's stand-in from s1's address is 401"
assert_eq "$(call $SESS_A GET /providers/prov/echo -H "x-api-key: sk-the-real-thing")" 401 \
	"any other value is 401"
assert_eq "$(call $SESS_C GET /providers/prov/echo -H "x-api-key: $S1")" 403 \
	"a call from an address no session holds is 403"
assert_eq "$(requests)" "$n0" "none of them reached the provider"

assert_eq "$(call $SESS_A GET /providers/bear/echo -H "Authorization: Bearer $S1" -H "x-api-key: session-own")" 200 \
	"kind openai takes the stand-in as a bearer token"
last=$(awk '/^request /{b=""} {b=b $0 "\n"} END{printf "%s", b}' "$W_DIR/provider.log")
assert_contains "$last" "header Authorization: Bearer $KEY" "the key goes out as a bearer token"
assert_eq "$(grep -ci '^header x-api-key' <<<"$last")" 0 "what came in x-api-key is dropped"
assert_eq "$(call $SESS_A GET /providers/bear/echo -H "x-api-key: $S1")" 401 \
	"kind openai refuses the stand-in in x-api-key"

# the key is kept; a 401 from the provider has it read again
echo "sk-rotated-$RANDOM" >"$KEY_FILE"
NEW=$(cat "$KEY_FILE")
call $SESS_A GET /providers/prov/echo -H "x-api-key: $S1" >/dev/null
assert_contains "$(tail -n 8 "$W_DIR/provider.log")" "header x-api-key: $KEY" "the cached key is used while the provider takes it"
assert_eq "$(call $SESS_A GET /providers/prov/unauthorized -H "x-api-key: $S1")" 401 "the provider's 401 is relayed"
call $SESS_A GET /providers/prov/echo -H "x-api-key: $S1" >/dev/null
assert_contains "$(tail -n 8 "$W_DIR/provider.log")" "header x-api-key: $NEW" "after the provider's 401 the file is read again"

# a stopped session: its open call is cut, its stand-in refused
(call $SESS_A GET /providers/prov/stall -H "x-api-key: $S1" >"$W_DIR/stall.status") &
cpid=$!
for _ in $(seq 1 50); do grep -q 'request GET /v1/stall' "$W_DIR/provider.log" && break; sleep 0.1; done
t0=$(date +%s%N)
assert_eq "$(broker_unregister s1)" ok "session s1 unregisters"
wait $cpid
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 3000 "the call s1 had open ended when it stopped (ms)"
assert_eq "$(call $SESS_A GET /providers/prov/echo -H "x-api-key: $S1")" 403 "s1's stand-in is refused after it stopped"
assert_eq "$(call $SESS_B GET /providers/prov/echo -H "x-api-key: $S1")" 401 "s1's stand-in is refused from s2 too"
assert_eq "$(call $SESS_B GET /providers/prov/echo -H "x-api-key: $S2")" 200 "s2 goes on"
assert_eq "$(broker_unregister s1)" ENOENT "a second unregister is refused"
world_finish
