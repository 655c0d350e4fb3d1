/* Named network namespaces, kept as bind mounts of nsfs files the way
 * iproute2 keeps /run/netns. Namespaces are per thread, so every unshare and
 * setns happens in a short-lived helper thread; the caller's never moves. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/netns.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

/* mkdir -p with mode 0755. */
static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* What mountinfo says of mount id: its peer group (its shared:N; -1 when it
 * is not shared), its parent and how many mounts are on it. -ENOENT when
 * it is not there. */
struct mount_peer {
	long group;
	unsigned long parent;
	size_t children;
};

static int mount_peer(FILE *f, unsigned long id, struct mount_peer *out)
{
	cleanup_free char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	*out = (struct mount_peer){.group = -1};
	rewind(f);
	while (getline(&line, &cap, f) > 0) {
		unsigned long mid, pid;
		char *save = NULL, *tok;
		int field = 0;

		if (sscanf(line, "%lu %lu", &mid, &pid) != 2)
			continue;
		if (pid == id && mid != id)
			out->children++;
		if (mid != id)
			continue;
		rc = 0;
		out->parent = pid;
		/* the optional fields, from the seventh up to "-" */
		for (tok = strtok_r(line, " ", &save); tok && strcmp(tok, "-");
		     tok = strtok_r(NULL, " ", &save), field++)
			if (field >= 6 && !strncmp(tok, "shared:", 7))
				out->group = strtol(tok + 7, NULL, 10);
	}
	return rc;
}

/* An older errand bound dir onto itself as a peer of the mount beneath it
 * (see make_shared): dir gets a peer group of its own, so that namespace
 * files mounted from now on are mounted once. Only while no file is
 * mounted on it: each has a twin beneath, which only the propagation of
 * its unmount removes, so a directory with some keeps its group (their
 * sessions, an agent's adopted ones, end as before) until an agent starts
 * with none. Once a process and dir, under make_shared's lock. */
static void unpeer_once(const char *dir)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static char done[PATH_MAX];
	struct mount_peer self, parent;
	struct statx stx;
	FILE *f;

	pthread_mutex_lock(&mu);
	if (!strcmp(done, dir) || statx(AT_FDCWD, dir, 0, STATX_MNT_ID, &stx) ||
	    !(stx.stx_mask & STATX_MNT_ID) || !(f = fopen("/proc/self/mountinfo", "re"))) {
		pthread_mutex_unlock(&mu);
		return;
	}
	if (!mount_peer(f, stx.stx_mnt_id, &self) && self.group >= 0 &&
	    !mount_peer(f, self.parent, &parent) && parent.group == self.group) {
		if (self.children)
			log_info("netns dir %s: a peer of the mount beneath it (an older errand's "
				 "bind) with %zu namespace files on it: left so, each file mounted "
				 "twice, until an agent starts with none",
				 dir, self.children);
		else if (mount("none", dir, NULL, MS_PRIVATE, NULL) ||
			 mount("none", dir, NULL, MS_SHARED, NULL))
			log_warnx("netns dir %s: give it a peer group of its own: %s", dir,
				  strerror(errno));
	}
	fclose(f);
	snprintf(done, sizeof(done), "%s", dir);
	pthread_mutex_unlock(&mu);
}

/* Makes dir a shared mount point, binding it onto itself when it is not a
 * mount point yet. Shared, so that mount namespaces made later (a session's
 * launcher, say) still see namespace files mounted here after they forked.
 * Under a lock on dir: two preparations side by side (or an agent and an
 * embedded errandctl) each found it no mount point and each bound it, and
 * the second bind stacked on the first, so every namespace file mounted
 * after was mounted twice (once a peer), and a launcher's shedding of the
 * top one left the other in its session's copy of the host's mounts. The
 * bind is made private before it is made shared: a bind of a directory on
 * a shared mount (systemd makes /run one) is a peer of that mount, and
 * every namespace file mounted on it was mounted again, by propagation, on
 * the mount beneath, at the same path. */
static int make_shared(const char *dir)
{
	cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool bound = false;
	int err = 0;

	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		err = -errno;
		log_warnx("netns dir %s: lock it: %s", dir, strerror(-err));
		return err;
	}
	while (mount("none", dir, NULL, MS_SHARED | MS_REC, NULL) < 0) {
		err = -errno;
		if (err != -EINVAL || bound) {
			log_warnx("netns dir %s: make it a shared mount: %s", dir, strerror(-err));
			return err;
		}
		if (mount(dir, dir, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    mount("none", dir, NULL, MS_PRIVATE, NULL) < 0) {
			err = -errno;
			log_warnx("netns dir %s: bind it onto itself: %s", dir, strerror(-err));
			return err;
		}
		bound = true;
	}
	if (!bound)
		unpeer_once(dir);
	return 0;
}

