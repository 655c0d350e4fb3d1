/* errand-agent: the root daemon. It serves the control socket, runs each
 * session it starts (DNS, events, grants) and re-adopts those a previous
 * agent left running; sessions never depend on it staying up: their
 * launchers supervise them, their pins enforce, and what needs the agent
 * (DNS answers, new sessions) fails closed while it is down. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <sys/resource.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/control.h"
#include "agent/dnspriv.h"
#include "agent/doctor.h"
#include "agent/enforce.h"
#include "agent/events.h"
#include "agent/grant.h"
#include "agent/inspect.h"
#include "agent/loop.h"
#include "agent/netlink.h"
#include "agent/observe.h"
#include "agent/session.h"
#include "agent/state.h"
#include "egress.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/util.h"

#define ERRAND_VERSION "0.1.0"
#define MAX_CLIENTS 64
/* The program set's outer maps hold EGRESS_SESSIONS_MAX; 1024 by default
 * (--max-sessions raises it), each a few hundred KiB of kernel memory and a
 * few descriptors here (agent_nofile). */
#define MAX_SESSIONS EGRESS_SESSIONS_MAX
#define DEFAULT_SESSIONS 1024
/* Sessions started at once, each in its thread; more wait their turn. */
#define START_JOBS_MAX 4
/* A client has this long to send a whole request, and to read a whole
 * answer: one that reads slowly or never is dropped, never waited for. */
#define CLIENT_DEADLINE_NS (5ull * 1000000000ull)
#define REPLY_DEADLINE_NS (10ull * 1000000000ull)
#define RUN_LINES_UNREAD (64u << 10)
/* How long a stopping agent waits for its jobs. */
#define QUIT_WAIT_NS (30ull * 1000000000ull)
/* The orphan sweep runs at start, on reload, and this often. */
#define SWEEP_INTERVAL_NS (60ull * 1000000000ull)
/* Clients' deadlines (5 and 10 s) are looked at this often, not every turn:
 * a thousand sessions are a thousand waiting clients. */
#define CLIENT_SCAN_NS (100ull * 1000000ull)
#define TRIM_INTERVAL_NS (1000ull * 1000000ull)

struct agent;

struct client {
	struct agent *a;
	struct client *next;
	int fd;
	uint8_t hdr[CONTROL_HEADER_LEN];
	size_t got; /* bytes of header, then of payload */
	uint16_t type;
	uint32_t length;
	uint8_t *frame; /* header and payload, once the header passed its checks */
	int fds[CONTROL_FDS_MAX];
	int nfds;
	uint64_t deadline_ns; /* for the whole request, then for the whole answer */
	uint8_t *out;	      /* the answer not written yet */
	size_t out_len, out_off;
	bool closing;  /* closed once out is written */
	bool starting; /* its session is being started by a job */
	bool gone;     /* closed while starting: the job frees it */
	bool counted;  /* counts against MAX_CLIENTS (a run's does not: --max-sessions bounds those)
			*/
	struct session *waits; /* a run client waiting for its session's end */
};

struct agent {
	const char *config_path;
	char *config_text; /* as of the last load or reload: new sessions parse it */
	struct errand_config cfg;
	struct state *st;
	struct loop *loop;
	gid_t group;
	int listen_fd, sig_fd;
	char sock_path[PATH_MAX];
	struct client *clients;
	size_t n_clients;
	struct client *dead;	    /* closed in this turn: freed at its end */
	struct observe_server *obs; /* the stream of every session's events */
	struct session *sessions[MAX_SESSIONS];
	size_t n_sessions;
	size_t starting; /* sessions being started by jobs, counted against the limit */
	struct start_job *start_queue; /* waiting for one of START_JOBS_MAX threads */
	unsigned start_running;
	size_t max_sessions;
	unsigned stopping; /* teardown jobs running */
	uint64_t next_sweep_ns;
	uint64_t next_client_scan_ns;
	uint64_t next_trim_ns;
	bool sweeping;
	bool quit;
	/* sandbox.pool: networks prepared ahead, taken by start jobs (hence the
	 * lock), refilled by POOL_FILL_JOBS jobs at a time; [1] those without
	 * network (--egress none), kept once such a session was asked for */
	pthread_mutex_t pool_lock;
	pthread_cond_t pool_changed; /* an entry was added or a preparation ended */
	struct session *pool[2][POOL_MAX];
	size_t n_pool[2];
	bool pool_none_wanted;
	unsigned pool_filling[2]; /* preparation jobs running, of each kind */
	unsigned pool_filled[2];  /* preparation jobs ended, of each kind */
	bool pool_stalled;	  /* the last preparation failed: again after a start */
	bool pool_stalled_logged;
	unsigned pool_gen; /* the configuration's generation: older ones are discarded */
};

static void client_handler(void *arg, int fd, uint32_t events);

static void client_free(struct client *c)
{
	free(c->frame);
	free(c->out);
	free(c);
}

