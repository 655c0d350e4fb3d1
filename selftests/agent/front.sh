#!/bin/bash
# Guarantee: errandctl, the front, runs a plain errandctl run (the command, --config, --egress, --pin, --secret, --env, --json) through errand-agent by itself, its arguments, environment and exit status carried exactly; every other command line, a run under a configuration whose text is not the agent's, and a run the agent refuses as a request, it hands to errandctl-full unchanged, so each refusal is errandctl-full's own, word for word, exit 125, and nothing of the session is made; a refusal of the host's (not of the request) is said once, never asked again; a configuration that is not a regular file is refused at once, never waited on; an agent that reads nothing of a request for 10 s is said to be stuck (exit 125); a signal that comes while the session starts reaches its command once it runs, and ends errandctl by it if the agent answers nothing within 10 s more (errandctl and errandctl-full alike).
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config front)
agent_start || exit 1

# The front alone, without errandctl-full beside it: whatever it hands over
# fails, by name, so what runs did not go through errandctl-full.
mkdir -p "$W_DIR/lone"
cp "$ROOT/build/bin/errandctl" "$W_DIR/lone/errandctl"
LONE=$W_DIR/lone/errandctl
full_missing="errandctl: cannot run $W_DIR/lone/errandctl-full; errandctl and errandctl-full are installed together: reinstall errand"

args=(x 'a"b' 'c\d' "$(printf 'e\tf')" "$(printf 'g\nh')" 'ü€' '' '{"j":1}')
ERRANDCTL=$LONE errand_run --env 'FRONT=one two' --env 'Q="\' --egress none -- \
	sh -c 'printf "%s|" "$@"; printf "\nfront=%s q=%s term=%s\n" "$FRONT" "$Q" "$TERM"; exit 3' \
	"${args[@]}"
assert_eq "$RUN_RC" 3 "the front alone runs a plain errandctl run through the agent, its exit status carried"
assert_eq "$(head -n 2 "$RUN_OUT")" "$(printf '%s|' "${args[@]:1}")" \
	"... each argument exactly (quotes, backslashes, tabs, newlines, UTF-8, empty)"
assert_eq "$(result front)" "one two q=\"\\ term=$TERM" "... and each --env, and the caller's TERM"
assert_not_contains "$RUN_STDERR" "errandctl-full" "... without errandctl-full"

for ctl in "$LONE" "$ROOT/build/bin/errandctl-full"; do
	in_host timeout 60 env -u TERM "$ctl" --config "$W_CONFIG" run --json --egress none -- \
		sh -c 'echo "term=${TERM-unset}"' </dev/null >"$W_DIR/global.out" 2>/dev/null
	echo "rc=$?" >>"$W_DIR/global.out"
	mv "$W_DIR/global.out" "$W_DIR/global.${ctl##*/}"
done
assert_eq "$(sed -n 's/^rc=//p' "$W_DIR/global.errandctl")" 0 "the front takes --config before run too, and --json"
assert_eq "$(cat "$W_DIR/global.errandctl")" "$(cat "$W_DIR/global.errandctl-full")" \
	"... and a caller without TERM gets what errandctl-full gives it"

# Handed over: other commands, options the front leaves to errandctl-full.
for cl in "version" "--verbose run -- true" "run --project $W_DIR -- true" "run --help" \
	"run --pin bad -- true" "run --env =x -- true" "run --egress= -- true" "run -- $(printf '\xff')"; do
	# shellcheck disable=SC2086 # each is a command line, split
	out=$(in_host "$LONE" --config "$W_CONFIG" $cl 2>&1 </dev/null)
	assert_eq "$?:$out" "125:$full_missing" "the front hands 'errandctl $cl' to errandctl-full"
done
# shellcheck disable=SC2086
out=$(in_host "$LONE" run --config "$W_CONFIG" -- 2>&1 </dev/null)
assert_eq "$?:$out" "125:$full_missing" "... and a run with no command"

# A configuration that is not the agent's text (one byte more): the agent
# refuses the front's request, and errandctl-full runs it as it always did.
cp "$W_CONFIG" "$W_DIR/other.json"
echo >>"$W_DIR/other.json"
out=$(in_host "$LONE" run --config "$W_DIR/other.json" --egress none -- true 2>&1 </dev/null)
assert_eq "$?:$out" "125:$full_missing" "a configuration whose text is not the agent's goes to errandctl-full"
out=$(in_host "$ERRANDCTL" run --config "$W_DIR/other.json" --egress none -- sh -c 'echo ran' 2>/dev/null </dev/null)
assert_eq "$?:$out" "0:ran" "... which runs it through the agent"

# Refused as a request: errandctl-full's words, exactly, and nothing made.
started() { grep -c '^errand-agent: session .* started' "$AGENT_LOG"; }
n_before=$(started)
for bad in "--egress bad_host!" "--pin 'api.example.com=1.2.3.4:99999'" "--env '1X=y'"; do
	# shellcheck disable=SC2086
	full=$(eval in_host "$ROOT/build/bin/errandctl-full" --config "$W_CONFIG" run $bad -- true 2>&1 </dev/null)
	full_rc=$?
	# shellcheck disable=SC2086
	front=$(eval in_host "$ERRANDCTL" --config "$W_CONFIG" run $bad -- true 2>&1 </dev/null)
	assert_eq "$?:$front" "$full_rc:$full" "run $bad: the front's refusal is errandctl-full's"
	assert_eq "$full_rc" 125 "... exit 125"
	# shellcheck disable=SC2086
	out=$(eval in_host "$LONE" --config "$W_CONFIG" run $bad -- true 2>&1 </dev/null)
	assert_eq "$out" "$full_missing" "... which the agent refused as a request, handing it over"
