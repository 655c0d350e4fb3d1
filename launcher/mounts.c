/* The session's root, built by its PID 1 inside its user and mount
 * namespaces: a tmpfs holding the host's system directories (or an image's
 * entries) read-only, the project, state and policy paths, a fresh /proc, a
 * minimal /dev, sized tmpfs on /tmp and /dev/shm; then the host's root
 * detached and the new one entered, so nothing else of the host is reachable
 * at all.
 * Landlock (landlock.c) is the second wall, over the same paths. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

/* The scaffolding, after bubblewrap: a tmpfs on /tmp becomes the root (a
 * pivot made ahead, see session_init_ahead), with the host's root below it at
 * OLD and the session's at NEW. */
#define STAGE "/tmp"
#define OLD "/oldroot"
#define NEW "/newroot"
#define RESOLV_CONF "/etc/resolv.conf"
#define ROOT_SIZE (1ULL << 20)
#define DEV_SIZE (64ULL << 10)

/* The host's directories a session reads and runs programs from. */
static const char *const system_dirs[] = {"usr", "etc",	  "bin",   "sbin",
					  "lib", "lib32", "lib64", "libx32"};
/* Host device nodes bound into the session's /dev. */
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
/* The entries of an image that errand mounts itself. */
static const char *const image_own[] = {"proc", "dev", "tmp", "workspace", "state"};

static int fail(const char *what, const char *path)
{
	int r = -errno;

	log_warn("cannot %s %s in the session's mount namespace", what, path);
	return r;
}

static int set_attr(const char *path, unsigned int flags, uint64_t attr)
{
	struct mount_attr ma = {.attr_set = attr};

	if (mount_setattr(AT_FDCWD, path, flags, &ma, sizeof(ma)) < 0)
		return fail("set the mount attributes of", path);
	return 0;
}

/* A recursive bind, read-only unless rw. What the host locked on the source
 * (nosuid, noexec, ...) stays: mount_setattr only adds. */
static int bind(const char *src, const char *dst, bool rw)
{
	uint64_t attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY);

	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0) {
		int r = -errno;

		log_warn("cannot bind %s on %s in the session's mount namespace", src + strlen(OLD),
			 dst + strlen(NEW));
		return r;
	}
	return set_attr(dst, AT_RECURSIVE, attr);
}

/* mkdir -p of path, or of its parent only. */
static int mkdir_p(const char *path, bool parent_only)
{
	char buf[PATH_MAX];
	char *end;

	if (path_fmt(buf, sizeof(buf), "%s", path))
		return -ENAMETOOLONG;
	end = parent_only ? strrchr(buf, '/') : buf + strlen(buf);
	for (char *p = buf + 1; p <= end; p++) {
		char c = *p;

		if (p < end && c != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return fail("make the directory", buf);
		*p = c;
	}
	return 0;
}

/* An empty file to bind a file on; one already there (even on a read-only
 * mount) is fine. */
static int touch(const char *path)
{
	int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0)
		return fail("make the file", path);
	if (fd >= 0)
		close(fd);
	return 0;
}

static int tmpfs(const char *path, mode_t mode, uint64_t size, unsigned long flags)
{
	char opts[64];

	snprintf(opts, sizeof(opts), "mode=%04o,size=%llu", (unsigned int)mode,
		 (unsigned long long)size);
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | flags, opts) < 0)
		return fail("mount a tmpfs on", path);
	return 0;
}

/* A symlink in the new root as the source has it, or a bind of what it is. */
static int copy_entry(const char *src, const char *dst, bool rw)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int r;

	if (lstat(src, &st) < 0)
		return errno == ENOENT ? 0 : fail("read", src);
	if (S_ISLNK(st.st_mode)) {
		n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return fail("read the link", src);
		target[n] = '\0';
		if (symlink(target, dst) < 0)
			return fail("make the link", dst);
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		r = mkdir(dst, 0755) < 0 && errno != EEXIST ? fail("make the directory", dst) : 0;
	else if (S_ISREG(st.st_mode))
		r = touch(dst);
	else
		return 0; /* sockets, fifos and devices of an image are left out */
	return r < 0 ? r : bind(src, dst, rw);
}

