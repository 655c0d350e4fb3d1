/* One session from start to teardown for the embedded agent: every object is
 * made in order, enforcement verified before the command runs, and on any
 * failure or at the end everything is removed again. Leftovers of a crashed
 * run are swept at the next start, by errand's own names only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
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
#include <sys/socket.h>

#include <jansson.h>

#include "agent/cgroup.h"
#include "agent/confine.h"
#include "agent/disk.h"
#include "agent/dns.h"
#include "agent/enforce.h"
#include "agent/events.h"
#include "agent/nat.h"
#include "agent/netlink.h"
#include "agent/netns.h"
#include "agent/observe.h"
#include "agent/session.h"
#include "lib/log.h"
#include "lib/util.h"

#define BPF_FS_MAGIC_NUM 0xcafe4a11
#define BPF_FS_ROOT "/sys/fs/bpf"
#define VETH_HOST_PREFIX "eh"
#define VETH_SESS_PREFIX "es"

struct session {
	const struct session_spec *spec;
	const struct errand_config *cfg;
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
	struct dns_responder *dns;
	struct observe_server *obs;
	struct event_limiter *limiter;
	struct disk_watch disk;
	struct addr *self; /* the agent namespace's own addresses */
	size_t n_self;
	enum egress_mode mode;
};

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
static int bpffs_ensure(const char *bpf_dir)
{
	struct statfs st;

	if (strncmp(bpf_dir, BPF_FS_ROOT "/", strlen(BPF_FS_ROOT) + 1) == 0 &&
	    (statfs(BPF_FS_ROOT, &st) || st.f_type != BPF_FS_MAGIC_NUM)) {
		if (mount("bpf", BPF_FS_ROOT, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700"))
			return -errno;
	}
	return mkdir_p(bpf_dir, 0700);
}

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

int session_sweep(const struct errand_config *cfg)
{
	char dir[PATH_MAX], mnt[PATH_MAX];
	int n = 0, rc;

	rc = veth_sweep(VETH_HOST_PREFIX, keep_live, (void *)cfg);
	n += rc > 0 ? rc : 0;
	rc = nat_sweep(keep_live, (void *)cfg);
	n += rc > 0 ? rc : 0;
	snprintf(dir, sizeof(dir), "%s/netns", cfg->run_dir);
	rc = netns_sweep(dir, keep_live, (void *)cfg);
	n += rc > 0 ? rc : 0;
	if (!cgroup2_mount(mnt, sizeof(mnt))) {
		rc = cgroup_sweep(mnt, cfg->cgroup_name, keep_live, (void *)cfg);
		n += rc > 0 ? rc : 0;
	}
	n += sweep_dir(cfg->bpf_dir, "", cfg, enforce_unpin);
	snprintf(dir, sizeof(dir), "%s/sessions", cfg->state_dir);
	n += sweep_dir(dir, "", cfg, confine_remove_tree);
	/* Lock files of dead sessions go last, once nothing of theirs is left. */
	snprintf(dir, sizeof(dir), "%s/sessions", cfg->run_dir);
	sweep_dir(dir, ".events", cfg, unlink_path);
	sweep_dir(dir, ".lock", cfg, unlink_path);
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
 * running in another errand never takes a live session for a leftover. */
static int session_lock(struct session *s)
{
	snprintf(s->lock_path, sizeof(s->lock_path), "%s/sessions/%s.lock", s->cfg->run_dir, s->id);
	s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return -errno;
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB))
		return -errno;
	return 0;
}

/* A /30 from the pool whose gateway no link here uses. The pool lock is held
 * until the veth carries the address, so two errands never pick the same. */
static int pool_pick(struct session *s, int *lock_fd)
{
	const struct cidr *pool = &s->cfg->pool;
	char path[PATH_MAX];
	uint32_t base, blocks;
	int plen = pool->prefixlen - 96;

	snprintf(path, sizeof(path), "%s/pool.lock", s->cfg->run_dir);
	*lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX))
		return -errno;
	base = ntohl(addr_v4(&pool->a)) & (plen ? ~0u << (32 - plen) : 0);
	blocks = plen >= 30 ? 1 : 1u << (30 - plen);
	for (uint32_t i = 0; i < blocks; i++) {
		uint32_t gw = htonl(base + 4 * i + 1);

		if (netlink_addr4_in_use(gw) == 0) {
			s->link.gw4 = gw;
			s->link.sess4 = htonl(base + 4 * i + 2);
			s->link.prefixlen = 30;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
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
			log_warnx("session %s: cannot bring up lo: %s", s->id, strerror(-rc));
		return rc;
	}
	rc = pool_pick(s, &pool_fd);
	if (rc) {
		struct addr pa = s->cfg->pool.a;

		log_warnx("session %s: no free address in sandbox.addressPool %s/%d: %s; "
			  "widen the pool or stop sessions",
			  s->id, addr_str(&pa, a), s->cfg->pool.prefixlen - 96, strerror(-rc));
		return rc;
	}
	snprintf(s->link.host_if, sizeof(s->link.host_if), VETH_HOST_PREFIX "%s", s->id);
	snprintf(s->link.sess_if, sizeof(s->link.sess_if), VETH_SESS_PREFIX "%s", s->id);
	rc = veth_setup(&s->link, s->netns_path);
	if (rc) {
		log_warnx("session %s: cannot set up veth %s: %s", s->id, s->link.host_if,
			  strerror(-rc));
		return rc;
	}
	s->have_veth = true;
	rc = nat_add(s->id, s->link.sess4, s->link.host_if);
	if (rc) {
		log_warnx("session %s: cannot add nftables table " NAT_TABLE_PREFIX "%s: %s",
			  s->id, s->id, strerror(-rc));
		return rc;
	}
	s->have_nat = true;
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
				log_warnx("pin %s=%s names one of this host's own addresses; "
					  "errand never lets a session reach the host: remove the pin",
					  p->name, addr_str(&p->addr, a));
				return -EPERM;
			}
		}
		if (s->mode == EGRESS_MODE_NONE)
			continue;
		for (size_t j = 0; j < cfg->n_allow; j++) {
			const struct host_rule *r = &cfg->allow[j];
			int rc;

			if (!host_rule_match(r, p->name) || (p->port && p->port != r->port))
				continue;
			rc = enforce_allow(s->enf, &p->addr, r->port, 0, ENTRY_F_PINNED);
			if (rc) {
				log_warnx("session %s: cannot program pin %s: %s", s->id, p->name,
					  strerror(-rc));
				return rc;
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

static const char *mode_name(enum egress_mode m)
{
	return m == EGRESS_MODE_NONE ? "none" : m == EGRESS_MODE_OPEN ? "open" : "restricted";
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
	if (s->have_veth) {
		struct addr x;

		addr_from_v4(&x, s->link.sess4);
		json_object_set_new(root, "address", json_string(addr_str(&x, a)));
		addr_from_v4(&x, s->link.gw4);
		json_object_set_new(root, "gateway", json_string(addr_str(&x, a)));
		json_object_set_new(root, "hostInterface", json_string(s->link.host_if));
	}
	text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	rc = mkdir_p(s->record_dir, 0711);
	if (!rc) {
		rc = path_fmt(path, sizeof(path), "%s/policy.json", s->record_dir);
		if (!rc)
			rc = write_file(path, text, 0600);
	}
	free(text);
	if (!rc && s->have_veth) {
		struct addr gw;
		char line[64];

		addr_from_v4(&gw, s->link.gw4);
		snprintf(line, sizeof(line), "nameserver %s\n", addr_str(&gw, a));
		rc = path_fmt(path, sizeof(path), "%s/resolv.conf", s->record_dir);
		if (!rc)
			rc = write_file(path, line, 0644);
	}
	return rc;
}

static void session_teardown(struct session *s)
{
	int rc;

	dns_responder_free(s->dns);
	s->dns = NULL;
	observe_server_free(s->obs);
	s->obs = NULL;
	event_limiter_free(s->limiter);
	s->limiter = NULL;
	free(s->self);
	s->self = NULL;
	enforce_free(s->enf);
	s->enf = NULL;
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
	confine_remove_tree(s->record_dir);
	if (s->lock_fd >= 0) {
		unlink(s->lock_path);
		close(s->lock_fd);
		s->lock_fd = -1;
	}
}

/* Every event goes to the live stream; the log shows each target at most
 * once per EVENT_LOG_INTERVAL_NS, so a session cannot flood it. */
static void session_event(const struct event_rec *ev, void *arg)
{
	struct session *s = arg;
	char line[EVENT_LINE_MAX], target[320];

	event_format(ev, true, line, sizeof(line));
	observe_broadcast(s->obs, line);
	event_target(ev, target, sizeof(target));
	if (s->limiter && !event_limiter_pass(s->limiter, target, boottime_ns()))
		return;
	if (!s->spec->json)
		event_format(ev, false, line, sizeof(line));
	fprintf(stderr, "%s\n", line);
}

static void print_event(const struct egress_event *bev, void *arg)
{
	struct session *s = arg;
	struct event_rec ev;

	event_from_bpf(bev, s->id, &ev);
	session_event(&ev, s);
}

static int launcher_path(char *out, size_t len)
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
	if (path_fmt(out, len, "%s/errand-launch", self))
		return -ENAMETOOLONG;
	return access(out, X_OK) ? -errno : 0;
}

#define LAUNCH_ARGS_MAX 1024

static pid_t session_spawn(struct session *s, const sigset_t *oldmask)
{
	char launcher[PATH_MAX], uid[16], gid[16], sessenv[64], resolv[PATH_MAX], state[PATH_MAX];
	cleanup_free const char **args = calloc(LAUNCH_ARGS_MAX, sizeof(*args));
	size_t n = 0;
	pid_t pid;
	int rc;

	if (!args)
		return -ENOMEM;
	rc = launcher_path(launcher, sizeof(launcher));
	if (rc) {
		log_warnx("cannot find errand-launch next to errandctl (%s): %s; reinstall errand",
			  launcher, strerror(-rc));
		return rc;
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
	if (s->have_veth) {
		if (path_fmt(resolv, sizeof(resolv), "%s/resolv.conf", s->record_dir))
			return -ENAMETOOLONG;
		args[n++] = "--resolv";
		args[n++] = resolv;
	}
	/* Confinement first: the session's own --env come after and win. */
	rc = confine_launch_args(s->cfg, s->spec->project, state, args, &n, LAUNCH_ARGS_MAX - 4);
	if (rc) {
		log_warnx("session %s: the confinement options do not fit on the launcher's command "
			  "line; shorten sandbox.policyExtra or sandbox.env",
			  s->id);
		return rc;
	}
	args[n++] = "--env";
	args[n++] = sessenv;
	for (char *const *e = s->spec->env; e && *e; e++) {
		if (n + 2 >= LAUNCH_ARGS_MAX - 2)
			return -E2BIG;
		args[n++] = "--env";
		args[n++] = *e;
	}
	args[n++] = "--";
	for (char *const *a = s->spec->argv; *a; a++) {
		if (n >= LAUNCH_ARGS_MAX - 1) {
			log_warnx("too many arguments for the command (at most %d in all)",
				  LAUNCH_ARGS_MAX);
			return -E2BIG;
		}
		args[n++] = *a;
	}
	args[n] = NULL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		execv(launcher, (char *const *)args);
		fprintf(stderr, "errandctl: cannot run %s: %s\n", launcher, strerror(errno));
		_exit(125);
	}
	return pid;
}

/* Waits for the launcher, printing refusals as they come and passing on the
 * signals a user sends errandctl, so the session ends the way CMD decides. */
/* Waits for the launcher, serving DNS and the event stream, printing
 * refusals as they come and passing on the signals a user sends errandctl,
 * so the session ends the way CMD decides. */
/* Past its disk budget, a session is stopped, and told why. */
static void session_stop_disk(struct session *s, pid_t pid)
{
	char path[PATH_MAX];
	int fd;

	log_warnx("session %s stopped: its project and state directories grew by %llu bytes, "
		  "past sandbox.limits.disk (%llu); raise the budget or write less",
		  s->id, (unsigned long long)s->disk.used, (unsigned long long)s->disk.budget);
	fd = path_fmt(path, sizeof(path), "%s/cgroup.kill", s->cgroup_path)
		     ? -1
		     : open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1)
		kill(pid, SIGKILL); /* the launcher's PID 1 dies with it, and so the rest */
	if (fd >= 0)
		close(fd);
}

