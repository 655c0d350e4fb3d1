/* sandbox.rules on this host, and the session's rules BPF object: see
 * rules.h. Patterns are compiled here into what the kernel's matcher walks
 * in bounded steps; the kernel never reads a path from a process. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/rules.h"
#include "lib/log.h"
#include "lib/util.h"
#include "rules.skel.h"

struct rules {
	struct rules_bpf *skel; /* NULL for a session adopted from its pins */
	int events_fd;		/* the pinned ring's, when adopted */
	struct ring_buffer *rb;
	/* the rules by id, for events */
	char **text;
	size_t n;
	const char *session;
	void (*fn)(const char *json, const char *text, const char *target, void *arg);
	void *arg;
	int handled;
};

int rules_expand(const struct config_rule *r, const char *home, char *out, size_t len)
{
	int n;

	if (!strncmp(r->path, "~/", 2))
		n = snprintf(out, len, "%s/%s", home ? home : "", r->path + 2);
	else
		n = snprintf(out, len, "%s", r->path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

void rules_fixed_dir(const char *pattern, char *out, size_t len)
{
	const char *star = strchr(pattern, '*'), *cut;

	snprintf(out, len, "%s", pattern);
	if (!star)
		return;
	/* back to the '/' that begins the wildcard's segment */
	for (cut = star; cut > pattern && *cut != '/'; cut--)
		;
	if ((size_t)(cut - pattern) < len)
		out[cut - pattern] = '\0';
	if (!out[0])
		snprintf(out, len, "/");
}

bool rules_needs_lsm(const struct config_rule *r)
{
	return !r->builtin && r->kind != RULE_ALLOW;
}

bool rules_any_lsm(const struct errand_config *cfg)
{
	for (size_t i = 0; i < cfg->rules.n; i++)
		if (rules_needs_lsm(&cfg->rules.v[i]))
			return true;
	return false;
}

/* The hooks that enforce a file rule, for the start and doctor. */
static const char *hooks_of(const struct config_rule *r)
{
	if (r->kind == RULE_LAZY)
		return "what the session creates: file_open, path_unlink, path_rename";
	switch (r->verb) {
	case RULE_READ:
		return "file_open; path_rename and path_link keep the tree where its pattern is";
	case RULE_EDIT:
		return "file_open, path_truncate; path_rename and path_link keep the tree where "
		       "its pattern is";
	case RULE_EXEC:
		return "file_open of the exec; path_rename and path_link keep it where its "
		       "pattern is";
	case RULE_CREATE:
		return "path_mknod (files, sockets, fifos), path_mkdir, path_symlink, "
		       "path_rename, path_link";
	case RULE_DELETE:
		return "path_unlink, path_rmdir, path_rename";
	default:
		return "file_open, path_*";
	}
}

void rules_describe(const struct config_rule *r, bool lsm_ok, char *buf, size_t len)
{
	char dir[CONFIG_RULE_PATH_MAX];

	if (r->builtin && r->kind == RULE_DENY) {
		snprintf(buf, len, "%s: closed by the launcher (hidden in the session's root)%s",
			 r->text,
			 lsm_ok ? " and by BPF LSM (what appears there later, by path and, for "
				  "a socket, by the name its daemon bound)"
				: "");
		return;
	}
	if (r->kind == RULE_ALLOW) {
		rules_fixed_dir(r->path, dir, sizeof(dir));
		if (r->verb == RULE_CONNECT)
			snprintf(buf, len, "%s: the socket is bound into the session's root",
				 r->text);
		else if (strcmp(dir, r->path))
			snprintf(
				buf, len,
				"%s: Landlock grants %s (the pattern's fixed directory, wider than "
				"the pattern) with %s's rights",
				r->text, dir, config_rule_verb_name(r->verb));
		else
			snprintf(buf, len, "%s: Landlock grants %s's rights", r->text,
				 config_rule_verb_name(r->verb));
		return;
	}
	if (!lsm_ok) {
		snprintf(buf, len,
			 "%s: NOT ENFORCED: BPF LSM programs do not run on this host (they need "
			 "bpf in the lsm= boot parameter and a kernel that loads them; doctor's "
			 "bpfLsm says which is missing)",
			 r->text);
		return;
	}
	if (r->verb == RULE_CONNECT)
		snprintf(buf, len,
			 "%s: BPF LSM (unix_stream_connect) on the session's cgroup, by the "
			 "socket's identity at start and the name its daemon bound",
			 r->text);
	else
		snprintf(buf, len,
			 "%s: BPF LSM on the session's cgroup, on the path the kernel "
			 "resolved (%s)",
			 r->text, hooks_of(r));
}

/* bpf in the active list, a trivial BPF_LSM_CGROUP program on file_open
 * loads (a locked-down or restricted kernel can list bpf and still refuse),
 * and so do errand's rules programs. */
int rules_lsm_probe(char *why, size_t len)
{
	struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_LSM_CGROUP);
	char lsm[512] = "";
	struct rules_bpf *skel;
	int fd, id;
	FILE *f = fopen("/sys/kernel/security/lsm", "re");

	if (f) {
		if (!fgets(lsm, sizeof(lsm), f))
			lsm[0] = '\0';
		fclose(f);
	}
	if (!strstr(lsm, "bpf")) {
		snprintf(why, len,
			 "bpf is not in the active LSM list (%s); add it to the lsm= boot "
			 "parameter, like lsm=...,landlock,bpf",
			 lsm[0] ? lsm : "unreadable");
		return -EOPNOTSUPP;
	}
	id = libbpf_find_vmlinux_btf_id("file_open", BPF_LSM_CGROUP);
	if (id < 0) {
		snprintf(why, len, "the kernel has no BTF for its LSM hooks: %s", strerror(-id));
		return id;
	}
	o.attach_btf_id = (__u32)id;
	fd = bpf_prog_load(BPF_PROG_TYPE_LSM, "errand_probe", "GPL", insns, 2, &o);
	if (fd < 0) {
		int r = -errno;

		snprintf(why, len,
			 "the kernel refuses BPF LSM programs on a cgroup (%s; a lockdown or "
			 "restricted kernel), though bpf is in the LSM list",
			 strerror(-r));
		return r;
	}
	close(fd);
	/* and errand's own programs verify here: a trivial one loading says
	 * nothing of the helpers and hooks they use (6.1 refused them once) */
	skel = rules_bpf__open_and_load();
	if (!skel) {
		int r = -errno;

		snprintf(why, len,
			 "the kernel loads BPF LSM programs but refuses errand's rules programs "
			 "(%s; the agent's -v prints the verifier's log)",
			 strerror(-r));
		return r;
	}
	rules_bpf__destroy(skel);
	return 0;
}

static unsigned verb_bit(enum config_rule_verb v)
{
	return 1u << v; /* RV_* follow enum config_rule_verb */
}

/* A pattern for the kernel: a trailing slash-star-star becomes the subtree
 * flag. */
static int compile(const char *path, struct rule_entry *e)
{
	size_t n = strlen(path);

	if (n >= 3 && !strcmp(path + n - 3, "/**")) {
		e->subtree = 1;
		n -= 3;
	}
	if (n >= RULE_PAT_MAX)
		return -ENAMETOOLONG;
	memcpy(e->pat, path, n);
	e->pat[n] = '\0';
	e->len = (__u32)n;
	return 0;
}

static int key_of(const char *path, struct rule_inode *k)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	k->ino = st.st_ino;
	/* the kernel's dev_t: major << 20 | minor */
	k->dev = ((__u64)major(st.st_dev) << 20) | minor(st.st_dev);
	return 0;
}

