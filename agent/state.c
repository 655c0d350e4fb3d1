/* The session table in SQLite (see state.h): every query a prepared statement
 * with bound parameters, kept for the connection's life; the schema made by
 * numbered migrations recorded in schema_version. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/state.h"
#include "lib/log.h"
#include "lib/util.h"

/* migrations[v] takes the schema from version v to v + 1. Constant DDL, run
 * in the transaction that records the new version. */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE sessions("
	" id TEXT PRIMARY KEY NOT NULL,"
	" created INTEGER NOT NULL,"
	" command TEXT NOT NULL,"
	" mode TEXT,"
	" policy TEXT,"
	" cgroup TEXT, netns TEXT, bpf TEXT, host_if TEXT, address TEXT, gateway TEXT,"
	" launcher_pid INTEGER, launcher_start INTEGER,"
	" status TEXT NOT NULL CHECK (status IN ('running', 'exited')),"
	" exit_status INTEGER, ended INTEGER);"
	"CREATE TABLE grants("
	" session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
	" host TEXT NOT NULL,"
	" port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
	" kind TEXT NOT NULL CHECK (kind IN ('once', 'until', 'always')),"
	" until INTEGER,"
	" used INTEGER NOT NULL DEFAULT 0,"
	" PRIMARY KEY (session, host, port));"
	/* seq orders refusals by arrival, whatever the clock did */
	"CREATE TABLE denied("
	" seq INTEGER PRIMARY KEY,"
	" session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
	" at INTEGER NOT NULL,"
	" name TEXT, addr TEXT, port INTEGER, proto TEXT, reason TEXT);"
	"CREATE INDEX denied_by_session ON denied(session, seq);",
	/* 1 -> 2: grants live in each session's grants.json (agent/grant.h),
	 * which errandctl and the agent share under a file lock; no errand
	 * ever wrote this table, so nothing is lost with it. */
	"DROP TABLE grants;",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == STATE_SCHEMA_VERSION,
	       "one migration per schema version");

#define SESSION_COLS                                                                               \
	"id, created, command, mode, policy, cgroup, netns, bpf, host_if, address, gateway, "      \
	"launcher_pid, launcher_start, status, exit_status, ended"
#define DENIED_COLS "session, at, name, addr, port, proto, reason"
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)
#define DENIED_ALL_MAX_TEXT TEXT_OF(STATE_DENIED_ALL_MAX)

enum stmt_id {
	S_BEGIN,
	S_COMMIT,
	S_ROLLBACK,
	S_VERSION_GET,
	S_VERSION_CLEAR,
	S_VERSION_SET,
	S_SESSION_ADD,
	S_SESSION_GET,
	S_SESSION_LIST,
	S_SESSION_END,
	S_SESSION_REMOVE,
	S_DENIED_ADD,
	S_DENIED_TRIM,
	S_DENIED_ALL,
	S_DENIED_ONE,
	S_COUNT,
};

static const char *const stmt_sql[S_COUNT] = {
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	[S_VERSION_GET] = "SELECT max(version) FROM schema_version",
	[S_VERSION_CLEAR] = "DELETE FROM schema_version",
	[S_VERSION_SET] = "INSERT INTO schema_version(version) VALUES (?1)",
	[S_SESSION_ADD] = "INSERT INTO sessions(" SESSION_COLS ") VALUES "
			  "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
	[S_SESSION_GET] = "SELECT " SESSION_COLS " FROM sessions WHERE id = ?1",
	[S_SESSION_LIST] = "SELECT " SESSION_COLS " FROM sessions ORDER BY created, id",
	[S_SESSION_END] = "UPDATE sessions SET status = 'exited', exit_status = ?2, ended = ?3 "
			  "WHERE id = ?1 AND status = 'running'",
	[S_SESSION_REMOVE] = "DELETE FROM sessions WHERE id = ?1",
	[S_DENIED_ADD] = "INSERT INTO denied(" DENIED_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[S_DENIED_TRIM] = "DELETE FROM denied WHERE session = ?1 AND seq <= "
			  "(SELECT seq FROM denied WHERE session = ?1 ORDER BY seq DESC "
			  "LIMIT 1 OFFSET ?2)",
	/* the newest STATE_DENIED_ALL_MAX of every session's, oldest first */
	[S_DENIED_ALL] =
		"SELECT " DENIED_COLS " FROM (SELECT seq, " DENIED_COLS
		" FROM denied ORDER BY seq DESC LIMIT " DENIED_ALL_MAX_TEXT ") ORDER BY seq",
	[S_DENIED_ONE] = "SELECT " DENIED_COLS " FROM denied WHERE session = ?1 ORDER BY seq",
};

