/* One session from start to teardown, for the daemon and the embedded agent
 * alike: every object is made in order, enforcement verified before the
 * command runs, and on any failure or at the end everything is removed
 * again. The launcher, not the agent, is the session's supervisor: it holds
 * the session's lock and writes its exit status, so a session outlives its
 * agent and a restarted agent adopts it from state.db and the pins.
 * Leftovers of sessions whose launcher is gone are swept, by errand's own
 * names only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <jansson.h>

#include "agent/cgroup.h"
#include "agent/confine.h"
#include "agent/disk.h"
#include "agent/dns.h"
#include "agent/enforce.h"
#include "agent/events.h"
#include "agent/doctor.h"
#include "agent/grant.h"
#include "agent/loop.h"
#include "agent/nat.h"
#include "agent/netlink.h"
#include "agent/netns.h"
#include "agent/observe.h"
#include "agent/outscrub.h"
#include "agent/request.h"
#include "agent/rules.h"
#include "agent/secrets.h"
#include "agent/session.h"
#include "agent/state.h"
#include "agent/stdio.h"
#include "agent/workers.h"
#include "broker/registry.h"
#include "lib/await.h"
#include "lib/escape.h"
#include "lib/idmap.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

#define BPF_FS_MAGIC_NUM 0xcafe4a11
#define BPF_FS_ROOT "/sys/fs/bpf"
#define VETH_SESS_PREFIX "es"

/* errand-agent's stream of all its sessions' events (session_observe_shared);
 * NULL: each session serves its own. */
static struct observe_server *observe_shared;

struct session {
	struct errand_config
		config; /* the session's own: the agent's config as it was, and the request */
	const struct errand_config *cfg; /* &config */
	bool have_config;
	char *config_text;   /* what config was parsed from, kept in the record */
	char *said;	     /* the start's statements, for the launcher (--say); lines */
	json_t *request;     /* the run request */
	json_t *gaps;	     /* what this host did not enforce when it started */
	const char *project; /* in request */
	bool embedded;	     /* an errandctl run's own agent: events go to its stderr */
	bool net_prepared;   /* it took a network prepared ahead (sandbox.pool) */
	bool record_ahead;   /* its record directory and files were made with it */
	bool json;	     /* events as JSON lines */
	const struct session_caller *caller; /* session_caller_set */
	void *caller_arg;
	bool status_watched; /* status_rd is on the loop, for the caller */
	struct state *st;    /* state.db; NULL when it cannot be opened */
	char id[SESSION_ID_LEN + 1];
	char cgroup_mount[PATH_MAX];
	char cgroup_path[PATH_MAX];
	char netns_path[PATH_MAX];
	char pin_dir[PATH_MAX];
	char record_dir[PATH_MAX];
	char lock_path[PATH_MAX];
	int lock_fd;
	bool have_cgroup, have_netns, have_veth, have_nat;
	struct session_link link;
	struct enforce *enf;
	struct rules *rules; /* sandbox.rules' BPF LSM programs; NULL: none needed (or a gap) */
	struct dns_responder *dns;
	struct observe_server *obs;
	struct event_limiter *limiter;
	/* see session_suppressed; event_seen: the last drain handed one on */
	uint64_t suppressed_check_ns, suppressed_log_ns, suppressed_until_ns;
	bool event_seen;
	struct disk_watch disk;
	struct addr *self; /* the agent namespace's own addresses */
	size_t n_self;
	bool addrs_held;			   /* holds addrs_watch, which follows them */
	struct session *addrs_next, **addrs_pprev; /* in addrs_watch */
	uint64_t addrs_gen;  /* addrs_watch.n_seen when it took hold, before its listing */
	int held[DNS_SOCKS]; /* DNS sockets taken back from the launcher, for the responder */
	enum egress_mode mode;
	struct grant_set grants;
	struct suggest_limiter suggest;
	int grants_wd; /* the record directory's watch (grants.json written by errandctl grant) */
	struct session *grants_next, **grants_pprev; /* in grants_watch */
	pid_t pid;				     /* the launcher */
	int pidfd;
	/* The status pipe's read end, for errandctl run (session_caller_set);
	 * its write end is the session's PID 1's (errand-launch --status-fd). */
	int status_rd;
	bool child; /* this process started the launcher (and reaps it) */
	/* A prepared network's launcher, started ahead and waiting on await_fd
	 * for its session (await_spawn); 0 and -1: none. */
	pid_t await_pid;
	int await_fd, await_pidfd;
	bool stopped;
	int status; /* once ended */
	char exit_path[PATH_MAX];
	struct loop *loop; /* serving the session: session_attach */
	session_ended_fn ended;
	void *ended_arg;
	struct pollfd *pfd; /* the observer's, then the responder's, as they last asked */
	size_t n_pfd, n_obs_pfd, cap_pfd;
	uint64_t dyn_due_ns; /* when they need to run without an event (0: never) */
	bool dyn_ready, pid_ready, events_ready;
	char err[CONFIG_ERRLEN]; /* why it could not start: see session_fail */
	pid_t broker_pid;	 /* the session's own errand-broker; 0: none */
	int broker_pidfd;	 /* its pidfd, what signals it; -1: none */
	char **broker_env;	 /* its stand-ins and base URLs, NAME=VALUE */
	char **secret_env;	 /* its secrets' placeholders, NAME=VALUE (never a value) */
	char broker_sock[PATH_MAX];
	int broker_keeper;   /* the registry connection the broker asks rereads on; -1: none */
	struct outscrub out; /* the relay its stdout and stderr go through, with secrets */
};

/* The one error of a session that cannot start: set where the call failed,
 * naming what failed and what to change. The first one set is kept (callers
 * up the chain add nothing that would hide the cause); it is logged once and
 * handed to the client whole, by the embedded agent and the daemon alike.
 * Returns rc. */
static int session_fail(struct session *s, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int session_fail(struct session *s, int rc, const char *fmt, ...)
{
	va_list ap;

	if (s->err[0])
		return rc;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	log_warnx("%s", s->err);
	return rc;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/* bpffs is not mounted at boot on every host; errand mounts it where the
 * kernel expects it when nothing is there. */
int session_bpffs_ensure(const char *bpf_dir)
{
	struct statfs st;

	if (strncmp(bpf_dir, BPF_FS_ROOT "/", strlen(BPF_FS_ROOT) + 1) == 0 &&
	    (statfs(BPF_FS_ROOT, &st) || st.f_type != BPF_FS_MAGIC_NUM)) {
		if (mount("bpf", BPF_FS_ROOT, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700"))
			return -errno;
	}
	return mkdir_p(bpf_dir, 0700);
}

/* The daemon starts sessions and sweeps in threads at once: a sweep never
 * looks at a lock file between its creation and its flock, when it would
 * take the new session for a leftover (or hold the lock itself for that
 * moment, refusing the session). */
static pthread_mutex_t sweep_lock = PTHREAD_MUTEX_INITIALIZER;

static int lock_held(const char *run_dir, const char *id)
{
	char path[PATH_MAX];
	int fd, held;

	snprintf(path, sizeof(path), "%s/sessions/%s.lock", run_dir, id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	held = flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

static int keep_live(const char *id, void *arg)
{
	const struct errand_config *cfg = arg;

	return lock_held(cfg->run_dir, id);
}

/* Whether id names a session of this errand. Veths and NAT tables are named
 * by the id alone, in a namespace another errand (with paths.run and
 * paths.state of its own, as test worlds have) may share, and that errand's
 * live sessions hold their locks under its paths.run, not ours. A session
 * of ours has its lock file here (made before any of its objects, removed
 * after the last), or what a crash or an older errand left of it under our
 * paths: its netns file, its pins or its record. */
static bool session_ours(const struct errand_config *cfg, const char *id)
{
	char path[4][PATH_MAX];

	snprintf(path[0], sizeof(path[0]), "%s/sessions/%s.lock", cfg->run_dir, id);
	snprintf(path[1], sizeof(path[1]), "%s/netns/%s", cfg->run_dir, id);
	snprintf(path[2], sizeof(path[2]), "%s/%s", cfg->bpf_dir, id);
	snprintf(path[3], sizeof(path[3]), "%s/sessions/%s", cfg->state_dir, id);
	for (size_t i = 0; i < 4; i++)
		if (!access(path[i], F_OK))
			return true;
	return false;
}

/* For the namespace's objects: another errand's are never ours to remove. */
static int keep_net(const char *id, void *arg)
{
	const struct errand_config *cfg = arg;

	return !session_ours(cfg, id) || keep_live(id, arg);
}

static int sweep_dir(const char *dir, const char *suffix, const struct errand_config *cfg,
		     int (*remove_fn)(const char *path))
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char id[NAME_MAX + 1], path[PATH_MAX];
		size_t len = strlen(de->d_name), slen = strlen(suffix);

		if (de->d_name[0] == '.' || len <= slen || strcmp(de->d_name + len - slen, suffix))
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(len - slen), de->d_name);
		if (keep_live(id, (void *)cfg))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!remove_fn(path))
			n++;
	}
	closedir(d);
	return n;
}

static int unlink_path(const char *path)
{
	return unlink(path) && errno != ENOENT ? -errno : 0;
}

/* An exit status waits for whoever still waits on the session (errandctl
 * run across an agent restart) for a while, then goes. */
#define EXIT_KEEP_S 600

static int unlink_stale(const char *path)
{
	struct stat st;

	if (stat(path, &st) || time(NULL) - st.st_mtime < EXIT_KEEP_S)
		return -EAGAIN;
	return unlink_path(path);
}

int session_sweep(const struct errand_config *cfg)
{
	char dir[PATH_MAX], mnt[PATH_MAX];
	int n = 0, rc;
	bool net_left;

	pthread_mutex_lock(&sweep_lock);
	rc = veth_sweep(VETH_HOST_PREFIX, keep_net, (void *)cfg);
	n += rc > 0 ? rc : 0;
	net_left = rc < 0;
	rc = nat_sweep(keep_net, (void *)cfg);
	n += rc > 0 ? rc : 0;
	net_left |= rc < 0;
	snprintf(dir, sizeof(dir), "%s/netns", cfg->run_dir);
	rc = netns_sweep(dir, keep_live, (void *)cfg);
	n += rc > 0 ? rc : 0;
	if (!cgroup2_mount(mnt, sizeof(mnt))) {
		char parent[PATH_MAX];

		/* under systemd also what sessions left before they lived in its scope */
		if (cgroup_systemd(mnt) &&
		    !cgroup_sessions_parent(mnt, cfg->cgroup_name, false, parent, sizeof(parent))) {
			rc = cgroup_sweep(mnt, parent, keep_live, (void *)cfg);
			n += rc > 0 ? rc : 0;
		}
		rc = cgroup_sweep(mnt, cfg->cgroup_name, keep_live, (void *)cfg);
		n += rc > 0 ? rc : 0;
	}
	n += sweep_dir(cfg->bpf_dir, "", cfg, enforce_unpin);
	snprintf(dir, sizeof(dir), "%s/sessions", cfg->state_dir);
	n += sweep_dir(dir, "", cfg, confine_remove_tree);
	/* Lock files of dead sessions go last, once nothing of theirs is left:
	 * while a veth or a table of theirs is (its removal failed), the lock
	 * file is what names it ours at the next sweep. */
	snprintf(dir, sizeof(dir), "%s/sessions", cfg->run_dir);
	sweep_dir(dir, ".events", cfg, unlink_path);
	sweep_dir(dir, ".exit", cfg, unlink_stale);
	sweep_dir(dir, ".broker", cfg, unlink_path);
	if (!net_left)
		sweep_dir(dir, ".lock", cfg, unlink_path);
	pthread_mutex_unlock(&sweep_lock);
	if (n)
		log_info("swept %d object(s) left by sessions that did not end cleanly", n);
	return n;
}

static int session_new_id(struct session *s)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return -errno;
	snprintf(s->id, sizeof(s->id), "%08x", r);
	return 0;
}

/* Takes the session's lock before any object of it exists, so a sweep
 * running in another errand never takes a live session for a leftover. The
 * file is made locked and then linked into place, so no process (another
 * errand's sweep among them) ever finds it there unlocked; where the file
 * system cannot make a file without a name, it is made and locked under
 * sweep_lock, which keeps this process's own sweeps away. On failure the
 * path is forgotten: a lock file of that name is another session's. */
static int session_lock(struct session *s)
{
	char dir[PATH_MAX], fd_path[64];
	int rc = 0;

	snprintf(s->lock_path, sizeof(s->lock_path), "%s/sessions/%s.lock", s->cfg->run_dir, s->id);
	snprintf(dir, sizeof(dir), "%s/sessions", s->cfg->run_dir);
	s->lock_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s->lock_fd >= 0) {
		snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", s->lock_fd);
		if (flock(s->lock_fd, LOCK_EX | LOCK_NB) ||
		    linkat(AT_FDCWD, fd_path, AT_FDCWD, s->lock_path, AT_SYMLINK_FOLLOW))
			rc = -errno;
	} else if (errno == EOPNOTSUPP || errno == EISDIR) {
		pthread_mutex_lock(&sweep_lock);
		s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB))
			rc = -errno;
		pthread_mutex_unlock(&sweep_lock);
	} else {
		rc = -errno;
	}
	if (rc) {
		if (s->lock_fd >= 0)
			close(s->lock_fd);
		s->lock_fd = -1;
		s->lock_path[0] = '\0';
	}
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* A /30 from the pool whose gateway no link here uses. The pool lock is held
 * until the veth carries the address, so two errands never pick the same. */
static int pool_pick(struct session *s, int *lock_fd)
{
	const struct cidr *pool = &s->cfg->pool;
	cleanup_free struct addr *all = NULL;
	cleanup_free uint32_t *used = NULL;
	char path[PATH_MAX];
	uint32_t base, blocks, n_used = 0, pick = 0;
	int plen = pool->prefixlen - 96, n;

	snprintf(path, sizeof(path), "%s/pool.lock", s->cfg->run_dir);
	*lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX))
		return -errno;
	base = ntohl(addr_v4(&pool->a)) & (plen ? ~0u << (32 - plen) : 0);
	blocks = plen >= 30 ? 1 : 1u << (30 - plen);
	/* One listing, not one a block: with a thousand sessions there are a
	 * thousand gateways here. The blocks whose gateway a link uses, in
	 * order; the first one missing is free. */
	n = netlink_self_addrs(&all);
	if (n < 0)
		return n;
	used = calloc((size_t)n + 1, sizeof(*used));
	if (!used)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		uint32_t off;

		if (!addr_is_v4(&all[i]))
			continue;
		off = ntohl(addr_v4(&all[i])) - base;
		if (off < 4 * blocks && off % 4 == 1)
			used[n_used++] = off / 4;
	}
	qsort(used, n_used, sizeof(*used), cmp_u32);
	for (uint32_t i = 0; i < n_used && used[i] <= pick; i++)
		if (used[i] == pick)
			pick++;
	if (pick >= blocks)
		return -EADDRNOTAVAIL;
	s->link.gw4 = htonl(base + 4 * pick + 1);
	s->link.sess4 = htonl(base + 4 * pick + 2);
	s->link.prefixlen = 30;
	return 0;
}

static int lo_up(void *arg)
{
	struct ifreq ifr = {};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	(void)arg;
	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr))
			rc = -errno;
	} else {
		rc = -errno;
	}
	close(fd);
	return rc;
}

