/* The session's PID 1: waits until the outer launcher has mapped its ids,
 * sets up the session's namespaces, then forks the command and reaps every
 * process of the session until the command ends, exiting with its status. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/log.h"

/* The outer launcher writes one byte once the maps are in, and holds its end
 * of the pipe open until it exits. */
static void wait_for_launcher(int sync_fd)
{
	ssize_t n;
	char go;

	do
		n = read(sync_fd, &go, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fatal("cannot read from the launcher");
	if (n == 0)
		fatalx("the launcher went away before the session was set up");
}

/* getppid() is 0 in a new PID namespace, launcher alive or not, so ask the
 * pipe instead: once the launcher is gone its end hangs up. */
static void check_launcher(int sync_fd)
{
	struct pollfd p = {.fd = sync_fd, .events = POLLIN};

	if (poll(&p, 1, 0) < 0)
		fatal("cannot poll the launcher's pipe");
	if (p.revents & (POLLHUP | POLLERR))
		fatalx("the launcher went away while the session was set up");
}

void session_init(const struct launch_args *a, int sync_fd)
{
	pid_t cmd;
	int r;

	wait_for_launcher(sync_fd);
	if (ns_become_root() < 0)
		exit(LAUNCH_EXIT_FAIL);
	/* Only after the ids change: a change of effective ids clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fatal("cannot set the session's parent-death signal");
	check_launcher(sync_fd);
	close(sync_fd);

	if (ns_setup_session(a) < 0)
		exit(LAUNCH_EXIT_FAIL);
	/* Unconfined by Landlock and seccomp, PID 1 must not be open to the
	 * command: not dumpable, no ptrace and no /proc/1/mem. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fatal("cannot make the session's PID 1 undumpable");
	/* PID 1 lives as long as the session and needs none of what it was
	 * started with besides stdin, stdout and stderr. */
	close_range(3, ~0U, 0);

	cmd = fork();
	if (cmd < 0)
		fatal("cannot fork the session's command");
	if (cmd == 0)
		exec_command(a);

	r = reap_wait(cmd);
	if (r < 0) {
		errno = -r;
		fatal("cannot wait for the session's command (pid %d)", (int)cmd);
	}
	exit(r);
}
