#!/bin/bash
# Guarantee: errand-launch --status-fd FD takes only a pipe open for writing (else exit 125, one line naming it, the command never runs); the session's PID 1 writes the command's status there (after ending every other process of the session: agent/pool proves that order), and nothing when it ends without one; the command never holds the pipe.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

launcher_setup status
PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"
launch() { # launch ARG...: errand-launch, the status pipe on descriptor 8
	"$ROOT/build/bin/errand-launch" --session "$W-s" --cgroup "$LCG" --netns "/run/netns/$W-status" \
		--uid "$S_UID" --gid "$S_GID" --project "$PROJ" "$@"
}

# A pipe read by cat into a file: what the launcher's PID 1 wrote there.
exec 8> >(cat >"$W_DIR/status1")
# Neither a pipeline nor a redirection in the command's shell: while the
# first command of a pipeline runs the shell holds the pipe's read end, and
# it keeps a copy of what it redirects; ls would list either.
launch --status-fd 8 -- sh -c 'ls /proc/$$/fd; exit 4' >"$W_DIR/err1"
rc=$?
exec 8>&-
sleep 0.3
assert_eq "$rc" 4 "the launcher exits with the command's status"
assert_eq "$(cat "$W_DIR/status1")" 4 "... and PID 1 wrote it on the status pipe"
assert_eq "$(tr '\n' ' ' <"$W_DIR/err1")" "0 1 2 " "the command holds stdin, stdout and stderr only (the status pipe stays PID 1's)"

# A command that leaves a process behind: PID 1 ends it, then says 0
# (agent/pool proves the order: nothing of the session runs by then).
exec 8> >(cat >"$W_DIR/status2")
launch --status-fd 8 -- sh -c "sleep 30 & exit 0" >/dev/null 2>&1
exec 8>&-
sleep 0.3
assert_eq "$(cat "$W_DIR/status2")" 0 "a command that leaves a process behind: 0 on the pipe"

# A killed PID 1 (its launcher killed) says nothing: errandctl then takes the
# launcher's file instead.
exec 8> >(cat >"$W_DIR/status3")
launch --status-fd 8 -- sh -c 'sleep 5; exit 3' >/dev/null 2>&1 &
lpid=$!
exec 8>&-
sleep 1
kill -KILL "$lpid"
wait "$lpid" 2>/dev/null
sleep 0.5
assert_eq "$(cat "$W_DIR/status3")" "" "a session whose launcher was killed: nothing on the pipe"

for bad in "0" "9" "99"; do
	out=$(launch --status-fd "$bad" -- sh -c 'echo errt-ran' 2>&1 9>"$W_DIR/not-a-pipe")
	rc=$?
	assert_eq "$rc:$(echo "$out" | grep -c .)" 125:1 "--status-fd $bad (not a pipe open for writing): exit 125, one line"
	assert_contains "$out" "--status-fd $bad is not a pipe open for writing" "... naming it"
	assert_not_contains "$out" errt-ran "... and the command never ran"
done
out=$(launch --status-fd 8 -- sh -c 'echo errt-ran' 2>&1 8< <(sleep 1))
assert_eq "$?:$(echo "$out" | grep -c .)" 125:1 "--status-fd naming a pipe's read end: exit 125, one line"

ip netns del "$W-status"
rmdir "$LCG" 2>/dev/null
assert_empty "$(leftovers)" "nothing is left"
world_finish
