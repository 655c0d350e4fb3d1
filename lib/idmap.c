/* Idmapped mounts (see idmap.h), the way systemd-nspawn and incus make
 * them: a user namespace that holds nothing but the mapping, and a detached
 * copy of the tree with MOUNT_ATTR_IDMAP set through it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/idmap.h"
#include "lib/util.h"

static int write_map(pid_t pid, const char *file, unsigned int from, unsigned int to)
{
	cleanup_close int fd = -1;
	char path[64], map[64];
	int n;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	n = snprintf(map, sizeof(map), "%u %u 1", from, to);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, map, (size_t)n) != n)
		return -errno;
	return 0;
}

int idmap_userns(uid_t disk, gid_t disk_gid, uid_t host, gid_t host_gid)
{
	int sync[2], fd = -1, r, status;
	char path[64];
	long pid;

	if (pipe2(sync, O_CLOEXEC) < 0)
		return -errno;
	/* A child only to own the namespace until it is open here; like fork()
	 * with no stack to size. */
	pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0UL, 0UL, 0UL, 0UL);
	if (pid < 0) {
		r = -errno;
		close(sync[0]);
		close(sync[1]);
		return r;
	}
	if (pid == 0) {
		char c;

		/* Nothing but its own end: the agent makes these in several
		 * threads at once, and a child holding another's write end
		 * would keep that one waiting, and its parent with it. */
		if (sync[0] > 3)
			syscall(SYS_close_range, 3U, (unsigned int)sync[0] - 1, 0U);
		syscall(SYS_close_range, (unsigned int)sync[0] + 1, ~0U, 0U);
		if (read(sync[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(sync[0]);
	/* Written from here, as root of the parent namespace, the gid map needs
	 * no "setgroups deny": nothing ever runs in this namespace. */
	r = write_map(pid, "uid_map", disk, host);
	if (r == 0)
		r = write_map(pid, "gid_map", disk_gid, host_gid);
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%ld/ns/user", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	close(sync[1]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return r < 0 ? r : fd;
}

int idmap_tree(const char *path)
{
	int fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);

	return fd < 0 ? -errno : fd;
}

int idmap_set(int tree_fd, int userns_fd, uint64_t attr)
{
	/* Private: nothing mounted under the copy reaches the host's tree or
	 * the source's peers, nor the reverse. */
	struct mount_attr ma = {
		.attr_set = attr | (userns_fd >= 0 ? MOUNT_ATTR_IDMAP : 0),
		.userns_fd = userns_fd >= 0 ? (uint64_t)userns_fd : 0,
		.propagation = MS_PRIVATE,
	};

	if (mount_setattr(tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof(ma)) < 0)
		return -errno;
	return 0;
}

int idmap_unsupported(int err)
{
	/* EINVAL: the filesystem type lacks FS_ALLOW_IDMAP (tmpfs before 6.3,
	 * ramfs, most network and FUSE filesystems); ENOSYS: a kernel before
	 * 5.12. EPERM is errand's (not root), never the filesystem's. */
	return err == -EINVAL || err == -EOPNOTSUPP || err == -ENOSYS;
}

int idmap_probe(const char *path, uid_t host, gid_t host_gid)
{
	cleanup_close int ns = -1, tree = -1;
	struct stat st;

	tree = idmap_tree(path);
	if (tree < 0)
		return tree;
	if (fstat(tree, &st) < 0)
		return -errno;
	ns = idmap_userns(st.st_uid, st.st_gid, host, host_gid);
	if (ns < 0)
		return ns;
	return idmap_set(tree, ns, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

/* Types found, by mount id: mountinfo is read once a mount, not at each
 * session's start (with a thousand sessions it holds a thousand netns
 * mounts, a millisecond a read). An id reused by a later mount could name
 * the type of the one before: in a message only. */
#define TYPES_KEPT 16
static struct {
	pthread_mutex_t lock;
	struct {
		unsigned long long id;
		char type[32];
	} e[TYPES_KEPT];
	unsigned n, next;
} types = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool type_cached(unsigned long long id, char *buf, size_t len)
{
	bool hit = false;

	pthread_mutex_lock(&types.lock);
	for (unsigned i = 0; i < types.n && !hit; i++)
		if (types.e[i].id == id)
			hit = !path_fmt(buf, len, "%s", types.e[i].type);
	pthread_mutex_unlock(&types.lock);
	return hit;
}

static void type_keep(unsigned long long id, const char *type)
{
	pthread_mutex_lock(&types.lock);
	types.e[types.next].id = id;
	snprintf(types.e[types.next].type, sizeof(types.e[0].type), "%s", type);
	types.next = (types.next + 1) % TYPES_KEPT;
	if (types.n < TYPES_KEPT)
		types.n++;
	pthread_mutex_unlock(&types.lock);
}

/* The type's name as mountinfo has it, for the mount path is on. */
static int mountinfo_type(const char *path, char *buf, size_t len)
{
	struct statx stx;
	char line[4096];
	FILE *f;
	int r = -ENOENT;

	if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	if (type_cached(stx.stx_mnt_id, buf, len))
		return 0;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (r && fgets(line, sizeof(line), f)) {
		unsigned long long id;
		char *sep, *type, *end;

		if (sscanf(line, "%llu", &id) != 1 || id != stx.stx_mnt_id)
			continue;
		/* "... - TYPE SOURCE OPTIONS" */
		sep = strstr(line, " - ");
		if (!sep)
			break;
		type = sep + 3;
		end = strchr(type, ' ');
		if (!end)
			break;
		*end = '\0';
		r = path_fmt(buf, len, "%s", type);
	}
	fclose(f);
	if (!r)
		type_keep(stx.stx_mnt_id, buf);
	return r;
}

const char *idmap_fs_name(const char *path, char *buf, size_t len)
{
	struct statfs sf;

	if (mountinfo_type(path, buf, len) == 0)
		return buf;
	if (statfs(path, &sf) == 0)
		snprintf(buf, len, "type 0x%lx", (unsigned long)sf.f_type);
	else
		snprintf(buf, len, "unknown (%s)", strerror(errno));
	return buf;
}
