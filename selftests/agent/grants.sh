#!/bin/bash
# Guarantee: errandctl grant ID HOST opens HOST to a running session at once (its next DNS answer and connect), on the host's port only and never to a forbidden address; "once" lets exactly one connection through, a duration ends by itself, "always" lasts until errandctl revoke, which closes the host at once (on every port, or on the one it names; with no agent running too, its allow entries with its connections, and a grant replaced then is dropped by the agent that adopts the session); a grant naming a path, or a port outside sandbox.egressPorts, is refused with exit 125. A refused name gets one suggestion naming the exact command, at most once a minute per host and for at most three hosts a minute per session, never for a wildcard.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config grants)
agent_start || exit 1
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# lines of the background session's output written since mark
since() { tail -n +"$((MARK + 1))" "$BG_OUT" | grep -a "$1"; }
mark() { MARK=$(wc -l <"$BG_OUT"); }

# Restricted, no hosts: each round resolves api.test and rebind-priv.test and
# connects twice to api.test's address.
errand_start -- sh -c "$(session_ns_sh)"'while :; do
	echo "dns=$('"$PROBE"' dns $NS api.test 2>&1 | tail -n 1)"
	echo "c1=$('"$PROBE"' tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
	echo "c2=$('"$PROBE"' tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
	echo "priv=$('"$PROBE"' dns $NS rebind-priv.test 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
bg_rounds 1 10
assert_match "$(bg_result dns)" "^answer NXDOMAIN" "before a grant, api.test does not exist"
assert_eq "$(bg_result c1)" EPERM "... and its address is refused"

# Bad grants: one line, exit 125, nothing granted.
out=$(ctl grant "$SESSION" api.test/v1/messages 2>&1); rc=$?
assert_eq "$rc" 125 "a grant naming a path is refused (exit 125)"
assert_match "$out" "names a host, never a path" "... saying a grant names a host"
out=$(ctl grant "$SESSION" api.test:22 2>&1); rc=$?
assert_eq "$rc" 125 "a grant for port 22 is refused: it is not in sandbox.egressPorts"
assert_match "$out" "port 22 is not in sandbox.egressPorts \[443\]" "... saying so"
out=$(ctl grant "$SESSION" api.test +10m 2>&1); rc=$?
assert_eq "$rc" 125 "a duration written +10m is refused, not read as 10m"
out=$(ctl grant "$SESSION" api.test sometimes 2>&1); rc=$?
assert_eq "$rc" 125 "a grant of kind 'sometimes' is refused"
out=$(ctl grant 0000beef api.test 2>&1); rc=$?
assert_eq "$rc" 125 "a grant to a session that does not run is refused"
assert_eq "$(ctl show "$SESSION" --json | jq_py "d['grants']")" "[]" "no grant was made by them"

# once: exactly one connection.
# (the mark comes first: the session may spend it before the command returns)
mark
assert_eq "$(ctl grant "$SESSION" api.test --json | jq_py "d['result']")" granted "grant once (the default)"
bg_rounds 3 20
assert_eq "$(since '^c[12]=ok' | wc -l)" 1 "a once grant lets exactly one connection through"
assert_match "$(since '^c[12]=' | tr '\n' ' ')" "c1=ok hello $HOST_A:443 c2=EPERM" "... the next one, right after, is refused"
assert_eq "$(ctl show "$SESSION" --json | jq_py "[(g['host'], g['kind'], g['used']) for g in d['grants']]")" \
	"[('api.test:443', 'once', True)]" "show: the once grant is used"
mark
bg_rounds 2 20
assert_match "$(since '^dns=' | tail -n 1)" "^dns=answer NXDOMAIN" "a used once grant answers no more"
mark
ctl grant "$SESSION" api.test once >/dev/null
bg_rounds 3 20
assert_eq "$(since '^c[12]=ok' | wc -l)" 1 "granted once again: exactly one more connection"