/* A queued refusal, its strings copied (the caller's are an event's). */
struct denied_row {
	struct state_denied d;
	char session[40], name[256], addr[48], proto[8], reason[24];
};

struct state {
	sqlite3 *db;
	char *path;
	pid_t pid; /* the process that opened it, the only one that may use it */
	sqlite3_stmt *stmt[S_COUNT];
	struct denied_row queue[STATE_DENIED_QUEUE];
	size_t n_queued;
};

/* SQLite's verdict as an errno. What a caller can act on (busy, duplicate,
 * missing, out of range) is returned quietly; anything else is logged,
 * since -EIO alone would lose SQLite's reason. */
static int sql_err(struct state *st, int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CONSTRAINT:
		if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE)
			return -EEXIST;
		if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
			return -ENOENT; /* the session the row belongs to is not there */
		return -EINVAL;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	default:
		log_warnx("state: %s: %s", st->path, sqlite3_errmsg(st->db));
		return -EIO;
	}
}

/* The statement, prepared on first use and kept: NULL with *rc set. A
 * forked child gets -ECHILD: SQLite forbids a connection opened before a
 * fork in the child, whose POSIX locks are not the ones the connection
 * believes it holds (its writes could land in a WAL the parent is
 * checkpointing). Every statement comes through here. */
static sqlite3_stmt *stmt_get(struct state *st, enum stmt_id id, int *rc)
{
	int r;

	if (st->pid != getpid()) {
		log_warnx("state: %s: not used in a child of the process that opened it", st->path);
		*rc = -ECHILD;
		return NULL;
	}
	if (st->stmt[id])
		return st->stmt[id];
	r = sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[id],
			       NULL);
	if (r != SQLITE_OK) {
		*rc = sql_err(st, r);
		return NULL;
	}
	return st->stmt[id];
}

/* Ready for the next use; bound strings are the caller's (SQLITE_STATIC),
 * so no binding may outlive the call that made it. */
static void stmt_done(sqlite3_stmt *s)
{
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
	return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

/* Runs a statement that returns no rows: 0 or -errno. */
static int step_done(struct state *st, sqlite3_stmt *s)
{
	int r = sqlite3_step(s);

	stmt_done(s);
	return r == SQLITE_DONE || r == SQLITE_ROW ? 0 : sql_err(st, r);
}

static int run(struct state *st, enum stmt_id id)
{
	int rc = 0;
	sqlite3_stmt *s = stmt_get(st, id, &rc);

	return s ? step_done(st, s) : rc;
}

static int tx_begin(struct state *st)
{
	return run(st, S_BEGIN);
}

/* Commits when rc is 0, else rolls back (unless SQLite already has). */
static int tx_end(struct state *st, int rc)
{
	if (!rc)
		rc = run(st, S_COMMIT);
	if (rc && !sqlite3_get_autocommit(st->db))
		run(st, S_ROLLBACK);
	return rc;
}

static const char *col_text(sqlite3_stmt *s, int i)
{
	return (const char *)sqlite3_column_text(s, i);
}

static void row_session(sqlite3_stmt *s, struct state_session *out)
{
	const char *status = col_text(s, 13);

	*out = (struct state_session){
		.id = col_text(s, 0),
		.created = sqlite3_column_int64(s, 1),
		.command = col_text(s, 2),
		.mode = col_text(s, 3),
		.policy = col_text(s, 4),
		.cgroup = col_text(s, 5),
		.netns = col_text(s, 6),
		.bpf = col_text(s, 7),
		.host_if = col_text(s, 8),
		.address = col_text(s, 9),
		.gateway = col_text(s, 10),
		.launcher_pid = (pid_t)sqlite3_column_int64(s, 11),
		.launcher_start = (uint64_t)sqlite3_column_int64(s, 12),
		.status = status && !strcmp(status, "exited") ? STATE_EXITED : STATE_RUNNING,
		.exit_status =
			sqlite3_column_type(s, 14) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 14),
		.ended = sqlite3_column_int64(s, 15),
	};
}

