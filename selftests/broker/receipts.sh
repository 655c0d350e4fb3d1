#!/bin/bash
# Guarantee: every provider call leaves one receipt in receipts.db (session, provider, variable, host, standard method, decoded path scrubbed of stand-ins and cut at the query, query length, status, bytes, outcome), a denied call at most once a minute per session, and no header, body, key or stand-in is ever stored; receipts are listed in the order the calls were made, though a slow call's receipt is added after a later call's.
. "$(dirname "$0")/common.sh"

broker_world
S1=$("$PROVIDER" mint)
CONFIG=$(broker_config receipts "$(provider_json prov '"kind": "anthropic"'), $(provider_json closed | sed 's|provider.test|closed.test|')")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "prov=$S1" "closed=$S1")" ok "a session registers"
c() { call $SESS_A "$@"; }

size() { stat -c %s "$W_DIR/body"; }
c POST '/providers/prov/echo?secret=abcdefgh' -H "x-api-key: $S1" --data-binary 'twelve bytes' >/dev/null
d1=$(size)
c GET "/providers/prov/files/$S1/x%01y" -H "x-api-key: $S1" >/dev/null
d2=$(size)
c GET '/providers/prov/q%3Fhidden=1' -H "x-api-key: $S1" >/dev/null
d3=$(size)
c GET /providers/prov/a/../b -H "x-api-key: $S1" >/dev/null
c PROPFIND /providers/prov/gzip -H "x-api-key: $S1" >/dev/null
c GET /providers/prov/echo >/dev/null
c GET /providers/prov/echo -H "x-api-key: wrong" >/dev/null
c GET /providers/prov/echo -H "x-api-key: ${S1}x" >/dev/null
c GET /providers/closed/echo -H "x-api-key: $S1" >/dev/null
c GET /providers/nosuch/echo -H "x-api-key: $S1" >/dev/null
call $SESS_C GET /providers/prov/echo -H "x-api-key: $S1" >/dev/null

# the writer gathers receipts for a moment before it writes them
for _ in $(seq 1 40); do
	[ "$(receipts | wc -l)" -ge 7 ] && break
	sleep 0.05
done
expected="s1|prov|ANTHROPIC_API_KEY|provider.test|POST|/echo|15|200|12|$d1|completed|0
s1|prov|ANTHROPIC_API_KEY|provider.test|GET|/files/[stand-in]/x\\x01y|0|200|0|$d2|completed|0
s1|prov|ANTHROPIC_API_KEY|provider.test|GET|/q|0|200|0|$d3|completed|0
s1|prov|ANTHROPIC_API_KEY|provider.test|GET|/a/../b|0|400|0|0|refused|0
s1|prov|ANTHROPIC_API_KEY|provider.test|OTHER|/gzip|0|502|0|0|refused|0
s1|prov|ANTHROPIC_API_KEY|provider.test|GET|/echo|0|401|0|0|denied|0
s1|closed|CLOSED_API_KEY|closed.test|GET|/echo|0|502|0|0|upstream-unreachable|0"
assert_eq "$(receipts)" "$expected" "the receipts are exactly the calls, one row each, denied ones once"
assert_eq "$(sqlite3 "$W_DIR/state/receipts.db" 'PRAGMA journal_mode')" wal "receipts.db is in WAL mode"
assert_eq "$(stat -c %a "$W_DIR/state/receipts.db")" 600 "receipts.db is 0600"
leaks=$(cat "$W_DIR/state/receipts.db"* | grep -a -c -e "$KEY" -e "${S1#errand-session-}" -e abcdefgh -e twelve -e hidden)
assert_eq "$leaks" 0 "no key, stand-in, query or body is in the database files"
assert_not_contains "$(cat "$BROKER_LOG")" "abcdefgh" "the log holds no query"
assert_not_contains "$(cat "$BROKER_LOG")" "twelve" "the log holds no body"

# the receipts are listed in the order the calls were made: a call whose
# answer trickles for two seconds is added after one made while it ran
in_host curl -sS --max-time 30 --interface $SESS_A -o /dev/null \
	"http://$BROKER_ADDR:$BROKER_PORT/providers/prov/trickle" -H "x-api-key: $S1" &
slow=$!
sleep 0.5
c GET /providers/prov/after -H "x-api-key: $S1" >/dev/null
wait $slow
for _ in $(seq 1 40); do
	[ "$(receipts "WHERE path = '/trickle'")" ] && break
	sleep 0.05
done
assert_eq "$(sqlite3 "$W_DIR/state/receipts.db" "SELECT path FROM receipts WHERE path IN ('/trickle', '/after') ORDER BY id" | tr '\n' ' ')" \
	"/after /trickle " "the slow call's receipt was added last"
listed=$(in_host "$ERRANDCTL" --config "$CONFIG" receipts --json 2>&1)
assert_eq "$(echo "$listed" | python3 -c 'import json, sys
print(" ".join(r["path"] for r in json.load(sys.stdin) if r["path"] in ("/trickle", "/after")))' 2>&1)" \
	"/trickle /after" "errandctl receipts lists it first, where its call was made"
assert_eq "$(echo "$listed" | python3 -c 'import json, sys
rs = {r["path"]: r for r in json.load(sys.stdin)}
t, a = rs["/trickle"], rs["/after"]
print(t["startedAt"] < a["startedAt"] < t["endedAt"], a["startedAt"] <= a["endedAt"])' 2>&1)" \
	"True True" "each with when it began, the slow one's before the other's and its end after"
table=$(in_host "$ERRANDCTL" --config "$CONFIG" receipts 2>&1)
assert_eq "$(echo "$table" | awk 'NR == 1 { print $1 } $5 == "/trickle" || $5 == "/after" { print $5 }' | tr '\n' ' ')" \
	"STARTED /trickle /after " "the table's first column is when each began, in that order"
assert_eq "$(receipts "WHERE path IN ('/trickle', '/after')" | cut -d'|' -f6,8,11 | tr '\n' ' ')" \
	"/trickle|200|completed /after|200|completed " "both completed"

# a receipt that cannot be written (the database held by another writer)
# does not fail the call
(echo 'BEGIN EXCLUSIVE;'; sleep 5; echo 'COMMIT;') | sqlite3 "$W_DIR/state/receipts.db" &
holder=$!
sleep 0.5
assert_eq "$(c GET /providers/prov/echo -H "x-api-key: $S1")" 200 "a call goes on while receipts.db cannot be written"
wait $holder
assert_contains "$(cat "$BROKER_LOG")" "cannot be written to receipts.db; the calls went on" "the log says the receipt was lost"
world_finish