static int session_network(struct session *s)
{
	cleanup_close int pool_fd = -1;
	char a[ADDR_STRLEN];
	int rc;

	if (s->mode == EGRESS_MODE_NONE) {
		rc = netns_run(s->netns_path, lo_up, NULL);
		if (rc)
			session_fail(s, rc, "session %s: cannot bring up lo: %s", s->id,
				     strerror(-rc));
		return rc;
	}
	rc = pool_pick(s, &pool_fd);
	if (rc) {
		struct addr pa = s->cfg->pool.a;

		return session_fail(s, rc,
				    "session %s: no free address in sandbox.addressPool %s/%d: %s; "
				    "widen the pool or stop sessions",
				    s->id, addr_str(&pa, a), s->cfg->pool.prefixlen - 96,
				    strerror(-rc));
	}
	snprintf(s->link.host_if, sizeof(s->link.host_if), VETH_HOST_PREFIX "%s", s->id);
	snprintf(s->link.sess_if, sizeof(s->link.sess_if), VETH_SESS_PREFIX "%s", s->id);
	/* IPv6 for the session's DNS, where this kernel has IPv6 at all, and a
	 * route out (NAT66) where this namespace has one. */
	if (access("/proc/sys/net/ipv6/conf/all", F_OK) == 0) {
		session_link_v6(&s->link, &s->cfg->pool6);
		s->link.route6 = netlink_v6_route_out() == 1;
	}
	rc = veth_setup(&s->link, s->netns_path);
	if (rc) {
		return session_fail(s, rc, "session %s: cannot set up veth %s: %s", s->id,
				    s->link.host_if, strerror(-rc));
	}
	s->have_veth = true;
	rc = nat_pool(&s->cfg->pool);
	if (rc) {
		return session_fail(s, rc,
				    "session %s: cannot add the address pool's nftables table "
				    "(" NAT_POOL_PREFIX "...): %s",
				    s->id, strerror(-rc));
	}
	if (s->link.route6 && (rc = nat_pool6(&s->cfg->pool6)))
		return session_fail(s, rc,
				    "session %s: cannot add the IPv6 address pool's nftables table "
				    "(ip6 " NAT_POOL_PREFIX "...): %s",
				    s->id, strerror(-rc));
	return 0;
}

/* Pinned names become allow entries for every host rule that names them:
 * the operator vouched for the address, so they are programmed at start and
 * stay for the session's life. */
static int session_pins(struct session *s, const struct addr *self, size_t n_self)
{
	const struct errand_config *cfg = s->cfg;

	for (size_t i = 0; i < cfg->n_pins; i++) {
		const struct pin *p = &cfg->pins[i];
		char a[ADDR_STRLEN];
		bool used = false;

		for (size_t j = 0; j < n_self; j++) {
			if (!memcmp(&self[j], &p->addr, sizeof(p->addr))) {
				return session_fail(
					s, -EPERM,
					"pin %s=%s names one of this host's own addresses; errand "
					"never lets a session reach the host: remove the pin",
					p->name, addr_str(&p->addr, a));
			}
		}
		if (s->mode == EGRESS_MODE_NONE)
			continue;
		for (size_t j = 0; j < cfg->n_allow; j++) {
			const struct host_rule *r = &cfg->allow[j];
			int rc;

			if (!host_rule_match(r, p->name) || (p->port && p->port != r->port))
				continue;
			rc = enforce_allow(s->enf, &p->addr, r->port, 0,
					   ENTRY_F_PINNED |
						   (config_intercepted_host(cfg, p->name, r->port)
							    ? ENTRY_F_RELAY
							    : 0));
			if (rc) {
				return session_fail(s, rc, "session %s: cannot program pin %s: %s",
						    s->id, p->name, strerror(-rc));
			}
			used = true;
		}
		if (!used)
			log_warnx("pin %s names no allowed host; add --egress %s to reach it",
				  p->name, p->name);
	}
	return 0;
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		return -EIO;
	return 0;
}

static int write_json(const char *path, const json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);
	int rc;

	if (!text)
		return -ENOMEM;
	rc = write_file(path, text, 0600);
	free(text);
	return rc;
}

static const char *mode_name(enum egress_mode m)
{
	return m == EGRESS_MODE_NONE ? "none" : m == EGRESS_MODE_OPEN ? "open" : "restricted";
}

/* The session's resolv.conf: its gateway, where its DNS responder is. */
static int record_resolv(struct session *s)
{
	char a[ADDR_STRLEN], path[PATH_MAX], line[64];
	struct addr gw;
	int rc = path_fmt(path, sizeof(path), "%s/resolv.conf", s->record_dir);

	addr_from_v4(&gw, s->link.gw4);
	snprintf(line, sizeof(line), "nameserver %s\n", addr_str(&gw, a));
	return rc ? rc : write_file(path, line, 0644);
}

/* The record directory says exactly what the session was given. It is 0711
 * so the launcher, already in the session's user namespace, can reach the
 * resolv.conf it binds; the policy itself stays 0600. */
static int session_record(struct session *s)
{
	const struct errand_config *cfg = s->cfg;
	json_t *root = json_object(), *allow = json_array(), *pins = json_array();
	json_t *ports = json_array();
	char a[ADDR_STRLEN], path[PATH_MAX], buf[HOST_NAME_MAX_LEN + 16];
	char *text;
	int rc;

	for (size_t i = 0; i < cfg->n_allow; i++)
		json_array_append_new(allow,
				      json_string(host_rule_str(&cfg->allow[i], buf, sizeof(buf))));
	for (size_t i = 0; i < cfg->n_pins; i++)
		json_array_append_new(pins, json_pack("{s:s,s:s,s:i}", "name", cfg->pins[i].name,
						      "addr", addr_str(&cfg->pins[i].addr, a),
						      "port", cfg->pins[i].port));
	for (size_t i = 0; i < cfg->n_egress_ports; i++)
		json_array_append_new(ports, json_integer(cfg->egress_ports[i]));
	json_object_set_new(root, "session", json_string(s->id));
	json_object_set_new(root, "mode", json_string(mode_name(s->mode)));
	json_object_set_new(root, "allow", allow);
	json_object_set_new(root, "pins", pins);
	json_object_set_new(root, "egressPorts", ports);
	json_object_set_new(root, "cgroup", json_string(s->cgroup_path));
	json_object_set_new(root, "netns", json_string(s->netns_path));
	json_object_set_new(root, "bpf", json_string(s->pin_dir));
	json_object_set_new(root, "gaps", s->gaps ? json_incref(s->gaps) : json_array());
	if (s->have_veth) {
		struct addr x;

		addr_from_v4(&x, s->link.sess4);
		json_object_set_new(root, "address", json_string(addr_str(&x, a)));
		addr_from_v4(&x, s->link.gw4);
		json_object_set_new(root, "gateway", json_string(addr_str(&x, a)));
		json_object_set_new(root, "hostInterface", json_string(s->link.host_if));
	}
	if (s->have_veth && s->link.v6) {
		struct addr x;

		memcpy(x.b, s->link.sess6, 16);
		json_object_set_new(root, "address6", json_string(addr_str(&x, a)));
		memcpy(x.b, s->link.gw6, 16);
		json_object_set_new(root, "gateway6", json_string(addr_str(&x, a)));
		/* false: the pair carries the session's DNS alone */
		json_object_set_new(root, "route6", json_boolean(s->link.route6));
	}
	text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	rc = s->record_ahead ? 0 : mkdir_p(s->record_dir, 0711);
	if (!rc) {
		rc = path_fmt(path, sizeof(path), "%s/policy.json", s->record_dir);
		if (!rc)
			rc = write_file(path, text, 0600);
	}
	free(text);
	if (!rc && !(rc = path_fmt(path, sizeof(path), "%s/config.json", s->record_dir)))
		rc = write_file(path, s->config_text ? s->config_text : "{}", 0600);
	if (!rc && !(rc = path_fmt(path, sizeof(path), "%s/request.json", s->record_dir)))
		rc = write_json(path, s->request);
	if (!rc && s->have_veth && !s->record_ahead)
		rc = record_resolv(s);
	return rc;
}

/* A prepared network's record directory, made with it: the directory, its
 * resolv.conf whole and the files a start fills in, empty. Their inodes
 * were a third of the agent's part of a pooled start (0.45 of 1.35 ms,
 * uprobes, on ext4); a start now only writes into them. */
static int session_record_ahead(struct session *n)
{
	static const char *const names[] = {"policy.json", "config.json", "request.json"};
	char path[PATH_MAX];
	int rc = mkdir_p(n->record_dir, 0711);

	for (size_t i = 0; !rc && i < sizeof(names) / sizeof(names[0]); i++) {
		int fd;

		if ((rc = path_fmt(path, sizeof(path), "%s/%s", n->record_dir, names[i])))
			break;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			rc = -errno;
		else
			close(fd);
	}
	if (!rc && n->have_veth)
		rc = record_resolv(n);
	/* Its state directory, the session's own, which the launcher finds
	 * made (a directory fewer on the start's path). */
	if (!rc && !(rc = path_fmt(path, sizeof(path), "%s/work", n->record_dir)) &&
	    (mkdir(path, 0700) || chown(path, n->cfg->uid, n->cfg->gid)))
		rc = -errno;
	if (rc)
		return session_fail(n, rc, "cannot make its record under %s: %s", n->record_dir,
				    strerror(-rc));
	n->record_ahead = true;
	return 0;
}

/* The owner, in the policy column of state.db: an agent adopts a session
 * only when the process that ran it is gone. */
static json_t *owner_json(const struct session *s)
{
	uint64_t start = 0;

	state_pid_start(getpid(), &start);
	return json_pack("{s:s,s:i,s:I}", "owner", s->embedded ? "errandctl" : "agent", "ownerPid",
			 (int)getpid(), "ownerStart", (json_int_t)start);
}

static void session_state_add(struct session *s)
{
	char a[ADDR_STRLEN], g[ADDR_STRLEN], *command, *policy;
	json_t *owner = owner_json(s);
	struct state_session row = {};
	struct addr x;

	if (!s->st)
		return;
	command = json_dumps(json_object_get(s->request, "argv"), JSON_COMPACT);
	policy = owner ? json_dumps(owner, JSON_COMPACT) : NULL;
	json_decref(owner);
	row.id = s->id;
	row.command = command ? command : "[]";
	row.mode = mode_name(s->mode);
	row.policy = policy;
	row.cgroup = s->cgroup_path;
	row.netns = s->netns_path;
	row.bpf = s->pin_dir;
	if (s->have_veth) {
		row.host_if = s->link.host_if;
		addr_from_v4(&x, s->link.sess4);
		row.address = addr_str(&x, a);
		addr_from_v4(&x, s->link.gw4);
		row.gateway = addr_str(&x, g);
	}
	row.launcher_pid = s->pid;
	state_pid_start(s->pid, &row.launcher_start);
	if (state_session_add(s->st, &row))
		log_warnx("session %s: cannot record it in state.db; a restarted agent will not "
			  "adopt it (it is still enforced, and swept when it ends)",
			  s->id);
	free(command);
	free(policy);
}

/* The session's broker goes with it (it also ends by itself once the
 * session's lock is free, when no agent is there to stop it). Signalled
 * through its pidfd, never by number: a broker already reaped had its pid
 * free for any process, and the kill(pid, 0) that asked whether it still ran
 * came right after a wait that could have reaped it. */
static void broker_stop(struct session *s)
{
	struct pollfd p = {.fd = s->broker_pidfd, .events = POLLIN};

	if (s->broker_pid > 0) {
		syscall(SYS_pidfd_send_signal, s->broker_pidfd, SIGTERM, NULL, 0);
		/* a second to end by itself */
		while (poll(&p, 1, 1000) < 0 && errno == EINTR)
			;
		if (!(p.revents & (POLLIN | POLLHUP)))
			syscall(SYS_pidfd_send_signal, s->broker_pidfd, SIGKILL, NULL, 0);
		/* Ours to reap alone: its pid names it until this returns. */
		waitpid(s->broker_pid, NULL, 0);
		close(s->broker_pidfd);
		s->broker_pidfd = -1;
		s->broker_pid = 0;
	}
	/* an adopted session's broker stops by itself; its socket is ours to remove */
	if (s->broker_sock[0] && (s->cfg->n_providers || config_intercepts(s->cfg)))
		unlink(s->broker_sock);
}

static void addrs_watch_release(struct session *s);
static void await_drop(struct session *s);

static void session_teardown(struct session *s)
{
	int rc;

	await_drop(s);
	disk_watch_stop(&s->disk);
	broker_stop(s);
	dns_responder_free(s->dns);
	s->dns = NULL;
	addrs_watch_release(s);
	if (s->obs != observe_shared)
		observe_server_free(s->obs);
	s->obs = NULL;
	event_limiter_free(s->limiter);
	s->limiter = NULL;
	free(s->self);
	s->self = NULL;
	enforce_free(s->enf);
	s->enf = NULL;
	rules_free(s->rules);
	s->rules = NULL;
	if (s->have_cgroup && (rc = cgroup_session_remove(s->cgroup_path)))
		log_warnx("session %s: cannot remove cgroup %s: %s", s->id, s->cgroup_path,
			  strerror(-rc));
	if ((rc = enforce_unpin(s->pin_dir)))
		log_warnx("session %s: cannot remove pins %s: %s", s->id, s->pin_dir,
			  strerror(-rc));
	if (s->have_nat && (rc = nat_remove(s->id)))
		log_warnx("session %s: cannot remove nftables table: %s", s->id, strerror(-rc));
	if (s->have_veth && (rc = veth_remove(s->link.host_if)))
		log_warnx("session %s: cannot remove veth %s: %s", s->id, s->link.host_if,
			  strerror(-rc));
	if (s->have_netns && (rc = netns_remove(s->netns_path)))
		log_warnx("session %s: cannot remove netns %s: %s", s->id, s->netns_path,
			  strerror(-rc));
	/* The session could write below it: removed without following links. */
	if (s->record_dir[0])
		confine_remove_tree(s->record_dir);
	if (s->lock_path[0])
		unlink(s->lock_path);
	/* Nobody but the embedded agent waits on its session's status. */
	if (s->embedded && s->exit_path[0])
		unlink(s->exit_path);
}

static void grants_watch_rm(int wd);

/* Closes what this process holds; the session's kernel objects stay. */
static void session_release(struct session *s)
{
	await_drop(s);
	grants_watch_rm(s->grants_wd);
	disk_watch_stop(&s->disk);
	free(s->pfd);
	for (int k = 0; k < DNS_SOCKS; k++)
		if (s->held[k] >= 0)
			close(s->held[k]);
	dns_responder_free(s->dns);
	addrs_watch_release(s);
	if (s->obs != observe_shared)
		observe_server_free(s->obs);
	event_limiter_free(s->limiter);
	free(s->self);
	enforce_free(s->enf);
	rules_free(s->rules);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->status_rd >= 0)
		close(s->status_rd);
	if (s->broker_keeper >= 0)
		close(s->broker_keeper);
	if (s->broker_pidfd >= 0)
		close(s->broker_pidfd);
	outscrub_detach(&s->out);
	if (s->have_config)
		config_free(&s->config);
	json_decref(s->request);
	json_decref(s->gaps);
	strv_free(s->broker_env);
	strv_free(s->secret_env);
	free(s->config_text);
	free(s->said);
	free(s);
}

void session_end(struct session *s)
{
	if (!s)
		return;
	if (s->st && s->pid > 0 && state_session_end(s->st, s->id, s->status) == -ENOENT)
		log_debug("session %s: not in state.db", s->id);
	session_teardown(s);
	/* A launcher of ours that no pidfd handler collected (a session the
	 * agent could not follow) is reaped here, once its cgroup is empty;
	 * by its pidfd, so that no other child that took its pid is. */
	if (s->child && s->pidfd >= 0)
		waitid(P_PIDFD, (id_t)s->pidfd, &(siginfo_t){0}, WEXITED | WNOHANG);
	session_release(s);
}

void session_detach(struct session *s)
{
	if (s)
		session_release(s);
}

/* A line of the session's refusals: this process's stderr (embedded,
 * errandctl's own; the agent's log) and the run's caller. */
static void session_say(struct session *s, const char *line)
{
	fprintf(stderr, "%s\n", line);
	if (s->caller)
		s->caller->line(line, s->caller_arg);
}

/* A refused name gets a suggestion naming the exact command, at most once
 * a minute per host and three hosts a minute per session; only single
 * exact names, never a wildcard. */
