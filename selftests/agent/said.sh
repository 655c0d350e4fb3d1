#!/bin/bash
# Guarantee: through errand-agent, what a start states (each gap, the grants beyond the floor, the variables sandbox.env sets, the rules, each weakened guarantee) reaches errandctl's stderr as an embedded start says it, each line escaped, and the agent's log keeps it too, each line named by its session; a start that states more than the answer carries (a sandbox.env of thousands of names) still runs, its client told how many lines only the agent's log has.
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
errand_run --egress none -- sh -c 'echo "one=$SAID_ONE"'
assert_eq "$RUN_RC" 0 "through errand-agent, the session runs"
assert_eq "$(result one)" 1 "... with sandbox.env"
assert_eq "$(grep '^errand: ' "$RUN_ERR")" "$embedded" \
	"... and errandctl's stderr holds the same statements, line for line, as the embedded start's"
started=$(sed -n 's/^errand-agent: session \([^ ]*\) started.*/\1/p' "$AGENT_LOG" | tail -n 1)
assert_match "$started" "^[0-9a-z]+$" "... as the session the agent's log says started"
assert_eq "$(grep -c "^errand-agent: session $started: errand: sandbox.env sets (values not shown): SAID_ONE, SAID_TWO\$" "$AGENT_LOG")" 1 \
	"... whose statements the agent's log keeps too, each named by that session"

# More than run-started carries: four hundred long names (what the
# launcher's command line holds) make one line of about 80 KiB, more than
# the whole answer may be.
pad=$(printf 'P%.0s' $(seq 200))
env=$(python3 -c 'import sys; print(", ".join("\"SAID_%04d_%s\": \"v\"" % (i, sys.argv[1]) for i in range(400)))' "$pad")
world_config said "\"env\": { $env }" >/dev/null
in_host "$ERRANDCTL" --config "$W_CONFIG" reload >/dev/null
errand_run --egress none -- sh -c "echo \"last=\$SAID_0399_$pad\""
assert_eq "$RUN_RC" 0 "a start that states more than its answer carries still runs through errand-agent"
assert_eq "$(result last)" v "... with all of sandbox.env"
assert_contains "$(cat "$RUN_ERR")" "errand: and 1 more lines this start said, in errand-agent's log" \
	"... and errandctl's stderr says how many lines only the agent's log has"
assert_contains "$(cat "$AGENT_LOG")" "SAID_0399_$pad" "... which has them"
assert_contains "$(cat "$RUN_ERR")" "errand: weakened: sandbox.egress.treatAsPublic treats" \
	"... and the lines that fit are there"
agent_stop
assert_empty "$(leftovers)" "nothing is left"
world_finish
