#!/bin/bash
# Guarantee: a session errand-agent starts but cannot follow from its loop (its launcher's pidfd cannot be watched: out of descriptors or memory) is stopped and torn down at once, the agent running on: its netns, cgroup, veth and pins go, not at the next agent's start, and errandctl run is refused.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
command -v cc >/dev/null || skip "no C compiler for the fault's shim"
world_up
world_dns || exit 1
# shellcheck disable=SC2034 # agent_start and errand_run read it
W_CONFIG=$(dns_config unserved "" '"pool": 0')

# The fault: in errand-agent, epoll refuses every pidfd (ENOMEM), as it would
# past the user's epoll watches. The agent watches no pidfd but its
# sessions' launchers (and their output relays): the session's attach to the
# loop is what fails.
cat >"$W_DIR/nopidfd.c" <<'EOC'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int (*real)(int, int, int, struct epoll_event *) = dlsym(RTLD_NEXT, "epoll_ctl");
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (op == EPOLL_CTL_ADD && n > 0 && !strcmp(program_invocation_short_name, "errand-agent")) {
		target[n] = '\0';
		if (!strcmp(target, "anon_inode:[pidfd]")) {
			errno = ENOMEM;
			return -1;
		}
	}
	return real(epfd, op, fd, ev);
}
EOC
cc -shared -fPIC -o "$W_DIR/nopidfd.so" "$W_DIR/nopidfd.c" -ldl || skip "cannot build the fault's shim"
LD_PRELOAD=$W_DIR/nopidfd.so agent_start || exit 1

W_RUN_TIMEOUT=20 errand_run --egress api.test -- sh -c 'echo started; sleep 30'
assert_ne "$RUN_RC" 0 "errandctl run does not succeed"
assert_ne "$RUN_RC" 124 "... and is answered, not left waiting"
assert_match "$(cat "$AGENT_LOG")" "session [0-9a-f]{8}: cannot serve it" "the agent could not follow the session"
# The teardown is a job of the agent's: until it is done (10 s at most).
end=$((SECONDS + 10))
while [ -n "$(leftovers)" ] && [ $SECONDS -lt $end ]; do
	sleep 0.2
done
assert_empty "$(leftovers)" "nothing of the session is left (netns, cgroup, veth, pins), the agent still running"
assert_eq "$(kill -0 "$AGENT_PID" 2>/dev/null && echo running)" running "the agent runs on"
world_finish
