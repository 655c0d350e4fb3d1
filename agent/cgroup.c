/* Session cgroups on the cgroup v2 mount: find the mount, find (or have
 * systemd delegate) where sessions go, make a session's directory, read its
 * id for the BPF programs, and kill and remove it whole. See cgroup.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/magic.h>

#include "agent/cgroup.h"
#include "agent/spawn.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

/* cgroup_session_remove waits this long for killed processes to leave. */
#define KILL_WAIT_MS 2000
#define POLL_MS 10

static int cgroup2_mount_read(char *out, size_t len)
{
	cleanup_free char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int ret = -ENOENT;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		ret = -errno;
		log_warn("cgroup: open /proc/self/mountinfo (is /proc mounted?)");
		return ret;
	}
	/* "id parent maj:min root mountpoint opts [optional...] - fstype source superopts" */
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *root = NULL, *mnt = NULL, *tok;
		int field = 0;
		bool sep = false;

		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			if (field == 3)
				root = tok;
			else if (field == 4)
				mnt = tok;
			field++;
			if (sep)
				break;
			if (field > 5 && strcmp(tok, "-") == 0)
				sep = true;
		}
		/* A cgroup2 mount of a subtree (root other than "/") would hide
		 * the rest of the hierarchy; errand wants the whole of it. */
		if (!sep || !tok || strcmp(tok, "cgroup2") != 0 || !root || strcmp(root, "/") != 0)
			continue;
		esc_mountinfo_undo(mnt);
		if (strlen(mnt) >= len) {
			ret = -ENAMETOOLONG;
			break;
		}
		strcpy(out, mnt);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

/* The mount found last, and its root directory's identity: mountinfo holds a
 * line for each session's network namespace file, so reading it at every
 * start made the starts at a thousand sessions quadratic. A path that still
 * has that root (a cgroup2 file system, the same device and inode) is the
 * same mount. */
static struct {
	pthread_mutex_t lock;
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
} found = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* path is a cgroup2 file system's root still, of the device and inode
 * found before when dev is set; else fills them in. */
static bool cgroup2_root(const char *path, dev_t *dev, ino_t *ino, bool set)
{
	struct statfs fs;
	struct stat st;

	if (stat(path, &st) || statfs(path, &fs) || fs.f_type != CGROUP2_SUPER_MAGIC)
		return false;
	if (set) {
		*dev = st.st_dev;
		*ino = st.st_ino;
		return true;
	}
	return st.st_dev == *dev && st.st_ino == *ino;
}

int cgroup2_mount(char *out, size_t len)
{
	int ret;

	pthread_mutex_lock(&found.lock);
	if (found.path[0] && cgroup2_root(found.path, &found.dev, &found.ino, false)) {
		ret = strlen(found.path) < len ? 0 : -ENAMETOOLONG;
		if (!ret)
			strcpy(out, found.path);
		pthread_mutex_unlock(&found.lock);
		return ret;
	}
	found.path[0] = '\0';
	ret = cgroup2_mount_read(out, len);
	/* kept only when what is there now is what mountinfo said */
	if (!ret && strlen(out) < sizeof(found.path) &&
	    cgroup2_root(out, &found.dev, &found.ino, true))
		strcpy(found.path, out);
	pthread_mutex_unlock(&found.lock);
	return ret;
}

