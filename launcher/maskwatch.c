/* The masks kept while the session lives: a daemon that restarts unlinks its
 * socket, which takes the cover mounts.c put over it in the session's root
 * away, and binds a new one there. The outer launcher, which waits on PID 1
 * as long as the session lives and is root in the host's namespaces,
 * watches (inotify) the host's directory of each masked path a grant shows
 * and covers the name again in the session's mount namespace. Every such
 * launcher is root's, and inotify instances are counted a user
 * (fs.inotify.max_user_instances, 128 by default): past that limit, as with
 * a grant of / at hundreds of sessions, a launcher looks at the directories
 * every MASK_POLL_MS instead. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

/* How often a launcher without an inotify instance looks again. */
#define MASK_POLL_MS 250

struct watched {
	int wd;
	int parent_wd;	    /* the directory's parent's, or -1: a directory made anew */
	char dir[PATH_MAX]; /* the host's, canonical: the same path in the session's root */
	const char *name;   /* in the launcher's argv */
	dev_t dev;	    /* the directory's, which the session's bind of it shares */
	ino_t ino;
};

struct maskwatch {
	int inotify;	  /* -1: polling */
	int host_ns;	  /* the launcher's mount namespace, to go back to */
	int session_ns;	  /* -1 until PID 1 has built the session's root */
	int session_root; /* polling: PID 1's root (/proc/PID/root), or -1 */
	size_t n;
	struct watched v[];
};

/* Whether a host grant binds dir into the session's root. */
static bool granted(const struct launch_args *a, const char *dir)
{
	const struct launch_list *l[] = {&a->policy_read, &a->policy_write, &a->policy_exec,
					 &a->rule_allow};

	for (size_t k = 0; k < ARRAY_SIZE(l); k++)
		for (size_t i = 0; i < l[k]->n; i++)
			if (path_beneath(dir, l[k] == &a->rule_allow ? launch_rule_path(l[k]->v[i])
								     : l[k]->v[i]))
				return true;
	return false;
}

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW)

/* m's directory watched as it is now, where no link leads to it: its wd,
 * device and inode. false where it is not such a directory. */
static bool dir_watch(struct maskwatch *w, struct watched *m)
{
	char real[PATH_MAX];
	struct stat st;
	int wd;

	errno = 0;
	if (!realpath(m->dir, real) || strcmp(real, m->dir) || lstat(m->dir, &st) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		errno = errno ? errno : ENOTDIR;
		return false;
	}
	if (w->inotify < 0)
		wd = -1;
	else if ((wd = inotify_add_watch(w->inotify, m->dir, WATCH_MASK)) < 0)
		return false;
	m->wd = wd;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	return true;
}

/* The name of m's directory in its parent, where the parent is watched. */
static const char *dir_name(const struct watched *m)
{
	return strrchr(m->dir, '/') + 1;
}

/* A masked path's directory, where a grant shows it, taken into w->v (not
 * yet watched): false where none shows it. */