static int fill(struct rules *rs, const struct errand_config *cfg, const char *home, char *err,
		size_t errlen)
{
	int rules_fd = bpf_map__fd(rs->skel->maps.rules);
	int socks_fd = bpf_map__fd(rs->skel->maps.socks);
	int dirs_fd = bpf_map__fd(rs->skel->maps.deny_dirs);
	struct rule_conf cf = {0};
	__u32 zero = 0;

	for (size_t i = 0; i < cfg->rules.n; i++) {
		const struct config_rule *r = &cfg->rules.v[i];
		char path[PATH_MAX], dir[PATH_MAX];
		struct rule_entry e = {0};
		struct rule_inode k;
		__u32 id = (__u32)i;

		/* errand's own closures too, where BPF LSM runs: the launcher hides
		 * what is there at start, the kernel also what comes later */
		if (!rules_needs_lsm(r) && !(r->builtin && r->kind == RULE_DENY))
			continue;
		if (rules_expand(r, home, path, sizeof(path))) {
			snprintf(err, errlen, "rule %s: the path is too long with HOME", r->text);
			return -ENAMETOOLONG;
		}
		/* a socket there at start is also refused by identity, whatever
		 * path reaches it */
		if (r->verb == RULE_CONNECT && r->kind == RULE_DENY && key_of(path, &k) == 0 &&
		    bpf_map_update_elem(socks_fd, &k, &id, BPF_ANY) < 0)
			goto map_err;
		if (cf.n >= RULES_MAX) {
			snprintf(err, errlen, "more than %d deny and lazyAllow rules; merge some",
				 RULES_MAX);
			return -E2BIG;
		}
		e.verbs = verb_bit(r->verb);
		e.kind = r->kind == RULE_LAZY ? RK_LAZY : RK_DENY;
		e.id = id;
		if (compile(path, &e)) {
			snprintf(err, errlen, "rule %s: the path with HOME is longer than %d bytes",
				 r->text, RULE_PAT_MAX - 1);
			return -ENAMETOOLONG;
		}
		if (bpf_map_update_elem(rules_fd, &cf.n, &e, BPF_ANY) < 0)
			goto map_err;
		cf.n++;
		rules_fixed_dir(path, dir, sizeof(dir));
		if (e.kind == RK_DENY && r->verb != RULE_CONNECT && key_of(dir, &k) == 0 &&
		    bpf_map_update_elem(dirs_fd, &k, &id, BPF_ANY) < 0)
			goto map_err;
	}
	if (bpf_map_update_elem(bpf_map__fd(rs->skel->maps.conf), &zero, &cf, BPF_ANY) < 0)
		goto map_err;
	return 0;
map_err:
	snprintf(err, errlen, "cannot fill the rules' maps: %s", strerror(errno));
	return -errno;
}