static int system_root(void)
{
	char src[PATH_MAX], dst[PATH_MAX];
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++) {
		snprintf(src, sizeof(src), OLD "/%s", system_dirs[i]);
		snprintf(dst, sizeof(dst), NEW "/%s", system_dirs[i]);
		r = copy_entry(src, dst, false);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Every entry of the image, read-only, but those errand mounts itself. */
static int image_root(const char *image)
{
	char src[PATH_MAX], dst[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (path_fmt(src, sizeof(src), OLD "%s", image))
		return -ENAMETOOLONG;
	d = opendir(src);
	if (!d) {
		r = -errno;
		log_warn("cannot read the image %s as the session's uid", image);
		return r;
	}
	while (r == 0 && (de = readdir(d))) {
		bool own = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");

		for (size_t i = 0; i < ARRAY_SIZE(image_own) && !own; i++)
			own = !strcmp(de->d_name, image_own[i]);
		if (own)
			continue;
		if (path_fmt(src, sizeof(src), OLD "%s/%s", image, de->d_name) ||
		    path_fmt(dst, sizeof(dst), NEW "/%s", de->d_name))
			r = -ENAMETOOLONG;
		else
			r = copy_entry(src, dst, false);
	}
	closedir(d);
	return r;
}

static int proc(void)
{
	if (mkdir(NEW "/proc", 0555) < 0)
		return fail("make", "/proc");
	/* Mounted inside the session's PID namespace: only its processes. */
	if (mount("proc", NEW "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return fail("mount a new proc on", "/proc");
	return 0;
}

static int dev_nodes_links(void)
{
	static const char *const links[][2] = {{"fd", "/proc/self/fd"},
					       {"stdin", "/proc/self/fd/0"},
					       {"stdout", "/proc/self/fd/1"},
					       {"stderr", "/proc/self/fd/2"}};
	char src[64], dst[64];
	int r;

	if (mkdir(NEW "/dev", 0755) < 0)
		return fail("make", "/dev");
	if ((r = tmpfs(NEW "/dev", 0755, DEV_SIZE, MS_NOEXEC)) < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
		snprintf(src, sizeof(src), OLD "/dev/%s", dev_nodes[i]);
		snprintf(dst, sizeof(dst), NEW "/dev/%s", dev_nodes[i]);
		if ((r = touch(dst)) < 0)
			return r;
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return fail("bind the host's device", src + strlen(OLD));
		if ((r = set_attr(dst, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC)) < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(dst, sizeof(dst), NEW "/dev/%s", links[i][0]);
		if (symlink(links[i][1], dst) < 0)
			return fail("make the link", dst);
	}
	/* A devpts of the session's own, for programs that want a terminal;
	 * a kernel that refuses one in a user namespace only costs them that. */
	if (mkdir(NEW "/dev/pts", 0755) < 0)
		return fail("make", "/dev/pts");
	if (mount("devpts", NEW "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") == 0) {
		if (symlink("pts/ptmx", NEW "/dev/ptmx") < 0)
			return fail("make the link", "/dev/ptmx");
	} else {
		log_debug("no devpts in the session: %s", strerror(errno));
	}
	return 0;
}

/* The session's sized /dev/shm, then /dev read-only. */
static int dev_finish(const struct launch_args *a)
{
	int r;

	if (mkdir(NEW "/dev/shm", 01777) < 0)
		return fail("make", "/dev/shm");
	if ((r = tmpfs(NEW "/dev/shm", 01777, a->shm_size, 0)) < 0)
		return r;
	return set_attr(NEW "/dev", 0, MOUNT_ATTR_RDONLY);
}

static int resolv(const char *file);
static int ca_bundle(const char *file, bool image);

/* A bind of a host path into the new root at the same path, or one of
 * errand's own directories covered where a grant reached it. */
struct grant {
	const char *path; /* NULL once found covered or missing */
	bool rw;
	int tree;    /* a detached tree to move there (the project's, idmapped); -1: bind path */
	bool own;    /* the session's project or state, or the one socket a Connect allow
		      * names (errand's control socket, say): bound even inside a hidden
		      * directory */
	bool hide;   /* errand's own directory: covered by an empty tmpfs where visible */
	bool hidden; /* a hide whose tmpfs is mounted */
};

/* Top-level entries of the host's root that a grant of / leaves as the
 * session's own. */
static const char *const root_own[] = {"proc", "dev", "tmp"};

static int grant_cmp(const void *x, const void *y)
{
	const struct grant *a = x, *b = y;
	size_t la = strlen(a->path), lb = strlen(b->path);

	/* Parents before children; of the same path, the writable one first. */
	if (la != lb)
		return la < lb ? -1 : 1;
	return (int)b->rw - (int)a->rw;
}

/* Whether the bind of g shows path: a grant of / leaves the session's own
 * /proc, /dev and /tmp in place. */
static bool reaches(const struct grant *g, const char *path)
{
	if (!path_beneath(path, g->path))
		return false;
	if (strcmp(g->path, "/"))
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(root_own); i++)
		if (path_beneath(path + 1, root_own[i]))
			return false;
	return true;
}

/* A bind of the host's path as the start resolved it: a link found on the
 * way now (one made since, to lead the bind elsewhere) binds nothing. The
 * tree is cloned from the descriptor, so what is bound is what was
 * checked. 1 when nothing is there to bind. */
static int bind_exact(const char *path, const char *dst, bool rw)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
	uint64_t attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY);
	cleanup_close int fd = -1, tree = -1;
	char src[PATH_MAX];
	struct stat st;
	int r;

	if (path_fmt(src, sizeof(src), OLD "%s", path))
		return -ENAMETOOLONG;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, src, &how, sizeof(how));
	if (fd < 0 && errno == ELOOP) {
		log_warnx("%s leads through a link made since the start resolved it; nothing is "
			  "granted there",
			  path);
		return 1;
	}
	if (fd < 0 || fstat(fd, &st) < 0) {
		/* Additive only: a path that is not there grants nothing. */
		log_warnx("%s does not exist or the session's uid cannot reach it; nothing is "
			  "granted there",
			  path);
		return 1;
	}
	r = mkdir_p(dst, !S_ISDIR(st.st_mode));
	if (r == 0 && !S_ISDIR(st.st_mode))
		r = touch(dst);
	if (r < 0)
		return r;
	tree = (int)syscall(SYS_open_tree, fd, "",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	if (tree < 0 || move_mount(tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		r = -errno;
		log_warn("cannot bind %s in the session's mount namespace", path);
		return r;
	}
	return set_attr(dst, AT_RECURSIVE, attr);
}

/* A grant of /: each of the host root's entries the session's root lacks,
 * as copy_entry makes them (a writable grant binds the system directories
 * again, writable), but the session's own /proc, /dev and /tmp. */
static int root_grant(bool rw)
{
	char src[PATH_MAX], dst[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int r = 0;
	DIR *d = opendir(OLD);

	if (!d)
		return fail("read", "the host's root");
	while (r == 0 && (de = readdir(d))) {
		bool skip = de->d_name[0] == '.' &&
			    (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]));

		for (size_t i = 0; i < ARRAY_SIZE(root_own) && !skip; i++)
			skip = !strcmp(de->d_name, root_own[i]);
		if (skip || path_fmt(src, sizeof(src), OLD "/%s", de->d_name) ||
		    path_fmt(dst, sizeof(dst), NEW "/%s", de->d_name))
			continue;
		if (lstat(dst, &st) < 0)
			r = copy_entry(src, dst, rw);
		else if (rw && S_ISDIR(st.st_mode))
			r = bind(src, dst, true);
	}
	closedir(d);
	return r;
}

/* Covers errand's own directory at g where a grant made it visible, with
 * an empty tmpfs the session's own grants inside are then made in; read-only
 * once they are (hides_seal). Reached through a link it is left: the link
 * leads nowhere in the session's root. */
static int hide(struct grant *g)
{
	char dst[PATH_MAX], parent[PATH_MAX], real[PATH_MAX];
	struct stat st;
	int r;

	if (path_fmt(dst, sizeof(dst), NEW "%s", g->path) ||
	    path_fmt(parent, sizeof(parent), "%s", dst))
		return -ENAMETOOLONG;
	if (lstat(dst, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	/* one the session's uid cannot enter (the secrets, root's 0700) is
	 * hidden already, and a mount fewer makes a faster start */
	if (access(dst, X_OK) < 0 && errno == EACCES)
		return 0;
	*strrchr(parent, '/') = '\0';
	if (!realpath(parent, real) || strcmp(real, parent))
		return 0;
	if ((r = tmpfs(dst, 0755, 65536, 0)) < 0)
		return r;
	g->hidden = true;
	return 0;
}

static int hides_seal(const struct grant *g, size_t n)
{
	char dst[PATH_MAX];
	int r;

	for (size_t i = 0; i < n; i++) {
		if (!g[i].hidden)
			continue;
		if (path_fmt(dst, sizeof(dst), NEW "%s", g[i].path))
			return -ENAMETOOLONG;
		if ((r = set_attr(dst, 0, MOUNT_ATTR_RDONLY)) < 0)
			return r;
	}
	return 0;
}

/* A grant the session's root never takes from the host: under its own /proc
 * and /dev (the configuration refuses those), or under one of errand's own
 * directories. Said once; the grant is dropped. */
static bool grant_refused(const struct grant *g, const struct grant *all, size_t n)
{
	static const char *const floor[] = {"/proc", "/dev"};

	if (g->own || g->hide)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(floor); i++)
		if (strcmp(g->path, "/") && path_beneath(g->path, floor[i])) {
			log_warnx("%s is under the session's own %s; nothing is granted there",
				  g->path, floor[i]);
			return true;
		}
	for (size_t i = 0; i < n; i++)
		if (all[i].hide && path_beneath(g->path, all[i].path)) {
			log_warnx("%s is under %s, errand's own; nothing is granted there", g->path,
				  all[i].path);
			return true;
		}
	return false;
}

/* Binds each grant at dst_of(grant) (its own path when NULL). A path already
 * visible through an earlier bind with at least its access is left as it
 * is, so a grant never narrows another; one under a hidden directory of
 * errand's is bound again inside it. */
static int bind_grants(struct grant *g, size_t n, const char *const *dst_of)
{
	char dst[PATH_MAX];
	int r;

	for (size_t i = 0; i < n; i++) {
		bool covered = false;

		if (g[i].hide) {
			if ((r = hide(&g[i])) < 0)
				return r;
			continue;
		}
		if (!dst_of && grant_refused(&g[i], g, n)) {
			g[i].path = NULL;
			continue;
		}
		/* Bound elsewhere (an image's /workspace and /state), none covers
		 * another. */
		for (size_t j = 0; j < i && !dst_of; j++) {
			if (!g[j].path || !reaches(&g[j], g[i].path))
				continue;
			if (g[j].hide)
				covered &= !g[j].hidden;
			else
				covered |= g[j].rw || !g[i].rw;
		}
		/* The project is always its own mount: a writable parent granted
		 * by policy must not stand in for its idmapped tree. */
		if (covered && g[i].tree < 0)
			continue;
		if (path_fmt(dst, sizeof(dst), NEW "%s",
			     dst_of && dst_of[i] ? dst_of[i] : g[i].path))
			return -ENAMETOOLONG;
		if (g[i].tree >= 0) {
			r = mkdir_p(dst, false);
			if (r == 0 &&
			    move_mount(g[i].tree, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
				r = fail("mount the project on", dst + strlen(NEW));
			close(g[i].tree); /* mounted now; the mount holds it */
			if (r < 0)
				return r;
			continue;
		}
		if (!strcmp(g[i].path, "/")) {
			if ((r = root_grant(g[i].rw)) < 0)
				return r;
			continue;
		}
		if ((r = bind_exact(g[i].path, dst, g[i].rw)) < 0)
			return r;
		if (r > 0)
			g[i].path = NULL;
	}
	return 0;
}

static bool listed(const struct launch_list *l, const char *path)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], path))
			return true;
	return false;
}

static int host_grants(const struct launch_args *a)
{
	const struct launch_list *ro[] = {&a->policy_read, &a->policy_exec};
	cleanup_free struct grant *g = NULL;
	size_t n = 0;
	int r;

	g = calloc(3 + a->policy_read.n + a->policy_exec.n + a->policy_write.n + a->rule_allow.n +
			   a->hide.n,
		   sizeof(*g));
	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < a->rule_allow.n; i++)
		g[n++] = (struct grant){
			.path = launch_rule_path(a->rule_allow.v[i]),
			.rw = launch_rule_writes(launch_rule_verb(a->rule_allow.v[i])),
			.tree = -1,
			.own = launch_rule_verb(a->rule_allow.v[i]) == LRV_CONNECT};
	g[n++] = (struct grant){.path = a->project, .rw = true, .tree = a->project_fd, .own = true};
	if (a->state)
		g[n++] = (struct grant){.path = a->state, .rw = true, .tree = -1, .own = true};
	for (size_t i = 0; i < a->policy_write.n; i++)
		g[n++] = (struct grant){.path = a->policy_write.v[i], .rw = true, .tree = -1};
	for (size_t k = 0; k < ARRAY_SIZE(ro); k++)
		for (size_t i = 0; i < ro[k]->n; i++)
			g[n++] = (struct grant){.path = ro[k]->v[i], .tree = -1};
	for (size_t i = 0; i < a->hide.n; i++)
		g[n++] = (struct grant){.path = a->hide.v[i], .tree = -1, .hide = true};
	/* The CA bundle's directory, where a grant of /run shows the host's */
	if (a->ca_bundle && !listed(&a->hide, LAUNCH_CA_DIR))
		g[n++] = (struct grant){.path = LAUNCH_CA_DIR, .tree = -1, .hide = true};
	qsort(g, n, sizeof(*g), grant_cmp);
	if ((r = bind_grants(g, n, NULL)) < 0)
		return r;
	/* errand's own files go in before the hidden directories are sealed:
	 * the bundle's is one of them */
	if (a->resolv && (r = resolv(a->resolv)) < 0)
		return r;
	if (a->ca_bundle && (r = ca_bundle(a->ca_bundle, false)) < 0)
		return r;
	return hides_seal(g, n);
}

