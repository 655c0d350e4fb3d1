#!/bin/bash
# Guarantee: a session's command runs in its own user, PID, UTS, mount, IPC, network and cgroup namespaces, in its own cgroup, as an unprivileged host uid (never host root).
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_start --egress none
cg=$(session_cgroup)
# The sleeping command: the session's processes are the launcher's PID 1 and
# the command; the command is the one running sleep.
pid=
for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && pid=$p
done
assert_ne "$pid" "" "the command runs in the session's cgroup $cg"
if [ -n "$pid" ]; then
	for ns in user pid uts mnt ipc net cgroup; do
		assert_ne "$(readlink "/proc/$pid/ns/$ns")" "$(readlink /proc/self/ns/$ns)" \
			"its $ns namespace is not the host's"
	done
	assert_eq "$(stat -L -c %i "/proc/$pid/ns/net")" "$(stat -c %i "/run/$W/netns/$SESSION")" \
		"its network namespace is the session's ($SESSION)"
	uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
	assert_ne "$uid" 0 "it runs as an unprivileged host uid ($uid), not root"
	assert_eq "$(awk '/^NSpid:/ { print $NF }' "/proc/$pid/status")" 2 \
		"inside its PID namespace it is pid 2, under the session's own pid 1"
	assert_eq "$(nsenter --target "$pid" --uts hostname)" "$SESSION" "its hostname is the session id"
fi
errand_stop
assert_empty "$(leftovers)" "nothing is left after the session"
world_finish
