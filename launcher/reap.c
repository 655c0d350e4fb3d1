/* Signals and children for the two processes that wait, the outer launcher
 * and the session's PID 1: forward SIGINT, SIGTERM, SIGHUP and SIGQUIT to
 * one child, reap every child, and turn how that one ended into a status. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/util.h"

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void waited_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaddset(set, forwarded[i]);
	sigaddset(set, SIGCHLD);
}

int reap_default_signals(void)
{
	/* The kernel's struct sigaction, all zero: SIG_DFL, no flags, nothing
	 * masked, whatever the architecture's order of its fields. */
	const unsigned long dfl[8] = {0};
	struct sigaction ign = {.sa_handler = SIG_IGN};

	/* Ignored signals survive exec, so the caller's (the agent ignores
	 * SIGPIPE, nohup SIGHUP, GNU make 32 and 33 in its children) would
	 * reach the command. The system call itself: glibc's sigaction refuses
	 * 32 and 33, which it keeps for its threads. Fails harmlessly for
	 * SIGKILL and SIGSTOP. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGPIPE)
			syscall(SYS_rt_sigaction, sig, dfl, NULL, (size_t)(NSIG / 8));
	/* A write to a reader that went away is an error to report, not an end. */
	return sigaction(SIGPIPE, &ign, NULL) < 0 ? -errno : 0;
}

int reap_block_signals(void)
{
	sigset_t set;

	waited_set(&set);
	return sigprocmask(SIG_BLOCK, &set, NULL) < 0 ? -errno : 0;
}

void reap_reset_signals(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	/* What reap_default_signals left other than the default. */
	sigaction(SIGPIPE, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static int exit_status(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* Reaps what has ended: target's status, or -EAGAIN while it runs. */
static int reap_ended(pid_t target)
{
	int status;
	pid_t pid;

	/* Reap before waiting: SIGCHLD is one pending bit for any number of
	 * children, and may have come before the wait began. */
	while ((pid = waitpid(-1, &status, WNOHANG)) != 0) {
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			return -errno;
		if (pid == target)
			return exit_status(status);
	}
	return -EAGAIN;
}

int reap_wait(pid_t target)
{
	sigset_t set;
	int r, sig;

	waited_set(&set);
	for (;;) {
		if ((r = reap_ended(target)) != -EAGAIN)
			return r;
		sig = sigwaitinfo(&set, NULL);
		if (sig < 0 && errno != EINTR)
			return -errno;
		/* ESRCH is fine: target is ending and SIGCHLD will say so. */
		if (sig > 0 && sig != SIGCHLD)
			kill(target, sig);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int reap_wait_watching(pid_t target, int fd, int timeout_ms, void (*on_ready)(void *arg), void *arg)
{
	struct signalfd_siginfo si[8];
	uint64_t next;
	sigset_t set;
	int sfd, r;

	waited_set(&set);
	/* the signals are blocked (reap_block_signals): taken here */
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0)
		return -errno;
	/* every timeout_ms, whatever signals wake the wait meanwhile */
	next = timeout_ms >= 0 ? now_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
		int wait = -1;
		ssize_t n;

		if ((r = reap_ended(target)) != -EAGAIN)
			break;
		if (timeout_ms >= 0) {
			uint64_t now = now_ms();

			wait = next > now ? (int)(next - now) : 0;
		}
		if ((r = poll(p, 2, wait)) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (timeout_ms >= 0 && now_ms() >= next) {
			on_ready(arg);
			next = now_ms() + (uint64_t)timeout_ms;
		} else if (p[1].revents & POLLIN) {
			on_ready(arg);
		}
		while ((n = read(sfd, si, sizeof(si))) > 0)
			for (size_t i = 0; i < (size_t)n / sizeof(si[0]); i++)
				if (si[i].ssi_signo != SIGCHLD)
					kill(target, (int)si[i].ssi_signo);
	}
	close(sfd);
	return r;
}