static int attach(struct rules *rs, const char *cgroup_path, const char *pin_dir, char *err,
		  size_t errlen)
{
	struct bpf_program *prog;
	int cg, rc = 0;

	cg = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0) {
		snprintf(err, errlen, "cannot open cgroup %s: %s", cgroup_path, strerror(errno));
		return -errno;
	}
	bpf_object__for_each_program(prog, rs->skel->obj)
	{
		struct bpf_link *l = bpf_program__attach_cgroup(prog, cg);
		char pin[PATH_MAX];

		if (!l) {
			rc = -errno;
			snprintf(err, errlen,
				 "cannot attach the rules' %s to the session's cgroup: %s (the "
				 "kernel allows 10 BPF LSM cgroup hooks in all)",
				 bpf_program__name(prog), strerror(-rc));
			break;
		}
		if (path_fmt(pin, sizeof(pin), "%s/%s", pin_dir, bpf_program__name(prog)) ||
		    bpf_link__pin(l, pin) < 0) {
			rc = -errno ?: -ENAMETOOLONG;
			snprintf(err, errlen, "cannot pin %s: %s", pin, strerror(-rc));
			bpf_link__destroy(l);
			break;
		}
		/* the pin holds it from here; the process's handle goes */
		bpf_link__disconnect(l);
		bpf_link__destroy(l);
	}
	close(cg);
	return rc;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct rules *rs = ctx;
	const struct rule_event *ev = data;
	static const char *const hooks[] = {
		[RH_OPEN] = "file_open",	 [RH_EXEC] = "exec",
		[RH_UNLINK] = "path_unlink",	 [RH_RMDIR] = "path_rmdir",
		[RH_MKNOD] = "path_mknod",	 [RH_MKDIR] = "path_mkdir",
		[RH_SYMLINK] = "path_symlink",	 [RH_RENAME] = "path_rename",
		[RH_LINK] = "path_link",	 [RH_CONNECT] = "unix_stream_connect",
		[RH_TRUNCATE] = "path_truncate",
	};
	char path[RULE_PATH_MAX * 2], json[1200], text[1200], target[600];
	const char *rule = ev->rule < rs->n		 ? rs->text[ev->rule]
			   : ev->rule == RULE_BUDGET_HIT ? "(the matcher's step budget)"
			   : ev->rule == RULE_DENY_DIR
				   ? "(beneath a deny pattern's directory: a hard link out of it, "
				     "or a path too long to match)"
				   : "?";
	const char *hook = ev->hook < RH_MAX ? hooks[ev->hook] : "?";
	size_t o = 0;

	if (size < sizeof(*ev))
		return 0;
	/* a path is the session's: only printable characters, JSON-safe */
	for (size_t i = 0; i < RULE_PATH_MAX && ev->path[i] && o + 2 < sizeof(path); i++) {
		unsigned char c = (unsigned char)ev->path[i];

		path[o++] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\' ? '?' : (char)c;
	}
	path[o] = '\0';
	if (!path[0] && ev->rule < rs->n) {
		const char *p = strchr(rule, ':');
		snprintf(path, sizeof(path), "%.*s", p ? (int)strlen(p + 1) - 1 : 0,
			 p ? p + 1 : "");
	}
	snprintf(json, sizeof(json),
		 "{\"event\":\"rule\",\"session\":\"%s\",\"rule\":\"%s\",\"path\":\"%s\","
		 "\"hook\":\"%s\",\"errno\":\"EACCES\"}",
		 rs->session, rule, path, hook);
	snprintf(text, sizeof(text), "errand: session=%s refused rule=%s path=%s hook=%s",
		 rs->session, rule, path, hook);
	snprintf(target, sizeof(target), "rule %s %s", rule, path);
	rs->fn(json, text, target, rs->arg);
	rs->handled++;
	return 0;
}

