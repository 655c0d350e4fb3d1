#!/bin/bash
# Guarantee: every refusal of a session through errand-agent reaches the client as one line naming its cause and what to change (exit 125), set where the call failed, never "the last line the agent logged": an unknown option, a pin to the host's own address, a project that is not a directory, the address pool exhausted, the session limit, a doctor gap under sandbox.requireFullEnforcement, a provider's credential file missing, no file descriptor left in errandctl for the session's pidfd, and a configuration value the agent cannot take (reload), each after an unrelated warning in the agent's log.
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
# No networks prepared ahead: the pool's exhaustion below must meet a start.
W_CONFIG=$(world_config errors '"addressPool": "10.216.0.0/28", "pool": 0')
agent_start --max-sessions 2 || exit 1
SOCK=$(agent_sock)
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }

# An unrelated warning in the agent's log: a client sending an unknown
# message type is dropped, and the agent says so.
poke() {
	in_host python3 - "$SOCK" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(bytes.fromhex("0001007700000002") + b"{}")
s.settimeout(5)
try:
    s.recv(10)
except OSError:
    pass
PY
	local n=0
	while ! grep -q "client dropped: unknown message type 119" "$AGENT_LOG"; do
		[ $n -ge 50 ] && break
		sleep 0.1
		n=$((n + 1))
	done
	: >"$W_DIR/agent.mark"
	grep -c "client dropped" "$AGENT_LOG" >"$W_DIR/agent.mark"
}

# refused NAME REGEX ARGS... -- CMD: errandctl run is refused with one line
# matching REGEX, whatever the agent logged just before.
refused() {
	local name=$1 re=$2
	shift 2
	poke
	errand_run "$@"
	assert_eq "$RUN_RC" 125 "$name: exit 125"
	assert_eq "$(printf '%s\n' "$RUN_STDERR" | grep -c .)" 1 "$name: one line"
	assert_match "$RUN_STDERR" "$re" "$name: the line names the cause"
	assert_not_contains "$RUN_STDERR" "client dropped" "$name: not the agent's last log line"
}

refused "unknown option" "unknown option --bogus" --bogus -- true
refused "pin to an own address" "pin own.test=198.18.0.1 names one of this host's own addresses.*remove the pin" \
	--egress own.test --pin own.test=198.18.0.1 -- true
refused "project not a directory" "project directory /etc/hostname is not an absolute path to a directory; name one" \
	--project /etc/hostname -- true

# Every /30 of the pool has its gateway on a link here: the next session
# finds no free address.
for g in 1 5 9 13; do
	ip -n "$W-host" addr add "10.216.0.$g/32" dev lo
done
refused "address pool exhausted" "no free address in sandbox.addressPool 10.216.0.0/28.*widen the pool or stop sessions" \
	--egress api.test -- true
for g in 1 5 9 13; do
	ip -n "$W-host" addr del "10.216.0.$g/32" dev lo
done
# Two sessions run: the agent's limit (2) is reached.
errand_start --egress api.test -- sleep 60 || exit 1
FIRST_PID=$BG_PID
errand_start --egress none -- sleep 60 || exit 1
SECOND_PID=$BG_PID
refused "session limit" "runs 2 sessions already, its limit \(errand-agent --max-sessions\); stop one first" \
	--egress none -- true
for id in $(ctl sessions --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin) if s.get("status") != "exited"))'); do
	ctl stop "$id" >/dev/null
done
wait "$FIRST_PID" "$SECOND_PID" 2>/dev/null