static void row_denied(sqlite3_stmt *s, struct state_denied *out)
{
	*out = (struct state_denied){
		.session = col_text(s, 0),
		.at = sqlite3_column_int64(s, 1),
		.name = col_text(s, 2),
		.addr = col_text(s, 3),
		.port = (uint16_t)sqlite3_column_int(s, 4),
		.proto = col_text(s, 5),
		.reason = col_text(s, 6),
	};
}

/* Which rows a walk reads, and whom it hands them to. */
struct walker {
	enum { W_SESSION, W_DENIED } kind;
	state_session_cb session_cb;
	state_denied_cb denied_cb;
	void *arg;
};

static int walk_row(sqlite3_stmt *s, const struct walker *w)
{
	struct state_session session;
	struct state_denied denied;

	switch (w->kind) {
	case W_SESSION:
		row_session(s, &session);
		return w->session_cb(&session, w->arg);
	case W_DENIED:
		row_denied(s, &denied);
		return w->denied_cb(&denied, w->arg);
	}
	return -EINVAL;
}

/* Steps through a bound query, handing each row on until a callback says
 * stop; the statement is reset whatever happens. */
static int walk(struct state *st, sqlite3_stmt *s, const struct walker *w)
{
	int r, rc = 0;

	while ((r = sqlite3_step(s)) == SQLITE_ROW) {
		rc = walk_row(s, w);
		if (rc)
			break;
	}
	if (!rc && r != SQLITE_DONE)
		rc = sql_err(st, r);
	stmt_done(s);
	return rc;
}

/* The file made 0600 and ours before SQLite opens it: SQLite would create
 * it 0644, and gives the -wal and -shm files the database's mode. */
static int prepare_file(const char *path)
{
	cleanup_close int fd = -1;
	struct stat st;

	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_uid != geteuid())
		return -EPERM; /* someone else's file in our state directory */
	if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600))
		return -errno;
	return 0;
}

/* Brings the schema to STATE_SCHEMA_VERSION in one write transaction, so
 * two agents starting at once cannot both migrate. */
static int migrate(struct state *st)
{
	sqlite3_stmt *s;
	int64_t version = 0;
	int rc, r;
	char *msg = NULL;

	rc = tx_begin(st);
	if (rc)
		return rc;
	r = sqlite3_exec(st->db,
			 "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)",
			 NULL, NULL, NULL);
	if (r != SQLITE_OK)
		return tx_end(st, sql_err(st, r));
	s = stmt_get(st, S_VERSION_GET, &rc);
	if (!s)
		return tx_end(st, rc);
	r = sqlite3_step(s);
	if (r == SQLITE_ROW)
		version = sqlite3_column_int64(s, 0); /* max() of no rows is NULL: 0 */
	else
		rc = sql_err(st, r);
	stmt_done(s);
	if (rc)
		return tx_end(st, rc);
	if (version > STATE_SCHEMA_VERSION || version < 0) {
		log_warnx("state: %s: schema version %" PRId64 " is not one this errand knows "
			  "(up to %d): run the errand that wrote it, or move the file away",
			  st->path, version, STATE_SCHEMA_VERSION);
		return tx_end(st, -ENOTSUP);
	}
	if (version == STATE_SCHEMA_VERSION)
		return tx_end(st, 0);
	for (int64_t v = version; v < STATE_SCHEMA_VERSION; v++) {
		r = sqlite3_exec(st->db, migrations[v], NULL, NULL, &msg);
		if (r != SQLITE_OK) {
			log_warnx("state: %s: migrating from schema version %" PRId64 ": %s",
				  st->path, v, msg ? msg : sqlite3_errstr(r));
			sqlite3_free(msg);
			return tx_end(st, -EIO);
		}
	}
	rc = run(st, S_VERSION_CLEAR);
	if (!rc) {
		s = stmt_get(st, S_VERSION_SET, &rc);
		if (s) {
			sqlite3_bind_int(s, 1, STATE_SCHEMA_VERSION);
			rc = step_done(st, s);
		}
	}
	return tx_end(st, rc);
}