/* The rules by id, JSON-safe, for events. */
static int texts(struct rules *rs, const struct errand_config *cfg, char *err, size_t errlen)
{
	int rc;

	rs->text = calloc(cfg->rules.n + 1, sizeof(*rs->text));
	if (!rs->text) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	for (size_t i = 0; i < cfg->rules.n; i++) {
		rs->text[i] = strdup(cfg->rules.v[i].text);
		if (!rs->text[i]) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		/* a rule is config text: keep it JSON-safe in events */
		for (char *c = rs->text[i]; *c; c++)
			if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
				*c = '?';
		rs->n = i + 1;
	}
	return 0;
}

struct rules *rules_attach(const struct errand_config *cfg, const char *home,
			   const char *cgroup_path, const char *pin_dir, char *err, size_t errlen)
{
	struct rules *rs = calloc(1, sizeof(*rs));
	char pin[PATH_MAX];
	int rc;

	if (!rs) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	rs->events_fd = -1;
	if ((rc = texts(rs, cfg, err, errlen)))
		goto fail;
	rs->skel = rules_bpf__open_and_load();
	if (!rs->skel) {
		rc = -errno;
		snprintf(err, errlen,
			 "cannot load the rules' BPF LSM programs: %s (-v prints the verifier's "
			 "log)",
			 strerror(-rc));
		goto fail;
	}
	if ((rc = fill(rs, cfg, home, err, errlen)) ||
	    (rc = attach(rs, cgroup_path, pin_dir, err, errlen)))
		goto fail;
	/* pinned, so an agent restarted while the session runs reads it too */
	if (path_fmt(pin, sizeof(pin), "%s/" RULES_EVENTS_PIN, pin_dir) ||
	    bpf_map__pin(rs->skel->maps.events, pin) < 0) {
		rc = -errno ?: -ENAMETOOLONG;
		snprintf(err, errlen, "cannot pin the rules' events at %s: %s", pin, strerror(-rc));
		goto fail;
	}
	rs->rb = ring_buffer__new(bpf_map__fd(rs->skel->maps.events), on_event, rs, NULL);
	if (!rs->rb) {
		rc = -errno;
		snprintf(err, errlen, "cannot read the rules' events: %s", strerror(-rc));
		goto fail;
	}
	return rs;
fail:
	rules_free(rs);
	errno = -rc;
	return NULL;
}

