/* The session's Landlock ruleset, applied to the command process after the
 * mounts and before seccomp: the floor (project and state writable and
 * executable; /tmp and /dev/shm writable; system directories read and
 * execute; /proc read; the few /dev nodes a program needs) and the
 * --policy-* grants and sandbox.rules' allow rules (--rule-allow, the
 * rights of their verb on the fixed directory of their pattern), which only
 * add. Every
 * access right the kernel's ABI knows is handled, up to LANDLOCK_ABI_KNOWN. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/landlock.h"
#include "lib/log.h"
#include "lib/util.h"

#define FS(x) LANDLOCK_ACCESS_FS_##x
#define READ (FS(READ_FILE) | FS(READ_DIR))
#define EXEC FS(EXECUTE)
/* Writing: no device nodes (a user namespace cannot make them anyway). */
#define WRITE                                                                                      \
	(FS(WRITE_FILE) | FS(REMOVE_DIR) | FS(REMOVE_FILE) | FS(MAKE_DIR) | FS(MAKE_REG) |         \
	 FS(MAKE_SOCK) | FS(MAKE_FIFO) | FS(MAKE_SYM) | FS(REFER) | FS(TRUNCATE))
#define DEVICE (FS(READ_FILE) | FS(WRITE_FILE) | FS(TRUNCATE) | FS(IOCTL_DEV))
/* What a rule on a file (not a directory) may carry. */
#define FILE_RIGHTS (FS(EXECUTE) | FS(WRITE_FILE) | FS(READ_FILE) | FS(TRUNCATE) | FS(IOCTL_DEV))

static const char *const system_dirs[] = {"/usr", "/etc",   "/bin",   "/sbin",
					  "/lib", "/lib32", "/lib64", "/libx32"};
static const char *const dev_nodes[] = {"/dev/null",   "/dev/zero",    "/dev/full",
					"/dev/random", "/dev/urandom", "/dev/tty"};

/* Every filesystem right the ABI knows. */
static __u64 handled_fs(int abi)
{
	__u64 all = (FS(MAKE_SYM) << 1) - 1; /* ABI 1: EXECUTE through MAKE_SYM */

	if (abi >= 2)
		all |= FS(REFER);
	if (abi >= LANDLOCK_ABI_TRUNCATE)
		all |= FS(TRUNCATE);
	if (abi >= LANDLOCK_ABI_IOCTL_DEV)
		all |= FS(IOCTL_DEV);
	return all;
}

/* One path_beneath rule. A path that is not there is skipped: the floor
 * names directories not every root has, and a grant only adds. */
static int add_rule(int ruleset, const char *path, __u64 access, __u64 handled, bool warn)
{
	struct landlock_path_beneath_attr pb = {0};
	struct stat st;
	int fd, r = 0;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (warn)
			log_warnx("%s does not exist in the session's root; nothing is granted "
				  "there",
				  path);
		return 0;
	}
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= FILE_RIGHTS;
	pb.allowed_access = access & handled;
	pb.parent_fd = fd;
	if (pb.allowed_access &&
	    syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
		r = -errno;
		log_warn("cannot add the Landlock rule for %s", path);
	}
	close(fd);
	return r;
}

static const char *const rule_verbs[] = {"Read", "Edit", "Create", "Delete", "Exec", "Connect"};

int launch_rule_verb(const char *v)
{
	const char *colon = strchr(v, ':');

	if (!colon || colon[1] != '/')
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(rule_verbs); i++)
		if (strlen(rule_verbs[i]) == (size_t)(colon - v) &&
		    !strncmp(v, rule_verbs[i], colon - v))
			return (int)i;
	return -EINVAL;
}

/* The Landlock rights one allow rule's verb widens the floor by. Connect
 * has none: a socket is reached through its bound path, not a right. */
static __u64 verb_rights(int verb)
{
	switch (verb) {
	case LRV_READ:
		return READ;
	case LRV_EDIT:
		return FS(WRITE_FILE) | FS(TRUNCATE);
	case LRV_CREATE:
		/* a new file is written: Landlock cannot tell that first write
		 * from an edit of what was there */
		return FS(MAKE_REG) | FS(MAKE_DIR) | FS(MAKE_SOCK) | FS(MAKE_FIFO) | FS(MAKE_SYM) |
		       FS(REFER) | FS(WRITE_FILE);
	case LRV_DELETE:
		return FS(REMOVE_FILE) | FS(REMOVE_DIR) | FS(REFER);
	case LRV_EXEC:
		return EXEC | READ; /* a script's interpreter reads it */
	}
	return 0;
}

static int add_rule_allows(int ruleset, const struct launch_list *l, __u64 handled)
{
	int r = 0;

	for (size_t i = 0; i < l->n && r == 0; i++) {
		int verb = launch_rule_verb(l->v[i]);
		__u64 rights = verb_rights(verb);

		if (rights)
			r = add_rule(ruleset, launch_rule_path(l->v[i]), rights, handled, true);
	}
	return r;
}

