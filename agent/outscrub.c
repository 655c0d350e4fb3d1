/* The output relay of a session with secrets or provider keys; see
 * outscrub.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/outscrub.h"
#include "agent/secrets.h"
#include "broker/registry.h"
#include "lib/replace.h"

#define OUTSCRUB_CHUNK 65536

/* The relay's buffers: static, so the relay (forked from a threaded agent)
 * allocates nothing; each process has its own copy. */
static uint8_t relay_in[OUTSCRUB_CHUNK];
static uint8_t relay_out[OUTSCRUB_CHUNK];

struct relay_sink {
	int fd;
	size_t len;
	bool broken; /* the caller's end is gone */
};

void outscrub_init(struct outscrub *o)
{
	o->pid = 0;
	o->pidfd = -1;
	o->ends[0] = o->ends[1] = -1;
	o->started = false;
}

/* The caller's descriptor may be non-blocking (its file is shared with
 * whoever else holds it): the relay waits for room instead of failing. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};

			poll(&pfd, 1, -1);
		} else if (w < 0 && errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

static int sink_flush(struct relay_sink *s)
{
	int rc = s->len ? write_all(s->fd, relay_out, s->len) : 0;

	s->len = 0;
	if (rc)
		s->broken = true;
	return rc;
}

static int sink_put(void *ctx, const uint8_t *d, size_t n)
{
	struct relay_sink *s = ctx;
	int rc;

	while (n) {
		size_t k = sizeof(relay_out) - s->len < n ? sizeof(relay_out) - s->len : n;

		memcpy(relay_out + s->len, d, k);
		s->len += k;
		d += k;
		n -= k;
		if (s->len == sizeof(relay_out) && (rc = sink_flush(s)))
			return rc;
	}
	return 0;
}

/* One stream, session's pipe to the caller's descriptor, until the session's
 * end closes it; every piece is written out before the next read, so nothing
 * waits in the relay but bytes that may begin a value. When the caller's end
 * is gone, the pipe is closed: the session gets EPIPE, as it would writing
 * there itself. */
static void relay_stream(struct replacer *r, int in, int out)
{
	struct relay_sink s = {.fd = out};

	for (;;) {
		ssize_t n = read(in, relay_in, sizeof(relay_in));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (replacer_feed(r, relay_in, (size_t)n, sink_put, &s) || sink_flush(&s))
			break;
	}
	if (!s.broken && !replacer_finish(r, sink_put, &s))
		sink_flush(&s);
	close(in);
	close(out);
}

/* The relay: fds[0] and fds[1] the stdout pipe and the caller's stdout,
 * fds[2] and fds[3] the same for stderr. Only async-signal-safe calls: it is
 * forked from whatever thread starts the session. Each stream has a process
 * of its own, so a caller that reads one and not the other stalls only that
 * one, as it would without the relay. */
static __attribute__((noreturn)) void relay_child(struct replacer *r[2], const int fds[4])
{
	struct __user_cap_header_struct cap_header = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct cap_none[2] = {};
	int keep[4], null;
	sigset_t none;
	pid_t err_pid;

	/* A terminal's ^C or a group's TERM is for the command; the relay ends
	 * when the command's output has. It outlives the agent that started
	 * it, as the launcher does. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	prctl(PR_SET_NAME, "errand-output", 0, 0, 0);
	/* Above every target first, so no dup2 below overwrites one kept. */
	for (int i = 0; i < 4; i++)
		if ((keep[i] = fcntl(fds[i], F_DUPFD, 7)) < 0)
			_exit(126);
	for (int i = 0; i < 4; i++)
		if (dup2(keep[i], 3 + i) < 0)
			_exit(126);
	null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 3 && null >= 0; fd++)
		dup2(null, fd);
	if (close_range(7, ~0U, 0))
		_exit(126);
	/* It only copies between descriptors it holds: no capability of
	 * root's is left to it, and nobody may read its memory. */
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (syscall(SYS_capset, &cap_header, cap_none))
		_exit(126);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	err_pid = fork();
	if (err_pid == 0) {
		close(3);
		close(4);
		relay_stream(r[1], 5, 6);
		_exit(0);
	}
	if (err_pid < 0) {
		/* the session's stderr gets EPIPE rather than bypass the relay */
		close(5);
		close(6);
	}
	relay_stream(r[0], 3, 4);
	while (err_pid > 0 && waitpid(err_pid, NULL, 0) < 0 && errno == EINTR)
		;
	_exit(0);
}