/* A single path component: no slash, not "." or "..". */
static bool valid_name(const char *s)
{
	return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static long long now_ms(void);
static void sleep_ms(long ms);

#define PARENT_DEPTH_MAX 16

/* The parent may be nested ("system.slice/errand") but must stay below the
 * mount: relative, no empty, "." or ".." components. */
static bool valid_parent(const char *s)
{
	const char *p = s;
	int depth = 0;

	if (!s || !*s || *s == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (++depth > PARENT_DEPTH_MAX)
			return false;
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/' && !*++p)
			return false; /* trailing slash */
	}
	return true;
}

bool cgroup_systemd(const char *mount)
{
	struct stat st;

	return mount && !strcmp(mount, "/sys/fs/cgroup") && !lstat("/run/systemd/system", &st) &&
	       S_ISDIR(st.st_mode);
}

#define SCOPE_READY_MS 15000

/* The scope runs and gives its children the controllers it was given. */
static bool scope_ready(const char *mount)
{
	char path[PATH_MAX], have[256], given[256];

	if (path_fmt(path, sizeof(path), "%s/%s/cgroup.controllers", mount, CGROUP_SCOPE_PATH) ||
	    file_read_text(path, have, sizeof(have)) < 0 ||
	    path_fmt(path, sizeof(path), "%s/%s/cgroup.subtree_control", mount,
		     CGROUP_SCOPE_PATH) ||
	    file_read_text(path, given, sizeof(given)) < 0)
		return false;
	/* the holder enables what it can; systemd may not have delegated all */
	for (const char *c = "memory\0cpu\0pids\0"; *c; c += strlen(c) + 1) {
		size_t n = strlen(c);
		bool in_have = false, in_given = false;

		for (const char *p = have; (p = strstr(p, c)); p += n)
			in_have |= (p == have || p[-1] == ' ') &&
				   (p[n] == ' ' || p[n] == '\n' || !p[n]);
		for (const char *p = given; (p = strstr(p, c)); p += n)
			in_given |= (p == given || p[-1] == ' ') &&
				    (p[n] == ' ' || p[n] == '\n' || !p[n]);
		if (in_have && !in_given)
			return false;
	}
	return true;
}

/* The holder: the scope's first process (systemd-run --scope makes a scope
 * of the process that runs it), which moves into a leaf of its own so the
 * scope's own cgroup may enable controllers for its children, says ready,
 * and sleeps for as long as the scope is wanted. Started twice detached, so
 * that it is no child of the agent. */
static const char holder_sh[] =
	"cg=$(sed -n 's/^0:://p' /proc/self/cgroup); d=\"$1$cg\"; "
	"mkdir -p \"$d/holder\" && echo $$ >\"$d/holder/cgroup.procs\" || exit 1; "
	"for c in memory cpu pids; do echo +$c >\"$d/cgroup.subtree_control\" 2>/dev/null; done; "
	"echo ready; exec sleep infinity </dev/null >/dev/null 2>&1";

static int scope_start(const char *mount)
{
	char line[64] = "";
	size_t got = 0;
	int out[2], status = 0;
	pid_t pid;

	if (pipe2(out, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(out[0]);
		close(out[1]);
		return -errno;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		setsid();
		if (fork() != 0)
			_exit(0);
		if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0)
			_exit(125);
		execlp("systemd-run", "systemd-run", "--scope", "--quiet", "--unit=" CGROUP_SCOPE,
		       "--slice=system.slice", "--property=Delegate=yes",
		       /* each session has its own pids limit; the scope holds all
			* of them, past systemd's default of 15% of the pids */
		       "--property=TasksMax=infinity",
		       "--description=errand sessions (delegated by systemd)", "--", "/bin/sh",
		       "-c", holder_sh, "errand-holder", mount, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	waitpid(pid, &status, 0);
	/* "ready", or nothing when systemd-run failed (another process may have
	 * started the scope meanwhile: the caller looks again) */
	for (;;) {
		struct pollfd p = {.fd = out[0], .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, SCOPE_READY_MS) <= 0)
			break;
		n = read(out[0], line + got, sizeof(line) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		line[got] = '\0';
		if (strchr(line, '\n') || got == sizeof(line) - 1)
			break;
	}
	close(out[0]);
	return strncmp(line, "ready\n", 6) ? -EAGAIN : 0;
}

int cgroup_sessions_parent(const char *mount, const char *name, bool create, char *out, size_t len)
{
	long long deadline;
	int r;

	if (!cgroup_systemd(mount))
		return path_fmt(out, len, "%s", name);
	if (path_fmt(out, len, "%s/%s", CGROUP_SCOPE_PATH, name))
		return -ENAMETOOLONG;
	if (scope_ready(mount))
		return 0;
	if (!create)
		return -ENOENT;
	r = scope_start(mount);
	if (r && r != -EAGAIN)
		return r;
	/* started by us or by another process at the same time */
	for (deadline = now_ms() + SCOPE_READY_MS; now_ms() < deadline; sleep_ms(50))
		if (scope_ready(mount))
			return 0;
	log_warnx("systemd did not start the scope %s with memory, cpu and pids delegated "
		  "(systemd-run --scope -p Delegate=yes); journalctl -u %s says why",
		  CGROUP_SCOPE, CGROUP_SCOPE);
	return -ETIMEDOUT;
}

int cgroup_session_create(const char *mount, const char *parent, const char *id, char *out,
			  size_t len)
{
	char dir[PATH_MAX];
	size_t base, made = 0, ends[PARENT_DEPTH_MAX];
	int r;

	if (!mount || !*mount || !valid_parent(parent) || !valid_name(id))
		return -EINVAL;
	r = path_fmt(dir, sizeof(dir), "%s/%s/%s", mount, parent, id);
	if (r < 0 || strlen(dir) >= len)
		return -ENAMETOOLONG;

	/* mkdir -p for the parent, remembering which levels are new so that
	 * a failure takes away only what this call made. */
	base = strlen(mount);
	for (size_t i = base + 1; dir[i]; i++) {
		if (dir[i] != '/')
			continue;
		dir[i] = '\0';
		if (mkdir(dir, 0755) == 0) {
			ends[made++] = i;
		} else if (errno != EEXIST) {
			r = -errno;
			log_warn("cgroup %s: mkdir (is cgroup2 mounted and writable?)", dir);
		}
		dir[i] = '/';
		if (r < 0)
			goto undo;
	}
	if (mkdir(dir, 0755) < 0) {
		r = -errno;
		if (r != -EEXIST)
			log_warn("cgroup %s: mkdir", dir);
		goto undo;
	}
	strcpy(out, dir);
	return 0;

undo:
	while (made > 0) {
		dir[ends[--made]] = '\0';
		rmdir(dir);
	}
	return r;
}

int cgroup_id(const char *path, uint64_t *id)
{
	/* A cgroup2 file handle is the 8-byte kernfs id, the same number
	 * bpf_get_current_cgroup_id() returns; st_ino equals it on 64-bit
	 * kernels, so it serves where handles are not supported. */
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + sizeof(uint64_t)];
	} h;
	struct stat st;
	int mount_id;

	memset(&h, 0, sizeof(h));
	h.fh.handle_bytes = sizeof(uint64_t);
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) == 0 &&
	    h.fh.handle_bytes == sizeof(uint64_t)) {
		uint64_t v;

		memcpy(&v, h.fh.f_handle, sizeof(v));
		*id = v;
		return 0;
	}
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*id = (uint64_t)st.st_ino;
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static int write_file(const char *path, const char *s)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(s);
	ssize_t w;

	if (fd < 0)
		return -errno;
	w = write(fd, s, n);
	if (w < 0)
		return -errno;
	return (size_t)w == n ? 0 : -EIO;
}

