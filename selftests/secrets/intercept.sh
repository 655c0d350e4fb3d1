#!/bin/bash
# Guarantee: a session's connections to a secret's host go to its broker in the kernel (getpeername still shows the host's address), which serves TLS with a certificate of the session's own CA (trusted through SSL_CERT_FILE, CURL_CA_BUNDLE and the rest; its key root's 0600, unreachable inside), puts the value on the wire where the session wrote the placeholder (request line percent-encoded, headers, Basic credentials) toward that secret's hosts only, turns the value back into the placeholder in the answer (header names too, also across TLS records, however the host percent-encodes it, and Basic credentials it encoded back into the session's), relays what the host sent before a pause during the pause, refuses Host != SNI (421), never sends a request twice once the host may have acted on it (an answer it could not parse), a server name no secret names, and upgrades (501), and leaves no value in errand's output.
# shellcheck disable=SC2016 # $TOK_A and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/common.sh"
need_errandctl
secrets_world
W_CONFIG=$(secrets_config secrets)
PH_RE='errand-secret-[0-9a-f]{64}'

c='curl -sS --max-time 20'
sh='echo "ph_a=$TOK_A"; echo "ph_b=$TOK_B"; echo "bundle=$CURL_CA_BUNDLE"
echo "echo_begin"; '"$c"' -H "Authorization: Bearer $TOK_A" -H "X-Other: $TOK_B" "https://sec.test/echo?k=$TOK_A" ; echo "echo_end"
echo "cross_begin"; '"$c"' -H "X-Token: $TOK_A" https://sec2.test/echo ; echo "cross_end"
echo "basic_begin"; '"$c"' -u "me:$TOK_A" https://sec.test/basic ; echo "basic_end"
echo "split=$('"$c"' -H "x-api-key: $TOK_A" "https://sec.test/split?at=9")"
echo "badhead=$('"$c"' -o /dev/null -o /dev/null -w "%{http_code} " https://sec.test/echo https://sec.test/bad-head)"
kn=$('"$c"' -D - -o /dev/null -H "x-api-key: $TOK_B" https://sec2.test/key-name | grep -i "^x-k-" | tr -d "\r")
# compared inside: errandctl turns a value on its output back into the placeholder
echo "kname=$([ "$kn" = "X-K-$TOK_B: 1" ] && echo placeholder || echo other)"
rec=$('"$c"' -D - "https://sec.test/recode?k=$TOK_A&j=$TOK_A" | tr -d "\r")
v=; for l in "X-Lower: /recode?k=$TOK_A&j=$TOK_A" "X-All: $TOK_A" "lower=/recode?k=$TOK_A&j=$TOK_A" "all=$TOK_A"; do
printf "%s\n" "$rec" | grep -qxF -- "$l" && v="$v placeholder" || v="$v other"; done
echo "recode=$v"
echo "front=$('"$c"' -o /dev/null -w "%{http_code}" -H "Host: sec2.test" https://sec.test/front)"
echo "ws=$('"$c"' -o /dev/null -w "%{http_code}" -H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13" -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" https://sec.test/ws)"
echo "peer=$(python3 -c "import socket; s = socket.create_connection((\"sec.test\", 443)); print(s.getpeername()[0], s.getpeername()[1])" 2>&1)"
echo "plainsni=$('"$c"' -o /dev/null -w "%{http_code}" --resolve plain.test:443:'"$SEC_ADDR"' https://plain.test/ 2>&1 | tail -n 1)"
echo "ka=$('"$c"' -o /dev/null -o /dev/null -w "%{http_code}/%{num_connects} " -H "X-Ka: $TOK_A" https://sec.test/ka1 https://sec.test/ka2)"
echo "h10=$('"$c"' --http1.0 -H "X-H10: $TOK_A" https://sec.test/h10 | grep "^X-H10")"
echo "cakey=$(cat '"$W_DIR"'/state/sessions/*/ca.key 2>&1 | head -c 60)"'
sh+='
'"$c"' -N https://sec.test/trickle | while IFS= read -r l; do echo "trickle_$l=$(date +%s%N)"; done'
sh+='
echo "priv=$('"$c"' -o /dev/null -w "%{http_code}" --resolve priv.test:443:'"$SEC_ADDR"' -H "X-P: $TOK_C" https://priv.test/priv)"'
errand_run --project "$PROJ" --secret TOK_A=a@sec.test --secret TOK_B=b@sec2.test --secret TOK_C=a@priv.test -- sh -c "$sh"
assert_eq "$RUN_RC" 0 "the session ran"
PH_A=$(result ph_a)
PH_B=$(result ph_b)
assert_match "$PH_A" "^$PH_RE\$" "TOK_A holds a placeholder"
assert_eq "$(result bundle)" /run/errand/ca-bundle.pem "CURL_CA_BUNDLE names the session's bundle"
echoed=$(sed -n '/^echo_begin$/,/^echo_end$/p' "$RUN_OUT")
assert_contains "$echoed" "method=GET" "curl reached sec.test through the broker, trusting its certificate"
PCT_A=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="-._~"))' "$VALUE_A")
assert_contains "$(echo_log)" "header Authorization: Bearer $VALUE_A" "the server got A's value in the header"
assert_contains "$(echo_log)" "request GET /echo?k=$PCT_A" "and in the request line, percent-encoded"
assert_contains "$(echo_log)" "header X-Other: $PH_B" "B's placeholder toward A's host stays a placeholder"
assert_contains "$(echo_log)" "header Host: sec.test" "the server got Host sec.test"
assert_contains "$echoed" "Authorization: Bearer $PH_A" "the session sees only the placeholder in the echo"
assert_not_contains "$RUN_STDOUT" "$VALUE_A" "A's value never reaches the session"
assert_not_contains "$RUN_STDOUT" "$PCT_A" "nor percent-encoded"
assert_contains "$(echo_log)" "header X-Token: $PH_A" "A's placeholder toward B's host stays a placeholder"
assert_not_contains "$(echo_log)" "header X-Token: $VALUE_A" "A's value never goes to B's host"
BASIC=$(printf 'me:%s' "$VALUE_A" | base64 -w0)
assert_contains "$(echo_log)" "header Authorization: Basic $BASIC" "Basic credentials carry the value"
basic_echo=$(sed -n '/^basic_begin$/,/^basic_end$/p' "$RUN_OUT")
assert_contains "$basic_echo" "Authorization: Basic $(printf 'me:%s' "$PH_A" | base64 -w0)" \
	"the host's echo of them gives the session its own back, the placeholder inside"
