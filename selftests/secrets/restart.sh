#!/bin/bash
# Guarantee: through errand-agent, a session with a secret works as with the embedded agent, and after kill -9 of the agent and its restart the session's placeholder still becomes the value toward the secret's host (a name resolved after the restart included), and the agent's log never holds the value.
# shellcheck disable=SC2016 # $TOK expands in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/common.sh"
need_errandctl
secrets_world
W_CONFIG=$(secrets_config restart)
chmod 0755 "$W_DIR" "$PROJ"
agent_start || exit 1

c='curl -sS --max-time 20 -o /dev/null -w %{http_code}'
errand_start --project "$PROJ" --secret TOK=a@sec.test -- sh -c 'echo "tok=$TOK"
echo "before=$('"$c"' -H "X-Call: before $TOK" https://sec.test/before)"
while [ ! -e '"$PROJ"'/go ]; do sleep 0.1; done
echo "after=$('"$c"' -H "X-Call: after $TOK" https://sec.test/after)"
echo done' || exit 1
bg_wait '^before=' 30
assert_eq "$(sed -n 's/^before=//p' "$BG_OUT")" 200 "through errand-agent, the secret's host is reached"
assert_contains "$(echo_log)" "header X-Call: before $VALUE_A" "with the value on the wire"
show=$("$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json 2>&1)
assert_match "$(echo "$show" | tr -d ' \n')" "\"addr\":\"198.18.1.30\"[^}]*\"broker\":true" \
	"errandctl show marks the secret host's entry as going through the broker"
agent_kill9
agent_start || exit 1
touch "$PROJ/go"
bg_wait '^done' 40
assert_eq "$(sed -n 's/^after=//p' "$BG_OUT")" 200 "after the agent's restart, the host is resolved and reached again"
assert_contains "$(echo_log)" "header X-Call: after $VALUE_A" "and the placeholder still becomes the value"
errand_stop
assert_not_contains "$(cat "$AGENT_LOG")" "$VALUE_A" "the agent's log never holds the value"
assert_not_contains "$RUN_STDOUT$RUN_STDERR" "$VALUE_A" "nor errandctl's output"

world_finish
