/* errand-broker: the provider-route relay. Started by the agent (as root,
 * dropping to its own account with --user once its sockets are bound and
 * receipts.db is open), it learns sessions and the providers' keys over
 * <paths.run>/broker.sock and serves their calls on --listen; each connection gets a thread of its
 * own, and this loop only accepts, on an io_uring. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <liburing.h>
#include <ares.h>
#include <netinet/in.h>
#include <pwd.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker/blog.h"
#include "broker/intercept.h"
#include "broker/journal.h"
#include "broker/registry.h"
#include "broker/relay.h"
#include "broker/sessions.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/util.h"

enum ev_type {
	EV_ACCEPT = 1,
	EV_REG_ACCEPT,
	EV_REG_RECV,
	EV_SIGNAL,
	EV_INTERCEPT_ACCEPT,
};

struct ev {
	enum ev_type type;
	int fd;
	/* an accept out of descriptors waits (ts) before it is armed again:
	 * the connection stays queued, and accepting at once spun the CPU */
	struct __kernel_timespec ts;
	bool waiting, starved;
	char buf[BROKER_MSG_MAX + 1]; /* EV_REG_RECV */
	struct signalfd_siginfo si;   /* EV_SIGNAL */
};

struct opts {
	const char *config;
	const char *listen;
	const char *user;
	const char *registry;	  /* the registry socket; default <paths.run>/broker.sock */
	const char *session_lock; /* a session's lock: the broker ends with the session */
	const char *intercept;	  /* ADDR:PORT of the listener for intercepted hosts */
	const char *ca_dir;	  /* where the session's CA is kept (its record directory) */
	bool verbose;
	bool quiet; /* warnings only: the embedded errandctl's terminal is the user's */
};

static void usage(void)
{
	fprintf(stderr, "usage: errand-broker [--config FILE] [--listen ADDR:PORT] "
			"[--user USER|UID:GID] [--registry SOCKET] [--session-lock FILE] "
			"[--intercept ADDR:PORT --ca DIR] [--verbose|--quiet]\n");
	exit(2);
}

static int listen_tcp(const char *spec)
{
	struct sockaddr_storage ss = {0};
	struct addr a;
	uint16_t port;
	socklen_t len;
	cleanup_close int fd = -1;
	int one = 1;

	if (addr_port_parse(spec, &a, &port) || !port)
		fatalx("--listen %s: write ADDR:PORT, like 0.0.0.0:%d", spec, BROKER_DEFAULT_PORT);
	if (addr_is_v4(&a)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr.s_addr = addr_v4(&a);
		len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, a.b, 16);
		len = sizeof(*sin6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 512))
		fatal("--listen %s: cannot listen there; pick a free port", spec);
	return steal_fd(&fd);
}

/* <run>/broker.sock (or --registry), 0600: only root (the agent) may
 * register sessions. */
static int listen_registry(const char *run_dir, const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	cleanup_close int fd = -1;
	mode_t old;

	if (path) {
		if (path_fmt(sun.sun_path, sizeof(sun.sun_path), "%s", path))
			fatalx("--registry %s is too long for a socket path", path);
	} else {
		if (mkdir(run_dir, 0755) && errno != EEXIST)
			fatal("paths.run %s: cannot create it", run_dir);
		if (path_fmt(sun.sun_path, sizeof(sun.sun_path), "%s/%s", run_dir,
			     BROKER_SOCKET_NAME))
			fatalx("paths.run %s is too long for a socket path; pick a shorter one",
			       run_dir);
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal("socket");
	unlink(sun.sun_path);
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) || listen(fd, 16))
		fatal("%s: cannot listen there", sun.sun_path);
	umask(old);
	return steal_fd(&fd);
}

/* A session's own broker ends with the session, whatever becomes of the
 * agent that started it: the session's launcher holds its lock exclusively
 * for the session's life, and a shared lock is granted only once it is gone. */
