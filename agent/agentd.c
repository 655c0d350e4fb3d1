/* errand-agent: the root daemon. It serves the control socket, runs each
 * session it starts (DNS, events, grants) and re-adopts those a previous
 * agent left running; sessions never depend on it staying up: their
 * launchers supervise them, their pins enforce, and what needs the agent
 * (DNS answers, new sessions) fails closed while it is down. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "agent/control.h"
#include "agent/events.h"
#include "agent/grant.h"
#include "agent/inspect.h"
#include "agent/session.h"
#include "agent/state.h"
#include "lib/log.h"
#include "lib/util.h"

#define ERRAND_VERSION "0.1.0"
#define MAX_CLIENTS 64
#define MAX_SESSIONS 256
#define POLL_MAX 4096
/* A client has this long to send a whole request. */
#define CLIENT_DEADLINE_NS (5ull * 1000000000ull)
/* The orphan sweep runs at start, on reload, and this often. */
#define SWEEP_INTERVAL_NS (60ull * 1000000000ull)

struct client {
	int fd;
	uint8_t hdr[CONTROL_HEADER_LEN];
	size_t got; /* bytes of header, then of payload */
	uint16_t type;
	uint32_t length;
	uint8_t *frame; /* header and payload, once the header passed its checks */
	int fds[CONTROL_FDS_MAX];
	int nfds;
	uint64_t deadline_ns;
	struct session *waits; /* a run client waiting for its session's end */
};

struct agent {
	const char *config_path;
	char *config_text; /* as of the last load or reload: new sessions parse it */
	struct errand_config cfg;
	struct state *st;
	gid_t group;
	int listen_fd, sig_fd;
	char sock_path[PATH_MAX];
	struct client clients[MAX_CLIENTS];
	struct session *sessions[MAX_SESSIONS];
	size_t n_sessions;
	uint64_t next_sweep_ns;
	bool quit;
};

static void client_close(struct client *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	free(c->frame);
	*c = (struct client){.fd = -1};
}

/* Answers are written whole: the client's socket blocks for them, for at
 * most a few seconds, so a client that stops reading is dropped. */
static int reply_write(struct client *c, uint16_t type, const json_t *payload)
{
	struct timeval tv = {.tv_sec = 3};

	fcntl(c->fd, F_SETFL, 0);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return control_write(c->fd, type, payload);
}

static void reply_error(struct client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void reply_error(struct client *c, const char *fmt, ...)
{
	char line[1024];
	json_t *p;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	for (char *q = line; *q; q++)
		if ((unsigned char)*q < 0x20)
			*q = ' ';
	p = json_pack("{s:s}", "error", line);
	reply_write(c, CONTROL_ERROR, p);
	json_decref(p);
}

static void reply(struct client *c, uint16_t type, json_t *payload)
{
	int rc = reply_write(c, type, payload);

	if (rc)
		log_debug("cannot answer a client: %s", strerror(-rc));
	json_decref(payload);
}

static int config_reload(struct agent *a)
{
	char err[CONFIG_ERRLEN], *text = NULL;
	struct errand_config cfg;

	if (config_read_text(a->config_path, a->config_path != NULL, &text, err, sizeof(err)) ||
	    config_load_text(text, a->config_path, &cfg, err, sizeof(err))) {
		log_warnx("%s", err);
		free(text);
		return -EINVAL;
	}
	if (a->config_text)
		config_free(&a->cfg);
	free(a->config_text);
	a->cfg = cfg;
	a->config_text = text ? text : strdup("{}");
	return 0;
}

static struct session *find_session(struct agent *a, const char *id)
{
	for (size_t i = 0; i < a->n_sessions; i++)
		if (!strcmp(session_id(a->sessions[i]), id))
			return a->sessions[i];
	return NULL;
}

static void handle_run(struct agent *a, struct client *c, const json_t *req)
{
	struct session_params p = {
		.config_text = a->config_text,
		.config_path = a->config_path,
		.request = req,
		.stdio = c->fds,
		.st = a->st,
	};
	char err[CONFIG_ERRLEN];
	struct session *s;
	json_t *started;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	int pidfd;

	if (c->nfds != 3) {
		reply_error(c, "run needs the command's stdin, stdout and stderr passed along");
		return;
	}
	if (a->n_sessions >= MAX_SESSIONS) {
		reply_error(c, "this agent runs %d sessions already; stop one first", MAX_SESSIONS);
		return;
	}
	/* Who asked, as the kernel knows it: the project is written as its
	 * owner, so request.c and the launcher let only the owner or root. */
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) ||
	    json_object_set_new((json_t *)req, "requester", json_integer(cr.uid))) {
		reply_error(c, "cannot read who asked for the session");
		return;
	}
	s = session_start(&p, err, sizeof(err));
	/* The launcher has its own copies now. */
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
	if (!s) {
		reply_error(c, "%s", err);
		return;
	}
	a->sessions[a->n_sessions++] = s;
	log_info("session %s started", session_id(s));
	started = json_pack("{s:s}", "session", session_id(s));
	pidfd = session_pidfd(s);
	if (control_write_fds(c->fd, CONTROL_RUN_STARTED, started, &pidfd, 1) == 0)
		c->waits = s;
	json_decref(started);
}

