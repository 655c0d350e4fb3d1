#!/bin/bash
# Guarantee: with --egress none a session has no network at all (only lo, no route) and every connect and send is refused at once with EPERM, one no-network event each; its BPF maps are the three its refusals use (settings, events, counters) and its cgroup hooks the five that refuse (connect, sendmsg, sock_create; not those that only give back redirected DNS addresses), embedded, through the agent and from its pool alike, and a restarted agent adopts such a session (its refusals still EPERM and counted) and removes every pin of it when it ends.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --egress none -- sh -c "$(net_script)$(probe_script \
	tcp "tcp $HOST_A 443" \
	udp "udp $HOST_A 443" \
	lo "tcp 127.0.0.1 9")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result links)" "lo " "the session has no link but lo"
assert_no_match "$(result routes)" 'default' "the session has no default route"
assert_eq "$(result tcp)" EPERM "TCP connect to $HOST_A:443 is refused with EPERM"
assert_eq "$(result udp)" EPERM "UDP send to $HOST_A:443 is refused with EPERM"
assert_eq "$(result lo)" ECONNREFUSED "loopback stays the session's own (nothing listens there: ECONNREFUSED, not EPERM)"
assert_eq "$(event_count "proto=tcp addr=$HOST_A port=443 reason=no-network hook=connect4")" 1 \
	"exactly one no-network event for the TCP connect"
assert_eq "$(event_count "proto=udp addr=$HOST_A port=443 reason=no-network hook=sendmsg4")" 1 \
	"exactly one no-network event for the UDP send"
assert_eq "$(event_count .)" 2 "no other refusal events"
assert_empty "$(cat "$W_DIR/wan-serve.log")" "nothing reached the wan servers"

# The hooks that refuse, by their links' pin names.
hooks="connect4 connect6 sendmsg4 sendmsg6 sock_create "
probe="$(probe_script tcp "tcp $HOST_A 443")"
loop='while :; do '"$probe"' echo round; sleep 0.2; done'
errand_start --egress none -- sh -c "$loop" || { world_finish; exit 1; }
bg_rounds 1 10
assert_eq "$(session_pins map)" "config counters events " "embedded: its maps are its settings, events and counters alone"
assert_eq "$(session_pins link)" "$hooks" "... and its cgroup links the five hooks that refuse"
assert_eq "$(bg_result tcp)" EPERM "... and its connect is refused"
kill "$BG_PID" 2>/dev/null
wait "$BG_PID" 2>/dev/null

agent_start || exit 1
for n in 1 2 3; do
	errand_start --egress none -- sh -c "$loop" || { world_finish; exit 1; }
	bg_rounds 1 10
	assert_eq "$(session_pins map)" "config counters events " "through the agent, start $n: the same three maps"
	assert_eq "$(session_pins link)" "$hooks" "... and the same five links"
	[ "$n" = 3 ] && break
	kill "$BG_PID" 2>/dev/null
	wait "$BG_PID" 2>/dev/null
done
assert_match "$(cat "$AGENT_LOG")" "session $SESSION started in a network prepared ahead" \
	"... the last from the agent's pool"
agent_kill9
agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "session $SESSION adopted" "a restarted agent adopts the session"
assert_eq "$(grep -c "session $SESSION: cannot" "$AGENT_LOG")" 0 "... with no complaint (no \"session $SESSION: cannot\" line)"
before=$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["refused"])')
bg_rounds 2 10
assert_eq "$(bg_result tcp)" EPERM "... and its connects are still refused"
after=$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["refused"])')
assert_ge "$after" "$((before + 1))" "... and counted"
assert_eq "$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" --json |
	python3 -c 'import json,sys; print(" ".join(sorted(p["hook"] for p in json.load(sys.stdin)["programs"] if p["attached"])))')" \
	"${hooks% }" "... and show lists its five hooks, each attached"
in_host "$ERRANDCTL" --config "$W_CONFIG" stop "$SESSION" >/dev/null
wait "$BG_PID" 2>/dev/null
for _ in $(seq 50); do [ -e "/sys/fs/bpf/$W/$SESSION" ] || break; sleep 0.1; done
assert_eq "$(ls -A "/sys/fs/bpf/$W/$SESSION" 2>/dev/null | wc -l)" 0 "once it ends, no pin of it is left"
agent_stop
assert_empty "$(leftovers)" "nothing is left"

world_finish
