#!/bin/bash
# Guarantee: a provider's key kept the natural way (root's, 0600) works end to end: the agent reads it as root and hands it to the session's broker over its registry, and the broker's account cannot open the file, holds it open nowhere, and has the key in no argument, environment, log or file it writes; a key rewritten in place or renamed over is picked up after the provider's 401, and while no agent can be asked the broker keeps the key it has; a file others may read is named at start as a weakened guarantee, on errandctl's stderr through errand-agent too; one that cannot be read (missing, a directory, empty) or that the broker could not redact from an answer refuses the session with 125 and one line naming it, through errand-agent too.
# shellcheck disable=SC2016 # $PROV_API_KEY and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/common.sh"

broker_world accept
getent passwd errand-broker >/dev/null || skip "no account errand-broker (make accounts)"
command -v setpriv >/dev/null || skip "setpriv is missing (util-linux)"
PROJ=$W_DIR/proj
mkdir -p "$PROJ"
chmod 0755 "$W_DIR" "$W_DIR/keys" "$PROJ"
# a file beside the key that the broker's account may read: the directory
# does not stand in the way, so a refused read is the key file's own mode
echo public >"$W_DIR/keys/public"
chmod 0644 "$W_DIR/keys/public"
# cfg NAME [KEYFILE]: a world config whose provider prov keeps its key there
cfg() {
	world_config "$1" '"addressPool": "10.216.0.0/24"' "" \
		"\"agent\": { \"providers\": { $(provider_json prov | sed "s|$KEY_FILE|${2:-$KEY_FILE}|") } }"
}
W_CONFIG=$(cfg secrets)
as_broker() { setpriv --reuid=errand-broker --regid=errand-broker --clear-groups "$@"; }
requests() { grep -c '^request ' "$W_DIR/provider.log"; }
last_key() { grep '^header x-api-key: ' "$W_DIR/provider.log" | tail -n 1 | sed 's/^header x-api-key: //'; }
# rename_over KEY: KEY renamed over the key file (a new file, as rotation
# tools write one), and the provider takes only KEY from now on
rename_over() {
	(umask 077 && echo "$1" >"$W_DIR/keys/provider.key.new")
	mv "$W_DIR/keys/provider.key.new" "$KEY_FILE"
	echo "$1" >"$ACCEPT_FILE"
}

# step N: the session makes call N once $PROJ/goN exists, and prints callN=STATUS
session_sh='c() { curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "x-api-key: $PROV_API_KEY" "$PROV_BASE_URL/echo" 2>/dev/null; }
	for n in 1 2 3 4 5 6; do
		while [ ! -e '"$PROJ"'/go$n ]; do sleep 0.05; done
		echo "call$n=$(c)"
	done; sleep 30'
step() {
	touch "$PROJ/go$1"
	bg_wait "^call$1=" 30 || return 1
	bg_result "call$1"
}

errand_start --project "$PROJ" -- sh -c "$session_sh" || exit 1
BPID=$(pgrep -f "sessions/$SESSION.broker" | head -n 1)
assert_ne "$BPID" "" "the session has its own broker"
assert_eq "$(stat -c %U "/proc/$BPID")" errand-broker "it runs as errand-broker"
assert_eq "$(stat -c '%U %a' "$KEY_FILE")" "root 600" "the key file is root's, 0600"
assert_eq "$(as_broker cat "$W_DIR/keys/public" 2>&1)" public "the broker's account reaches the key's directory"
assert_match "$(as_broker cat "$KEY_FILE" 2>&1)" "Permission denied" "the broker's account cannot open the key file"
assert_empty "$(find "/proc/$BPID/fd" -lname "$KEY_FILE" 2>/dev/null)" "the broker holds no descriptor of it"

assert_eq "$(step 1)" 200 "a call with the root-owned 0600 key reaches the provider"
assert_eq "$(last_key)" "$KEY" "... with the real key"

# rewritten in place: the provider now takes only the new key
NEW1=sk-rotated-$RANDOM$RANDOM
echo "$NEW1" >"$KEY_FILE"
echo "$NEW1" >"$ACCEPT_FILE"
assert_eq "$(step 2)" 401 "the provider refuses the old key (401, relayed)"
assert_eq "$(step 3)" 200 "after the 401 the key rewritten in place is used"
assert_eq "$(last_key)" "$NEW1" "... the new one"

# renamed over
NEW2=sk-renamed-$RANDOM$RANDOM
rename_over "$NEW2"
assert_eq "$(step 4)" 401 "the provider refuses the key renamed away (401)"
assert_eq "$(step 5)" 200 "after the 401 the key renamed over the file is used"
assert_eq "$(last_key)" "$NEW2" "... the new one"

for k in "$KEY" "$NEW1" "$NEW2"; do
	assert_eq "$(tr '\0' '\n' <"/proc/$BPID/cmdline" | grep -c -- "$k")" 0 "no key in the broker's arguments"
	assert_eq "$(tr '\0' '\n' <"/proc/$BPID/environ" | grep -c -- "$k")" 0 "no key in the broker's environment"
	assert_empty "$(grep -rl -- "$k" "$W_DIR/state" "$RUN_ERR" "$RUN_OUT" 2>/dev/null)" \
		"no key in the logs or any file the broker wrote (receipts.db)"
