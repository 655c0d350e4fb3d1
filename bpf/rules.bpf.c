// SPDX-License-Identifier: GPL-2.0
/* A session's argument-aware rules (sandbox.rules), as BPF LSM programs
 * attached to the session's cgroup (BPF_LSM_CGROUP): each hook takes the
 * path the kernel resolved (bpf_d_path on the object's struct path, the
 * parent's for the path_* hooks with the new entry's name appended), never a
 * string from the process's memory, and matches it against the session's
 * compiled patterns. Precedence: lazyAllow > deny > (allow and the default
 * deny, which are Landlock's). A refusal is -EACCES and an event. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "rules.h"

#ifndef barrier_var
#define barrier_var(var) asm volatile("" : "+r"(var))
#endif

#define EACCES 13
#define ENAMETOOLONG 36
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
/* open_exec's open flag (f_flags): f_mode never carries FMODE_EXEC */
#define __FMODE_EXEC 0x20
#define FMODE_CREATED 0x100000
#define S_IFMT 00170000
#define S_IFDIR 0040000
#define RENAME_EXCHANGE (1 << 1)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RULES_MAX);
	__type(key, __u32);
	__type(value, struct rule_entry);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rule_conf);
} conf SEC(".maps");

/* Sockets a Connect deny names, by identity taken at start: value is the
 * rule's id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct rule_inode);
	__type(value, __u32);
} socks SEC(".maps");

/* The top directories of the deny patterns, by identity: a hard link of
 * anything beneath one is refused (path_link gives no path for its source). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RULES_MAX);
	__type(key, struct rule_inode);
	__type(value, __u32);
} deny_dirs SEC(".maps");

/* Files the session created (open with O_CREAT made them): what lazyAllow
 * applies to. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct rule_inode);
	__type(value, __u8);
} created SEC(".maps");

/* Path components a walk follows (mknod's, where bpf_d_path is not allowed). */
#define RULE_DEPTH 32

/* The matcher's state, one step a bpf_loop iteration: '*' matches within a
 * segment, '**' across; the classic two-pointer match with one backtrack
 * point for each, bounded by RULE_BUDGET steps for all rules together.
 * Unsigned; M_NONE is no backtrack point. */
#define M_NONE 0xffffffffu

struct mctx {
	__u32 verbs, n, r, which, len;
	__u32 pi, si, sp, ss, dp, ds;
	__u32 fresh, lazy, deny;
};

/* deny_beneath's state (anc_step). */
struct actx {
	__u32 n, r, which, len, pi, si, star, fresh, hit;
};

/* The state of a walk up from a dentry, one step a bpf_loop iteration (an
 * open-coded loop with its mount-crossing branches is more than the
 * verifier explores). Kernel pointers as plain addresses, read with
 * bpf_probe_read_kernel. */
struct wctx {
	__u64 d, mnt, root, root_mnt;
	__u32 n;
	__s32 off;
	__s32 top; /* 1 at the root, -1 on an error */
	__u32 out; /* 0 scratch's path, 1 its old */
};

/* The matchers' states, and the walk's, live here, not on their callers'
 * stacks: 6.1's verifier checks a bpf_loop callback once, with the state its
 * caller set, newer ones (6.18's, 7.3's) until its state repeats, and a state
 * on the caller's stack is tracked value by value (pi 0, 1, 2, ...: a new
 * state each step, far more than it explores, E2BIG), while what a map value
 * holds is unknown to it, so one pass over a step covers them all. So each
 * step takes none of its state for granted: every index is checked against
 * its array in the step itself. */