# No descriptor left for the session's pidfd (ulimit -n 4: stdin, stdout,
# stderr and the socket; errandctl-full holds one more of its own, its
# binary): refused before the agent is asked, as with any other refusal, so
# no session starts that errandctl cannot follow.
count_sessions() { ctl sessions --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
before=$(count_sessions)
for lim_bin in "4:$ERRANDCTL" "5:$ERRANDCTL-full"; do
	lim=${lim_bin%%:*} bin=${lim_bin#*:}
	err=$(in_host sh -c 'ulimit -n "$1"; exec "$0" run --config "$2" --egress none -- true' \
		"$bin" "$lim" "$W_CONFIG" 2>&1 >/dev/null)
	assert_eq "$?:$(printf '%s\n' "$err" | grep -c .)" "125:1" "${bin##*/} under ulimit -n $lim: exit 125, one line"
	assert_contains "$err" "no file descriptor is left to follow the session" "... saying why"
done
assert_eq "$(count_sessions)" "$before" "... and no session started"

# A gap this host has, refused under sandbox.requireFullEnforcement.
gap=$(ctl doctor --json | python3 -c 'import json,sys
c = json.load(sys.stdin)["checks"]
print(next((v["detail"] for v in c.values() if v["state"] == "gap"), ""))')
if [ -n "$gap" ]; then
	sed 's/"requireFullEnforcement": false/"requireFullEnforcement": true/' "$W_CONFIG" >"$W_DIR/full.json"
	cp "$W_DIR/full.json" "$W_CONFIG"
	ctl reload >/dev/null
	gap_re=$(printf '%s' "${gap:0:60}" | sed 's/[][\.*^$()+?{}|]/\\&/g')
	refused "doctor gap under requireFullEnforcement" "refused: $gap_re.*set sandbox.requireFullEnforcement to false" \
		--egress api.test -- true
	sed 's/"requireFullEnforcement": true/"requireFullEnforcement": false/' "$W_DIR/full.json" >"$W_CONFIG"
	ctl reload >/dev/null
else
	trace "this host has no gap to refuse: the doctor case is not tested here"
fi

# A provider whose credential file is missing.
python3 - "$W_CONFIG" "$W_DIR/no-such-key" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["agent"] = {"providers": {"prov": {"baseUrl": "https://provider.test:8443/v1",
    "credentialFile": sys.argv[2], "placement": "x-api-key"}}}
json.dump(c, open(sys.argv[1], "w"))
PY
ctl reload >/dev/null
refused "credential file missing" "agent.providers.prov: credentialFile $W_DIR/no-such-key cannot be read \(No such file or directory\)" \
	--egress api.test -- true

# A key with a value the agent cannot take (an unknown key is only warned
# about): reload is refused in one line naming it, and the agent keeps its
# configuration.
cp "$W_CONFIG" "$W_DIR/good.json"
python3 - "$W_CONFIG" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["sandbox"]["addressPool"] = "no-such-pool"
json.dump(c, open(sys.argv[1], "w"))
PY
poke
out=$(ctl reload 2>&1)
rc=$?
assert_eq "$rc" 125 "bad config value: reload exits 125"
assert_eq "$(printf '%s\n' "$out" | grep -c .)" 1 "bad config value: one line"
assert_match "$out" "sandbox.addressPool: \"no-such-pool\" is not an address range" "bad config value: the line names the key"
assert_not_contains "$out" "client dropped" "bad config value: not the agent's last log line"
# errandctl checks the file first; the agent's own answer, asked directly:
poke
out=$(in_host python3 - "$SOCK" <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.settimeout(10)
s.sendall(bytes.fromhex("0001000800000002") + b"{}")
buf = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    buf += b
ver, typ, n = struct.unpack(">HHI", buf[:8])
print(hex(typ), json.loads(buf[8:8 + n]).get("error", ""))
PY
)
assert_match "$out" "^0x8002 config .*sandbox.addressPool: \"no-such-pool\" is not an address range.*; the agent keeps its configuration$" \
	"bad config value: the agent's answer names the key"
assert_not_contains "$out" "client dropped" "bad config value: not the agent's last log line"
cp "$W_DIR/good.json" "$W_CONFIG"
assert_match "$(ctl version 2>&1)" "^errand-agent [0-9]" "the agent goes on"
world_finish