done
# Refused by the agent, not as a request (a secret whose value is not
# there): said as errandctl-full says it, by the front itself.
full=$(in_host "$ROOT/build/bin/errandctl-full" --config "$W_CONFIG" run --secret nope@example.com -- true 2>&1 </dev/null)
front=$(in_host "$LONE" --config "$W_CONFIG" run --secret nope@example.com -- true 2>&1 </dev/null)
assert_eq "$?:$front" "125:$full" "a refusal of the agent's not of the request: the front says errandctl-full's line itself"
assert_contains "$front" "secret nope:" "... naming the secret"
assert_eq "$(started)" "$n_before" "... and no session was started by any of the refused runs"

# A configuration that is not a regular file (a FIFO no one writes): the
# front hands it over without reading it, and errandctl-full refuses it at
# once, neither waiting on it.
mkfifo "$W_DIR/fifo.json"
out=$(in_host timeout 20 "$LONE" run --config "$W_DIR/fifo.json" --egress none -- true 2>&1 </dev/null)
assert_eq "$?:$out" "125:$full_missing" "a configuration that is a FIFO no one writes: the front hands it over, not waiting on it"
out=$(in_host timeout 20 "$ERRANDCTL" run --config "$W_DIR/fifo.json" --egress none -- sh -c 'echo ran' 2>&1 </dev/null)
assert_eq "$?" 125 "... and errandctl-full refuses it at once: exit 125"
assert_contains "$out" "not a regular file" "... saying why"

# An agent that takes the connection and reads nothing of a request larger
# than the socket holds (a configuration's text, its 40,000 tabs six bytes
# each in the request) is stuck: the front says so and exits 125, as it
# does for one that takes none.
mkdir -p "$W_DIR/stuck"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(4)
conns = []
while True:
	conns.append(s.accept())' "$W_DIR/stuck/agent.sock" &
W_PIDS+=("$!")
printf '{"paths": {"run": "%s"},%s"pad": "%s"}\n' "$W_DIR/stuck" "$(head -c 40000 /dev/zero | tr '\0' '\t')" \
	"$(head -c 150000 /dev/zero | tr '\0' a)" >"$W_DIR/big.json"
for _ in $(seq 50); do [ -S "$W_DIR/stuck/agent.sock" ] && break; sleep 0.1; done
# (to a file: the listener holds the stdio the request passed it)
timeout 60 "$LONE" run --config "$W_DIR/big.json" --egress none -- true </dev/null >"$W_DIR/stuck.out" 2>&1
assert_eq "$?:$(cat "$W_DIR/stuck.out")" "125:errandctl: errand-agent's socket $W_DIR/stuck/agent.sock has read nothing of a request for 10 s: the agent is stuck; see its log, or restart it" \
	"an agent that reads nothing of a run request: the front exits 125, naming the socket"

# A signal that comes while the session starts (the agent stopped meanwhile)
# reaches its command once it runs: the command does not go on unattended
# after errandctl has gone.
SIGPROJ=$W_DIR/sigproj
mkdir -p "$SIGPROJ" && chmod 0777 "$SIGPROJ"
for ctl in "$ERRANDCTL" "$ROOT/build/bin/errandctl-full"; do
	rm -f "$SIGPROJ/finished"
	kill -STOP "$AGENT_PID"
	nsenter --net="/run/netns/$W-host" "$ctl" --config "$W_CONFIG" run --egress none \
		--project "$SIGPROJ" -- sh -c 'sleep 3; echo done >finished' </dev/null >/dev/null 2>&1 &
	ctl_pid=$!
	sleep 0.5
	kill -TERM "$ctl_pid"
	sleep 0.2
	kill -CONT "$AGENT_PID"
	wait "$ctl_pid"
	rc=$?
	sleep 4
	assert_eq "$rc:$([ -e "$SIGPROJ/finished" ] && echo finished)" "143:" \
		"${ctl##*/}: SIGTERM while the session starts ends its command (status 143) rather than errandctl alone"
done
# ... and one that comes while the agent answers nothing ends errandctl
# within CONTROL_CONNECT_S (10 s), not after the start's 600 s.
printf '{"paths": {"run": "%s"}}\n' "$W_DIR/stuck" >"$W_DIR/small.json"
for ctl in "$LONE" "$ROOT/build/bin/errandctl-full"; do
	"$ctl" run --config "$W_DIR/small.json" --egress none -- true </dev/null >/dev/null 2>&1 &
	ctl_pid=$!
	sleep 0.5
	kill -TERM "$ctl_pid"
	t0=$SECONDS
	wait "$ctl_pid"
	rc=$?
	assert_eq "$rc:$(((SECONDS - t0) <= 12))" "143:1" "${ctl##*/}: SIGTERM while the agent answers nothing: errandctl ends by it within 10 s"
done
world_finish