static void handle_grant(struct agent *a, struct client *c, const json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "id"));
	const char *host = json_string_value(json_object_get(req, "host"));
	const char *kind = json_string_value(json_object_get(req, "kind"));
	int64_t secs = json_integer_value(json_object_get(req, "seconds"));
	enum grant_kind k = !strcmp(kind, "once")    ? GRANT_ONCE
			    : !strcmp(kind, "until") ? GRANT_UNTIL
						     : GRANT_ALWAYS;
	struct session *s = find_session(a, id);
	char err[512];

	if (inspect_grant(a->st, &a->cfg, id, host, k, secs, err, sizeof(err))) {
		reply_error(c, "%s", err);
		return;
	}
	/* Ours: in force before the answer leaves. Another agent's (an
	 * errandctl run) rereads the file when it changes. */
	if (s)
		session_grants_reload(s);
	log_info("session %s: granted %s (%s)", id, host, kind);
	reply(c, CONTROL_OK, json_pack("{s:s}", "message", "granted"));
}

static void handle_revoke(struct agent *a, struct client *c, const json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "id"));
	const char *host = json_string_value(json_object_get(req, "host"));
	struct session *s = find_session(a, id);
	char err[512];

	if (inspect_revoke(a->st, &a->cfg, id, host, err, sizeof(err))) {
		reply_error(c, "%s", err);
		return;
	}
	if (s)
		session_grants_reload(s);
	log_info("session %s: revoked %s", id, host);
	reply(c, CONTROL_OK, json_pack("{s:s}", "message", "revoked"));
}

static void handle(struct agent *a, struct client *c, const struct control_msg *m)
{
	const char *id = json_string_value(json_object_get(m->payload, "id"));
	char err[512];
	json_t *j;

	switch (m->type) {
	case CONTROL_RUN:
		handle_run(a, c, m->payload);
		return;
	case CONTROL_SESSIONS:
		reply(c, CONTROL_SESSIONS_REPLY,
		      json_pack("{s:o}", "sessions", inspect_sessions(a->st, &a->cfg)));
		return;
	case CONTROL_SHOW:
		j = inspect_show(a->st, &a->cfg, id, err, sizeof(err));
		if (j)
			reply(c, CONTROL_SHOW_REPLY, json_pack("{s:o}", "session", j));
		else
			reply_error(c, "%s", err);
		return;
	case CONTROL_STOP: {
		struct session *s = find_session(a, id);

		if (s)
			session_stop(s);
		else if (inspect_stop(a->st, id, err, sizeof(err))) {
			reply_error(c, "%s", err);
			return;
		}
		reply(c, CONTROL_OK, json_pack("{s:s}", "message", "stopped"));
		return;
	}
	case CONTROL_GRANT:
		handle_grant(a, c, m->payload);
		return;
	case CONTROL_REVOKE:
		handle_revoke(a, c, m->payload);
		return;
	case CONTROL_DENIED:
		reply(c, CONTROL_DENIED_REPLY,
		      json_pack("{s:o}", "denied", inspect_denied(a->st, id)));
		return;
	case CONTROL_RECEIPTS:
		reply(c, CONTROL_RECEIPTS_REPLY,
		      json_pack("{s:o}", "receipts", inspect_receipts(&a->cfg, id)));
		return;
	case CONTROL_RELOAD:
		if (config_reload(a)) {
			reply_error(c, "%s; the agent keeps its configuration", log_last_warning());
			return;
		}
		session_sweep(&a->cfg);
		log_info("configuration reloaded from %s; sessions started from now on use it",
			 a->config_path);
		reply(c, CONTROL_OK, json_pack("{s:s}", "message", "reloaded"));
		return;
	case CONTROL_VERSION_REQ:
		reply(c, CONTROL_VERSION_REPLY,
		      json_pack("{s:s,s:i}", "version", ERRAND_VERSION, "protocol",
				CONTROL_VERSION));
		return;
	default:
		reply_error(c, "%s is not a request", control_type_name(m->type));
	}
}

