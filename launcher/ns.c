/* The session's cgroup, namespaces, id maps and mounts: what the outer
 * launcher does as root before and after the clone, and what the session's
 * PID 1 sets up inside its own namespaces (its mounts are mounts.c's). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/idmap.h"
#include "lib/log.h"
#include "lib/util.h"

/* Is this process in the cgroup already (the agent starts the launcher
 * there with clone3)? A fresh session cgroup lists only the launcher. */
static bool in_cgroup(int fd)
{
	char buf[4096], me[16];
	size_t len = 0;
	ssize_t n;

	snprintf(me, sizeof(me), "%d\n", (int)getpid());
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (!strncmp(line, me, strlen(me)))
			return true;
	return false;
}

int ns_join_cgroup(const char *dir)
{
	cleanup_close int dfd = -1;
	cleanup_close int fd = -1;
	int r;

	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		fd = openat(dfd, "cgroup.procs", O_RDWR | O_CLOEXEC);
	/* Writing cgroup.procs waits for an RCU grace period: born inside, the
	 * launcher skips it. */
	if (fd >= 0 && in_cgroup(fd))
		return 0;
	/* "0" is the writer itself; every process it makes after is born inside. */
	if (fd < 0 || write(fd, "0", 1) < 0) {
		r = -errno;
		log_warn("cannot join cgroup %s", dir);
		return r;
	}
	return 0;
}

int ns_enter_netns(const char *path)
{
	cleanup_close int fd = -1;
	int r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		log_warn("cannot open network namespace %s", path);
		return r;
	}
	if (setns(fd, CLONE_NEWNET) < 0) {
		r = -errno;
		if (r == -EINVAL)
			log_warnx("%s is not a network namespace; pass the session's netns file",
				  path);
		else
			log_warn("cannot enter network namespace %s", path);
		return r;
	}
	return 0;
}

pid_t ns_clone_session(void)
{
	/* The cgroup namespace is taken after joining the session's cgroup, so
	 * the session sees its own cgroup as the root and no host path. */
	const unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS |
				    CLONE_NEWIPC | CLONE_NEWCGROUP | SIGCHLD;
	long pid;
	int r;

	/* The raw system call with no stack works like fork(): the child goes on
	 * from here on a copy of this stack, with nothing to size or free. */
	pid = syscall(SYS_clone, flags, 0UL, 0UL, 0UL, 0UL);
	if (pid < 0) {
		r = -errno;
		log_warn("cannot create the session's user, PID, mount, UTS and IPC namespaces");
		return r;
	}
	return pid;
}

static int write_proc(pid_t pid, const char *file, const char *text)
{
	cleanup_close int fd = -1;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	/* The kernel takes a map in one write, whole, or refuses it. */
	if (fd < 0 || write(fd, text, strlen(text)) < 0) {
		r = -errno;
		log_warn("cannot write \"%s\" to %s", text, path);
		return r;
	}
	return 0;
}

int ns_write_id_maps(pid_t pid, uid_t uid, gid_t gid)
{
	char map[64];
	int r;

	/* setgroups must be denied before gid_map is written, or it could be
	 * used inside to drop groups that deny access outside. */
	r = write_proc(pid, "setgroups", "deny");
	if (r < 0)
		return r;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned int)gid);
	r = write_proc(pid, "gid_map", map);
	if (r < 0)
		return r;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned int)uid);
	return write_proc(pid, "uid_map", map);
}

int ns_become_root(void)
{
	int r;

	/* Until now the process kept host root's ids, unmapped here; after, its
	 * only ids are 0 inside and the mapped uid and gid outside. */
	if (setresgid(0, 0, 0) < 0) {
		r = -errno;
		log_warn("cannot switch to gid 0 in the session's user namespace");
		return r;
	}
	if (setresuid(0, 0, 0) < 0) {
		r = -errno;
		log_warn("cannot switch to uid 0 in the session's user namespace");
		return r;
	}
	return 0;
}

/* mkdir -p as the calling process, the leaf with mode. */
static int mkdir_parents(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (path_fmt(buf, sizeof(buf), "%s", path))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0)
		return -errno;
	return 0;
}