struct scratch {
	char path[2 * RULE_PATH_MAX]; /* the path matched; room to append a name */
	char old[2 * RULE_PATH_MAX];  /* a rename's source */
	const unsigned char *names[RULE_DEPTH];
	struct mctx m;
	struct actx a;
	struct wctx w;
	__u64 gen; /* scratch_get's count: who holds the state now */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

char LICENSE[] SEC("license") = "GPL";

static void next_rule(struct mctx *c)
{
	c->r++;
	c->fresh = 1;
}

/* Indexes are unsigned and each in one register, checked where it is used:
 * a signed copy the compiler sign-extends anew loses the verifier's bounds. */
static long match_step(__u32 i, void *arg)
{
	__u64 pi, pn, si, len, plen, sp, ss, dp, ds;
	__u32 zero = 0, r;
	struct rule_entry *e;
	struct scratch *sc;
	struct mctx *c;
	const char *s;
	char pc, ch;

	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 1;
	c = &sc->m;
	r = c->r;
	if (r >= c->n || r >= RULES_MAX)
		return 1;
	e = bpf_map_lookup_elem(&rules, &r);
	if (!e)
		return 1;
	s = c->which ? sc->old : sc->path;
	if (!(e->verbs & c->verbs) || (e->kind == RK_DENY && c->deny != RULE_NONE) ||
	    (e->kind == RK_LAZY && c->lazy)) {
		next_rule(c);
		return 0;
	}
	if (c->fresh) {
		c->pi = c->si = 0;
		c->sp = c->dp = M_NONE;
		c->fresh = 0;
	}
	pi = c->pi;
	si = c->si;
	len = c->len;
	plen = e->len;
	if (len >= RULE_PATH_MAX)
		len = RULE_PATH_MAX - 1;
	if (pi >= RULE_PAT_MAX || si >= RULE_PATH_MAX)
		goto mismatch;
	if (pi < plen) {
		pc = e->pat[pi];
		if (pc == '*') {
			pn = pi + 1;
			/* checked as it is, not as pi < RULE_PAT_MAX - 1: 6.1
			 * carries no bound from pi over to pi + 1 */
			barrier_var(pn);
			if (pn < plen && pn < RULE_PAT_MAX && e->pat[pn] == '*') {
				c->dp = pi + 2;
				c->ds = si;
				c->sp = M_NONE;
				c->pi = pi + 2;
			} else {
				c->sp = pi + 1;
				c->ss = si;
				c->pi = pi + 1;
			}
			return 0;
		}
		if (si < len && s[si] == pc) {
			c->pi = pi + 1;
			c->si = si + 1;
			return 0;
		}
	} else {
		ch = si < len ? s[si] : 0;
		if (si >= len || (e->subtree && ch == '/')) {
			if (e->kind == RK_LAZY)
				c->lazy = 1;
			else
				c->deny = e->id;
			next_rule(c);
			return 0;
		}
	}
mismatch:
	sp = c->sp;
	ss = c->ss;
	/* ss < RULE_PATH_MAX though len is less: 6.1's verifier learns no
	 * bound from comparing two unknown values */
	if (sp != M_NONE && ss < len && ss < RULE_PATH_MAX && s[ss] != '/') {
		c->ss = ss + 1;
		c->si = ss + 1;
		c->pi = sp;
		return 0;
	}
	dp = c->dp;
	ds = c->ds;
	if (dp != M_NONE && ds < len) {
		c->ds = ds + 1;
		c->si = ds + 1;
		c->pi = dp;
		c->sp = M_NONE;
		return 0;
	}
	next_rule(c);
	return 0;
}

/* The deny rule that refuses verbs on the path in scratch (which: 0 path,
 * 1 old), or RULE_NONE; lazy says whether lazyAllow may apply (the object is
 * the session's own creation, or about to be). */
static __u32 decide(__u32 verbs, int len, bool lazy, __u32 which, __u64 gen)
{
	__u32 zero = 0;
	struct rule_conf *cf = bpf_map_lookup_elem(&conf, &zero);
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	__u32 deny, lz, done;
	struct mctx *c;

	if (!cf || !cf->n || !sc)
		return RULE_NONE;
	c = &sc->m;
	c->verbs = verbs;
	c->n = cf->n;
	c->r = 0;
	c->which = which;
	c->len = len < 0 ? 0 : len > RULE_PATH_MAX - 1 ? RULE_PATH_MAX - 1 : (__u32)len;
	c->fresh = 1;
	c->lazy = 0;
	c->deny = RULE_NONE;
	bpf_loop(RULE_BUDGET, match_step, NULL, 0);
	/* the outcome read before the state's owner is checked */
	deny = c->deny;
	lz = c->lazy;
	done = c->r >= c->n;
	asm volatile("" ::: "memory");
	if (!done || sc->gen != gen)
		return RULE_BUDGET_HIT; /* fail closed */
	if (deny != RULE_NONE && lazy && lz)
		return RULE_NONE;
	return deny;
}

static int refuse(__u32 rule, __u32 verbs, __u32 hook, __u32 which)
{
	__u32 zero = 0;
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	struct rule_event *ev;

	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (ev) {
		ev->rule = rule;
		ev->verbs = verbs;
		ev->hook = hook;
		ev->pad = 0;
		if (sc)
			__builtin_memcpy(ev->path, which ? sc->old : sc->path, RULE_PATH_MAX);
		else
			ev->path[0] = 0;
		ev->path[RULE_PATH_MAX - 1] = 0;
		bpf_ringbuf_submit(ev, 0);
	}
	bpf_set_retval(-EACCES);
	return 0;
}

/* The state is per CPU, and a program runs with migration, not preemption,
 * disabled: on a kernel with full preemption another task's hook can run on
 * this CPU in the middle of a decision and write the state over. Each
 * decision therefore takes a number here before it writes any state, and
 * decide and deny_beneath fail closed when it is no longer the last one
 * taken. */
static struct scratch *scratch_get(__u64 *gen)
{
	__u32 zero = 0;
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);

