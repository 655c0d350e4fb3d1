#!/bin/bash
# Guarantee: the provider's real key reaches the provider only in the placement's header, never the session: the answer's headers and body (split at every offset) carry [redacted] where the provider echoed it, and what the session put in the other header, override headers and its own encodings are not forwarded.
. "$(dirname "$0")/common.sh"

broker_world
S1=$("$PROVIDER" mint)
CONFIG=$(broker_config key "$(provider_json prov)")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "prov=$S1")" ok "a session registers with its stand-in"

st=$(call $SESS_A POST /providers/prov/echo -H "x-api-key: $S1" -H "Authorization: Bearer other-thing" \
	-H "X-HTTP-Method-Override: DELETE" -H "X-Original-URL: /admin" -H "X-Rewrite-URL: /admin" \
	-H "X-HTTP-Method: DELETE" -H "X-Method-Override: DELETE" -H "Accept-Encoding: gzip" \
	-H "X-Kept: yes" --data-binary 'hello')
assert_eq "$st" 200 "a call with the stand-in in x-api-key is forwarded"
log=$(provider_log)
assert_contains "$log" "request POST /v1/echo" "the provider gets the call under its base path"
assert_contains "$log" "header x-api-key: $KEY" "the provider gets the real key in x-api-key"
assert_eq "$(grep -ci '^header authorization' <<<"$log")" 0 "what the session sent in Authorization is dropped"
assert_eq "$(grep -ciE '^header x-(http-method-override|http-method|method-override|original-url|rewrite-url):' <<<"$log")" 0 \
	"no override header reaches the provider"
assert_contains "$log" "header Accept-Encoding: identity" "the provider is asked for identity"
assert_eq "$(grep -ci '^header accept-encoding' <<<"$log")" 1 "the session's own Accept-Encoding is not forwarded"
assert_contains "$log" "header X-Kept: yes" "other headers are forwarded"
assert_contains "$log" "body 5" "the body is forwarded"
assert_not_contains "$(cat "$W_DIR/head" "$W_DIR/body")" "$KEY" "the echo that reached the session holds no key"
assert_contains "$(cat "$W_DIR/body")" "x-api-key: [redacted]" "the echoed key reads [redacted]"

st=$(call $SESS_A GET /providers/prov/key-header -H "x-api-key: $S1")
assert_eq "$st" 200 "an answer echoing the key in a header is relayed"
assert_contains "$(cat "$W_DIR/head")" "X-Echo: key=[redacted];" "the key in an answer's header reads [redacted]"

body="before-$KEY-after"
bad=
for at in $(seq 0 ${#body}); do
	st=$(call $SESS_A GET "/providers/prov/split?at=$at" -H "x-api-key: $S1")
	got=$(cat "$W_DIR/body")
	[ "$st" = 200 ] && [ "$got" = "before-[redacted]-after" ] || bad+=" $at($st:$got)"
done
assert_empty "$bad" "a key split across the answer's pieces at every offset reads [redacted]"
assert_not_contains "$(cat "$BROKER_LOG")" "$KEY" "the broker's log holds no key"
assert_not_contains "$(cat "$BROKER_LOG")" "$S1" "the broker's log holds no stand-in"
world_finish
