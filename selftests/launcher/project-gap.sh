#!/bin/bash
# Guarantee: a project on a filesystem that cannot be idmapped (here ramfs) is a gap doctor names with its filesystem type, refused under sandbox.requireFullEnforcement (exit 125, one line naming the fix, nothing run) by the agent and by the launcher alike; allowed, the session runs with errand-session's own permissions on it, stated at start, never a silently read-only project.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

RAM=$W_DIR/ram
gap_down() {
	local rc=$?
	mountpoint -q "$RAM" && umount "$RAM"
	(exit $rc)
	world_down
}
trap gap_down EXIT
mkdir -p "$RAM"
mount -t ramfs -o mode=0755 "$W-ram" "$RAM" || { echo "cannot mount a ramfs on $RAM" >&2; exit 1; }
mkdir "$RAM/shared"
chmod 0777 "$RAM/shared"
echo before >"$RAM/existing"

# doctor, run where the project is (errandctl run's default project).
json=$(cd "$RAM" && in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json)
py() { python3 -c "import json,sys; d=json.load(sys.stdin); $1" <<<"$json" 2>&1; }
assert_eq "$(py 'f=d["projectFilesystem"]; print(f["path"], f["type"], f["idmap"])')" "$RAM ramfs False" \
	"doctor names the project's filesystem, ramfs, as one that cannot be idmapped"
assert_eq "$(py 'print(d["checks"]["projectIdmap"]["state"])')" gap "... as a gap"
assert_match "$(py 'print(d["checks"]["projectIdmap"]["detail"])')" "^the project $RAM is on ramfs, which cannot be idmapped .*move the project to a filesystem that can" \
	"... naming the fix"
assert_match "$(py 'f=d["stateFilesystem"]; print(f["type"], d["checks"]["stateIdmap"]["state"])')" " info$" \
	"the state directory's filesystem is told, not a gap: errand makes it the session's own"

# Under requireFullEnforcement: refused by the agent's gate.
STRICT=$W_DIR/strict.json
sed 's/"requireFullEnforcement": false/"requireFullEnforcement": true/' "$W_CONFIG" >"$STRICT"
W_CONFIG_LOOSE=$W_CONFIG
W_CONFIG=$STRICT
errand_run --egress none --project "$RAM" -- sh -c "echo errt-ran; touch $RAM/shared/ran"
assert_eq "$RUN_RC" 125 "requireFullEnforcement true: exit 125"
assert_match "$RUN_STDERR" "^errandctl: refused: the project $RAM is on ramfs, which cannot be idmapped .*move the project to a filesystem that can \(ext4, xfs, btrfs, tmpfs from Linux 6.3\); set sandbox.requireFullEnforcement to false to run anyway$" \
	"... one line names the gap and both fixes"
assert_eq "$(grep -vc '^errandctl: refused: ' "$RUN_ERR")" 0 "... every stderr line is a refusal"
assert_not_contains "$RUN_STDOUT" errt-ran "... the command never ran"
assert_eq "$(ls "$RAM/shared")" "" "... and left nothing in the project"
assert_empty "$(leftovers)" "... nor anything else"

# The launcher refuses too, whatever the agent's probe found.
launcher_setup launch
launch() {
	"$ROOT/build/bin/errand-launch" --session "$W-l" --cgroup "$LCG" --netns "/run/netns/$W-launch" \
		--uid "$S_UID" --gid "$S_GID" --project "$RAM" "$@" -- sh -c "echo errt-ran; echo x >$RAM/shared/by-launch" 2>&1
}
out=$(launch)
rc=$?
assert_eq "$rc" 125 "errand-launch (--project-idmap required, its default) refuses it: exit 125"
assert_match "$out" "^errand-launch: the project $RAM is on ramfs, which cannot be idmapped" "... in one line"
assert_not_contains "$out" errt-ran "... before the command ran"
out=$(launch --project-idmap optional)
assert_eq "$out" errt-ran "with --project-idmap optional it runs"
assert_eq "$(stat -c %u "$RAM/shared/by-launch" 2>/dev/null)" "$S_UID" "... as errand-session on the project"
rm -f "$RAM/shared/by-launch"
ip netns del "$W-launch"
rmdir "$LCG"

# Allowed: stated at start; the project is writable as errand-session's own
# permissions allow, not read-only.
W_CONFIG=$W_CONFIG_LOOSE
errand_run --egress none --project "$RAM" -- sh -c "
	echo \"top=\$( (echo x >$RAM/new) 2>&1 | sed 's/.*: //')\"
	echo \"shared=\$( (echo x >$RAM/shared/new) 2>&1 && echo ok)\"
	echo \"existing=\$(cat $RAM/existing)\"
"
assert_eq "$RUN_RC" 0 "requireFullEnforcement false: the session runs"
assert_match "$RUN_STDERR" "^errand: gap: the project $RAM is on ramfs, which cannot be idmapped" "... and the gap is stated at its start"
assert_eq "$(result top)" "Permission denied" "the root-owned 0755 project is not the session's to write (errand-session's own permissions)"
assert_eq "$(result shared)" ok "... but it is not read-only: a directory open to others is written"
assert_eq "$(stat -c %u "$RAM/shared/new" 2>/dev/null)" "$S_UID" "... as errand-session"
assert_eq "$(result existing)" before "... and the project reads"
assert_empty "$(leftovers)" "nothing is left"
world_finish