/* The host's authorities (daemon sockets, the journal) a grant may have
 * brought into the root: each is covered, a directory by an empty read-only
 * tmpfs, anything else by /dev/null on a nodev mount (a connect finds no
 * socket there). The session cannot unmount them (seccomp refuses umount). */
static int masks(const struct launch_args *a)
{
	char dst[PATH_MAX], parent[PATH_MAX], real[PATH_MAX];
	struct stat st;
	int r;

	for (size_t i = 0; i < a->mask.n; i++) {
		if (path_fmt(dst, sizeof(dst), NEW "%s", a->mask.v[i]))
			return -ENAMETOOLONG;
		if (lstat(dst, &st) < 0)
			continue; /* not in the session's root: nothing to hide */
		/* Reached through a link (/var/run to /run): what it leads to is
		 * hidden under its own name, and the link must not lead this
		 * mount out of the new root. */
		if (path_fmt(parent, sizeof(parent), "%s", dst))
			return -ENAMETOOLONG;
		*strrchr(parent, '/') = '\0';
		if (!realpath(parent, real) || strcmp(real, parent))
			continue;
		if (S_ISLNK(st.st_mode)) {
			log_warnx("%s is a link in the session's root; refusing to run with it, "
				  "since errand hides it and cannot follow the link safely",
				  a->mask.v[i]);
			return -ELOOP;
		}
		if (S_ISDIR(st.st_mode))
			r = tmpfs(dst, 0555, 4096, MS_RDONLY);
		else
			r = bind(OLD "/dev/null", dst, false);
		if (r < 0)
			return r;
	}
	return 0;
}

