#!/bin/bash
# Guarantee: errandctl run exits with the command's status, 126 when it cannot be executed, 127 when it is not found, and 125 with one stderr line naming the fix, creating nothing, when errand refuses (an agent stuck with its queue of connections full among the refusals, after 10 s).
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --egress none -- sh -c 'exit 7'
assert_eq "$RUN_RC" 7 "the command's own status (7) is errandctl's"
errand_run --egress none -- true
assert_eq "$RUN_RC" 0 "the command's success is errandctl's"
errand_run --egress none -- /nonexistent
assert_eq "$RUN_RC" 127 "a command that does not exist: 127"
errand_run --egress none -- /etc/passwd
assert_eq "$RUN_RC" 126 "a command that cannot be executed: 126"
errand_run --egress none -- sh -c 'echo "sid=$ERRAND_SESSION"'
assert_match "$(result sid)" '^[0-9a-f]{8}$' "the session sees ERRAND_SESSION, 8 hex digits"
assert_empty "$(leftovers)" "those sessions left nothing behind"

# Refusals: 125, one line on stderr, nothing made. A config without
# treatAsPublic, so no start report shares stderr with the refusal.
W_CONFIG=$(world_config_plain plain)
refused() {
	local what=$1 hint=$2
	shift 2
	errand_run "$@"
	assert_eq "$RUN_RC" 125 "$what: exit 125"
	assert_eq "$(grep -c . "$RUN_ERR")" 1 "$what: one line on stderr"
	[ -n "$hint" ] && assert_contains "$RUN_STDERR" "$hint" "$what: the line names '$hint'"
	assert_empty "$(cat "$RUN_OUT")" "$what: the command did not run"
	assert_empty "$(leftovers)" "$what: nothing created"
}
refused "--egress '*.com'" '*.com' --egress '*.com' -- echo ran
refused "--egress 1.2.3.4 (an IP literal)" 'pin' --egress 1.2.3.4 -- echo ran
refused "--egress a.test:0" 'a.test:0' --egress a.test:0 -- echo ran
refused "--egress a.test:65536" 'a.test:65536' --egress a.test:65536 -- echo ran
refused "--bogus" '--bogus' --bogus -- echo ran
refused "--pin without an address" 'a.test' --pin a.test= --egress a.test -- echo ran
# what the caller wrote comes back escaped, in one line, whatever it holds
refused "--egress with a DEL and a newline" 'a\x7fb\x0a.test' --egress "$(printf 'a\177b\n.test')" -- echo ran
# NONE is none, not a host of that name
refused "--egress NONE with a host" 'removes the network' --egress NONE --egress a.test -- echo ran
refused "--env ERRAND_SESSION" "ERRAND_ are errand's own" --env ERRAND_SESSION=00000000 -- echo ran
refused "--env with a bad name" 'BAD-NAME' --env 'BAD-NAME=sk-not-shown' -- echo ran
assert_not_contains "$RUN_STDERR" 'sk-not-shown' "... never showing its value"
cat >"$W_DIR/nonet.json" <<EOC
{
  "sandbox": { "network": "none", "requireFullEnforcement": false },
  "paths": { "run": "/run/$W", "state": "$W_DIR/state", "bpf": "/sys/fs/bpf/$W", "cgroup": "$W" }
}
EOC
W_CONFIG=$W_DIR/nonet.json
refused "--egress under sandbox.network none" 'sandbox.network is "none"' --egress a.test -- echo ran
W_CONFIG=$(world_config_plain plain)
cat >"$W_DIR/typo.json" <<EOC
{
  "sandbox": { "egres": { "allow": ["a.test"] } },
  "paths": { "run": "/run/$W", "state": "$W_DIR/state", "bpf": "/sys/fs/bpf/$W", "cgroup": "$W" }
}
EOC
W_CONFIG=$W_DIR/typo.json
refused "a config key 'egres'" 'egress' -- echo ran
W_CONFIG=$W_DIR/missing.json
refused "a --config file that does not exist" 'missing.json' -- echo ran

# errandctl without a command, or with one it does not know: the same.
for cl in "" "--config $W_DIR/typo.json" "frobnicate" "--frobnicate sessions"; do
	# shellcheck disable=SC2086
	err=$("$ERRANDCTL" $cl 2>&1 >/dev/null)
	assert_eq "$?:$(printf '%s\n' "$err" | grep -c .)" "125:1" "errandctl $cl: exit 125, one line on stderr"
	assert_match "$err" "errandctl --help" "... naming errandctl --help"
done

# An agent whose queue of connections stays full (stuck, not busy: this
# listener never accepts): errandctl says so after 10 s and exits 125, and
# starts no session beside it; a command that asks the agent says the same.
mkdir -p "/run/$W/stuck"
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(0)
queued = []
while True:
    c = socket.socket(socket.AF_UNIX)
    c.setblocking(False)
    try:
        c.connect(sys.argv[1])
    except BlockingIOError:
        break
    queued.append(c)
print("full", flush=True)
time.sleep(300)
' "/run/$W/stuck/agent.sock" >"$W_DIR/stuck.out" 2>&1 &
W_BG_PIDS+=("$!")
for _ in $(seq 1 50); do
	grep -q full "$W_DIR/stuck.out" && break
	sleep 0.1
done
sed "s|\"run\": \"/run/$W\"|\"run\": \"/run/$W/stuck\"|" "$(world_config_plain stuckbase)" >"$W_DIR/stuck.json"
W_CONFIG=$W_DIR/stuck.json
t0=$(date +%s)
refused "an agent whose socket takes no connection" "the agent is stuck" -- echo ran
assert_ge $(($(date +%s) - t0)) 9 "... said once it has waited 10 s"
err=$("$ERRANDCTL" --config "$W_CONFIG" sessions 2>&1 >/dev/null)
assert_eq "$?:$(printf '%s\n' "$err" | grep -c .)" "125:1" "errandctl sessions: exit 125, one line on stderr"
assert_contains "$err" "has taken no connection for 10 s" "... naming the stuck agent"

world_finish
