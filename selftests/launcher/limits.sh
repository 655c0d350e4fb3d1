#!/bin/bash
# Guarantee: sandbox.limits hold: a file past fileSize cannot be written (EFBIG, RLIMIT_FSIZE), /tmp and /dev/shm are tmpfs of the tmp and shm sizes; memory, cpu and pids are written to the session's cgroup where cgroup2 delegates those controllers to errand's, and where it does not, that is stated as a gap at start, never passed over.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
SYSPROBE=$ROOT/build/selftests/sysprobe
[ -x "$SYSPROBE" ] || skip "build/selftests/sysprobe is not built (make build/selftests/sysprobe)"
world_up

PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"
W_CONFIG=$(world_config limits "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\"], \"execute\": [\"$ROOT/build/selftests\"] },
	\"limits\": { \"fileSize\": \"1m\", \"tmp\": \"8m\", \"shm\": \"4m\", \"memory\": \"256m\", \"pids\": 64, \"cpu\": 0.5 }")

# What errand's cgroup ($W) may give its sessions: what the cgroup2 root
# enables for its children.
delegated=$(cat "$W_CG/cgroup.subtree_control" 2>/dev/null)
all=1
for c in memory cpu pids; do
	[[ " $delegated " == *" $c "* ]] || all=0
done

errand_start --egress none --project "$PROJ" -- sh -c "
	echo \"fsize_under=\$($SYSPROBE fsize $PROJ/small 1000000)\"
	echo \"fsize_over=\$($SYSPROBE fsize $PROJ/big 1048577)\"
	echo \"tmp=\$(stat -f -c '%T %b %S' /tmp)\"
	echo \"shm=\$(stat -f -c '%T %b %S' /dev/shm)\"
	echo done=1
	exec sleep 60
" || { world_finish; exit 1; }
bg_wait '^done=1' || true
cg=$(session_cgroup)
assert_eq "$(bg_result fsize_under)" ok "a file under sandbox.limits.fileSize (1m) is written"
assert_eq "$(bg_result fsize_over)" EFBIG "a write past it fails with EFBIG"
assert_eq "$(stat -c %s "$PROJ/big" 2>/dev/null)" 1048576 "... and the file stops at 1m"
read -r t_type t_blocks t_bsize <<<"$(bg_result tmp)"
read -r s_type s_blocks s_bsize <<<"$(bg_result shm)"
assert_eq "$t_type" tmpfs "/tmp is a tmpfs of the session's own"
assert_eq "$((t_blocks * t_bsize))" 8388608 "... of sandbox.limits.tmp (8m)"
assert_eq "$s_type" tmpfs "/dev/shm is a tmpfs of the session's own"
assert_eq "$((s_blocks * s_bsize))" 4194304 "... of sandbox.limits.shm (4m)"
if [ "$all" = 1 ]; then
	assert_eq "$(cat "$cg/memory.max" 2>/dev/null)" 268435456 "memory.max of the session's cgroup is sandbox.limits.memory"
	assert_eq "$(cat "$cg/pids.max" 2>/dev/null)" 64 "pids.max is sandbox.limits.pids"
	assert_eq "$(cat "$cg/cpu.max" 2>/dev/null)" "50000 100000" "cpu.max is sandbox.limits.cpu"
	assert_not_contains "$(cat "$BG_ERR")" "limits are not applied" "no limits gap is stated"
else
	trace "cgroup2 at $W_CG enables '$delegated' for its children: the limits cannot be applied here"
	assert_match "$(cat "$BG_ERR")" "^errand: gap: per-session .*limits are not applied: cgroup2 at $W_CG does not delegate the .* to errand's cgroup $W " \
		"the session's start states the missing controllers as a gap"
	assert_eq "$(cat "$cg/memory.max" 2>/dev/null || echo absent)" absent "... and writes no limit it cannot apply"
	out=$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json)
	if command -v python3 >/dev/null; then
		assert_eq "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["checks"]["cgroupLimits"]["state"])' <<<"$out")" gap \
			"errandctl doctor --json reports cgroupLimits as a gap"
	else
		assert_match "$out" '"state": "gap"' "errandctl doctor --json reports a gap"
	fi
fi
errand_stop
assert_empty "$(leftovers)" "nothing is left"
world_finish