/* Reads what the client sent without ever blocking: the header first, its
 * length checked against its type before any payload byte is read, then the
 * payload; a whole frame is parsed and answered. Anything malformed drops
 * the client, and only it. */
static void client_read(struct agent *a, struct client *c)
{
	struct control_msg m = {};
	char err[512] = "";
	size_t want = c->frame ? c->length : sizeof(c->hdr);
	uint8_t *dst = c->frame ? c->frame + CONTROL_HEADER_LEN : c->hdr;
	ssize_t n;

	n = control_recv(c->fd, dst + c->got, want - c->got, c->fds, &c->nfds, MSG_DONTWAIT);
	if (n == -EAGAIN)
		return;
	if (n <= 0) {
		if (n < 0)
			log_debug("client dropped: %s", strerror((int)-n));
		client_close(c);
		return;
	}
	c->got += (size_t)n;
	if (c->got < want)
		return;
	if (!c->frame) {
		if (control_header(c->hdr, &c->type, &c->length, err, sizeof(err))) {
			log_warnx("client dropped: %s", err);
			client_close(c);
			return;
		}
		/* the header, then room for exactly the payload it announced */
		c->frame = malloc(CONTROL_HEADER_LEN + c->length);
		if (!c->frame) {
			client_close(c);
			return;
		}
		memcpy(c->frame, c->hdr, CONTROL_HEADER_LEN);
		c->got = 0;
		if (c->length)
			return;
	}
	/* The whole frame, checked once more by the one parser. */
	if (control_parse(c->frame, CONTROL_HEADER_LEN + c->length, &m, err, sizeof(err)) ||
	    !control_type_is_request(m.type)) {
		log_warnx("client dropped: %s", err[0] ? err : "an answer sent as a request");
		control_msg_free(&m);
		client_close(c);
		return;
	}
	handle(a, c, &m);
	control_msg_free(&m);
	free(c->frame);
	c->frame = NULL;
	c->got = 0;
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
	/* One request a connection, but run's, which waits for the end. */
	if (!c->waits)
		client_close(c);
	else
		c->deadline_ns = 0;
}

static void client_accept(struct agent *a)
{
	int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct client *c = NULL;

	if (fd < 0)
		return;
	if (control_peer_allowed(fd, a->group)) {
		close(fd);
		return;
	}
	for (size_t i = 0; i < MAX_CLIENTS && !c; i++)
		if (a->clients[i].fd < 0)
			c = &a->clients[i];
	if (!c) {
		log_warnx("too many clients at once (%d); one refused", MAX_CLIENTS);
		close(fd);
		return;
	}
	*c = (struct client){.fd = fd, .deadline_ns = boottime_ns() + CLIENT_DEADLINE_NS};
}

static void session_ended(struct agent *a, size_t i)
{
	struct session *s = a->sessions[i];
	int status = session_status(s);

	log_info("session %s ended with status %d", session_id(s), status);
	for (size_t k = 0; k < MAX_CLIENTS; k++) {
		struct client *c = &a->clients[k];

		if (c->fd >= 0 && c->waits == s) {
			json_t *p = json_pack("{s:s,s:i}", "session", session_id(s), "status",
					      status < 0 ? 125 : status & 0xff);

			control_write(c->fd, CONTROL_RUN_EXIT, p);
			json_decref(p);
			c->waits = NULL;
			client_close(c);
		}
	}
	session_end(s);
	a->sessions[i] = a->sessions[--a->n_sessions];
}

struct adopt_ctx {
	struct agent *a;
	char (*ids)[SESSION_ID_LEN + 1];
	size_t n;
	char (*old)[SESSION_ID_LEN + 1]; /* ended long ago: dropped */
	size_t n_old;
};

/* Ended sessions stay in state.db this long, for errandctl denied. */
#define ENDED_KEEP_S (7 * 86400)

