/* The launcher options that carry a session's confinement (see confine.h):
 * the configuration's sandbox.* keys as errand-launch takes them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/confine.h"
#include "agent/rules.h"
#include "lib/landlock.h"

struct argv_out {
	const char **args;
	size_t n, max;
	bool full;
};

static void put(struct argv_out *o, const char *opt, const char *value)
{
	if (o->n + 2 > o->max) {
		o->full = true;
		return;
	}
	o->args[o->n++] = opt;
	o->args[o->n++] = value;
}

static void put_list(struct argv_out *o, const char *opt, const struct config_strv *l)
{
	for (size_t i = 0; i < l->n; i++)
		put(o, opt, l->v[i]);
}

/* sandbox.rules for the launcher: each allow rule's verb on its fixed
 * directory (--rule-allow; a Connect allow binds its socket), and errand's
 * own closures (--mask: the host authorities' sockets and the journal). The
 * rest is the kernel's (agent/rules.c). HOME is the state directory. */
static void put_rules(struct argv_out *o, const struct errand_config *cfg, const char *home,
		      char **store)
{
	/* The caller's: starts in other threads build theirs meanwhile. */
	char(*buf)[PATH_MAX + 16];
	size_t k = 0;

	if (!cfg->rules.n)
		return;
	buf = calloc(cfg->rules.n < CONFIG_RULES_MAX ? cfg->rules.n : CONFIG_RULES_MAX,
		     sizeof(*buf));
	if (!buf) {
		o->full = true;
		return;
	}
	*store = (char *)buf;

	for (size_t i = 0; i < cfg->rules.n && k < CONFIG_RULES_MAX; i++) {
		const struct config_rule *r = &cfg->rules.v[i];
		char path[PATH_MAX], dir[PATH_MAX];

		if (rules_expand(r, home, path, sizeof(path))) {
			o->full = true; /* refused rather than dropped */
			return;
		}
		rules_fixed_dir(path, dir, sizeof(dir));
		if (r->kind == RULE_ALLOW) {
			snprintf(buf[k], sizeof(buf[k]), "%s:%s", config_rule_verb_name(r->verb),
				 dir);
			put(o, "--rule-allow", buf[k++]);
		} else if (r->builtin && r->kind == RULE_DENY) {
			snprintf(buf[k], sizeof(buf[k]), "%s", dir);
			put(o, "--mask", buf[k++]);
		}
	}
}