struct create_job {
	const char *path;
	int err;
};

static void *create_thread(void *p)
{
	struct create_job *job = p;

	if (unshare(CLONE_NEWNET) < 0) {
		job->err = -errno;
		return NULL;
	}
	/* The mount holds the namespace after this thread is gone. */
	if (mount("/proc/thread-self/ns/net", job->path, NULL, MS_BIND, NULL) < 0) {
		job->err = -errno;
		return NULL;
	}
	job->err = 0;
	return NULL;
}

int netns_create(const char *path)
{
	struct create_job job = {.path = path, .err = -EIO};
	char dir[PATH_MAX];
	char *slash;
	pthread_t t;
	int fd, r;

	if (!path || !*path || strlen(path) >= sizeof(dir))
		return -EINVAL;
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	if (slash == dir)
		slash[1] = '\0'; /* "/name": the directory is "/" */
	else
		*slash = '\0';

	r = mkdir_p(dir);
	if (r < 0) {
		log_warnx("netns dir %s: mkdir: %s", dir, strerror(-r));
		return r;
	}
	r = make_shared(dir);
	if (r < 0)
		return r;

	/* O_EXCL: a file already there is a namespace or a leftover that
	 * netns_sweep or netns_remove clears; either way not ours to reuse. */
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0) {
		r = -errno;
		if (r != -EEXIST)
			log_warnx("netns %s: create the mount point file: %s", path, strerror(-r));
		return r;
	}
	close(fd);

	r = pthread_create(&t, NULL, create_thread, &job);
	if (r != 0) {
		unlink(path);
		return -r;
	}
	pthread_join(t, NULL);
	if (job.err < 0) {
		log_warnx("netns %s: create: %s", path, strerror(-job.err));
		unlink(path);
		return job.err;
	}
	return 0;
}

int netns_open(const char *path)
{
	int fd;

	if (!path || !*path)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return fd;
}

struct run_job {
	int fd;
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static void *run_thread(void *p)
{
	struct run_job *job = p;

	/* The thread ends after fn, so it never has to find its way back. */
	if (setns(job->fd, CLONE_NEWNET) < 0) {
		job->ret = -errno;
		return NULL;
	}
	job->ret = job->fn(job->arg);
	return NULL;
}

int netns_run(const char *path, int (*fn)(void *arg), void *arg)
{
	cleanup_close int fd = -1;
	struct run_job job;
	pthread_t t;
	int r;

	if (!fn)
		return -EINVAL;
	fd = netns_open(path);
	if (fd < 0)
		return fd;
	job = (struct run_job){.fd = fd, .fn = fn, .arg = arg, .ret = -EIO};
	r = pthread_create(&t, NULL, run_thread, &job);
	if (r != 0)
		return -r;
	pthread_join(t, NULL);
	return job.ret;
}

int netns_remove(const char *path)
{
	if (!path || !*path)
		return -EINVAL;
	/* Detach: a process still inside keeps the namespace, not the file. A
	 * file mounted more than once (by hand, say) needs one umount each. */
	for (int i = 0; i < 16; i++) {
		if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			continue;
		if (errno == EINVAL || errno == ENOENT)
			break;
		log_warn("netns %s: umount", path);
		return -errno;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		int err = -errno;

		log_warn("netns %s: unlink", path);
		return err;
	}
	return 0;
}

int netns_sweep(const char *dir, int (*keep)(const char *id, void *arg), void *arg)
{
	char **names = NULL;
	size_t n = 0;
	int count = 0, err = 0;
	struct dirent *de;
	DIR *d;

	if (!dir || !*dir)
		return -EINVAL;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	/* Names first, removals after, so the listing is not disturbed. */
	while ((de = readdir(d))) {
		if (de->d_type == DT_DIR || strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (keep && keep(de->d_name, arg))
			continue;
		err = strv_push(&names, &n, de->d_name);
		if (err)
			break;
	}
	closedir(d);

	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		int r;

		r = path_fmt(path, sizeof(path), "%s/%s", dir, names[i]);
		if (r == 0)
			r = netns_remove(path);
		if (r < 0 && !err)
			err = r;
		else if (r == 0)
			count++;
		free(names[i]);
	}
	free(names);
	return err ? err : count;
}