static int collect_running(const struct state_session *row, void *arg)
{
	struct adopt_ctx *c = arg;

	if (row->status == STATE_EXITED && row->ended && row->ended < time(NULL) - ENDED_KEEP_S &&
	    c->n_old < MAX_SESSIONS)
		snprintf(c->old[c->n_old++], SESSION_ID_LEN + 1, "%s", row->id);
	if (row->status == STATE_RUNNING && c->n < MAX_SESSIONS &&
	    strlen(row->id) == SESSION_ID_LEN)
		snprintf(c->ids[c->n++], SESSION_ID_LEN + 1, "%s", row->id);
	return 0;
}

/* Whether the process that ran the session is still there to serve it. */
static bool owner_alive(const struct state_session *row)
{
	json_t *p = row->policy ? json_loads(row->policy, 0, NULL) : NULL;
	pid_t pid = (pid_t)json_integer_value(json_object_get(p, "ownerPid"));
	uint64_t want = (uint64_t)json_integer_value(json_object_get(p, "ownerStart")), start;
	bool alive =
		pid > 0 && pid != getpid() && state_pid_start(pid, &start) == 0 && start == want;

	json_decref(p);
	return alive;
}

/* Every session state.db says runs: adopted when its launcher lives and no
 * other agent serves it, else recorded as ended (the sweep removes what is
 * left of it). */
static void adopt_all(struct agent *a)
{
	char ids[MAX_SESSIONS][SESSION_ID_LEN + 1], old[MAX_SESSIONS][SESSION_ID_LEN + 1];
	struct adopt_ctx c = {a, ids, 0, old, 0};

	state_session_list(a->st, collect_running, &c);
	for (size_t i = 0; i < c.n_old; i++)
		state_session_remove(a->st, old[i]);
	for (size_t i = 0; i < c.n; i++) {
		struct state_session *row = state_session_get(a->st, ids[i]);
		char err[CONFIG_ERRLEN];
		struct session *s;

		if (!row)
			continue;
		if (owner_alive(row)) {
			state_session_free(row);
			continue;
		}
		if (!inspect_alive(row)) {
			log_info("session %s ended while no agent ran", row->id);
			state_session_end(a->st, row->id, -1);
			state_session_free(row);
			continue;
		}
		s = session_adopt(row, a->cfg.state_dir, a->st, err, sizeof(err));
		if (s && a->n_sessions < MAX_SESSIONS) {
			a->sessions[a->n_sessions++] = s;
			log_info("session %s adopted", row->id);
		} else {
			/* Still enforced by its pins; without DNS it reaches nothing new. */
			log_warnx("session %s: cannot adopt it: %s", row->id, err);
			session_detach(s);
		}
		state_session_free(row);
	}
}

static int agent_signals(struct agent *a)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	a->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	return a->sig_fd < 0 ? -errno : 0;
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			sd_notify(0, "RELOADING=1");
			if (config_reload(a) == 0) {
				session_sweep(&a->cfg);
				log_info("configuration reloaded (SIGHUP); sessions started from "
					 "now "
					 "on use it");
			}
			sd_notify(0, "READY=1");
		} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			a->quit = true;
		}
		/* SIGCHLD: a launcher ended; its pidfd says which. */
	}
}