int ns_prepare_state(const struct launch_args *a)
{
	struct stat st;
	int r;

	if (!a->state)
		return 0;
	if (stat(a->state, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		log_warnx("--state %s is not a directory; pass the session's state directory",
			  a->state);
		return -ENOTDIR;
	}
	/* Only the session's uid writes there; the agent removes it with the
	 * session's record. */
	r = mkdir_parents(a->state, 0700);
	if (r == 0 && chown(a->state, a->uid, a->gid) < 0)
		r = -errno;
	if (r < 0 && r != -EEXIST) {
		errno = -r;
		log_warn("cannot make the state directory %s", a->state);
		return r;
	}
	return 0;
}

/* The state directory needs no idmap: errand makes it for the session
 * (ns_prepare_state), owned by the session's own uid and gid, so the session
 * already writes it as its owner, and what it leaves there is removed with
 * it. Only the project, which is someone else's, is idmapped. */
int ns_prepare_project(struct launch_args *a)
{
	const uint64_t attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	cleanup_close int tree = -1, userns = -1;
	char fs[64];
	struct stat st;
	int r;

	tree = idmap_tree(a->project);
	if (tree < 0) {
		errno = -tree;
		log_warn("cannot copy the project %s to mount it in the session", a->project);
		return tree;
	}
	/* The owner of what was copied, not of whatever the path names now. */
	if (fstat(tree, &st) < 0) {
		r = -errno;
		log_warn("cannot read the owner of the project %s", a->project);
		return r;
	}
	/* The session acts as the project's owner there: only the owner, or
	 * root, may ask for that, or anyone allowed to start a session could
	 * write another user's (or root's) files. */
	if (a->requester != 0 && st.st_uid != a->requester) {
		log_warnx("the project %s belongs to uid %u, not to uid %u who asked for the "
			  "session; a session writes its project as the owner, so pass a project "
			  "of your own",
			  a->project, (unsigned int)st.st_uid, (unsigned int)a->requester);
		return -EPERM;
	}
	/* A project of the session's own account is written as it is. */
	if (st.st_uid == a->uid && st.st_gid == a->gid) {
		r = idmap_set(tree, -1, attr);
		if (r < 0) {
			errno = -r;
			log_warn("cannot set the mount attributes of the project %s", a->project);
			return r;
		}
		a->project_fd = steal_fd(&tree);
		return 0;
	}
	/* The agent's, when it maps the owner of what was copied. */
	if (a->userns_fd >= 0 && st.st_uid == a->userns_uid && st.st_gid == a->userns_gid)
		userns = steal_fd(&a->userns_fd);
	else
		userns = idmap_userns(st.st_uid, st.st_gid, a->uid, a->gid);
	if (userns < 0) {
		errno = -userns;
		log_warn("cannot make a user namespace to map the project's owner");
		return userns;
	}
	r = idmap_set(tree, userns, attr);
	if (r < 0 && idmap_unsupported(r) && a->idmap_optional) {
		/* The gap the agent stated at start: the host account's own
		 * permissions on the project, as any other host directory. */
		log_debug("the project %s cannot be idmapped (%s); mounted as it is", a->project,
			  strerror(-r));
		r = idmap_set(tree, -1, attr);
	} else if (r < 0 && idmap_unsupported(r)) {
		log_warnx(
			"the project %s is on %s, which cannot be idmapped here (%s), so the "
			"session could not write it as its owner; move the project to a "
			"filesystem that can (ext4, xfs, btrfs, tmpfs from Linux 6.3), or set "
			"sandbox.requireFullEnforcement to false to run with errand-session's own "
			"permissions on it",
			a->project, idmap_fs_name(a->project, fs, sizeof(fs)), strerror(-r));
		return r;
	}
	if (r < 0) {
		errno = -r;
		log_warn("cannot idmap the project %s for the session", a->project);
		return r;
	}
	a->project_fd = steal_fd(&tree);
	return 0;
}

static int set_hostname(const struct launch_args *a)
{
	if (sethostname(a->session, strlen(a->session)) == 0)
		return 0;
	log_warn("cannot set the session's hostname to %s", a->session);
	return -errno;
}

int ns_setup_session(const struct launch_args *a)
{
	int r;

	if ((r = set_hostname(a)) < 0 || (r = mounts_prepare(a->image)) < 0)
		return r;
	return mounts_finish(a);
}

int ns_finish_session(const struct launch_args *a)
{
	int r = set_hostname(a);

	return r < 0 ? r : mounts_finish(a);
}