/* Connection settings; journal_mode answers with the mode it took. */
static int configure(struct state *st)
{
	sqlite3_stmt *s = NULL;
	const char *mode;
	int r, rc = 0;

	sqlite3_extended_result_codes(st->db, 1);
	r = sqlite3_busy_timeout(st->db, STATE_BUSY_MS);
	if (r == SQLITE_OK)
		r = sqlite3_exec(st->db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL",
				 NULL, NULL, NULL);
	if (r == SQLITE_OK)
		r = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
	if (r == SQLITE_OK) {
		r = sqlite3_step(s);
		mode = r == SQLITE_ROW ? col_text(s, 0) : NULL;
		if (r == SQLITE_ROW && (!mode || strcmp(mode, "wal"))) {
			log_warnx("state: %s: journal mode is %s, not wal", st->path,
				  mode ? mode : "unknown");
			rc = -EIO;
		}
		r = r == SQLITE_ROW ? SQLITE_OK : r;
	}
	sqlite3_finalize(s);
	if (!rc && r != SQLITE_OK)
		rc = sql_err(st, r);
	return rc;
}

struct state *state_open(const char *path)
{
	struct state *st;
	int rc, r;

	st = calloc(1, sizeof(*st));
	if (!st || !(st->path = strdup(path))) {
		free(st);
		log_warnx("state: %s: out of memory", path);
		errno = ENOMEM;
		return NULL;
	}
	st->pid = getpid();
	rc = prepare_file(path);
	if (rc) {
		log_warnx("state: %s: %s%s", path, strerror(-rc),
			  rc == -EPERM ? " (owned by another user; move it away)" : "");
		goto fail;
	}
	r = sqlite3_open_v2(path, &st->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE,
			    NULL);
	if (r != SQLITE_OK) {
		log_warnx("state: %s: %s", path,
			  st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(r));
		rc = (r & 0xff) == SQLITE_BUSY ? -EBUSY : -EIO;
		goto fail;
	}
	rc = configure(st);
	if (!rc)
		rc = migrate(st);
	if (rc) {
		/* sql_err and migrate logged what they did not return quietly */
		if (rc != -EIO && rc != -ENOTSUP)
			log_warnx("state: %s: %s", path, strerror(-rc));
		goto fail;
	}
	return st;
fail:
	state_close(st);
	errno = -rc;
	return NULL;
}

