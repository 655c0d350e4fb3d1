#!/bin/bash
# Guarantee: with errand-agent running, errandctl run goes through its control socket (the session is the agent's, the command gets errandctl's stdin, stdout and stderr, and errandctl gives CMD's exit status); sessions, show, stop, denied, reload and version answer from the agent, each as a table and as JSON; after kill -9 of the agent a running session's enforcement holds exactly as before (a forbidden connect stays refused, an allowed one stays allowed) and DNS fails closed; a restarted agent re-adopts it, DNS answers again, and errandctl run, still waiting, reports CMD's status (errandctl-full too, without spinning or printing lines it never got); a caller whose stderr reader went away still gets CMD's status.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
# No networks prepared ahead: "left nothing behind" below counts objects while
# the agent runs (agent/pool proves the pool's own).
W_CONFIG=$(dns_config agent "" '"pool": 0')
agent_start || exit 1
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# A short session through the agent: stdio and the exit status.
errand_run --egress api.test -- sh -c 'echo "out=hello"; echo err-line >&2; exit 7'
assert_eq "$RUN_RC" 7 "errandctl run gives CMD's exit status through the agent"
assert_eq "$(result out)" hello "CMD wrote to errandctl's stdout"
assert_contains "$RUN_STDERR" err-line "CMD wrote to errandctl's stderr"
assert_match "$(cat "$AGENT_LOG")" "session [0-9a-f]{8} started" "the agent ran the session"

# A refusal's line for a caller whose stderr reader went away: CMD's status
# all the same (not SIGPIPE's), from the front and from errandctl-full.
for ctl_bin in "$ERRANDCTL" "$ROOT/build/bin/errandctl-full"; do
	in_host "$ctl_bin" run --config "$W_CONFIG" --egress api.test -- \
		sh -c "$PROBE tcp 10.99.0.10 443 >/dev/null 2>&1; sleep 0.5; exit 7" </dev/null 2>&1 | true
	assert_eq "${PIPESTATUS[0]}" 7 "${ctl_bin##*/}: CMD's status though stderr's reader has gone"
done

# A long session: the agent's view of it.
errand_start --egress api.test -- sh -c "$(session_ns_sh)"'while :; do
	if [ -e /tmp/go ]; then :; fi
	echo "dns=$('"$PROBE"' dns $NS api.test 2>&1 | tail -n 1)"
	echo "allowed=$('"$PROBE"' tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
	echo "forbidden=$('"$PROBE"' tcp 10.99.0.10 443 2>&1 | tail -n 1)"
	echo round
	sleep 0.3
done' || exit 1
bg_wait '^round$' 10
list=$(ctl sessions --json)
assert_eq "$(echo "$list" | jq_py "[s['id'] for s in d if s['id']=='$SESSION'][0]")" "$SESSION" \
	"sessions --json lists the session"
assert_eq "$(echo "$list" | jq_py "[s['mode'] for s in d if s['id']=='$SESSION'][0]")" restricted \
	"... with its mode"
assert_eq "$(echo "$list" | jq_py "[s['allowed'] for s in d if s['id']=='$SESSION'][0]")" "['api.test:443']" \
	"... and its allowed names"
assert_eq "$(echo "$list" | jq_py "[s['owner'] for s in d if s['id']=='$SESSION'][0]")" agent \
	"... run by the agent"
assert_match "$(ctl sessions)" "^$SESSION +[0-9]+m[0-9]+s +restricted +[0-9]+ +api.test:443 +sh -c" \
	"sessions prints a table row for it"
show=$(ctl show "$SESSION" --json)
assert_eq "$(echo "$show" | jq_py "sorted(p['hook'] for p in d['programs'] if p['attached'])")" \
	"['connect4', 'connect6', 'getpeername4', 'getpeername6', 'recvmsg4', 'recvmsg6', 'sendmsg4', 'sendmsg6', 'sock_create', 'tc_egress', 'tc_ingress']" \
	"show --json: every cgroup program and the tc backstop attached"
assert_eq "$(echo "$show" | jq_py "[e['addr'] + ':' + str(e['port']) for e in d['allowMap']]")" "['$HOST_A:443']" \
	"show --json: the allow map holds api.test's answer"
assert_match "$(echo "$show" | jq_py "[e['expiresIn'] for e in d['allowMap']][0]")" "^[0-9]+$" \
	"... with its expiry"
