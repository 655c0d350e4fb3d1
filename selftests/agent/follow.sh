#!/bin/bash
# Guarantee: errandctl observe ID follows one session to its end, under errand-agent and without it: it prints the session's events, then `errand: session=ID ended status=N` (with --json `{"event":"ended","session":ID,"status":N}`), and returns 0 as the session ends; errandctl observe of every session prints each one's end after its events; observe ID of a session that is not running (never was, or has ended) says so in one line, which names errandctl denied ID for what an ended one was refused, and exits 125 at once, printing nothing else.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config follow)

# The session waits for the go (an observer is on), refuses one connect, and
# exits 3.
script="$(bg_wait_sh)$(probe_script priv "tcp $HOST_PRIV 443")exit 3"

# observe_wait S: OBS_RC, the observer's exit status, once it exits within
# S seconds ("running" if it does not).
observe_wait() {
	local n=0
	OBS_RC=running
	while kill -0 "$OBSERVE_PID" 2>/dev/null; do
		[ $n -ge $(($1 * 20)) ] && return
		sleep 0.05
		n=$((n + 1))
	done
	wait "$OBSERVE_PID"
	OBS_RC=$?
	OBSERVE_PID=
}

# follow NAME [--json]: a session followed by observe ID from its start to
# its end; the observer's output in $OBSERVE_OUT.
follow() {
	local what=$1
	shift
	errand_start -- sh -c "$script" || return 1
	observe_start "$SESSION" "$@"
	sleep 0.5 # connected (its socket is there: a session's stream is followed from then)
	bg_go
	observe_wait 15
	assert_eq "$OBS_RC" 0 "$what: observe ID returns 0 once its session ends"
	sed 's/^/#   /' "$OBSERVE_OUT"
	wait "$BG_PID"
	assert_eq "$?" 3 "$what: ... the session's own exit status being 3"
	BG_PID=
}

# Without the agent: an embedded session's stream.
follow "embedded"
assert_eq "$(grep -c "^errand: session=$SESSION refused proto=tcp addr=$HOST_PRIV port=443" "$OBSERVE_OUT")" 1 \
	"embedded: observe ID printed the session's refusal"
assert_eq "$(tail -n 1 "$OBSERVE_OUT")" "errand: session=$SESSION ended status=3" \
	"embedded: ... and then its end, last"
ended=$SESSION

observe_start 0123abcd
observe_wait 5
assert_eq "$OBS_RC" 125 "embedded: observe ID of a session never run exits 125 at once"
assert_eq "$(cat "$OBSERVE_OUT")" \
	"errandctl: observe: no session 0123abcd is running (errandctl sessions lists those that are; errandctl denied 0123abcd shows what an ended one was refused)" \
	"... with one line saying so"

agent_start || exit 1
observe_start
all_pid=$OBSERVE_PID all_out=$OBSERVE_OUT
follow "errand-agent"
assert_eq "$(grep -c "^errand: session=$SESSION refused proto=tcp addr=$HOST_PRIV port=443" "$OBSERVE_OUT")" 1 \
	"errand-agent: observe ID printed the session's refusal"
assert_eq "$(tail -n 1 "$OBSERVE_OUT")" "errand: session=$SESSION ended status=3" \
	"errand-agent: ... and then its end, last"
sleep 0.5
OBSERVE_PID=$all_pid OBSERVE_OUT=$all_out observe_stop
assert_eq "$(grep "^errand: session=$SESSION " "$all_out" | sed 's/ proto=.*//' | tr '\n' ';')" \
	"errand: session=$SESSION refused;errand: session=$SESSION ended status=3;" \
	"errandctl observe of every session prints a session's end after its events"

follow "errand-agent, --json" --json
assert_match "$(tail -n 1 "$OBSERVE_OUT")" \
	"^\\{\"event\":\"ended\",\"session\":\"$SESSION\",\"status\":3\\}$" \
	"errand-agent, --json: the end is the last JSON object"
assert_eq "$(grep -c '"event":"refused"' "$OBSERVE_OUT")" 1 "... after the refusal's"

for id in 0123abcd "$ended" "$SESSION"; do
	observe_start "$id"
	observe_wait 5
	assert_eq "$OBS_RC" 125 "errand-agent: observe ID of a session not running ($id) exits 125 at once"
	assert_eq "$(cat "$OBSERVE_OUT")" \
		"errandctl: observe: no session $id is running (errandctl sessions lists those that are; errandctl denied $id shows what an ended one was refused)" \
		"... with one line saying so"
done
assert_match "$(in_host "$ERRANDCTL" --config "$W_CONFIG" denied "$SESSION")" "$HOST_PRIV:443 +forbidden" \
	"errand-agent: ... and errandctl denied ID, which the line names, lists the ended session's refusal"

# One running among others: followed, not refused.
errand_start -- sleep 30 || exit 1
observe_start "$SESSION"
observe_wait 2
assert_eq "$OBS_RC" running "errand-agent: observe ID of a running session waits"
errand_stop
observe_wait 10
assert_eq "$OBS_RC" 0 "... and returns 0 when errandctl stop (here the session's kill) ends it"
assert_match "$(tail -n 1 "$OBSERVE_OUT")" "^errand: session=$SESSION ended status=[0-9]+$" "... saying so"

world_finish