static void session_suggest(struct session *s, const char *name)
{
	/* said, led by "errand: ", fits a line */
	char line[EVENT_LINE_MAX], said[EVENT_LINE_MAX - sizeof("errand: ") + 1];
	char host[HOST_NAME_MAX_LEN + 8];
	char norm[HOST_NAME_MAX_LEN + 1];
	char word[sizeof(host) + 3];
	uint16_t port = HOST_DEFAULT_PORT;
	json_t *ev;
	char *text;

	/* Only a name errand's own host rules take as it is: the session
	 * chose it, and the operator may paste the command as root. */
	if (!name || !name[0] || !strchr(name, '.') || host_name_normalize(name, norm, NULL, 0) ||
	    strcmp(norm, name))
		return;
	if (!suggest_pass(&s->suggest, name, boottime_ns()))
		return;
	/* A grant opens only egressPorts: 443 when it is one, else the first. */
	if (s->cfg->n_egress_ports)
		port = s->cfg->egress_ports[0];
	for (size_t i = 0; i < s->cfg->n_egress_ports; i++)
		if (s->cfg->egress_ports[i] == HOST_DEFAULT_PORT)
			port = HOST_DEFAULT_PORT;
	if (port == HOST_DEFAULT_PORT)
		snprintf(host, sizeof(host), "%s", name);
	else
		snprintf(host, sizeof(host), "%s:%u", name, port);
	esc_shell(host, word, sizeof(word));
	snprintf(said, sizeof(said),
		 "session %s: %s is not allowed; to allow it: errandctl grant %s %s", s->id, name,
		 s->id, word);
	log_info("%s", said);
	snprintf(line, sizeof(line), "errandctl grant %s %s", s->id, word);
	ev = json_pack("{s:s,s:s,s:s,s:s}", "event", "suggest", "session", s->id, "name", name,
		       "command", line);
	text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	if (text)
		observe_broadcast(s->obs, text);
	/* The caller hears it as an embedded errandctl's stderr has it. */
	if (s->caller && !s->json)
		snprintf(line, sizeof(line), "errand: %s", said);
	if (s->caller && (!s->json || text))
		s->caller->line(s->json ? text : line, s->caller_arg);
	free(text);
	json_decref(ev);
}

/* Every event goes to the live stream; the log and state.db get each target
 * at most once per EVENT_LOG_INTERVAL_NS, so a session cannot flood them. */
static void session_event(const struct event_rec *ev, void *arg)
{
	struct session *s = arg;
	char line[EVENT_LINE_MAX], target[320];

	event_format(ev, true, line, sizeof(line));
	observe_broadcast(s->obs, line);
	if (ev->denied && ev->reason && !strcmp(ev->reason, "not-allowed"))
		session_suggest(s, ev->name);
	event_target(ev, target, sizeof(target));
	if (s->limiter && !event_limiter_pass(s->limiter, target, boottime_ns()))
		return;
	if (s->st) {
		struct state_denied d = {.session = s->id, .reason = ev->reason};

		if (ev->denied) {
			d.name = ev->name;
			d.proto = "dns";
		} else {
			d.addr = ev->addr;
			d.port = (uint16_t)ev->port;
			d.proto = ev->proto;
		}
		state_denied_queue(s->st, &d);
	}
	if (!s->json)
		event_format(ev, false, line, sizeof(line));
	session_say(s, line);
}

/* A connection spent a once grant: the grant is used, and answers no more.
 * Its entries stay until they expire: the kernel already refuses every other
 * connection through them, and the spending connection's own SYN may still
 * be on its way to the backstop, which needs them. */
static void session_grant_used(struct session *s, const struct egress_event *bev)
{
	struct grant_set used;
	char a[ADDR_STRLEN];
	uint32_t id = 0;
	struct addr x;
	int rc;

	memcpy(x.b, bev->addr, 16);
	if (enforce_entry_grant(s->enf, &x, bev->port, &id) || !id)
		return;
	/* Written to the file, then taken from it as any change of it is: a
	 * revoke or a replace made meanwhile leaves the kernel too, which a set
	 * copied from the file straight into s->grants skipped. */
	rc = grants_mark_used(s->record_dir, id, &used);
	if (!rc)
		session_grants_reload(s);
	if (rc && rc != -ENOENT)
		log_warnx("session %s: cannot mark grant %u used: %s", s->id, id, strerror(-rc));
	log_info("session %s: a once grant was used by a connection to %s:%u", s->id,
		 addr_str(&x, a), bev->port);
}

/* What the kernel's event bucket held back: a count a second to the live
 * stream, and to the log at most once per EVENT_LOG_INTERVAL_NS. The bucket
 * holds back a refusal only within an event's interval (1/EGRESS_EVENT_RATE
 * s) of one it let through, which the agent drains: the count is read
 * while events came within SUPPRESSED_WATCH_NS, and once after, so that an
 * idle session never wakes the agent for it (a thousand did, a thousand
 * times a second). At the end (all), it is read whatever came. */
#define SUPPRESSED_WATCH_NS 1500000000ull
static void session_suppressed(struct session *s, bool all)
{
	struct event_rec ev = {.suppressed = true, .session = s->id};
	uint64_t now = boottime_ns();
	char line[EVENT_LINE_MAX];

	if (s->event_seen) {
		s->event_seen = false;
		s->suppressed_until_ns = now + SUPPRESSED_WATCH_NS;
	}
	if (!all && (now - s->suppressed_check_ns < 1000000000ull ||
		     s->suppressed_check_ns >= s->suppressed_until_ns))
		return;
	s->suppressed_check_ns = now;
	if (enforce_events_suppressed(s->enf, s->pin_dir, &ev.total, &ev.count) || !ev.count)
		return;
	event_format(&ev, true, line, sizeof(line));
	observe_broadcast(s->obs, line);
	if (s->suppressed_log_ns && now - s->suppressed_log_ns < EVENT_LOG_INTERVAL_NS)
		return;
	s->suppressed_log_ns = now;
	if (!s->json)
		event_format(&ev, false, line, sizeof(line));
	session_say(s, line);
}

static void print_event(const struct egress_event *bev, void *arg)
{
	struct session *s = arg;
	struct event_rec ev;

	s->event_seen = true;
	if (bev->reason == EVENT_GRANT_USED) {
		session_grant_used(s, bev);
		return;
	}
	event_from_bpf(bev, s->id, &ev);
	session_event(&ev, s);
}

/* grants.json changed (errandctl grant or revoke): the new set answers the
 * next query; entries of grants revoked or ended go at once (a spent once
 * grant's stay: see session_grant_used). */
int session_grants_reload(struct session *s)
{
	struct grant_set gs;
	int64_t now = time(NULL);
	int rc = grants_load(s->record_dir, &gs);

	if (rc) {
		log_warnx("session %s: cannot read %s/" GRANTS_FILE ": %s; its grants stay as they "
			  "were",
			  s->id, s->record_dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < s->grants.n; i++) {
		const struct grant *old = &s->grants.v[i];
		bool kept = false;

		for (size_t j = 0; j < gs.n; j++)
			kept |= gs.v[j].id == old->id &&
				(grant_live(&gs.v[j], now) || gs.v[j].kind == GRANT_ONCE);
		if (!kept && s->enf)
			enforce_drop_grant(s->enf, old->id);
	}
	if (s->enf)
		enforce_grants_set(s->enf, &gs);
	s->grants = gs;
	if (s->dns)
		dns_responder_set_grants(s->dns, &s->grants);
	return 0;
}

/* A program installed next to this one. */
static int sibling_path(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n < 0)
		return -errno;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if (path_fmt(out, len, "%s/%s", self, name))
		return -ENAMETOOLONG;
	return access(out, X_OK) ? -errno : 0;
}

#define LAUNCH_ARGS_MAX 1024
/* Addresses the shared watch keeps for sessions not attached yet. */
#define ADDRS_SEEN 256

/* The user namespaces the agent lends its launchers for the project's
 * idmap (errand-launch --project-userns): one per owner and session account
 * seen, made once. A launcher made its own at every start, a child process
 * created and reaped: a millisecond of a start. Nothing runs in one; it
 * only maps ids. */
#define USERNS_KEPT 16
static struct userns_kept {
	uid_t disk, host;
	gid_t disk_gid, host_gid;
	int fd;
} userns_kept[USERNS_KEPT];
static size_t userns_n, userns_next;
static pthread_mutex_t userns_lock = PTHREAD_MUTEX_INITIALIZER;

/* A copy of the kept namespace mapping disk:disk_gid to host:host_gid, made
 * when none is kept yet; the caller closes it. -errno on failure. */
static int userns_lend(uid_t disk, gid_t disk_gid, uid_t host, gid_t host_gid)
{
	struct userns_kept *k = NULL;
	int fd;

	pthread_mutex_lock(&userns_lock);
	for (size_t i = 0; i < userns_n && !k; i++)
		if (userns_kept[i].disk == disk && userns_kept[i].disk_gid == disk_gid &&
		    userns_kept[i].host == host && userns_kept[i].host_gid == host_gid)
			k = &userns_kept[i];
	if (!k) {
		fd = idmap_userns(disk, disk_gid, host, host_gid);
		if (fd < 0) {
			pthread_mutex_unlock(&userns_lock);
			return fd;
		}
		if (userns_n < USERNS_KEPT) {
			k = &userns_kept[userns_n++];
		} else {
			k = &userns_kept[userns_next];
			userns_next = (userns_next + 1) % USERNS_KEPT;
			close(k->fd);
		}
		*k = (struct userns_kept){disk, host, disk_gid, host_gid, fd};
	}
	fd = fcntl(k->fd, F_DUPFD_CLOEXEC, 3);
	pthread_mutex_unlock(&userns_lock);
	return fd < 0 ? -errno : fd;
}

/* What the launcher's child needs, read before it execs. */
struct launch_child {
	const int *stdio;
	const sigset_t *mask;
	int lock_fd;
	int userns_fd;
	int await_fd;  /* errand-launch --await's socket; -1: none */
	int status_fd; /* the status pipe's write end; -1: none */
	int held[DNS_SOCKS];
	bool setsid;
	const char *launcher;
	const char **args;
};

/* The launcher's child: it shares the agent's memory until its exec
 * (spawn_fn), so system calls only, no malloc, nothing written but its own
 * stack. */
static int launch_child(void *arg)
{
	const struct launch_child *lc = arg;
	sigset_t none;
	char msg[PATH_MAX + 64];
	int rc;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, lc->mask ? lc->mask : &none, NULL);
	for (int fd = 0; lc->stdio && fd < 3; fd++)
		if (lc->stdio[fd] != fd && dup2(lc->stdio[fd], fd) < 0)
			return 125;
	/* The launcher holds the session's lock from here on: while it
	 * lives, no sweep takes the session for a leftover, whatever
	 * becomes of this agent. */
	if (fcntl(lc->lock_fd, F_SETFD, 0) < 0)
		return 125;
	for (int k = 0; k < DNS_SOCKS; k++)
		if (lc->held[k] >= 0 && fcntl(lc->held[k], F_SETFD, 0) < 0)
			return 125;
	if (lc->userns_fd >= 0 && fcntl(lc->userns_fd, F_SETFD, 0) < 0)
		return 125;
	if (lc->await_fd >= 0 && fcntl(lc->await_fd, F_SETFD, 0) < 0)
		return 125;
	if (lc->status_fd >= 0 && fcntl(lc->status_fd, F_SETFD, 0) < 0)
		return 125;
	/* The daemon's sessions are not in its process group: a signal
	 * meant for the agent never reaches them. */
	if (lc->setsid)
		setsid();
	execv(lc->launcher, (char *const *)lc->args);
	/* strerrordesc_np: no locale, no malloc */
	rc = snprintf(msg, sizeof(msg), "errand: cannot run %s: %s\n", lc->launcher,
		      strerrordesc_np(errno));
	if (rc > 0 && write(2, msg, strnlen(msg, sizeof(msg))) < 0)
		rc = -errno; /* nowhere left to say it */
	return 125;
}

/* A prepared network gets its launcher ahead (errand-launch --await, in
 * its cgroup, holding its lock like any launcher), so a start hands it the
 * command line instead of waiting for its exec and loader: a millisecond of
 * every start on this kind of host. One that cannot be started is no
 * error: the session starts its own. */
