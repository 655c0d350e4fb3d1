/* Guarantee: sandbox.limits.disk's watch measures the project and the state
 * directory for the session's whole life, whatever becomes of the buffers
 * its start named them in: growth past the budget in either trips it,
 * growth under it does not, and a directory nested deeper than
 * DISK_DEPTH_MAX counts as past the budget. */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/disk.h"
#include "selftests/unit/test.h"

#define MIB (1024 * 1024)

static char top[256]; /* a directory of this run's own, under TMPDIR */

/* Starts w on top/proj and top/state, named in buffers that are wiped once
 * it has started, as a session's start returns and its stack is reused. */
static int start(struct disk_watch *w, const char *proj, const char *state, uint64_t budget)
{
	char p[PATH_MAX], s[PATH_MAX];
	int rc;

	snprintf(p, sizeof(p), "%s/%s", top, proj);
	snprintf(s, sizeof(s), "%s/%s", top, state);
	rc = disk_watch_start(w, p, s, budget);
	memset(p, 'x', sizeof(p) - 1);
	memset(s, 'x', sizeof(s) - 1);
	return rc;
}

/* Whether the watch says its budget is past within ms. */
static bool tripped(struct disk_watch *w, int ms)
{
	struct pollfd p = {.fd = disk_watch_fd(w), .events = POLLIN};

	return poll(&p, 1, ms) == 1 && disk_watch_check(w) == 1;
}

static int grow(const char *dir, const char *name, off_t bytes)
{
	char path[PATH_MAX];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s/%s", top, dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	rc = posix_fallocate(fd, 0, bytes);
	close(fd);
	return rc;
}

static int nest(const char *dir, int levels)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", top, dir);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < levels && fd >= 0; i++) {
		int sub;

		if (mkdirat(fd, "d", 0700) || (sub = openat(fd, "d", O_RDONLY | O_DIRECTORY)) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		fd = sub;
	}
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int main(void)
{
	static const char *const dirs[] = {"proj", "state", "proj2", "state2", "proj3", "state3"};
	struct disk_watch w = {0};
	char cmd[PATH_MAX + 16];

	snprintf(top, sizeof(top), "%s/errt-unit-disk-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	if (!mkdtemp(top))
		return 1;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s/%s", top, dirs[i]);
		if (mkdir(cmd, 0700))
			return 1;
	}

	CHECK_INT(start(&w, "proj", "state", 2 * MIB), 0, "a watch with a 2 MiB budget starts");
	CHECK_INT(grow("state", "big", 4 * MIB), 0, "4 MiB written to the state directory");
	CHECK_TRUE(tripped(&w, 5000), "... trip it, though its path's buffer is gone");
	disk_watch_stop(&w);

	CHECK_INT(start(&w, "proj2", "state2", 64 * MIB), 0, "a watch with a 64 MiB budget starts");
	CHECK_INT(grow("proj2", "small", 1 * MIB), 0, "1 MiB written to the project");
	CHECK_FALSE(tripped(&w, 1500), "... does not trip it");
	CHECK_INT(grow("proj2", "big", 80 * MIB), 0, "80 MiB more");
	CHECK_TRUE(tripped(&w, 5000), "... do");
	disk_watch_stop(&w);

	CHECK_INT(start(&w, "proj3", "state3", 64 * MIB), 0, "a third watch starts");
	CHECK_INT(nest("state3", DISK_DEPTH_MAX + 4), 0, "directories nested %d deep",
		  DISK_DEPTH_MAX + 4);
	CHECK_TRUE(tripped(&w, 5000), "... trip it, with nothing written in them");
	CHECK_TRUE(w.deep, "... as too deep to measure");
	disk_watch_stop(&w);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", top);
	return test_exit();
}