	if (sc)
		*gen = ++sc->gen;
	return sc;
}

static bool have_rules(void)
{
	__u32 zero = 0;
	struct rule_conf *cf = bpf_map_lookup_elem(&conf, &zero);

	return cf && cf->n;
}

static void inode_key(struct inode *ino, struct rule_inode *k)
{
	k->ino = BPF_CORE_READ(ino, i_ino);
	k->dev = BPF_CORE_READ(ino, i_sb, s_dev);
}

static long walk_step(__u32 i, void *arg)
{
	struct scratch *sc;
	struct wctx *w;
	struct dentry *d, *mroot;
	struct mount *mnt, *parent;
	__u64 vmnt, n;
	__u32 zero = 0;

	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 1;
	w = &sc->w;
	d = (void *)w->d;
	mnt = (void *)w->mnt;
	vmnt = w->mnt + bpf_core_field_offset(struct mount, mnt);
	mroot = BPF_CORE_READ(mnt, mnt.mnt_root);
	if (w->d == w->root && vmnt == w->root_mnt) {
		w->top = 1;
		return 1;
	}
	if (d == mroot) {
		parent = BPF_CORE_READ(mnt, mnt_parent);
		if (parent == mnt) {
			w->top = 1; /* the namespace's root: d_path's answer too */
			return 1;
		}
		w->d = (__u64)BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mnt = (__u64)parent;
		return 0;
	}
	n = w->n;
	if (n >= RULE_DEPTH) {
		w->top = -1;
		return 1;
	}
	sc->names[n] = BPF_CORE_READ(d, d_name.name);
	w->n = n + 1;
	w->d = (__u64)BPF_CORE_READ(d, d_parent);
	return 0;
}

/* One name, from the root down: i counts down from the last one found. */
static long join_step(__u32 i, void *arg)
{
	struct scratch *sc;
	struct wctx *w;
	__u32 zero = 0, j, off, n;
	__s32 o;
	char *out;
	long m;

	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 1;
	w = &sc->w;
	n = w->n;
	o = w->off;
	if (i >= n)
		return 1;
	if (n > RULE_DEPTH || o < 0 || o >= RULE_PATH_MAX - 1) {
		w->top = -1;
		return 1;
	}
	j = n - 1 - i;
	out = w->out ? sc->old : sc->path;
	off = (__u32)o;
	/* the compiler must not drop the masks the verifier bounds offsets by */
	barrier_var(off);
	barrier_var(j);
	out[off & (RULE_PATH_MAX - 1)] = '/';
	off++;
	barrier_var(off);
	m = bpf_probe_read_kernel_str(out + (off & (RULE_PATH_MAX - 1)), RULE_PATH_MAX,
				      sc->names[j & (RULE_DEPTH - 1)]);
	if (m <= 0) {
		w->top = -1;
		return 1;
	}
	w->off = (__s32)off + (__s32)m - 1;
	return 0;
}