# always, then revoke.
ctl grant "$SESSION" api.test always >/dev/null
mark
bg_rounds 2 20
assert_eq "$(bg_result c1)" "ok hello $HOST_A:443" "grant always: connections go through"
assert_eq "$(bg_result c2)" "ok hello $HOST_A:443" "... every one of them"
assert_match "$(ctl sessions --json | jq_py "[s['allowed'] for s in d][0]")" "api.test:443" "sessions lists the granted host"
out=$(ctl revoke "$SESSION" api.test:8443 2>&1); rc=$?
assert_eq "$rc" 125 "a revoke naming another port than the grant's is refused"
assert_contains "$out" "has no grant for api.test:8443" "... saying so"
assert_match "$(ctl show "$SESSION" --json | jq_py "[g['host'] for g in d['grants']]")" "api.test:443" "... and the grant stays"
assert_eq "$(ctl revoke "$SESSION" api.test --json | jq_py "d['result']")" revoked "revoke --json"
mark
bg_rounds 2 20
assert_match "$(bg_result dns)" "^answer NXDOMAIN" "after revoke, api.test does not exist"
assert_eq "$(bg_result c1)" EPERM "... and its address is refused at once, though its answer had time left"
out=$(ctl revoke "$SESSION" api.test 2>&1); rc=$?
assert_eq "$rc" 125 "revoking what is not granted is refused"

# a duration
ctl grant "$SESSION" api.test 3s >/dev/null
mark
bg_rounds 2 20
assert_eq "$(bg_result c1)" "ok hello $HOST_A:443" "grant 3s: connections go through"
sleep 3.5
mark
bg_rounds 2 20
assert_match "$(bg_result dns)" "^answer NXDOMAIN" "3 s later, api.test does not exist"
assert_eq "$(bg_result c1)" EPERM "... and its address is refused: the entries ended with the grant"

# never a forbidden address
ctl grant "$SESSION" rebind-priv.test always >/dev/null
mark
bg_rounds 2 20
assert_match "$(bg_result priv)" "^answer NOERROR addrs= " "a granted name that resolves to a private address gets no address"

# While no agent serves the session: a revoke ends the grant in the kernel at
# once, its allow entries with its connections; a replace made then is
# applied by the next agent, which drops the replaced grant as it adopts.
ctl grant "$SESSION" api.test always >/dev/null
mark
bg_rounds 2 20
assert_eq "$(bg_result c1)" "ok hello $HOST_A:443" "granted again: connections go through"
agent_kill9
ctl revoke "$SESSION" api.test >/dev/null
assert_eq "$?" 0 "with the agent gone, errandctl revokes the grant itself"
mark
bg_rounds 2 30
assert_eq "$(bg_result c1)" EPERM "... and its address is refused at once: its entries went with it"
agent_start || exit 1
ctl grant "$SESSION" api.test always >/dev/null
mark
bg_rounds 2 20
assert_eq "$(bg_result c1)" "ok hello $HOST_A:443" "an adopting agent's grant: connections go through"
agent_kill9
ctl grant "$SESSION" api.test 10m >/dev/null
agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "session $SESSION: dropped 1 grant\(s\) revoked or replaced while no agent served it" \
	"a grant replaced while no agent ran is dropped from the kernel by the agent that adopts the session"

errand_stop

# Suggestions, in a session of their own: each name is refused twice.
errand_start -- sh -c "$(session_ns_sh)"'for n in a.test a.test "*.wild.test" b.test c.test d.test e.test b.test; do
	echo "q=$('"$PROBE"' dns $NS "$n" 2>&1 | tail -n 1)"
done; echo done; sleep 30' || exit 1
bg_wait '^done$' 10
sleep 0.3
sug=$(grep -a "session $SESSION: .* is not allowed; to allow it: " "$AGENT_LOG")
assert_eq "$(echo "$sug" | grep -c .)" 3 "three suggestions in a minute for the session, no more"
assert_eq "$(echo "$sug" | grep -c ' a.test is not allowed')" 1 "a.test refused twice: suggested once"
assert_contains "$sug" "a.test is not allowed; to allow it: errandctl grant $SESSION a.test" \
	"the suggestion is the exact command to paste"
assert_contains "$sug" "b.test is not allowed; to allow it: errandctl grant $SESSION b.test" \
	"... for the next refused host too"
assert_not_contains "$sug" '*' "never a wildcard"
errand_stop
world_finish
