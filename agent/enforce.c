/* Loads the egress programs for one session, fills their maps, attaches them
 * to the session's cgroup and the host side of its veth, pins links and maps
 * under the session's bpffs directory and verifies the attachment. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/enforce.h"
#include "egress.skel.h"
#include "lib/log.h"
#include "lib/util.h"

struct enforce {
	struct egress_bpf *skel; /* NULL for a session adopted from its pins */
	int allow_fd, events_fd; /* the skeleton's, or opened from the pins */
	int grants_fd;		 /* grants_live; -1 for a session pinned before it existed */
	struct ring_buffer *rb;
	void (*fn)(const struct egress_event *ev, void *arg);
	void *arg;
	unsigned drained;  /* events handed to fn in this drain */
	bool backlog;	   /* the last drain stopped at its budget */
	uint64_t reported; /* suppressed events already reported */
	/* The allow map was found full, expired entries swept, until then: an
	 * answer meanwhile is refused without walking the map again. */
	uint64_t full_until_ns;
	int self_fd; /* an adopted session's self_addrs pin; -1: none */
};

#define ENFORCE_FULL_RECHECK_NS 1000000000ull

struct cgroup_hook {
	const char *pin; /* link name in the pin directory */
	enum bpf_attach_type type;
};

static struct bpf_program *hook_prog(struct egress_bpf *s, int i)
{
	struct bpf_program *progs[] = {
		s->progs.errand_conn4, s->progs.errand_conn6, s->progs.errand_send4,
		s->progs.errand_send6, s->progs.errand_recv4, s->progs.errand_recv6,
		s->progs.errand_peer4, s->progs.errand_peer6, s->progs.errand_sock,
	};

	return progs[i];
}

static const struct cgroup_hook hooks[] = {
	{"connect4", BPF_CGROUP_INET4_CONNECT},
	{"connect6", BPF_CGROUP_INET6_CONNECT},
	{"sendmsg4", BPF_CGROUP_UDP4_SENDMSG},
	{"sendmsg6", BPF_CGROUP_UDP6_SENDMSG},
	{"recvmsg4", BPF_CGROUP_UDP4_RECVMSG},
	{"recvmsg6", BPF_CGROUP_UDP6_RECVMSG},
	{"getpeername4", BPF_CGROUP_INET4_GETPEERNAME},
	{"getpeername6", BPF_CGROUP_INET6_GETPEERNAME},
	{"sock_create", BPF_CGROUP_INET_SOCK_CREATE},
};

/* errand says what failed in its own one line; libbpf's own account (the
 * verifier's log among it) is for -v. */
static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	if (!log_verbose())
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int prog_id(int fd, __u32 *id)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	*id = info.id;
	return 0;
}

