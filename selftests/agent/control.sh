#!/bin/bash
# Guarantee: errand-agent's control socket and its event stream are root's alone (0600, or 0660 root:errand when that group exists) and refuse other users (errandctl observe says so in one line, exit 125); a malformed or hostile client (a wrong version, an unknown type, a length over its type's maximum, which is refused before any payload byte is read, bad JSON, an unknown member, a frame that never completes) is dropped and the agent goes on serving everyone else.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config control)
agent_start || exit 1
SOCK=$(agent_sock)
alive() { "$ERRANDCTL" --config "$W_CONFIG" version 2>/dev/null | grep -c '^errand-agent [0-9]'; }

mode=$(stat -c '%a %U %G' "$SOCK")
if getent group errand >/dev/null; then
	assert_eq "$mode" "660 root errand" "the socket is 0660 root:errand"
else
	assert_eq "$mode" "600 root root" "the socket is 0600 root:root (no group errand here)"
fi

# Another user is refused, in one line, exit 125.
out=$(setpriv --reuid=errand-session --regid=errand-session --clear-groups \
	"$ERRANDCTL" --config "$W_CONFIG" sessions 2>&1)
rc=$?
assert_eq "$rc" 125 "errandctl as another user: exit 125"
assert_contains "$out" "refuses this user; run errandctl as root or as a member of group errand" \
	"... saying who may talk to the agent"
out=$(setpriv --reuid=errand-session --regid=errand-session --clear-groups \
	"$ERRANDCTL" --config "$W_CONFIG" run -- true 2>&1)
rc=$?
assert_eq "$rc:$(echo "$out" | grep -c .)" 125:1 "errandctl run as another user: exit 125, one line"
assert_contains "$out" "refuses this user" "... the agent's refusal, not a claim that no agent runs"
# Past the file's mode, the agent asks the kernel who connected (SO_PEERCRED).
out=$(python3 - "$SOCK" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
os.chmod(sys.argv[1], 0o666)
os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
s.connect(sys.argv[1])
s.settimeout(5)
try:
    s.sendall(bytes.fromhex("0001000900000002") + b"{}")
    print("answered" if s.recv(100) else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
PY
)
chmod 600 "$SOCK"
assert_eq "$out" closed "a peer that is neither root nor in group errand is dropped unanswered, whatever the socket's mode"

# The event stream is the control socket's alike.
OBS=/run/$W/observe.sock
assert_eq "$(stat -c '%a %U %G' "$OBS")" "$mode" "the event stream's socket has the control socket's mode and owners"
out=$(setpriv --reuid=errand-session --regid=errand-session --clear-groups \
	timeout 10 "$ERRANDCTL" --config "$W_CONFIG" observe 2>&1)
rc=$?
assert_eq "$rc:$(echo "$out" | grep -c .)" 125:1 "errandctl observe as another user: exit 125, one line"
assert_contains "$out" "this user may not read the event streams" "... saying so, not waiting for nothing"
out=$(python3 - "$OBS" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
os.chmod(sys.argv[1], 0o666)
os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
s.connect(sys.argv[1])
s.settimeout(3)
try:
    print("closed" if not s.recv(100) else "answered")
except socket.timeout:
    print("kept")
except ConnectionResetError:
    print("closed")
PY
)
chmod "${mode%% *}" "$OBS"
assert_eq "$out" closed "a watcher that is neither root nor in group errand is dropped, whatever the stream's mode"

# Hostile frames, each on its own connection.
send() {
	python3 - "$SOCK" "$1" "${2:-0}" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.settimeout(8)
try:
    s.sendall(bytes.fromhex(sys.argv[2]))
    time.sleep(float(sys.argv[3]))
    print("answered" if s.recv(100) else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
except socket.timeout:
    print("timeout")
PY
}
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
assert_eq "$(send 00020009000000027b7d)" closed "a frame of protocol version 2 is dropped"
assert_eq "$(send 00010077000000027b7d)" closed "an unknown type is dropped"
assert_eq "$(send 0001000200100000)" closed "sessions claiming 1 MiB (its maximum is 64 bytes) is dropped on the header alone"
assert_eq "$(send 0001000900000003$(hex '{x}'))" closed "bad JSON is dropped"
assert_eq "$(send 000100090000000c$(hex '{"evil":true}'))" closed "an unknown member is dropped"
assert_eq "$(send 8001000100000002$(hex '{}'))" closed "an answer sent as a request is dropped"
assert_eq "$(alive)" 1 "after all of them the agent answers"
# A client that sends half a header and waits: the agent serves others meanwhile.
send 000100 7 >"$W_DIR/slow.out" &
slow=$!
sleep 1
t0=$(date +%s%N)
assert_eq "$(alive)" 1 "while a client stalls mid-frame, the agent answers another"
t1=$(date +%s%N)
assert_le $(((t1 - t0) / 1000000)) 2000 "... without waiting for it (ms)"
wait "$slow"
assert_eq "$(cat "$W_DIR/slow.out")" closed "the stalled client is dropped after its deadline"
assert_match "$(cat "$AGENT_LOG")" "client dropped: no whole request within 5 s" "... and the agent says why"
assert_eq "$(kill -0 "$AGENT_PID" && echo alive)" alive "the agent is still running"
world_finish
