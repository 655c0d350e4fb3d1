#!/bin/bash
# Guarantee: with sandbox.requireFullEnforcement true, the default, any gap refuses the session: exit 125, one stderr line a gap naming the key to relax, the command never runs and nothing is created; set to false, the session runs and each gap is stated at its start.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"
# A gap on every host: errand's cgroup below a parent of the test's own that
# delegates no controller, so per-session limits cannot be applied.
mkdir -p "$W_CG/$W"
strict_config() {
	local f=$W_DIR/$1.json
	cat >"$f" <<EOC
{
  "sandbox": { $2 "limits": { "memory": "256m" }, "egress": { "treatAsPublic": ["198.18.0.0/15"] } },
  "dns": { "upstream": ["198.18.0.53"] },
  "paths": { "run": "/run/$W", "state": "$W_DIR/state", "bpf": "/sys/fs/bpf/$W", "cgroup": "$W/strict" }
}
EOC
	echo "$f"
}

for how in default true; do
	case $how in
	default) W_CONFIG=$(strict_config strict-default "") ;;
	true) W_CONFIG=$(strict_config strict-true '"requireFullEnforcement": true,') ;;
	esac
	# doctor probes the current directory as the project: the session's.
	gaps=$(cd "$PROJ" && in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json |
		python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gaps"]))' 2>/dev/null)
	errand_run --egress none --project "$PROJ" -- sh -c "touch $PROJ/ran-$how; echo ran"
	assert_eq "$RUN_RC" 125 "requireFullEnforcement $how, a gap: errandctl exits 125"
	assert_empty "$RUN_STDOUT" "... the command does not run"
	assert_eq "$(ls "$PROJ/ran-$how" 2>/dev/null)" "" "... and left no trace of running"
	assert_match "$RUN_STDERR" '^errandctl: refused: per-session .*limits are not applied: .*; set sandbox.requireFullEnforcement to false to run anyway$' \
		"... one line names the gap and the key to relax"
	assert_eq "$(grep -vc '^errandctl: refused: .*; set sandbox.requireFullEnforcement to false to run anyway$' "$RUN_ERR")" 0 \
		"... every stderr line is such a refusal"
	[ -n "$gaps" ] && assert_eq "$(wc -l <"$RUN_ERR")" "$gaps" "... one line for each of the $gaps gap(s) doctor reports"
	assert_empty "$(leftovers)" "... nothing is created"
	assert_empty "$(ls "$W_DIR/state/sessions" 2>/dev/null)" "... not even a record directory"
done

W_CONFIG=$(strict_config relaxed '"requireFullEnforcement": false,')
errand_run --egress none --project "$PROJ" -- sh -c 'echo ran'
assert_eq "$RUN_RC" 0 "requireFullEnforcement false: the session runs"
assert_eq "$RUN_STDOUT" ran "... its command runs"
assert_match "$RUN_STDERR" '^errand: gap: per-session .*limits are not applied' "... and the gap is stated at its start"
assert_not_contains "$RUN_STDERR" "refused:" "... and nothing refused"
# errand's own parent cgroup stays, as "errand" does on a host; the test's goes.
rmdir "$W_CG/$W/strict" 2>/dev/null
assert_empty "$(leftovers)" "nothing is left"
world_finish