static int fill_ranges(struct egress_bpf *s, const struct cidr *c, size_t n, bool public, char *err,
		       size_t errlen)
{
	int fd4 = bpf_map__fd(public ? s->maps.public4 : s->maps.forbid4);
	int fd6 = bpf_map__fd(public ? s->maps.public6 : s->maps.forbid6);
	__u8 one = 1;

	for (size_t i = 0; i < n; i++) {
		int rc;

		if (addr_is_v4(&c[i].a) && c[i].prefixlen >= 96) {
			struct lpm4_key k = {.prefixlen = c[i].prefixlen - 96};

			memcpy(k.addr, c[i].a.b + 12, 4);
			rc = bpf_map_update_elem(fd4, &k, &one, BPF_ANY);
		} else {
			struct lpm6_key k = {.prefixlen = c[i].prefixlen};

			memcpy(k.addr, c[i].a.b, 16);
			rc = bpf_map_update_elem(fd6, &k, &one, BPF_ANY);
		}
		if (rc) {
			snprintf(err, errlen, "cannot fill the %s ranges map: %s",
				 public ? "treat-as-public" : "forbidden", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static int fill_maps(struct egress_bpf *s, const struct enforce_params *p, char *err, size_t errlen)
{
	const struct cidr *forbidden;
	size_t n_forbidden;
	__u8 one = 1;
	int rc;

	forbidden = forbidden_ranges(&n_forbidden);
	rc = fill_ranges(s, forbidden, n_forbidden, false, err, errlen);
	if (!rc)
		rc = fill_ranges(s, p->public_ranges, p->n_public, true, err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < p->n_ports; i++) {
		__u16 port = p->ports[i];

		if (bpf_map_update_elem(bpf_map__fd(s->maps.open_ports), &port, &one, BPF_ANY)) {
			snprintf(err, errlen, "cannot fill the ports map: %s", strerror(errno));
			return -errno;
		}
	}
	for (size_t i = 0; i < p->n_self; i++) {
		struct self_key k;

		memcpy(k.addr, p->self[i].b, 16);
		if (bpf_map_update_elem(bpf_map__fd(s->maps.self_addrs), &k, &one, BPF_ANY)) {
			snprintf(err, errlen, "cannot fill the own-addresses map: %s",
				 strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static int pin_maps(struct egress_bpf *s, const char *dir, char *err, size_t errlen)
{
	struct bpf_map *maps[] = {s->maps.allow,      s->maps.flows,	 s->maps.forbid4,
				  s->maps.forbid6,    s->maps.public4,	 s->maps.public6,
				  s->maps.self_addrs, s->maps.events,	 s->maps.counters,
				  s->maps.open_ports, s->maps.once_used, s->maps.grants_live};
	char path[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, bpf_map__name(maps[i]));
		if (bpf_map__pin(maps[i], path)) {
			snprintf(err, errlen, "cannot pin map %s: %s", path, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* BPF_PROG_QUERY on the cgroup: the program must be among those that run. */
static int verify_cgroup(int cg_fd, enum bpf_attach_type type, __u32 want)
{
	__u32 ids[64], cnt = ARRAY_SIZE(ids), flags = 0;

	if (bpf_prog_query(cg_fd, type, BPF_F_QUERY_EFFECTIVE, &flags, ids, &cnt))
		return -errno;
	for (__u32 i = 0; i < cnt; i++)
		if (ids[i] == want)
			return 0;
	return -ENOENT;
}

static int attach_cgroup(struct egress_bpf *s, const struct enforce_params *p, char *err,
			 size_t errlen)
{
	cleanup_close int cg_fd = open(p->cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char path[PATH_MAX];

	if (cg_fd < 0) {
		snprintf(err, errlen, "cannot open cgroup %s: %s", p->cgroup_path, strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		struct bpf_program *prog = hook_prog(s, (int)i);
		struct bpf_link *link;
		__u32 id = 0;
		int rc;

		link = bpf_program__attach_cgroup(prog, cg_fd);
		if (!link) {
			rc = -errno;
			snprintf(err, errlen,
				 "cannot attach %s to cgroup %s: %s; errand needs a kernel with "
				 "cgroup BPF (CONFIG_CGROUP_BPF)",
				 hooks[i].pin, p->cgroup_path, strerror(-rc));
			return rc;
		}
		snprintf(path, sizeof(path), "%s/%s", p->pin_dir, hooks[i].pin);
		rc = bpf_link__pin(link, path) ? -errno : 0;
		/* The pin holds the link from here; our fd can go. */
		bpf_link__disconnect(link);
		bpf_link__destroy(link);
		if (rc) {
			snprintf(err, errlen, "cannot pin link %s: %s", path, strerror(-rc));
			return rc;
		}
		rc = prog_id(bpf_program__fd(prog), &id);
		if (!rc)
			rc = verify_cgroup(cg_fd, hooks[i].type, id);
		if (rc) {
			snprintf(err, errlen,
				 "enforcement not verified: %s is not attached to cgroup %s (%s)",
				 hooks[i].pin, p->cgroup_path, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* The other direction on the same clsact: segments of ended flows toward
 * the session (bpf/egress.bpf.c, errand_tc_out). */
static int attach_tc_out(struct egress_bpf *s, const struct enforce_params *p, char *err,
			 size_t errlen)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = p->host_ifindex, .attach_point = BPF_TC_EGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1);
	LIBBPF_OPTS(bpf_tc_opts, query, .handle = 1, .priority = 1);
	int fd = bpf_program__fd(s->progs.errand_tc_out);
	char path[PATH_MAX];
	__u32 id = 0;
	int rc;

	opts.prog_fd = fd;
	rc = bpf_tc_attach(&hook, &opts);
	if (rc) {
		snprintf(err, errlen, "cannot attach the tc flow guard to ifindex %d: %s",
			 p->host_ifindex, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/tc_egress", p->pin_dir);
	if (bpf_program__pin(s->progs.errand_tc_out, path)) {
		rc = -errno;
		snprintf(err, errlen, "cannot pin program %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = prog_id(fd, &id);
	if (!rc)
		rc = bpf_tc_query(&hook, &query);
	if (!rc && query.prog_id != id)
		rc = -ENOENT;
	if (rc) {
		snprintf(err, errlen,
			 "enforcement not verified: the tc flow guard is not on ifindex %d (%s)",
			 p->host_ifindex, strerror(-rc));
		return rc;
	}
	return 0;
}

/* clsact on the host side of the veth. A legacy tc filter rather than a link:
 * it lives as long as the device, so it needs no pin, and the kernels errand
 * supports from 6.1 on all have it. */
static int attach_tc(struct egress_bpf *s, const struct enforce_params *p, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = p->host_ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1);
	LIBBPF_OPTS(bpf_tc_opts, query, .handle = 1, .priority = 1);
	int fd = bpf_program__fd(s->progs.errand_tc_in);
	char path[PATH_MAX];
	__u32 id = 0;
	int rc;

	rc = bpf_tc_hook_create(&hook);
	if (rc && rc != -EEXIST) {
		snprintf(err, errlen,
			 "cannot add clsact to ifindex %d: %s; errand needs tc's clsact qdisc "
			 "(CONFIG_NET_SCH_INGRESS, module sch_ingress)",
			 p->host_ifindex, strerror(-rc));
		return rc;
	}
	opts.prog_fd = fd;
	rc = bpf_tc_attach(&hook, &opts);
	if (rc) {
		snprintf(err, errlen,
			 "cannot attach the tc backstop to ifindex %d: %s; errand needs BPF "
			 "classifiers in tc (CONFIG_NET_CLS_BPF, module cls_bpf)",
			 p->host_ifindex, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/tc_ingress", p->pin_dir);
	if (bpf_program__pin(s->progs.errand_tc_in, path)) {
		rc = -errno;
		snprintf(err, errlen, "cannot pin program %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = prog_id(fd, &id);
	if (!rc)
		rc = bpf_tc_query(&hook, &query);
	if (!rc && query.prog_id != id)
		rc = -ENOENT;
	if (rc) {
		snprintf(err, errlen,
			 "enforcement not verified: the tc backstop is not on ifindex %d (%s)",
			 p->host_ifindex, strerror(-rc));
		return rc;
	}
	return attach_tc_out(s, p, err, errlen);
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct enforce *e = ctx;

	if (size >= sizeof(struct egress_event) && e->fn)
		e->fn(data, e->arg);
	/* At the budget, stop: libbpf has consumed this record, the rest wait
	 * for the next turn of the loop, after everyone else's work. */
	if (++e->drained >= ENFORCE_EVENTS_BUDGET)
		return -EAGAIN;
	return 0;
}

struct enforce *enforce_attach(const struct enforce_params *p, char *err, size_t errlen)
{
	struct enforce *e = calloc(1, sizeof(*e));
	struct egress_bpf *s;
	int rc;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	e->allow_fd = e->events_fd = e->grants_fd = -1;
	libbpf_set_print(libbpf_quiet);
	s = e->skel = egress_bpf__open();
	if (!s) {
		rc = -errno;
		snprintf(err, errlen, "cannot open the egress BPF object: %s", strerror(-rc));
		goto fail;
	}
	s->rodata->mode = p->mode;
	s->rodata->sess_cgid = p->cgroup_id;
	s->rodata->sess_addr4 = p->sess4;
	s->rodata->gw_addr4 = p->gw4;
	memcpy((void *)s->rodata->gw_addr6, p->gw6, 16);
	memcpy((void *)s->rodata->sess_addr6, p->sess6, 16);
	s->rodata->dns_port = p->dns_port;
	s->rodata->broker_port = p->broker_port;
	if (!p->host_ifindex) {
		bpf_program__set_autoload(s->progs.errand_tc_in, false);
		bpf_program__set_autoload(s->progs.errand_tc_out, false);
	}
	rc = egress_bpf__load(s);
	if (rc) {
		snprintf(err, errlen,
			 "cannot load the egress BPF programs: %s; errand needs a BTF kernel "
			 "(6.1 or newer) with BPF enabled; run with -v for the verifier's log",
			 strerror(-rc));
		goto fail;
	}
	rc = fill_maps(s, p, err, errlen);
	if (rc)
		goto fail;
	if (mkdir(p->pin_dir, 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", p->pin_dir, strerror(-rc));
		goto fail;
	}
	rc = pin_maps(s, p->pin_dir, err, errlen);
	if (!rc)
		rc = attach_cgroup(s, p, err, errlen);
	if (!rc && p->host_ifindex)
		rc = attach_tc(s, p, err, errlen);
	if (rc)
		goto fail_unpin;
	e->allow_fd = bpf_map__fd(s->maps.allow);
	e->events_fd = bpf_map__fd(s->maps.events);
	e->grants_fd = bpf_map__fd(s->maps.grants_live);
	e->rb = ring_buffer__new(e->events_fd, on_event, e, NULL);
	if (!e->rb) {
		rc = -errno;
		snprintf(err, errlen, "cannot read the event ring buffer: %s", strerror(-rc));
		goto fail_unpin;
	}
	return e;

fail_unpin:
	enforce_unpin(p->pin_dir);
fail:
	enforce_free(e);
	errno = -rc;
	return NULL;
}

int enforce_allow(struct enforce *e, const struct addr *a, uint16_t port, uint64_t expires_ns,
		  uint32_t flags)
{
	struct allow_key k = {.port = port};
	struct allow_val v = {.expires_ns = expires_ns, .flags = flags};

	memcpy(k.addr, a->b, 16);
	if (bpf_map_update_elem(e->allow_fd, &k, &v, BPF_ANY))
		return -errno;
	return 0;
}

int enforce_expire(struct enforce *e, uint64_t now_ns)
{
	int fd = e->allow_fd, n = 0;
	struct allow_key k, next;
	struct allow_val v;
	void *prev = NULL;

	/* Deleting the current key would restart the walk: step first. */
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (prev && bpf_map_lookup_elem(fd, &k, &v) == 0 && v.expires_ns &&
		    v.expires_ns < now_ns && bpf_map_delete_elem(fd, &k) == 0)
			n++;
		k = next;
		prev = &k;
	}
	if (prev && bpf_map_lookup_elem(fd, &k, &v) == 0 && v.expires_ns && v.expires_ns < now_ns &&
	    bpf_map_delete_elem(fd, &k) == 0)
		n++;
	if (n)
		e->full_until_ns = 0;
	return n;
}

int enforce_allow_answer(struct enforce *e, const struct addr *a, uint16_t port,
			 uint64_t expires_ns, uint32_t flags, uint32_t grant)
{
	int fd = e->allow_fd;
	struct allow_key k = {.port = port};
	struct allow_val v = {.expires_ns = expires_ns, .flags = flags, .grant = grant};
	struct allow_val old;
	struct timespec ts;
	uint64_t now;

	/* Only the session's start writes pins (enforce_allow): an answer can
	 * neither make one nor replace one. */
	if (flags & ENTRY_F_PINNED)
		return -EINVAL;
	memcpy(k.addr, a->b, 16);
	if (bpf_map_lookup_elem(fd, &k, &old) == 0) {
		if (old.flags & ENTRY_F_PINNED)
			return 0;
		/* Another answer may already keep it longer, but a once grant's
		 * entry (perhaps spent) gives way to any other source. */
		if ((!(old.flags & ENTRY_F_ONCE) || old.grant == grant) &&
		    old.expires_ns > expires_ns)
			return 0;
	}
	if (bpf_map_update_elem(fd, &k, &v, BPF_ANY) == 0)
		return 0;
	if (errno != E2BIG && errno != ENOMEM)
		return -errno;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* A walk costs milliseconds on a full map: once a second at most. */
	if (now < e->full_until_ns)
		return -E2BIG;
	enforce_expire(e, now);
	if (bpf_map_update_elem(fd, &k, &v, BPF_ANY) == 0)
		return 0;
	e->full_until_ns = now + ENFORCE_FULL_RECHECK_NS;
	return -E2BIG;
}

int enforce_self_add(struct enforce *e, const struct addr *a)
{
	int fd = e->skel ? bpf_map__fd(e->skel->maps.self_addrs) : e->self_fd;
	struct self_key k;
	__u8 one = 1;

	memcpy(k.addr, a->b, 16);
	return bpf_map_update_elem(fd, &k, &one, BPF_ANY) ? -errno : 0;
}

int enforce_events_fd(struct enforce *e)
{
	return ring_buffer__epoll_fd(e->rb);
}

int enforce_events_drain(struct enforce *e, void (*fn)(const struct egress_event *ev, void *arg),
			 void *arg)
{
	int rc;

	e->fn = fn;
	e->arg = arg;
	e->drained = 0;
	rc = ring_buffer__consume(e->rb);
	e->backlog = rc == -EAGAIN;
	return rc == -EAGAIN ? (int)e->drained : rc;
}

bool enforce_events_backlog(const struct enforce *e)
{
	return e->backlog;
}

int enforce_events_suppressed(struct enforce *e, const char *pin_dir, uint64_t *total,
			      uint64_t *fresh)
{
	uint64_t cnt[CNT_MAX];
	int rc = enforce_counters(pin_dir, cnt);

	if (rc)
		return rc;
	*total = cnt[CNT_EVENTS_SUPPRESSED];
	*fresh = *total > e->reported ? *total - e->reported : 0;
	e->reported = *total;
	return 0;
}

void enforce_free(struct enforce *e)
{
	if (!e)
		return;
	ring_buffer__free(e->rb);
	if (e->skel) {
		egress_bpf__destroy(e->skel);
	} else {
		if (e->allow_fd >= 0)
			close(e->allow_fd);
		if (e->events_fd >= 0)
			close(e->events_fd);
		if (e->self_fd >= 0)
			close(e->self_fd);
		if (e->grants_fd >= 0)
			close(e->grants_fd);
	}
	free(e);
}

/* The pins a live session must have: every cgroup link, and the maps the
 * agent writes and reads. */
static int pin_open(const char *pin_dir, const char *name, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		snprintf(err, errlen, "cannot open pin %s: %s", path, strerror(errno));
	return fd;
}

struct enforce *enforce_open(const char *pin_dir, char *err, size_t errlen)
{
	struct enforce *e = calloc(1, sizeof(*e));
	int rc = -ENOMEM;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	e->allow_fd = e->events_fd = e->self_fd = e->grants_fd = -1;
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		int fd = pin_open(pin_dir, hooks[i].pin, err, errlen);

		if (fd < 0) {
			rc = -errno;
			goto fail;
		}
		close(fd);
	}
	e->allow_fd = pin_open(pin_dir, "allow", err, errlen);
	if (e->allow_fd < 0 || (e->events_fd = pin_open(pin_dir, "events", err, errlen)) < 0) {
		rc = -errno;
		goto fail;
	}
	/* A session pinned by an agent before grants_live existed has none:
	 * its flows were never tied to grants, and it keeps running. */
	e->grants_fd = pin_open(pin_dir, EGRESS_MAP_GRANTS, err, errlen);
	e->rb = ring_buffer__new(e->events_fd, on_event, e, NULL);
	if (!e->rb) {
		rc = -errno;
		snprintf(err, errlen, "cannot read the event ring buffer: %s", strerror(-rc));
		goto fail;
	}
	/* The agent adds the host's new addresses to it while the session runs. */
	if ((e->self_fd = pin_open(pin_dir, "self_addrs", err, errlen)) < 0) {
		rc = -errno;
		goto fail;
	}
	return e;
fail:
	enforce_free(e);
	errno = -rc;
	return NULL;
}

int enforce_entry_grant(struct enforce *e, const struct addr *a, uint16_t port, uint32_t *grant)
{
	struct allow_key k = {.port = port};
	struct allow_val v;

	memcpy(k.addr, a->b, 16);
	if (bpf_map_lookup_elem(e->allow_fd, &k, &v))
		return -errno;
	*grant = v.grant;
	return 0;
}

int enforce_drop_grant(struct enforce *e, uint32_t grant)
{
	struct allow_key k, next;
	struct allow_val v;
	void *prev = NULL;
	int n = 0, more;

	/* Deleting the current key would restart the walk: step first. */
	do {
		more = bpf_map_get_next_key(e->allow_fd, prev, &next) == 0;
		if (prev && bpf_map_lookup_elem(e->allow_fd, &k, &v) == 0 && v.grant == grant &&
		    bpf_map_delete_elem(e->allow_fd, &k) == 0)
			n++;
		k = next;
		prev = &k;
	} while (more);
	if (n)
		e->full_until_ns = 0;
	if (e->grants_fd >= 0)
		bpf_map_delete_elem(e->grants_fd, &grant);
	return n;
}

int enforce_grants_set(struct enforce *e, const struct grant_set *gs)
{
	struct timespec boot, real;
	int rc = 0;

	if (e->grants_fd < 0)
		return 0;
	/* Both clocks to the nanosecond: a grant's end is a unix second, the
	 * backstop's clock is CLOCK_BOOTTIME. */
	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_REALTIME, &real);
	for (size_t i = 0; i < gs->n; i++) {
		const struct grant *g = &gs->v[i];
		int64_t left_ns = 0;
		__u32 id = g->id;
		__u64 end = 0;

		/* A spent once grant's connection lives on: only revoke ends it. */
		if (g->kind == GRANT_UNTIL) {
			left_ns = (g->until - real.tv_sec) * 1000000000ll - real.tv_nsec;
			if (left_ns <= 0) {
				bpf_map_delete_elem(e->grants_fd, &id);
				continue;
			}
			end = (uint64_t)boot.tv_sec * 1000000000ull + (uint64_t)boot.tv_nsec +
			      (uint64_t)left_ns;
		}
		if (bpf_map_update_elem(e->grants_fd, &id, &end, BPF_ANY))
			rc = -errno;
	}
	return rc;
}

int enforce_grants_end(const char *pin_dir, const uint32_t *ids, size_t n)
{
	char err[256];
	cleanup_close int fd = pin_open(pin_dir, EGRESS_MAP_GRANTS, err, sizeof(err));

	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		__u32 id = ids[i];

		if (bpf_map_delete_elem(fd, &id) && errno != ENOENT)
			return -errno;
	}
	return 0;
}

int enforce_walk(const char *pin_dir, enforce_entry_fn fn, void *arg)
{
	char err[256];
	cleanup_close int fd = pin_open(pin_dir, "allow", err, sizeof(err));
	struct allow_key k;
	struct allow_val v;
	void *prev = NULL;
	int n = 0;

	if (fd < 0)
		return -errno;
	while (bpf_map_get_next_key(fd, prev, &k) == 0) {
		struct addr a;

		if (bpf_map_lookup_elem(fd, &k, &v) == 0) {
			memcpy(a.b, k.addr, 16);
			fn(&a, k.port, v.expires_ns, v.flags, v.grant, arg);
			n++;
		}
		prev = &k;
	}
	return n;
}

int enforce_counters(const char *pin_dir, uint64_t out[CNT_MAX])
{
	char err[256];
	cleanup_close int fd = pin_open(pin_dir, EGRESS_MAP_COUNTERS, err, sizeof(err));
	int ncpu = libbpf_num_possible_cpus();

	memset(out, 0, sizeof(uint64_t) * CNT_MAX);
	if (fd < 0)
		return -errno;
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	for (__u32 i = 0; i < CNT_MAX; i++) {
		cleanup_free __u64 *vals = calloc((size_t)ncpu, sizeof(*vals));

		if (!vals)
			return -ENOMEM;
		if (bpf_map_lookup_elem(fd, &i, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[i] += vals[c];
	}
	return 0;
}

/* A tc program as pinned (the backstop, tc_ingress; the flow guard,
 * tc_egress), and whether the veth's clsact runs it. */
static void tc_program(const char *pin_dir, const char *name, enum bpf_tc_attach_point at,
		       int ifindex, enforce_prog_fn fn, void *arg)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = at);
	LIBBPF_OPTS(bpf_tc_opts, query, .handle = 1, .priority = 1);
	char err[256];
	cleanup_close int fd = pin_open(pin_dir, name, err, sizeof(err));
	__u32 id = 0;

	if (fd >= 0 && prog_id(fd, &id))
		id = 0;
	fn(name, id, id && ifindex > 0 && bpf_tc_query(&hook, &query) == 0 && query.prog_id == id,
	   arg);
}

int enforce_programs(const char *pin_dir, const char *cgroup_path, int ifindex, enforce_prog_fn fn,
		     void *arg)
{
	cleanup_close int cg_fd = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char err[256];
	int n = 0;

	if (cg_fd < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		cleanup_close int fd = pin_open(pin_dir, hooks[i].pin, err, sizeof(err));
		struct bpf_link_info info = {};
		__u32 len = sizeof(info);
		bool attached = false;

		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			attached = verify_cgroup(cg_fd, hooks[i].type, info.prog_id) == 0;
		fn(hooks[i].pin, fd >= 0 ? info.prog_id : 0, attached, arg);
		n++;
	}
	if (ifindex >= 0) {
		tc_program(pin_dir, "tc_ingress", BPF_TC_INGRESS, ifindex, fn, arg);
		tc_program(pin_dir, "tc_egress", BPF_TC_EGRESS, ifindex, fn, arg);
		n += 2;
	}
	return n;
}

int enforce_unpin(const char *pin_dir)
{
	DIR *d = opendir(pin_dir);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) && errno != ENOENT)
			rc = -errno;
	}
	closedir(d);
	if (rmdir(pin_dir) && errno != ENOENT)
		rc = -errno;
	return rc;
}
