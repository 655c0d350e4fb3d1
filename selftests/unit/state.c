/* Guarantee: the agent's state.db (0600, WAL, versioned schema) keeps sessions
 * and refusals across reopen, keeps a session's newest 1000 refusals, and
 * migrates a database of an earlier schema (version 1's unused grants table
 * dropped, its sessions kept); a child forked after the open cannot use the
 * parent's connection (SQLite forbids it), nor break it by closing its copy. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/state.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

static char dir[] = "/tmp/errt-state.XXXXXX";

static void path_in(char *buf, size_t len, const char *name)
{
	if (path_fmt(buf, len, "%s/%s", dir, name))
		abort();
}

static struct state_session session_of(const char *id, int64_t created)
{
	return (struct state_session){
		.id = id,
		.created = created,
		.command = "[\"curl\",\"https://api.example.com/\"]",
		.mode = "restricted",
		.policy = "{\"allow\":[\"api.example.com:443\"]}",
		.cgroup = "/sys/fs/cgroup/errand/s-0a1b2c3d",
		.netns = "/run/errand/netns/0a1b2c3d",
		.bpf = "/sys/fs/bpf/errand/0a1b2c3d",
		.host_if = "eh0a1b2c3d",
		.address = "10.213.0.2",
		.gateway = "10.213.0.1",
		.launcher_pid = 4321,
		.launcher_start = 987654321,
	};
}

/* A value through a connection of its own, as another tool would read it. */
static long long raw_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	long long v = -1000;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

static int raw_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int r = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);

	if (r == SQLITE_OK)
		r = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return r;
}

static int count_cb(const void *row, void *arg)
{
	(void)row;
	(*(int *)arg)++;
	return 0;
}

static int count_session(const struct state_session *s, void *arg)
{
	return count_cb(s, arg);
}

static int count_denied(const struct state_denied *d, void *arg)
{
	return count_cb(d, arg);
}

struct ids {
	char ids[8][32];
	int n;
};

static int collect_ids(const struct state_session *s, void *arg)
{
	struct ids *ids = arg;

	if (ids->n < 8)
		snprintf(ids->ids[ids->n++], sizeof(ids->ids[0]), "%s", s->id);
	return 0;
}

static int stop_at_two(const struct state_session *s, void *arg)
{
	(void)s;
	return ++*(int *)arg == 2 ? 42 : 0;
}

struct denied_seen {
	int n;
	char first[32], last[32];
};

static int collect_denied(const struct state_denied *d, void *arg)
{
	struct denied_seen *seen = arg;

	if (!seen->n++)
		snprintf(seen->first, sizeof(seen->first), "%s", d->name ? d->name : "");
	snprintf(seen->last, sizeof(seen->last), "%s", d->name ? d->name : "");
	return 0;
}