static void await_spawn(struct session *n)
{
	char launcher[PATH_MAX], fdarg[16], uid[16], gid[16];
	/* What its PID 1, made ahead, needs before the session is known. */
	const char *args[] = {launcher, "--await", fdarg,   "--netns", n->netns_path,
			      "--uid",	uid,	   "--gid", gid,       NULL};
	struct launch_child lc = {.lock_fd = n->lock_fd,
				  .userns_fd = -1,
				  .status_fd = -1,
				  .held = {-1, -1, -1, -1},
				  .setsid = true,
				  .launcher = launcher,
				  .args = args};
	int sv[2], stdio[3];
	pid_t pid;

	if (sibling_path("errand-launch", launcher, sizeof(launcher)) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	/* what it says before it has a session goes to the agent's log */
	stdio[0] = stdio[1] = open("/dev/null", O_RDWR | O_CLOEXEC);
	stdio[2] = 2;
	if (stdio[0] < 0) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	snprintf(uid, sizeof(uid), "%u", (unsigned)n->cfg->uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)n->cfg->gid);
	lc.stdio = stdio;
	lc.await_fd = sv[1];
	pid = cgroup_spawn_into(n->cgroup_path, launch_child, &lc);
	close(sv[1]);
	close(stdio[0]);
	if (pid > 0 && (n->await_pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	if (pid < 0) {
		close(sv[0]);
		return;
	}
	fcntl(n->await_pidfd, F_SETFD, FD_CLOEXEC);
	n->await_pid = pid;
	n->await_fd = sv[0];
}

/* The launcher started ahead, never handed a session, ends here. */
static void await_drop(struct session *s)
{
	if (s->await_pid <= 0)
		return;
	close(s->await_fd);
	kill(s->await_pid, SIGKILL);
	waitpid(s->await_pid, NULL, 0);
	close(s->await_pidfd);
	s->await_pid = 0;
	s->await_fd = s->await_pidfd = -1;
}

/* Hands the launcher started ahead its command line and the descriptors it
 * names: what launch_child gives a launcher it starts. */
static int await_hand(struct session *s, const char **args, const int *stdio, const int *held,
		      int userns_fd, int status_fd)
{
	int fds[AWAIT_FDS_MAX], target[AWAIT_FDS_MAX], nice, rc;
	size_t n = 0;

	for (int fd = 0; fd < 3; fd++) {
		fds[n] = stdio ? stdio[fd] : fd;
		target[n++] = fd;
	}
	for (int k = 0; k < DNS_SOCKS; k++) {
		if (held[k] >= 0) {
			fds[n] = held[k];
			target[n++] = held[k];
		}
	}
	if (userns_fd >= 0) {
		fds[n] = userns_fd;
		target[n++] = userns_fd;
	}
	if (status_fd >= 0) {
		fds[n] = status_fd;
		target[n++] = status_fd;
	}
	/* this thread runs at the priority the agent starts sessions at */
	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno)
		nice = 0;
	rc = await_send(s->await_fd, args, fds, target, n, nice);
	if (rc)
		return rc;
	close(s->await_fd);
	s->pid = s->await_pid;
	s->pidfd = s->await_pidfd;
	s->child = true;
	s->await_pid = 0;
	s->await_fd = s->await_pidfd = -1;
	return 0;
}

static int session_spawn(struct session *s, const int *stdio, const sigset_t *mask)
{
	char launcher[PATH_MAX], uid[16], gid[16], sessenv[64], resolv[PATH_MAX], state[PATH_MAX];
	char bundle[PATH_MAX], userns[48], statusfd[16], fdarg[16], cgroups[PATH_MAX];
	char hold[DNS_SOCKS][16];
	const char *await_args[] = {launcher, "--await", fdarg, NULL}, *slash;
	struct launch_child lc;
	int sv[2];
	cleanup_close int userns_fd = -1;
	cleanup_close int status_rd = -1;
	cleanup_close int status_wr = -1;
	struct stat st;
	int held[DNS_SOCKS] = {-1, -1, -1, -1};
	cleanup_free const char **args = calloc(LAUNCH_ARGS_MAX, sizeof(*args));
	cleanup_free char *rules_store = NULL;
	const json_t *argv = json_object_get(s->request, "argv"), *it;
	size_t n = 0, i;
	pid_t pid;
	int rc;

	if (!args)
		return -ENOMEM;
	rc = sibling_path("errand-launch", launcher, sizeof(launcher));
	if (rc) {
		return session_fail(
			s, rc,
			"cannot find errand-launch next to this program (%s): %s; reinstall errand",
			launcher, strerror(-rc));
	}
	if (path_fmt(state, sizeof(state), "%s/work", s->record_dir))
		return -ENAMETOOLONG;
	snprintf(uid, sizeof(uid), "%u", (unsigned)s->cfg->uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)s->cfg->gid);
	snprintf(sessenv, sizeof(sessenv), "ERRAND_SESSION=%s", s->id);
	args[n++] = launcher;
	args[n++] = "--session";
	args[n++] = s->id;
	args[n++] = "--cgroup";
	args[n++] = s->cgroup_path;
	args[n++] = "--netns";
	args[n++] = s->netns_path;
	args[n++] = "--uid";
	args[n++] = uid;
	args[n++] = "--gid";
	args[n++] = gid;
	args[n++] = "--status-file";
	args[n++] = s->exit_path;
	/* errandctl run waits on the pipe's read end for the status, which the
	 * session's PID 1 writes once the session's processes are gone, ahead
	 * of its end and the launcher's. None for errandctl's own runs. */
	if (!s->embedded) {
		int p[2];

		if (pipe2(p, O_CLOEXEC) < 0)
			return session_fail(s, -errno,
					    "session %s: cannot make its status pipe: %s", s->id,
					    strerror(errno));
		status_rd = p[0];
		status_wr = p[1];
		snprintf(statusfd, sizeof(statusfd), "%d", status_wr);
		args[n++] = "--status-fd";
		args[n++] = statusfd;
	}
	/* The launcher outlives this agent and holds a copy of the DNS sockets:
	 * while they stay bound to the gateway's port 53, the session's DNS
	 * (which the hooks send there) reaches no other socket of the host,
	 * not even a resolver on 0.0.0.0:53 (a bound address wins over a
	 * wildcard); with no agent it gets no answer. A restarted agent takes
	 * them back (session_adopt). */
	if (s->dns)
		dns_responder_fds(s->dns, held);
	for (int k = 0; k < DNS_SOCKS; k++) {
		if (held[k] < 0)
			continue;
		snprintf(hold[k], sizeof(hold[k]), "%d", held[k]);
		args[n++] = "--hold-fd";
		args[n++] = hold[k];
	}
	if (s->have_veth) {
		if (path_fmt(resolv, sizeof(resolv), "%s/resolv.conf", s->record_dir))
			return -ENAMETOOLONG;
		args[n++] = "--resolv";
		args[n++] = resolv;
	}
	/* The launcher checks the owner again on what it copies, and makes its
	 * own namespace when it differs (or when none is lent: errandctl's own
	 * runs, where nothing would keep it for a next start). */
	if (!s->embedded && s->project && stat(s->project, &st) == 0 &&
	    (st.st_uid != s->cfg->uid || st.st_gid != s->cfg->gid) &&
	    (userns_fd = userns_lend(st.st_uid, st.st_gid, s->cfg->uid, s->cfg->gid)) >= 0) {
		snprintf(userns, sizeof(userns), "%d:%u:%u", userns_fd, (unsigned)st.st_uid,
			 (unsigned)st.st_gid);
		args[n++] = "--project-userns";
		args[n++] = userns;
	}
	if (config_intercepts(s->cfg) && s->mode != EGRESS_MODE_NONE) {
		if (path_fmt(bundle, sizeof(bundle), "%s/ca-bundle.pem", s->record_dir))
			return -ENAMETOOLONG;
		args[n++] = "--ca-bundle";
		args[n++] = bundle;
	}
	for (char *l = s->said, *nl; l; l = nl) {
		if ((nl = strchr(l, '\n')))
			*nl++ = '\0';
		if (!*l)
			continue;
		if (n + 2 >= LAUNCH_ARGS_MAX - 4)
			return session_fail(
				s, -E2BIG,
				"session %s: what its start states does not fit on the "
				"launcher's command line; set fewer names in sandbox.env",
				s->id);
		args[n++] = "--say";
		args[n++] = l;
	}
	/* Confinement first: the session's own --env come after and win. */
	rc = confine_launch_args(s->cfg, s->project, state, args, &n, LAUNCH_ARGS_MAX - 6,
				 &rules_store);
	if (rc) {
		return session_fail(
			s, rc,
			"session %s: the confinement options do not fit on the launcher's command "
			"line; shorten sandbox.policyExtra or sandbox.env",
			s->id);
	}
	/* The sessions' cgroups, errand's own too: under a grant of /sys, a
	 * session reads no other session's */
	slash = strrchr(s->cgroup_path, '/');
	if (slash && slash > s->cgroup_path && (size_t)(slash - s->cgroup_path) < sizeof(cgroups)) {
		memcpy(cgroups, s->cgroup_path, (size_t)(slash - s->cgroup_path));
		cgroups[slash - s->cgroup_path] = '\0';
		args[n++] = "--hide";
		args[n++] = cgroups;
	}
	args[n++] = "--env";
	args[n++] = sessenv;
	for (char **e = s->broker_env; e && *e; e++) {
		if (n + 2 >= LAUNCH_ARGS_MAX - 2)
			return -E2BIG;
		args[n++] = "--env";
		args[n++] = *e;
	}
	for (char **e = s->secret_env; e && *e; e++) {
		if (n + 2 >= LAUNCH_ARGS_MAX - 2)
			return -E2BIG;
		args[n++] = "--env";
		args[n++] = *e;
	}
	json_array_foreach(json_object_get(s->request, "env"), i, it)
	{
		if (n + 2 >= LAUNCH_ARGS_MAX - 2)
			return -E2BIG;
		args[n++] = "--env";
		args[n++] = json_string_value(it);
	}
	args[n++] = "--";
	json_array_foreach(argv, i, it)
	{
		if (n >= LAUNCH_ARGS_MAX - 1) {
			return session_fail(
				s, -E2BIG, "too many arguments for the command (at most %d in all)",
				LAUNCH_ARGS_MAX);
		}
		args[n++] = json_string_value(it);
	}
	args[n] = NULL;
	if (s->await_pid > 0) {
		rc = await_hand(s, args, stdio, held, userns_fd, status_wr);
		if (rc == 0) {
			s->status_rd = status_rd;
			status_rd = -1;
			return 0;
		}
		log_warnx("session %s: the launcher started ahead cannot take it (%s); starting "
			  "another",
			  s->id, strerror(-rc));
		await_drop(s);
	}
	/* The command line goes over a socket, as to a launcher started ahead,
	 * never in the launcher's argv: its --env values are the caller's, and
	 * /proc/PID/cmdline shows argv to every user of the host. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		return session_fail(s, rc, "session %s: cannot start its launcher: %s", s->id,
				    strerror(-rc));
	}
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	/* the descriptors go with the command line (await_hand) */
	lc = (struct launch_child){.stdio = stdio,
				   .mask = mask,
				   .lock_fd = s->lock_fd,
				   .userns_fd = -1,
				   .await_fd = sv[1],
				   .status_fd = -1,
				   .held = {-1, -1, -1, -1},
				   .setsid = !s->embedded,
				   .launcher = launcher,
				   .args = await_args};
	pid = cgroup_spawn_into(s->cgroup_path, launch_child, &lc);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return pid;
	}
	s->await_pid = pid;
	s->await_fd = sv[0];
	s->await_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	rc = s->await_pidfd < 0 ? -errno : 0;
	if (!rc) {
		fcntl(s->await_pidfd, F_SETFD, FD_CLOEXEC);
		rc = await_hand(s, args, stdio, held, userns_fd, status_wr);
	}
	if (rc) {
		session_fail(s, rc, "session %s: cannot hand its launcher the session: %s", s->id,
			     strerror(-rc));
		await_drop(s);
		return rc;
	}
	s->status_rd = status_rd;
	status_rd = -1;
	return 0;
}

/* Past its disk budget, a session is stopped, and told why. */
static void session_kill(struct session *s)
{
	char path[PATH_MAX];
	int fd;

	fd = path_fmt(path, sizeof(path), "%s/cgroup.kill", s->cgroup_path)
		     ? -1
		     : open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		/* the launcher's PID 1 dies with it, and so the rest */
		if (s->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
	}
	if (fd >= 0)
		close(fd);
	/* stopped means every process of it: its output relay's too */
	outscrub_stop(&s->out);
	s->stopped = true;
}

void session_stop(struct session *s)
{
	log_info("session %s stopped by errandctl stop", s->id);
	session_kill(s);
}

/* An address the agent's namespace gained after the session started is
 * refused at once, in the kernel and in DNS answers, like those it had. An
 * address it lost stays refused: it was the host's, and may come back. */
/* Another session's link address: refused by its range, not followed. The
 * session's own gateway is followed, so a connect to it is refused as the
 * host's own (reason "self"), as the operator would call it. */
static bool self_ignored(const struct session *s, const struct addr *a)
{
	struct addr gw;

	if (!session_link_addr(a, &s->cfg->pool, &s->cfg->pool6))
		return false;
	addr_from_v4(&gw, s->link.gw4);
	if (s->link.gw4 && !memcmp(a, &gw, sizeof(gw)))
		return false;
	return !(s->link.v6 && !memcmp(a->b, s->link.gw6, 16));
}

/* This namespace's own addresses but the other sessions' link addresses. */
static int self_addrs(const struct session *s, struct addr **out)
{
	int n = netlink_self_addrs(out), k = 0;

	for (int i = 0; i < n; i++)
		if (!self_ignored(s, &(*out)[i]))
			(*out)[k++] = (*out)[i];
	return n < 0 ? n : k;
}

/* Refuses the addresses of got (n) that are this host's and new to the
 * session, from now on, in its maps and its DNS answers. */
static void session_self_learn(struct session *s, const struct addr *got, size_t n)
{
	struct addr *fresh, *v;
	size_t n_fresh = 0;

	fresh = calloc(n ? n : 1, sizeof(*fresh));
	if (!fresh) {
		log_warnx("session %s: out of memory following this host's addresses", s->id);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		bool known = self_ignored(s, &got[i]);

		for (size_t j = 0; j < s->n_self && !known; j++)
			known = !memcmp(&s->self[j], &got[i], sizeof(got[i]));
		for (size_t j = 0; j < n_fresh && !known; j++)
			known = !memcmp(&fresh[j], &got[i], sizeof(got[i]));
		if (!known)
			fresh[n_fresh++] = got[i];
	}
	/* The responder holds s->self: a moved array is handed to it below. */
	v = n_fresh ? realloc(s->self, (s->n_self + n_fresh) * sizeof(*v)) : NULL;
	if (!v) {
		if (n_fresh)
			log_warnx("session %s: out of memory following this host's addresses",
				  s->id);
		free(fresh);
		return;
	}
	s->self = v;
	for (size_t i = 0; i < n_fresh; i++) {
		char a[ADDR_STRLEN];
		int rc = enforce_self_add(s->enf, &fresh[i]);

		if (rc)
			log_warnx("session %s: cannot refuse %s, a new address of this host: %s",
				  s->id, addr_str(&fresh[i], a), strerror(-rc));
		else
			log_info("session %s: %s is a new address of this host; refused from now "
				 "on",
				 s->id, addr_str(&fresh[i], a));
		s->self[s->n_self++] = fresh[i];
	}
	free(fresh);
	if (n_fresh && s->dns)
		dns_responder_set_self(s->dns, s->self, s->n_self);
}

/* Lists them all again: at start, and when the watch lost messages. */
static void session_self_sync(struct session *s)
{
	struct addr *now = NULL;
	int n = self_addrs(s, &now);

	if (n < 0) {
		log_warnx("session %s: cannot list this namespace's own addresses: %s", s->id,
			  strerror(-n));
		return;
	}
	session_self_learn(s, now, (size_t)n);
	free(now);
}

/* The sessions' lists (grants_watch, addrs_watch) are doubly linked
 * through a next pointer and the address of what points at the session:
 * a session leaves in constant time, not by a walk of a thousand. */
static void list_push(struct session **head, struct session *s, struct session **next,
		      struct session ***pprev)
{
	size_t off = (size_t)((char *)pprev - (char *)s);

	*next = *head;
	if (*head)
		*(struct session ***)((char *)*head + off) = next;
	*head = s;
	*pprev = head;
}

static void list_unlink(struct session *next, struct session ***pprev, size_t off)
{
	if (!*pprev)
		return; /* never attached */
	**pprev = next;
	if (next)
		*(struct session ***)((char *)next + off) = *pprev;
	*pprev = NULL;
}

/* What the agent serves while the session runs: the event stream, the DNS
 * responder on the session's gateway, and the watch on its grants. */
/* One inotify instance for every session's record directory: each instance
 * counts against a per-user limit (fs.inotify.max_user_instances, 128 by
 * default), which a session each would hit at the 129th session; watches
 * count against a far larger one. Sessions are found by their watch. */
static struct {
	pthread_mutex_t lock;
	int fd;
	struct loop *loop; /* the fd is registered there while sessions are */
	struct session *sessions;
} grants_watch = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static int grants_watch_add(const char *dir)
{
	int wd;

	pthread_mutex_lock(&grants_watch.lock);
	if (grants_watch.fd < 0)
		grants_watch.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	wd = grants_watch.fd < 0
		     ? -errno
		     : inotify_add_watch(grants_watch.fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO);
	if (wd < 0 && grants_watch.fd >= 0)
		wd = -errno;
	pthread_mutex_unlock(&grants_watch.lock);
	return wd;
}

static void grants_watch_rm(int wd)
{
	pthread_mutex_lock(&grants_watch.lock);
	if (wd >= 0 && grants_watch.fd >= 0)
		inotify_rm_watch(grants_watch.fd, wd);
	pthread_mutex_unlock(&grants_watch.lock);
}

static void session_on_grants(void *arg, int fd, uint32_t events)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	(void)arg;
	(void)events;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			/* A start writes several files there; only one is the grants. */
			if (ev->len && strcmp(ev->name, GRANTS_FILE))
				continue;
			for (struct session *s = grants_watch.sessions; s; s = s->grants_next)
				if (s->grants_wd == ev->wd)
					session_grants_reload(s);
		}
	}
}

/* On the loop's thread, as the loop's handlers. */
static int grants_watch_attach(struct session *s, struct loop *l)
{
	if (grants_watch.loop && grants_watch.loop != l)
		return -EINVAL;
	if (!grants_watch.loop) {
		int rc = loop_add(l, grants_watch.fd, EPOLLIN, session_on_grants, NULL);

		if (rc)
			return rc;
		grants_watch.loop = l;
	}
	list_push(&grants_watch.sessions, s, &s->grants_next, &s->grants_pprev);
	return 0;
}

static void grants_watch_detach(struct session *s)
{
	list_unlink(s->grants_next, &s->grants_pprev, offsetof(struct session, grants_pprev));
	if (!grants_watch.sessions && grants_watch.loop) {
		loop_del(grants_watch.loop, grants_watch.fd);
		grants_watch.loop = NULL;
	}
}

/* One address watch for every session, as for grants: a watch a session
 * woke every session's socket at each address change of the host (a
 * session's veth makes three, and as many at its end), a thousand recvmsg
 * for one. Made by the first session that needs it (in its start's job),
 * kept while any holds it, served on the loop by one handler. */