/* The provider's stand-in in the session's environment, or NULL. */
static const char *standin_of(const struct config_provider *p, char *const *broker_env)
{
	char name[128];
	size_t len;

	if (broker_env_key_name(p, name, sizeof(name)))
		return NULL;
	len = strlen(name);
	for (char *const *e = broker_env; e && *e; e++)
		if (!strncmp(*e, name, len) && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

/* Both streams' replacers get every value with its placeholder or stand-in. */
static int values_add(const struct errand_config *cfg, char *const *secret_env,
		      char *const *broker_env, struct replacer *r[2], char *err, size_t errlen)
{
	char *value = malloc(SECRET_VALUE_MAX + BROKER_KEY_MAX + 4);
	int rc = 0;

	if (!value)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->n_secrets && !rc; i++) {
		const struct config_secret *sec = &cfg->secrets[i];
		const char *ph = secret_env && secret_env[i] ? strchr(secret_env[i], '=') : NULL;
		int len = secret_read(cfg->secrets_dir, sec->name, value, SECRET_VALUE_MAX + 2);

		if (len < 0 || !ph) {
			rc = len < 0 ? len : -EINVAL;
			snprintf(err, errlen, "secret %s: %s/%s cannot be used (%s)", sec->env,
				 cfg->secrets_dir, sec->name,
				 len < 0 ? secret_strerror(len) : "no placeholder");
			break;
		}
		for (int k = 0; k < 2 && len >= OUTSCRUB_MIN_SECRET && !rc; k++)
			rc = replacer_add(r[k], value, (size_t)len, ph + 1, strlen(ph + 1),
					  REPLACE_PCT);
		if (rc)
			snprintf(err, errlen, "secret %s cannot be scrubbed from the output: %s",
				 sec->env, strerror(-rc));
	}
	for (size_t i = 0; i < cfg->n_providers && !rc; i++) {
		const struct config_provider *p = &cfg->providers[i];
		const char *standin = standin_of(p, broker_env);
		unsigned int mode;
		int len;

		if (!standin)
			continue;
		len = broker_key_read(p->credential_file, value, BROKER_KEY_MAX + 1, &mode);
		if (len < 0) {
			rc = len;
			broker_key_refusal(p->name, p->credential_file, len, err, errlen);
			break;
		}
		for (int k = 0; k < 2 && !rc; k++)
			rc = replacer_add(r[k], value, (size_t)len, standin, strlen(standin),
					  REPLACE_PCT);
		if (rc)
			snprintf(err, errlen,
				 "agent.providers.%s: its key cannot be scrubbed from the output: "
				 "%s",
				 p->name, strerror(-rc));
	}
	explicit_bzero(value, SECRET_VALUE_MAX + BROKER_KEY_MAX + 4);
	free(value);
	return rc;
}

int outscrub_start(const struct errand_config *cfg, char *const *secret_env,
		   char *const *broker_env, const int *caller, int fds[3], struct outscrub *o,
		   char *err, size_t errlen)
{
	struct replacer *r[2] = {replacer_new(OUTSCRUB_CHUNK), replacer_new(OUTSCRUB_CHUNK)};
	int out[2][2] = {{-1, -1}, {-1, -1}}, relay_fds[4], rc;
	pid_t pid;

	outscrub_init(o);
	for (int fd = 0; fd < 3; fd++)
		fds[fd] = caller ? caller[fd] : fd;
	if (!r[0] || !r[1]) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if ((rc = values_add(cfg, secret_env, broker_env, r, err, errlen)) || !replacer_count(r[0]))
		goto out;
	if (pipe2(out[0], O_CLOEXEC) || pipe2(out[1], O_CLOEXEC)) {
		rc = -errno;
		snprintf(err, errlen, "cannot make the pipes of the output relay: %s",
			 strerror(-rc));
		goto out;
	}
	relay_fds[0] = out[0][0];
	relay_fds[1] = fds[1];
	relay_fds[2] = out[1][0];
	relay_fds[3] = fds[2];
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot start the output relay: %s", strerror(-rc));
		goto out;
	}
	if (pid == 0)
		relay_child(r, relay_fds);
	o->pid = pid;
	o->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (o->pidfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot watch the output relay (pidfd_open): %s",
			 strerror(-rc));
		outscrub_kill(o);
		goto out;
	}
	fcntl(o->pidfd, F_SETFD, FD_CLOEXEC);
	o->started = true;
	o->ends[0] = fds[1] = out[0][1];
	o->ends[1] = fds[2] = out[1][1];
	out[0][1] = out[1][1] = -1;
out:
	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < 2; k++)
			if (out[i][k] >= 0)
				close(out[i][k]);
		replacer_free(r[i]);
	}
	if (rc)
		for (int fd = 0; fd < 3; fd++)
			fds[fd] = caller ? caller[fd] : fd;
	return rc;
}

void outscrub_spawned(struct outscrub *o)
{
	for (int i = 0; i < 2; i++) {
		if (o->ends[i] >= 0)
			close(o->ends[i]);
		o->ends[i] = -1;
	}
}

void outscrub_reap(struct outscrub *o)
{
	if (o->pid)
		while (waitpid(o->pid, NULL, 0) < 0 && errno == EINTR)
			;
	outscrub_detach(o);
}

void outscrub_stop(struct outscrub *o)
{
	if (!o->pid)
		return;
	/* the stderr process is in the relay's own process group (setsid) */
	kill(-o->pid, SIGKILL);
	if (o->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, o->pidfd, SIGKILL, NULL, 0);
	else
		kill(o->pid, SIGKILL);
}

void outscrub_kill(struct outscrub *o)
{
	outscrub_stop(o);
	outscrub_reap(o);
}

void outscrub_detach(struct outscrub *o)
{
	outscrub_spawned(o);
	if (o->pidfd >= 0)
		close(o->pidfd);
	o->pid = 0;
	o->pidfd = -1;
}