static void test_open(const char *db)
{
	char wal[PATH_MAX + 8];
	struct state *st;
	struct stat sb;

	st = state_open(db);
	CHECK_TRUE(st != NULL, "open a new state.db (%s)", st ? "ok" : strerror(errno));
	if (!st)
		exit(test_exit());
	CHECK_INT(stat(db, &sb), 0, "state.db exists");
	CHECK_INT(sb.st_mode & 07777, 0600, "state.db mode 0600");
	CHECK_INT(state_session_add(st, &(struct state_session){.id = "w", .command = "[]"}), 0,
		  "a write, so the WAL exists");
	snprintf(wal, sizeof(wal), "%s-wal", db);
	CHECK_INT(stat(wal, &sb), 0, "state.db-wal exists");
	CHECK_INT(sb.st_mode & 07777, 0600, "state.db-wal mode 0600");
	CHECK_INT(state_session_remove(st, "w"), 0, "remove it again");
	CHECK_INT(raw_int(db, "SELECT version FROM schema_version"), STATE_SCHEMA_VERSION,
		  "schema version written");
	CHECK_INT(raw_int(db, "SELECT count(*) FROM schema_version"), 1, "one version row");
	CHECK_INT(raw_int(db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1,
		  "journal mode is WAL");
	state_close(st);
	state_close(NULL); /* NULL-safe */
}

static void test_sessions(struct state *st)
{
	struct state_session a = session_of("0a1b2c3d", 1000), b = session_of("1b2c3d4e", 900);
	struct state_session c = {.id = "x'); DROP TABLE sessions; --", .command = "[\"sh\"]"};
	struct state_session *got;
	struct ids ids = {0};
	int n = 0;

	CHECK_INT(state_session_add(st, &a), 0, "add session a");
	CHECK_INT(state_session_add(st, &b), 0, "add session b");
	CHECK_INT(state_session_add(st, &c), 0, "add session c, whose id is SQL");
	CHECK_INT(state_session_add(st, &a), -EEXIST, "add session a twice: EEXIST");
	CHECK_INT(state_session_add(st, &(struct state_session){.id = "nocmd"}), -EINVAL,
		  "add without a command: EINVAL");

	got = state_session_get(st, "0a1b2c3d");
	CHECK_TRUE(got != NULL, "get session a");
	if (got) {
		CHECK_STR(got->id, "0a1b2c3d", "a: id");
		CHECK_INT(got->created, 1000, "a: created");
		CHECK_STR(got->command, a.command, "a: command");
		CHECK_STR(got->mode, "restricted", "a: mode");
		CHECK_STR(got->policy, a.policy, "a: policy");
		CHECK_STR(got->cgroup, a.cgroup, "a: cgroup");
		CHECK_STR(got->netns, a.netns, "a: netns");
		CHECK_STR(got->bpf, a.bpf, "a: bpf");
		CHECK_STR(got->host_if, a.host_if, "a: host_if");
		CHECK_STR(got->address, a.address, "a: address");
		CHECK_STR(got->gateway, a.gateway, "a: gateway");
		CHECK_INT(got->launcher_pid, 4321, "a: launcher_pid");
		CHECK_INT(got->launcher_start, 987654321, "a: launcher_start");
		CHECK_INT(got->status, STATE_RUNNING, "a: running");
		CHECK_INT(got->exit_status, -1, "a: no exit status yet");
		CHECK_INT(got->ended, 0, "a: not ended");
	}
	state_session_free(got);
	state_session_free(NULL);

	got = state_session_get(st, c.id);
	CHECK_TRUE(got && !strcmp(got->id, c.id), "session c's id kept verbatim");
	CHECK_TRUE(got && !got->netns && !got->mode, "session c: unset fields are NULL");
	CHECK_TRUE(got && got->created >= time(NULL) - 5, "session c: created now");
	state_session_free(got);

	errno = 0;
	CHECK_TRUE(state_session_get(st, "nope") == NULL, "get a missing session: NULL");
	CHECK_INT(errno, ENOENT, "get a missing session: ENOENT");

	CHECK_INT(state_session_list(st, count_session, &n), 0, "list sessions");
	CHECK_INT(n, 3, "three sessions listed");
	CHECK_INT(state_session_list(st, collect_ids, &ids), 0, "list again");
	CHECK_STR(ids.ids[0], "1b2c3d4e", "oldest first");
	n = 0;
	CHECK_INT(state_session_list(st, stop_at_two, &n), 42,
		  "a callback's nonzero stops the list");
	CHECK_INT(n, 2, "stopped at the second");

	CHECK_INT(state_session_end(st, "1b2c3d4e", 3), 0, "end session b");
	got = state_session_get(st, "1b2c3d4e");
	CHECK_TRUE(got && got->status == STATE_EXITED, "b: exited");
	CHECK_INT(got ? got->exit_status : -2, 3, "b: exit status");
	CHECK_TRUE(got && got->ended >= time(NULL) - 5, "b: ended now");
	state_session_free(got);
	CHECK_INT(state_session_end(st, "1b2c3d4e", 9), -EALREADY, "end b again: EALREADY");
	got = state_session_get(st, "1b2c3d4e");
	CHECK_INT(got ? got->exit_status : -2, 3, "b: the first exit status stands");
	state_session_free(got);
	CHECK_INT(state_session_end(st, "nope", 0), -ENOENT, "end a missing session: ENOENT");
	CHECK_INT(state_session_remove(st, c.id), 0, "remove session c");
	CHECK_INT(state_session_remove(st, c.id), -ENOENT, "remove c again: ENOENT");
}

static void test_denied(struct state *st)
{
	struct denied_seen seen = {0};
	char name[32];
	int n = 0, bad = 0;

	for (int i = 0; i < STATE_DENIED_KEEP + 5; i++) {
		snprintf(name, sizeof(name), "n%d.example", i);
		bad += state_denied_queue(st, &(struct state_denied){.session = "0a1b2c3d",
								     .name = name,
								     .addr = "198.18.0.1",
								     .port = 443,
								     .proto = "tcp",
								     .reason = "not allowed"}) != 0;
	}
	CHECK_INT(bad, 0, "%d refusals queued", STATE_DENIED_KEEP + 5);
	CHECK_INT(state_denied_queue(st, &(struct state_denied){.session = "1b2c3d4e",
								.addr = "10.0.0.1",
								.port = 22,
								.proto = "tcp",
								.reason = "forbidden"}),
		  0, "a refusal of session b");
	CHECK_INT(state_denied_queue(st, &(struct state_denied){.session = "nope"}), 0,
		  "a refusal of a missing session is queued");
	CHECK_INT(state_denied_queue(st, &(struct state_denied){.name = "x"}), -EINVAL,
		  "a refusal of no session: EINVAL");
	CHECK_INT(state_denied_flush(st), 0, "flush: the missing session's row is dropped alone");
	CHECK_INT(state_denied_list(st, "0a1b2c3d", collect_denied, &seen), 0, "list a's refusals");
	CHECK_INT(seen.n, STATE_DENIED_KEEP, "a keeps %d refusals", STATE_DENIED_KEEP);
	CHECK_STR(seen.first, "n5.example", "the oldest five were dropped");
	CHECK_STR(seen.last, "n1004.example", "the newest is kept");
	CHECK_INT(state_denied_list(st, NULL, count_denied, &n), 0, "list every refusal");
	CHECK_INT(n, STATE_DENIED_KEEP + 1, "every session's refusals");
	n = 0;
	state_denied_list(st, "1b2c3d4e", count_denied, &n);
	CHECK_INT(n, 1, "b's refusal untouched by a's cap");
}

/* Queued refusals are written a batch at a time: none before the queue
 * fills or is flushed, all after; a row of a session that is gone is dropped
 * alone. */
static void test_denied_queue(struct state *st)
{
	char name[32];
	int n = 0, bad = 0;

	state_denied_list(st, "1b2c3d4e", count_denied, &n);
	CHECK_INT(n, 1, "b has one refusal before the queue");
	for (int i = 0; i < STATE_DENIED_QUEUE - 1; i++) {
		snprintf(name, sizeof(name), "q%d.example", i);
		bad += state_denied_queue(st, &(struct state_denied){.session = "1b2c3d4e",
								     .name = name,
								     .proto = "dns",
								     .reason = "not-allowed"}) != 0;
	}
	bad += state_denied_queue(st, &(struct state_denied){.session = "nope", .name = "x"}) != 0;
	CHECK_INT(bad, 0, "%d refusals queued", STATE_DENIED_QUEUE);
	n = 0;
	state_denied_list(st, "1b2c3d4e", count_denied, &n);
	CHECK_INT(n, 1, "nothing written while the queue holds them");
	CHECK_INT(state_denied_queue(st, &(struct state_denied){.session = "1b2c3d4e",
								.name = "full.example",
								.proto = "dns",
								.reason = "not-allowed"}),
		  0, "a full queue flushes and takes one more");
	n = 0;
	state_denied_list(st, "1b2c3d4e", count_denied, &n);
	CHECK_INT(n, STATE_DENIED_QUEUE,
		  "the full queue was written in one go, the missing session's row dropped");
	CHECK_INT(state_denied_flush(st), 0, "flush");
	n = 0;
	state_denied_list(st, "1b2c3d4e", count_denied, &n);
	CHECK_INT(n, STATE_DENIED_QUEUE + 1, "the last one is written by the flush");
	CHECK_INT(state_denied_flush(st), 0, "an empty flush is a no-op");
}

/* Every session's refusals at once are the newest STATE_DENIED_ALL_MAX of
 * them, oldest first: the answer stays bounded whatever a week held. */
static void test_denied_all(struct state *st)
{
	const int sessions = STATE_DENIED_ALL_MAX / STATE_DENIED_KEEP + 1;
	struct denied_seen seen = {0};
	char id[16], name[32];
	int bad = 0;

	for (int k = 0; k < sessions; k++) {
		snprintf(id, sizeof(id), "all%05d", k);
		bad += state_session_add(st, &(struct state_session){.id = id, .command = "[]"}) !=
		       0;
		for (int i = 0; i < STATE_DENIED_KEEP; i++) {
			snprintf(name, sizeof(name), "s%d-%d.example", k, i);
			bad += state_denied_queue(
				       st, &(struct state_denied){.session = id,
								  .name = name,
								  .proto = "dns",
								  .reason = "not-allowed"}) != 0;
		}
	}
	bad += state_denied_flush(st) != 0;
	CHECK_INT(bad, 0, "%d sessions of %d refusals each", sessions, STATE_DENIED_KEEP);
	CHECK_INT(state_denied_list(st, NULL, collect_denied, &seen), 0,
		  "list every session's refusals");
	CHECK_INT(seen.n, STATE_DENIED_ALL_MAX, "the newest %d of them", STATE_DENIED_ALL_MAX);
	CHECK_STR(seen.first, "s1-0.example", "... the oldest of those first");
	snprintf(name, sizeof(name), "s%d-%d.example", sessions - 1, STATE_DENIED_KEEP - 1);
	CHECK_STR(seen.last, name, "... the newest last");
	for (int k = 0; k < sessions; k++) {
		snprintf(id, sizeof(id), "all%05d", k);
		state_session_remove(st, id);
	}
}

static void test_reopen(const char *db)
{
	struct state *st = state_open(db);
	struct state_session *got;
	int n = 0;

	CHECK_TRUE(st != NULL, "reopen after close");
	if (!st)
		return;
	got = state_session_get(st, "0a1b2c3d");
	CHECK_STR(got ? got->host_if : NULL, "eh0a1b2c3d", "session a kept across reopen");
	state_session_free(got);
	state_denied_list(st, "0a1b2c3d", count_denied, &n);
	CHECK_INT(n, STATE_DENIED_KEEP, "refusals kept across reopen");
	CHECK_INT(raw_int(db, "SELECT count(*) FROM schema_version"), 1,
		  "reopening adds no version row");

	CHECK_INT(state_session_remove(st, "0a1b2c3d"), 0, "remove session a");
	n = 0;
	state_denied_list(st, "0a1b2c3d", count_denied, &n);
	CHECK_INT(n, 0, "its refusals went with it");
	n = 0;
	state_session_list(st, count_session, &n);
	CHECK_INT(n, 2, "sessions b and busy left");
	state_close(st);
}

static void test_versions(void)
{
	char v0[PATH_MAX], v1[PATH_MAX], v99[PATH_MAX], loose[PATH_MAX], link[PATH_MAX];
	struct state *st;
	struct stat sb;
	int fd;

	/* a database an earlier errand left at version 0, with a row */
	path_in(v0, sizeof(v0), "v0.db");
	CHECK_INT(raw_exec(v0, "CREATE TABLE schema_version(version INTEGER NOT NULL);"
			       "INSERT INTO schema_version VALUES (0)"),
		  SQLITE_OK, "make a version 0 database");
	st = state_open(v0);
	CHECK_TRUE(st != NULL, "open migrates it");
	CHECK_INT(raw_int(v0, "SELECT version FROM schema_version"), STATE_SCHEMA_VERSION,
		  "migrated to version %d", STATE_SCHEMA_VERSION);
	CHECK_INT(raw_int(v0, "SELECT count(*) FROM sessions"), 0, "sessions table made");
	CHECK_INT(raw_int(v0, "SELECT count(*) FROM sqlite_master WHERE name = 'grants'"), 0,
		  "no grants table: grants live in grants.json");
	state_close(st);

	/* version 1, with its grants table and a session */
	path_in(v1, sizeof(v1), "v1.db");
	st = state_open(v1);
	CHECK_TRUE(st != NULL &&
			   state_session_add(st, &(struct state_session){.id = "v1sess",
									 .command = "[]"}) == 0,
		   "a database with a session");
	state_close(st);
	CHECK_INT(raw_exec(v1, "CREATE TABLE grants(session TEXT, host TEXT);"
			       "INSERT INTO grants VALUES ('v1sess', 'a.example');"
			       "UPDATE schema_version SET version = 1"),
		  SQLITE_OK, "made a version 1 database with a grant row");
	st = state_open(v1);
	CHECK_TRUE(st != NULL, "open migrates version 1");
	CHECK_INT(raw_int(v1, "SELECT version FROM schema_version"), STATE_SCHEMA_VERSION,
		  "migrated to version %d", STATE_SCHEMA_VERSION);
	CHECK_INT(raw_int(v1, "SELECT count(*) FROM sqlite_master WHERE name = 'grants'"), 0,
		  "its grants table dropped");
	CHECK_INT(raw_int(v1, "SELECT count(*) FROM sessions WHERE id = 'v1sess'"), 1,
		  "its session kept");
	state_close(st);

	path_in(v99, sizeof(v99), "v99.db");
	st = state_open(v99);
	state_close(st);
	CHECK_INT(raw_exec(v99, "UPDATE schema_version SET version = 99"), SQLITE_OK,
		  "make a version 99 database");
	errno = 0;
	st = state_open(v99);
	CHECK_TRUE(st == NULL, "a newer schema refused");
	CHECK_INT(errno, ENOTSUP, "a newer schema: ENOTSUP");
	state_close(st);

	path_in(loose, sizeof(loose), "loose.db");
	fd = open(loose, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	fchmod(fd, 0644);
	close(fd);
	st = state_open(loose);
	CHECK_TRUE(st != NULL, "open an empty 0644 file");
	CHECK_TRUE(!stat(loose, &sb) && (sb.st_mode & 07777) == 0600, "made 0600");
	state_close(st);

	path_in(link, sizeof(link), "link.db");
	if (symlink(loose, link))
		abort();
	errno = 0;
	st = state_open(link);
	CHECK_TRUE(st == NULL, "a symlink refused");
	CHECK_INT(errno, ELOOP, "a symlink: ELOOP");
	state_close(st);
}

/* A child forked after the open is refused the parent's connection (the
 * embedded errandctl's teardown child once ended the session's row through
 * it), and its state_close leaves the parent's connection working. */
static void test_fork(struct state *st)
{
	struct state_session a = session_of("5e6f7a8b", 1200), *got;
	int status = -1, p[2];
	int child_rc = 1;
	pid_t pid;

	CHECK_INT(state_session_add(st, &a), 0, "fork: a running session's row");
	if (pipe(p))
		return;
	pid = fork();
	if (pid == 0) {
		int rc = state_session_end(st, a.id, 3);

		state_close(st);
		_exit(write(p[1], &rc, sizeof(rc)) == sizeof(rc) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &child_rc, sizeof(child_rc)) != sizeof(child_rc))
		child_rc = 1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	CHECK_INT(child_rc, -ECHILD, "fork: the child's use of the parent's connection is refused");
	got = state_session_get(st, a.id);
	CHECK_INT(got ? (int)got->status : -1, STATE_RUNNING, "fork: the row is unchanged");
	state_session_free(got);
	CHECK_INT(state_session_end(st, a.id, 3), 0,
		  "fork: the parent's connection works after the child closed its copy");
	CHECK_INT(state_session_remove(st, a.id), 0, "fork: the row goes");
}

/* Another connection holding the write lock past the busy timeout. */
static void test_busy(struct state *st, const char *db)
{
	sqlite3 *other = NULL;
	time_t t0;

	if (sqlite3_open_v2(db, &other, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
	    sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		abort();
	t0 = time(NULL);
	CHECK_INT(state_session_add(st, &(struct state_session){.id = "busy", .command = "[]"}),
		  -EBUSY, "a write while another connection holds the lock: EBUSY");
	CHECK_TRUE(time(NULL) - t0 >= STATE_BUSY_MS / 1000 - 1, "after the busy timeout");
	sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(other);
	CHECK_INT(state_session_add(st, &(struct state_session){.id = "busy", .command = "[]"}), 0,
		  "the same write once the lock is free");
}

static void test_pid_start(void)
{
	uint64_t mine = 0, child = 0;
	pid_t pid;
	int status;

	CHECK_INT(state_pid_start(getpid(), &mine), 0, "start time of this process");
	CHECK_TRUE(mine > 0, "it is after boot");
	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	CHECK_INT(state_pid_start(pid, &child), 0, "start time of a child");
	CHECK_TRUE(child >= mine, "the child started after its parent");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CHECK_INT(state_pid_start(pid, &child), -ENOENT, "a reaped child: ENOENT");
	CHECK_INT(state_pid_start(0, &child), -ENOENT, "pid 0: ENOENT");
}

static void cleanup(void)
{
	const char *names[] = {"state.db",  "state.db-wal", "state.db-shm", "v0.db",
			       "v0.db-wal", "v0.db-shm",    "v1.db",	    "v1.db-wal",
			       "v1.db-shm", "v99.db",	    "v99.db-wal",   "v99.db-shm",
			       "loose.db",  "loose.db-wal", "loose.db-shm", "link.db"};
	char p[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		path_in(p, sizeof(p), names[i]);
		unlink(p);
	}
	rmdir(dir);
}

int main(void)
{
	char db[PATH_MAX];
	struct state *st;

	if (!mkdtemp(dir)) {
		printf("not ok - mkdtemp %s: %s\n", dir, strerror(errno));
		return 1;
	}
	atexit(cleanup);
	path_in(db, sizeof(db), STATE_DB_NAME);
	test_open(db);
	st = state_open(db);
	if (!st)
		return test_exit();
	test_sessions(st);
	test_denied(st);
	test_denied_queue(st);
	test_denied_all(st);
	test_busy(st, db);
	test_fork(st);
	state_close(st);
	test_reopen(db);
	test_versions();
	test_pid_start();
	return test_exit();
}