done
assert_empty "$(find "/proc/$BPID/fd" -lname "$KEY_FILE*" 2>/dev/null)" "the broker still holds no descriptor of the key"
errand_stop

# refused at start: one line naming the file, nothing made (the world's own
# gap and weakened lines apart)
refusal_lines() { grep -vc '^errand: \(gap\|weakened\): ' "$RUN_ERR"; }
refuse() {
	local what=$1 file=$2 says=${3:-cannot be read}
	W_CONFIG=$(cfg "refuse$RANDOM" "$file")
	errand_run -- true
	assert_eq "$RUN_RC" 125 "a credentialFile $what refuses the session (125)"
	assert_eq "$(refusal_lines)" 1 "... in one line"
	assert_contains "$(cat "$RUN_ERR")" "credentialFile $file $says" "... naming the file"
	assert_empty "$(leftovers)" "... and nothing is left behind"
}
refuse "that is missing" "$W_DIR/keys/missing"
refuse "that is a directory" "$W_DIR/keys"
: >"$W_DIR/keys/empty"
chmod 0600 "$W_DIR/keys/empty"
refuse "that is empty" "$W_DIR/keys/empty"
# a key the broker could not redact from an answer (a %XX of it decodes to a
# bracket), which its calls would each have met as a 502
echo 'sk-%5Bx' >"$W_DIR/keys/unredactable"
chmod 0600 "$W_DIR/keys/unredactable"
refuse "the broker could not redact" "$W_DIR/keys/unredactable" "holds no key errand can use"
assert_contains "$(cat "$RUN_ERR")" "could not find it in an answer to redact it" "... saying why"
assert_contains "$(cat "$RUN_ERR")" "put the provider's real key there, or remove the provider" "... and what to change"

# others may read it: it works, and is named as weakened
chmod 0644 "$KEY_FILE"
W_CONFIG=$(cfg weak)
errand_run -- sh -c 'curl -sS --max-time 20 -o /dev/null -w "status=%{http_code}\n" -H "x-api-key: $PROV_API_KEY" "$PROV_BASE_URL/echo"'
assert_eq "$(result status)" 200 "a world-readable key still works"
assert_match "$(cat "$RUN_ERR")" "weakened: agent\.providers\.prov: credentialFile $KEY_FILE is open to every user \(mode 0644\)" \
	"... and is named at start as a weakened guarantee"
chmod 0640 "$KEY_FILE"
errand_run -- true
assert_contains "$(cat "$RUN_ERR")" "is open to its group (mode 0640)" "a group-readable key is named too"
chmod 0600 "$KEY_FILE"
errand_run -- true
assert_not_contains "$(cat "$RUN_ERR")" "weakened: agent.providers" "a 0600 key is not"

# through errand-agent (which runs sessions with its own configuration): the
# same refusal; and with the agent gone the broker keeps the key it has
W_CONFIG_OK=$W_CONFIG
W_CONFIG=$(cfg agentmiss "$W_DIR/keys/missing")
agent_start || exit 1
errand_run -- true
assert_eq "$RUN_RC" 125 "through errand-agent, a missing credentialFile refuses the session (125)"
assert_eq "$(refusal_lines)" 1 "... in one line"
assert_contains "$(cat "$RUN_ERR")" "credentialFile $W_DIR/keys/missing cannot be read" "... naming the file"
agent_stop
W_CONFIG=$W_CONFIG_OK
AGENT_LOG=$W_DIR/agent2.log
agent_start || exit 1
chmod 0644 "$KEY_FILE"
errand_run -- true
assert_eq "$RUN_RC" 0 "through errand-agent, a key file others may read still works"
assert_match "$(cat "$RUN_ERR")" "^errand: weakened: agent\.providers\.prov: credentialFile $KEY_FILE is open to every user \(mode 0644\)" \
	"... and errandctl's stderr names it as weakened, as an embedded start does"
chmod 0600 "$KEY_FILE"
rm -f "$PROJ"/go*
errand_start --project "$PROJ" -- sh -c "$session_sh" || exit 1
assert_eq "$(step 1)" 200 "through errand-agent the key works"
NEW4=sk-daemon-$RANDOM$RANDOM
rename_over "$NEW4"
assert_eq "$(step 2)" 401 "through errand-agent, the provider refuses the rotated-out key"
assert_eq "$(step 3)" 200 "... and errand-agent hands the new key after the 401"
assert_eq "$(last_key)" "$NEW4" "... the new one"
kill -9 "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
echo "sk-elsewhere-$RANDOM" >"$ACCEPT_FILE"
assert_eq "$(step 4)" 401 "with the agent down, the provider refuses the key"
echo "$NEW4" >"$ACCEPT_FILE"
assert_eq "$(step 5)" 200 "... and the broker, with no agent to ask, kept the key it has"
assert_not_contains "$(cat "$W_DIR"/agent*.log)" "$NEW4" "the key is in no agent log"
errand_stop
world_finish