static int add_list(int ruleset, const struct launch_list *l, __u64 access, __u64 handled,
		    bool warn)
{
	int r = 0;

	for (size_t i = 0; i < l->n && r == 0; i++)
		r = add_rule(ruleset, l->v[i], access, handled, warn);
	return r;
}

/* The project and state directories are where a session builds and runs
 * things. /tmp and /dev/shm are scratch, written but not executed from: a
 * rule covers everything beneath it, so a read-only grant bound under /tmp
 * must not become executable through /tmp's own rule. */
static int add_floor(int ruleset, const struct launch_args *a, __u64 handled)
{
	const char *work[] = {a->project_in, a->state_in};
	const char *scratch[] = {"/tmp", "/dev/shm"};
	char resolv[PATH_MAX];
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(system_dirs) && r == 0; i++)
		r = add_rule(ruleset, system_dirs[i], READ | EXEC, handled, false);
	for (size_t i = 0; i < ARRAY_SIZE(dev_nodes) && r == 0; i++)
		r = add_rule(ruleset, dev_nodes[i], DEVICE, handled, false);
	for (size_t i = 0; i < ARRAY_SIZE(scratch) && r == 0; i++)
		r = add_rule(ruleset, scratch[i], READ | WRITE, handled, false);
	for (size_t i = 0; i < ARRAY_SIZE(work) && r == 0; i++)
		if (work[i])
			r = add_rule(ruleset, work[i], READ | EXEC | WRITE, handled, false);
	if (r == 0)
		r = add_rule(ruleset, "/proc", READ, handled, false);
	if (r == 0)
		r = add_rule(ruleset, "/dev", FS(READ_DIR), handled, false);
	if (r == 0)
		r = add_rule(ruleset, "/dev/pts", READ | DEVICE, handled, false);
	if (r == 0 && a->ca_bundle)
		r = add_rule(ruleset, LAUNCH_CA_BUNDLE, FS(READ_FILE), handled, false);
	/* The session's resolv.conf where a link on /etc/resolv.conf leads. */
	if (r == 0 && realpath("/etc/resolv.conf", resolv) && strncmp(resolv, "/etc/", 5))
		r = add_rule(ruleset, resolv, FS(READ_FILE), handled, false);
	return r;
}

static int refuse_abi(const struct launch_args *a, int abi)
{
	if (abi < 0)
		log_warnx("this requires Landlock, which the kernel %s; set "
			  "sandbox.requireFullEnforcement to false to run without it",
			  abi == -ENOSYS ? "was built without (CONFIG_SECURITY_LANDLOCK)"
					 : "has not enabled (add landlock to the lsm= boot "
					   "parameter)");
	else
		log_warnx("the kernel's Landlock ABI is %d and this session needs %d; run a "
			  "newer kernel or set sandbox.requireFullEnforcement to false",
			  abi, a->landlock_min);
	return -EOPNOTSUPP;
}

int landlock_apply(const struct launch_args *a)
{
	struct errand_landlock_ruleset_attr attr = {0};
	size_t size = sizeof(attr.handled_access_fs);
	cleanup_close int ruleset = -1;
	int abi = landlock_abi(), r;

	if (abi < 0 && a->landlock_min == 0)
		return 0; /* stated as a gap at start */
	if (abi < 0 || abi < a->landlock_min)
		return refuse_abi(a, abi);
	if (abi > LANDLOCK_ABI_KNOWN)
		abi = LANDLOCK_ABI_KNOWN;

	attr.handled_access_fs = handled_fs(abi);
	if (abi >= 4)
		size = offsetof(struct errand_landlock_ruleset_attr, scoped);
	if (abi >= 6) {
		/* Signals and abstract sockets stay within the session. */
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	ruleset = syscall(__NR_landlock_create_ruleset, &attr, size, 0);
	if (ruleset < 0) {
		r = -errno;
		log_warn("cannot create a Landlock ruleset (ABI %d)", abi);
		return r;
	}
	if ((r = add_floor(ruleset, a, attr.handled_access_fs)) < 0 ||
	    (r = add_list(ruleset, &a->policy_read, READ, attr.handled_access_fs,
			  a->image != NULL)) < 0 ||
	    (r = add_list(ruleset, &a->policy_write, READ | WRITE, attr.handled_access_fs,
			  a->image != NULL)) < 0 ||
	    (r = add_list(ruleset, &a->policy_exec, EXEC, attr.handled_access_fs,
			  a->image != NULL)) < 0 ||
	    (r = add_rule_allows(ruleset, &a->rule_allow, attr.handled_access_fs)) < 0)
		return r;
	if (syscall(__NR_landlock_restrict_self, ruleset, 0) < 0) {
		r = -errno;
		log_warn("cannot restrict the session with Landlock");
		return r;
	}
	return abi;
}