void state_close(struct state *st)
{
	if (!st)
		return;
	/* A forked child's copy is only freed: closing the last connection
	 * checkpoints and removes the WAL, under the parent's feet. */
	if (st->pid != getpid()) {
		free(st->path);
		free(st);
		return;
	}
	state_denied_flush(st);
	for (int i = 0; i < S_COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	sqlite3_close(st->db); /* every statement is finalized: it closes */
	free(st->path);
	free(st);
}

int state_session_add(struct state *st, const struct state_session *in)
{
	bool exited = in->status == STATE_EXITED;
	sqlite3_stmt *s;
	int rc = 0;

	if (!in->id || !*in->id || !in->command || in->launcher_pid < 0 ||
	    in->launcher_start > INT64_MAX)
		return -EINVAL;
	s = stmt_get(st, S_SESSION_ADD, &rc);
	if (!s)
		return rc;
	bind_text(s, 1, in->id);
	sqlite3_bind_int64(s, 2, in->created ? in->created : (int64_t)time(NULL));
	bind_text(s, 3, in->command);
	bind_text(s, 4, in->mode);
	bind_text(s, 5, in->policy);
	bind_text(s, 6, in->cgroup);
	bind_text(s, 7, in->netns);
	bind_text(s, 8, in->bpf);
	bind_text(s, 9, in->host_if);
	bind_text(s, 10, in->address);
	bind_text(s, 11, in->gateway);
	if (in->launcher_pid)
		sqlite3_bind_int64(s, 12, in->launcher_pid);
	if (in->launcher_start)
		sqlite3_bind_int64(s, 13, (int64_t)in->launcher_start);
	bind_text(s, 14, exited ? "exited" : "running");
	if (exited) {
		sqlite3_bind_int(s, 15, in->exit_status);
		sqlite3_bind_int64(s, 16, in->ended ? in->ended : (int64_t)time(NULL));
	}
	return step_done(st, s);
}

/* The string members of a session, for copying. */
static const size_t session_strings[] = {
	offsetof(struct state_session, id),	 offsetof(struct state_session, command),
	offsetof(struct state_session, mode),	 offsetof(struct state_session, policy),
	offsetof(struct state_session, cgroup),	 offsetof(struct state_session, netns),
	offsetof(struct state_session, bpf),	 offsetof(struct state_session, host_if),
	offsetof(struct state_session, address), offsetof(struct state_session, gateway),
};

static const char **session_string(const struct state_session *s, size_t i)
{
	return (const char **)((char *)s + session_strings[i]);
}

/* A copy of a row in one allocation: the struct, then its strings. */
static struct state_session *session_dup(const struct state_session *src)
{
	struct state_session *s;
	size_t size = sizeof(*s);
	char *p;

	for (size_t i = 0; i < ARRAY_SIZE(session_strings); i++)
		size += *session_string(src, i) ? strlen(*session_string(src, i)) + 1 : 0;
	s = malloc(size);
	if (!s)
		return NULL;
	*s = *src;
	p = (char *)(s + 1);
	for (size_t i = 0; i < ARRAY_SIZE(session_strings); i++) {
		const char *from = *session_string(src, i);

		if (!from)
			continue;
		*session_string(s, i) = strcpy(p, from);
		p += strlen(p) + 1;
	}
	return s;
}

struct state_session *state_session_get(struct state *st, const char *id)
{
	struct state_session row, *copy = NULL;
	sqlite3_stmt *s;
	int rc = 0, r;

	s = stmt_get(st, S_SESSION_GET, &rc);
	if (!s) {
		errno = -rc;
		return NULL;
	}
	bind_text(s, 1, id);
	r = sqlite3_step(s);
	if (r == SQLITE_ROW) {
		row_session(s, &row);
		copy = session_dup(&row);
		rc = copy ? 0 : -ENOMEM;
	} else {
		rc = r == SQLITE_DONE ? -ENOENT : sql_err(st, r);
	}
	stmt_done(s);
	if (!copy)
		errno = -rc;
	return copy;
}

void state_session_free(struct state_session *s)
{
	free(s);
}

int state_session_list(struct state *st, state_session_cb cb, void *arg)
{
	sqlite3_stmt *s;
	int rc = 0;

	s = stmt_get(st, S_SESSION_LIST, &rc);
	if (!s)
		return rc;
	return walk(st, s, &(struct walker){.kind = W_SESSION, .session_cb = cb, .arg = arg});
}

int state_session_end(struct state *st, const char *id, int exit_status)
{
	struct state_session *cur;
	sqlite3_stmt *s;
	int rc = 0;

	s = stmt_get(st, S_SESSION_END, &rc);
	if (!s)
		return rc;
	bind_text(s, 1, id);
	sqlite3_bind_int(s, 2, exit_status);
	sqlite3_bind_int64(s, 3, (int64_t)time(NULL));
	rc = step_done(st, s);
	if (rc || sqlite3_changes(st->db))
		return rc;
	/* nothing changed: not there, or ended before */
	cur = state_session_get(st, id);
	if (!cur)
		return -errno;
	state_session_free(cur);
	return -EALREADY;
}

int state_session_remove(struct state *st, const char *id)
{
	sqlite3_stmt *s;
	int rc = 0;

	s = stmt_get(st, S_SESSION_REMOVE, &rc);
	if (!s)
		return rc;
	bind_text(s, 1, id);
	rc = step_done(st, s); /* its refusals go with it: ON DELETE CASCADE */
	return rc ? rc : sqlite3_changes(st->db) ? 0 : -ENOENT;
}

/* One row and its trim, inside the caller's transaction. */
static int denied_insert(struct state *st, const struct state_denied *d)
{
	sqlite3_stmt *s;
	int rc = 0;

	s = stmt_get(st, S_DENIED_ADD, &rc);
	if (s) {
		bind_text(s, 1, d->session);
		sqlite3_bind_int64(s, 2, d->at ? d->at : (int64_t)time(NULL));
		bind_text(s, 3, d->name);
		bind_text(s, 4, d->addr);
		sqlite3_bind_int(s, 5, d->port);
		bind_text(s, 6, d->proto);
		bind_text(s, 7, d->reason);
		rc = step_done(st, s);
	}
	if (!rc) {
		s = stmt_get(st, S_DENIED_TRIM, &rc);
		if (s) {
			bind_text(s, 1, d->session);
			sqlite3_bind_int(s, 2, STATE_DENIED_KEEP);
			rc = step_done(st, s);
		}
	}
	return rc;
}

static const char *copy_or_null(char *buf, size_t len, const char *s)
{
	if (!s)
		return NULL;
	snprintf(buf, len, "%s", s);
	return buf;
}

int state_denied_queue(struct state *st, const struct state_denied *d)
{
	struct denied_row *r;
	int rc = 0;

	if (!d->session)
		return -EINVAL;
	if (st->n_queued == STATE_DENIED_QUEUE)
		rc = state_denied_flush(st);
	r = &st->queue[st->n_queued++];
	r->d = *d;
	r->d.at = d->at ? d->at : (int64_t)time(NULL);
	r->d.session = copy_or_null(r->session, sizeof(r->session), d->session);
	r->d.name = copy_or_null(r->name, sizeof(r->name), d->name);
	r->d.addr = copy_or_null(r->addr, sizeof(r->addr), d->addr);
	r->d.proto = copy_or_null(r->proto, sizeof(r->proto), d->proto);
	r->d.reason = copy_or_null(r->reason, sizeof(r->reason), d->reason);
	return rc;
}

int state_denied_flush(struct state *st)
{
	size_t n = st->n_queued;
	int rc;

	if (!n)
		return 0;
	/* Whatever happens, the queue is emptied: a database that refuses
	 * these rows must not make every later turn try them again. */
	st->n_queued = 0;
	rc = tx_begin(st);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = denied_insert(st, &st->queue[i].d);
		if (rc == -ENOENT)
			rc = 0; /* a session already gone: its row alone is dropped */
	}
	return tx_end(st, rc);
}

