#!/bin/bash
# Guarantee: errand-agent's limits are explicit and refuse cleanly: past 64 control clients at once the next one gets one error line naming the limit (not a silent close) and the agent goes on serving; past 16 observers of the agent's event stream the next one gets one line saying so; both served again once the others are gone; errandctl run clients waiting for their sessions do not count against the 64 (--max-sessions bounds them), so 140 waiting sessions (past the 128 inotify instances a user may hold) all start and leave control commands served, and, idle, never wake the agent's loop.
# selftests-timeout: 300
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config limits)
agent_start || exit 1
SOCK=$(agent_sock)
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }

errand_start --egress none -- sleep 60 || exit 1
EVENTS=/run/$W/observe.sock

# Holds N connections to SOCK open (sending nothing) for a while, then one
# more connects and prints what it got, up to 1 s after connecting.
out=$(in_host python3 - "$SOCK" "$EVENTS" <<'PY'
import json, socket, struct, sys, time
def hold(path, n):
    held = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        held.append(s)
    time.sleep(0.5)
    return held
def extra(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(3)
    buf = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            buf += b
    except socket.timeout:
        pass
    return buf
held = hold(sys.argv[1], 64)
buf = extra(sys.argv[1])
if len(buf) >= 8:
    _, typ, n = struct.unpack(">HHI", buf[:8])
    print("control", hex(typ), json.loads(buf[8:8 + n]).get("error"))
else:
    print("control nothing")
for s in held:
    s.close()
held = hold(sys.argv[2], 16)
print("observe", extra(sys.argv[2]).decode().strip() or "nothing")
for s in held:
    s.close()
PY
)
echo "$out" | sed 's/^/# /'
assert_match "$(echo "$out" | grep '^control')" "^control 0x8002 the agent serves 64 clients at once already; try again shortly$" \
	"the 65th control client gets one error line naming the limit"
assert_match "$(echo "$out" | grep '^observe')" '^observe \{"error":"this agent has 16 observers already; stop one"\}$' \
	"the 17th observer gets one line naming the limit"
sleep 0.5
assert_match "$(ctl version 2>&1)" "^errand-agent [0-9]" "the agent serves again once they are gone"
observe_start "$SESSION"
sleep 0.5
observe_stop
assert_not_contains "$OBSERVE_TEXT" "observers already" "a new observer is served again"
errand_stop

# Clients waiting for their sessions are bounded by --max-sessions, not the
# 64: with 140 errandctl run waiting, control commands are still served.
# 140 is also past the 128 inotify instances a user may hold (each session
# had one for its grants): none of them is refused.
pids=()
for i in $(seq 1 140); do
	(exec nsenter --net="/run/netns/$W-host" "$ERRANDCTL" run --config "$W_CONFIG" --egress none -- sleep 60 \
		</dev/null >/dev/null 2>"$W_DIR/wait$i.err") &
	pids+=($!)
	W_BG_PIDS+=($!)
done
n=0
for _ in $(seq 1 240); do
	n=$(ctl sessions --json 2>/dev/null | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin) if s.get("status") != "exited"))' 2>/dev/null)
	[ "${n:-0}" -ge 140 ] && break
	sleep 0.5
done
assert_eq "$n" 140 "140 errandctl run wait for their sessions, and sessions is answered"
assert_match "$(ctl version 2>&1)" "^errand-agent [0-9]" "... and so is version"
# (a refusal is an errandctl: line; a start's statements are errand: lines)
assert_empty "$(grep -h '^errandctl: ' "$W_DIR"/wait*.err)" "none of the 140 was refused"
# Idle sessions cost the agent's loop nothing: with the 140 asleep, its
# main thread wakes a few times in 3 s (its own tick is once a second), not
# once a second for each (a timer of each session's did, 140 times a second).
wakeups() { awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$AGENT_PID/task/$AGENT_PID/status"; }
sleep 2
w0=$(wakeups)
sleep 3
w=$(($(wakeups) - w0))
assert_le "$w" 30 "140 idle sessions leave the agent's loop asleep: it woke $w times in 3 s"
for id in $(ctl sessions --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin) if s.get("status") != "exited"))'); do
	ctl stop "$id" >/dev/null
done
for p in "${pids[@]}"; do wait "$p"; done
W_BG_PIDS=()
world_finish
