/* The session's cgroup, namespaces, id maps and mounts: what the outer
 * launcher does as root before and after the clone, and what the session's
 * PID 1 sets up inside its own namespaces. See launch.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

#define RESOLV_CONF "/etc/resolv.conf"

int ns_join_cgroup(const char *dir)
{
	cleanup_close int dfd = -1;
	cleanup_close int fd = -1;
	int r;

	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		fd = openat(dfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
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

/* The per-mount flags of the mount at path. Mounts copied into a user
 * namespace have nosuid, nodev, noexec, read-only and atime locked: a new
 * mount or remount that leaves one out is refused, so carry them over. */
static unsigned long mount_flags(const char *path)
{
	unsigned long flags = 0;
	struct statvfs st;

	if (statvfs(path, &st) < 0)
		return 0; /* then the mount itself reports what is wrong */
	if (st.f_flag & ST_RDONLY)
		flags |= MS_RDONLY;
	if (st.f_flag & ST_NOSUID)
		flags |= MS_NOSUID;
	if (st.f_flag & ST_NODEV)
		flags |= MS_NODEV;
	if (st.f_flag & ST_NOEXEC)
		flags |= MS_NOEXEC;
	if (st.f_flag & ST_NODIRATIME)
		flags |= MS_NODIRATIME;
	if (st.f_flag & ST_NOATIME)
		flags |= MS_NOATIME;
	else if (st.f_flag & ST_RELATIME)
		flags |= MS_RELATIME;
	else
		flags |= MS_STRICTATIME;
	return flags;
}

static int bind_resolv(const char *file)
{
	unsigned long flags;
	int r;

	/* A symlinked /etc/resolv.conf is followed: the bind lands on its target. */
	if (mount(file, RESOLV_CONF, NULL, MS_BIND, NULL) < 0) {
		r = -errno;
		log_warnx("cannot bind-mount %s on %s: %s; both must exist for the session's uid",
			  file, RESOLV_CONF, strerror(-r));
		return r;
	}
	flags = mount_flags(RESOLV_CONF) | MS_RDONLY;
	if (mount(NULL, RESOLV_CONF, NULL, MS_BIND | MS_REMOUNT | flags, NULL) < 0) {
		r = -errno;
		log_warn("cannot make %s (bound from %s) read-only", RESOLV_CONF, file);
		return r;
	}
	return 0;
}

int ns_setup_session(const struct launch_args *a)
{
	unsigned long flags;
	int r;

	if (sethostname(a->session, strlen(a->session)) < 0) {
		r = -errno;
		log_warn("cannot set the session's hostname to %s", a->session);
		return r;
	}
	/* Nothing mounted in the session may reach the host, nor the reverse. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		r = -errno;
		log_warn("cannot make / recursively private in the session's mount namespace");
		return r;
	}
	/* Over the host's /proc, so /proc shows only the session's processes. */
	flags = mount_flags("/proc") | MS_NOSUID | MS_NODEV | MS_NOEXEC;
	if (mount("proc", "/proc", "proc", flags, NULL) < 0) {
		r = -errno;
		log_warn("cannot mount a new proc on /proc");
		return r;
	}
	if (a->resolv) {
		r = bind_resolv(a->resolv);
		if (r < 0)
			return r;
	}
	return 0;
}