static struct {
	pthread_mutex_t lock;
	struct netlink_watch *w;
	unsigned refs;
	struct loop *loop; /* its fd is registered there while sessions are attached */
	struct session *sessions;
	/* What it brought lately, for a session between its hold (and its
	 * listing after) and its attach, whom the handler does not serve yet:
	 * seen[i % ADDRS_SEEN] for i below n_seen; relisted: n_seen just
	 * after messages were last lost (a step that holds no address). */
	struct addr seen[ADDRS_SEEN];
	uint64_t n_seen, relisted;
	/* The last listing of this namespace's addresses, made while the
	 * watch lived (NULL once it ends), and n_seen before it: a start takes
	 * it and catches up from there, as from a listing of its own, while
	 * fewer than ADDRS_SEEN / 2 have come since (a listing walks every
	 * address here: 2 ms of a start with a thousand sessions). */
	struct addr *listed;
	int n_listed;
	uint64_t listed_gen;
} addrs_watch = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void sessions_on_addrs(void *arg, int fd, uint32_t events);
static void session_self_learn(struct session *s, const struct addr *got, size_t n);
static void session_self_sync(struct session *s);

static int addrs_watch_hold(struct session *s)
{
	int rc = 0;

	pthread_mutex_lock(&addrs_watch.lock);
	if (!addrs_watch.w && !(addrs_watch.w = netlink_addr_watch_new()))
		rc = -errno;
	if (!rc)
		addrs_watch.refs++;
	s->addrs_gen = addrs_watch.n_seen;
	pthread_mutex_unlock(&addrs_watch.lock);
	s->addrs_held = !rc;
	return rc;
}

/* After addrs_watch_detach: the last holder frees it. */
static void addrs_watch_release(struct session *s)
{
	if (!s->addrs_held)
		return;
	s->addrs_held = false;
	pthread_mutex_lock(&addrs_watch.lock);
	if (--addrs_watch.refs == 0 && !addrs_watch.loop) {
		netlink_addr_watch_free(addrs_watch.w);
		addrs_watch.w = NULL;
		free(addrs_watch.listed);
		addrs_watch.listed = NULL;
	}
	pthread_mutex_unlock(&addrs_watch.lock);
}

/* Every address of this namespace, for a session holding the watch: the
 * watch's last listing when it is recent enough (the session then catches up
 * from that listing's point), else a listing of its own, which becomes the
 * last. Sessions adopted at an agent's start share one listing: the loop has
 * not run yet, so nothing came after it. */
static int addrs_listed(struct session *s, struct addr **out)
{
	struct addr *all = NULL, *keep;
	uint64_t gen;
	int n = 0;

	if (!s->addrs_held)
		return netlink_self_addrs(out);
	pthread_mutex_lock(&addrs_watch.lock);
	gen = addrs_watch.n_seen;
	if (addrs_watch.listed && addrs_watch.relisted <= addrs_watch.listed_gen &&
	    gen - addrs_watch.listed_gen <= ADDRS_SEEN / 2 &&
	    (all = malloc(((size_t)addrs_watch.n_listed + 1) * sizeof(*all)))) {
		n = addrs_watch.n_listed;
		memcpy(all, addrs_watch.listed, (size_t)n * sizeof(*all));
		s->addrs_gen = addrs_watch.listed_gen;
	}
	pthread_mutex_unlock(&addrs_watch.lock);
	if (!all) {
		n = netlink_self_addrs(&all);
		if (n < 0)
			return n;
		keep = malloc(((size_t)n + 1) * sizeof(*keep));
		pthread_mutex_lock(&addrs_watch.lock);
		if (keep && addrs_watch.w) {
			memcpy(keep, all, (size_t)n * sizeof(*keep));
			free(addrs_watch.listed);
			addrs_watch.listed = keep;
			addrs_watch.n_listed = n;
			addrs_watch.listed_gen = gen;
			keep = NULL;
		}
		pthread_mutex_unlock(&addrs_watch.lock);
		free(keep);
	}
	*out = all;
	return n;
}

/* The addresses of all (n) that are the session's to refuse, kept in place. */
static int self_filter(const struct session *s, struct addr *all, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		if (!self_ignored(s, &all[i]))
			all[k++] = all[i];
	return k;
}

/* self_addrs for a start holding the watch, from addrs_listed. */
static int self_addrs_start(struct session *s, struct addr **out)
{
	int n = addrs_listed(s, out);

	return n < 0 ? n : self_filter(s, *out, n);
}

/* What the watch brought since the session took hold of it (its listing
 * came after), which the handler gave only to the sessions attached then;
 * all listed again when more came than are kept, or messages were lost. */
static void addrs_watch_catch_up(struct session *s)
{
	struct addr got[ADDRS_SEEN];
	size_t n = 0;
	bool relist;

	pthread_mutex_lock(&addrs_watch.lock);
	relist = addrs_watch.n_seen - s->addrs_gen > ADDRS_SEEN ||
		 addrs_watch.relisted > s->addrs_gen;
	for (uint64_t i = s->addrs_gen; !relist && i < addrs_watch.n_seen; i++)
		got[n++] = addrs_watch.seen[i % ADDRS_SEEN];
	pthread_mutex_unlock(&addrs_watch.lock);
	if (relist)
		session_self_sync(s);
	else if (n)
		session_self_learn(s, got, n);
}

/* On the loop's thread, as the loop's handlers. */
static int addrs_watch_attach(struct session *s, struct loop *l)
{
	if (addrs_watch.loop && addrs_watch.loop != l)
		return -EINVAL;
	if (!addrs_watch.loop) {
		int rc = loop_add(l, netlink_addr_watch_fd(addrs_watch.w), EPOLLIN,
				  sessions_on_addrs, NULL);

		if (rc)
			return rc;
		addrs_watch.loop = l;
	}
	list_push(&addrs_watch.sessions, s, &s->addrs_next, &s->addrs_pprev);
	addrs_watch_catch_up(s);
	return 0;
}

static void addrs_watch_detach(struct session *s)
{
	bool last;

	list_unlink(s->addrs_next, &s->addrs_pprev, offsetof(struct session, addrs_pprev));
	if (addrs_watch.sessions || !addrs_watch.loop)
		return;
	loop_del(addrs_watch.loop, netlink_addr_watch_fd(addrs_watch.w));
	pthread_mutex_lock(&addrs_watch.lock);
	addrs_watch.loop = NULL;
	last = addrs_watch.refs == 0;
	if (last) {
		netlink_addr_watch_free(addrs_watch.w);
		addrs_watch.w = NULL;
		free(addrs_watch.listed);
		addrs_watch.listed = NULL;
	}
	pthread_mutex_unlock(&addrs_watch.lock);
}

void session_observe_shared(struct observe_server *obs)
{
	observe_shared = obs;
}

static int session_services(struct session *s)
{
	char path[PATH_MAX], err[512];
	bool listed;
	int rc, n_stale;

	s->limiter = event_limiter_new();
	if (!s->limiter)
		return session_fail(s, -ENOMEM, "session %s: out of memory", s->id);
	if (observe_shared)
		s->obs = observe_shared;
	else if (path_fmt(path, sizeof(path), "%s/sessions/%s.events", s->cfg->run_dir, s->id))
		return session_fail(s, -ENAMETOOLONG,
				    "session %s: its event socket's path is too long; shorten "
				    "paths.run",
				    s->id);
	else
		s->obs = observe_server_new(path);
	if (!s->obs) {
		rc = -errno;
		return session_fail(s, rc, "session %s: cannot serve events on %s: %s", s->id, path,
				    strerror(-rc));
	}
	if ((rc = grants_load(s->record_dir, &s->grants)))
		log_warnx("session %s: cannot read its grants: %s", s->id, strerror(-rc));
	else if (s->enf) {
		enforce_grants_set(s->enf, &s->grants);
		n_stale = enforce_grants_prune(s->enf, &s->grants);
		if (n_stale > 0)
			log_info("session %s: dropped %d grant(s) revoked or replaced while no "
				 "agent served it",
				 s->id, n_stale);
	}
	s->grants_wd = grants_watch_add(s->record_dir);
	if (s->grants_wd < 0) {
		rc = s->grants_wd;
		return session_fail(s, rc, "session %s: cannot watch %s for grants: %s", s->id,
				    s->record_dir, strerror(-rc));
	}
	if (s->mode == EGRESS_MODE_NONE)
		return 0;
	/* A start or an adoption took hold before its listing: what came since
	 * reaches it at its attach, so it lists nothing again. */
	listed = s->addrs_held;
	if (!listed && (rc = addrs_watch_hold(s))) {
		return session_fail(s, rc, "session %s: cannot follow this host's addresses: %s",
				    s->id, strerror(-rc));
	}
	s->dns = dns_responder_new(s->cfg, s->enf, s->link.gw4, s->link.v6 ? s->link.gw6 : NULL,
				   s->held, s->self, s->n_self, s->id, s->link.host_if,
				   s->record_dir, session_event, s, err, sizeof(err));
	for (int k = 0; k < DNS_SOCKS; k++)
		s->held[k] = -1; /* the responder's now */
	if (!s->dns)
		return session_fail(s, -errno, "session %s: %s", s->id, err);
	dns_responder_set_grants(s->dns, &s->grants);
	/* What changed between the first listing and the watch. */
	if (!listed)
		session_self_sync(s);
	return 0;
}

#define BROKER_ACCOUNT "errand-broker"
#define BROKER_READY_MS 5000

/* Waits for the broker's "ready" line. 0 or -errno. */
static int broker_wait_ready(int fd)
{
	char buf[128];
	size_t got = 0;

	while (got < sizeof(buf) - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, BROKER_READY_MS) <= 0)
			return -ETIMEDOUT;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			return -EPIPE;
		got += (size_t)n;
		buf[got] = '\0';
		if (strchr(buf, '\n'))
			return strncmp(buf, "ready ", 6) ? -EPROTO : 0;
	}
	return -EPROTO;
}

static int broker_spawn(struct session *s, const char *listen, const char *intercept)
{
	char bin[PATH_MAX], config[PATH_MAX];
	const char *args[20];
	size_t n = 0;
	int out[2], rc;
	pid_t pid;

	if (!getpwnam(BROKER_ACCOUNT)) {
		return session_fail(s, -ENOENT,
				    "session %s: agent.providers needs the account %s, which "
				    "errand-broker runs as; create it (make accounts)",
				    s->id, BROKER_ACCOUNT);
	}
	if ((rc = sibling_path("errand-broker", bin, sizeof(bin)))) {
		return session_fail(s, rc,
				    "cannot find errand-broker next to this program (%s): %s; "
				    "reinstall errand",
				    bin, strerror(-rc));
	}
	if (path_fmt(config, sizeof(config), "%s/config.json", s->record_dir))
		return -ENAMETOOLONG;
	args[n++] = bin;
	args[n++] = "--config";
	args[n++] = config;
	args[n++] = "--listen";
	args[n++] = listen;
	args[n++] = "--user";
	args[n++] = BROKER_ACCOUNT;
	args[n++] = "--registry";
	args[n++] = s->broker_sock;
	args[n++] = "--session-lock";
	args[n++] = s->lock_path;
	/* The embedded errandctl shares the user's terminal: the broker's
	 * routine lines there only with -v. */
	if (s->embedded && !log_verbose())
		args[n++] = "--quiet";
	else if (log_verbose())
		args[n++] = "--verbose";
	if (config_intercepts(s->cfg)) {
		args[n++] = "--intercept";
		args[n++] = intercept;
		args[n++] = "--ca";
		args[n++] = s->record_dir;
	}
	args[n] = NULL;
	if (pipe2(out, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(out[0]);
		close(out[1]);
		return rc;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (dup2(out[1], STDOUT_FILENO) < 0)
			_exit(125);
		/* not in the agent's process group: it outlives the agent */
		setsid();
		execv(bin, (char *const *)args);
		_exit(125);
	}
	close(out[1]);
	/* Its pidfd before anything else: unreaped, the pid is still its. */
	s->broker_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (s->broker_pidfd < 0) {
		rc = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(out[0]);
		return session_fail(s, rc, "session %s: cannot follow errand-broker: %s", s->id,
				    strerror(-rc));
	}
	s->broker_pid = pid;
	rc = broker_wait_ready(out[0]);
	close(out[0]);
	if (rc)
		session_fail(s, rc,
			     "session %s: errand-broker did not start (%s); its log says why",
			     s->id, strerror(-rc));
	return rc;
}

/* Each secret's value, read as root from paths.secrets, handed to the
 * session's broker once for each of its hosts; then the roots the session
 * trusts (the system's and the broker's CA for it) written for the launcher
 * to bind, and the variables that name them. 0 or -errno with err set. */
static int session_secrets_hand(struct session *s, int fd, char *err, size_t errlen)
{
	const struct errand_config *cfg = s->cfg;
	char *value = malloc(SECRET_VALUE_MAX + 2), path[PATH_MAX];
	int rc = 0;

	err[0] = '\0';
	if (!value)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->n_secrets && !rc; i++) {
		const struct config_secret *sec = &cfg->secrets[i];
		const char *ph = strchr(s->secret_env[i], '=') + 1;
		int len = secret_read(cfg->secrets_dir, sec->name, value, SECRET_VALUE_MAX + 2);

		if (len < 0) {
			snprintf(err, errlen, "secret %s: %s/%s cannot be used (%s)", sec->env,
				 cfg->secrets_dir, sec->name, secret_strerror(len));
			rc = len;
			break;
		}
		for (size_t k = 0; k < sec->n_hosts && !rc; k++) {
			char host[HOST_NAME_MAX_LEN + 16];

			host_rule_str(&sec->hosts[k], host, sizeof(host));
			rc = broker_secret_hand(fd, ph, value, (size_t)len, host);
			if (rc)
				snprintf(err, errlen,
					 "secret %s cannot be handed to the session's broker: %s",
					 sec->env, strerror(-rc));
		}
	}
	explicit_bzero(value, SECRET_VALUE_MAX + 2);
	free(value);
	if (!rc && !(rc = path_fmt(path, sizeof(path), "%s/ca-bundle.pem", s->record_dir)))
		rc = secrets_ca_bundle(s->record_dir, s->cfg->image, path);
	if (rc && !*err)
		snprintf(err, errlen, "the session's CA bundle cannot be written in %.300s: %s",
			 s->record_dir, strerror(-rc));
	if (!rc)
		rc = secrets_ca_env(&s->secret_env);
	return rc;
}

/* The session's own broker, on its gateway: stand-ins minted, registered
 * for the session's address, and handed to the session in its environment
 * with each provider's base URL. The real keys never come near the session. */
static int session_broker(struct session *s)
{
	struct broker_standin *st = NULL;
	char listen[ADDR_STRLEN + 8], icpt[ADDR_STRLEN + 8], gw[ADDR_STRLEN], err[512];
	size_t n = 0, n_env;
	struct addr a;
	int fd, rc;

	addr_from_v4(&a, s->link.gw4);
	addr_str(&a, gw);
	snprintf(listen, sizeof(listen), "%s:%u", gw, BROKER_DEFAULT_PORT);
	snprintf(icpt, sizeof(icpt), "%s:%u", gw, BROKER_INTERCEPT_PORT);
	if ((rc = broker_spawn(s, listen, icpt)))
		return rc;
	if ((rc = broker_standins_mint(s->cfg, &st, &n))) {
		return session_fail(s, rc, "session %s: cannot mint stand-ins: %s", s->id,
				    strerror(-rc));
	}
	addr_from_v4(&a, s->link.sess4);
	fd = broker_connect(s->broker_sock);
	rc = fd < 0 ? fd : broker_keys_hand(fd, s->cfg, true, err, sizeof(err));
	if (rc && fd >= 0) {
		session_fail(s, rc, "session %s: %s", s->id, err);
		close(fd);
		goto out;
	}
	if (!rc)
		rc = broker_register(fd, s->id, &a, st, n);
	if (!rc && config_intercepts(s->cfg) &&
	    (rc = session_secrets_hand(s, fd, err, sizeof(err)))) {
		session_fail(s, rc, "session %s: %s", s->id, err);
		close(fd);
		goto out;
	}
	/* held: a provider's 401 makes the broker ask on it for the key again */
	if (!rc)
		s->broker_keeper = fd;
	else if (fd >= 0)
		close(fd);
	if (!rc)
		rc = broker_session_env(s->cfg, gw, BROKER_DEFAULT_PORT, st, n, &s->broker_env,
					&n_env);
	if (rc)
		session_fail(s, rc, "session %s: cannot register it with its broker: %s", s->id,
			     strerror(-rc));
out:
	explicit_bzero(st, n * sizeof(*st));
	free(st);
	return rc;
}

