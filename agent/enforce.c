/* Loads the egress programs for one session, fills their maps, attaches them
 * to the session's cgroup and the host side of its veth, pins links and maps
 * under the session's bpffs directory and verifies the attachment. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/enforce.h"
#include "agent/grant.h"
#include "agent/workers.h"
#include "egress.skel.h"
#include "lib/log.h"
#include "lib/util.h"

/* the session's own maps (I_MAX below) */
#define I_MAX_PREPARED 11

struct enforce {
	int allow_fd, events_fd; /* the session's own maps */
	int grants_fd;		 /* grants_live; -1 for a session pinned before it existed */
	int self_fd;		 /* self_addrs */
	int once_fd;		 /* once_used; -1: not open */
	/* allow and self_addrs are LPM tries (egress.h); false: hashes, of a
	 * session pinned before they were, keyed without the prefix length. */
	bool allow_trie, self_trie;
	/* Entries of the allow map: the agent writes every one, and stops at
	 * EGRESS_ALLOW_MAX (the trie holds one more: see egress.h). */
	unsigned allow_n;
	/* counters, kept open: read every second while the session's events
	 * come (they were read every second for every session once; opening
	 * its pin each time, a path walk in a bpffs of a thousand sessions,
	 * and reading every counter held the agent's loop a quarter of each
	 * second at a thousand sessions). */
	int counters_fd;
	__u64 *cnt_vals; /* one counter's per-CPU values, read into */
	/* The veth's entry in its set's veth_sess, where the tc programs
	 * count (veth_of); veth_fd -1 and veth_looked: the session has none. */
	bool veth_looked;
	int veth_fd;
	__u32 veth_ifindex;
	__u64 veth_key;
	struct ring_buffer *rb;
	void (*fn)(const struct egress_event *ev, void *arg);
	void *arg;
	unsigned drained;  /* events handed to fn in this drain */
	bool backlog;	   /* the last drain stopped at its budget */
	uint64_t reported; /* suppressed events already reported */
	/* The allow map was found full, expired entries swept, until then: an
	 * answer meanwhile is refused without walking the map again. */
	uint64_t full_until_ns;
	/* Made by enforce_prepare and not attached yet: the session's maps, in
	 * the set of this hash under its key. */
	bool prepared;
	uint64_t set_hash;
	unsigned set_gen; /* set_gen when prepared */
	int fd[I_MAX_PREPARED];
	/* A prepared session's insertions into the set, under way: each
	 * returns a grace period after it took effect (outer_start). Waited
	 * for before the maps are attached, unpinned or closed. */
	struct outer_batch *inserts;
};

#define ENFORCE_FULL_RECHECK_NS 1000000000ull

struct cgroup_hook {
	const char *pin; /* link name in the pin directory */
	enum bpf_attach_type type;
	/* Only gives back the addresses of redirected DNS (and relayed
	 * connections): a session without network, which has neither, is not
	 * linked to it (hook_used). */
	bool restores;
};

static const struct cgroup_hook hooks[] = {
	{"connect4", BPF_CGROUP_INET4_CONNECT, false},
	{"connect6", BPF_CGROUP_INET6_CONNECT, false},
	{"sendmsg4", BPF_CGROUP_UDP4_SENDMSG, false},
	{"sendmsg6", BPF_CGROUP_UDP6_SENDMSG, false},
	{"recvmsg4", BPF_CGROUP_UDP4_RECVMSG, true},
	{"recvmsg6", BPF_CGROUP_UDP6_RECVMSG, true},
	{"getpeername4", BPF_CGROUP_INET4_GETPEERNAME, true},
	{"getpeername6", BPF_CGROUP_INET6_GETPEERNAME, true},
	{"sock_create", BPF_CGROUP_INET_SOCK_CREATE, false},
};

static bool hook_used(size_t i, unsigned mode)
{
	return mode != EGRESS_MODE_NONE || !hooks[i].restores;
}

/* The programs of the set, the cgroup hooks' first (in hooks[] order), then
 * the tc backstop and flow guard. Pinned under these names. */
enum { P_TC_IN = ARRAY_SIZE(hooks), P_TC_OUT, P_MAX };
static const char *const prog_names[P_MAX] = {
	"errand_conn4", "errand_conn6", "errand_send4",	 "errand_send6",
	"errand_recv4", "errand_recv6", "errand_peer4",	 "errand_peer6",
	"errand_sock",	"errand_tc_in", "errand_tc_out",
};

/* A session's own maps: made for it, pinned under its name in its directory
 * and put under its key in the set's outer map. Types and sizes as the
 * templates in bpf/egress.bpf.c, which the kernel checks. */
struct inner_def {
	const char *pin, *outer;
	enum bpf_map_type type;
	__u32 key, value, max, flags;
};

enum {
	I_CONFIG,
	I_ALLOW,
	I_FLOWS,
	I_PUBLIC4,
	I_PUBLIC6,
	I_SELF,
	I_PORTS,
	I_ONCE,
	I_GRANTS,
	I_EVENTS,
	I_COUNTERS,
	I_MAX
};
_Static_assert(I_MAX == I_MAX_PREPARED, "struct enforce keeps every inner map");
static const struct inner_def inners[I_MAX] = {
	[I_CONFIG] = {EGRESS_MAP_CONFIG, "cfg_of", BPF_MAP_TYPE_ARRAY, 4, sizeof(struct sess_cfg),
		      1, 0},
	[I_ALLOW] = {EGRESS_MAP_ALLOW, "allow_of", BPF_MAP_TYPE_LPM_TRIE, sizeof(struct allow_lkey),
		     sizeof(struct allow_val), EGRESS_ALLOW_MAX + 1, BPF_F_NO_PREALLOC},
	[I_FLOWS] = {EGRESS_MAP_FLOWS, "flows_of", BPF_MAP_TYPE_LRU_HASH, sizeof(struct flow_key),
		     sizeof(struct flow_val), EGRESS_FLOWS_MAX, 0},
	[I_PUBLIC4] = {EGRESS_MAP_PUBLIC4, "public4_of", BPF_MAP_TYPE_LPM_TRIE,
		       sizeof(struct lpm4_key), 1, EGRESS_FORBID_MAX, BPF_F_NO_PREALLOC},
	[I_PUBLIC6] = {EGRESS_MAP_PUBLIC6, "public6_of", BPF_MAP_TYPE_LPM_TRIE,
		       sizeof(struct lpm6_key), 1, EGRESS_FORBID_MAX, BPF_F_NO_PREALLOC},
	[I_SELF] = {EGRESS_MAP_SELF, "self_of", BPF_MAP_TYPE_LPM_TRIE, sizeof(struct lpm6_key), 1,
		    EGRESS_SELF_MAX, BPF_F_NO_PREALLOC},
	[I_PORTS] = {EGRESS_MAP_PORTS, "ports_of", BPF_MAP_TYPE_HASH, 2, 1, EGRESS_PORTS_MAX,
		     BPF_F_NO_PREALLOC},
	[I_ONCE] = {"once_used", "once_of", BPF_MAP_TYPE_HASH, 4, 8, EGRESS_ONCE_MAX,
		    BPF_F_NO_PREALLOC},
	[I_GRANTS] = {EGRESS_MAP_GRANTS, "grants_of", BPF_MAP_TYPE_HASH, 4, 8, EGRESS_GRANTS_MAX,
		      BPF_F_NO_PREALLOC},
	[I_EVENTS] = {EGRESS_MAP_EVENTS, "events_of", BPF_MAP_TYPE_RINGBUF, 0, 0,
		      EGRESS_EVENTS_BYTES, 0},
	[I_COUNTERS] = {EGRESS_MAP_COUNTERS, "counters_of", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8,
			CNT_MAX, 0},
};
_Static_assert(GRANT_MAX <= EGRESS_GRANTS_MAX, "grants_live and once_used hold every grant");

/* Is the map an LPM trie? A session's allow and self_addrs are; one pinned
 * before they were has hashes. */
static bool map_is_trie(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_LPM_TRIE;
}

/* A key of the allow map as the map takes it: the trie's, or the bare
 * struct allow_key of a hash. */
static void *allow_key_of(bool trie, struct allow_lkey *lk, const struct addr *a, uint16_t port)
{
	*lk = (struct allow_lkey){.prefixlen = ALLOW_PREFIXLEN, .k.port = port};
	if (a)
		memcpy(lk->k.addr, a->b, 16);
	return trie ? (void *)lk : (void *)&lk->k;
}

static void *self_key_of(bool trie, struct lpm6_key *k, const struct addr *a)
{
	k->prefixlen = 128;
	memcpy(k->addr, a->b, 16);
	/* struct self_key is the address alone */
	return trie ? (void *)k : (void *)k->addr;
}

/* One verified program set, as this process holds it: loaded once per
 * object (or opened from the pins another errand left) and shared by every
 * session this process starts. */