static bool want(struct maskwatch *w, const struct launch_args *a, const char *mask)
{
	struct watched *m = &w->v[w->n];
	char *slash;

	if (path_fmt(m->dir, sizeof(m->dir), "%s", mask))
		return false;
	slash = strrchr(m->dir, '/');
	if (!slash[1] || !strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
		return false;
	m->name = mask + (slash - m->dir) + 1;
	slash[slash == m->dir] = '\0';
	return granted(a, m->dir);
}

/* m's directory watched, where no link leads to it (a mask reached through
 * one, masks() leaves to the path it leads to, masked under its own name);
 * and its parent, where a grant shows that, for the directory made anew (a
 * daemon's runtime directory removed and made again as it restarts shows
 * through the parent's grant). Polling, the parent needs no watch: the
 * directory's own device and inode tell one made anew. false where m's
 * directory cannot be watched. */
static bool arm(struct maskwatch *w, const struct launch_args *a, struct watched *m)
{
	char parent[PATH_MAX];
	char *slash;

	if (!dir_watch(w, m)) {
		if (w->inotify >= 0 && (errno == ENOSPC || errno == ENOMEM))
			log_warn("cannot watch %s for %s being made again; a daemon restarted "
				 "there is not masked again",
				 m->dir, m->name);
		return false;
	}
	m->parent_wd = -1;
	if (w->inotify < 0)
		return true;
	memcpy(parent, m->dir, sizeof(parent));
	slash = strrchr(parent, '/');
	slash[slash == parent] = '\0';
	if (strcmp(m->dir, "/") && granted(a, parent))
		m->parent_wd = inotify_add_watch(w->inotify, parent, WATCH_MASK);
	return true;
}

int maskwatch_new(const struct launch_args *a, struct maskwatch **out)
{
	cleanup_free struct maskwatch *w = NULL;
	size_t n = 0;

	*out = NULL;
	if (a->image || !a->mask.n)
		return 0;
	w = calloc(1, sizeof(*w) + a->mask.n * sizeof(w->v[0]));
	if (!w)
		return -ENOMEM;
	w->session_ns = -1;
	w->session_root = -1;
	w->host_ns = -1;
	for (size_t i = 0; i < a->mask.n; i++)
		w->n += want(w, a, a->mask.v[i]);
	if (!w->n)
		return 0; /* no grant shows one: nothing to watch */
	w->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->inotify < 0 && errno != EMFILE && errno != ENFILE && errno != ENOMEM) {
		int r = -errno;

		log_warn("cannot watch the masked paths' directories");
		return r;
	}
	if (w->inotify < 0)
		log_warnx("no inotify instance left (fs.inotify.max_user_instances): the masked "
			  "paths' directories are looked at every %d ms instead",
			  MASK_POLL_MS);
	/* those that cannot be watched are dropped */
	for (size_t i = 0; i < w->n; i++)
		if (arm(w, a, &w->v[i]))
			w->v[n++] = w->v[i];
	w->n = n;
	if (!w->n || (w->host_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0) {
		int r = w->n ? -errno : 0;

		if (w->inotify >= 0)
			close(w->inotify);
		return r;
	}
	*out = steal_pointer(&w);
	return 0;
}

void maskwatch_free(struct maskwatch *w)
{
	if (!w)
		return;
	if (w->inotify >= 0)
		close(w->inotify);
	close(w->host_ns);
	if (w->session_ns >= 0)
		close(w->session_ns);
	if (w->session_root >= 0)
		close(w->session_root);
	free(w);
}

int maskwatch_fd(const struct maskwatch *w)
{
	return w->inotify;
}

int maskwatch_timeout_ms(const struct maskwatch *w)
{
	return w->inotify < 0 ? MASK_POLL_MS : -1;
}

/* A detached cover, made in the host's namespace: /dev/null, read-only and
 * nodev (a connect finds no socket there, an open no device), as masks()
 * binds it. */
static int null_tree(void)
{
	struct mount_attr ma = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
					    MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
	int tree = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev/null",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

	if (tree >= 0 && mount_setattr(tree, "", AT_EMPTY_PATH, &ma, sizeof(ma)) < 0) {
		close(tree);
		return -1;
	}
	return tree;
}

/* An empty read-only tmpfs, as masks() covers a directory. */
static int empty_tree(void)
{
	cleanup_close int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);

	if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4096", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -1;
	return (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
				    MOUNT_ATTR_NOEXEC);
}

/* In the session's mount namespace, its root ours: m's directory, reached
 * through no link and the host's own (the grant's bind of it), and the name
 * in it covered unless it is not there or is a mount's root already. A
 * link there is covered itself, never followed. 0, or -errno. */