static void *lock_watch(void *arg)
{
	int fd = (int)(intptr_t)arg;

	while (flock(fd, LOCK_SH) && errno == EINTR)
		;
	blog_info("the session ended: stopping");
	kill(getpid(), SIGTERM);
	return NULL;
}

static void watch_session(const char *path)
{
	pthread_t t;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		fatal("--session-lock %s", path);
	if (pthread_create(&t, NULL, lock_watch, (void *)(intptr_t)fd))
		fatalx("--session-lock: cannot start a thread");
	pthread_detach(t);
}

static void parse_user(const char *spec, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(spec);
	unsigned int u, g;
	char end;

	if (pw) {
		*uid = pw->pw_uid;
		*gid = pw->pw_gid;
	} else if (sscanf(spec, "%u:%u%c", &u, &g, &end) == 2) {
		*uid = u;
		*gid = g;
	} else {
		fatalx("--user %s: no such account; run make accounts, or give UID:GID", spec);
	}
	if (!*uid)
		fatalx("--user %s is root; the broker runs as an account of its own", spec);
}

static void drop_privileges(const char *spec)
{
	uid_t uid;
	gid_t gid;

	parse_user(spec, &uid, &gid);
	if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		fatal("--user %s: cannot become that account", spec);
	if (setuid(0) == 0)
		fatalx("--user %s: root could be regained; refusing to run", spec);
}

static struct receipts *open_receipts(const char *state_dir)
{
	char path[4096];
	struct receipts *r;

	if (mkdir(state_dir, 0700) && errno != EEXIST)
		log_warn("paths.state %s: cannot create it", state_dir);
	if (path_fmt(path, sizeof(path), "%s/%s", state_dir, RECEIPTS_DB_NAME)) {
		log_warnx("paths.state %s is too long; calls go on without receipts", state_dir);
		return NULL;
	}
	r = receipts_open(path, true);
	if (!r)
		log_warn("%s cannot be opened; calls go on without receipts", path);
	return r;
}

static void arm(struct io_uring *ring, struct ev *e)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	switch (e->type) {
	case EV_ACCEPT:
	case EV_REG_ACCEPT:
	case EV_INTERCEPT_ACCEPT:
		io_uring_prep_accept(sqe, e->fd, NULL, NULL, SOCK_CLOEXEC);
		break;
	case EV_REG_RECV:
		io_uring_prep_recv(sqe, e->fd, e->buf, sizeof(e->buf), 0);
		break;
	case EV_SIGNAL:
		io_uring_prep_read(sqe, e->fd, &e->si, sizeof(e->si), 0);
		break;
	}
	io_uring_sqe_set_data(sqe, e);
}

/* A failed accept: out of descriptors or memory, the listener waits 100 ms,
 * said once until an accept succeeds again; anything else is said and the
 * accept armed again. */
static void accept_failed(struct io_uring *ring, struct ev *e, int res)
{
	struct io_uring_sqe *sqe;

	if (res == -EINTR || res == -ECONNABORTED) {
		arm(ring, e);
		return;
	}
	if (res != -EMFILE && res != -ENFILE && res != -ENOBUFS && res != -ENOMEM) {
		blog_warnx("accept: %s", strerror(-res));
		arm(ring, e);
		return;
	}
	if (!e->starved)
		blog_warnx("accept: %s; accepting again every 100 ms until one succeeds",
			   strerror(-res));
	e->starved = true;
	e->waiting = true;
	e->ts = (struct __kernel_timespec){.tv_nsec = 100 * 1000 * 1000};
	sqe = io_uring_get_sqe(ring);
	io_uring_prep_timeout(sqe, &e->ts, 0, 0);
	io_uring_sqe_set_data(sqe, e);
}

/* Only root and the broker's own account may talk to the registry. */
static bool registry_peer_ok(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) &&
	       (cred.uid == 0 || cred.uid == geteuid());
}

/* A provider's key from the agent: kept for its route, and the connection
 * it came on is where a reread is asked. */