/* 1 while any process is in the cgroup or below it, 0 when empty, or -errno. */
static int populated(const char *dir)
{
	char path[PATH_MAX], buf[256];
	cleanup_close int fd = -1;
	ssize_t n;
	char *p;

	if (path_fmt(path, sizeof(path), "%s/cgroup.events", dir) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	p = strstr(buf, "populated ");
	if (!p)
		return -EIO;
	return p[strlen("populated ")] == '1';
}

/* The names of the directories in dir, malloc'd and NULL-terminated, read in
 * full before anything is removed so removals do not disturb the listing. */
static int list_dirs(const char *dir, char ***out)
{
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	DIR *d;
	int err = 0;

	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || !valid_name(de->d_name))
			continue;
		err = strv_push(&names, &n, de->d_name);
		if (err)
			break;
	}
	closedir(d);
	if (err) {
		strv_free(names);
		return err;
	}
	if (!names) {
		names = calloc(1, sizeof(*names));
		if (!names)
			return -ENOMEM;
	}
	*out = names;
	return 0;
}

/* SIGKILLs every process listed in dir and the cgroups below it. For kernels
 * before 5.14, which have no cgroup.kill. */
static void kill_tree(const char *dir)
{
	char path[PATH_MAX];
	char **names;
	FILE *f;
	int pid;

	f = path_fmt(path, sizeof(path), "%s/cgroup.procs", dir) == 0 ? fopen(path, "re") : NULL;
	if (f) {
		while (fscanf(f, "%d", &pid) == 1)
			if (pid > 0)
				kill(pid, SIGKILL);
		fclose(f);
	}
	if (list_dirs(dir, &names) < 0)
		return;
	for (char **p = names; *p; p++) {
		if (path_fmt(path, sizeof(path), "%s/%s", dir, *p) == 0)
			kill_tree(path);
	}
	strv_free(names);
}

