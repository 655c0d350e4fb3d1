#!/bin/bash
# Guarantee: a session with provider routes gets its own errand-broker on its gateway, a stand-in (errand-session- and 64 hex digits) and the route's base URL in its environment, and the kernel admits exactly that broker's address and port; the real key is nowhere the session can read (environment, files, answers), yet its calls reach the provider with it; another session's stand-in is refused, another session's broker is unreachable, and a stopped session's broker is gone; errandctl receipts lists the calls, as a table and as JSON; through errand-agent the same holds.
# shellcheck disable=SC2016 # $PROV_API_KEY and the like expand in the session's shell
# selftests-timeout: 150
. "$(dirname "$0")/common.sh"

broker_world
getent passwd errand-broker >/dev/null || skip "no account errand-broker (make accounts)"
caps='"capabilities": [{"method": "POST", "path": "/echo"}], "strictCapabilities": true'
W_CONFIG=$(world_config session '"addressPool": "10.215.0.0/24"' "" \
	"\"agent\": { \"providers\": { $(provider_json prov "$caps") } }")
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# curl inside a session: prints STATUS, then the body
sess_call='c() { curl -sS --max-time 20 -o /tmp/body -w "%{http_code}" "$@" 2>/dev/null; echo; cat /tmp/body; echo; }; '

# B runs in the background and tells its stand-in and base URL.
errand_start -- sh -c 'echo "key=$PROV_API_KEY"; echo "url=$PROV_BASE_URL"; sleep 60' || exit 1
B=$SESSION B_KEY=$(bg_result key) B_URL=$(bg_result url)
assert_match "$B_KEY" '^errand-session-[0-9a-f]{64}$' "the session's stand-in is errand-session- and 64 hex digits"
assert_match "$B_URL" '^http://10\.215\.0\.[0-9]+:4780/providers/prov$' "its base URL is the broker on its gateway"

errand_run -- sh -c "$sess_call"'echo "env=$(env | tr "\n" " ")"
	echo "keyfile=$(cat '"$KEY_FILE"' 2>&1 | head -n 1)"
	echo "call=$(c -X POST -H "x-api-key: $PROV_API_KEY" --data-binary hello "$PROV_BASE_URL/echo" | tr "\n" " ")"
	echo "strict=$(c -H "x-api-key: $PROV_API_KEY" "$PROV_BASE_URL/models" | head -n 1)"
	echo "theirs=$(c -X POST -H "x-api-key: '"$B_KEY"'" --data-binary hi "$PROV_BASE_URL/echo" | head -n 1)"
	echo "their_broker=$(curl -sS --max-time 5 -o /dev/null -w "%{http_code}" '"$B_URL"'/echo 2>&1 | tail -n 1)"
	g=${PROV_BASE_URL#http://}; g=${g%%:*}
	echo "other_port=$('"$PROBE"' tcp $g 4781 2>&1 | tail -n 1)"'
A=$(sed -n 's/^.*ERRAND_SESSION=\([0-9a-f]\{8\}\) .*$/\1/p' "$RUN_OUT" | head -n 1)
assert_eq "$RUN_RC" 0 "the session ran"
assert_not_contains "$RUN_STDOUT$RUN_STDERR" "$KEY" "the real key appears nowhere the session could print (environment, files, answers)"
assert_contains "$(result env)" "PROV_API_KEY=errand-session-" "the session's environment holds a stand-in"
assert_match "$(result keyfile)" "No such file" "the credential file is not in the session's view"
assert_match "$(result call)" "^200 " "a call with the stand-in reaches the provider (200)"
assert_contains "$(result call)" "x-api-key: [redacted]" "... whose echo of the key reads [redacted]"
assert_contains "$(provider_log)" "header x-api-key: $KEY" "the provider got the real key"
assert_eq "$(result strict)" 403 "strictCapabilities: a call the list does not name is 403"
assert_eq "$(result theirs)" 401 "another session's stand-in is refused (401)"
assert_match "$(result their_broker)" "^000|Failed|Couldn.t connect" "another session's broker cannot even be reached"
assert_eq "$(result other_port)" EPERM "nothing else on the gateway is reachable"

rec=$(ctl receipts "$A" --json)
assert_eq "$(echo "$rec" | jq_py "[(r['provider'], r['credentialVar'], r['host'], r['method'], r['path'], r['status'], r['outcome']) for r in d if r['status'] == 200]")" \
	"[('prov', 'PROV_API_KEY', 'provider.test', 'POST', '/echo', 200, 'completed')]" "receipts --json: the call, exactly (the path under the route)"
assert_match "$(ctl receipts "$A")" "$A +prov +POST +/echo +200 " "receipts prints it as a table"
assert_not_contains "$(ctl receipts --json)" "errand-session-" "no receipt holds a stand-in"

errand_stop
sleep 0.5
assert_empty "$(pgrep -f "sessions/$B.broker" || true)" "a stopped session's broker is gone"
assert_eq "$([ -e "/run/$W/sessions/$B.broker" ] && echo there)" "" "... and its registry socket"

# The same through the agent.
agent_start || exit 1
errand_run -- sh -c "$sess_call"'echo "call=$(c -X POST -H "x-api-key: $PROV_API_KEY" --data-binary hello "$PROV_BASE_URL/echo" | head -n 1)"'
assert_eq "$(result call)" 200 "through errand-agent, the session's call reaches the provider"
assert_not_contains "$RUN_STDOUT" "$KEY" "... and the key stays out of its reach"
world_finish
