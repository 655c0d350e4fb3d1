#!/bin/bash
# Guarantee: sandbox.limits.disk is measured, not enforced by a filesystem: a session whose project and state directories grow past it is stopped and told why (as is one that nests a directory deeper than errand measures, 256 levels), while one that stays under it runs to its end.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"
dd if=/dev/zero of="$PROJ/existing" bs=1M count=8 status=none # counts as the baseline
W_CONFIG=$(world_config disk '"limits": { "disk": "4m" }')

# Writes 1 MiB at a time, up to 32 MiB, with pauses the pacing can see.
# shellcheck disable=SC2016
writer='i=0; while [ $i -lt 32 ]; do dd if=/dev/zero of=grow.$i bs=1M count=1 status=none conv=fsync; i=$((i + 1)); sleep 0.1; done; echo "wrote all"'
errand_run --egress none --project "$PROJ" -- sh -c "cd $PROJ && $writer"
assert_eq "$RUN_RC" 137 "past its budget the session is stopped (SIGKILL: 137)"
assert_not_contains "$RUN_STDOUT" "wrote all" "... before it wrote everything"
assert_match "$RUN_STDERR" "session [0-9a-f]{8} stopped: its project and state directories grew by [0-9]+ bytes, past sandbox.limits.disk \(4194304\)" \
	"... and told why, naming the key"
written=$(find "$PROJ" -name 'grow.*' | wc -l)
# How far past the budget it gets depends on the machine's load; well short
# of everything is what shows the pacing caught it.
assert_le "$written" 24 "... well before the end ($written MiB written of 32)"
assert_empty "$(leftovers)" "nothing is left of it"

rm -f "$PROJ"/grow.*
# Its state directory (its HOME) counts as much, the session's whole life.
errand_run --egress none --project "$PROJ" -- sh -c "cd \"\$HOME\" && $writer"
assert_eq "$RUN_RC" 137 "a session writing its state directory (HOME) past the budget is stopped too"
assert_not_contains "$RUN_STDOUT" "wrote all" "... before it wrote everything"
assert_empty "$(leftovers)" "nothing is left of it"

errand_run --egress none --project "$PROJ" -- sh -c "cd $PROJ && dd if=/dev/zero of=small bs=1M count=2 status=none && echo done"
assert_eq "$RUN_RC" 0 "a session under its budget runs to its end"
assert_eq "$RUN_STDOUT" done "... and its command finishes"
assert_not_contains "$RUN_STDERR" stopped "... and nothing is stopped"
# A tree deeper than errand walks could hide anything below it: past the
# budget too, not a way around it.
rm -f "$PROJ/small"
# shellcheck disable=SC2016
nester='i=0; while [ $i -lt 300 ]; do mkdir d && cd d || exit 1; i=$((i + 1)); done; echo nested; sleep 5; echo "still running"'
errand_run --egress none --project "$PROJ" -- sh -c "cd $PROJ && $nester"
assert_eq "$RUN_RC" 137 "a session that nests directories 300 deep is stopped"
assert_not_contains "$RUN_STDOUT" "still running" "... within the next measurement"
assert_match "$RUN_STDERR" "session [0-9a-f]{8} stopped: its project or state directory holds a directory nested deeper than errand measures for sandbox.limits.disk \(256 levels\)" \
	"... and told why"
rm -rf "$PROJ/d"
world_finish