static void registry_key(struct broker *b, int fd, const struct broker_msg *m, char *reply,
			 size_t len)
{
	for (size_t i = 0; i < b->n_routes; i++) {
		if (strcmp(b->routes[i].p->name, m->provider))
			continue;
		if (route_key_set(&b->routes[i], m->key, m->key_len)) {
			snprintf(reply, len, "error out of memory");
			return;
		}
		route_keeper_set(fd);
		snprintf(reply, len, "ok");
		return;
	}
	snprintf(reply, len, "error unknown provider %s", m->provider);
}

/* One message: answered, and the client kept (true) or dropped. */
static bool registry_message(struct broker *b, struct ev *e, int n)
{
	static struct broker_msg m; /* one loop; a key is large for a stack */
	char reply[256];

	if (n <= 0)
		return false;
	if ((size_t)n > BROKER_MSG_MAX || broker_msg_parse(e->buf, (size_t)n, &m) ||
	    m.type == BROKER_MSG_REREAD) {
		snprintf(reply, sizeof(reply), "error invalid message");
		blog_warnx("registry: an invalid message; the client is dropped");
		send(e->fd, reply, strlen(reply), MSG_NOSIGNAL);
		explicit_bzero(&m, sizeof(m));
		explicit_bzero(e->buf, sizeof(e->buf));
		return false;
	}
	if (m.type == BROKER_MSG_KEY)
		registry_key(b, e->fd, &m, reply, sizeof(reply));
	else if (m.type == BROKER_MSG_SECRET)
		intercept_secret_add(&m, reply, sizeof(reply));
	else
		sessions_handle(&m, reply, sizeof(reply));
	explicit_bzero(&m, sizeof(m));
	explicit_bzero(e->buf, sizeof(e->buf));
	return send(e->fd, reply, strlen(reply), MSG_NOSIGNAL) > 0;
}