/* Removes dir and the cgroups below it, deepest first. A cgroup whose last
 * processes are still exiting refuses rmdir with EBUSY for a moment. */
static int rmdir_tree(const char *dir, long long deadline)
{
	char path[PATH_MAX];
	char **names;
	int ret = 0, r;

	r = list_dirs(dir, &names);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	for (char **p = names; *p && ret == 0; p++) {
		ret = path_fmt(path, sizeof(path), "%s/%s", dir, *p);
		if (ret == 0)
			ret = rmdir_tree(path, deadline);
	}
	strv_free(names);
	if (ret < 0)
		return ret;
	while (rmdir(dir) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != EBUSY || now_ms() >= deadline)
			return -errno;
		sleep_ms(POLL_MS);
	}
	return 0;
}

int cgroup_session_remove(const char *path)
{
	char kill_path[PATH_MAX];
	long long deadline;
	bool have_kill;
	struct stat st;
	int r;

	if (!path || !*path)
		return -EINVAL;
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	r = path_fmt(kill_path, sizeof(kill_path), "%s/cgroup.kill", path);
	if (r < 0)
		return r;

	deadline = now_ms() + KILL_WAIT_MS;
	/* cgroup.kill kills the whole subtree at once, forks in flight too;
	 * without it, kill what is listed until nothing is left. */
	r = write_file(kill_path, "1");
	have_kill = r == 0;
	if (r < 0 && r != -ENOENT) {
		log_warnx("cgroup %s: write cgroup.kill: %s", path, strerror(-r));
		return r;
	}
	for (;;) {
		r = populated(path);
		if (r == -ENOENT)
			return 0; /* removed meanwhile */
		if (r <= 0)
			break;
		if (now_ms() >= deadline) {
			log_warnx("cgroup %s: processes still alive after %d ms; remove it by hand",
				  path, KILL_WAIT_MS);
			return -EBUSY;
		}
		if (!have_kill)
			kill_tree(path);
		sleep_ms(POLL_MS);
	}
	/* Empty now; rmdir may still see the last exits for a moment. */
	r = rmdir_tree(path, now_ms() + KILL_WAIT_MS / 2);
	if (r < 0)
		log_warnx("cgroup %s: rmdir: %s", path, strerror(-r));
	return r;
}

/* An agent's hooks cgroup holds programs while that agent lives (its
 * links go with it); an agent killed leaves it empty, for a sweep. */
static bool hooks_held(const char *dir)
{
	char path[PATH_MAX];
	cleanup_close int fd = -1;
	__u32 cnt = 0;

	if (path_fmt(path, sizeof(path), "%s/%s", dir, CGROUP_HOOKS))
		return true;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return true;
	return bpf_prog_query(fd, BPF_CGROUP_INET4_CONNECT, 0, NULL, NULL, &cnt) || cnt > 0;
}

int cgroup_sweep(const char *mount, const char *parent, int (*keep)(const char *id, void *arg),
		 void *arg)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int count = 0, err = 0, r;
	char **names;

	if (!mount || !*mount || !valid_parent(parent))
		return -EINVAL;
	r = path_fmt(dir, sizeof(dir), "%s/%s", mount, parent);
	if (r < 0)
		return r;
	r = list_dirs(dir, &names);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	for (char **p = names; *p; p++) {
		if ((!strcmp(*p, CGROUP_HOOKS) && hooks_held(dir)) || (keep && keep(*p, arg)))
			continue;
		r = path_fmt(path, sizeof(path), "%s/%s", dir, *p);
		if (r == 0)
			r = cgroup_session_remove(path);
		if (r < 0) {
			if (!err)
				err = r;
			continue;
		}
		count++;
	}
	strv_free(names);
	return err ? err : count;
}

pid_t cgroup_spawn_into(const char *path, int (*fn)(void *arg), void *arg)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	pid_t pid = spawn_fn(fn, arg, fd);

	if (fd >= 0)
		close(fd);
	return pid;
}