assert_match "$(echo "$show" | jq_py "d['counters']['refused']")" "^[1-9][0-9]*$" "show --json: refusals counted"
assert_match "$(ctl show "$SESSION")" "connect4 +prog [0-9]+ +attached" "show prints the programs"
assert_match "$(ctl show "$SESSION")" "tc_ingress +prog [0-9]+ +attached" "... the backstop among them"
den=$(ctl denied "$SESSION" --json)
assert_match "$(echo "$den" | jq_py "[x['addr'] for x in d if x.get('reason')=='forbidden'][0]")" "^10.99.0.10$" \
	"denied --json lists the forbidden connect"
assert_match "$(ctl denied "$SESSION")" "10.99.0.10:443 +forbidden" "denied prints it as a table"
assert_eq "$(bg_result allowed)" "ok hello $HOST_A:443" "control: the allowed host is reached"
assert_eq "$(bg_result forbidden)" EPERM "control: the forbidden host is refused"

# errandctl-full's own wait (the front's is the session above): it has read
# a refusal's line when the agent goes away; it must neither spin on the dead
# socket nor print lines it never got, and it reports CMD's status.
full_out=$W_DIR/full.out full_err=$W_DIR/full.err
(exec nsenter --net="/run/netns/$W-host" "$ROOT/build/bin/errandctl-full" run --config "$W_CONFIG" \
	--egress api.test -- sh -c 'echo "id=$ERRAND_SESSION"; '"$PROBE"' tcp 10.99.0.10 443; exec sleep 60' \
	</dev/null >"$full_out" 2>"$full_err") &
FULL_PID=$!
W_BG_PIDS+=("$FULL_PID")
for _ in $(seq 1 100); do
	grep -q refused "$full_err" 2>/dev/null && break
	sleep 0.1
done
full_id=$(sed -n 's/^id=//p' "$full_out")
assert_contains "$(cat "$full_err")" refused "errandctl-full: the session's refusal reached its stderr"

# kill -9: enforcement holds, DNS fails closed.
agent_kill9
bg_rounds 2 20
assert_eq "$(bg_result allowed)" "ok hello $HOST_A:443" "agent killed: the allowed host is still reached"
assert_eq "$(bg_result forbidden)" EPERM "agent killed: the forbidden host is still refused"
# The backstop too (a prepared network's clsact filters),
# for a process in the session's namespace outside its cgroup.
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" "agent killed: the backstop passes the allowed host"
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_B 443 --timeout 2)" ETIMEDOUT "agent killed: the backstop still drops another host"
assert_match "$(bg_result dns)" "^(timeout|error|ECONNREFUSED)" "agent killed: DNS fails closed (no answer)"
assert_eq "$(kill -0 "$BG_PID" 2>/dev/null && echo alive)" alive "errandctl run keeps waiting"

# Restart: adopted, DNS answers again.
agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "session $SESSION adopted" "the restarted agent adopts the session"
bg_rounds 2 20
assert_match "$(bg_result dns)" "^answer NOERROR addrs=$HOST_A" "after the restart, DNS answers again"
ticks=$(awk '{print $14 + $15}' "/proc/$FULL_PID/stat")
assert_eq "$(ctl stop "$full_id" --json | jq_py "d['result']")" stopped "errandctl-full's session adopted and stopped"
wait "$FULL_PID"
assert_eq "$?" 137 "errandctl-full, which waited across the restart, reports the stopped session's status"
assert_eq "$(grep -c '^$' "$full_err")" 0 "... having printed no line the agent did not send"
assert_eq "$([ "$ticks" -lt 100 ] && echo idle || echo "$ticks ticks")" idle \
	"... and having waited without spinning (under a second of CPU)"
assert_eq "$(ctl sessions --json | jq_py "[s['id'] for s in d]")" "['$SESSION']" "sessions lists it again"

# stop: the session ends, errandctl run reports how.
assert_eq "$(ctl stop "$SESSION" --json | jq_py "d['result']")" stopped "stop --json"
wait "$BG_PID"
RUN_RC=$?
BG_PID=
assert_eq "$RUN_RC" 137 "errandctl run, which waited across the restart, reports the stopped session's status"
sleep 0.5
assert_eq "$(ctl sessions --json)" "[]" "no session is left"
assert_empty "$(leftovers)" "the stopped session left nothing behind"

# reload and version
assert_eq "$(ctl reload --json | jq_py "d['reloaded']")" True "reload --json: the agent reloaded"
assert_eq "$(ctl reload)" "errand-agent reloaded its configuration" "reload prints it"
assert_match "$(ctl version --json | jq_py "d['agent']")" "^[0-9]+\.[0-9]+\.[0-9]+$" "version --json names the agent's"
assert_match "$(ctl version)" "errand-agent [0-9.]+ \(protocol 1\)" "version prints both"
world_finish
