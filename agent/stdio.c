/* The relay between a caller's socket stdio and the pipes a session gets;
 * see stdio.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/stdio.h"
#include "lib/util.h"

#define RELAY_BUF 65536
#define RELAY_DGRAM 2048

struct pair {
	int in, out;  /* stdin: socket -> pipe; stdout, stderr: pipe -> socket */
	bool to_pipe; /* the stdin direction */
	bool dgram;   /* the socket keeps message boundaries: 0 bytes is no EOF */
	bool eof, done;
	size_t len, off;
	char buf[RELAY_BUF];
};

bool stdio_is_socket(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static bool sock_dgram(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type != SOCK_STREAM;
}

static void pair_close(struct pair *p)
{
	close(p->in);
	close(p->out);
	p->done = true;
}

/* The socket is the caller's, shared with whoever else holds it: it is read
 * and written without blocking per call (MSG_DONTWAIT), never by changing its
 * flags, and never shut down: the session's end of output closes the relay's
 * copy only, as a command's own exit would. */
static void pair_read(struct pair *p)
{
	/* a datagram socket takes what is read as one message: kept small */
	size_t max = p->dgram && !p->to_pipe ? RELAY_DGRAM : sizeof(p->buf);
	ssize_t r = p->to_pipe ? recv(p->in, p->buf, max, MSG_DONTWAIT) : read(p->in, p->buf, max);

	if (r > 0) {
		p->len = (size_t)r;
		p->off = 0;
	} else if (r == 0 && !(p->to_pipe && p->dgram)) {
		p->eof = true;
	} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
		p->eof = true;
	}
}

static void pair_write(struct pair *p)
{
	ssize_t w = p->to_pipe ? write(p->out, p->buf + p->off, p->len - p->off)
			       : send(p->out, p->buf + p->off, p->len - p->off,
				      MSG_DONTWAIT | MSG_NOSIGNAL);

	if (w > 0) {
		p->off += (size_t)w;
		if (p->off == p->len)
			p->off = p->len = 0;
	} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
		/* Nobody reads any more: what is left has nowhere to go. */
		pair_close(p);
	}
}

static void relay_loop(struct pair *pairs, int n)
{
	for (;;) {
		struct pollfd fds[6];
		struct pair *who[6];
		int k = 0, live = 0;

		for (int i = 0; i < n; i++) {
			struct pair *p = &pairs[i];

			if (p->done)
				continue;
			if (p->eof && p->len == 0) {
				pair_close(p);
				continue;
			}
			live++;
			if (p->len) {
				who[k] = p;
				fds[k++] = (struct pollfd){.fd = p->out, .events = POLLOUT};
			} else {
				who[k] = p;
				fds[k++] = (struct pollfd){.fd = p->in, .events = POLLIN};
				/* The session's stdin pipe without readers: the
				 * session is over, and so is this direction. */
				if (p->to_pipe) {
					who[k] = p;
					fds[k++] = (struct pollfd){.fd = p->out, .events = 0};
				}
			}
		}
		if (!live)
			return;
		if (poll(fds, (nfds_t)k, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int j = 0; j < k; j++) {
			struct pair *p = who[j];

			if (p->done || !fds[j].revents)
				continue;
			if (fds[j].fd == p->out && !(fds[j].events & POLLOUT))
				pair_close(p);
			else if (fds[j].events & POLLOUT)
				pair_write(p);
			else
				pair_read(p);
		}
	}
}

/* The relay keeps only its pairs' fds: the caller's stdio and everything else
 * errandctl holds are closed, so only the session and errandctl keep the
 * pipes' other ends open. */
static void relay_child(struct pair *pairs, int n)
{
	int keep[6], m = 0, next = 0;
	sigset_t none;

	/* A terminal's ^C or a group's TERM is for the command, which errandctl
	 * passes on; the relay ends when the command's output has. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int i = 0; i < n; i++) {
		keep[m++] = pairs[i].in;
		keep[m++] = pairs[i].out;
	}
	for (int i = 0; i < m; i++)
		for (int j = i + 1; j < m; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];

				keep[i] = keep[j];
				keep[j] = t;
			}
	for (int i = 0; i < m; i++) {
		if (keep[i] > next)
			close_range((unsigned)next, (unsigned)keep[i] - 1, 0);
		next = keep[i] + 1;
	}
	close_range((unsigned)next, ~0U, 0);
	relay_loop(pairs, n);
	_exit(0);
}

int stdio_relay_start(struct stdio_relay *r)
{
	static struct pair pairs[3];
	int session_end[3], n = 0, which[3], rc;
	pid_t pid;

	r->pid = 0;
	for (int fd = 0; fd < 3; fd++) {
		struct pair *p = &pairs[n];
		int pp[2], sock;

		if (!stdio_is_socket(fd))
			continue;
		sock = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (sock < 0 || pipe2(pp, O_CLOEXEC)) {
			rc = -errno;
			if (sock >= 0)
				close(sock);
			goto fail;
		}
		memset(p, 0, offsetof(struct pair, buf));
		p->to_pipe = fd == 0;
		p->dgram = sock_dgram(sock);
		p->in = p->to_pipe ? sock : pp[0];
		p->out = p->to_pipe ? pp[1] : sock;
		session_end[n] = p->to_pipe ? pp[0] : pp[1];
		/* the relay's own pipe ends never block it */
		fcntl(p->to_pipe ? pp[1] : pp[0], F_SETFL, O_NONBLOCK);
		which[n++] = fd;
	}
	if (!n)
		return 0;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto fail;
	}
	if (pid == 0)
		relay_child(pairs, n);
	for (int i = 0; i < n; i++) {
		/* dup2 clears close-on-exec: the session inherits the pipe */
		if (dup2(session_end[i], which[i]) < 0)
			rc = -errno;
		close(session_end[i]);
		close(pairs[i].in);
		close(pairs[i].out);
	}
	r->pid = pid;
	return 0;
fail:
	for (int i = 0; i < n; i++) {
		close(session_end[i]);
		close(pairs[i].in);
		close(pairs[i].out);
	}
	return rc;
}

void stdio_relay_finish(struct stdio_relay *r)
{
	int null;

	if (!r->pid)
		return;
	fflush(stdout);
	fflush(stderr);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3 && null >= 0; fd++)
		dup2(null, fd);
	if (null > 2)
		close(null);
	while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
		;
	r->pid = 0;
}