/* The client is closed at once; its memory stays while a job refers to it. */
static void client_close(struct client *c)
{
	struct agent *a = c->a;

	if (c->fd < 0)
		return;
	if (c->waits) {
		session_caller_set(c->waits, NULL, NULL);
		c->waits = NULL;
	}
	loop_del(a->loop, c->fd);
	close(c->fd);
	c->fd = -1;
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
	for (struct client **p = &a->clients; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	if (c->counted)
		a->n_clients--;
	if (c->starting) {
		c->gone = true;
		return;
	}
	/* Callers up the stack may still look at c->fd. */
	c->next = a->dead;
	a->dead = c;
}

/* The request is answered: the connection ends once the answer is out. */
static void client_answered(struct client *c)
{
	c->closing = true;
	if (c->fd >= 0 && !c->out)
		client_close(c);
}

/* Writes what it can of the answer without blocking; the rest waits for the
 * socket to drain, until the client's deadline. 0 while the client stays,
 * -errno once it was closed. */
static int client_flush(struct client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			loop_mod(c->a->loop, c->fd, EPOLLOUT);
			return 0;
		}
		if (n <= 0) {
			log_debug("cannot answer a client: %s", strerror(n ? errno : EPIPE));
			client_close(c);
			return -EPIPE;
		}
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	if (c->closing) {
		client_close(c);
		return -EPIPE;
	}
	loop_mod(c->a->loop, c->fd, EPOLLIN);
	return 0;
}

/* Queues a frame; it leaves as fast as the client reads it. */
static int frame_queue(struct client *c, uint16_t type, const json_t *payload)
{
	uint8_t *frame, *out;
	size_t len;
	int rc;

	if (c->fd < 0)
		return -EPIPE;
	rc = control_frame(type, payload, &frame, &len);
	if (rc)
		return rc;
	out = realloc(c->out, c->out_len + len);
	if (!out) {
		free(frame);
		return -ENOMEM;
	}
	memcpy(out + c->out_len, frame, len);
	free(frame);
	c->out = out;
	c->out_len += len;
	return client_flush(c);
}

/* An answer: the client has REPLY_DEADLINE_NS to read it whole. */
static int reply_write(struct client *c, uint16_t type, const json_t *payload)
{
	if (c->fd < 0)
		return -EPIPE;
	c->deadline_ns = boottime_ns() + REPLY_DEADLINE_NS;
	return frame_queue(c, type, payload);
}

/* One line for an answer that could not be framed (too large, or out of
 * memory), so the client is told rather than hung up on. */
static int reply_write_error(struct client *c, int rc)
{
	char line[256];
	json_t *p;

	snprintf(line, sizeof(line), "errand-agent cannot send this answer: %s%s", strerror(-rc),
		 rc == -EMSGSIZE ? "; name one session" : "");
	p = json_pack("{s:s}", "error", line);
	rc = reply_write(c, CONTROL_ERROR, p);
	json_decref(p);
	return rc;
}

