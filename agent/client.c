/* errandctl talking to errand-agent. See client.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/util.h"

#define CLIENT_TIMEOUT_S 30
/* A run's start waits its turn behind the starts before it (four at a
 * time): on a loaded host, or under an emulator, that is more than the 30 s
 * an answer takes, and a client that gave up would leave a session running
 * whose caller was told it failed. */
#define RUN_START_TIMEOUT_S 600
/* How long run waits for the exit status once the launcher is gone. */
#define EXIT_WAIT_MS 3000

struct agent_conn {
	int fd;
};

struct agent_conn *agent_connect(const char *run_dir)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S}, wait = {.tv_sec = CONTROL_CONNECT_S};
	struct agent_conn *ac;
	int fd;

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", run_dir) >=
	    (int)sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* A unix connect waits while the listener's queue is full, as long as
	 * the send timeout lets it (EAGAIN then). */
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		/* Said here, once: the callers exit 125 on these without a word. */
		if (fd < 0 && (e == EACCES || e == EPERM))
			fprintf(stderr,
				"errandctl: this process may not make the socket that reaches "
				"errand-agent (%s); a security module refuses it\n",
				strerror(e));
		else if (e == EAGAIN)
			fprintf(stderr,
				"errandctl: errand-agent's socket %s has taken no connection for "
				"%d s: the agent is stuck; see its log, or restart it\n",
				sa.sun_path, CONTROL_CONNECT_S);
		else if (e == EACCES || e == EPERM)
			fprintf(stderr,
				"errandctl: errand-agent's socket %s refuses this user; run "
				"errandctl "
				"as root or as a member of group errand\n",
				sa.sun_path);
		else if (agent_connect_said(e))
			fprintf(stderr, "errandctl: cannot reach errand-agent's socket %s: %s\n",
				sa.sun_path, strerror(e));
		errno = e;
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval){0}, sizeof(struct timeval));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ac = calloc(1, sizeof(*ac));
	if (!ac) {
		close(fd);
		fprintf(stderr, "errandctl: out of memory\n");
		errno = ENOMEM;
		return NULL;
	}
	ac->fd = fd;
	return ac;
}

void agent_close(struct agent_conn *ac)
{
	if (!ac)
		return;
	close(ac->fd);
	free(ac);
}

int agent_call(struct agent_conn *ac, uint16_t type, const json_t *payload,
	       struct control_msg *reply, char *err, size_t errlen)
{
	int rc = control_write(ac->fd, type, payload);

	if (rc) {
		snprintf(err, errlen, "cannot send %s to errand-agent: %s", control_type_name(type),
			 strerror(-rc));
		return rc;
	}
	rc = control_read(ac->fd, reply, err, errlen);
	if (rc == -EAGAIN)
		snprintf(err, errlen, "errand-agent did not answer %s within %d s",
			 control_type_name(type), CLIENT_TIMEOUT_S);
	return rc;
}

/* A run-line: the session's refusal, on this errandctl's stderr as embedded
 * errandctl prints it. False for any other message. */
static bool run_line(const struct control_msg *m)
{
	char shown[ESC_LEN(2048)];

	if (m->type != CONTROL_RUN_LINE)
		return false;
	fprintf(stderr, "%s\n",
		esc_text(json_string_value(json_object_get(m->payload, "line")), shown,
			 sizeof(shown)));
	return true;
}

static int exit_file_status(const char *run_dir, const char *id)
{
	char path[PATH_MAX], buf[16] = "";
	FILE *f;

	if (path_fmt(path, sizeof(path), "%s/sessions/%s.exit", run_dir, id))
		return -1;
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return buf[0] ? atoi(buf) : -1;
}

/* The launcher is gone: the agent's run-exit, which comes after the lines
 * of every refusal of the session's (the launcher's status file may be
 * there first); the file once the agent is gone, or silent for
 * EXIT_WAIT_MS (a session it could not serve). */
static int wait_status(struct agent_conn *ac, bool connected, const char *run_dir, const char *id)
{
	int status;

	for (int waited = 0; waited < EXIT_WAIT_MS; waited += 50) {
		struct control_msg m = {};
		struct pollfd p = {.fd = ac->fd, .events = POLLIN};
		char err[256];

		if (connected && poll(&p, 1, 50) > 0) {
			if (control_read(ac->fd, &m, err, sizeof(err)) == 0 &&
			    m.type == CONTROL_RUN_EXIT) {
				status = (int)json_integer_value(
					json_object_get(m.payload, "status"));
				control_msg_free(&m);
				return status;
			}
			connected = run_line(&m);
			control_msg_free(&m);
			continue;
		}
		if (connected)
			continue;
		status = exit_file_status(run_dir, id);
		if (status >= 0)
			return status;
		usleep(50 * 1000);
	}
	status = exit_file_status(run_dir, id);
	if (status >= 0)
		return status;
	fprintf(stderr, "errandctl: session %s ended without an exit status\n", id);
	return 125;
}

/* Waits for the agent's answer to run, the signals that come meanwhile kept
 * in *pending for the command. Once one has come, errandctl waits
 * CONTROL_CONNECT_S more at most (a start under way ends in milliseconds,
 * a queued one may not), then ends by that signal. */