static void agent_loop(struct agent *a)
{
	static struct pollfd fds[POLL_MAX];

	while (!a->quit) {
		uint64_t now = boottime_ns();
		int n = 0, timeout = 1000;

		if (now >= a->next_sweep_ns) {
			session_sweep(&a->cfg);
			a->next_sweep_ns = now + SWEEP_INTERVAL_NS;
		}
		fds[n++] = (struct pollfd){.fd = a->sig_fd, .events = POLLIN};
		fds[n++] = (struct pollfd){.fd = a->listen_fd, .events = POLLIN};
		for (size_t i = 0; i < MAX_CLIENTS; i++) {
			struct client *c = &a->clients[i];

			if (c->fd >= 0 && c->deadline_ns && now > c->deadline_ns) {
				log_warnx("client dropped: no whole request within 5 s");
				client_close(c);
			}
			fds[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
		}
		for (size_t i = 0; i < a->n_sessions; i++)
			session_pollfds(a->sessions[i], fds, &n, POLL_MAX, &timeout);
		if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
			fatal("poll");
		if (fds[0].revents)
			on_signal(a);
		if (fds[1].revents)
			client_accept(a);
		for (size_t i = 0; i < MAX_CLIENTS; i++) {
			struct client *c = &a->clients[i];

			if (c->fd < 0 || !fds[2 + i].revents || fds[2 + i].fd != c->fd)
				continue;
			if (c->waits) {
				/* errandctl run went away (it sends nothing more): the
				 * session goes on. */
				c->waits = NULL;
				client_close(c);
				continue;
			}
			client_read(a, c);
		}
		/* Each launcher is reaped by its session, for its exit status. */
		for (size_t i = a->n_sessions; i-- > 0;)
			if (session_process(a->sessions[i], fds))
				session_ended(a, i);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: errand-agent [--config FILE] [--foreground] [-v]\n");
}

/* Without --foreground: into the background once the socket listens, so
 * whoever started it knows errandctl can reach it when it returns. */
static int daemonize(int *ready_fd)
{
	int p[2];
	pid_t pid;
	char b;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		_exit(read(p[0], &b, 1) == 1 ? 0 : 125);
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"foreground", no_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct agent a = {.listen_fd = -1, .sig_fd = -1};
	bool foreground = false, verbose = false;
	int opt, ready = -1;
	char dir[PATH_MAX];

	while ((opt = getopt_long(argc, argv, "c:fvh", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			a.config_path = optarg;
			break;
		case 'f':
			foreground = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 125;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 125;
	}
	log_init("errand-agent", verbose);
	if (geteuid() != 0)
		fatalx("errand-agent makes cgroups, network namespaces and BPF programs; run it as "
		       "root");
	if (!a.config_path)
		a.config_path = CONFIG_DEFAULT_PATH;
	if (config_reload(&a))
		return 125;
	/* Before any connection exists (SQLite's must not cross a fork). */
	if (!foreground && daemonize(&ready))
		fatal("cannot go into the background");
	for (size_t i = 0; i < MAX_CLIENTS; i++)
		a.clients[i].fd = -1;
	if (mkdir(a.cfg.run_dir, 0755) && errno != EEXIST)
		fatal("cannot create %s", a.cfg.run_dir);
	snprintf(dir, sizeof(dir), "%s/sessions", a.cfg.run_dir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		fatal("cannot create %s", dir);
	a.st = state_open_dir(a.cfg.state_dir);
	if (!a.st)
		fatalx("cannot open state.db under %s; errandctl sessions and restarts need it",
		       a.cfg.state_dir);
	if (agent_signals(&a))
		fatal("cannot take signals");
	if (path_fmt(a.sock_path, sizeof(a.sock_path), "%s/agent.sock", a.cfg.run_dir))
		fatalx("paths.run %s is too long for a socket path", a.cfg.run_dir);
	a.group = control_group();
	a.listen_fd = control_listen(a.sock_path, a.group);
	if (a.listen_fd < 0)
		fatalx("cannot listen on %s: %s%s", a.sock_path, strerror(-a.listen_fd),
		       a.listen_fd == -EADDRINUSE ? "; another errand-agent answers there" : "");
	fcntl(a.listen_fd, F_SETFL, O_NONBLOCK);
	/* Sessions of a previous agent: swept if dead, adopted if alive. */
	session_sweep(&a.cfg);
	adopt_all(&a);
	a.next_sweep_ns = boottime_ns() + SWEEP_INTERVAL_NS;
	log_info("listening on %s (%s), %zu session(s) adopted", a.sock_path,
		 a.group == CONTROL_NO_GROUP ? "root only" : "root and group " CONTROL_GROUP,
		 a.n_sessions);
	if (ready >= 0) {
		if (write(ready, "1", 1) != 1)
			log_warn("cannot tell the starting process");
		close(ready);
	}
	/* Type=notify: the control socket serves from here on */
	sd_notify(0, "READY=1");
	agent_loop(&a);
	sd_notify(0, "STOPPING=1");
	/* Sessions stay: their launchers and pins carry on; the next agent
	 * adopts them. */
	log_info("stopping; %zu session(s) keep running and will be adopted by the next agent",
		 a.n_sessions);
	for (size_t i = 0; i < a.n_sessions; i++)
		session_detach(a.sessions[i]);
	for (size_t i = 0; i < MAX_CLIENTS; i++)
		client_close(&a.clients[i]);
	close(a.listen_fd);
	unlink(a.sock_path);
	state_close(a.st);
	config_free(&a.cfg);
	free(a.config_text);
	return 0;
}