static void reply_error_of(struct client *c, bool request, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void reply_error_of(struct client *c, bool request, const char *fmt, va_list ap)
{
	char line[1024], shown[1025];
	json_t *p;

	/* printable ASCII, cut whole: what the frame takes, whatever the
	 * request's strings it quotes held */
	vsnprintf(line, sizeof(line), fmt, ap);
	esc_text(line, shown, sizeof(shown));
	p = request ? json_pack("{s:s,s:b}", "error", shown, "request", 1)
		    : json_pack("{s:s}", "error", shown);
	if (!p)
		p = json_pack("{s:s}", "error", "errand-agent is out of memory");
	reply_write(c, CONTROL_ERROR, p);
	json_decref(p);
}

static void reply_error(struct client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void reply_error(struct client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_error_of(c, false, fmt, ap);
	va_end(ap);
}

/* The run request itself refused (control.h: error's request member). */
static void reply_refused(struct client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void reply_refused(struct client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	reply_error_of(c, true, fmt, ap);
	va_end(ap);
}

static void reply(struct client *c, uint16_t type, json_t *payload)
{
	int rc = reply_write(c, type, payload);

	json_decref(payload);
	/* an answer that cannot be framed is said to be so, not dropped */
	if (rc && rc != -EPIPE && (rc = reply_write_error(c, rc)))
		log_debug("cannot answer a client: %s", strerror(-rc));
}

/* A line of the session's refusals for errandctl run's stderr
 * (session_caller). No deadline: the run may wait for days, reading only
 * when a line comes. A client with RUN_LINES_UNREAD bytes not read yet
 * misses lines (the agent's log has each) rather than growing the agent. */
static void run_line(const char *line, void *arg)
{
	struct client *c = arg;
	json_t *p;

	if (c->fd < 0 || c->out_len - c->out_off > RUN_LINES_UNREAD)
		return;
	p = json_pack("{s:s}", "line", line);
	if (p && frame_queue(c, CONTROL_RUN_LINE, p) == -ENOMEM)
		log_debug("cannot pass a line to a run's caller: out of memory");
	json_decref(p);
}

/* The run's answer: its session's exit status. The connection ends once
 * the client has it. */
static void run_exit(struct client *c, int status)
{
	struct session *s = c->waits;
	json_t *p = json_pack("{s:s,s:i}", "session", session_id(s), "status",
			      session_exit_code(status));

	session_caller_set(s, NULL, NULL);
	c->waits = NULL;
	c->closing = true;
	reply(c, CONTROL_RUN_EXIT, p);
}

static void run_exited(int status, void *arg)
{
	run_exit(arg, status);
}

static const struct session_caller run_caller = {.line = run_line, .exited = run_exited};

static int config_reload(struct agent *a, char *err, size_t errlen)
{
	char *text = NULL;
	struct errand_config cfg;

	if (config_read_text(a->config_path, a->config_path != NULL, &text, err, errlen) ||
	    config_load_text(text, a->config_path, &cfg, err, errlen)) {
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

/* The doctor's host probe, off the loop: sessions started from now on are
 * gated by its cached report. */
struct probe_job {
	struct errand_config cfg;
	char *text;
};

static void probe_work(void *arg)
{
	struct probe_job *j = arg;

	doctor_refresh(&j->cfg);
}

static void probe_done(void *arg)
{
	struct probe_job *j = arg;

	config_free(&j->cfg);
	free(j->text);
	free(j);
}

static void probe_start(struct agent *a)
{
	struct probe_job *j = calloc(1, sizeof(*j));
	char err[CONFIG_ERRLEN];

	if (!j || !(j->text = strdup(a->config_text)) ||
	    config_load_text(j->text, a->config_path, &j->cfg, err, sizeof(err))) {
		if (j)
			free(j->text);
		free(j);
		return;
	}
	if (loop_job(a->loop, probe_work, probe_done, j))
		probe_done(j);
}

/* The orphan sweep walks cgroups, netns and pins: a job too. */
struct sweep_job {
	struct agent *a;
	struct errand_config cfg;
	char *text;
};

static void sweep_work(void *arg)
{
	struct sweep_job *j = arg;

	session_sweep(&j->cfg);
}

static void sweep_done(void *arg)
{
	struct sweep_job *j = arg;

	j->a->sweeping = false;
	config_free(&j->cfg);
	free(j->text);
	free(j);
}

static void sweep_start(struct agent *a)
{
	struct sweep_job *j;
	char err[CONFIG_ERRLEN];

	if (a->sweeping)
		return;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->text = strdup(a->config_text)) ||
	    config_load_text(j->text, a->config_path, &j->cfg, err, sizeof(err))) {
		if (j)
			free(j->text);
		free(j);
		return;
	}
	j->a = a;
	a->sweeping = true;
	if (loop_job(a->loop, sweep_work, sweep_done, j))
		sweep_done(j);
}

static struct session *find_session(struct agent *a, const char *id)
{
	for (size_t i = 0; i < a->n_sessions; i++)
		if (!strcmp(session_id(a->sessions[i]), id))
			return a->sessions[i];
	return NULL;
}

static void session_ended(struct session *s, void *arg);

/* A start, preparation or teardown allocates some MiB for moments in its
 * job thread (netlink and nftables listings that grow with the sessions
 * there are), and the thread's malloc arena would keep them: 58 MiB held
 * for 10 MiB in use at 20 sessions. Given back once no job runs, at most
 * once a second (agent_check): a trim after every job gave back what the
 * next one took again, each time a madvise that interrupts every CPU and
 * the faults of the pages taken again. */
static atomic_bool trim_due;

static void agent_trim(void)
{
	atomic_store(&trim_due, true);
}

static void trim_work(void *arg)
{
	(void)arg;
	malloc_trim(0);
}

static void trim_done(void *arg)
{
	(void)arg;
}

/* Work that no start waits for (preparing the pool, tearing down): at a
 * lower priority, this job thread alone (and the threads it makes), so on
 * a host with few CPUs it yields to the starts, their launchers and their
 * commands. Much of it waits for the kernel's grace periods anyway. */
static void job_background(void)
{
	setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
}

/* The warm pool (sandbox.pool): each entry a fresh network namespace with
 * its veth pair, addresses and NAT, made off the start's path by one job at
 * a time and taken whole by one session start. An entry is never reused;
 * one whose preparation failed is gone already (session_net_prepare leaves
 * nothing), and the pool waits for the next start before trying again. */
struct pool_job {
	struct agent *a;
	char *text;
	unsigned gen;
	bool none; /* a namespace without network */
	struct session *net;
	char err[CONFIG_ERRLEN];
};

static void pool_discard_work(void *arg)
{
	job_background();
	session_net_discard(arg);
}

static void pool_discard_done(void *arg)
{
	(void)arg;
}

/* Off the loop: each teardown waits for the kernel's grace periods. */
static void pool_discard(struct agent *a, struct session *net)
{
	if (loop_job(a->loop, pool_discard_work, pool_discard_done, net))
		session_net_discard(net);
}

static void pool_fill_work(void *arg)
{
	struct pool_job *j = arg;

	job_background();
	j->net = session_net_prepare(j->text, j->a->config_path, j->none, j->err, sizeof(j->err));
	agent_trim();
}

static void pool_fill(struct agent *a);

static void pool_fill_done(void *arg)
{
	struct pool_job *j = arg;
	struct agent *a = j->a;
	bool kept = false;

	pthread_mutex_lock(&a->pool_lock);
	a->pool_filling[j->none]--;
	a->pool_filled[j->none]++;
	pthread_mutex_unlock(&a->pool_lock);
	if (!j->net) {
		if (!a->pool_stalled_logged)
			log_warnx("sandbox.pool: cannot prepare a network ahead (sessions make "
				  "their own): %s",
				  j->err);
		a->pool_stalled = a->pool_stalled_logged = true;
	} else {
		a->pool_stalled_logged = false;
		pthread_mutex_lock(&a->pool_lock);
		if (j->gen == a->pool_gen && a->n_pool[j->none] < a->cfg.pool_size && !a->quit) {
			a->pool[j->none][a->n_pool[j->none]++] = j->net;
			kept = true;
		}
		pthread_mutex_unlock(&a->pool_lock);
		if (!kept)
			pool_discard(a, j->net);
	}
	pthread_cond_broadcast(&a->pool_changed);
	free(j->text);
	free(j);
	pool_fill(a);
}

/* Preparations run side by side, up to this many: most of one is waiting
 * for the kernel (the grace period of each insertion of its maps into the
 * program set, its namespace's and veth's setup), and waits side by side
 * share their grace periods, so starts back to back do not drain the pool
 * faster than it fills. */
#define POOL_FILL_JOBS 2

static void pool_fill(struct agent *a)
{
	while (!a->quit && !a->pool_stalled &&
	       a->pool_filling[0] + a->pool_filling[1] < POOL_FILL_JOBS) {
		struct pool_job *j;
		bool net, none;

		pthread_mutex_lock(&a->pool_lock);
		net = a->cfg.network != NETWORK_NONE &&
		      a->n_pool[0] + a->pool_filling[0] < a->cfg.pool_size;
		none = (a->pool_none_wanted || a->cfg.network == NETWORK_NONE) &&
		       a->n_pool[1] + a->pool_filling[1] < a->cfg.pool_size;
		pthread_mutex_unlock(&a->pool_lock);
		if (!net && !none)
			return;
		j = calloc(1, sizeof(*j));
		if (!j || !(j->text = strdup(a->config_text))) {
			free(j);
			return;
		}
		j->a = a;
		j->gen = a->pool_gen;
		j->none = !net;
		pthread_mutex_lock(&a->pool_lock);
		a->pool_filling[j->none]++;
		pthread_mutex_unlock(&a->pool_lock);
		if (loop_job(a->loop, pool_fill_work, pool_fill_done, j)) {
			pthread_mutex_lock(&a->pool_lock);
			a->pool_filling[j->none]--;
			pthread_mutex_unlock(&a->pool_lock);
			free(j->text);
			free(j);
			return;
		}
	}
}

/* From a start job's thread. An empty pool whose preparations are under
 * way: the start waits for those (any of them that fills the pool), which
 * are further along than one it would begin now, and makes its own only if
 * none does. */
static struct session *pool_take(void *arg, bool none)
{
	struct agent *a = arg;
	struct session *net = NULL;
	unsigned until;

	pthread_mutex_lock(&a->pool_lock);
	if (none)
		a->pool_none_wanted = true;
	until = a->pool_filled[none] + a->pool_filling[none];
	while (!a->n_pool[none] && (int)(until - a->pool_filled[none]) > 0)
		pthread_cond_wait(&a->pool_changed, &a->pool_lock);
	/* The oldest: its maps' insertions into the program set, which return
	 * a grace period after they took effect, are the likeliest over. */
	if (a->n_pool[none]) {
		net = a->pool[none][0];
		memmove(a->pool[none], a->pool[none] + 1,
			--a->n_pool[none] * sizeof(a->pool[none][0]));
	}
	pthread_mutex_unlock(&a->pool_lock);
	return net;
}

/* The configuration changed or the agent stops: what was prepared under
 * the old one goes. */
static void pool_drain(struct agent *a, bool now)
{
	struct session *old[2 * POOL_MAX];
	size_t n;

	pthread_mutex_lock(&a->pool_lock);
	a->pool_gen++;
	n = a->n_pool[0];
	memcpy(old, a->pool[0], n * sizeof(old[0]));
	memcpy(old + n, a->pool[1], a->n_pool[1] * sizeof(old[0]));
	n += a->n_pool[1];
	a->n_pool[0] = a->n_pool[1] = 0;
	pthread_mutex_unlock(&a->pool_lock);
	for (size_t i = 0; i < n; i++) {
		if (now)
			session_net_discard(old[i]);
		else
			pool_discard(a, old[i]);
	}
	a->pool_stalled = false;
}

/* A new configuration: sweep, probe and pool follow it. */
static void agent_reloaded(struct agent *a)
{
	sweep_start(a);
	probe_start(a);
	pool_drain(a, false);
	pool_fill(a);
}

/* A session's start runs in a job thread: it makes only objects of the new
 * session, which the loop does not see until the job is done. */
struct start_job {
	struct agent *a;
	struct client *c;
	struct session_params p;
	char *config_text;
	json_t *request;
	int stdio[3];
	char err[CONFIG_ERRLEN];
	char *said; /* the start's statements (session_params.say), lines */
	size_t said_len;
	struct session *s;
	bool ran;
	bool request_refused; /* session_params.request_refused */
	struct start_job *next;
};

static void start_done(void *arg);

static void start_work(void *arg)
{
	struct start_job *j = arg;

	j->p.say = open_memstream(&j->said, &j->said_len);
	j->p.say_buf = j->p.say ? &j->said : NULL;
	j->s = session_start(&j->p, j->err, sizeof(j->err));
	if (j->p.say)
		fclose(j->p.say);
	agent_trim();
}

/* Starts queued sessions while threads are free. One whose errandctl run
 * went away while it waited is not started at all. */
static void start_next(struct agent *a)
{
	while (a->start_running < START_JOBS_MAX && a->start_queue) {
		struct start_job *j = a->start_queue;

		a->start_queue = j->next;
		if (j->c->gone) {
			start_done(j);
			continue;
		}
		j->ran = true;
		a->start_running++;
		if (loop_job(a->loop, start_work, start_done, j)) {
			snprintf(j->err, sizeof(j->err),
				 "the agent cannot start a thread for the session; try again");
			start_done(j);
		}
	}
}

/* A start's statements in the agent's log, each line escaped whole and
 * named by its session (many start at once), or as a refused start's. */
static void said_log(const char *id, const char *said)
{
	for (const char *l = said; l && *l;) {
		size_t n = strcspn(l, "\n");
		char *shown = n ? malloc(ESC_LEN(n)) : NULL;

		if (shown) {
			esc_textn(l, n, shown, ESC_LEN(n));
			fprintf(stderr, "%s: %s%s%s%s\n", log_prog(), id ? "session " : "",
				id ? id : "", id ? ": " : "a refused start: ", shown);
		}
		free(shown);
		l += n + !!l[n];
	}
}

static void teardown_work(void *arg);
static void teardown_done(void *arg);

static void start_done(void *arg)
{
	struct start_job *j = arg;
	struct agent *a = j->a;
	struct client *c = j->c;
	struct session *s = j->s;
	json_t *started;
	bool served, relayed;
	int pidfd, rc;

	a->starting--;
	if (j->ran)
		a->start_running--;
	for (int i = 0; i < 3; i++)
		close(j->stdio[i]);
	c->starting = false;
	/* In the log as they were said (the client's command had them on its
	 * stderr from the launcher). */
	said_log(s ? session_id(s) : NULL, j->said);
	if (!s) {
		if (c->gone) {
			client_free(c);
		} else {
			if (j->request_refused)
				reply_refused(c, "%s", j->err);
			else
				reply_error(c, "%s", j->err);
			client_answered(c);
		}
		goto out;
	}
	session_record_state(s, a->st);
	served = session_attach(s, a->loop, session_ended, a) == 0;
	if (!served) {
		/* Not followed, its end would never come here, and the agent holds
		 * its lock, so no sweep takes it either: it is stopped and torn
		 * down at once, as a start that failed is, and the caller told. */
		log_warnx("session %s: cannot serve it: out of descriptors or memory; stopped "
			  "and removed",
			  session_id(s));
		session_stop(s);
		if (c->gone) {
			client_free(c);
		} else {
			reply_error(c,
				    "session %s: the agent cannot follow it (out of descriptors or "
				    "memory); it was stopped and removed",
				    session_id(s));
			client_answered(c);
		}
		session_record_end(s);
		if (loop_job(a->loop, teardown_work, teardown_done, s))
			session_end(s);
		goto out;
	}
	a->sessions[a->n_sessions++] = s;
	log_info("session %s started%s", session_id(s),
		 session_net_prepared(s) ? " in a network prepared ahead" : "");
	if (c->gone) {
		/* errandctl run went away: the session goes on. */
		client_free(c);
		goto out;
	}
	/* Relayed: its end comes here only once the caller has all its output,
	 * and the client waits for run-exit instead of the launcher's file. */
	relayed = served && session_output_relayed(s);
	/* The statements are not in it: its command's stderr had them first
	 * (session_params.say_buf). */
	started = json_pack("{s:s,s:b}", "session", session_id(s), "relayed", relayed);
	pidfd = session_pidfd(s);
	/* The first answer on this connection: the socket takes it whole. */
	rc = control_write_fds(c->fd, CONTROL_RUN_STARTED, started, &pidfd, 1);
	if (rc == 0) {
		c->waits = s;
		c->deadline_ns = 0;
		session_caller_set(s, &run_caller, c);
	} else {
		client_close(c);
	}
	json_decref(started);
out:
	json_decref(j->request);
	free(j->config_text);
	free(j->said);
	free(j);
	a->pool_stalled = false;
	pool_fill(a);
	start_next(a);
}

static void handle_run(struct agent *a, struct client *c, const json_t *req)
{
	struct start_job *j;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	const char *config = json_string_value(json_object_get(req, "config"));

	/* A client that sends its configuration checked nothing against it:
	 * the checks here are the ones it skipped only when the text is this
	 * agent's own. Not kept: the request is the session's record. */
	if (config && (!a->config_text || strcmp(config, a->config_text))) {
		reply_refused(c, "errandctl's configuration is not the one this agent runs; the "
				 "run goes through errandctl-full, which checks it first");
		return;
	}
	json_object_del((json_t *)req, "config");
	if (c->nfds != 3) {
		reply_error(c, "run needs the command's stdin, stdout and stderr passed along");
		return;
	}
	if (a->n_sessions + a->starting >= a->max_sessions) {
		reply_error(c,
			    "this agent runs %zu sessions already, its limit (errand-agent "
			    "--max-sessions); stop one first",
			    a->max_sessions);
		return;
	}
	/* Who asked, as the kernel knows it: the project is written as its
	 * owner, so request.c and the launcher let only the owner or root. */
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) ||
	    json_object_set_new((json_t *)req, "requester", json_integer(cr.uid))) {
		reply_error(c, "cannot read who asked for the session");
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j || !(j->config_text = strdup(a->config_text)) ||
	    !(j->request = json_deep_copy(req))) {
		if (j)
			free(j->config_text);
		free(j);
		reply_error(c, "the agent is out of memory; try again");
		return;
	}
	j->a = a;
	j->c = c;
	/* The job owns the command's stdio from here on. */
	memcpy(j->stdio, c->fds, sizeof(j->stdio));
	c->nfds = 0;
	j->p = (struct session_params){
		.config_text = j->config_text,
		.config_path = a->config_path,
		.request = j->request,
		.stdio = j->stdio,
		.take_net = pool_take,
		.take_arg = a,
		.request_refused = &j->request_refused,
	};
	c->starting = true;
	a->starting++;
	/* From here the client waits for its session, as long as it runs: the
	 * session limit bounds these, and they leave the 64 to control. */
	c->counted = false;
	a->n_clients--;
	for (struct start_job **q = &a->start_queue;; q = &(*q)->next) {
		if (!*q) {
			*q = j;
			break;
		}
	}
	start_next(a);
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
	char err[CONFIG_ERRLEN];
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
		if (config_reload(a, err, sizeof(err))) {
			reply_error(c, "%s; the agent keeps its configuration", err);
			return;
		}
		agent_reloaded(a);
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
	free(c->frame);
	c->frame = NULL;
	c->got = 0;
	/* One request a connection, but run's, which waits for the end: nothing
	 * more is read from it while its answer is written. */
	c->closing = m.type != CONTROL_RUN;
	if (c->closing)
		loop_mod(a->loop, c->fd, 0);
	handle(a, c, &m);
	control_msg_free(&m);
	if (c->fd < 0)
		return;
	for (int i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
	if (c->starting)
		loop_mod(a->loop, c->fd, EPOLLIN); /* to notice run going away */
	else
		client_answered(c);
}

static void client_handler(void *arg, int fd, uint32_t events)
{
	struct client *c = arg;

	(void)fd;
	if (events & EPOLLOUT) {
		if (client_flush(c))
			return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || c->fd < 0)
		return;
	if (c->waits || c->starting) {
		/* errandctl run went away (it sends nothing more): the session
		 * goes on. */
		client_close(c);
		return;
	}
	if (c->out || c->closing) {
		if (events & (EPOLLHUP | EPOLLERR))
			client_close(c);
		return;
	}
	client_read(c->a, c);
}

/* Over the limit, a client gets one line saying so, and the connection ends:
 * never a half-served request. */
static void client_refuse(int fd, const char *line)
{
	json_t *p = json_pack("{s:s}", "error", line);
	uint8_t *frame;
	size_t len;

	if (p && control_frame(CONTROL_ERROR, p, &frame, &len) == 0) {
		if (send(fd, frame, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
			log_debug("a refused client did not take its answer");
		free(frame);
	}
	json_decref(p);
	close(fd);
}

static void client_accept(void *arg, int lfd, uint32_t events)
{
	struct agent *a = arg;
	struct client *c;
	int fd;

	(void)events;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	if (control_peer_allowed(fd, a->group)) {
		close(fd);
		return;
	}
	if (a->n_clients >= MAX_CLIENTS) {
		log_warnx("too many clients at once (%d); one refused", MAX_CLIENTS);
		client_refuse(fd, "the agent serves 64 clients at once already; try again "
				  "shortly");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	*c = (struct client){.a = a,
			     .fd = fd,
			     .deadline_ns = boottime_ns() + CLIENT_DEADLINE_NS,
			     .counted = true};
	if (loop_add(a->loop, fd, EPOLLIN, client_handler, c)) {
		close(fd);
		free(c);
		return;
	}
	c->next = a->clients;
	a->clients = c;
	a->n_clients++;
}

/* A session's teardown (the broker's stop, every kernel object) is a job. */
static void teardown_work(void *arg)
{
	job_background();
	session_end(arg);
	agent_trim();
}

static void teardown_done(void *arg)
{
	(void)arg;
}

static void session_ended(struct session *s, void *arg)
{
	struct agent *a = arg;
	int status = session_status(s);
	size_t i;

	log_info("session %s ended with status %d", session_id(s), status);
	for (struct client *c = a->clients, *next; c; c = next) {
		next = c->next;
		if (c->waits == s)
			run_exit(c, status);
	}
	for (i = 0; i < a->n_sessions && a->sessions[i] != s; i++)
		;
	if (i < a->n_sessions)
		a->sessions[i] = a->sessions[--a->n_sessions];
	session_unattach(s);
	session_record_end(s);
	if (loop_job(a->loop, teardown_work, teardown_done, s))
		session_end(s);
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

/* Whether another process that ran the session is still there to serve it. */
static bool owner_alive(const struct state_session *row)
{
	pid_t pid;

	return inspect_owner_alive(row, &pid) && pid != getpid();
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
		err[0] = '\0';
		s = session_adopt(row, a->cfg.state_dir, a->st, err, sizeof(err));
		if (s && a->n_sessions >= MAX_SESSIONS)
			snprintf(err, sizeof(err), "this agent runs %d sessions already",
				 MAX_SESSIONS);
		else if (s && session_attach(s, a->loop, session_ended, a))
			snprintf(err, sizeof(err), "cannot follow it from the agent's loop");
		else if (s) {
			a->sessions[a->n_sessions++] = s;
			log_info("session %s adopted", row->id);
			state_session_free(row);
			continue;
		}
		/* Still enforced by its pins; without DNS it reaches nothing new. */
		log_warnx("session %s: cannot adopt it: %s", row->id, err);
		session_detach(s);
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

/* Type=notify: one datagram to $NOTIFY_SOCKET (a path, or an abstract name
 * when it starts with '@'), as systemd's sd_notify sends it. Not linking
 * libsystemd keeps its six libraries out of every exec of this binary (the
 * DNS worker is one per session). Nothing to do when systemd did not start
 * us; a failure is systemd's to notice (its start timeout). */
static void notify_systemd(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t len;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@'))
		return;
	len = strlen(path);
	if (len >= sizeof(sun.sun_path))
		return;
	memcpy(sun.sun_path, path, len);
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		log_warn("cannot tell systemd %s: %s", state, strerror(errno));
	close(fd);
}

static void on_signal(void *arg, int fd, uint32_t events)
{
	struct agent *a = arg;
	struct signalfd_siginfo si;
	char err[CONFIG_ERRLEN];

	(void)events;
	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			notify_systemd("RELOADING=1");
			if (config_reload(a, err, sizeof(err)) == 0) {
				agent_reloaded(a);
				log_info("configuration reloaded (SIGHUP); sessions started from "
					 "now on use it");
			}
			notify_systemd("READY=1");
		} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			a->quit = true;
		}
		/* SIGCHLD: a launcher ended; its pidfd says which. */
	}
}

/* Deadlines of clients and the sweep's pace, once a turn. */
static void agent_prepare(void *arg, int *timeout)
{
	(void)arg;
	if (*timeout < 0 || *timeout > 1000)
		*timeout = 1000;
}

static void agent_check(void *arg)
{
	struct agent *a = arg;
	uint64_t now = boottime_ns();

	while (a->dead) {
		struct client *c = a->dead;

		a->dead = c->next;
		client_free(c);
	}
	if (now >= a->next_sweep_ns) {
		sweep_start(a);
		a->next_sweep_ns = now + SWEEP_INTERVAL_NS;
	}
	if (now >= a->next_trim_ns && !loop_jobs(a->loop) && atomic_exchange(&trim_due, false)) {
		a->next_trim_ns = now + TRIM_INTERVAL_NS;
		if (loop_job(a->loop, trim_work, trim_done, NULL))
			malloc_trim(0);
	}
	if (now < a->next_client_scan_ns)
		return;
	a->next_client_scan_ns = now + CLIENT_SCAN_NS;
	for (struct client *c = a->clients, *next; c; c = next) {
		next = c->next;
		if (c->deadline_ns && now > c->deadline_ns && !c->starting) {
			log_warnx("client dropped: %s",
				  c->out ? "it did not read its whole answer within 10 s"
					 : "no whole request within 5 s");
			client_close(c);
		}
	}
}

/* An observer connects to the agent's stream (or one that left is seen
 * then). */
static void on_observer(void *arg, int fd, uint32_t events)
{
	struct pollfd p = {.fd = fd, .revents = (short)events};

	observe_server_process(arg, &p, 1);
}

/* A new observer's first line: the sessions running, whose "ended" it may
 * wait for (errandctl observe ID says at once when ID is not one). */
static char *running_hello(void *arg)
{
	struct agent *a = arg;
	json_t *ids = json_array(), *o;
	char *line;

	for (size_t i = 0; ids && i < a->n_sessions; i++)
		json_array_append_new(ids, json_string(session_id(a->sessions[i])));
	o = json_pack("{s:s,s:o}", "event", "running", "sessions", ids);
	line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return line;
}

static void agent_loop(struct agent *a)
{
	if (loop_add(a->loop, a->sig_fd, EPOLLIN, on_signal, a) ||
	    loop_add(a->loop, a->listen_fd, EPOLLIN, client_accept, a) ||
	    loop_hook_add(a->loop, agent_prepare, agent_check, a))
		fatalx("cannot set up the event loop");
	while (!a->quit)
		if (loop_once(a->loop, -1))
			fatal("epoll_wait");
	loop_del(a->loop, a->listen_fd);
	/* Sessions being started or torn down are finished first: nothing is
	 * left half-made. A job stuck past the bound is left to the next
	 * agent's sweep (its session's lock goes with this process). */
	for (uint64_t end = boottime_ns() + QUIT_WAIT_NS; loop_jobs(a->loop);) {
		if (boottime_ns() > end) {
			log_warnx("%u job(s) did not finish within 30 s; stopping anyway",
				  loop_jobs(a->loop));
			break;
		}
		if (loop_once(a->loop, 100))
			break;
	}
}

/* Each session holds a few descriptors here (its pidfd, event ring, DNS
 * worker's channel, observer socket, inotify), so the soft limit a service
 * starts with (1024 under systemd) would stop sessions long before
 * --max-sessions: raised to the hard limit. */
static void agent_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			log_warn("cannot raise the open files limit to %llu",
				 (unsigned long long)rl.rlim_max);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: errand-agent [--config FILE] [--foreground] [--max-sessions N] [-v]\n");
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
		{"max-sessions", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct agent a = {.listen_fd = -1, .sig_fd = -1, .max_sessions = DEFAULT_SESSIONS};
	char err[CONFIG_ERRLEN], *end;
	bool foreground = false, verbose = false;
	int opt, ready = -1;
	char dir[PATH_MAX], obs_path[PATH_MAX];

	/* The DNS worker: this binary exec'd again (agent/dnspriv.c). */
	if (dnsp_worker_argv(argc, argv))
		_exit(dnsp_worker_exec_main(argv));
	dnsp_exe_open();
	while ((opt = getopt_long(argc, argv, "c:fvhm:", opts, NULL)) != -1) {
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
		case 'm':
			errno = 0;
			a.max_sessions = strtoul(optarg, &end, 10);
			if (errno || *end || !a.max_sessions || a.max_sessions > MAX_SESSIONS) {
				fprintf(stderr,
					"errand-agent: --max-sessions takes 1 to %d, not %s\n",
					MAX_SESSIONS, optarg);
				return 125;
			}
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
	enforce_libbpf_quiet();
	if (geteuid() != 0)
		fatalx("errand-agent makes cgroups, network namespaces and BPF programs; run it as "
		       "root");
	if (!a.config_path)
		a.config_path = CONFIG_DEFAULT_PATH;
	if (config_reload(&a, err, sizeof(err)))
		return 125;
	agent_nofile();
	/* Before any connection exists (SQLite's must not cross a fork). */
	if (!foreground && daemonize(&ready))
		fatal("cannot go into the background");
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
	a.loop = loop_new();
	if (!a.loop)
		fatal("cannot make the event loop");
	/* After the control socket: another agent would have answered there. */
	if (path_fmt(obs_path, sizeof(obs_path), "%s/" OBSERVE_AGENT_SOCKET, a.cfg.run_dir) ||
	    !(a.obs = observe_server_new(obs_path)) ||
	    loop_add(a.loop, observe_server_fd(a.obs), EPOLLIN, on_observer, a.obs))
		fatal("cannot serve the event stream on %s", obs_path);
	/* Who may ask for denied may watch: the control socket's group. */
	observe_server_agent(a.obs, a.group);
	observe_server_hello(a.obs, running_hello, &a);
	if (a.group != CONTROL_NO_GROUP &&
	    (lchown(obs_path, 0, a.group) ||
	     fchmodat(AT_FDCWD, obs_path, 0660, AT_SYMLINK_NOFOLLOW)))
		fatal("cannot give %s to group " CONTROL_GROUP, obs_path);
	session_observe_shared(a.obs);
	/* Sessions of a previous agent: swept if dead, adopted if alive; the
	 * host's probe is cached for the sessions to come. */
	session_sweep(&a.cfg);
	adopt_all(&a);
	/* The egress programs are verified here, once, not in a session's start. */
	{
		char perr[512];

		/* Its directory first: on a fresh host the first session made it,
		 * and the set waited for that session. */
		int rc = session_bpffs_ensure(a.cfg.bpf_dir);

		if (rc)
			snprintf(perr, sizeof(perr), "cannot prepare %s: %s", a.cfg.bpf_dir,
				 strerror(-rc));
		if (rc || enforce_preload(a.cfg.bpf_dir, perr, sizeof(perr)))
			log_info(
				"egress programs not loaded yet (the first session loads them): %s",
				perr);
	}
	probe_start(&a);
	pthread_mutex_init(&a.pool_lock, NULL);
	pthread_cond_init(&a.pool_changed, NULL);
	pool_fill(&a);
	a.next_sweep_ns = boottime_ns() + SWEEP_INTERVAL_NS;
	/* Asked again at each session's start: a route that comes later counts. */
	if (!netlink_v6_route_out())
		log_info("no IPv6 route out of this namespace: sessions get IPv6 for their DNS "
			 "alone, no IPv6 route (AAAA answers are still filtered)");
	log_info("listening on %s (%s), %zu session(s) adopted", a.sock_path,
		 a.group == CONTROL_NO_GROUP ? "root only" : "root and group " CONTROL_GROUP,
		 a.n_sessions);
	if (ready >= 0) {
		if (write(ready, "1", 1) != 1)
			log_warn("cannot tell the starting process");
		close(ready);
	}
	/* Type=notify: the control socket serves from here on */
	notify_systemd("READY=1");
	agent_loop(&a);
	notify_systemd("STOPPING=1");
	/* Prepared networks are nobody's session: they go with the agent. */
	pool_drain(&a, true);
	enforce_hooks_release();
	/* Sessions stay: their launchers and pins carry on; the next agent
	 * adopts them. */
	log_info("stopping; %zu session(s) keep running and will be adopted by the next agent",
		 a.n_sessions);
	for (size_t i = 0; i < a.n_sessions; i++) {
		session_unattach(a.sessions[i]);
		session_detach(a.sessions[i]);
	}
	while (a.clients)
		client_close(a.clients);
	while (a.dead) {
		struct client *c = a.dead;

		a.dead = c->next;
		client_free(c);
	}
	loop_hook_del(a.loop, &a);
	loop_del(a.loop, a.sig_fd);
	loop_del(a.loop, observe_server_fd(a.obs));
	observe_server_free(a.obs);
	loop_free(a.loop);
	close(a.listen_fd);
	unlink(a.sock_path);
	state_close(a.st);
	config_free(&a.cfg);
	free(a.config_text);
	return 0;
}