assert_not_contains "$basic_echo" "$BASIC" "... never the Base64 that carries the value"
assert_eq "$(result split)" "before-$PH_A-after" "a value split across TLS records comes back as the placeholder"
assert_eq "$(result badhead)" "200 502 " "an answer no parser takes, on a kept connection, is a 502"
assert_eq "$(grep -c "request GET /bad-head" "$W_DIR/echo.log")" 1 "... and the request went to the host once, never again"
assert_eq "$(result kname)" placeholder "a header named after the value comes back named after the placeholder"
assert_contains "$(echo_log)" "request GET /recode?k=$PCT_A" "the host got the value percent-encoded"
assert_eq "$(result recode)" " placeholder placeholder placeholder placeholder" \
	"its echo with lower-case hex and with every byte encoded, in headers and body, reaches the session as the placeholder"
t1=$(result trickle_first)
t2=$(result trickle_second)
assert_ge $(((${t2:-0} - ${t1:-${t2:-0}}) / 1000000)) 1000 "what the host sent before a two-second pause reaches the session during it (ms before the rest)"
assert_eq "$(result front)" 421 "Host other than the SNI: 421"
assert_eq "$(result ws)" 501 "a WebSocket upgrade: 501"
assert_eq "$(result ka)" "200/1 200/0 " "two calls on one kept-alive connection"
assert_contains "$(echo_log)" "request GET /ka2" "the second reaches the host"
assert_eq "$(result h10)" "X-H10: $PH_A" "an HTTP/1.0 call gets its answer, read to the connection's end"
assert_contains "$(echo_log)" "header X-H10: $VALUE_A" "with the value on the wire"
assert_eq "$(result priv)" 403 "a secret's host named in TLS toward another's address, resolving to a private address: 403"
assert_not_contains "$(cat "$W_DIR/wan-serve.log")" "$HOST_PRIV" "the broker never dialled the private address"
assert_eq "$(result peer)" "$SEC_ADDR 443" "getpeername shows the host's address"
assert_match "$(result plainsni)" "^000|SSL|certificate|reset" "a name no secret names gets no certificate"
assert_no_match "$(result cakey)" "PRIVATE KEY" "the CA key is not readable inside"
assert_not_contains "$RUN_STDERR" "$VALUE_A" "errand's and the broker's output hold no value"
assert_not_contains "$RUN_STDERR" "$VALUE_B" "nor B's"
assert_eq "$(grep -rl -- "$VALUE_A" "$W_DIR/state" "/run/$W" "$PROJ" 2>/dev/null | wc -l | tr -d ' ')" 0 \
	"no file of errand's state, run directory or the project holds the value"

# The CA's key, while a session runs: root's, 0600, in its record directory.
errand_start --project "$PROJ" --secret TOK_A=a@sec.test -- sleep 60 || exit 1
key=$W_DIR/state/sessions/$SESSION/ca.key
assert_eq "$(stat -c '%a %U' "$key" 2>&1)" "600 root" "the session's CA key is root's, 0600"
assert_eq "$(stat -c '%a' "$W_DIR/state/sessions/$SESSION/ca-bundle.pem" 2>&1)" 644 "its bundle is readable"
errand_stop

world_finish