struct progset {
	char dir[PATH_MAX]; /* <paths.bpf>/prog/<hash> */
	uint64_t hash;
	int prog[P_MAX];
	__u32 prog_id[P_MAX]; /* the kernel's ids of prog, which verification compares */
	int outer[I_MAX];
	int veth_sess;
	int sess_cg; /* the hooks' cgroup storage: a cgroup's session key */
};

/* Starts run in job threads: one of them loads, the others wait for it. */
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static struct progset *set_cur;
/* Counts the replacements of set_cur: maps put into a set that was replaced
 * meanwhile (its pins removed and made again) are in no set a start uses. */
static unsigned set_gen;

/* errand says what failed in its own one line; libbpf's own account (the
 * verifier's log among it) is for -v. */
static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	if (!log_verbose())
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void enforce_libbpf_quiet(void)
{
	libbpf_set_print(libbpf_quiet);
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

static int pin_open(const char *pin_dir, const char *name, char *err, size_t errlen);
static int session_cfg(const char *pin_dir, struct sess_cfg *cfg);

/* The object's identity: FNV-1a over the ELF the skeleton carries. A changed
 * object is another set, pinned beside the old one. */
static uint64_t object_hash_of(void)
{
	size_t sz = 0;
	const unsigned char *b = egress_bpf__elf_bytes(&sz);
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < sz; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The object is built in: its hash is worked out once (a third of a MiB,
 * a byte at a time, was a millisecond of every start, twice). */
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;
static uint64_t hash_val;

static void hash_init(void)
{
	hash_val = object_hash_of();
}

static uint64_t object_hash(void)
{
	pthread_once(&hash_once, hash_init);
	return hash_val;
}

static void set_free(struct progset *ps)
{
	if (!ps)
		return;
	for (int i = 0; i < P_MAX; i++)
		if (ps->prog[i] >= 0)
			close(ps->prog[i]);
	for (int i = 0; i < I_MAX; i++)
		if (ps->outer[i] >= 0)
			close(ps->outer[i]);
	if (ps->veth_sess >= 0)
		close(ps->veth_sess);
	if (ps->sess_cg >= 0)
		close(ps->sess_cg);
	free(ps);
}

static struct progset *set_open(const char *dir, uint64_t hash)
{
	struct progset *ps = calloc(1, sizeof(*ps));
	char err[PATH_MAX + 64];
	int rc = -ENOMEM;

	if (!ps)
		goto fail;
	snprintf(ps->dir, sizeof(ps->dir), "%s", dir);
	ps->hash = hash;
	for (int i = 0; i < P_MAX; i++)
		ps->prog[i] = -1;
	for (int i = 0; i < I_MAX; i++)
		ps->outer[i] = -1;
	ps->veth_sess = ps->sess_cg = -1;
	for (int i = 0; i < P_MAX; i++) {
		if ((ps->prog[i] = pin_open(dir, prog_names[i], err, sizeof(err))) < 0)
			goto fail_errno;
		if ((rc = prog_id(ps->prog[i], &ps->prog_id[i])))
			goto fail;
	}
	for (int i = 0; i < I_MAX; i++)
		if ((ps->outer[i] = pin_open(dir, inners[i].outer, err, sizeof(err))) < 0)
			goto fail_errno;
	if ((ps->veth_sess = pin_open(dir, "veth_sess", err, sizeof(err))) < 0 ||
	    (ps->sess_cg = pin_open(dir, "sess_cg", err, sizeof(err))) < 0)
		goto fail_errno;
	return ps;
fail_errno:
	rc = -errno;
fail:
	set_free(ps);
	errno = -rc;
	return NULL;
}

static int remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) && errno != ENOENT)
			rc = -errno;
	}
	closedir(d);
	if (rmdir(dir) && errno != ENOENT)
		rc = -errno;
	return rc;
}

static int fill_ranges(int fd4, int fd6, const struct cidr *c, size_t n)
{
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
		if (rc)
			return -errno;
	}
	return 0;
}

/* The amount a session's TCP timestamps are moved by on their way out
 * (errand_ts_move): the same for every program set of this boot, since a
 * connection's timestamps must not jump when an agent restarts or another
 * set is loaded beside, and unknown outside the host: a hash of the boot's
 * id. 0, which leaves them as they are, only where the kernel gives no id. */
uint32_t enforce_ts_shift(void)
{
	char id[64] = "";
	uint32_t h = 0x811c9dc5u;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (!f || !fgets(id, sizeof(id), f) || strlen(id) < 32) {
		log_warnx("cannot read /proc/sys/kernel/random/boot_id: sessions' TCP timestamps "
			  "show this host's uptime");
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	for (const char *p = "errand-ts:"; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x01000193u;
	for (const char *p = id; *p && *p != '\n'; p++)
		h = (h ^ (uint8_t)*p) * 0x01000193u;
	return h;
}

/* Loads and verifies the object, fills what every session shares (the
 * forbidden ranges) and pins it all at dir, atomically: into a directory of
 * its own, renamed into place. Another errand that won the race leaves its
 * set there, which is the same object. */
static int set_create(const char *prog_dir, const char *dir, char *err, size_t errlen)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	const struct cidr *forbidden;
	struct egress_bpf *s;
	struct bpf_map *m;
	size_t n;
	int rc;

	s = egress_bpf__open();
	if (!s) {
		rc = -errno;
		snprintf(err, errlen, "cannot open the egress BPF object: %s", strerror(-rc));
		return rc;
	}
	s->rodata->ts_shift = enforce_ts_shift();
	rc = egress_bpf__load(s);
	if (rc) {
		snprintf(err, errlen,
			 "cannot load the egress BPF programs: %s; errand needs a BTF kernel "
			 "(6.1 or newer) with BPF enabled; run with -v for the verifier's log",
			 strerror(-rc));
		goto out;
	}
	forbidden = forbidden_ranges(&n);
	rc = fill_ranges(bpf_map__fd(s->maps.forbid4), bpf_map__fd(s->maps.forbid6), forbidden, n);
	if (rc) {
		snprintf(err, errlen, "cannot fill the forbidden ranges map: %s", strerror(-rc));
		goto out;
	}
	if (path_fmt(tmp, sizeof(tmp), "%s/new-%d-%ld", prog_dir, (int)getpid(), (long)gettid()))
		errno = ENAMETOOLONG;
	else if (!mkdir(tmp, 0700))
		errno = 0;
	if (errno) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(-rc));
		goto out;
	}
	for (int i = 0; i < P_MAX && !rc; i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(s->obj, prog_names[i]);

		rc = !p ? -ENOENT : path_fmt(path, sizeof(path), "%s/%s", tmp, prog_names[i]);
		if (!rc && bpf_obj_pin(bpf_program__fd(p), path))
			rc = -errno;
	}
	bpf_object__for_each_map(m, s->obj)
	{
		if (rc || bpf_map__is_internal(m))
			continue;
		rc = path_fmt(path, sizeof(path), "%s/%s", tmp, bpf_map__name(m));
		if (!rc && bpf_obj_pin(bpf_map__fd(m), path))
			rc = -errno;
	}
	if (!rc && rename(tmp, dir) && errno != ENOTEMPTY && errno != EEXIST)
		rc = -errno;
	if (rc)
		snprintf(err, errlen, "cannot pin the egress programs under %s: %s", dir,
			 strerror(-rc));
	remove_tree(tmp);
out:
	egress_bpf__destroy(s);
	return rc;
}

/* The set of this build's object, under <bpf_dir>/prog/: the one this
 * process holds, the one pinned there, or loaded now. Called with set_lock. */
static struct progset *set_get(const char *bpf_dir, char *err, size_t errlen)
{
	char prog_dir[PATH_MAX], dir[PATH_MAX];
	uint64_t hash = object_hash();
	struct progset *ps;
	int rc;

	if (path_fmt(prog_dir, sizeof(prog_dir), "%s/prog", bpf_dir) ||
	    path_fmt(dir, sizeof(dir), "%s/%016llx", prog_dir, (unsigned long long)hash)) {
		snprintf(err, errlen, "the path %s is too long", bpf_dir);
		errno = ENAMETOOLONG;
		return NULL;
	}
	/* Still pinned: a set whose pins went would leave its sessions' keys
	 * in maps no teardown finds. */
	if (set_cur && !strcmp(set_cur->dir, dir) && access(dir, F_OK) == 0)
		return set_cur;
	if (mkdir(prog_dir, 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", prog_dir, strerror(-rc));
		errno = -rc;
		return NULL;
	}
	ps = set_open(dir, hash);
	if (!ps) {
		if ((rc = set_create(prog_dir, dir, err, errlen))) {
			/* nothing left behind: the directory goes unless it holds sets */
			rmdir(prog_dir);
			errno = -rc;
			return NULL;
		}
		ps = set_open(dir, hash);
		if (!ps) {
			rc = -errno;
			snprintf(err, errlen, "cannot open the egress programs pinned at %s: %s",
				 dir, strerror(-rc));
			errno = -rc;
			return NULL;
		}
	}
	set_free(set_cur);
	set_cur = ps;
	set_gen++;
	return ps;
}

int enforce_preload(const char *bpf_dir, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&set_lock);
	if (!set_get(bpf_dir, err, errlen))
		rc = -errno;
	pthread_mutex_unlock(&set_lock);
	return rc;
}

