#!/bin/bash
# Guarantee: through errand-agent, errandctl run's stderr has its session's refusals as an embedded errandctl prints them (each refused connect and send, each denied name, the grant suggestion; with --json the same as JSON objects), from the front and from errandctl-full alike, and the agent's log keeps them too, and an errandctl observe started before the sessions has every one, however short they are (errandctl observe ID only its session's), and it goes on past a restart of the agent, saying that its stream ended; a reader of the agent's stream that reads nothing for 8 s keeps all 1000 refusals of five sessions' bursts; without the agent, an observe started before an embedded session (and before its run directory exists) has its refusals; a refusal made the instant before the command exits is on stderr before errandctl returns; a caller gets no line of another session's.
# selftests-timeout: 300
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config refusals)

script="echo \"sid=\$ERRAND_SESSION\"; $(probe_script \
	api "resolve api.test" \
	priv "tcp $HOST_PRIV 443" \
	udp "udp $HOST_A 9999" \
	b "tcp $HOST_B 443" \
	gai "resolve other.test" \
	a "tcp $HOST_A 443")"

# The run's lines of errand's refusals, its id made ID.
said() {
	grep '^errand: session' "$RUN_ERR" | sed "s/$(result sid)/ID/g" | sort
}

# Embedded: the reference, with an observer started before the session
# (and before its run directory exists).
observe_start
errand_run --egress api.test -- sh -c "$script"
assert_eq "$(result priv)$(result udp)$(result b)" EPERMEPERMEPERM "embedded, the three calls are refused"
embedded=$(said)
assert_eq "$(echo "$embedded" | grep -c .)" 5 \
	"... and its stderr has five lines: three refusals, a denied name and its suggestion"
trace "embedded: $embedded"
sleep 0.5
observe_stop
assert_eq "$(grep '^errand: session=[0-9a-f]* refused ' "$OBSERVE_OUT" | sed "s/$(result sid)/ID/g" | sort)" \
	"$(echo "$embedded" | grep ' refused ' | sort)" \
	"an errandctl observe started before the embedded session (and before its run directory existed) has its refusals"
assert_contains "$(cat "$OBSERVE_OUT")" "errand: session=$(result sid) denied name=other.test type=A" "... and its denied name"

agent_start || exit 1
errand_run --egress api.test -- sh -c "$script"
sid=$(result sid)
assert_eq "$(result a)" "ok hello $HOST_A:443" "through errand-agent, the allowed connect works (control)"
assert_eq "$(result priv)$(result udp)$(result b)" EPERMEPERMEPERM "... the three calls are refused"
assert_eq "$(said)" "$embedded" "... and errandctl's stderr has the lines embedded errandctl prints, line for line"
assert_eq "$(grep -c "^errand: session=$sid refused " "$AGENT_LOG")" 3 \
	"... which the agent's log has too"

ERRANDCTL=$ROOT/build/bin/errandctl-full errand_run --egress api.test -- sh -c "$script"
assert_eq "$(said)" "$embedded" "errandctl-full says the same lines"