/* With an image the policy paths are the image's own; only the project and
 * state come from the host, at /workspace and /state. */
static int image_grants(const struct launch_args *a)
{
	struct grant g[2] = {{.path = a->project, .rw = true, .tree = a->project_fd, .own = true},
			     {.path = a->state, .rw = true, .tree = -1, .own = true}};
	const char *dst[2] = {LAUNCH_IMAGE_PROJECT, LAUNCH_IMAGE_STATE};
	int r = bind_grants(g, a->state ? 2 : 1, dst);

	if (r == 0 && a->resolv)
		r = resolv(a->resolv);
	if (r == 0 && a->ca_bundle)
		r = ca_bundle(a->ca_bundle, true);
	return r;
}

/* The session's resolv.conf on the root's. A root whose resolv.conf is a
 * link (to /run/systemd/resolve/..., say) gets the bind where the link
 * leads, made in the root's own tmpfs when that is not there. */
static int resolv(const char *file)
{
	char src[PATH_MAX], dst[PATH_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int r;

	if (path_fmt(src, sizeof(src), OLD "%s", file))
		return -ENAMETOOLONG;
	snprintf(dst, sizeof(dst), NEW "%s", RESOLV_CONF);
	if (lstat(dst, &st) == 0 && S_ISLNK(st.st_mode)) {
		n = readlink(dst, target, sizeof(target) - 1);
		if (n < 0)
			return fail("read the link", RESOLV_CONF);
		target[n] = '\0';
		if (path_fmt(dst, sizeof(dst), NEW "%s%s", target[0] == '/' ? "" : "/etc/", target))
			return -ENAMETOOLONG;
		if (lstat(dst, &st) < 0 && ((r = mkdir_p(dst, true)) < 0 || (r = touch(dst)) < 0))
			return r;
	} else if (lstat(dst, &st) < 0) {
		log_warnx("the session's root has no %s to bind the session's on; give the image "
			  "one (any content)",
			  RESOLV_CONF);
		return -ENOENT;
	}
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0) {
		r = -errno;
		log_warnx("cannot bind-mount %s on %s: %s; both must exist for the session's uid",
			  file, RESOLV_CONF, strerror(-r));
		return r;
	}
	return set_attr(dst, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

/* The roots the session trusts, its broker's CA among them, at a fixed path
 * in the root's own tmpfs. An image's /run (a bind of the image's own) is
 * covered by a small tmpfs first, so nothing is written into the image; an
 * image's own store, where it has one, is covered by the bundle too (the
 * agent made it from that store). */
static int ca_bundle(const char *file, bool image)
{
	static const char image_store[] = "/etc/ssl/certs/ca-certificates.crt";
	char src[PATH_MAX];
	const char *dst = NEW LAUNCH_CA_BUNDLE;
	struct stat st;
	int r;

	if (path_fmt(src, sizeof(src), OLD "%s", file))
		return -ENAMETOOLONG;
	if (image && lstat(NEW "/run", &st) == 0) {
		if (!S_ISDIR(st.st_mode)) {
			log_warnx("the image's /run is not a directory; the session's CA bundle "
				  "goes there: make it one");
			return -ENOTDIR;
		}
		if ((r = tmpfs(NEW "/run", 0755, 65536, 0)) < 0)
			return r;
	}
	if (lstat(NEW LAUNCH_CA_DIR, &st) < 0 && lstat(NEW "/run", &st) == 0 &&
	    access(NEW "/run", W_OK) < 0) {
		log_warnx("the session's CA bundle goes in " LAUNCH_CA_DIR ", which a grant of "
			  "/run leaves no room for; grant narrower paths under /run");
		return -EROFS;
	}
	if ((r = mkdir_p(dst, true)) < 0 || (r = touch(dst)) < 0)
		return r;
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return fail("bind the CA bundle on", LAUNCH_CA_BUNDLE);
	r = set_attr(dst, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (r == 0 && image && lstat(NEW "/etc/ssl/certs/ca-certificates.crt", &st) == 0 &&
	    S_ISREG(st.st_mode)) {
		if (mount(src, NEW "/etc/ssl/certs/ca-certificates.crt", NULL, MS_BIND, NULL) < 0)
			return fail("bind the CA bundle on", image_store);
		r = set_attr(NEW "/etc/ssl/certs/ca-certificates.crt", 0,
			     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	}
	return r;
}

static int stage(void)
{
	int r;

	/* Nothing mounted in the session may reach the host, nor the reverse. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail("make recursively private", "/");
	if ((r = tmpfs(STAGE, 0700, ROOT_SIZE, 0)) < 0)
		return r;
	if (mkdir(STAGE OLD, 0700) < 0 || mkdir(STAGE NEW, 0755) < 0)
		return fail("make the staging directories in", STAGE);
	if (syscall(SYS_pivot_root, STAGE, STAGE OLD) < 0)
		return fail("pivot_root to", STAGE);
	if (chdir("/") < 0)
		return fail("change to", "/");
	return tmpfs(NEW, 0755, ROOT_SIZE, 0);
}

/* Into the new root, without pivot_root: it looks at every task of the host
 * for those whose root or cwd is the old root (a millisecond and more of a
 * start with a thousand sessions running), and only this one is in it. The
 * host's root is detached whole first; the new root is moved over the
 * staging tmpfs and entered with chroot. A mount over its parent's own root
 * is climbed past, so '..' at the session's root, chrooted or not, stays
 * there (launcher/view); the tmpfs below, reached by no path, is left empty
 * and read-only all the same. */
static int enter(void)
{
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	cleanup_close int stage = -1;

	if (set_attr(NEW, 0, MOUNT_ATTR_RDONLY) < 0)
		return -errno;
	if (umount2(OLD, MNT_DETACH) < 0)
		return fail("detach", "the host's root");
	if (rmdir(OLD) < 0)
		return fail("remove", OLD);
	if ((stage = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail("open", "the staging root");
	if (chdir(NEW) < 0)
		return fail("change to", NEW);
	if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
		return fail("move the session's root onto", "/");
	if (chroot(".") < 0)
		return fail("enter", "the session's root");
	if (chdir("/") < 0)
		return fail("change to", "/");
	if (unlinkat(stage, NEW + 1, AT_REMOVEDIR) < 0)
		return fail("remove", NEW);
	if (mount_setattr(stage, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
		return fail("make read-only", "the staging root");
	return 0;
}

int mounts_prepare(const char *image)
{
	int r;

	if ((r = stage()) < 0)
		return r;
	r = image ? image_root(image) : system_root();
	if (r < 0)
		return r;
	if ((r = proc()) < 0)
		return r;
	return dev_nodes_links();
}

int mounts_shed_netns_dir(const char *netns)
{
	const char *slash = strrchr(netns, '/');
	char dir[PATH_MAX];
	int back;

	if (!slash || slash == netns || (size_t)(slash - netns) >= sizeof(dir))
		return -EINVAL;
	memcpy(dir, netns, (size_t)(slash - netns));
	dir[slash - netns] = '\0';
	back = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (back < 0)
		return -errno;
	/* Private first: the directory is a shared mount, and an unmount in a
	 * copy still of its peer group would unmount it on the host too. */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		int r = -errno;

		if (setns(back, CLONE_NEWNS) < 0)
			r = -errno;
		close(back);
		return r;
	}
	umount2(dir, MNT_DETACH); /* not a mount of its own: nothing to shed */
	return back;
}

int mounts_finish(const struct launch_args *a)
{
	int r;

	if ((r = dev_finish(a)) < 0)
		return r;
	if (mkdir(NEW "/tmp", 01777) < 0)
		return fail("make", "/tmp");
	if ((r = tmpfs(NEW "/tmp", 01777, a->tmp_size, 0)) < 0)
		return r;
	/* the grants, then the session's resolv.conf and CA bundle */
	r = a->image ? image_grants(a) : host_grants(a);
	if (r < 0 || (r = masks(a)) < 0)
		return r;
	return enter();
}
