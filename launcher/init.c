/* The session's PID 1: waits until the outer launcher has mapped its ids,
 * sets up the session's namespaces, then forks the command and reaps every
 * process of the session until the command ends, exiting with its status. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/await.h"
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

/* Landlock's and seccomp's buffers, the environment and execvpe's search of
 * PATH fit many times over; a guard page below. */
#define COMMAND_STACK (256 * 1024)
#define COMMAND_GUARD 4096

static int command_main(void *a)
{
	exec_command(a);
}

/* The command is started sharing PID 1's memory until its exec
 * (CLONE_VM | CLONE_VFORK, on a stack of its own), as posix_spawn does: a
 * fork copied PID 1's page tables and the child then faulted in a copy of
 * every page it wrote while it built its Landlock ruleset and environment,
 * and its exec tore that copy down again. PID 1 has one thread and waits
 * meanwhile, so the child may use malloc and stdio as a forked one would;
 * what it changes besides memory (signal dispositions, the working
 * directory, descriptors, limits, credentials, Landlock, seccomp) is its
 * own, none of CLONE_SIGHAND, CLONE_FS, CLONE_FILES or CLONE_THREAD being
 * asked for. */
static pid_t start_command(const struct launch_args *a)
{
	char *map;
	pid_t pid;

	map = mmap(NULL, COMMAND_GUARD + COMMAND_STACK, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (map == MAP_FAILED)
		fatal("cannot map a stack for the session's command");
	if (mprotect(map, COMMAND_GUARD, PROT_NONE) < 0)
		fatal("cannot guard the stack of the session's command");
	pid = clone(command_main, map + COMMAND_GUARD + COMMAND_STACK,
		    CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)a);
	if (pid < 0)
		fatal("cannot start the session's command");
	/* CLONE_VFORK: the command has exec'd or exited; its stack is free. */
	munmap(map, COMMAND_GUARD + COMMAND_STACK);
	return pid;
}

/* The number the status pipe is kept on in PID 1. */
#define STATUS_FD 3
/* How long the session's other processes get to go once killed; one held
 * in the kernel past that (uninterruptible, on a stuck filesystem) leaves
 * the status to the launcher's end, as before the pipe. */
#define END_WAIT_MS 1000

/* Whether PID 1 is the last process of its PID namespace: the session's
 * own /proc lists that namespace's processes alone (an exited one until it
 * is reaped). Not known (no /proc to read): no. */
static bool last_process(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	bool last = d != NULL;

	while (last && (de = readdir(d)))
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9' && strcmp(de->d_name, "1"))
			last = false;
	if (d)
		closedir(d);
	return last;
}

/* Kills every other process of the session (of its PID namespace, nested
 * ones included) and reaps until none is left. 0, or -ETIMEDOUT. kill(-1)
 * looks at every task of the host (a millisecond of each session's end with
 * a thousand sessions running), so it is sent only when another process is
 * there. */
static int end_every_process(void)
{
	struct timespec now, end;
	sigset_t chld;

	if (last_process())
		return 0;
	kill(-1, SIGKILL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += END_WAIT_MS / 1000;
	for (;;) {
		struct timespec left;
		pid_t pid = waitpid(-1, NULL, WNOHANG);

		if (pid > 0 || (pid < 0 && errno == EINTR))
			continue;
		if (pid < 0)
			return 0; /* ECHILD: nothing left */
		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		if (left.tv_sec < 0)
			return -ETIMEDOUT;
		/* SIGCHLD is blocked (reap_block_signals): taken here. */
		if (sigtimedwait(&chld, NULL, &left) < 0 && errno == EAGAIN)
			return -ETIMEDOUT;
	}
}

/* errandctl learns the status from here as soon as the session's processes
 * are gone, instead of once PID 1 and then the launcher have ended (each
 * end tears down what the process held: PID 1's mounts and namespaces, the
 * launcher's; 1 to 2 ms of a start here). */
static void report_status(int status)
{
	char line[16];
	int n;

	if (end_every_process() < 0)
		return;
	n = snprintf(line, sizeof(line), "%d\n", status);
	/* EPIPE (ignored SIGPIPE): errandctl went away, or takes the
	 * launcher's file instead. */
	if (write(STATUS_FD, line, (size_t)n) != n)
		log_debug("the status pipe did not take the status");
}

/* The session once its root is built: PID 1 starts the command and reaps
 * until it ends. */
static void session_run(const struct launch_args *a) __attribute__((noreturn));
static void session_run(const struct launch_args *a)
{
	pid_t cmd;
	int r;

	/* PID 1 lives as long as the session and needs none of what it was
	 * started with besides stdin, stdout and stderr, and the status pipe. */
	if (a->status_fd >= 0 && a->status_fd != STATUS_FD &&
	    dup3(a->status_fd, STATUS_FD, O_CLOEXEC) < 0)
		fatal("cannot keep the status pipe");
	close_range(a->status_fd >= 0 ? STATUS_FD + 1 : 3, ~0U, 0);

	cmd = start_command(a);
	r = reap_wait(cmd);
	if (r < 0) {
		errno = -r;
		fatal("cannot wait for the session's command (pid %d)", (int)cmd);
	}
	if (a->status_fd >= 0)
		report_status(r);
	exit(r);
}

/* Root inside, the mapped ids outside, and dying with the launcher. */
static void become_root(int sync_fd)
{
	wait_for_launcher(sync_fd);
	if (ns_become_root() < 0)
		exit(LAUNCH_EXIT_FAIL);
	/* Only after the ids change: a change of effective ids clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fatal("cannot set the session's parent-death signal");
	/* Unconfined by Landlock and seccomp, PID 1 must not be open to any
	 * process of errand-session's uid (the commands of other sessions; a
	 * PID 1 made ahead waits for its session): not dumpable, so no ptrace
	 * and no /proc/PID/mem. The change of ids above reset it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fatal("cannot make the session's PID 1 undumpable");
	check_launcher(sync_fd);
}

/* The launcher learns that the session's root is built: it covers the
 * masked paths a daemon makes again in it from then on (maskwatch.c). */
static void say_root_built(int sock)
{
	if (write(sock, "r", 1) != 1)
		log_debug("the launcher did not take word of the session's root");
}

void session_init(const struct launch_args *a, int sync_fd)
{
	become_root(sync_fd);
	if (ns_setup_session(a) < 0)
		exit(LAUNCH_EXIT_FAIL);
	say_root_built(sync_fd);
	close(sync_fd);
	session_run(a);
}

void session_init_ahead(int sock)
{
	struct launch_args a;
	char **argv;
	int argc, tree, r;

	seccomp_prepare(); /* while the launcher writes the id maps */
	become_root(sock);
	if (mounts_prepare(NULL) < 0)
		exit(LAUNCH_EXIT_FAIL);
	r = await_recv(sock, &argc, &argv, &tree);
	if (r == -ENODATA)
		exit(0); /* no session: the launcher went, or ends this PID 1 */
	if (r < 0) {
		errno = -r;
		fatal("cannot take the session from the launcher");
	}
	if (launch_args_pid1(argc, argv, &a) < 0)
		exit(LAUNCH_EXIT_FAIL);
	a.project_fd = tree;
	if (ns_finish_session(&a) < 0)
		exit(LAUNCH_EXIT_FAIL);
	say_root_built(sock);
	session_run(&a);
}
