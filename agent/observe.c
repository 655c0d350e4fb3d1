/* Serving and reading the live event stream (see observe.h). A slow or
 * hostile reader is dropped: it never holds up the session it watches. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/control.h"
#include "agent/events.h"
#include "agent/observe.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/util.h"

struct observe_server {
	int fd;
	int clients[OBSERVE_MAX_CLIENTS];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *whose;	   /* "this session" or "this agent", for a refused reader */
	gid_t group;		   /* who may watch besides root (observe_server_agent) */
	int sndbuf;		   /* each reader's socket buffer; 0: the default */
	char *(*hello)(void *arg); /* a reader's first line (observe_server_hello) */
	void *hello_arg;
};

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	return path_fmt(sa->sun_path, sizeof(sa->sun_path), "%s", path);
}

struct observe_server *observe_server_new(const char *path)
{
	struct observe_server *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa;

	if (!s)
		return NULL;
	for (int i = 0; i < OBSERVE_MAX_CLIENTS; i++)
		s->clients[i] = -1;
	if (unix_addr(path, &sa)) {
		free(s);
		errno = ENAMETOOLONG;
		return NULL;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->whose = "this session";
	s->group = CONTROL_NO_GROUP;
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	unlink(path);
	/* 0600 from birth: the stream names what sessions tried. The socket's
	 * own mode is what bind gives its file (less the umask); the umask is
	 * never changed, since it is the whole process's: sessions start in
	 * threads at once, and one that made its record directory meanwhile
	 * got it 0600, which its launcher could not enter. */
	if (s->fd < 0 || fchmod(s->fd, 0600) || bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(s->fd, 8)) {
		int err = errno;

		if (s->fd >= 0)
			close(s->fd);
		free(s);
		errno = err;
		return NULL;
	}
	return s;
}

void observe_server_free(struct observe_server *s)
{
	if (!s)
		return;
	for (int i = 0; i < OBSERVE_MAX_CLIENTS; i++)
		if (s->clients[i] >= 0)
			close(s->clients[i]);
	close(s->fd);
	unlink(s->path);
	free(s);
}

void observe_server_pollfds(struct observe_server *s, struct pollfd *fds, int *n, int max)
{
	if (*n < max)
		fds[(*n)++] = (struct pollfd){.fd = s->fd, .events = POLLIN};
	for (int i = 0; i < OBSERVE_MAX_CLIENTS && *n < max; i++)
		if (s->clients[i] >= 0)
			fds[(*n)++] = (struct pollfd){.fd = s->clients[i], .events = POLLIN};
}

int observe_server_fd(const struct observe_server *s)
{
	return s->fd;
}

/* The default buffer (200 KiB) holds about 280 lines, each sent on its own
 * (agent/refusals: a reader that lagged 8 s was dropped after 278 of five
 * sessions' 1,000): a burst of one session's, not of many. */
#define OBSERVE_AGENT_SNDBUF (4 << 20)

void observe_server_agent(struct observe_server *s, gid_t group)
{
	s->whose = "this agent";
	s->group = group;
	s->sndbuf = OBSERVE_AGENT_SNDBUF;
}

void observe_server_hello(struct observe_server *s, char *(*hello)(void *arg), void *arg)
{
	s->hello = hello;
	s->hello_arg = arg;
}

static void drop_client(struct observe_server *s, int i)
{
	close(s->clients[i]);
	s->clients[i] = -1;
}

/* Readers send nothing; anything, or a hang-up, ends them. */
static void drop_if_gone(struct observe_server *s, int i)
{
	char buf[256];

	if (read(s->clients[i], buf, sizeof(buf)) != -1 || errno != EAGAIN)
		drop_client(s, i);
}

/* The first line, before any event: a reader that cannot take it whole (a
 * fresh socket's buffer holds a thousand sessions' ids many times) is
 * dropped, as one that falls behind is. */
static void say_hello(struct observe_server *s, int i)
{
	char *line = s->hello ? s->hello(s->hello_arg) : NULL;
	size_t len;

	if (!line)
		return;
	len = strlen(line);
	line[len] = '\n'; /* hello's NUL: the line's end */
	if (send(s->clients[i], line, len + 1, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(len + 1))
		drop_client(s, i);
	free(line);
}

void observe_server_process(struct observe_server *s, const struct pollfd *fds, int n)
{
	for (int j = 0; j < n; j++) {
		if (!fds[j].revents)
			continue;
		if (fds[j].fd == s->fd) {
			int c = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			int i;

			if (c < 0)
				continue;
			/* Past the file's mode, the kernel says who connected. */
			if (control_peer_allowed(c, s->group)) {
				close(c);
				continue;
			}
			for (i = 0; i < OBSERVE_MAX_CLIENTS && s->clients[i] >= 0; i++)
				;
			/* All taken: those that left (unseen by a caller that polls
			 * the listening socket alone) make room. */
			for (int k = 0; i == OBSERVE_MAX_CLIENTS && k < OBSERVE_MAX_CLIENTS; k++) {
				drop_if_gone(s, k);
				if (s->clients[k] < 0)
					i = k;
			}
			if (i == OBSERVE_MAX_CLIENTS) {
				/* Refused in one line, never served half. */
				char full[128];
				int len = snprintf(full, sizeof(full),
						   "{\"error\":\"%s has " OBSERVE_MAX_CLIENTS_STR
						   " observers already; stop one\"}\n",
						   s->whose);

				if (send(c, full, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
					log_debug("a refused observer did not take its line");
				close(c);
			} else {
				if (s->sndbuf && setsockopt(c, SOL_SOCKET, SO_SNDBUFFORCE,
							    &s->sndbuf, sizeof(s->sndbuf)))
					log_debug("an observer keeps the default buffer: %s",
						  strerror(errno));
				s->clients[i] = c;
				say_hello(s, i);
			}
			continue;
		}
		for (int i = 0; i < OBSERVE_MAX_CLIENTS; i++)
			if (s->clients[i] == fds[j].fd)
				drop_if_gone(s, i);
	}
}

void observe_broadcast(struct observe_server *s, const char *json_line)
{
	char buf[EVENT_LINE_MAX + 2];
	size_t len;

	if (!s)
		return;
	len = (size_t)snprintf(buf, sizeof(buf), "%s\n", json_line);
	for (int i = 0; i < OBSERVE_MAX_CLIENTS; i++)
		if (s->clients[i] >= 0 &&
		    send(s->clients[i], buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
			drop_client(s, i);
}

/* The reader side. */

struct stream {
	int fd;
	char id[NAME_MAX + 1];
	char *buf; /* a line at most: a session's events, or the agent's "running" */
	size_t cap, len;
};

#define STREAM_BUF 4096
/* The agent's first line names every session it runs: 11 bytes each. */
#define AGENT_STREAM_BUF (64 << 10)

#define MAX_STREAMS 256
#define AGENT_STREAM "" /* no session's id */

static bool watching(struct stream *st, int n, const char *id)
{
	for (int i = 0; i < n; i++)
		if (st[i].fd >= 0 && !strcmp(st[i].id, id))
			return true;
	return false;
}

/* A stream of id's (AGENT_STREAM: errand-agent's) from the socket at path.
 * 0 or -errno. */
static int stream_connect(const char *path, const char *id, struct stream *st, int *n)
{
	struct sockaddr_un sa;
	int fd;

	if (*n >= MAX_STREAMS || unix_addr(path, &sa))
		return -ENOSPC;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	st[*n].cap = *id ? STREAM_BUF : AGENT_STREAM_BUF;
	if (!(st[*n].buf = malloc(st[*n].cap))) {
		close(fd);
		return -ENOMEM;
	}
	st[*n].fd = fd;
	st[*n].len = 0;
	snprintf(st[*n].id, sizeof(st[*n].id), "%s", id);
	(*n)++;
	return 0;
}

/* errand-agent's stream, and the stream of each session an embedded
 * errandctl runs. 0, or -EACCES when this user may read neither at the
 * first call (first), with one line saying so: nothing would ever come.
 * Later (an agent's socket not yet given to its group), it tries again. */
static int connect_new(const char *run_dir, const char *only, bool first, struct stream *st, int *n)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	int agent = 0;
	DIR *d;

	if (path_fmt(path, sizeof(path), "%s/" OBSERVE_AGENT_SOCKET, run_dir) ||
	    path_fmt(dir, sizeof(dir), "%s/sessions", run_dir))
		return 0;
	if (!watching(st, *n, AGENT_STREAM))
		agent = stream_connect(path, AGENT_STREAM, st, n);
	d = opendir(dir);
	if (!d && first && errno == EACCES &&
	    (agent == -EACCES || agent == -ENOENT || agent == -ECONNREFUSED)) {
		fprintf(stderr,
			"errandctl: observe: this user may not read the event streams (%s, %s); "
			"run errandctl observe as root%s\n",
			path, dir, agent == -EACCES ? " or as a member of group errand" : "");
		return -EACCES;
	}
	if (!d)
		return 0;
	while ((de = readdir(d)) && *n < MAX_STREAMS) {
		size_t len = strlen(de->d_name);
		char id[NAME_MAX + 1];

		if (len <= 7 || strcmp(de->d_name + len - 7, ".events"))
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(len - 7), de->d_name);
		if ((only && strcmp(id, only)) || watching(st, *n, id) ||
		    path_fmt(path, sizeof(path), "%s/%s", dir, de->d_name))
			continue;
		stream_connect(path, id, st, n);
	}
	closedir(d);
	return 0;
}

/* What a line says of the session observe ID follows. */
enum seen { SEEN_NOTHING, SEEN_RUNNING, SEEN_NOT_RUNNING, SEEN_ENDED };

/* The agent's first line: is only among its running sessions? */
static enum seen running_has(json_t *o, const char *only)
{
	json_t *ids = json_object_get(o, "sessions"), *id;
	size_t i;

	for (i = 0; i < json_array_size(ids); i++) {
		id = json_array_get(ids, i);
		if (json_is_string(id) && !strcmp(json_string_value(id), only))
			return SEEN_RUNNING;
	}
	return SEEN_NOT_RUNNING;
}

/* Events carry what sessions named: the JSON goes out as ASCII (jansson
 * escapes controls, and \u escapes what is not ASCII), a line escaped whole. */
static enum seen print_json_line(const char *line, bool json, const char *only)
{
	json_t *o = json_loads(line, 0, NULL);
	struct event_rec ev = {};
	char out[EVENT_LINE_MAX], text[ESC_LEN(EVENT_LINE_MAX)], *dump;
	const char *event;
	enum seen seen = SEEN_NOTHING;

	if (!o)
		return SEEN_NOTHING;
	event = json_string_value(json_object_get(o, "event")) ?: "";
	/* Not an event: which sessions the agent runs, for observe ID. */
	if (!strcmp(event, "running")) {
		if (only)
			seen = running_has(o, only);
		json_decref(o);
		return seen;
	}
	/* The agent's stream has every session's. */
	if (only && json_is_string(json_object_get(o, "session")) &&
	    strcmp(json_string_value(json_object_get(o, "session")), only)) {
		json_decref(o);
		return SEEN_NOTHING;
	}
	if (only && !strcmp(event, "ended"))
		seen = SEEN_ENDED;
	if (json_is_string(json_object_get(o, "error"))) {
		fprintf(stderr, "errandctl: observe: %s\n",
			esc_text(json_string_value(json_object_get(o, "error")), text,
				 sizeof(text)));
		json_decref(o);
		return SEEN_NOTHING;
	}
	if (json) {
		dump = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
		if (dump)
			printf("%s\n", dump);
		free(dump);
		fflush(stdout);
		json_decref(o);
		return seen;
	}
	if (!strcmp(event, "ended")) {
		snprintf(out, sizeof(out), "errand: session=%s ended status=%d",
			 json_string_value(json_object_get(o, "session")) ?: "?",
			 (int)json_integer_value(json_object_get(o, "status")));
		printf("%s\n", esc_text(out, text, sizeof(text)));
		fflush(stdout);
		json_decref(o);
		return seen;
	}
	if (!strcmp(event, "suggest")) {
		snprintf(out, sizeof(out), "errand: session=%s suggest: %s",
			 json_string_value(json_object_get(o, "session")) ?: "?",
			 json_string_value(json_object_get(o, "command")) ?: "?");
		printf("%s\n", esc_text(out, text, sizeof(text)));
		fflush(stdout);
		json_decref(o);
		return SEEN_NOTHING;
	}
	ev.denied = !strcmp(event, "denied");
	ev.suppressed = !strcmp(event, "suppressed");
	ev.count = (uint64_t)json_integer_value(json_object_get(o, "count"));
	ev.total = (uint64_t)json_integer_value(json_object_get(o, "total"));
	ev.session = json_string_value(json_object_get(o, "session")) ?: "?";
	ev.reason = json_string_value(json_object_get(o, "reason")) ?: "?";
	ev.name = json_string_value(json_object_get(o, "name")) ?: "";
	ev.qtype = json_string_value(json_object_get(o, "type")) ?: "";
	ev.hook = json_string_value(json_object_get(o, "hook")) ?: "";
	ev.port = (unsigned)json_integer_value(json_object_get(o, "port"));
	snprintf(ev.proto, sizeof(ev.proto), "%s",
		 json_string_value(json_object_get(o, "proto")) ?: "");
	snprintf(ev.addr, sizeof(ev.addr), "%s",
		 json_string_value(json_object_get(o, "addr")) ?: "");
	event_format(&ev, false, out, sizeof(out));
	printf("%s\n", esc_text(out, text, sizeof(text)));
	fflush(stdout);
	json_decref(o);
	return SEEN_NOTHING;
}

/* What it read says of only's session: the last word of its lines (a
 * session's "ended" is its stream's last). An embedded session's stream
 * ends with its session. */
static enum seen read_stream(struct stream *s, bool json, const char *only)
{
	ssize_t r = read(s->fd, s->buf + s->len, s->cap - 1 - s->len);
	enum seen seen = SEEN_NOTHING, line;
	char *nl;

	if (r <= 0) {
		if (!strcmp(s->id, AGENT_STREAM))
			fprintf(stderr,
				"errandctl: observe: errand-agent's stream ended (the agent "
				"stopped, or this observer read too slowly); events until it "
				"is back are not shown\n");
		else if (only)
			seen = SEEN_ENDED;
		close(s->fd);
		s->fd = -1;
		free(s->buf);
		s->buf = NULL;
		return seen;
	}
	s->len += (size_t)r;
	s->buf[s->len] = '\0';
	while ((nl = strchr(s->buf, '\n'))) {
		*nl = '\0';
		if ((line = print_json_line(s->buf, json, only)) != SEEN_NOTHING)
			seen = line;
		s->len -= (size_t)(nl + 1 - s->buf);
		memmove(s->buf, nl + 1, s->len + 1);
		if (seen == SEEN_ENDED)
			break;
	}
	if (s->len == s->cap - 1)
		s->len = 0; /* a line that long is not errand's: drop it */
	return seen;
}

/* Watches paths.run, its sessions directory and paths.run's parent (for
 * paths.run itself, made by the first session an embedded errandctl runs):
 * a new stream (the agent's, when it starts again; an embedded session's) is
 * connected to as its socket appears, not at the next tick. Added again
 * after each event and tick, as the directories appear; a missing one, or
 * one this user may not read, is left to the tick. */
static void streams_watch(int fd, const char *run_dir)
{
	char dir[PATH_MAX];
	char *slash;

	if (fd < 0)
		return;
	inotify_add_watch(fd, run_dir, IN_CREATE | IN_MOVED_TO);
	if (!path_fmt(dir, sizeof(dir), "%s/sessions", run_dir))
		inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO);
	snprintf(dir, sizeof(dir), "%s", run_dir);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
	}
}

/* observe ID where ID runs neither under the agent nor embedded: 125, with
 * one line, unless it ran when observe started (it ended while the agent's
 * stream was gone: restarted, or dropped this observer; there is no more
 * to see). */
static int not_running(const char *id, bool was_running)
{
	if (was_running) {
		fprintf(stderr,
			"errandctl: observe: session %s ended while this observer had no "
			"stream from errand-agent\n",
			id);
		return 0;
	}
	fprintf(stderr,
		"errandctl: observe: no session %s is running (errandctl sessions lists those "
		"that are; errandctl denied %s shows what an ended one was refused)\n",
		id, id);
	return 125;
}

int observe_main(const char *run_dir, const char *session, bool json)
{
	static struct stream st[MAX_STREAMS];
	int n = 0, watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	bool first = true, look = true, was_running = false;

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		struct pollfd fds[MAX_STREAMS + 1];
		int k = 0, ready;

		/* New sessions are picked up as they start (a socket made, the
		 * watch says) or at the tick; not after every line read. */
		if (look) {
			streams_watch(watch, run_dir);
			if (connect_new(run_dir, session, first, st, &n))
				return 125;
			if (first && session && !n)
				return not_running(session, false);
			first = false;
		}
		for (int i = 0; i < n; i++)
			fds[k++] = (struct pollfd){.fd = st[i].fd, .events = POLLIN};
		fds[k++] = (struct pollfd){.fd = watch, .events = POLLIN};
		ready = poll(fds, (nfds_t)k, 500);
		if (ready < 0 && errno != EINTR)
			return 125;
		look = ready == 0 || fds[n].revents;
		for (int i = 0; i < n; i++) {
			enum seen seen;

			if (st[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			seen = read_stream(&st[i], json, session);
			if (seen == SEEN_ENDED)
				return 0;
			if (seen == SEEN_RUNNING)
				was_running = true;
			/* Not the agent's: followed on its own stream, if at all. */
			if (seen == SEEN_NOT_RUNNING && !watching(st, n, session))
				return not_running(session, was_running);
		}
		if (fds[n].revents) {
			char buf[4096];

			/* A socket bound is listened on at once: a moment later. */
			while (read(watch, buf, sizeof(buf)) > 0)
				;
			usleep(2000);
		}
		/* Compact away ended streams. */
		for (int i = 0; i < n;) {
			if (st[i].fd < 0) {
				st[i] = st[--n];
				look = true; /* the agent's, dropped, is taken again */
			} else {
				i++;
			}
		}
	}
}
