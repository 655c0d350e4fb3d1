/* Guarantee: a change of a session's grants replaces grants.json whole: a
 * reader that opened it before the change reads the old set entire, one that
 * opens it after reads the new, never an empty or half-written file (a write
 * in place truncated it first); what a crashed writer left does not stop the
 * next write, and the file keeps its owner and mode 0600. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/grant.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

/* Not errt*: selftests/run, started by another run meanwhile, sweeps
 * /tmp/errt-* as a crashed world's. */
static char dir[] = "/tmp/errand-grants.XXXXXX";

static void path_in(char *buf, size_t len, const char *name)
{
	if (path_fmt(buf, len, "%s/%s", dir, name))
		abort();
}

static void cleanup(void)
{
	char path[PATH_MAX];

	path_in(path, sizeof(path), GRANTS_FILE);
	unlink(path);
	path_in(path, sizeof(path), "." GRANTS_FILE ".tmp");
	unlink(path);
	rmdir(dir);
}

/* The whole text behind fd, from its start. */
static char *read_all(int fd)
{
	static char buf[400];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static int put(const char *host, enum grant_kind kind)
{
	struct host_rule rule;
	struct grant_set gs;
	char err[256];

	if (host_rule_parse(host, &rule, err, sizeof(err)))
		return -EINVAL;
	return grants_put(dir, &rule, kind, 0, &gs);
}

static void test_replaced(void)
{
	char path[PATH_MAX], before[400];
	struct grant_set gs;
	struct stat a, b;
	int fd;

	path_in(path, sizeof(path), GRANTS_FILE);
	CHECK_INT(put("a.example", GRANT_ALWAYS), 0, "a first grant is written");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK_TRUE(fd >= 0, "grants.json is there to read");
	if (fd < 0)
		return;
	snprintf(before, sizeof(before), "%s", read_all(fd));
	CHECK_CONTAINS(before, "a.example", "it holds the first grant");
	fstat(fd, &a);

	CHECK_INT(put("b.example", GRANT_ONCE), 0, "a second grant is written");
	CHECK_INT(stat(path, &b), 0, "grants.json is still there");
	CHECK_TRUE(a.st_ino != b.st_ino, "the second write replaced the file (a new inode)");
	CHECK_STR(read_all(fd), before,
		  "a reader that opened it before reads the old set whole, not the new");
	close(fd);

	CHECK_INT(grants_load(dir, &gs), 0, "the new file loads");
	CHECK_INT(gs.n, 2, "... with both grants");
	CHECK_INT(b.st_mode & 07777, 0600, "grants.json is 0600");
	CHECK_INT(b.st_uid, geteuid(), "... and its writer's");
}

/* A writer killed between its temporary file and the rename leaves the
 * file behind; the next writer, under the same lock, writes anyway. */
static void test_leftover(void)
{
	char tmp[PATH_MAX];
	struct grant_set gs;
	int fd;

	path_in(tmp, sizeof(tmp), "." GRANTS_FILE ".tmp");
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		CHECK_TRUE(write(fd, "{\"half", 6) == 6, "a crashed writer's half file");
		close(fd);
	}
	CHECK_INT(put("c.example", GRANT_ALWAYS), 0, "a write after a crashed one");
	CHECK_INT(grants_load(dir, &gs), 0, "grants.json loads");
	CHECK_INT(gs.n, 3, "... with every grant, the new one too");
	CHECK_INT(access(tmp, F_OK) ? errno : 0, ENOENT, "no temporary file is left");
}

int main(void)
{
	struct grant_set gs;

	if (!mkdtemp(dir)) {
		printf("not ok - mkdtemp %s: %s\n", dir, strerror(errno));
		return 1;
	}
	atexit(cleanup);
	CHECK_INT(grants_load(dir, &gs), 0, "no grants.json: no grants");
	CHECK_INT(gs.n, 0, "... none");
	test_replaced();
	test_leftover();
	return test_exit();
}