errand_run --json --egress api.test -- sh -c "$script"
assert_match "$(events "\"addr\" *: *\"$HOST_PRIV\"")" \
	"^\\{\"event\":\"refused\",\"session\":\"$(result sid)\",\"proto\":\"tcp\",\"addr\":\"$HOST_PRIV\",\"port\":443,\"reason\":\"forbidden\",\"hook\":\"connect4\"\\}$" \
	"--json: the refusal is one JSON object on stderr"
assert_eq "$(denial_count '"name" *: *"other.test"')" 1 "... and so is the denied name"

# The command refuses and exits at once: the line is there when errandctl
# returns, every time.
seen=0
for _ in $(seq 20); do
	errand_run -- "$PROBE" tcp "$HOST_PRIV" 443 >/dev/null
	[ "$(event_count "addr=$HOST_PRIV port=443 reason=forbidden")" = 1 ] && seen=$((seen + 1))
done
assert_eq "$seen" 20 "a refusal just before the command's exit is on stderr when errandctl returns (20 runs)"

# Another session refuses while this one runs: its caller hears nothing of it.
errand_start -- sh -c "$(bg_wait_sh)$PROBE tcp $HOST_PRIV 443; echo done=1"
quiet_err=$RUN_ERR
quiet=$SESSION
errand_run -- sh -c "echo \"sid=\$ERRAND_SESSION\"; $PROBE tcp $HOST_B 443"
assert_eq "$(event_count "addr=$HOST_B ")" 1 "a second session's caller has its refusal"
bg_go
bg_wait '^done=1' || true
wait "$BG_PID"
trace "the first session wrote: $(cat "$BG_OUT" "$quiet_err")"
assert_eq "$(grep -c "refused proto" "$quiet_err")" 1 "the first session's caller has only its own refusal"
assert_eq "$(grep -c "^errand: session=$quiet refused proto=tcp addr=$HOST_PRIV " "$quiet_err")" 1 \
	"... named by its session"

# An observer started before them has every refusal of sessions that live
# a few milliseconds; one that names a session has that session's alone.
observe_start
all_out=$OBSERVE_OUT
all_pid=$OBSERVE_PID
ids=()
for i in 1 2 3 4 5; do
	errand_run -- sh -c "echo \"sid=\$ERRAND_SESSION\"; $PROBE tcp $HOST_PRIV 443" >/dev/null
	ids+=("$(result sid)")
	if [ "$i" = 2 ]; then
		observe_start "${ids[1]}"
		one_out=$OBSERVE_OUT
		one_pid=$OBSERVE_PID
	fi
done
errand_run -- sh -c "echo \"sid=\$ERRAND_SESSION\"; $PROBE tcp $HOST_B 443" >/dev/null
sleep 0.5
OBSERVE_PID=$one_pid OBSERVE_OUT=$one_out observe_stop
OBSERVE_PID=$all_pid OBSERVE_OUT=$all_out observe_stop
seen=0
for id in "${ids[@]}"; do
	[ "$(grep -c "^errand: session=$id refused proto=tcp addr=$HOST_PRIV port=443 " "$all_out")" = 1 ] &&
		seen=$((seen + 1))
done
assert_eq "$seen" 5 "errandctl observe, started first, has the refusal of each of five short sessions"
assert_eq "$(grep -c "addr=$HOST_B " "$all_out")" 1 "... and of the sixth"
assert_eq "$(grep -c "^errand: session=[0-9a-f]* refused" "$one_out")" 0 \
	"errandctl observe ID, started after its session ended, has none of the others' refusals"

# A reader that lags keeps all of a burst of many sessions' events: five
# sessions refuse 200 connects each (the kernel's burst) while it reads
# nothing; the default socket buffer held about 230 of those lines.
lag_out=$W_DIR/lag.out
in_host python3 - "/run/$W/observe.sock" >"$lag_out" 2>&1 <<'EOF_PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
time.sleep(8)
s.settimeout(2)
buf = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            print("closed")
            break
        buf += b
except socket.timeout:
    pass
print("refused", buf.count(b'"event":"refused"'))
EOF_PY
lag=$!
sleep 1
burst='import socket
for p in range(1000, 1200):
    s = socket.socket()
    try: s.connect(("'$HOST_PRIV'", p))
    except OSError: pass
    s.close()'
bursts=()
for _ in 1 2 3 4 5; do
	in_host "$ERRANDCTL" run --config "$W_CONFIG" -- python3 -c "$burst" >/dev/null 2>&1 &
	bursts+=($!)
done
wait "$lag"
trace "the lagging reader: $(tr '\n' ' ' <"$lag_out")"
assert_eq "$(grep -c '^closed' "$lag_out")" 0 "a reader of the agent's stream that reads nothing for 8 s is kept"
assert_eq "$(sed -n 's/^refused //p' "$lag_out")" 1000 "... and then has all 1000 refusals of five sessions' bursts"
wait "${bursts[@]}"
# An observer outlives a restart of the agent: it says its stream ended, and
# has the refusals of sessions the next agent runs.
observe_start
agent_stop
agent_start || exit 1
errand_run -- sh -c "echo \"sid=\$ERRAND_SESSION\"; $PROBE tcp $HOST_PRIV 443" >/dev/null
sleep 0.5
observe_stop
assert_contains "$OBSERVE_TEXT" "errandctl: observe: errand-agent's stream ended" \
	"an observer says when the agent's stream ends"
assert_contains "$OBSERVE_TEXT" "errand: session=$(result sid) refused proto=tcp addr=$HOST_PRIV port=443 " \
	"... and has the refusal of a session the restarted agent runs"
agent_stop
world_finish