/* The broker asked for a key again (or went away). */
static void broker_keeper(struct session *s)
{
	if (broker_keeper_serve(s->broker_keeper, s->cfg) < 0) {
		if (s->loop)
			loop_del(s->loop, s->broker_keeper);
		close(s->broker_keeper);
		s->broker_keeper = -1;
	}
}

/* An adopted session's broker runs on: this agent takes over the reread
 * requests, and hands the keys as they are now. */
static void broker_readopt(struct session *s)
{
	char err[512];
	int fd;

	if (s->mode == EGRESS_MODE_NONE || !s->cfg->n_providers)
		return;
	fd = broker_connect(s->broker_sock);
	if (fd < 0) {
		log_warnx("session %s: its broker cannot be reached (%s); it keeps the keys it has",
			  s->id, strerror(-fd));
		return;
	}
	/* no wait: a reread asked meanwhile comes on the same connection */
	if (broker_keys_hand(fd, s->cfg, false, err, sizeof(err)))
		log_warnx("session %s: %s; its broker keeps the key it has", s->id, err);
	s->broker_keeper = fd;
}

static int session_paths(struct session *s)
{
	const struct errand_config *cfg = s->cfg;

	if (path_fmt(s->netns_path, sizeof(s->netns_path), "%s/netns/%s", cfg->run_dir, s->id) ||
	    path_fmt(s->pin_dir, sizeof(s->pin_dir), "%s/%s", cfg->bpf_dir, s->id) ||
	    path_fmt(s->record_dir, sizeof(s->record_dir), "%s/sessions/%s", cfg->state_dir,
		     s->id) ||
	    path_fmt(s->lock_path, sizeof(s->lock_path), "%s/sessions/%s.lock", cfg->run_dir,
		     s->id) ||
	    path_fmt(s->exit_path, sizeof(s->exit_path), "%s/sessions/%s.exit", cfg->run_dir,
		     s->id) ||
	    path_fmt(s->broker_sock, sizeof(s->broker_sock), "%s/sessions/%s.broker", cfg->run_dir,
		     s->id))
		return -ENAMETOOLONG;
	return 0;
}

static void rule_event(const char *json, const char *text, const char *target, void *arg)
{
	struct session *s = arg;

	observe_broadcast(s->obs, json);
	if (s->limiter && !event_limiter_pass(s->limiter, target, boottime_ns()))
		return;
	session_say(s, s->json ? json : text);
}

/* The session's id and lock, before any object of it exists. */
static int session_claim(struct session *s)
{
	const struct errand_config *cfg = s->cfg;
	char dir[PATH_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/sessions", cfg->run_dir);
	if ((rc = mkdir_p(dir, 0700)) || (rc = session_bpffs_ensure(cfg->bpf_dir))) {
		return session_fail(s, rc, "cannot prepare %s and %s: %s", dir, cfg->bpf_dir,
				    strerror(-rc));
	}
	/* ids are 32 random bits: one that is taken is drawn again */
	for (int tries = 0; tries < 4; tries++)
		if ((rc = session_new_id(s)) || (rc = session_lock(s)) != -EEXIST)
			break;
	if (rc) {
		return session_fail(s, rc, "cannot take a session id under %s: %s", dir,
				    strerror(-rc));
	}
	if ((rc = session_paths(s))) {
		return session_fail(s, rc,
				    "session %s: its paths are too long; shorten paths.run, "
				    "paths.state or paths.bpf",
				    s->id);
	}
	return 0;
}

static int session_cgroup(struct session *s)
{
	char parent[PATH_MAX];
	int rc;

	rc = cgroup2_mount(s->cgroup_mount, sizeof(s->cgroup_mount));
	if (rc) {
		return session_fail(s, rc,
				    "no cgroup v2 mount found; mount cgroup2 at /sys/fs/cgroup (or "
				    "/sys/fs/cgroup/unified on a hybrid host)");
	}
	rc = cgroup_sessions_parent(s->cgroup_mount, s->cfg->cgroup_name, true, parent,
				    sizeof(parent));
	if (rc) {
		return session_fail(s, rc,
				    "session %s: systemd did not delegate a cgroup to errand's "
				    "sessions (%s): %s",
				    s->id, CGROUP_SCOPE, strerror(-rc));
	}
	rc = cgroup_session_create(s->cgroup_mount, parent, s->id, s->cgroup_path,
				   sizeof(s->cgroup_path));
	if (rc) {
		return session_fail(s, rc, "session %s: cannot create cgroup %s/%s/%s: %s", s->id,
				    s->cgroup_mount, parent, s->id, strerror(-rc));
	}
	s->have_cgroup = true;
	return 0;
}

static int session_netns(struct session *s)
{
	int rc = netns_create(s->netns_path);

	if (rc) {
		return session_fail(s, rc, "session %s: cannot create network namespace %s: %s",
				    s->id, s->netns_path, strerror(-rc));
	}
	s->have_netns = true;
	return session_network(s);
}

/* A prepared network fits a session made with the same pool, paths and
 * mode (its maps are in the set of its time: enforce_attach checks that); one made under a
 * configuration since changed does not, nor one of the other kind (with or
 * without network). */
static bool session_net_fits(const struct session *s, const struct session *n)
{
	const struct errand_config *a = s->cfg, *b = n->cfg;

	return (s->mode == EGRESS_MODE_NONE) == (n->mode == EGRESS_MODE_NONE) &&
	       !strcmp(a->run_dir, b->run_dir) && !strcmp(a->state_dir, b->state_dir) &&
	       !strcmp(a->bpf_dir, b->bpf_dir) && !strcmp(a->cgroup_name, b->cgroup_name) &&
	       !memcmp(&a->pool6, &b->pool6, sizeof(a->pool6)) &&
	       a->pool.prefixlen == b->pool.prefixlen &&
	       !memcmp(&a->pool.a, &b->pool.a, sizeof(a->pool.a));
}

/* The session takes a prepared network whole: its id and lock, namespace,
 * veth pair, addresses and NAT become the session's, so it is never used
 * twice. One that does not fit is torn down. */
static bool session_net_take(struct session *s, struct session *n)
{
	if (!n)
		return false;
	if (!session_net_fits(s, n)) {
		session_net_discard(n);
		return false;
	}
	memcpy(s->id, n->id, sizeof(s->id));
	s->lock_fd = n->lock_fd;
	n->lock_fd = -1;
	s->await_pid = n->await_pid;
	s->await_fd = n->await_fd;
	s->await_pidfd = n->await_pidfd;
	n->await_pid = 0;
	n->await_fd = n->await_pidfd = -1;
	s->link = n->link;
	s->have_netns = n->have_netns;
	s->have_veth = n->have_veth;
	s->have_nat = n->have_nat;
	memcpy(s->cgroup_mount, n->cgroup_mount, sizeof(s->cgroup_mount));
	memcpy(s->cgroup_path, n->cgroup_path, sizeof(s->cgroup_path));
	s->have_cgroup = n->have_cgroup;
	s->enf = n->enf;
	n->enf = NULL;
	s->net_prepared = true;
	s->record_ahead = n->record_ahead;
	session_release(n);
	/* the paths are the same, of the same id */
	return session_paths(s) == 0;
}

static int session_setup(struct session *s, struct session *net)
{
	const struct errand_config *cfg = s->cfg;
	struct enforce_params ep = {};
	char err[512], hooks_cg[PATH_MAX];
	const char *slash;
	uint64_t cgid;
	int n_self, rc;

	/* errandctl running a session itself sweeps what crashed runs left; the
	 * agent sweeps at its start, on reload and every minute, off the loop,
	 * since a sweep walks every session's objects (a thousand sessions made
	 * it most of a start's time). */
	if (s->embedded)
		session_sweep(cfg);
	if (!session_net_take(s, net) && (rc = session_claim(s)))
		return rc;
	if ((!s->have_cgroup && (rc = session_cgroup(s))) ||
	    (!s->have_netns && (rc = session_netns(s))))
		return rc;
	if ((rc = cgroup_id(s->cgroup_path, &cgid))) {
		return session_fail(s, rc, "session %s: cannot read the id of cgroup %s: %s", s->id,
				    s->cgroup_path, strerror(-rc));
	}
	/* Held before the listing: what changes after it reaches the session
	 * (the handler's, or at its attach), and its services need not list
	 * every address again (three a running session). */
	if (s->mode != EGRESS_MODE_NONE && (rc = addrs_watch_hold(s))) {
		return session_fail(s, rc, "session %s: cannot follow this host's addresses: %s",
				    s->id, strerror(-rc));
	}

	/* Without network every address is refused alike: the host's own
	 * matter only to refuse a pin naming one. */
	n_self = s->mode == EGRESS_MODE_NONE && !cfg->n_pins ? 0 : self_addrs_start(s, &s->self);
	if (n_self < 0) {
		return session_fail(s, n_self, "cannot list this namespace's own addresses: %s",
				    strerror(-n_self));
	}
	ep.pin_dir = s->pin_dir;
	ep.cgroup_path = s->cgroup_path;
	ep.cgroup_id = cgid;
	ep.host_ifindex = s->have_veth ? s->link.host_ifindex : 0;
	ep.mode = s->mode;
	ep.sess4 = s->link.sess4;
	ep.gw4 = s->link.gw4;
	if (s->link.v6) {
		memcpy(ep.gw6, s->link.gw6, 16);
		memcpy(ep.sess6, s->link.sess6, 16);
		ep.route6 = s->link.route6;
	}
	ep.dns_port = DNS_PORT;
	if (s->mode != EGRESS_MODE_NONE && (cfg->n_providers || config_intercepts(cfg)))
		ep.broker_port = BROKER_DEFAULT_PORT;
	if (s->mode != EGRESS_MODE_NONE && config_intercepts(cfg))
		ep.relay_port = BROKER_INTERCEPT_PORT;
	ep.ports = cfg->egress_ports;
	ep.n_ports = cfg->n_egress_ports;
	ep.public_ranges = cfg->public_ranges;
	ep.n_public = cfg->n_public;
	s->n_self = (size_t)n_self;
	ep.self = s->self;
	ep.n_self = s->n_self;
	/* The agent keeps the hooks on beside its sessions (enforce.h). */
	slash = strrchr(s->cgroup_path, '/');
	if (!s->embedded && slash &&
	    !path_fmt(hooks_cg, sizeof(hooks_cg), "%.*s/%s", (int)(slash - s->cgroup_path),
		      s->cgroup_path, CGROUP_HOOKS))
		ep.hooks_cgroup = hooks_cg;
	/* a prepared network's maps are in the set already */
	s->enf = enforce_attach(&ep, s->enf, err, sizeof(err));
	if (!s->enf)
		return session_fail(s, -errno, "session %s: %s", s->id, err);
	if ((rc = session_pins(s, s->self, s->n_self)))
		return rc;
	if ((rc = rules_start(cfg, s->id, s->record_dir, s->cgroup_path, s->pin_dir,
			      enforce_events_fd(s->enf), &s->rules)))
		return session_fail(s, rc,
				    "session %s: its sandbox.rules cannot be enforced here (%s; "
				    "errandctl doctor names why); fix that, or set "
				    "sandbox.requireFullEnforcement to false",
				    s->id, strerror(-rc));
	if ((rc = session_record(s))) {
		return session_fail(s, rc, "session %s: cannot write its record under %s: %s",
				    s->id, s->record_dir, strerror(-rc));
	}
	if (cfg->n_secrets && (rc = secrets_placeholders(cfg, s->record_dir, &s->secret_env)))
		return session_fail(s, rc, "session %s: cannot keep its placeholders under %s: %s",
				    s->id, s->record_dir, strerror(-rc));
	if (s->mode != EGRESS_MODE_NONE && (cfg->n_providers || config_intercepts(cfg)) &&
	    (rc = session_broker(s)))
		return rc;
	return session_services(s);
}

static enum egress_mode session_mode(const struct errand_config *cfg)
{
	if (cfg->network == NETWORK_NONE)
		return EGRESS_MODE_NONE;
	return cfg->egress_mode == EGRESS_OPEN ? EGRESS_MODE_OPEN : EGRESS_MODE_RESTRICTED;
}

static void warn_weakened(const struct errand_config *cfg, FILE *say)
{
	for (size_t i = 0; i < cfg->n_public; i++) {
		char a[ADDR_STRLEN];
		struct addr x = cfg->public_ranges[i].a;
		bool v4 = addr_is_v4(&x);

		fprintf(say,
			"errand: weakened: sandbox.egress.treatAsPublic treats %s/%d as public; "
			"sessions may reach it (this host's own addresses stay refused)\n",
			addr_str(&x, a), cfg->public_ranges[i].prefixlen - (v4 ? 96 : 0));
	}
}

/* Each provider's key as the agent will hand it to the session's broker: a
 * file that cannot be read refuses the session now, not with a 502 on its
 * first call; one others may read is named as a weakened guarantee. */
static int session_keys_check(const struct session *s, FILE *say, char *err, size_t errlen)
{
	if (s->mode == EGRESS_MODE_NONE)
		return 0;
	for (size_t i = 0; i < s->cfg->n_providers; i++) {
		const struct config_provider *p = &s->cfg->providers[i];
		char key[BROKER_KEY_MAX + 1];
		unsigned int mode = 0;
		int rc = broker_key_read(p->credential_file, key, sizeof(key), &mode);

		explicit_bzero(key, sizeof(key));
		if (rc < 0) {
			broker_key_refusal(p->name, p->credential_file, rc, err, errlen);
			return rc;
		}
		if (mode & 077)
			fprintf(say,
				"errand: weakened: agent.providers.%s: credentialFile %s is open "
				"to %s (mode %04o), not root alone; chmod 0600 it\n",
				p->name, p->credential_file,
				mode & 044 ? (mode & 004 ? "every user" : "its group") : "others",
				mode);
	}
	return 0;
}

static struct session *session_alloc(void)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cfg = &s->config;
	s->lock_fd = s->pidfd = s->status_rd = s->grants_wd = s->broker_keeper = -1;
	s->await_fd = s->await_pidfd = s->broker_pidfd = -1;
	outscrub_init(&s->out);
	for (int k = 0; k < DNS_SOCKS; k++)
		s->held[k] = -1;
	s->status = -1;
	return s;
}

/* The session's configuration: the agent's, as text, and the request. */
static int session_configure(struct session *s, const char *text, const char *path,
			     const json_t *request, char *err, size_t errlen)
{
	int rc;

	if (text && !(s->config_text = strdup(text))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->request = json_deep_copy(request);
	if (!s->request) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((rc = config_load_text(text, path, &s->config, err, errlen)))
		return rc;
	s->have_config = true;
	if ((rc = request_apply(&s->config, s->request, err, errlen)))
		return rc;
	s->project = json_string_value(json_object_get(s->request, "project"));
	s->json = json_is_true(json_object_get(s->request, "json"));
	s->mode = session_mode(s->cfg);
	return 0;
}

/* A prepared network's maps go into the program set (each insertion waits
 * for an RCU grace period) in a thread of their own while this one makes its
 * namespace and veth; the veth's part of them (tc) follows. A kept thread:
 * one made and ended for each entry would have its stack unmapped each time
 * (enforce.c says what that costs). */
static struct workers net_maps_workers = WORKERS_INIT(256 * 1024, 2);

struct net_maps_job {
	struct enforce_params ep;
	struct enforce *enf;
	int rc;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	char err[512];
};

static void net_maps_work(void *arg)
{
	struct net_maps_job *j = arg;

	setpriority(PRIO_PROCESS, (id_t)gettid(), 10); /* the pool's, off the starts' path */
	j->enf = enforce_prepare(&j->ep, j->err, sizeof(j->err));
	j->rc = j->enf ? 0 : -errno;
	pthread_mutex_lock(&j->mu);
	j->done = true;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->mu);
}