/* A session without network has the maps its refusals use alone (its
 * settings, its events, its counters): every other one is for what it may
 * reach, and its programs refuse as if each were empty when it is not
 * there (policy.h). Eight maps fewer to make, pin, put into the set and
 * take out again a session. Without sandbox.egress.treatAsPublic, the
 * public-range maps would stay empty: a forbidden range stays forbidden
 * without them. */
static bool inner_used(int i, const struct enforce_params *p)
{
	if (i == I_PUBLIC4 || i == I_PUBLIC6)
		return p->mode != EGRESS_MODE_NONE && p->n_public > 0;
	return p->mode != EGRESS_MODE_NONE || i == I_CONFIG || i == I_EVENTS || i == I_COUNTERS;
}

static int fill_session(int fd[I_MAX], const struct enforce_params *p, char *err, size_t errlen)
{
	__u8 one = 1;
	int rc;

	if (p->mode == EGRESS_MODE_NONE)
		return 0; /* none of these maps was made: inner_used */
	if ((rc = fill_ranges(fd[I_PUBLIC4], fd[I_PUBLIC6], p->public_ranges, p->n_public))) {
		snprintf(err, errlen, "cannot fill the treat-as-public ranges map: %s",
			 strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < p->n_ports; i++) {
		__u16 port = p->ports[i];

		if (bpf_map_update_elem(fd[I_PORTS], &port, &one, BPF_ANY)) {
			snprintf(err, errlen, "cannot fill the ports map: %s", strerror(errno));
			return -errno;
		}
	}
	for (size_t i = 0; i < p->n_self; i++) {
		struct lpm6_key k;

		if (bpf_map_update_elem(fd[I_SELF], self_key_of(true, &k, &p->self[i]), &one,
					BPF_ANY)) {
			snprintf(err, errlen, "cannot fill the own-addresses map: %s",
				 strerror(errno));
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

/* The session's cgroup links, pinned: its hooks run from here, under the
 * config its map holds (a prepared network's refuses everything: mode none,
 * until its start writes the session's). */
static int link_cgroup(const struct progset *ps, const struct enforce_params *p, char *err,
		       size_t errlen)
{
	cleanup_close int cg_fd = open(p->cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char path[PATH_MAX];

	if (cg_fd < 0) {
		snprintf(err, errlen, "cannot open cgroup %s: %s", p->cgroup_path, strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		int link, rc;

		if (!hook_used(i, p->mode))
			continue;
		link = bpf_link_create(ps->prog[i], cg_fd, hooks[i].type, NULL);
		if (link < 0) {
			rc = -errno;
			snprintf(err, errlen,
				 "cannot attach %s to cgroup %s: %s; errand needs a kernel with "
				 "cgroup BPF (CONFIG_CGROUP_BPF)",
				 hooks[i].pin, p->cgroup_path, strerror(-rc));
			return rc;
		}
		snprintf(path, sizeof(path), "%s/%s", p->pin_dir, hooks[i].pin);
		/* The pin holds the link from here; our fd can go. */
		rc = bpf_obj_pin(link, path) ? -errno : 0;
		close(link);
		if (rc) {
			snprintf(err, errlen, "cannot pin link %s: %s", path, strerror(-rc));
			return rc;
		}
	}
	/* The cgroup's storage came with its first link: its key there is
	 * what the hooks know the session by (sess_cg). */
	if (bpf_map_update_elem(ps->sess_cg, &p->cgroup_id, &p->cgroup_id, BPF_EXIST)) {
		int rc = -errno;

		snprintf(err, errlen, "cannot write the session's key into cgroup %s: %s",
			 p->cgroup_path, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Each hook's program among those that run for the session's cgroup, as
 * the kernel says at the start, whenever its links were made. */
static int verify_hooks(const struct progset *ps, const struct enforce_params *p, char *err,
			size_t errlen)
{
	cleanup_close int cg_fd = open(p->cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	__u64 key = 0;

	if (cg_fd < 0) {
		snprintf(err, errlen, "cannot open cgroup %s: %s", p->cgroup_path, strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		int rc = hook_used(i, p->mode) ? verify_cgroup(cg_fd, hooks[i].type, ps->prog_id[i])
					       : 0;

		if (rc) {
			snprintf(err, errlen,
				 "enforcement not verified: %s is not attached to cgroup %s (%s)",
				 hooks[i].pin, p->cgroup_path, strerror(-rc));
			return rc;
		}
	}
	if (bpf_map_lookup_elem(ps->sess_cg, &p->cgroup_id, &key) || key != p->cgroup_id) {
		snprintf(err, errlen,
			 "enforcement not verified: cgroup %s does not hold the session's key "
			 "for its hooks",
			 p->cgroup_path);
		return -ENOENT;
	}
	return 0;
}

/* Each kind of cgroup hook is behind a static key the kernel turns on with
 * the first program of that kind attached anywhere and off with the last:
 * each turn rewrites the kernel's code at every call site, which stops every
 * CPU. A host running one session at a time turned nine keys on at each
 * start and off at each end (most of the 1.6 ms a start spent attaching).
 * So the agent keeps the set's hooks attached to an empty cgroup of its own
 * (no process is ever in it, so they never run) while it lives: links held
 * by this process, not pinned, so they go with it. Under set_lock. */
static struct {
	char path[PATH_MAX];
	int link[ARRAY_SIZE(hooks)];
	bool held;
} hold;

static void hooks_hold(const struct progset *ps, const char *path)
{
	cleanup_close int cg_fd = -1;
	size_t i;

	if (hold.held || !path || path_fmt(hold.path, sizeof(hold.path), "%s", path))
		return;
	if (mkdir(path, 0755) && errno != EEXIST)
		return;
	cg_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (i = 0; cg_fd >= 0 && i < ARRAY_SIZE(hooks); i++)
		if ((hold.link[i] = bpf_link_create(ps->prog[i], cg_fd, hooks[i].type, NULL)) < 0)
			break;
	if (cg_fd >= 0 && i == ARRAY_SIZE(hooks)) {
		hold.held = true;
		return;
	}
	/* a speed-up, not a guarantee: without it starts are slower, no less
	 * enforced */
	while (i-- > 0)
		close(hold.link[i]);
	rmdir(path);
}

void enforce_hooks_release(void)
{
	pthread_mutex_lock(&set_lock);
	if (hold.held) {
		for (size_t i = 0; i < ARRAY_SIZE(hooks); i++)
			close(hold.link[i]);
		rmdir(hold.path);
		hold.held = false;
	}
	pthread_mutex_unlock(&set_lock);
}

/* tcx (Linux 6.6): a veth's own list of programs, run before and without
 * tc's classifier. Attach types newer than the headers errand builds with. */
#define TCX_INGRESS 46
#define TCX_EGRESS 47

static __u32 tcx_type(enum bpf_tc_attach_point at)
{
	return at == BPF_TC_INGRESS ? TCX_INGRESS : TCX_EGRESS;
}

/* Whether this kernel has tcx: unknown until a query says (0), no (-1:
 * 6.1 to 6.5). Set and read without set_lock. */
static _Atomic int tcx_state;

/* The program a veth's tcx hook runs first on that side, which decides
 * alone, before any clsact filter: its id, 0 when the hook has none or the
 * kernel no tcx (before 6.6). errand puts none there (link_tc_one says
 * why); one there is an older errand's (tcx_detach) or another's. */
static __u32 tcx_first(int ifindex, enum bpf_tc_attach_point at)
{
	__u32 ids[4] = {0}, n = ARRAY_SIZE(ids);

	if (tcx_state < 0)
		return 0;
	if (bpf_prog_query(ifindex, tcx_type(at), 0, NULL, ids, &n) && errno != ENOSPC) {
		if (errno == EINVAL)
			tcx_state = -1;
		return 0;
	}
	return n ? ids[0] : 0;
}

/* Takes a session's tcx links off its veth now: those of a network an
 * older errand prepared (it pinned its tc programs as tcx links in the
 * session's directory). Unpinned, a link is released later, by a kernel
 * worker: a start that makes such a network its own again, with clsact,
 * would find the old set's program still first on the hook, deciding
 * alone. */
static void tcx_detach(const char *pin_dir)
{
	static const char *const name[2] = {"tc_ingress_link", "tc_egress_link"};
	char path[PATH_MAX];

	for (int i = 0; i < 2; i++) {
		cleanup_close int fd = -1;

		if (path_fmt(path, sizeof(path), "%s/%s", pin_dir, name[i]))
			continue;
		fd = bpf_obj_get(path);
		if (fd >= 0)
			bpf_link_detach(fd);
	}
}

/* The backstop on the host side of the veth's ingress, the flow guard on
 * its egress (bpf/egress.bpf.c, errand_tc_out): clsact filters, which live
 * as long as the device and need no pin; made again under a new set, a
 * prepared network's filter is replaced in place, so the veth is never
 * without one. Not tcx links, though the tc hook costs a clsact filter
 * about 2 us of a connection's 70 and a tcx link nothing measurable
 * (BENCHMARKS.md): a tcx attach, and its removal with the device, each wait
 * for an RCU grace period holding the RTNL lock (8 to 30 ms), four a
 * session, in which no link, address or namespace of the host's is made or
 * removed by anyone, and a pool's preparations back to back took 45 ms a
 * start. The program is pinned in the session's directory, for show and to
 * keep it while the session lives whatever becomes of its set. */
static int link_tc_one(int fd, const struct enforce_params *p, enum bpf_tc_attach_point at,
		       const char *name, const char *what, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = p->host_ifindex, .attach_point = at);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1, .flags = BPF_TC_F_REPLACE,
		    .prog_fd = fd);
	char path[PATH_MAX];
	int rc = 0;

	/* clsact is made with the ingress filter */
	if (at == BPF_TC_INGRESS && (rc = bpf_tc_hook_create(&hook)) && rc != -EEXIST) {
		snprintf(err, errlen,
			 "cannot add clsact to ifindex %d: %s; errand needs tc's clsact "
			 "qdisc (CONFIG_NET_SCH_INGRESS, module sch_ingress)",
			 p->host_ifindex, strerror(-rc));
		return rc;
	}
	rc = bpf_tc_attach(&hook, &opts);
	if (rc) {
		snprintf(err, errlen,
			 "cannot attach the tc %s to ifindex %d: %s; errand needs BPF "
			 "classifiers in tc (CONFIG_NET_CLS_BPF, module cls_bpf)",
			 what, p->host_ifindex, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/%s", p->pin_dir, name);
	if (bpf_obj_pin(fd, path)) {
		rc = -errno;
		snprintf(err, errlen, "cannot pin program %s: %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

/* Does the veth run program id on that side: first on its tcx hook, or as
 * errand's clsact filter? 0 or -errno. */
static int tc_runs(int ifindex, enum bpf_tc_attach_point at, __u32 id)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = at);
	LIBBPF_OPTS(bpf_tc_opts, query, .handle = 1, .priority = 1);
	__u32 first = tcx_first(ifindex, at);
	int rc;

	/* A tcx program runs before any clsact filter and decides alone. */
	if (first)
		return first == id ? 0 : -EEXIST;
	rc = bpf_tc_query(&hook, &query);
	return !rc && query.prog_id != id ? -ENOENT : rc;
}

static int verify_tc_one(__u32 id, const struct enforce_params *p, enum bpf_tc_attach_point at,
			 const char *what, char *err, size_t errlen)
{
	int rc = tc_runs(p->host_ifindex, at, id);

	if (rc == -EEXIST)
		snprintf(err, errlen,
			 "enforcement not verified: another program runs before the tc %s on "
			 "ifindex %d's tcx hook",
			 what, p->host_ifindex);
	else if (rc)
		snprintf(err, errlen,
			 "enforcement not verified: the tc %s is not on ifindex %d (%s)", what,
			 p->host_ifindex, strerror(-rc));
	return rc;
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

/* An update or delete of a map-in-map returns only after an RCU grace period
 * (the kernel waits for programs that may still use the old value): one
 * after another, a session's eleven cost 100 ms and more. Each in a thread
 * of its own (kept in outer_workers between sessions), the waits overlap. A
 * batch holds the ops and the descriptors they name until outer_wait. */
struct outer_op {
	int map;
	__u64 key;
	int value; /* an inner map's fd; -1: delete the key */
	int rc;
	struct outer_batch *batch;
};

struct outer_batch {
	pthread_mutex_t mu;
	pthread_cond_t done;
	size_t pending;
	size_t n;
	struct outer_op ops[I_MAX];
	bool close_maps; /* the ops' map descriptors are the batch's to close */
};

static void outer_op_run(struct outer_op *op)
{
	if (op->value >= 0)
		op->rc = bpf_map_update_elem(op->map, &op->key, &op->value, BPF_ANY) ? -errno : 0;
	else
		op->rc = bpf_map_delete_elem(op->map, &op->key) ? -errno : 0;
}

static void outer_op_task(void *arg)
{
	struct outer_op *op = arg;
	struct outer_batch *b = op->batch;

	outer_op_run(op);
	pthread_mutex_lock(&b->mu);
	if (--b->pending == 0)
		pthread_cond_signal(&b->done);
	pthread_mutex_unlock(&b->mu);
}

/* An op's thread makes one system call: a small stack. With glibc's 8 MiB
 * default, the eleven threads of each prepared network overflowed its cache
 * of stacks, and every unmap of one took the agent's memory lock for
 * writing and interrupted each CPU to flush it, stalling the session
 * starting meanwhile (its launcher's exec waits for that lock). Two refills'
 * inserts and two teardowns' deletes at once, as starts back to back have
 * them: four times a session's maps kept (fewer made threads that ended with
 * their op, a dozen thread starts and ends a session). */
#define OUTER_OP_STACK (64 * 1024)
static struct workers outer_workers = WORKERS_INIT(OUTER_OP_STACK, 4 * I_MAX);

static void outer_start(struct outer_batch *b, const struct outer_op *ops, size_t n)
{
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->done, NULL);
	b->n = n < I_MAX ? n : I_MAX;
	b->pending = 1;
	for (size_t i = 0; i < b->n; i++) {
		b->ops[i] = ops[i];
		b->ops[i].batch = b;
		pthread_mutex_lock(&b->mu);
		b->pending++;
		pthread_mutex_unlock(&b->mu);
		/* No thread for it: done here, as the last resort. */
		if (workers_run(&outer_workers, outer_op_task, &b->ops[i]))
			outer_op_task(&b->ops[i]);
	}
	pthread_mutex_lock(&b->mu);
	b->pending--;
	pthread_mutex_unlock(&b->mu);
}

/* 0, or the first op's error (its index in *failed). */
static int outer_wait(struct outer_batch *b, size_t *failed)
{
	int rc = 0;

	pthread_mutex_lock(&b->mu);
	while (b->pending)
		pthread_cond_wait(&b->done, &b->mu);
	pthread_mutex_unlock(&b->mu);
	pthread_cond_destroy(&b->done);
	pthread_mutex_destroy(&b->mu);
	for (size_t i = 0; i < b->n; i++) {
		if (b->ops[i].rc && !rc) {
			*failed = i;
			rc = b->ops[i].rc;
		}
		if (b->close_maps)
			close(b->ops[i].map);
	}
	return rc;
}

static int outer_ops(struct outer_op *ops, size_t n, size_t *failed)
{
	struct outer_batch b = {};

	outer_start(&b, ops, n);
	return outer_wait(&b, failed);
}

/* The prepared session's insertions done: 0, or why one failed. */
static int inserts_wait(struct enforce *e, char *err, size_t errlen)
{
	size_t bad = 0;
	int rc;

	if (!e->inserts)
		return 0;
	rc = outer_wait(e->inserts, &bad);
	if (rc)
		snprintf(err, errlen, "cannot add the session to the %s map: %s", inners[bad].outer,
			 strerror(-rc));
	free(e->inserts);
	e->inserts = NULL;
	return rc;
}

/* <paths.bpf> from <paths.bpf>/<id>. */
static void parent_dir(const char *pin_dir, char *out, size_t len)
{
	const char *slash = strrchr(pin_dir, '/');

	snprintf(out, len, "%.*s", slash ? (int)(slash - pin_dir) : 1, slash ? pin_dir : ".");
}

static void enforce_init(struct enforce *e)
{
	e->allow_fd = e->events_fd = e->grants_fd = e->self_fd = e->counters_fd = e->once_fd = -1;
	e->veth_fd = -1;
	for (int i = 0; i < I_MAX; i++)
		e->fd[i] = -1;
}

static struct sess_cfg session_cfg_of(const struct enforce_params *p, uint64_t set_hash)
{
	struct sess_cfg cfg = {
		.cgid = p->cgroup_id,
		.mode = p->mode,
		.sess_addr4 = p->sess4,
		.gw_addr4 = p->gw4,
		.ifindex = (__u32)p->host_ifindex,
		.dns_port = p->dns_port,
		.broker_port = p->broker_port,
		.set_hash = set_hash,
		.relay_port = p->relay_port,
		.route6 = p->route6,
	};

	memcpy(cfg.gw_addr6, p->gw6, 16);
	memcpy(cfg.sess_addr6, p->sess6, 16);
	return cfg;
}

#define VETH_SESS_TRIES 20

/* The session's settings into its veth's entry of the set's veth_sess, every
 * CPU's copy (egress.h, struct veth_sess_val); the tc programs' counts kept,
 * or zeroed for a new entry (a veth's ifindex may be a gone one's). */
static int veth_sess_write(int fd, __u32 ifindex, const struct sess_cfg *cfg, bool fresh)
{
	int ncpu = libbpf_num_possible_cpus();
	cleanup_free struct veth_sess_val *v = NULL;

	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	if (!(v = calloc((size_t)ncpu, sizeof(*v))))
		return -ENOMEM;
	if (!fresh && bpf_map_lookup_elem(fd, &ifindex, v))
		memset(v, 0, (size_t)ncpu * sizeof(*v));
	for (int c = 0; c < ncpu; c++)
		v[c].cfg = *cfg;
	/* An entry's per-CPU part comes from the kernel's atomic per-CPU
	 * reserve, which its worker refills: at a thousand sessions, started
	 * fifty at a time, one start in a thousand found it empty (ENOMEM) for
	 * a moment. */
	for (int tries = 0;; tries++) {
		if (!bpf_map_update_elem(fd, &ifindex, v, BPF_ANY))
			return 0;
		if (errno != ENOMEM || tries == VETH_SESS_TRIES)
			return -errno;
		usleep(1000);
	}
}

/* A set's map of veths, -1 with errno if it has none. Sets pinned by an
 * errand before the settings and counts moved there have tc_sess instead, a
 * hash of keys alone: a name of its own, so that such an errand, reading a
 * key of __u64 from it, never opens this map of larger values. */
static int veth_sess_open(const char *set_dir, char *err, size_t errlen)
{
	int fd = pin_open(set_dir, "veth_sess", err, errlen);

	return fd >= 0 ? fd : pin_open(set_dir, "tc_sess", err, errlen);
}

/* The key a set's map of veths holds for a veth (0: none) and the tc
 * programs' counts there, summed over the CPUs into cnt (zero in an older
 * set's tc_sess, which holds the key alone). */
static __u64 veth_sess_read(int fd, __u32 ifindex, uint64_t cnt[CNT_MAX])
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int ncpu = libbpf_num_possible_cpus();
	cleanup_free struct veth_sess_val *v = NULL;
	__u64 key = 0;

	memset(cnt, 0, sizeof(uint64_t) * CNT_MAX);
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return 0;
	if (info.type == BPF_MAP_TYPE_HASH && info.value_size == sizeof(key))
		return bpf_map_lookup_elem(fd, &ifindex, &key) ? 0 : key;
	if (info.type != BPF_MAP_TYPE_PERCPU_HASH || info.value_size != sizeof(*v) || ncpu <= 0 ||
	    !(v = calloc((size_t)ncpu, sizeof(*v))) || bpf_map_lookup_elem(fd, &ifindex, v))
		return 0;
	for (int c = 0; c < ncpu; c++)
		for (int i = 0; i < CNT_MAX; i++)
			cnt[i] += v[c].cnt[i];
	return v[0].cfg.cgid;
}

/* The session's veth in its set's map of veths: the map, the veth's ifindex
 * and the key its entry holds. -ENOENT: no veth (--egress none). */
static int veth_of(const char *pin_dir, int *fd, __u32 *ifindex, __u64 *key)
{
	char err[PATH_MAX + 64], bpf_dir[PATH_MAX], set_dir[PATH_MAX];
	struct sess_cfg cfg;

	*fd = -1;
	if (session_cfg(pin_dir, &cfg) || !cfg.ifindex)
		return -ENOENT;
	parent_dir(pin_dir, bpf_dir, sizeof(bpf_dir));
	if (path_fmt(set_dir, sizeof(set_dir), "%s/prog/%016llx", bpf_dir,
		     (unsigned long long)cfg.set_hash))
		return -ENAMETOOLONG;
	if ((*fd = veth_sess_open(set_dir, err, sizeof(err))) < 0)
		return -errno;
	*ifindex = cfg.ifindex;
	*key = cfg.cgid;
	return 0;
}

/* -EAGAIN with why in err: the set changed while a session was added. */
static int set_replaced(const char *bpf_dir, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "the program set under %s was replaced while the session was added to it; start "
		 "the session again",
		 bpf_dir);
	return -EAGAIN;
}

/* The session's veth, once its maps are in the set: its ifindex and
 * addresses in its config (the mode still none: enforce_unpin finds the
 * veth's key through it), the session's key under the ifindex in veth_sess,
 * and its tc filters. Under set_lock, ps the set's. */
static int prepare_veth_locked(struct enforce *e, const struct progset *ps,
			       const struct enforce_params *p, char *err, size_t errlen)
{
	struct sess_cfg cfg = session_cfg_of(p, ps->hash);
	__u32 zero = 0;
	int rc;

	cfg.mode = EGRESS_MODE_NONE;
	rc = bpf_map_update_elem(e->fd[I_CONFIG], &zero, &cfg, BPF_ANY) ? -errno : 0;
	if (!rc)
		rc = veth_sess_write(ps->veth_sess, cfg.ifindex, &cfg, true);
	if (rc) {
		snprintf(err, errlen, "cannot add the session's veth: %s", strerror(-rc));
		return rc;
	}
	rc = link_tc_one(ps->prog[P_TC_IN], p, BPF_TC_INGRESS, "tc_ingress", "backstop", err,
			 errlen);
	if (!rc)
		rc = link_tc_one(ps->prog[P_TC_OUT], p, BPF_TC_EGRESS, "tc_egress", "flow guard",
				 err, errlen);
	return rc;
}

/* The session's maps, made, pinned and put into the set under its key.
 * Called with set_lock held, which it gives up around the insertions: each
 * waits for an RCU grace period (why sandbox.pool does this ahead of a
 * start), and a pool refill holding the lock through them made the next
 * start's attach wait too. The set's outer maps are held by duplicates
 * meanwhile, so a set replaced in between is never written through a
 * closed descriptor. No program runs for the session yet: no link is
 * attached to its cgroup nor to its veth. */
static int prepare_locked(struct enforce *e, const struct enforce_params *p, bool wait, char *err,
			  size_t errlen)
{
	char bpf_dir[PATH_MAX], path[PATH_MAX];
	int rc = 0;
	struct progset *ps;
	struct sess_cfg cfg;
	__u64 key = p->cgroup_id;
	__u32 zero = 0;
	int outer[I_MAX];

	parent_dir(p->pin_dir, bpf_dir, sizeof(bpf_dir));
	if (!(ps = set_get(bpf_dir, err, errlen)))
		return -errno;
	e->set_hash = ps->hash;
	e->set_gen = set_gen;
	cfg = session_cfg_of(p, ps->hash);
	/* Until the start writes the session's own (attach_locked), its links
	 * refuse everything. */
	cfg.mode = EGRESS_MODE_NONE;
	for (int i = 0; i < I_MAX; i++)
		outer[i] = fcntl(ps->outer[i], F_DUPFD_CLOEXEC, 3);
	for (int i = 0; i < I_MAX && !rc; i++)
		if (outer[i] < 0)
			rc = -errno;
	if (rc)
		snprintf(err, errlen, "cannot hold the program set's maps: %s", strerror(-rc));
	pthread_mutex_unlock(&set_lock);
	for (int i = 0; i < I_MAX && !rc; i++) {
		LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = inners[i].flags);

		if (!inner_used(i, p))
			continue;
		e->fd[i] = bpf_map_create(inners[i].type, inners[i].pin, inners[i].key,
					  inners[i].value, inners[i].max, &o);
		if (e->fd[i] < 0) {
			rc = -errno;
			snprintf(err, errlen, "cannot create the session's %s map: %s",
				 inners[i].pin, strerror(-rc));
		}
	}
	if (!rc && bpf_map_update_elem(e->fd[I_CONFIG], &zero, &cfg, BPF_ANY)) {
		rc = -errno;
		snprintf(err, errlen, "cannot fill the session's config map: %s", strerror(-rc));
	}
	if (!rc && mkdir(p->pin_dir, 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", p->pin_dir, strerror(-rc));
	}
	/* The config pin first: whatever fails after it, enforce_unpin finds
	 * the session's keys in the set through it. */
	for (int i = 0; i < I_MAX && !rc; i++) {
		if (e->fd[i] < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", p->pin_dir, inners[i].pin);
		if (bpf_obj_pin(e->fd[i], path)) {
			rc = -errno;
			snprintf(err, errlen, "cannot pin map %s: %s", path, strerror(-rc));
		}
	}
	/* Into the set under the session's key, all at once; the batch closes
	 * the set's maps held for it. A prepared network does not wait for
	 * the grace periods: its start does, if they are not over yet. */
	if (!rc && !(e->inserts = calloc(1, sizeof(*e->inserts)))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
	}
	if (!rc) {
		struct outer_op ops[I_MAX];
		size_t n = 0;

		for (int i = 0; i < I_MAX; i++) {
			if (e->fd[i] >= 0)
				ops[n++] = (struct outer_op){
					.map = outer[i], .key = key, .value = e->fd[i]};
			else
				close(outer[i]);
		}
		e->inserts->close_maps = true;
		outer_start(e->inserts, ops, n);
		if (wait)
			rc = inserts_wait(e, err, errlen);
	} else {
		for (int i = 0; i < I_MAX; i++)
			if (outer[i] >= 0)
				close(outer[i]);
	}
	pthread_mutex_lock(&set_lock);
	if (!rc && e->set_gen != set_gen)
		rc = set_replaced(bpf_dir, err, errlen);
	/* Its links and tc filters too (set_gen unchanged: ps is still the
	 * set's), so a start from the pool only verifies them: their attach
	 * takes the cgroup core's and rtnetlink's locks, a netlink socket a
	 * filter, and was a millisecond of every start. They hold the kernel's
	 * static keys of their kinds on while the entry waits, as the agent's
	 * own hooks cgroup does (hooks_hold), and tc's ingress and egress: a
	 * start attaching, and the end of a session whose veth goes, turn
	 * none. */
	if (!rc)
		rc = link_cgroup(ps, p, err, errlen);
	if (!rc && p->host_ifindex)
		rc = prepare_veth_locked(e, ps, p, err, errlen);
	e->prepared = !rc;
	return rc;
}

/* The session's policy into its maps, then its settings (the mode that
 * opens what the policy allows): from here its hooks and backstop, attached
 * when it was prepared, enforce its own; each verified where the kernel
 * runs it. Under set_lock. */
static int attach_locked(struct enforce *e, const struct enforce_params *p, char *err,
			 size_t errlen)
{
	char bpf_dir[PATH_MAX];
	struct progset *ps;
	struct sess_cfg cfg;
	__u32 zero = 0;
	int rc = 0;

	parent_dir(p->pin_dir, bpf_dir, sizeof(bpf_dir));
	if (!(ps = set_get(bpf_dir, err, errlen)))
		return -errno;
	cfg = session_cfg_of(p, ps->hash);
	rc = fill_session(e->fd, p, err, errlen);
	if (!rc && bpf_map_update_elem(e->fd[I_CONFIG], &zero, &cfg, BPF_ANY)) {
		rc = -errno;
		snprintf(err, errlen, "cannot fill the session's config map: %s", strerror(-rc));
	}
	/* and its copy, which the tc programs read */
	if (!rc && p->host_ifindex &&
	    (rc = veth_sess_write(ps->veth_sess, cfg.ifindex, &cfg, false)))
		snprintf(err, errlen, "cannot fill the session's veth entry: %s", strerror(-rc));
	if (!rc) {
		hooks_hold(ps, p->hooks_cgroup);
		rc = verify_hooks(ps, p, err, errlen);
	}
	if (!rc && p->host_ifindex)
		rc = verify_tc_one(ps->prog_id[P_TC_IN], p, BPF_TC_INGRESS, "backstop", err,
				   errlen);
	if (!rc && p->host_ifindex)
		rc = verify_tc_one(ps->prog_id[P_TC_OUT], p, BPF_TC_EGRESS, "flow guard", err,
				   errlen);
	if (rc)
		return rc;
	e->allow_fd = e->fd[I_ALLOW];
	e->events_fd = e->fd[I_EVENTS];
	e->grants_fd = e->fd[I_GRANTS];
	e->self_fd = e->fd[I_SELF];
	e->counters_fd = e->fd[I_COUNTERS];
	e->once_fd = e->fd[I_ONCE];
	e->allow_trie = e->self_trie = true;
	e->allow_n = 0;
	e->fd[I_ALLOW] = e->fd[I_EVENTS] = e->fd[I_GRANTS] = e->fd[I_SELF] = e->fd[I_COUNTERS] =
		e->fd[I_ONCE] = -1;
	for (int i = 0; i < I_MAX; i++) {
		if (e->fd[i] >= 0)
			close(e->fd[i]);
		e->fd[i] = -1;
	}
	e->prepared = false;
	return 0;
}

struct enforce *enforce_prepare(const struct enforce_params *p, char *err, size_t errlen)
{
	struct enforce *e = calloc(1, sizeof(*e));
	int rc;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	enforce_init(e);
	pthread_mutex_lock(&set_lock);
	rc = prepare_locked(e, p, false, err, errlen);
	pthread_mutex_unlock(&set_lock);
	if (rc) {
		char ignored[8];

		inserts_wait(e, ignored, sizeof(ignored)); /* before the keys are taken out */
		enforce_unpin(p->pin_dir);
		enforce_free(e);
		errno = -rc;
		return NULL;
	}
	return e;
}

int enforce_prepare_veth(struct enforce *e, const struct enforce_params *p, char *err,
			 size_t errlen)
{
	char bpf_dir[PATH_MAX];
	struct progset *ps;
	int rc;

	parent_dir(p->pin_dir, bpf_dir, sizeof(bpf_dir));
	pthread_mutex_lock(&set_lock);
	if (!(ps = set_get(bpf_dir, err, errlen)))
		rc = -errno;
	else if (ps->hash != e->set_hash || e->set_gen != set_gen)
		rc = set_replaced(bpf_dir, err, errlen);
	else
		rc = prepare_veth_locked(e, ps, p, err, errlen);
	e->prepared = e->prepared && !rc;
	pthread_mutex_unlock(&set_lock);
	return rc;
}

/* A prepared session of the set this process serves now; one of an older
 * set (the object changed since) is not taken. Under set_lock. */
static bool prepared_current(const struct enforce *e, const char *pin_dir)
{
	char bpf_dir[PATH_MAX], err[256];
	struct progset *ps;

	parent_dir(pin_dir, bpf_dir, sizeof(bpf_dir));
	ps = set_get(bpf_dir, err, sizeof(err));
	return e && e->prepared && ps && ps->hash == e->set_hash && e->set_gen == set_gen;
}

struct enforce *enforce_attach(const struct enforce_params *p, struct enforce *prepared, char *err,
			       size_t errlen)
{
	struct enforce *e = prepared;
	int rc = e ? inserts_wait(e, err, errlen) : 0;

	pthread_mutex_lock(&set_lock);
	if (e && (rc || !prepared_current(e, p->pin_dir))) {
		rc = 0;
		tcx_detach(p->pin_dir);
		enforce_unpin(p->pin_dir);
		enforce_free(e);
		e = NULL;
	}
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e) {
			pthread_mutex_unlock(&set_lock);
			snprintf(err, errlen, "out of memory");
			errno = ENOMEM;
			return NULL;
		}
		enforce_init(e);
		rc = prepare_locked(e, p, true, err, errlen);
	}
	if (!rc)
		rc = attach_locked(e, p, err, errlen);
	pthread_mutex_unlock(&set_lock);
	if (rc)
		goto fail;
	e->rb = ring_buffer__new(e->events_fd, on_event, e, NULL);
	if (!e->rb) {
		rc = -errno;
		snprintf(err, errlen, "cannot read the event ring buffer: %s", strerror(-rc));
		goto fail;
	}
	return e;

fail:
	enforce_unpin(p->pin_dir);
	enforce_free(e);
	errno = -rc;
	return NULL;
}

int enforce_allow(struct enforce *e, const struct addr *a, uint16_t port, uint64_t expires_ns,
		  uint32_t flags)
{
	struct allow_lkey lk;
	struct allow_val v = {.expires_ns = expires_ns, .flags = flags}, old;
	void *k = allow_key_of(e->allow_trie, &lk, a, port);
	bool fresh = bpf_map_lookup_elem(e->allow_fd, k, &old) != 0;

	if (fresh && e->allow_n >= EGRESS_ALLOW_MAX)
		return -E2BIG;
	if (bpf_map_update_elem(e->allow_fd, k, &v, BPF_ANY))
		return -errno;
	e->allow_n += fresh;
	return 0;
}

int enforce_expire(struct enforce *e, uint64_t now_ns)
{
	int fd = e->allow_fd, n = 0;
	struct allow_lkey lk, lnext;
	void *k = allow_key_of(e->allow_trie, &lk, NULL, 0);
	void *next = allow_key_of(e->allow_trie, &lnext, NULL, 0);
	size_t ksz = e->allow_trie ? sizeof(lk) : sizeof(lk.k);
	struct allow_val v;
	void *prev = NULL;

	/* Deleting the current key would restart the walk: step first. */
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		if (prev && bpf_map_lookup_elem(fd, k, &v) == 0 && v.expires_ns &&
		    v.expires_ns < now_ns && bpf_map_delete_elem(fd, k) == 0)
			n++;
		memcpy(k, next, ksz);
		prev = k;
	}
	if (prev && bpf_map_lookup_elem(fd, k, &v) == 0 && v.expires_ns && v.expires_ns < now_ns &&
	    bpf_map_delete_elem(fd, k) == 0)
		n++;
	e->allow_n -= (unsigned)n < e->allow_n ? (unsigned)n : e->allow_n;
	if (n)
		e->full_until_ns = 0;
	return n;
}

int enforce_allow_answer(struct enforce *e, const struct addr *a, uint16_t port,
			 uint64_t expires_ns, uint32_t flags, uint32_t grant)
{
	int fd = e->allow_fd;
	struct allow_lkey lk;
	void *k = allow_key_of(e->allow_trie, &lk, a, port);
	struct allow_val v = {.expires_ns = expires_ns, .flags = flags, .grant = grant};
	struct allow_val old;
	struct timespec ts;
	uint64_t now;
	bool fresh = true;

	/* Only the session's start writes pins (enforce_allow): an answer can
	 * neither make one nor replace one. */
	if (flags & ENTRY_F_PINNED)
		return -EINVAL;
	if (bpf_map_lookup_elem(fd, k, &old) == 0) {
		fresh = false;
		if (old.flags & ENTRY_F_PINNED)
			return 0;
		clock_gettime(CLOCK_BOOTTIME, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		/* Two names on one address and port (a CDN's): a once grant of
		 * one adds nothing where an entry that admits every connection
		 * is live, and must not make the other name's connects spend
		 * it; an answer of the policy's takes over a grant's live entry,
		 * so the policy's host is not cut when the grant ends. */
		if ((flags & ENTRY_F_ONCE) && !(old.flags & ENTRY_F_ONCE) && old.grant != grant &&
		    old.expires_ns > now)
			return 0;
		/* Otherwise another answer may already keep it longer, but a once
		 * grant's entry (perhaps spent) gives way to any other source. */
		if (grant == 0 && old.grant != 0 && !(old.flags & ENTRY_F_ONCE) &&
		    old.expires_ns > now) {
			old.grant = 0; /* the policy's, as long as either kept it */
		} else if ((!(old.flags & ENTRY_F_ONCE) || old.grant == grant) &&
			   old.expires_ns > expires_ns &&
			   (old.flags & ENTRY_F_RELAY) >= (flags & ENTRY_F_RELAY)) {
			return 0;
		}
		/* an address a secret host resolved to stays the broker's: another
		 * name's answer must not send the session around it */
		v.flags |= old.flags & ENTRY_F_RELAY;
		if (old.grant == grant && old.expires_ns > v.expires_ns)
			v.expires_ns = old.expires_ns;
	}
	/* The agent's own count says full before the map does (egress.h). */
	if (!(fresh && e->allow_n >= EGRESS_ALLOW_MAX)) {
		if (bpf_map_update_elem(fd, k, &v, BPF_ANY) == 0) {
			e->allow_n += fresh;
			return 0;
		}
		if (errno != E2BIG && errno != ENOSPC && errno != ENOMEM)
			return -errno;
	}
	clock_gettime(CLOCK_BOOTTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* A walk costs milliseconds on a full map: once a second at most. */
	if (now < e->full_until_ns)
		return -E2BIG;
	enforce_expire(e, now);
	if (e->allow_n < EGRESS_ALLOW_MAX && bpf_map_update_elem(fd, k, &v, BPF_ANY) == 0) {
		e->allow_n += fresh;
		return 0;
	}
	e->full_until_ns = now + ENFORCE_FULL_RECHECK_NS;
	return -E2BIG;
}

int enforce_self_add(struct enforce *e, const struct addr *a)
{
	struct lpm6_key k;
	__u8 one = 1;

	if (e->self_fd < 0)
		return 0; /* a session without network refuses every address alike */
	return bpf_map_update_elem(e->self_fd, self_key_of(e->self_trie, &k, a), &one, BPF_ANY)
		       ? -errno
		       : 0;
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
	int ncpu = libbpf_num_possible_cpus();
	__u32 key = CNT_EVENTS_SUPPRESSED;
	char err[256];

	if (e->counters_fd < 0 &&
	    (e->counters_fd = pin_open(pin_dir, EGRESS_MAP_COUNTERS, err, sizeof(err))) < 0)
		return -errno;
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	if (!e->cnt_vals && !(e->cnt_vals = calloc((size_t)ncpu, sizeof(*e->cnt_vals))))
		return -ENOMEM;
	if (bpf_map_lookup_elem(e->counters_fd, &key, e->cnt_vals))
		return -errno;
	*total = 0;
	for (int c = 0; c < ncpu; c++)
		*total += e->cnt_vals[c];
	/* the tc programs' refusals past the bucket are counted at the veth */
	if (!e->veth_looked) {
		e->veth_looked = true;
		veth_of(pin_dir, &e->veth_fd, &e->veth_ifindex, &e->veth_key);
	}
	if (e->veth_fd >= 0) {
		uint64_t tc[CNT_MAX];

		if (veth_sess_read(e->veth_fd, e->veth_ifindex, tc) == e->veth_key)
			*total += tc[CNT_EVENTS_SUPPRESSED];
	}
	*fresh = *total > e->reported ? *total - e->reported : 0;
	e->reported = *total;
	return 0;
}

void enforce_free(struct enforce *e)
{
	char ignored[8];

	if (!e)
		return;
	inserts_wait(e, ignored, sizeof(ignored)); /* its maps are still named there */
	ring_buffer__free(e->rb);
	if (e->allow_fd >= 0)
		close(e->allow_fd);
	if (e->events_fd >= 0)
		close(e->events_fd);
	if (e->self_fd >= 0)
		close(e->self_fd);
	if (e->once_fd >= 0)
		close(e->once_fd);
	if (e->counters_fd >= 0)
		close(e->counters_fd);
	if (e->veth_fd >= 0)
		close(e->veth_fd);
	free(e->cnt_vals);
	if (e->grants_fd >= 0)
		close(e->grants_fd);
	for (int i = 0; i < I_MAX; i++)
		if (e->fd[i] >= 0)
			close(e->fd[i]);
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

/* The allow map's entries, counted once when an agent takes over a
 * running session. */
static unsigned allow_count(const struct enforce *e)
{
	struct allow_lkey lk;
	void *k = allow_key_of(e->allow_trie, &lk, NULL, 0), *prev = NULL;
	unsigned n = 0;

	while (bpf_map_get_next_key(e->allow_fd, prev, k) == 0) {
		n++;
		prev = k;
	}
	return n;
}

struct enforce *enforce_open(const char *pin_dir, char *err, size_t errlen)
{
	struct enforce *e = calloc(1, sizeof(*e));
	struct sess_cfg cfg;
	int rc = -ENOMEM;
	bool none;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* every descriptor -1: enforce_free closes those that are not (a
	 * zeroed one closed descriptor 0, whatever it was by then) */
	enforce_init(e);
	/* A session without network has neither an allow map nor an
	 * own-address map (inner_used), nor the hooks that only restore
	 * addresses (hook_used). */
	none = session_cfg(pin_dir, &cfg) == 0 && cfg.mode == EGRESS_MODE_NONE;
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		int fd;

		if (!hook_used(i, none ? EGRESS_MODE_NONE : EGRESS_MODE_RESTRICTED))
			continue;
		if ((fd = pin_open(pin_dir, hooks[i].pin, err, errlen)) < 0) {
			rc = -errno;
			goto fail;
		}
		close(fd);
	}
	e->allow_fd = pin_open(pin_dir, "allow", err, errlen);
	if ((e->allow_fd < 0 && !(none && errno == ENOENT)) ||
	    (e->events_fd = pin_open(pin_dir, "events", err, errlen)) < 0) {
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
	if ((e->self_fd = pin_open(pin_dir, "self_addrs", err, errlen)) < 0 &&
	    !(none && errno == ENOENT)) {
		rc = -errno;
		goto fail;
	}
	e->allow_trie = map_is_trie(e->allow_fd);
	e->self_trie = map_is_trie(e->self_fd);
	e->once_fd = pin_open(pin_dir, "once_used", err, errlen);
	e->allow_n = allow_count(e);
	return e;
fail:
	enforce_free(e);
	errno = -rc;
	return NULL;
}

int enforce_entry_grant(struct enforce *e, const struct addr *a, uint16_t port, uint32_t *grant)
{
	struct allow_lkey lk;
	struct allow_val v;

	if (bpf_map_lookup_elem(e->allow_fd, allow_key_of(e->allow_trie, &lk, a, port), &v))
		return -errno;
	*grant = v.grant;
	return 0;
}

int enforce_drop_grant(struct enforce *e, uint32_t grant)
{
	struct allow_lkey lk, lnext;
	void *k = allow_key_of(e->allow_trie, &lk, NULL, 0);
	void *next = allow_key_of(e->allow_trie, &lnext, NULL, 0);
	size_t ksz = e->allow_trie ? sizeof(lk) : sizeof(lk.k);
	struct allow_val v;
	void *prev = NULL;
	int n = 0, more;

	/* Deleting the current key would restart the walk: step first. */
	do {
		more = bpf_map_get_next_key(e->allow_fd, prev, next) == 0;
		if (prev && bpf_map_lookup_elem(e->allow_fd, k, &v) == 0 && v.grant == grant &&
		    bpf_map_delete_elem(e->allow_fd, k) == 0)
			n++;
		memcpy(k, next, ksz);
		prev = k;
	} while (more);
	e->allow_n -= (unsigned)n < e->allow_n ? (unsigned)n : e->allow_n;
	if (n)
		e->full_until_ns = 0;
	if (e->grants_fd >= 0)
		bpf_map_delete_elem(e->grants_fd, &grant);
	/* Its spent mark goes last, with no entry of it left to connect by
	 * and its flows ended: once_used holds the set's grants only. */
	if (e->once_fd >= 0) {
		__u32 syn = grant | EGRESS_ONCE_SYN;

		bpf_map_delete_elem(e->once_fd, &syn);
		bpf_map_delete_elem(e->once_fd, &grant);
	}
	return n;
}

/* Whether grant id is one of gs's that may still be used or keep its flows:
 * a live one, or a once grant (spent or not: its mark stays with it). */
static bool grant_kept(const struct grant_set *gs, uint32_t id, int64_t now)
{
	for (size_t i = 0; i < gs->n; i++)
		if (gs->v[i].id == id)
			return grant_live(&gs->v[i], now) || gs->v[i].kind == GRANT_ONCE;
	return false;
}

#define STALE_MAX (EGRESS_GRANTS_MAX * 2)

static void stale_add(uint32_t *stale, size_t *n, uint32_t id)
{
	for (size_t i = 0; i < *n; i++)
		if (stale[i] == id)
			return;
	if (*n < STALE_MAX)
		stale[(*n)++] = id;
}

int enforce_grants_prune(struct enforce *e, const struct grant_set *gs)
{
	struct allow_lkey lk, lnext;
	void *k = allow_key_of(e->allow_trie, &lk, NULL, 0);
	void *next = allow_key_of(e->allow_trie, &lnext, NULL, 0);
	size_t ksz = e->allow_trie ? sizeof(lk) : sizeof(lk.k), n = 0;
	uint32_t stale[STALE_MAX];
	int64_t now = time(NULL);
	struct allow_val v;
	void *prev = NULL;
	__u32 id, id_next;
	int more;

	/* the ids first, then the drops: a walk restarts when its key goes */
	while (e->allow_fd >= 0 && bpf_map_get_next_key(e->allow_fd, prev, next) == 0) {
		if (bpf_map_lookup_elem(e->allow_fd, next, &v) == 0 && v.grant &&
		    !grant_kept(gs, v.grant, now))
			stale_add(stale, &n, v.grant);
		memcpy(k, next, ksz);
		prev = k;
	}
	more = e->grants_fd >= 0 && bpf_map_get_next_key(e->grants_fd, NULL, &id) == 0;
	for (; more; id = id_next) {
		more = bpf_map_get_next_key(e->grants_fd, &id, &id_next) == 0;
		if (!grant_kept(gs, id, now))
			stale_add(stale, &n, id);
	}
	for (size_t i = 0; i < n; i++)
		enforce_drop_grant(e, stale[i]);
	return (int)n;
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
	struct allow_lkey lk;
	struct allow_val v;
	void *prev = NULL, *k;
	int n = 0;

	if (fd < 0)
		return -errno;
	k = allow_key_of(map_is_trie(fd), &lk, NULL, 0);
	while (bpf_map_get_next_key(fd, prev, k) == 0) {
		struct addr a;

		if (bpf_map_lookup_elem(fd, k, &v) == 0) {
			memcpy(a.b, lk.k.addr, 16);
			fn(&a, lk.k.port, v.expires_ns, v.flags, v.grant, arg);
			n++;
		}
		prev = k;
	}
	return n;
}

/* A session's counters: its counters map's and its veth's in veth_sess. */
int enforce_counters(const char *pin_dir, uint64_t out[CNT_MAX])
{
	char err[PATH_MAX + 64];
	cleanup_close int fd = pin_open(pin_dir, EGRESS_MAP_COUNTERS, err, sizeof(err));
	cleanup_close int tc_fd = -1;
	int ncpu = libbpf_num_possible_cpus();
	uint64_t tc[CNT_MAX];
	__u32 ifindex;
	__u64 key;

	memset(out, 0, sizeof(uint64_t) * CNT_MAX);
	if (fd < 0)
		return -errno;
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	if (!veth_of(pin_dir, &tc_fd, &ifindex, &key) && veth_sess_read(tc_fd, ifindex, tc) == key)
		memcpy(out, tc, sizeof(tc));
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
	char err[256];
	cleanup_close int fd = pin_open(pin_dir, name, err, sizeof(err));
	__u32 id = 0;

	if (fd >= 0 && prog_id(fd, &id))
		id = 0;
	fn(name, id, id && ifindex > 0 && tc_runs(ifindex, at, id) == 0, arg);
}

int enforce_programs(const char *pin_dir, const char *cgroup_path, int ifindex, enforce_prog_fn fn,
		     void *arg)
{
	cleanup_close int cg_fd = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct sess_cfg cfg;
	unsigned mode = session_cfg(pin_dir, &cfg) == 0 ? cfg.mode : EGRESS_MODE_RESTRICTED;
	char err[256];
	int n = 0;

	if (cg_fd < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		cleanup_close int fd = -1;
		struct bpf_link_info info = {};
		__u32 len = sizeof(info);
		bool attached = false;

		if (!hook_used(i, mode))
			continue;
		fd = pin_open(pin_dir, hooks[i].pin, err, sizeof(err));
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

/* A session's settings from its config pin. 0 or -errno (-ENOENT: a session
 * pinned by an agent that loaded an object per session, or none). */
static int session_cfg(const char *pin_dir, struct sess_cfg *cfg)
{
	char err[PATH_MAX + 64];
	cleanup_close int fd = pin_open(pin_dir, EGRESS_MAP_CONFIG, err, sizeof(err));
	__u32 zero = 0;

	if (fd < 0)
		return -errno;
	return bpf_map_lookup_elem(fd, &zero, cfg) ? -errno : 0;
}

/* Takes the session's keys out of its set's maps: its inner maps go when
 * their pins do, and its veth's ifindex, which the kernel may give another
 * device, names no session. */
static void set_remove(const char *bpf_dir, const char *pin_dir, const struct sess_cfg *cfg)
{
	char dir[PATH_MAX], err[PATH_MAX + 64], path[PATH_MAX];
	__u64 key = cfg->cgid;
	__u32 ifindex = cfg->ifindex;
	uint64_t cnt[CNT_MAX];
	struct outer_op ops[I_MAX];
	size_t n = 0, bad;
	int fd;

	if (path_fmt(dir, sizeof(dir), "%s/prog/%016llx", bpf_dir,
		     (unsigned long long)cfg->set_hash))
		return;
	/* the maps it has (inner_used) */
	for (int i = 0; i < I_MAX; i++)
		if (!path_fmt(path, sizeof(path), "%s/%s", pin_dir, inners[i].pin) &&
		    !access(path, F_OK) &&
		    (fd = pin_open(dir, inners[i].outer, err, sizeof(err))) >= 0)
			ops[n++] = (struct outer_op){.map = fd, .key = key, .value = -1};
	outer_ops(ops, n, &bad);
	for (size_t i = 0; i < n; i++)
		close(ops[i].map);
	if (ifindex && (fd = veth_sess_open(dir, err, sizeof(err))) >= 0) {
		if (veth_sess_read(fd, ifindex, cnt) == key)
			bpf_map_delete_elem(fd, &ifindex);
		close(fd);
	}
}

/* Does a live session's config name the set? */
static bool set_in_use(const char *bpf_dir, uint64_t hash)
{
	DIR *d = opendir(bpf_dir);
	struct dirent *de;
	bool used = false;

	if (!d)
		return true;
	while (!used && (de = readdir(d))) {
		char path[PATH_MAX];
		struct sess_cfg cfg;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "prog"))
			continue;
		used = path_fmt(path, sizeof(path), "%s/%s", bpf_dir, de->d_name) == 0 &&
		       session_cfg(path, &cfg) == 0 && cfg.set_hash == hash;
	}
	closedir(d);
	return used;
}

/* Removes the pins of program sets no session uses but this build's own
 * (the one the next session takes). A set's programs and maps live on in
 * the kernel while a link or a process holds them. The count removed. */
static int sets_sweep(const char *bpf_dir)
{
	char prog_dir[PATH_MAX], path[PATH_MAX];
	uint64_t own = object_hash();
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (path_fmt(prog_dir, sizeof(prog_dir), "%s/prog", bpf_dir) || !(d = opendir(prog_dir)))
		return 0;
	while ((de = readdir(d))) {
		char *end;
		uint64_t hash = strtoull(de->d_name, &end, 16);

		int pid = 0;
		/* a set being pinned: left alone unless its errand died */
		bool pinning = sscanf(de->d_name, "new-%d-", &pid) == 1;

		if (pinning ? pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH
			    : de->d_name[0] == '.' || *end || hash == own ||
				      set_in_use(bpf_dir, hash))
			continue;
		if (!path_fmt(path, sizeof(path), "%s/%s", prog_dir, de->d_name) &&
		    !remove_tree(path))
			n++;
	}
	closedir(d);
	return n;
}

int enforce_unpin(const char *pin_dir)
{
	char bpf_dir[PATH_MAX];
	struct sess_cfg cfg;
	const char *base = strrchr(pin_dir, '/');

	parent_dir(pin_dir, bpf_dir, sizeof(bpf_dir));
	/* <paths.bpf>/prog holds the program sets, not a session. */
	if (base && !strcmp(base + 1, "prog"))
		return sets_sweep(bpf_dir) > 0 ? 0 : -EAGAIN;
	if (session_cfg(pin_dir, &cfg) == 0)
		set_remove(bpf_dir, pin_dir, &cfg);
	return remove_tree(pin_dir);
}
