#!/bin/bash
# Guarantee: through errand-agent, what a start states (each gap, the grants beyond the floor, the variables sandbox.env sets, the rules, each weakened guarantee) reaches errandctl's stderr as an embedded start says it, each line escaped, before the command's first line (the launcher writes them as it takes the session, so a launcher that fails after that, its namespaces say, leaves them on stderr before its own line), and the agent's log keeps it too, each line named by its session; a start that states a line of 80 KiB (a sandbox.env of hundreds of long names) runs, the line whole on errandctl's stderr.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# What a start says, embedded: the reference.
W_CONFIG=$(world_config said '"env": { "SAID_ONE": "1", "SAID_TWO": "2" }')
errand_run --egress none -- sh -c 'echo "one=$SAID_ONE"'
assert_eq "$(result one)" 1 "embedded, the session runs with sandbox.env"
embedded=$(grep '^errand: ' "$RUN_ERR")
assert_contains "$embedded" "errand: sandbox.env sets (values not shown): SAID_ONE, SAID_TWO" \
	"embedded, the start names what sandbox.env sets"
assert_contains "$embedded" "errand: weakened: sandbox.egress.treatAsPublic treats" \
	"... and the weakened guarantee"

agent_start || exit 1
# The command writes to its stderr first thing: the statements come before.
errand_run --egress none -- sh -c 'echo "first line of the command" >&2; echo "one=$SAID_ONE"'
assert_eq "$RUN_RC" 0 "through errand-agent, the session runs"
assert_eq "$(result one)" 1 "... with sandbox.env"
assert_eq "$(grep '^errand: ' "$RUN_ERR")" "$embedded" \
	"... and errandctl's stderr holds the same statements, line for line, as the embedded start's"
assert_eq "$(grep -v '^errand: ' "$RUN_ERR" | head -n 1)" "first line of the command" \
	"... all of them before the command's first line on its stderr"
assert_eq "$(tail -n 1 "$RUN_ERR")" "first line of the command" "... which is its last"
started=$(sed -n 's/^errand-agent: session \([^ ]*\) started.*/\1/p' "$AGENT_LOG" | tail -n 1)
assert_match "$started" "^[0-9a-z]+$" "... as the session the agent's log says started"
assert_eq "$(grep -c "^errand-agent: session $started: errand: sandbox.env sets (values not shown): SAID_ONE, SAID_TWO\$" "$AGENT_LOG")" 1 \
	"... whose statements the agent's log keeps too, each named by that session"

# A client of its own, which prints nothing of the agent's answer: the
# command's stderr has the statements all the same, before its own line.
in_host python3 - "$(agent_sock)" "$W_DIR" <<'EOF_PY'
import array, json, socket, struct, sys
path, d = sys.argv[1:3]
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(path)
out, err = open(d + "/raw.out", "w"), open(d + "/raw.err", "w")
body = json.dumps({"argv": ["sh", "-c", "echo first >&2"], "egress": ["none"], "project": d}).encode()
fds = array.array("i", [out.fileno(), out.fileno(), err.fileno()])
c.sendmsg([struct.pack(">HHI", 1, 1, len(body)) + body],
           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
while c.recv(4096):  # its answers, to the session's end
    pass
EOF_PY
assert_eq "$(grep '^errand: ' "$W_DIR/raw.err")" "$embedded" \
	"through a client that prints nothing of the answer, the command's stderr has the statements"
assert_eq "$(tail -n 1 "$W_DIR/raw.err")" first "... before the command's own line"

# A start that states much: four hundred long names (what the launcher's
# command line holds) make one line of about 80 KiB.
pad=$(printf 'P%.0s' $(seq 200))
env=$(python3 -c 'import sys; print(", ".join("\"SAID_%04d_%s\": \"v\"" % (i, sys.argv[1]) for i in range(400)))' "$pad")
world_config said "\"env\": { $env }" >/dev/null
in_host "$ERRANDCTL" --config "$W_CONFIG" reload >/dev/null
errand_run --egress none -- sh -c "echo \"last=\$SAID_0399_$pad\""
assert_eq "$RUN_RC" 0 "a start that states a line of 80 KiB runs through errand-agent"
assert_eq "$(result last)" v "... with all of sandbox.env"
assert_contains "$(grep '^errand: sandbox.env sets' "$RUN_ERR")" "SAID_0399_$pad" \
	"... and errandctl's stderr has that line whole"
assert_contains "$(cat "$AGENT_LOG")" "SAID_0399_$pad" "... as the agent's log does"
assert_contains "$(cat "$RUN_ERR")" "errand: weakened: sandbox.egress.treatAsPublic treats" \
	"... and the other lines"
agent_stop

# A launcher that fails once it has the session (its network namespace is
# gone): the statements are on stderr all the same, before its own line.
launcher_setup said
PROJ=$W_DIR/project
mkdir -p "$PROJ"
"$ROOT/build/bin/errand-launch" --session "$W-s" --cgroup "$LCG" --netns "$W_DIR/no-such-netns" \
	--uid "$S_UID" --gid "$S_GID" --project "$PROJ" --say "errand: weakened: a statement" \
	-- sh -c 'echo errt-ran' >"$W_DIR/fail.out" 2>"$W_DIR/fail.err"
rc=$?
assert_eq "$rc" 125 "a launcher that cannot enter the session's network namespace exits 125"
assert_eq "$(head -n 1 "$W_DIR/fail.err")" "errand: weakened: a statement" \
	"... with the start's statement first on its stderr"
assert_eq "$(sed -n 2p "$W_DIR/fail.err" | grep -c "no-such-netns")" 1 "... then the line naming what failed"
assert_empty "$(cat "$W_DIR/fail.out")" "... and the command never ran"
ip netns del "$W-said"
rmdir "$LCG" 2>/dev/null
assert_empty "$(leftovers)" "nothing is left"
world_finish