static void answer_wait(int fd, int sfd, sigset_t *pending)
{
	int left_ms = RUN_START_TIMEOUT_S * 1000, first = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		struct signalfd_siginfo si;
		int r = poll(p, 2, left_ms);

		clock_gettime(CLOCK_MONOTONIC, &t1);
		left_ms -=
			(int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		t0 = t1;
		if (left_ms < 0)
			left_ms = 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 && first) {
			sigset_t one;

			sigemptyset(&one);
			sigaddset(&one, first);
			signal(first, SIG_DFL);
			raise(first);
			sigprocmask(SIG_UNBLOCK, &one, NULL);
			fprintf(stderr, "errandctl: errand-agent did not start the session before "
					"errandctl was signalled\n");
			exit(125);
		}
		if (r == 0) {
			fprintf(stderr,
				"errandctl: errand-agent did not start the session: no "
				"answer within %d s\n",
				RUN_START_TIMEOUT_S);
			exit(125);
		}
		if (r < 0 || p[0].revents)
			return; /* the answer's read takes it, or times out */
		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		sigaddset(pending, (int)si.ssi_signo);
		if (!first) {
			first = (int)si.ssi_signo;
			if (left_ms > CONTROL_CONNECT_S * 1000)
				left_ms = CONTROL_CONNECT_S * 1000;
		}
	}
}

int client_run(struct agent_conn *ac, const json_t *request, const char *run_dir)
{
	const int stdio[3] = {0, 1, 2};
	struct control_msg m = {};
	char err[512], id[CONTROL_ID_MAX + 1], shown[ESC_LEN(1024)];
	int fds[CONTROL_FDS_MAX], nfds = 0, pidfd = -1, sfd, status;
	struct timeval none = {}, start = {.tv_sec = RUN_START_TIMEOUT_S};
	sigset_t mask, pending;
	bool connected = true, relayed, gone = false;
	int rc;

	/* The answer brings the session's pidfd: with no descriptor free to
	 * take it, a session would start that this process cannot follow. */
	if ((rc = fcntl(ac->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		fprintf(stderr, "errandctl: %s\n", CONTROL_NO_FD);
		return 125;
	}
	close(rc);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	/* Blocked from before the request until errandctl exits: one that
	 * comes while the session starts reaches its command once it runs
	 * (the agent starts a session whose caller went away all the same, and
	 * its command would go on unattended); put back, a signal that came as
	 * CMD ended would end errandctl with it, its status and the tail of
	 * the relayed output lost. A reader of stderr that went away is an
	 * error on the write, not an end. */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	/* None to read them from (EMFILE): they act as they would have. */
	if (sfd < 0)
		sigprocmask(SIG_UNBLOCK, &mask, NULL);
	setsockopt(ac->fd, SOL_SOCKET, SO_RCVTIMEO, &start, sizeof(start));
	rc = control_write_fds(ac->fd, CONTROL_RUN, request, stdio, 3);
	sigemptyset(&pending);
	if (!rc && sfd >= 0)
		answer_wait(ac->fd, sfd, &pending);
	if (!rc)
		rc = control_read_fds(ac->fd, &m, fds, &nfds, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", strerror(-rc));
	if (rc == -EAGAIN)
		snprintf(err, sizeof(err), "no answer within %d s", RUN_START_TIMEOUT_S);
	if (rc) {
		fprintf(stderr, "errandctl: errand-agent did not start the session: %s\n", err);
		status = 125;
		goto done;
	}
	if (m.type != CONTROL_RUN_STARTED || nfds != 1) {
		fprintf(stderr, "errandctl: %s\n",
			m.type == CONTROL_ERROR
				? esc_text(json_string_value(json_object_get(m.payload, "error")),
					   shown, sizeof(shown))
				: "errand-agent answered run with something else than run-started");
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		control_msg_free(&m);
		status = 125;
		goto done;
	}
	pidfd = fds[0];
	/* The launcher passes them on to the command. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&pending, sig) == 1)
			syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(m.payload, "session")));
	relayed = json_is_true(json_object_get(m.payload, "relayed"));
	control_msg_free(&m);
	/* The session may run for days: no read timeout from here on. */
	setsockopt(ac->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	for (;;) {
		struct pollfd p[3] = {
			{.fd = gone ? -1 : pidfd, .events = POLLIN},
			{.fd = connected ? ac->fd : -1, .events = POLLIN},
			{.fd = sfd, .events = POLLIN},
		};

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[2].revents & POLLIN) {
			struct signalfd_siginfo si;

			/* The launcher passes it on to the command. */
			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				syscall(SYS_pidfd_send_signal, pidfd, (int)si.ssi_signo, NULL, 0);
		}
		if (p[1].revents) {
			int got = control_read(ac->fd, &m, err, sizeof(err));

			if (got == 0 && m.type == CONTROL_RUN_EXIT) {
				status = (int)json_integer_value(
					json_object_get(m.payload, "status"));
				control_msg_free(&m);
				goto done;
			}
			/* A refusal's line, or the agent went away (a restart): the
			 * launcher still runs the session, and its pidfd says when it
			 * ends. */
			connected = got == 0 && run_line(&m);
			control_msg_free(&m);
		}
		if (p[0].revents)
			gone = true;
		/* Relayed output may still be on its way to the caller: the
		 * agent says when it has all arrived, unless it goes away. */
		if (gone && !(relayed && connected))
			break;
	}
	status = wait_status(ac, connected, run_dir, id);
done:
	if (pidfd >= 0)
		close(pidfd);
	if (sfd >= 0)
		close(sfd);
	return status;
}