static int watch(struct rules *rs, int epoll_fd)
{
	struct epoll_event ev = {.events = EPOLLIN};

	return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rs->rb), &ev) < 0 ? -errno
											  : 0;
}

int rules_start(const struct errand_config *cfg, const char *id, const char *record_dir,
		const char *cgroup_path, const char *pin_dir, int epoll_fd, struct rules **out)
{
	char err[512], home[PATH_MAX];
	bool needed = rules_any_lsm(cfg);
	int rc;

	*out = NULL;
	/* errand's own closures are the launcher's. The programs are attached
	 * only for a rule that needs them: their hooks cost every file
	 * operation of the session, and the kernel has ten BPF LSM cgroup hook
	 * slots in all, of which these take all ten. */
	if (!needed)
		return 0;
	/* HOME, as the launcher's --state makes it */
	if (path_fmt(home, sizeof(home), "%s/work", record_dir))
		return -ENAMETOOLONG;
	*out = rules_attach(cfg, home, cgroup_path, pin_dir, err, sizeof(err));
	if (!*out && cfg->require_full) {
		log_warnx("session %s: %s; sandbox.rules cannot be enforced (set "
			  "sandbox.requireFullEnforcement to false to run without them)",
			  id, err);
		return -EPERM;
	}
	if (!*out) {
		log_warnx("session %s: gap: %s; its deny, lazyAllow and Connect rules are NOT "
			  "enforced",
			  id, err);
		return 0;
	}
	if ((rc = watch(*out, epoll_fd)) < 0)
		log_warnx("session %s: cannot watch the rules' events: %s", id, strerror(-rc));
	return rc;
}

struct rules *rules_open(const struct errand_config *cfg, const char *pin_dir, int epoll_fd)
{
	struct rules *rs = calloc(1, sizeof(*rs));
	char pin[PATH_MAX], err[128];
	int rc = -ENOMEM;

	if (!rs)
		goto fail;
	rs->events_fd = -1;
	if ((rc = texts(rs, cfg, err, sizeof(err))))
		goto fail;
	if (path_fmt(pin, sizeof(pin), "%s/" RULES_EVENTS_PIN, pin_dir)) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	rs->events_fd = bpf_obj_get(pin);
	if (rs->events_fd < 0) {
		rc = -errno;
		goto fail;
	}
	rs->rb = ring_buffer__new(rs->events_fd, on_event, rs, NULL);
	if (!rs->rb) {
		rc = -errno;
		goto fail;
	}
	if (watch(rs, epoll_fd) < 0)
		log_warn("cannot watch the rules' events of %s", pin_dir);
	return rs;
fail:
	rules_free(rs);
	errno = -rc;
	return NULL;
}

int rules_events_fd(struct rules *r)
{
	return ring_buffer__epoll_fd(r->rb);
}

int rules_events_drain(struct rules *r, const char *session,
		       void (*fn)(const char *json, const char *text, const char *target,
				  void *arg),
		       void *arg)
{
	int rc;

	r->session = session;
	r->fn = fn;
	r->arg = arg;
	r->handled = 0;
	rc = ring_buffer__consume(r->rb);
	return rc < 0 ? rc : r->handled;
}

void rules_free(struct rules *r)
{
	if (!r)
		return;
	ring_buffer__free(r->rb);
	rules_bpf__destroy(r->skel);
	if (r->events_fd >= 0)
		close(r->events_fd);
	for (size_t i = 0; i < r->n; i++)
		free(r->text[i]);
	free(r->text);
	free(r);
}