/* dir/leaf by walking dentries and mounts up to the task's root, as d_path
 * does: bpf_d_path may be called only from the kernel's sleepable LSM hooks
 * (file_open among them, no path_* hook), so the path_* hooks name their
 * object this way, from the kernel's own dentries. Into scratch's path
 * (out 0) or old (1); its length, or < 0 when the path is deeper than
 * RULE_DEPTH or longer than RULE_PATH_MAX. */
static int walk_path(const struct path *dir, struct dentry *leaf, struct scratch *sc, __u32 out)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct vfsmount *vmnt = BPF_CORE_READ(dir, mnt);
	struct wctx *w = &sc->w;
	__s32 off;

	w->d = (__u64)BPF_CORE_READ(dir, dentry);
	w->mnt = (__u64)vmnt - bpf_core_field_offset(struct mount, mnt);
	w->root = (__u64)BPF_CORE_READ(task, fs, root.dentry);
	w->root_mnt = (__u64)BPF_CORE_READ(task, fs, root.mnt);
	w->n = leaf ? 1 : 0;
	w->off = 0;
	w->top = 0;
	w->out = out;
	if (leaf) /* else dir is the object itself */
		sc->names[0] = BPF_CORE_READ(leaf, d_name.name);
	bpf_loop(2 * RULE_DEPTH, walk_step, NULL, 0);
	if (w->top != 1)
		return -1;
	bpf_loop(RULE_DEPTH, join_step, NULL, 0);
	off = w->off;
	if (w->top != 1 || off < 0 || off >= RULE_PATH_MAX)
		return -1;
	return off;
}

static bool was_created(struct dentry *d)
{
	struct inode *ino = BPF_CORE_READ(d, d_inode);
	struct rule_inode k;

	if (!ino)
		return false;
	inode_key(ino, &k);
	return bpf_map_lookup_elem(&created, &k) != NULL;
}

/* A walk up a dentry's parents (within its mount), one a bpf_loop step,
 * looking for the top directory of a deny pattern by identity. */
struct uctx {
	__u64 d;
	__u32 hit;
};

static long up_step(__u32 i, void *arg)
{
	struct uctx *u = arg;
	struct dentry *d = (void *)u->d, *parent;
	struct inode *ino = BPF_CORE_READ(d, d_inode);
	struct rule_inode k;

	if (ino) {
		inode_key(ino, &k);
		if (bpf_map_lookup_elem(&deny_dirs, &k)) {
			u->hit = 1;
			return 1;
		}
	}
	parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d)
		return 1;
	u->d = (__u64)parent;
	return 0;
}

/* Whether d lies beneath (or is) the top directory of a deny pattern that
 * existed at start. */
static bool under_deny_dir(struct dentry *d)
{
	struct uctx u = {.d = (__u64)d};

	bpf_loop(4096, up_step, &u, 0);
	return u.hit;
}