static int session_net_build(struct session *n)
{
	struct net_maps_job j = {
		.ep = {.pin_dir = n->pin_dir,
		       .cgroup_path = n->cgroup_path,
		       .mode = n->mode,
		       .n_public = n->cfg->n_public},
		.mu = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};
	int rc;

	if ((rc = cgroup_id(n->cgroup_path, &j.ep.cgroup_id)))
		return session_fail(n, rc, "cannot read the id of cgroup %s: %s", n->cgroup_path,
				    strerror(-rc));
	if (workers_run(&net_maps_workers, net_maps_work, &j))
		net_maps_work(&j); /* no thread for it: here, first */
	rc = session_netns(n);
	pthread_mutex_lock(&j.mu);
	while (!j.done)
		pthread_cond_wait(&j.cond, &j.mu);
	pthread_mutex_unlock(&j.mu);
	n->enf = j.enf;
	if (rc)
		return rc;
	if (j.rc)
		return session_fail(n, j.rc, "%s", j.err);
	if (!n->have_veth)
		return 0;
	j.ep.host_ifindex = n->link.host_ifindex;
	j.ep.sess4 = n->link.sess4;
	j.ep.gw4 = n->link.gw4;
	if (n->link.v6) {
		memcpy(j.ep.gw6, n->link.gw6, 16);
		memcpy(j.ep.sess6, n->link.sess6, 16);
	}
	if ((rc = enforce_prepare_veth(n->enf, &j.ep, j.err, sizeof(j.err))))
		return session_fail(n, rc, "%s", j.err);
	return 0;
}

struct session *session_net_prepare(const char *config_text, const char *config_path, bool none,
				    char *err, size_t errlen)
{
	struct session *n = session_alloc();
	int rc;

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if ((rc = config_load_text(config_text, config_path, &n->config, err, errlen)))
		goto fail;
	n->have_config = true;
	n->mode = none ? EGRESS_MODE_NONE : session_mode(n->cfg);
	if (n->mode == EGRESS_MODE_NONE && !none) {
		snprintf(err, errlen, "sessions have no network here: nothing to prepare");
		goto fail;
	}
	if ((rc = session_claim(n)) || (rc = session_cgroup(n)) || (rc = session_net_build(n)) ||
	    (rc = session_record_ahead(n))) {
		snprintf(err, errlen, "%s", n->err);
		session_teardown(n);
		goto fail;
	}
	await_spawn(n);
	return n;
fail:
	session_release(n);
	return NULL;
}

void session_net_discard(struct session *n)
{
	if (!n)
		return;
	session_teardown(n);
	session_release(n);
}

struct session *session_start(const struct session_params *p, char *err, size_t errlen)
{
	static const char *const stdio_names[] = {"stdin", "stdout", "stderr"};
	FILE *say = p->say ? p->say : stderr;
	struct session *s, *net;
	struct doctor_report *rep;
	char state[PATH_MAX];
	int stdio[3], rc;

	/* A socket would carry the session past every hook (errandctl relays
	 * its caller's through pipes; another client must too). */
	for (int fd = 0; fd < 3; fd++) {
		if (stdio_is_socket(p->stdio ? p->stdio[fd] : fd)) {
			snprintf(err, errlen,
				 "the command's %s is a socket, which a session is never given; "
				 "give it a pipe or a file",
				 stdio_names[fd]);
			log_warnx("%s", err);
			return NULL;
		}
	}
	s = session_alloc();
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->embedded = p->embedded;
	s->st = p->st;
	/* Every refusal is logged once, here or where it happened; err carries
	 * the same line to a client of the daemon. */
	if (session_configure(s, p->config_text, p->config_path, p->request, err, errlen)) {
		log_warnx("%s", err);
		if (p->request_refused)
			*p->request_refused = true;
		goto fail;
	}
	/* What this host cannot enforce refuses the session, or is stated:
	 * the host's probe is cached (the daemon refreshes it at start and on
	 * reload), the session's own paths are probed here. */
	rep = doctor_probe(s->cfg);
	if (!rep) {
		snprintf(err, errlen, "cannot probe this host's enforcement: %s", strerror(errno));
		log_warnx("%s", err);
		goto fail;
	}
	rc = doctor_gate(rep, s->cfg, say, err, errlen);
	s->gaps = doctor_gaps(rep);
	doctor_report_free(rep);
	if (rc)
		goto fail;
	warn_weakened(s->cfg, say);
	if (session_keys_check(s, say, err, errlen)) {
		log_warnx("%s", err);
		goto fail;
	}
	/* All said: the command's stderr gets it first. */
	if (p->say_buf && (fflush(say) || (*p->say_buf && !(s->said = strdup(*p->say_buf))))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (secrets_check(s->cfg, err, errlen)) {
		log_warnx("%s", err);
		goto fail;
	}
	net = p->take_net ? p->take_net(p->take_arg, s->mode == EGRESS_MODE_NONE) : NULL;
	if ((rc = session_setup(s, net)))
		goto fail_teardown;
	if (path_fmt(state, sizeof(state), "%s/work", s->record_dir) == 0 &&
	    (rc = disk_watch_start(&s->disk, s->project, state, s->cfg->limits.disk))) {
		session_fail(s, rc, "session %s: cannot measure its disk use: %s", s->id,
			     strerror(-rc));
		goto fail_teardown;
	}
	/* With secrets, its output reaches the caller only replaced. */
	if ((rc = outscrub_start(s->cfg, s->secret_env, s->broker_env, p->stdio, stdio, &s->out,
				 err, errlen))) {
		session_fail(s, rc, "session %s: %s", s->id, err);
		goto fail_teardown;
	}
	rc = session_spawn(s, s->out.started ? stdio : p->stdio, p->sigmask);
	outscrub_spawned(&s->out);
	if (rc)
		goto fail_teardown;
	session_state_add(s);
	return s;

fail_teardown:
	outscrub_kill(&s->out);
	session_fail(s, rc, "session %s: cannot start it: %s", s->id, strerror(-rc));
	snprintf(err, errlen, "%s", s->err);
	session_teardown(s);
fail:
	session_release(s);
	return NULL;
}

static char *read_text(const char *path)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	if (getdelim(&text, &len, '\0', f) < 0) {
		free(text);
		text = NULL;
	}
	fclose(f);
	return text;
}

/* The exit status: the launcher's file, else (for a child) what wait said. */
static int session_collect(struct session *s)
{
	char *text = read_text(s->exit_path);
	int status = -1, ws = 0;

	if (s->child && waitpid(s->pid, &ws, WNOHANG) == s->pid) {
		if (WIFEXITED(ws))
			status = WEXITSTATUS(ws);
		else if (WIFSIGNALED(ws))
			status = 128 + WTERMSIG(ws);
	}
	if (text) {
		status = atoi(text);
		free(text);
	} else {
		char line[16];

		/* Killed, so the launcher wrote nothing: errandctl run still learns
		 * how the session ended when it waits without the agent. */
		if (status < 0)
			status = s->stopped ? 128 + SIGKILL : 125;
		snprintf(line, sizeof(line), "%d\n", status);
		write_file(s->exit_path, line, 0644);
	}
	return status;
}

/* Which of the responder's sockets fd is: UDP, or listening TCP, bound to
 * the gateway's port 53 (IPv4 or IPv6); -1 when none. */
static int dns_sock_kind(const struct session *s, int fd)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)&ss;
	socklen_t len = sizeof(ss), ol = sizeof(int);
	int type = 0, listening = 0;
	bool v6;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ol))
		return -1;
	if (ss.ss_family == AF_INET && len == sizeof(*sa) && sa->sin_addr.s_addr == s->link.gw4 &&
	    sa->sin_port == htons(DNS_PORT))
		v6 = false;
	else if (ss.ss_family == AF_INET6 && len == sizeof(*sa6) && s->link.v6 &&
		 !memcmp(&sa6->sin6_addr, s->link.gw6, 16) && sa6->sin6_port == htons(DNS_PORT))
		v6 = true;
	else
		return -1;
	if (type == SOCK_DGRAM)
		return v6 ? DNS_SOCK_UDP6 : DNS_SOCK_UDP4;
	ol = sizeof(int);
	if (type == SOCK_STREAM &&
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) == 0 && listening)
		return v6 ? DNS_SOCK_TCP6 : DNS_SOCK_TCP4;
	return -1;
}

/* Takes back the DNS sockets the session's launcher holds (see
 * session_spawn): any of its descriptors that is one of the responder's
 * (dns_sock_kind). Where one is not found (a launcher of an older errand),
 * the responder binds it anew. */
static void session_dns_take(struct session *s)
{
	char path[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)s->pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd, k;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		fd = (int)syscall(SYS_pidfd_getfd, s->pidfd, atoi(e->d_name), 0);
		if (fd < 0)
			continue;
		k = dns_sock_kind(s, fd);
		if (k >= 0 && s->held[k] < 0) {
			s->held[k] = fd;
			continue;
		}
		close(fd);
	}
	closedir(d);
	if (s->held[DNS_SOCK_UDP4] < 0 || s->held[DNS_SOCK_TCP4] < 0)
		log_warnx("session %s: its launcher holds no DNS sockets; binding new ones", s->id);
}

struct session *session_adopt(const struct state_session *row, const char *state_dir,
			      struct state *st, char *err, size_t errlen)
{
	struct session *s = session_alloc();
	char path[PATH_MAX], *text = NULL, *rtext = NULL;
	json_t *request = NULL;
	uint64_t start = 0;
	char enf_err[512];
	int rc = -EINVAL;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->st = st;
	snprintf(s->id, sizeof(s->id), "%s", row->id);
	/* The record's paths come from the configuration it was started with. */
	if (!row->bpf || !row->cgroup || !row->netns) {
		snprintf(err, errlen, "its row in state.db is incomplete");
		goto fail;
	}
	if (path_fmt(path, sizeof(path), "%s/sessions/%s/config.json", state_dir, s->id) ||
	    !(text = read_text(path))) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		goto fail;
	}
	if (path_fmt(path, sizeof(path), "%s/sessions/%s/request.json", state_dir, s->id) ||
	    !(rtext = read_text(path)) || !(request = json_loads(rtext, 0, NULL))) {
		snprintf(err, errlen, "cannot read %s", path);
		goto fail;
	}
	if (session_configure(s, text, path, request, err, errlen))
		goto fail;
	if (session_paths(s)) {
		snprintf(err, errlen, "its paths are too long");
		goto fail;
	}
	snprintf(s->cgroup_path, sizeof(s->cgroup_path), "%s", row->cgroup);
	s->have_cgroup = s->have_netns = true;
	if (row->host_if && row->address && row->gateway) {
		struct addr a, g;

		if (addr_parse(row->address, &a) || addr_parse(row->gateway, &g)) {
			snprintf(err, errlen, "its addresses in state.db do not parse");
			goto fail;
		}
		snprintf(s->link.host_if, sizeof(s->link.host_if), "%s", row->host_if);
		s->link.sess4 = addr_v4(&a);
		s->link.gw4 = addr_v4(&g);
		s->have_veth = s->have_nat = true;
	}
	s->pid = row->launcher_pid;
	/* The pidfd first: a start time read after it is its process's, not
	 * that of one that took the pid meanwhile. */
	if ((s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0)) < 0 ||
	    state_pid_start(s->pid, &start) || start != row->launcher_start) {
		rc = -ESRCH;
		snprintf(err, errlen, "its launcher (pid %d) is gone", (int)s->pid);
		goto fail;
	}
	fcntl(s->pidfd, F_SETFD, FD_CLOEXEC);
	/* Held before the listing, as at a start: what changes after it reaches
	 * the session at its attach, its services list nothing again, and every
	 * session adopted in this restart shares the one listing (a listing or
	 * three each walked a thousand sessions' addresses a thousand times). */
	if (s->mode != EGRESS_MODE_NONE && (rc = addrs_watch_hold(s))) {
		snprintf(err, errlen, "cannot follow this host's addresses: %s", strerror(-rc));
		goto fail;
	}
	rc = s->mode == EGRESS_MODE_NONE && !s->cfg->n_pins ? 0 : addrs_listed(s, &s->self);
	if (rc < 0) {
		snprintf(err, errlen, "cannot list this namespace's own addresses: %s",
			 strerror(-rc));
		goto fail;
	}
	if (s->have_veth) {
		/* A session started with IPv6 DNS has its gateway's address: the
		 * listing tells, before it is filtered by it. */
		session_link_v6(&s->link, &s->cfg->pool6);
		s->link.v6 = false;
		for (int i = 0; i < rc && !s->link.v6; i++)
			s->link.v6 = !memcmp(s->self[i].b, s->link.gw6, 16);
		session_dns_take(s);
	}
	s->n_self = (size_t)self_filter(s, s->self, rc);
	s->enf = enforce_open(s->pin_dir, enf_err, sizeof(enf_err));
	if (!s->enf) {
		snprintf(err, errlen, "%s", enf_err);
		goto fail;
	}
	/* sandbox.rules' refusals: their links enforce from the pins; their
	 * events ride the egress ring's epoll fd again */
	s->rules = rules_open(s->cfg, s->pin_dir, enforce_events_fd(s->enf));
	/* Addresses this namespace gained while no agent followed them. */
	for (size_t i = 0; i < s->n_self; i++) {
		char a[ADDR_STRLEN];
		int e = enforce_self_add(s->enf, &s->self[i]);

		if (e)
			log_warnx("session %s: cannot refuse %s, an address of this host: %s",
				  s->id, addr_str(&s->self[i], a), strerror(-e));
	}
	if (session_services(s)) {
		snprintf(err, errlen, "%s", s->err);
		goto fail;
	}
	/* sandbox.limits.disk again, its budget counted from here: the start's
	 * baseline is not kept. */
	if (!path_fmt(path, sizeof(path), "%s/work", s->record_dir) &&
	    (rc = disk_watch_start(&s->disk, s->project, path, s->cfg->limits.disk))) {
		snprintf(err, errlen, "cannot measure its disk use: %s", strerror(-rc));
		goto fail;
	}
	broker_readopt(s);
	free(text);
	free(rtext);
	json_decref(request);
	return s;
fail:
	free(text);
	free(rtext);
	json_decref(request);
	session_release(s);
	errno = -rc;
	return NULL;
}

const char *session_id(const struct session *s)
{
	return s->id;
}

pid_t session_pid(const struct session *s)
{
	return s->pid;
}

int session_pidfd(const struct session *s)
{
	return s->pidfd;
}

bool session_output_relayed(const struct session *s)
{
	return s->out.started;
}

bool session_net_prepared(const struct session *s)
{
	return s->net_prepared;
}

int session_status(const struct session *s)
{
	return s->status;
}

int session_exit_code(int status)
{
	return status < 0 ? 125 : status & 0xff;
}

const char *session_record_dir(const struct session *s)
{
	return s->record_dir;
}

const struct errand_config *session_config(const struct session *s)
{
	return s->cfg;
}

void session_record_state(struct session *s, struct state *st)
{
	s->st = st;
	session_state_add(s);
}

void session_record_end(struct session *s)
{
	if (s->st && s->pid > 0 && state_session_end(s->st, s->id, s->status) == -ENOENT)
		log_debug("session %s: not in state.db", s->id);
	s->st = NULL;
}

static uint32_t epoll_events(short ev)
{
	return (ev & POLLIN ? EPOLLIN : 0) | (ev & POLLOUT ? EPOLLOUT : 0);
}