int state_denied_list(struct state *st, const char *session, state_denied_cb cb, void *arg)
{
	sqlite3_stmt *s;
	int rc = 0;

	s = stmt_get(st, session ? S_DENIED_ONE : S_DENIED_ALL, &rc);
	if (!s)
		return rc;
	if (session)
		bind_text(s, 1, session);
	return walk(st, s, &(struct walker){.kind = W_DENIED, .denied_cb = cb, .arg = arg});
}

int state_pid_start(pid_t pid, uint64_t *start)
{
	char path[64], buf[1024], *p, *end;
	cleanup_close int fd = -1;
	ssize_t n;

	if (pid <= 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT; /* a process being reaped reads empty */
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields follow the
	 * last ')'; starttime is field 22, the 20th after it */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	errno = 0;
	*start = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1)
		return -EIO;
	return 0;
}

struct state *state_open_dir(const char *state_dir)
{
	char path[PATH_MAX];

	/* 0711: the launcher, already the session's uid, passes through to the
	 * session's record (its resolv.conf and state directory); state.db
	 * itself is 0600. */
	if (mkdir(state_dir, 0711) && errno != EEXIST) {
		log_warn("cannot create the state directory %s", state_dir);
		return NULL;
	}
	if (path_fmt(path, sizeof(path), "%s/" STATE_DB_NAME, state_dir)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return state_open(path);
}