SEC("lsm_cgroup/file_open")
int BPF_PROG(rules_open, struct file *file)
{
	struct scratch *sc;
	__u32 verbs = 0, rule, mode, exec;
	struct rule_inode k;
	bool mine;
	__u64 gen;
	long n;

	if (!have_rules() || !(sc = scratch_get(&gen)))
		return 1;
	mode = file->f_mode;
	exec = file->f_flags & __FMODE_EXEC;
	inode_key(file->f_inode, &k);
	if (mode & FMODE_CREATED) {
		__u8 one = 1;

		bpf_map_update_elem(&created, &k, &one, BPF_ANY);
	}
	mine = bpf_map_lookup_elem(&created, &k) != NULL;
	if (mode & FMODE_READ)
		verbs |= RV_READ;
	if (mode & FMODE_WRITE)
		verbs |= RV_EDIT;
	if (exec)
		verbs |= RV_EXEC;
	if (!verbs)
		verbs = RV_READ; /* O_PATH-like opens still name the object */
	n = bpf_d_path((struct path *)&file->f_path, sc->path, RULE_PATH_MAX);
	if (n == -ENAMETOOLONG) {
		/* longer than the matcher takes: refused beneath any deny
		 * pattern's top directory, whatever its verbs (fail closed) */
		sc->path[0] = 0;
		if (under_deny_dir(file->f_path.dentry))
			return refuse(RULE_DENY_DIR, verbs, exec ? RH_EXEC : RH_OPEN, 0);
		return 1;
	}
	if (n <= 0)
		return 1; /* no path (an anonymous or internal file): nothing to match */
	rule = decide(verbs, (int)n - 1, mine, 0, gen);
	if (rule == RULE_NONE)
		return 1;
	return refuse(rule, verbs, exec ? RH_EXEC : RH_OPEN, 0);
}

static int path_hook(const struct path *dir, struct dentry *d, __u32 verbs, bool lazy, __u32 hook)
{
	struct scratch *sc;
	__u32 rule;
	__u64 gen;
	int n;

	if (!have_rules() || !(sc = scratch_get(&gen)))
		return 1;
	n = walk_path(dir, d, sc, 0);
	if (n < 0) {
		/* deeper or longer than the matcher takes: refused beneath any
		 * deny pattern's top directory (fail closed), else no pattern
		 * (shorter than RULE_PAT_MAX) can name it */
		sc->path[0] = 0;
		if (under_deny_dir(BPF_CORE_READ(dir, dentry)))
			return refuse(RULE_DENY_DIR, verbs, hook, 0);
		return 1;
	}
	rule = decide(verbs, n, lazy, 0, gen);
	if (rule == RULE_NONE)
		return 1;
	return refuse(rule, verbs, hook, 0);
}

SEC("lsm_cgroup/path_unlink")
int BPF_PROG(rules_unlink, const struct path *dir, struct dentry *dentry)
{
	return path_hook(dir, dentry, RV_DELETE, was_created(dentry), RH_UNLINK);
}

SEC("lsm_cgroup/path_rmdir")
int BPF_PROG(rules_rmdir, const struct path *dir, struct dentry *dentry)
{
	return path_hook(dir, dentry, RV_DELETE, false, RH_RMDIR);
}

/* truncate(2) by path writes the file without opening it: an Edit. */
SEC("lsm_cgroup/path_truncate")
int BPF_PROG(rules_truncate, const struct path *path)
{
	struct dentry *d = BPF_CORE_READ(path, dentry);

	return path_hook(path, NULL, RV_EDIT, was_created(d), RH_TRUNCATE);
}

/* What does not exist yet is the session's own creation: lazyAllow applies. */
SEC("lsm_cgroup/path_mknod")
int BPF_PROG(rules_mknod, const struct path *dir, struct dentry *dentry, umode_t mode,
	     unsigned int dev)
{
	return path_hook(dir, dentry, RV_CREATE, true, RH_MKNOD);
}

SEC("lsm_cgroup/path_mkdir")
int BPF_PROG(rules_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode)
{
	return path_hook(dir, dentry, RV_CREATE, true, RH_MKDIR);
}

SEC("lsm_cgroup/path_symlink")
int BPF_PROG(rules_symlink, const struct path *dir, struct dentry *dentry, const char *old_name)
{
	return path_hook(dir, dentry, RV_CREATE, true, RH_SYMLINK);
}

/* Whether a deny pattern lies beneath the path in scratch (which: 0 path,
 * 1 old): the path, then '/', is a prefix of what the pattern matches. A '*'
 * takes the path's segment whole and skips the pattern's; a '**' may reach
 * anything, so it counts as beneath. One character a bpf_loop step. */
static void anc_next(struct actx *a)
{
	a->r++;
	a->fresh = 1;
}