static void session_dyn_fd(void *arg, int fd, uint32_t events)
{
	struct session *s = arg;

	for (size_t i = 0; i < s->n_pfd; i++) {
		if (s->pfd[i].fd != fd)
			continue;
		s->pfd[i].revents = (short)((events & EPOLLIN ? POLLIN : 0) |
					    (events & EPOLLOUT ? POLLOUT : 0) |
					    (events & EPOLLERR ? POLLERR : 0) |
					    (events & EPOLLHUP ? POLLHUP : 0));
		s->dyn_ready = true;
	}
	loop_hook_wake(s->loop, s);
}

/* The observer's and the responder's descriptors change as they serve
 * (clients, TCP connections, upstream sockets): each time they ran, the set
 * they ask for now replaces the one registered, in a buffer that grows as
 * needed. */
static void session_dyn_sync(struct session *s)
{
	struct pollfd *old = s->pfd, *now;
	size_t n_old = s->n_pfd, cap = s->cap_pfd ? s->cap_pfd : 16;
	int n, timeout = -1;

	for (;;) {
		now = calloc(cap, sizeof(*now));
		if (!now)
			return; /* the old set stays registered */
		n = 0;
		timeout = -1;
		if (s->obs && s->obs != observe_shared)
			observe_server_pollfds(s->obs, now, &n, (int)cap);
		s->n_obs_pfd = (size_t)n;
		if (s->dns)
			dns_responder_pollfds(s->dns, now, &n, (int)cap, &timeout);
		if ((size_t)n < cap)
			break;
		free(now);
		cap *= 2;
	}
	for (size_t i = 0; i < n_old; i++) {
		bool kept = false;

		for (int j = 0; j < n && !kept; j++)
			kept = now[j].fd == old[i].fd;
		if (!kept)
			loop_del(s->loop, old[i].fd);
	}
	for (int j = 0; j < n; j++) {
		bool known = false;

		for (size_t i = 0; i < n_old && !known; i++)
			known = now[j].fd == old[i].fd;
		/* A kept number may be a new descriptor (one closed, another
		 * opened in its place): modifying it fails then, and it is
		 * registered anew. */
		if (known && loop_mod(s->loop, now[j].fd, epoll_events(now[j].events)) == 0)
			continue;
		loop_del(s->loop, now[j].fd);
		if (loop_add(s->loop, now[j].fd, epoll_events(now[j].events), session_dyn_fd, s))
			log_warnx("session %s: cannot watch a descriptor of its DNS or event "
				  "stream",
				  s->id);
	}
	free(old);
	s->pfd = now;
	s->n_pfd = (size_t)n;
	s->cap_pfd = cap;
	s->dyn_due_ns = timeout >= 0 ? boottime_ns() + (uint64_t)timeout * 1000000ull : 0;
}

static void session_on_pid(void *arg, int fd, uint32_t events)
{
	struct session *s = arg;

	(void)fd;
	(void)events;
	s->pid_ready = true;
	loop_hook_wake(s->loop, s);
}

/* The output relay has written everything and exited. */
static void session_on_out(void *arg, int fd, uint32_t events)
{
	struct session *s = arg;

	(void)events;
	loop_del(s->loop, fd);
	outscrub_reap(&s->out);
	loop_hook_wake(s->loop, s); /* an end that waited for the relay */
}

static void session_on_events(void *arg, int fd, uint32_t events)
{
	struct session *s = arg;

	(void)fd;
	(void)events;
	s->events_ready = true;
	loop_hook_wake(s->loop, s);
}

/* Before any DNS work of this turn (that runs in the sessions' hooks), so
 * no answer given in it holds a new own address. */
static void sessions_on_addrs(void *arg, int fd, uint32_t events)
{
	const struct addr *got;
	struct addr *all = NULL;
	size_t n;
	bool relist;
	int k;

	(void)arg;
	(void)fd;
	(void)events;
	relist = netlink_addr_watch_drain(addrs_watch.w, &got, &n);
	pthread_mutex_lock(&addrs_watch.lock);
	for (size_t i = 0; i < n; i++)
		addrs_watch.seen[addrs_watch.n_seen++ % ADDRS_SEEN] = got[i];
	if (relist) /* a step of its own: every session that took hold before lists again */
		addrs_watch.relisted = ++addrs_watch.n_seen;
	pthread_mutex_unlock(&addrs_watch.lock);
	if (!relist) {
		for (struct session *s = addrs_watch.sessions; n && s; s = s->addrs_next)
			session_self_learn(s, got, n);
		return;
	}
	/* Messages were lost: every address, listed once for all. */
	k = netlink_self_addrs(&all);
	if (k < 0)
		log_warnx("cannot list this namespace's own addresses: %s", strerror(-k));
	for (struct session *s = addrs_watch.sessions; k > 0 && s; s = s->addrs_next)
		session_self_learn(s, all, (size_t)k);
	free(all);
}

/* The session's broker asks for a key again (a provider answered 401). */
static void session_on_keeper(void *arg, int fd, uint32_t events)
{
	(void)fd;
	(void)events;
	broker_keeper(arg);
}

static void session_on_disk(void *arg, int fd, uint32_t events)
{
	struct session *s = arg;

	(void)fd;
	(void)events;
	if (s->stopped || disk_watch_check(&s->disk) != 1)
		return;
	if (s->disk.deep)
		log_warnx("session %s stopped: its project or state directory holds a "
			  "directory nested deeper than errand measures for sandbox.limits.disk "
			  "(%d levels); nest less",
			  s->id, DISK_DEPTH_MAX);
	else
		log_warnx("session %s stopped: its project and state directories grew by %llu "
			  "bytes, past sandbox.limits.disk (%llu); raise the budget or write less",
			  s->id, (unsigned long long)s->disk.used,
			  (unsigned long long)s->disk.budget);
	session_kill(s);
}

/* The stream's last line of a session, after all its events: an observer of
 * it alone (errandctl observe ID) stops there. */
static void session_say_ended(struct session *s)
{
	json_t *o = json_pack("{s:s,s:s,s:i}", "event", "ended", "session", s->id, "status",
			      session_exit_code(s->status));
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (text)
		observe_broadcast(s->obs, text);
	free(text);
	json_decref(o);
}

/* Refusals made just before the end are still in the ring: the kernel's
 * bucket keeps them under one budget's worth. Every refusal the command
 * made is there once its processes are gone: a hook writes its event
 * before the call it refuses returns. */
static void session_drain_last(struct session *s)
{
	enforce_events_drain(s->enf, print_event, s);
	if (s->rules)
		rules_events_drain(s->rules, s->id, rule_event, s);
	session_suppressed(s, true);
	if (s->st)
		state_denied_flush(s->st);
}

/* The session's PID 1 wrote its status ("N\n") once every process of the
 * session had ended, or closed the pipe without (killed): the caller has
 * the status, after the lines of every refusal, without waiting for the
 * launcher's end. */
static void session_on_status(void *arg, int fd, uint32_t events)
{
	struct session *s = arg;
	char buf[16], *end;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	long v = -1;

	(void)events;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0) {
		buf[n] = '\0';
		v = strtol(buf, &end, 10);
		if (end == buf || *end != '\n' || v < 0 || v > 255)
			v = -1;
	}
	loop_del(s->loop, fd);
	s->status_watched = false;
	if (v < 0 || !s->caller)
		return;
	session_drain_last(s);
	/* A caller whose socket failed on a line is gone by now. */
	if (s->caller)
		s->caller->exited((int)v, s->caller_arg);
}

void session_caller_set(struct session *s, const struct session_caller *to, void *arg)
{
	s->caller = to;
	s->caller_arg = arg;
	/* Relayed output says the end itself, once it has all gone out. */
	if (to && s->loop && s->status_rd >= 0 && !s->status_watched && !s->out.started)
		s->status_watched =
			loop_add(s->loop, s->status_rd, EPOLLIN, session_on_status, s) == 0;
}

/* The session's turn, when a handler of its woke it or its time came:
 * true once it ended (and s may be gone). */
static bool session_check(struct session *s)
{
	if (s->events_ready || enforce_events_backlog(s->enf))
		enforce_events_drain(s->enf, print_event, s);
	if (s->rules)
		rules_events_drain(s->rules, s->id, rule_event, s);
	s->events_ready = false;
	session_suppressed(s, false);
	if (s->dyn_ready || (s->dyn_due_ns && boottime_ns() >= s->dyn_due_ns)) {
		if (s->n_obs_pfd)
			observe_server_process(s->obs, s->pfd, (int)s->n_obs_pfd);
		if (s->dns)
			dns_responder_process(s->dns, s->pfd + s->n_obs_pfd,
					      (int)(s->n_pfd - s->n_obs_pfd));
		s->dyn_ready = false;
		session_dyn_sync(s);
	}
	/* The kernel's refusals and the responder's denied names alike: a
	 * session that goes quiet after them has nothing to flush them later. */
	if (s->st)
		state_denied_flush(s->st);
	if (!s->pid_ready)
		return false;
	/* The caller hears of the end only once all the session wrote has
	 * reached it through the relay, which follows within moments (the
	 * session's processes are gone, and with them the pipes' writers). */
	if (s->out.pidfd >= 0) {
		loop_del(s->loop, s->pidfd);
		return false;
	}
	session_drain_last(s);
	s->status = session_collect(s);
	s->pid_ready = false;
	session_say_ended(s);
	s->ended(s, s->ended_arg);
	return true;
}

/* The loop runs it only when the session's handlers woke it or its time
 * came: with a thousand sessions, a turn of the agent's loop costs an
 * idle one nothing. Events left past the budget are served next turn,
 * after the rest; the suppressed count is read once a second while events
 * come (session_suppressed). */
static uint64_t session_turn(void *arg, uint64_t now)
{
	struct session *s = arg;
	uint64_t due;

	(void)now;
	if (session_check(s))
		return UINT64_MAX;
	if (enforce_events_backlog(s->enf))
		return 0;
	due = s->suppressed_check_ns < s->suppressed_until_ns
		      ? s->suppressed_check_ns + 1000000000ull
		      : UINT64_MAX;
	if (s->dyn_due_ns && s->dyn_due_ns < due)
		due = s->dyn_due_ns;
	return due;
}

int session_attach(struct session *s, struct loop *l, session_ended_fn fn, void *arg)
{
	int rc;

	s->loop = l;
	s->ended = fn;
	s->ended_arg = arg;
	if ((rc = loop_add(l, s->pidfd, EPOLLIN, session_on_pid, s)) ||
	    (rc = loop_add(l, enforce_events_fd(s->enf), EPOLLIN, session_on_events, s)) ||
	    (rc = grants_watch_attach(s, l)) ||
	    (s->addrs_held && (rc = addrs_watch_attach(s, l))) ||
	    (disk_watch_fd(&s->disk) >= 0 &&
	     (rc = loop_add(l, disk_watch_fd(&s->disk), EPOLLIN, session_on_disk, s))) ||
	    (s->broker_keeper >= 0 &&
	     (rc = loop_add(l, s->broker_keeper, EPOLLIN, session_on_keeper, s))) ||
	    (s->out.pidfd >= 0 && (rc = loop_add(l, s->out.pidfd, EPOLLIN, session_on_out, s))) ||
	    (rc = loop_hook_add_lazy(l, session_turn, s))) {
		session_unattach(s);
		return rc;
	}
	session_dyn_sync(s);
	return 0;
}

void session_unattach(struct session *s)
{
	struct loop *l = s->loop;

	if (!l)
		return;
	loop_hook_del(l, s);
	loop_del(l, s->pidfd);
	if (s->status_watched)
		loop_del(l, s->status_rd);
	s->status_watched = false;
	if (s->enf)
		loop_del(l, enforce_events_fd(s->enf));
	grants_watch_detach(s);
	addrs_watch_detach(s);
	loop_del(l, disk_watch_fd(&s->disk));
	if (s->broker_keeper >= 0)
		loop_del(l, s->broker_keeper);
	if (s->out.pidfd >= 0)
		loop_del(l, s->out.pidfd);
	for (size_t i = 0; i < s->n_pfd; i++)
		loop_del(l, s->pfd[i].fd);
	free(s->pfd);
	s->pfd = NULL;
	s->n_pfd = s->cap_pfd = s->n_obs_pfd = 0;
	s->loop = NULL;
}

struct run_ctx {
	struct session *s;
	bool ended;
};

/* The embedded errandctl's end: CMD's status goes back to the caller at once
 * and a child (errand-teardown) removes the session's objects meanwhile,
 * holding the session's lock, so no sweep takes them for a crashed
 * session's. The child's stdio is /dev/null: a caller reading errandctl's
 * output to its end does not wait for the teardown either, and the child is
 * in a session of its own, out of reach of the terminal's ^C. The session's
 * own children (DNS worker, broker) are stopped here first: only this process
 * can wait for them. Without a child, the teardown runs here and now. */
static void session_end_after(struct session *s)
{
	int named[2] = {-1, -1};
	pid_t pid;
	char c;

	broker_stop(s);
	dns_responder_free(s->dns);
	s->dns = NULL;
	/* The session's row ends here, before the fork, as the daemon's end
	 * does before its teardown: the child may not use this process's
	 * state.db connection (state.h), so the session goes to it without. */
	if (s->st && s->pid > 0 && state_session_end(s->st, s->id, s->status) == -ENOENT)
		log_debug("session %s: not in state.db", s->id);
	s->st = NULL;
	fflush(stdout);
	fflush(stderr);
	/* errandctl returns once the child has its name: whoever waits for a
	 * session's end finds it as errand-teardown until it is done, never a
	 * nameless copy of errandctl in the moment before. */
	if (pipe2(named, O_CLOEXEC))
		named[0] = named[1] = -1;
	pid = fork();
	if (pid == 0) {
		int fd;

		prctl(PR_SET_NAME, "errand-teardown");
		if (named[1] >= 0)
			close(named[1]);
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			if (fd > STDERR_FILENO)
				close(fd);
		}
		setsid();
		session_end(s);
		_exit(0);
	}
	if (named[1] >= 0)
		close(named[1]);
	if (pid > 0 && named[0] >= 0)
		while (read(named[0], &c, 1) < 0 && errno == EINTR)
			;
	if (named[0] >= 0)
		close(named[0]);
	if (pid < 0)
		session_end(s);
	/* Otherwise the session is the child's: what this process holds of it
	 * goes as it exits, right after. */
}

static void run_ended(struct session *s, void *arg)
{
	struct run_ctx *r = arg;

	(void)s;
	r->ended = true;
}

static void run_signal(void *arg, int fd, uint32_t events)
{
	struct run_ctx *r = arg;
	struct signalfd_siginfo si;

	(void)events;
	if (read(fd, &si, sizeof(si)) == sizeof(si))
		kill(r->s->pid, (int)si.ssi_signo);
}

int session_run(const struct session_params *p)
{
	struct session_params sp = *p;
	struct run_ctx r = {};
	struct loop *l;
	char err[CONFIG_ERRLEN];
	sigset_t mask, oldmask;
	int sfd, status;

	/* Signals wait in a signalfd until the launcher runs, then go to it:
	 * errandctl itself must live to tear the session down. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	sp.sigmask = &oldmask;
	sp.embedded = true;
	l = loop_new();
	r.s = l ? session_start(&sp, err, sizeof(err)) : NULL;
	/* The same session code as the daemon's, on a loop of its own. */
	if (r.s &&
	    (loop_add(l, sfd, EPOLLIN, run_signal, &r) || session_attach(r.s, l, run_ended, &r))) {
		log_warnx("session %s: cannot serve it: out of descriptors or memory", r.s->id);
		session_kill(r.s);
		r.s->status = -1;
		r.ended = true;
	}
	if (!r.s) {
		/* already said on stderr, in one line */
		if (!l)
			log_warn("cannot make an event loop");
		loop_free(l);
		if (sfd >= 0)
			close(sfd);
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		return 125;
	}
	while (!r.ended)
		if (loop_once(l, -1))
			break;
	status = session_exit_code(r.s->status);
	session_unattach(r.s);
	loop_del(l, sfd);
	session_end_after(r.s);
	loop_free(l);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	return status;
}
