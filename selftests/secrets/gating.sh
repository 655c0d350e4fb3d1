#!/bin/bash
# Guarantee: a host under sandbox.egress.readOnly is intercepted without any secret and accepts GET, HEAD, OPTIONS and TRACE only: POST, PUT, DELETE, a WebDAV verb and an unknown verb get 403 naming the host and never reach it, unless the host is in sandbox.egress.writeAllowed; method-override headers never reach it; each intercepted call leaves a receipt without its query (refused writes one a minute), with the status the session was answered (400 refused for a malformed body) and the body's bytes.
# shellcheck disable=SC2016 # $c and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/common.sh"
need_errandctl
command -v sqlite3 >/dev/null || skip "sqlite3 is missing (make deps)"
secrets_world
W_CONFIG=$(secrets_config gating "" '"readOnly": ["sec.test", "sec2.test"], "writeAllowed": ["sec2.test"]')

c='curl -sS --max-time 20 -o /dev/null -w %{http_code}'
sh=''
for m in GET HEAD OPTIONS TRACE POST PUT DELETE PATCH MKCOL PROPFIND FROBNICATE; do
	sh+="echo \"r_$m=\$($c -X $m https://sec.test/gate-$m?q=secretquery)\"; "
done
sh+="echo \"w_POST=\$($c -X POST -d x=1 https://sec2.test/write-POST)\"; "
sh+="echo \"w_MKCOL=\$($c -X MKCOL https://sec2.test/write-MKCOL)\"; "
sh+="echo \"ovr=\$($c -H 'X-HTTP-Method-Override: DELETE' -H 'X-HTTP-Method: DELETE' -H 'X-Method-Override: DELETE' -H 'X-Original-URL: /admin' -H 'X-Rewrite-URL: /admin' https://sec.test/gate-ovr)\"; "
sh+='echo "body=$(curl -sS --max-time 20 -X POST https://sec.test/gate-body)"; '
# a chunked body: its receipt counts the body's bytes, not the chunks' framing
sh+="printf '%05000d' 0 >/tmp/up; echo \"chunked=\$($c -H 'Transfer-Encoding: chunked' --data-binary @/tmp/up https://sec2.test/write-chunked)\"; "
# a body whose chunk size is not a number: refused, and its receipt says so
sh+='echo "badchunk=$(python3 -c "
import os, socket, ssl
t = ssl.create_default_context(cafile=os.environ[\"SSL_CERT_FILE\"]).wrap_socket(socket.create_connection((\"sec2.test\", 443)), server_hostname=\"sec2.test\")
t.sendall(b\"POST /bad-chunk HTTP/1.1\\r\\nHost: sec2.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\nzz\\r\\n\")
print(t.recv(64).split()[1].decode())
")"'
errand_run --project "$PROJ" -- sh -c "$sh"
assert_eq "$RUN_RC" 0 "the session ran"
for m in GET OPTIONS TRACE; do
	assert_eq "$(result "r_$m")" 200 "$m to a read-only host passes"
	assert_contains "$(echo_log)" "request $m /gate-$m" "and reaches it"
done
assert_eq "$(result r_HEAD)" 200 "HEAD to a read-only host passes"
for m in POST PUT DELETE PATCH MKCOL PROPFIND FROBNICATE; do
	assert_eq "$(result "r_$m")" 403 "$m to a read-only host: 403"
	assert_not_contains "$(echo_log)" "/gate-$m" "$m never reaches the host"
done
assert_eq "$(result ovr)" 200 "a GET naming another method in an override header passes as a GET"
assert_contains "$(echo_log)" "request GET /gate-ovr" "... and reaches the host as one"
assert_eq "$(grep -ciE '^header x-(http-method-override|http-method|method-override|original-url|rewrite-url):' <<<"$(echo_log)")" 0 \
	"... without the override headers"
assert_contains "$(result body)" "sec.test is read-only" "the 403 names the host"
assert_eq "$(result w_POST)" 200 "POST to a host in writeAllowed passes"
assert_contains "$(echo_log)" "request POST /write-POST" "and reaches it"
assert_eq "$(result w_MKCOL)" 200 "a WebDAV verb to a host in writeAllowed passes"
rows=$(sqlite3 "$W_DIR/state/receipts.db" "SELECT host, method, path, query_len, status, outcome FROM receipts ORDER BY started_at_us, id" 2>&1)
echo "$rows" | sed 's/^/# receipt: /'
assert_contains "$rows" "sec.test|GET|/gate-GET|13|200|completed" "a passed call leaves a receipt, its query only counted"
assert_contains "$rows" "sec.test|POST|/gate-POST|13|403|denied" "a refused write leaves a receipt"
assert_eq "$(echo "$rows" | grep -c '|denied$')" 1 "refused writes leave one receipt a minute, as a provider's denied calls"
assert_contains "$rows" "sec2.test|OTHER|/write-MKCOL|0|200|completed" "a WebDAV verb is kept as OTHER"
assert_not_contains "$rows" "secretquery" "no receipt holds a query"
assert_eq "$(result chunked)" 200 "a chunked POST to a host in writeAllowed passes"
assert_eq "$(sqlite3 "$W_DIR/state/receipts.db" "SELECT bytes_up FROM receipts WHERE path = '/write-chunked'")" 5000 "... its receipt counting the body's 5000 bytes, not the chunks' framing"
assert_eq "$(result badchunk)" 400 "a body whose chunk size is not a number: 400"
assert_contains "$rows" "sec2.test|POST|/bad-chunk|0|400|refused" "... and its receipt says 400, refused"
# A secret's wildcard on another port: the read-only host's exact name, on
# its own port, is the one the broker dials.
W_CONFIG=$(secrets_config gating2 "" '"readOnly": ["sec.test", "w.sec.test"]')
errand_run --project "$PROJ" --secret TOK=a@*.sec.test:8443 -- sh -c "echo \"wild=\$($c https://w.sec.test/gate-wild)\""
assert_eq "$(result wild)" 200 "a read-only host's exact name is dialled on its port before a secret's wildcard on another"
listed=$(in_host "$ERRANDCTL" --config "$W_CONFIG" receipts --json 2>&1)
assert_match "$(echo "$listed" | tr -d ' \n')" '"provider":"intercept"' "errandctl receipts lists intercepted calls"
assert_match "$(echo "$listed" | tr -d ' \n')" '"host":"sec2.test"' "with their host"

world_finish