static long anc_step(__u32 i, void *arg)
{
	__u64 pi, pn, si, len, plen;
	__u32 zero = 0, r;
	struct rule_entry *e;
	struct scratch *sc;
	struct actx *a;
	const char *s;
	char pc;

	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 1;
	a = &sc->a;
	r = a->r;
	if (r >= a->n || r >= RULES_MAX)
		return 1;
	e = bpf_map_lookup_elem(&rules, &r);
	if (!e)
		return 1;
	if (e->kind != RK_DENY) {
		anc_next(a);
		return 0;
	}
	if (a->fresh) {
		a->pi = a->si = a->star = a->fresh = 0;
	}
	s = a->which ? sc->old : sc->path;
	pi = a->pi;
	si = a->si;
	len = a->len;
	plen = e->len;
	if (len >= RULE_PATH_MAX)
		len = RULE_PATH_MAX - 1;
	if (pi >= RULE_PAT_MAX || si >= RULE_PATH_MAX) {
		anc_next(a);
		return 0;
	}
	if (a->star == 1) { /* the path's segment */
		if (si < len && s[si] != '/')
			a->si = si + 1;
		else
			a->star = 2;
		return 0;
	}
	if (a->star == 2) { /* the pattern's */
		if (pi < plen && e->pat[pi] != '/')
			a->pi = pi + 1;
		else
			a->star = 0;
		return 0;
	}
	if (si >= len) {
		if (pi < plen && e->pat[pi] == '/') {
			a->hit = e->id;
			return 1;
		}
		anc_next(a);
		return 0;
	}
	if (pi >= plen) {
		anc_next(a);
		return 0;
	}
	pc = e->pat[pi];
	if (pc == '*') {
		pn = pi + 1;
		barrier_var(pn); /* as match_step's */
		if (pn < plen && pn < RULE_PAT_MAX && e->pat[pn] == '*') {
			a->hit = e->id;
			return 1;
		}
		a->star = 1;
		return 0;
	}
	if (s[si] != pc) {
		anc_next(a);
		return 0;
	}
	a->pi = pi + 1;
	a->si = si + 1;
	return 0;
}

static __u32 deny_beneath(int len, __u32 which, __u64 gen)
{
	__u32 zero = 0;
	struct rule_conf *cf = bpf_map_lookup_elem(&conf, &zero);
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	__u32 hit, done;
	struct actx *a;

	if (!cf || !cf->n || len < 0 || !sc)
		return RULE_NONE;
	a = &sc->a;
	a->n = cf->n;
	a->r = 0;
	a->which = which;
	a->len = len > RULE_PATH_MAX - 1 ? RULE_PATH_MAX - 1 : (__u32)len;
	a->fresh = 1;
	a->hit = RULE_NONE;
	bpf_loop(RULE_BUDGET, anc_step, NULL, 0);
	hit = a->hit;
	done = a->r >= a->n;
	asm volatile("" ::: "memory");
	if (hit == RULE_NONE && (!done || sc->gen != gen))
		return RULE_BUDGET_HIT; /* fail closed */
	return hit;
}

static bool is_dir(struct dentry *d)
{
	struct inode *ino = BPF_CORE_READ(d, d_inode);

	return ino && (BPF_CORE_READ(ino, i_mode) & S_IFMT) == S_IFDIR;
}

/* A rename is refused when either end lies under a deny rule of any verb:
 * into a denied tree would rename what the rule names into being, out of it
 * would carry what the rule protects past it. A directory moved (either
 * way, or exchanged) is refused when a deny pattern lies beneath either
 * end: renaming an ancestor would carry the denied tree out from under its
 * pattern. */