static int session_wait(struct session *s, pid_t pid, int sfd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int status = 0, disk_due;
	bool stopped = false;

	for (;;) {
		struct pollfd fds[128];
		int n = 0, timeout = pidfd < 0 ? 100 : -1;

		fds[n++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		fds[n++] = (struct pollfd){ .fd = enforce_events_fd(s->enf), .events = POLLIN };
		fds[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		if (s->obs)
			observe_server_pollfds(s->obs, fds, &n, (int)ARRAY_SIZE(fds));
		if (s->dns)
			dns_responder_pollfds(s->dns, fds, &n, (int)ARRAY_SIZE(fds), &timeout);
		disk_due = disk_watch_timeout(&s->disk, boottime_ns());
		if (disk_due >= 0 && (timeout < 0 || disk_due < timeout))
			timeout = disk_due;
		if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
			break;
		if (!stopped && disk_watch_check(&s->disk, boottime_ns()) == 1) {
			session_stop_disk(s, pid);
			stopped = true;
		}
		if (fds[1].revents)
			enforce_events_drain(s->enf, print_event, s);
		if (fds[2].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				kill(pid, (int)si.ssi_signo);
		}
		if (s->obs)
			observe_server_process(s->obs, fds + 3, n - 3);
		if (s->dns)
			dns_responder_process(s->dns, fds + 3, n - 3);
		/* Ask only when the pidfd says so: DNS wakes this loop far more often. */
		if ((pidfd < 0 || fds[0].revents) && waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
	/* Refusals made just before the end are still in the ring. */
	enforce_events_drain(s->enf, print_event, s);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 125;
}

/* What the embedded agent serves while the session runs: the event stream,
 * and the DNS responder on the session's gateway. */
static int session_services(struct session *s)
{
	char path[PATH_MAX], err[512];

	s->limiter = event_limiter_new();
	if (!s->limiter)
		return -ENOMEM;
	if (path_fmt(path, sizeof(path), "%s/sessions/%s.events", s->cfg->run_dir, s->id))
		return -ENAMETOOLONG;
	s->obs = observe_server_new(path);
	if (!s->obs) {
		log_warn("session %s: cannot serve events on %s", s->id, path);
		return -errno;
	}
	if (s->mode == EGRESS_MODE_NONE)
		return 0;
	s->dns = dns_responder_new(s->cfg, s->enf, s->link.gw4, s->self, s->n_self, s->id,
				   session_event, s, err, sizeof(err));
	if (!s->dns) {
		log_warnx("session %s: %s", s->id, err);
		return -errno;
	}
	return 0;
}

static int session_setup(struct session *s)
{
	const struct errand_config *cfg = s->cfg;
	struct enforce_params ep = {};
	char err[512], dir[PATH_MAX];
	uint64_t cgid;
	int n_self, rc;

	snprintf(dir, sizeof(dir), "%s/sessions", cfg->run_dir);
	if ((rc = mkdir_p(dir, 0700)) || (rc = bpffs_ensure(cfg->bpf_dir))) {
		log_warnx("cannot prepare %s and %s: %s", dir, cfg->bpf_dir, strerror(-rc));
		return rc;
	}
	session_sweep(cfg);
	if ((rc = session_new_id(s)) || (rc = session_lock(s))) {
		log_warnx("cannot take a session id under %s: %s", dir, strerror(-rc));
		return rc;
	}
	snprintf(s->netns_path, sizeof(s->netns_path), "%s/netns/%s", cfg->run_dir, s->id);
	snprintf(s->pin_dir, sizeof(s->pin_dir), "%s/%s", cfg->bpf_dir, s->id);
	snprintf(s->record_dir, sizeof(s->record_dir), "%s/sessions/%s", cfg->state_dir, s->id);

	rc = cgroup2_mount(s->cgroup_mount, sizeof(s->cgroup_mount));
	if (rc) {
		log_warnx("no cgroup v2 mount found; mount cgroup2 at /sys/fs/cgroup (or "
			  "/sys/fs/cgroup/unified on a hybrid host)");
		return rc;
	}
	rc = cgroup_session_create(s->cgroup_mount, cfg->cgroup_name, s->id, s->cgroup_path,
				   sizeof(s->cgroup_path));
	if (rc) {
		log_warnx("session %s: cannot create cgroup %s/%s/%s: %s", s->id, s->cgroup_mount,
			  cfg->cgroup_name, s->id, strerror(-rc));
		return rc;
	}
	s->have_cgroup = true;
	if ((rc = cgroup_id(s->cgroup_path, &cgid))) {
		log_warnx("session %s: cannot read the id of cgroup %s: %s", s->id, s->cgroup_path,
			  strerror(-rc));
		return rc;
	}
	rc = netns_create(s->netns_path);
	if (rc) {
		log_warnx("session %s: cannot create network namespace %s: %s", s->id,
			  s->netns_path, strerror(-rc));
		return rc;
	}
	s->have_netns = true;
	if ((rc = session_network(s)))
		return rc;

	n_self = netlink_self_addrs(&s->self);
	if (n_self < 0) {
		log_warnx("cannot list this namespace's own addresses: %s", strerror(-n_self));
		return n_self;
	}
	ep.pin_dir = s->pin_dir;
	ep.cgroup_path = s->cgroup_path;
	ep.cgroup_id = cgid;
	ep.host_ifindex = s->have_veth ? s->link.host_ifindex : 0;
	ep.mode = s->mode;
	ep.sess4 = s->link.sess4;
	ep.gw4 = s->link.gw4;
	ep.dns_port = DNS_PORT;
	ep.ports = cfg->egress_ports;
	ep.n_ports = cfg->n_egress_ports;
	ep.public_ranges = cfg->public_ranges;
	ep.n_public = cfg->n_public;
	s->n_self = (size_t)n_self;
	ep.self = s->self;
	ep.n_self = s->n_self;
	s->enf = enforce_attach(&ep, err, sizeof(err));
	if (!s->enf) {
		log_warnx("session %s: %s", s->id, err);
		return -errno;
	}
	if ((rc = session_pins(s, s->self, s->n_self)))
		return rc;
	if ((rc = session_record(s))) {
		log_warnx("session %s: cannot write its record under %s: %s", s->id,
			  s->record_dir, strerror(-rc));
		return rc;
	}
	return session_services(s);
}

static enum egress_mode session_mode(const struct errand_config *cfg)
{
	if (cfg->network == NETWORK_NONE)
		return EGRESS_MODE_NONE;
	return cfg->egress_mode == EGRESS_OPEN ? EGRESS_MODE_OPEN : EGRESS_MODE_RESTRICTED;
}

static void warn_weakened(const struct errand_config *cfg)
{
	for (size_t i = 0; i < cfg->n_public; i++) {
		char a[ADDR_STRLEN];
		struct addr x = cfg->public_ranges[i].a;
		bool v4 = addr_is_v4(&x);

		log_warnx("weakened: sandbox.egress.treatAsPublic treats %s/%d as public; sessions "
			  "may reach it (this host's own addresses stay refused)",
			  addr_str(&x, a), cfg->public_ranges[i].prefixlen - (v4 ? 96 : 0));
	}
}

int session_run(const struct session_spec *spec)
{
	struct session s = { .spec = spec, .cfg = spec->cfg, .lock_fd = -1 };
	char state[PATH_MAX];
	sigset_t mask, oldmask;
	int sfd, status;
	pid_t pid;

	s.mode = session_mode(spec->cfg);
	warn_weakened(spec->cfg);
	/* Signals wait in a signalfd until the launcher runs, then go to it:
	 * errandctl itself must live to tear the session down. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (session_setup(&s)) {
		session_teardown(&s);
		return 125;
	}
	if (path_fmt(state, sizeof(state), "%s/work", s.record_dir) == 0)
		disk_watch_start(&s.disk, spec->project, state, spec->cfg->limits.disk);
	pid = session_spawn(&s, &oldmask);
	if (pid < 0) {
		session_teardown(&s);
		return 125;
	}
	status = session_wait(&s, pid, sfd);
	session_teardown(&s);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	return status;
}