static void serve(struct broker *b, int tcp, int icpt, int reg, int sig)
{
	struct ev ev_icpt = {.type = EV_INTERCEPT_ACCEPT, .fd = icpt},
		  ev_tcp = {.type = EV_ACCEPT, .fd = tcp},
		  ev_reg = {.type = EV_REG_ACCEPT, .fd = reg},
		  ev_sig = {.type = EV_SIGNAL, .fd = sig};
	struct io_uring ring;
	int rc;

	if ((rc = io_uring_queue_init(64, &ring, 0)))
		fatalx("io_uring: %s; errand-broker needs io_uring (kernel 5.19 or later, "
		       "kernel.io_uring_disabled 0)",
		       strerror(-rc));
	arm(&ring, &ev_tcp);
	if (icpt >= 0)
		arm(&ring, &ev_icpt);
	arm(&ring, &ev_reg);
	arm(&ring, &ev_sig);
	for (;;) {
		struct io_uring_cqe *cqe;
		struct ev *e;
		int res;

		io_uring_submit(&ring);
		rc = io_uring_wait_cqe(&ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc)
			fatalx("io_uring: %s", strerror(-rc));
		e = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		if (e->waiting) { /* its wait is over */
			e->waiting = false;
			arm(&ring, e);
			continue;
		}
		if (res < 0 && (e->type == EV_ACCEPT || e->type == EV_INTERCEPT_ACCEPT ||
				e->type == EV_REG_ACCEPT)) {
			accept_failed(&ring, e, res);
			continue;
		}
		e->starved = false;
		switch (e->type) {
		case EV_ACCEPT:
			relay_start(b, res);
			arm(&ring, e);
			break;
		case EV_INTERCEPT_ACCEPT:
			intercept_start(res);
			arm(&ring, e);
			break;
		case EV_REG_ACCEPT:
			if (res >= 0 && registry_peer_ok(res)) {
				struct ev *c = calloc(1, sizeof(*c));

				if (c) {
					c->type = EV_REG_RECV;
					c->fd = res;
					arm(&ring, c);
				} else {
					close(res);
				}
			} else if (res >= 0) {
				blog_warnx(
					"registry: a client that is neither root nor the broker; "
					"dropped");
				close(res);
			}
			arm(&ring, e);
			break;
		case EV_REG_RECV:
			if (registry_message(b, e, res)) {
				arm(&ring, e);
			} else {
				route_keeper_forget(e->fd);
				close(e->fd);
				free(e);
			}
			break;
		case EV_SIGNAL:
			blog_info("signal %u: stopping", e->si.ssi_signo);
			io_uring_queue_exit(&ring);
			return;
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {{"config", required_argument, NULL, 'c'},
						  {"listen", required_argument, NULL, 'l'},
						  {"user", required_argument, NULL, 'u'},
						  {"registry", required_argument, NULL, 'r'},
						  {"session-lock", required_argument, NULL, 's'},
						  {"intercept", required_argument, NULL, 'i'},
						  {"ca", required_argument, NULL, 'a'},
						  {"verbose", no_argument, NULL, 'v'},
						  {"quiet", no_argument, NULL, 'q'},
						  {NULL, 0, NULL, 0}};
	struct opts o = {.config = CONFIG_DEFAULT_PATH, .listen = "0.0.0.0:4780"};
	static struct errand_config cfg;
	struct broker b = {0};
	struct receipts *receipts;
	char err[CONFIG_ERRLEN];
	bool explicit_config = false;
	int opt, tcp, icpt = -1, reg, sig;
	struct rlimit rl;
	sigset_t mask;

	while ((opt = getopt_long(argc, argv, "c:l:u:r:s:i:a:vq", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			o.config = optarg;
			explicit_config = true;
			break;
		case 'l':
			o.listen = optarg;
			break;
		case 'u':
			o.user = optarg;
			break;
		case 'r':
			o.registry = optarg;
			break;
		case 's':
			o.session_lock = optarg;
			break;
		case 'i':
			o.intercept = optarg;
			break;
		case 'a':
			o.ca_dir = optarg;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'q':
			o.quiet = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || !o.intercept != !o.ca_dir || (o.verbose && o.quiet))
		usage();
	log_init("errand-broker", o.verbose);
	blog_quiet(o.quiet);
	/* one write a line: lines come from many threads, one at a time (blog.c) */
	setvbuf(stderr, NULL, _IOLBF, 0);
	/* Up to the hard limit: a relayed call holds two descriptors, and an
	 * embedded errandctl hands the broker its caller's soft limit (1024
	 * most often), under the connections the broker takes. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (config_load(o.config, explicit_config, &cfg, err, sizeof(err)))
		fatalx("%s", err);
	if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
		fatalx("c-ares cannot start");
	b.cfg = &cfg;
	b.env.cfg = &cfg;
	b.routes = calloc(cfg.n_providers + 1, sizeof(*b.routes));
	if (!b.routes)
		fatalx("out of memory");
	for (size_t i = 0; i < cfg.n_providers; i++, b.n_routes++)
		if (route_init(&b.routes[i], &cfg.providers[i], err, sizeof(err)))
			fatalx("%s", err);

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL); /* threads inherit it: only the loop reads them */
	signal(SIGPIPE, SIG_IGN);
	sig = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sig < 0)
		fatal("signalfd");
	tcp = listen_tcp(o.listen);
	if (o.intercept) {
		/* as root: the CA's key is written where only root reads it, and
		 * kept in memory only once the broker is its own account */
		if (intercept_init(&cfg, &b.env, o.ca_dir, err, sizeof(err)))
			fatalx("%s", err);
		icpt = listen_tcp(o.intercept);
	}
	reg = listen_registry(cfg.run_dir, o.registry);
	if (o.session_lock)
		watch_session(o.session_lock);
	receipts = open_receipts(cfg.state_dir);
	if (o.user)
		drop_privileges(o.user);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	printf("ready %s\n", o.listen);
	fflush(stdout);
	if (journal_start(receipts))
		fatalx("the receipt writer cannot start");
	serve(&b, tcp, icpt, reg, sig);
	journal_stop();
	receipts_close(receipts);
	return 0;
}
