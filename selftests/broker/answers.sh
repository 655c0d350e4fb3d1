#!/bin/bash
# Guarantee: a provider's redirect reaches the session as sent and is never followed; a compressed answer with a body is 502; an answer declaring more than 64 MiB is 502, and one streaming past 64 MiB is cut there, while 64 MiB exactly passes; an answer ended by the connection is whole only with TLS's close_notify, and cut short toward the session without it; what the provider sent before a pause reaches the session during the pause.
. "$(dirname "$0")/common.sh"

broker_world
S1=$("$PROVIDER" mint)
CONFIG=$(broker_config answers "$(provider_json prov)")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "prov=$S1")" ok "a session registers"
c() { call $SESS_A GET "$1" -H "x-api-key: $S1"; }

assert_eq "$(c /providers/prov/redirect)" 302 "a redirect is passed back"
assert_contains "$(cat "$W_DIR/head")" "Location: https://elsewhere.test/next" "its Location is as the provider sent it"
assert_eq "$(cat "$W_DIR/body")" moved "its body is relayed"
assert_eq "$(grep -c 'elsewhere' "$W_DIR/provider.log" "$W_DIR/dns.log" | awk -F: '{ s += $2 } END { print s }')" 0 \
	"the redirect is not followed"

assert_eq "$(c /providers/prov/gzip)" 502 "a compressed answer with a body is 502"
assert_contains "$(cat "$W_DIR/body")" "compressed" "the 502 says why"
assert_eq "$(c /providers/prov/gzip-empty)" 200 "a compressed answer without a body passes"

t0=$(date +%s%N)
assert_eq "$(c /providers/prov/huge-declared)" 502 "an answer declaring 64 MiB + 1 is 502"
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 2000 "it is refused on the declaration, at once (ms)"
assert_contains "$(cat "$W_DIR/body")" "67108865" "the 502 names the size"

assert_eq "$(c /providers/prov/exact-stream)" 200 "an answer of 64 MiB exactly is relayed"
assert_eq "$(stat -c %s "$W_DIR/body")" 67108864 "all of it"
c /providers/prov/huge-stream >/dev/null
assert_le "$(stat -c %s "$W_DIR/body")" 67108864 "an answer streaming past 64 MiB is cut there"
assert_match "$(cat "$W_DIR/curl.err")" 'curl: \(18\)|transfer closed' "the cut shows as a transfer that ended early"
assert_contains "$(cat "$BROKER_LOG")" "streamed past 64 MiB; cut" "the log says it was cut"
# An answer whose end is the connection's: whole only when TLS closed it
# (close_notify); a TCP close alone may be anyone's cut.
assert_eq "$(c /providers/prov/eof-clean)" 200 "an answer ended by the provider's close_notify is relayed"
assert_eq "$(cat "$W_DIR/body")" "all of it" "all of it"
assert_eq "$(cat "$W_DIR/curl.err")" "" "... as complete"
c /providers/prov/eof-cut >/dev/null
assert_match "$(cat "$W_DIR/curl.err")" 'curl: \((18|52)\)' "an answer cut without close_notify reaches the session cut short, not whole"
assert_contains "$(cat "$BROKER_LOG")" "TLS stream ended without close_notify; cut" "the log says why"
for _ in $(seq 1 40); do
	[ "$(receipts "WHERE path = '/eof-cut'")" ] && break
	sleep 0.05
done
assert_eq "$(receipts "WHERE path IN ('/eof-clean', '/eof-cut')" | cut -d'|' -f6,11 | tr '\n' ' ')" \
	"/eof-clean|completed /eof-cut|interrupted " "their receipts: the cut one interrupted"
# The provider sends a line, pauses two seconds, sends another: the first
# must not wait in the broker for the second.
in_host curl -sSN --max-time 30 --interface "$SESS_A" -H "x-api-key: $S1" \
	"http://$BROKER_ADDR:$BROKER_PORT/providers/prov/trickle" 2>"$W_DIR/curl.err" |
	while IFS= read -r l; do echo "$(date +%s%N) $l"; done >"$W_DIR/trickle"
assert_eq "$(cut -d' ' -f2 "$W_DIR/trickle" | tr '\n' ' ')" "first second " "a trickling answer arrives whole"
t1=$(awk '$2 == "first" { print $1 }' "$W_DIR/trickle")
t2=$(awk '$2 == "second" { print $1 }' "$W_DIR/trickle")
assert_ge $(((${t2:-0} - ${t1:-${t2:-0}}) / 1000000)) 1000 "its first line reaches the session during the provider's pause (ms before the second)"
world_finish