static int cover_in_session(const struct watched *m, int null)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS};
	cleanup_close int dir = -1;
	struct statx stx;
	struct stat st;
	int tree, r = 1;

	dir = (int)syscall(SYS_openat2, AT_FDCWD, m->dir, &how, sizeof(how));
	if (dir < 0 || fstat(dir, &st) < 0 || st.st_dev != m->dev || st.st_ino != m->ino)
		return 0; /* not the host's directory there: nothing of it shows */
	if (statx(dir, m->name, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (stx.stx_attributes_mask & stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
		return 0;
	tree = S_ISDIR(stx.stx_mode) ? empty_tree() : null;
	if (tree < 0 || move_mount(tree, "", dir, m->name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = -errno;
	if (tree >= 0 && tree != null)
		close(tree);
	return r;
}

/* Covers m's name again where the session shows it. */
static void cover(struct maskwatch *w, const struct watched *m)
{
	int null, r;

	if (w->session_ns < 0)
		return;
	if ((null = null_tree()) < 0) {
		log_warn("cannot make a cover for %s/%s", m->dir, m->name);
		return;
	}
	if (setns(w->session_ns, CLONE_NEWNS) < 0) {
		log_warn("cannot enter the session's mount namespace to cover %s/%s", m->dir,
			 m->name);
		close(null);
		return;
	}
	r = cover_in_session(m, null);
	/* Back to the host's root: the launcher is nowhere else afterwards */
	if (setns(w->host_ns, CLONE_NEWNS) < 0)
		fatal("cannot return to the host's mount namespace");
	close(null);
	if (r < 0) {
		errno = -r;
		log_warn("cannot cover %s/%s again in the session's root", m->dir, m->name);
	} else if (r > 0) {
		log_debug("covered %s/%s again in the session's root", m->dir, m->name);
	}
}

int maskwatch_start(struct maskwatch *w, pid_t pid1)
{
	char path[64];

	if (w->inotify < 0) {
		snprintf(path, sizeof(path), "/proc/%d/root", (int)pid1);
		w->session_root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid1);
	w->session_ns = open(path, O_RDONLY | O_CLOEXEC);
	if (w->session_ns < 0) {
		int r = -errno;

		log_warn("cannot open the session's mount namespace; a daemon restarted is not "
			 "masked again");
		return r;
	}
	/* What was made again before the watch was read */
	for (size_t i = 0; i < w->n; i++)
		cover(w, &w->v[i]);
	return 0;
}

/* m's directory made anew: the new one watched (a directory still
 * watched keeps its wd; its inode number alone cannot tell, since a new
 * directory often takes the one the old left), and the name covered if it
 * is there already. */
static void dir_anew(struct maskwatch *w, struct watched *m)
{
	if (!dir_watch(w, m)) {
		log_warn("cannot watch %s, made again, for %s/%s; a daemon restarted there is "
			 "not masked again",
			 m->dir, m->dir, m->name);
		return;
	}
	cover(w, m);
}

/* Polling: whether the session shows m's name in the host's directory and
 * not covered (looked at from the session's root, where the grant binds the
 * directory, with no link followed). */
static bool shown_bare(const struct maskwatch *w, const struct watched *m)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS};
	cleanup_close int dir = -1;
	struct statx stx;
	struct stat st;

	if (w->session_root < 0)
		return true; /* cover() looks, in the session's namespace */
	dir = (int)syscall(SYS_openat2, w->session_root, m->dir, &how, sizeof(how));
	if (dir < 0 || fstat(dir, &st) < 0 || st.st_dev != m->dev || st.st_ino != m->ino)
		return false;
	if (statx(dir, m->name, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx) < 0)
		return false;
	return !(stx.stx_attributes_mask & stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* Polling: each directory made anew watched again (its device and inode),
 * and each name the session shows bare covered, as inotify would have had
 * it; a cover that failed is tried again the next time. */
static void look_again(struct maskwatch *w)
{
	for (size_t i = 0; i < w->n; i++) {
		struct watched *m = &w->v[i];
		struct stat st;

		if (lstat(m->dir, &st) < 0 || !S_ISDIR(st.st_mode))
			continue; /* gone, or not a directory: looked for again next time */
		if ((st.st_dev != m->dev || st.st_ino != m->ino) && !dir_watch(w, m))
			continue;
		if (shown_bare(w, m))
			cover(w, m);
	}
}

void maskwatch_read(struct maskwatch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	if (w->inotify < 0) {
		look_again(w);
		return;
	}

	while ((n = read(w->inotify, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;

			p += sizeof(*e) + e->len;
			/* events lost: each name looked at again */
			for (size_t i = 0; i < w->n; i++) {
				struct watched *m = &w->v[i];

				if ((e->mask & IN_Q_OVERFLOW) || (e->wd == m->parent_wd && e->len &&
								  !strcmp(e->name, dir_name(m))))
					dir_anew(w, m);
				if ((e->mask & IN_Q_OVERFLOW) ||
				    (e->wd == m->wd && e->len && !strcmp(e->name, m->name)))
					cover(w, m);
			}
		}
	}
}