int confine_launch_args(const struct errand_config *cfg, const char *project_dir,
			const char *state_dir, const char **args, size_t *n, size_t max,
			char **store)
{
	/* Per thread: the daemon starts sessions in several at once. */
	static __thread char fsize[24], tmp[24], shm[24], memory[24], cpu[24], pids[24],
		landlock[8], requester[16];
	struct argv_out o = {.args = args, .n = *n, .max = max};

	*store = NULL;

	if (project_dir)
		put(&o, "--project", project_dir);
	/* The launcher checks, on the tree it mounts, that this uid owns the
	 * project; without it, root (errandctl's own agent) asked. */
	if (cfg->has_requester) {
		snprintf(requester, sizeof(requester), "%u", (unsigned int)cfg->requester);
		put(&o, "--requester", requester);
	}
	/* A project that cannot be idmapped is a gap doctor_gate stated (or
	 * refused); the launcher refuses it too unless the gap is allowed. */
	put(&o, "--project-idmap", cfg->require_full ? "required" : "optional");
	if (state_dir)
		put(&o, "--state", state_dir);
	if (cfg->image)
		put(&o, "--image", cfg->image);
	put_list(&o, "--policy-read", &cfg->policy_read);
	put_list(&o, "--policy-write", &cfg->policy_write);
	put_list(&o, "--policy-exec", &cfg->policy_exec);
	put_list(&o, "--path-extra", &cfg->path_extra);
	put_rules(&o, cfg, state_dir, store);
	/* errand's own directories: other sessions' records and HOMEs, the
	 * control sockets, the pins and the secrets, empty under any grant */
	if (cfg->state_dir)
		put(&o, "--hide", cfg->state_dir);
	if (cfg->run_dir)
		put(&o, "--hide", cfg->run_dir);
	if (cfg->bpf_dir)
		put(&o, "--hide", cfg->bpf_dir);
	if (cfg->secrets_dir)
		put(&o, "--hide", cfg->secrets_dir);
	put_list(&o, "--env", &cfg->env);
	put_list(&o, "--block-syscall", &cfg->blocked_syscalls);
	snprintf(fsize, sizeof(fsize), "%" PRIu64, cfg->limits.file_size);
	snprintf(tmp, sizeof(tmp), "%" PRIu64, cfg->limits.tmp);
	snprintf(shm, sizeof(shm), "%" PRIu64, cfg->limits.shm);
	put(&o, "--fsize", fsize);
	put(&o, "--tmp-size", tmp);
	put(&o, "--shm-size", shm);
	if (cfg->limits.memory) {
		snprintf(memory, sizeof(memory), "%" PRIu64, cfg->limits.memory);
		put(&o, "--memory", memory);
	}
	if (cfg->limits.cpu_milli) {
		snprintf(cpu, sizeof(cpu), "%" PRIu32, cfg->limits.cpu_milli);
		put(&o, "--cpu-milli", cpu);
	}
	if (cfg->limits.pids) {
		snprintf(pids, sizeof(pids), "%" PRIu32, cfg->limits.pids);
		put(&o, "--pids", pids);
	}
	/* With full enforcement required, a kernel below the ABI that confines
	 * truncate and device ioctls is refused by the launcher too (doctor_gate
	 * refuses first); otherwise Landlock is used as far as it goes, or not at
	 * all, as the start-up report said. */
	snprintf(landlock, sizeof(landlock), "%d", cfg->require_full ? LANDLOCK_ABI_FULL : 0);
	put(&o, "--landlock-min", landlock);
	if (o.full)
		return -E2BIG;
	*n = o.n;
	return 0;
}

/* Empties the directory open at fd of everything but subdirectories on its
 * own filesystem, and removes those that are empty. 1 and *sub (an open
 * descriptor) when a non-empty subdirectory is left to descend into, 0 when
 * fd is empty, or -errno. */
static int empty_dir(int fd, dev_t dev, int *sub)
{
	DIR *d;
	struct dirent *de;
	int dup_fd = dup(fd), r = 0;

	if (dup_fd < 0)
		return -errno;
	d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return -errno;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = r ?: -errno;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(fd, de->d_name, 0) < 0)
				r = r ?: -errno;
			continue;
		}
		if (st.st_dev != dev) {
			r = r ?: -EXDEV; /* a mount point: never errand's to empty */
			continue;
		}
		if (unlinkat(fd, de->d_name, AT_REMOVEDIR) == 0)
			continue;
		*sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*sub >= 0) {
			closedir(d);
			return 1;
		}
		r = r ?: -errno;
	}
	closedir(d);
	return r;
}

int confine_remove_tree(const char *path)
{
	int fd, sub = -1, up, depth = 0, r, first = 0;
	struct stat top;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		/* A link or a file where a directory was expected: the name goes. */
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	}
	if (fstat(fd, &top) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	for (;;) {
		r = empty_dir(fd, top.st_dev, &sub);
		if (r == 1) {
			close(fd);
			fd = sub;
			depth++;
			continue;
		}
		if (r < 0 && !first)
			first = r;
		/* Up again, where the directory just emptied goes next round; one
		 * that could not be emptied ends the walk, so it never loops. */
		if (depth == 0 || r < 0)
			break;
		up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up < 0) {
			first = -errno;
			break;
		}
		close(fd);
		fd = up;
		depth--;
	}
	close(fd);
	if (rmdir(path) < 0 && errno != ENOENT)
		first = first ?: -errno;
	return first;
}