SEC("lsm_cgroup/path_rename")
int BPF_PROG(rules_rename, const struct path *old_dir, struct dentry *old_dentry,
	     const struct path *new_dir, struct dentry *new_dentry, unsigned int flags)
{
	bool mine = was_created(old_dentry);
	bool dir = is_dir(old_dentry) || ((flags & RENAME_EXCHANGE) && is_dir(new_dentry));
	struct scratch *sc;
	__u32 rule;
	__u64 gen;
	int n;

	if (!have_rules() || !(sc = scratch_get(&gen)))
		return 1;
	n = walk_path(old_dir, old_dentry, sc, 1);
	if (n < 0) {
		sc->old[0] = 0;
		if (under_deny_dir(old_dentry))
			return refuse(RULE_DENY_DIR, RV_FILES, RH_RENAME, 1);
		return path_hook(new_dir, new_dentry, RV_FILES, mine, RH_RENAME);
	}
	rule = decide(RV_FILES, n, mine, 1, gen);
	if (rule == RULE_NONE && dir)
		rule = deny_beneath(n, 1, gen);
	if (rule != RULE_NONE)
		return refuse(rule, RV_FILES, RH_RENAME, 1);
	if (dir) {
		/* too long a path cannot be above a pattern: path_hook's case */
		n = walk_path(new_dir, new_dentry, sc, 0);
		rule = n < 0 ? RULE_NONE : deny_beneath(n, 0, gen);
		if (rule != RULE_NONE)
			return refuse(rule, RV_FILES, RH_RENAME, 0);
	}
	return path_hook(new_dir, new_dentry, RV_FILES, mine, RH_RENAME);
}

/* A hard link's source has no struct path here: it is refused when it lies
 * beneath the top directory of any deny pattern (by identity, walking up its
 * parents), and its new name like a rename's. */
SEC("lsm_cgroup/path_link")
int BPF_PROG(rules_link, struct dentry *old_dentry, const struct path *new_dir,
	     struct dentry *new_dentry)
{
	struct scratch *sc;
	__u64 gen;

	if (!have_rules())
		return 1;
	if (under_deny_dir(old_dentry)) {
		sc = scratch_get(&gen); /* only for the path the event names */
		if (sc && walk_path(new_dir, new_dentry, sc, 0) < 0)
			sc->path[0] = 0;
		return refuse(RULE_DENY_DIR, RV_FILES, RH_LINK, 0);
	}
	return path_hook(new_dir, new_dentry, RV_FILES, false, RH_LINK);
}

/* Stream connects to a bound socket: the peer's inode, which the kernel
 * resolved, against the sockets named at start. */
/* Stream connects to a bound socket: the peer's inode, which the kernel
 * resolved, against the sockets named at start, then the name the peer bound
 * (kernel memory, the daemon's own, so a daemon that re-created its socket
 * after the session started is still known) against the Connect patterns. */
SEC("lsm_cgroup/unix_stream_connect")
int BPF_PROG(rules_connect, struct sock *sock, struct sock *other, struct sock *newsk)
{
	struct unix_sock *u = (struct unix_sock *)other;
	struct dentry *d = BPF_CORE_READ(u, path.dentry);
	struct unix_address *addr;
	struct scratch *sc;
	struct rule_inode k;
	struct inode *ino;
	__u32 *rule, id;
	__u64 gen;
	long n;

	if (!d || !(ino = BPF_CORE_READ(d, d_inode)))
		return 1; /* abstract or unbound: Landlock's scoping */
	if (!(sc = scratch_get(&gen)))
		return 1;
	sc->path[0] = 0; /* the agent names the socket from the rule */
	inode_key(ino, &k);
	rule = bpf_map_lookup_elem(&socks, &k);
	if (rule)
		return refuse(*rule, RV_CONNECT, RH_CONNECT, 0);
	addr = BPF_CORE_READ(u, addr);
	if (!addr || !have_rules())
		return 1;
	/* sun_path, after the two bytes of sun_family */
	n = bpf_probe_read_kernel_str(sc->path, RULE_PATH_MAX,
				      (void *)addr +
					      bpf_core_field_offset(struct unix_address, name) + 2);
	if (n <= 1)
		return 1;
	id = decide(RV_CONNECT, (int)n - 1, false, 0, gen);
	if (id == RULE_NONE)
		return 1;
	return refuse(id, RV_CONNECT, RH_CONNECT, 0);
}
