#!/bin/bash
# Guarantee: without errand-agent, errandctl sessions, show, denied, grant, revoke, stop, reload and version work on the sessions embedded errandctl runs (state.db, the session's record and its pins), each as a table and as JSON; a grant made this way reaches the running session, which rereads its grants when they change; the session's state.db row is ended when errandctl run returns; a refused name's suggestion names a port sandbox.egressPorts allows (443 when it is there).
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config embedded)
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

errand_start -- sh -c "$(session_ns_sh)"'while :; do
	echo "dns=$('"$PROBE"' dns $NS other.test 2>&1 | tail -n 1)"
	echo "c=$('"$PROBE"' tcp '"$HOST_B"' 443 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
bg_rounds 1 10
assert_eq "$(ctl version --json | jq_py "d['agent']")" None "version --json: no agent runs"
assert_match "$(ctl version)" "errand-agent not running" "version says so"
assert_eq "$(ctl sessions --json | jq_py "[(s['id'], s['owner']) for s in d]")" "[('$SESSION', 'errandctl')]" \
	"sessions --json lists the session errandctl runs"
assert_match "$(ctl sessions)" "^$SESSION " "sessions prints it"
show=$(ctl show "$SESSION" --json)
assert_eq "$(echo "$show" | jq_py "all(p['attached'] for p in d['programs'])")" True "show --json: its programs are attached"
assert_match "$(ctl show "$SESSION")" "^session +$SESSION" "show prints it"
assert_match "$(ctl denied "$SESSION" --json | jq_py "[x['name'] for x in d if x.get('name')][0]")" "^other.test$" \
	"denied --json: the refused name"
assert_match "$(ctl denied)" "other.test +not-allowed" "denied prints it"

assert_eq "$(ctl grant "$SESSION" other.test always --json | jq_py "d['result']")" granted "grant without an agent"
bg_rounds 2 10
assert_eq "$(bg_result c)" "ok hello $HOST_B:443" "the running session reaches the granted host"
assert_eq "$(ctl revoke "$SESSION" other.test | head -n 1)" "revoked other.test (session $SESSION)" "revoke prints what it did"
bg_rounds 2 10
assert_eq "$(bg_result c)" EPERM "after revoke it is refused again"

assert_eq "$(ctl reload --json | jq_py "d['reloaded']")" False "reload --json: nothing to reload without an agent"
assert_eq "$(ctl stop "$SESSION")" "stopped (session $SESSION)" "stop prints what it did"
wait "$BG_PID"
RUN_RC=$?
BG_PID=
assert_eq "$RUN_RC" 137 "the stopped session's errandctl run gives 137"
assert_eq "$(ctl sessions --json)" "[]" "no session is left"
# Ended by errandctl itself before it returned: its teardown child may not
# use errandctl's state.db connection, so it does not write the row.
assert_eq "$(sqlite3 "$W_DIR/state/state.db" "SELECT status FROM sessions WHERE id = '$SESSION'")" exited \
	"state.db: the session's row is ended when errandctl run returns"
out=$(ctl show "$SESSION" 2>&1); rc=$?
assert_eq "$rc" 125 "show of a session that ended: exit 125"
assert_match "$out" "no running session $SESSION; errandctl sessions lists them" "... in one line"
out=$(ctl show nothex 2>&1); rc=$?
assert_eq "$rc" 125 "show of something that is no session id: exit 125"

# The suggestion names a port a grant may open: 443 when egressPorts has it.
for ports in "8080, 443" "8080"; do
	W_CONFIG=$(dns_config "ports${ports//[, ]/}" "" "\"egressPorts\": [$ports]")
	errand_run -- sh -c "$(session_ns_sh)"'"$0" dns $NS a.test >/dev/null' "$PROBE"
	sug=$(grep -o 'to allow it: errandctl grant [0-9a-f]* [^ ]*' "$RUN_ERR")
	if [ "$ports" = 8080 ]; then
		assert_match "$sug" " a\.test:8080$" "egressPorts [8080]: the suggestion names a.test:8080"
	else
		assert_match "$sug" " a\.test$" "egressPorts [8080, 443]: the suggestion names a.test (443)"
	fi
done
world_finish
