/* receipts.db in SQLite: the broker adds one row a provider call, errandctl
 * lists them. Paths are reduced to what cannot carry a secret before they are
 * stored: a stand-in, a query, a control character never reach the file. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/receipts.h"
#include "broker/registry.h"
#include "lib/log.h"
#include "lib/util.h"

struct receipts {
	sqlite3 *db;
	sqlite3_stmt *insert;
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS receipts ("
	" id INTEGER PRIMARY KEY,"
	" started_at_us INTEGER NOT NULL DEFAULT 0,"
	" ended_at_ms INTEGER NOT NULL,"
	" session TEXT NOT NULL,"
	" provider TEXT NOT NULL,"
	" credential_var TEXT NOT NULL,"
	" host TEXT NOT NULL,"
	" method TEXT NOT NULL,"
	" path TEXT NOT NULL,"
	" query_len INTEGER NOT NULL,"
	" status INTEGER NOT NULL,"
	" duration_ms INTEGER NOT NULL,"
	" bytes_up INTEGER NOT NULL,"
	" bytes_down INTEGER NOT NULL,"
	" outcome TEXT NOT NULL,"
	" unrecorded INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS receipts_session ON receipts(session, id);";

static const char *const outcome_names[] = {
	[RECEIPT_COMPLETED] = "completed",
	[RECEIPT_INTERRUPTED] = "interrupted",
	[RECEIPT_DENIED] = "denied",
	[RECEIPT_REFUSED] = "refused",
	[RECEIPT_UNREACHABLE] = "upstream-unreachable",
};

const char *receipt_outcome_name(enum receipt_outcome o)
{
	return (size_t)o < ARRAY_SIZE(outcome_names) ? outcome_names[o] : "unknown";
}

static enum receipt_outcome outcome_parse(const char *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(outcome_names); i++)
		if (s && !strcmp(s, outcome_names[i]))
			return (enum receipt_outcome)i;
	return RECEIPT_INTERRUPTED;
}

const char *receipt_method(const char *method)
{
	static const char *const std[] = {"GET",     "HEAD",	"POST",	 "PUT",	 "DELETE",
					  "CONNECT", "OPTIONS", "TRACE", "PATCH"};

	for (size_t i = 0; i < ARRAY_SIZE(std); i++)
		if (!strcmp(method, std[i]))
			return std[i];
	return "OTHER";
}

void receipt_path(const char *raw, char *out)
{
	static const char prefix[] = BROKER_STANDIN_PREFIX;
	size_t n = strcspn(raw, "?"), d = 0, o = 0;
	cleanup_free char *dec = malloc(n + 1);

	out[0] = '\0';
	if (!dec)
		return;
	for (size_t i = 0; i < n; i++) {
		int hi = -1, lo = -1;

		if (raw[i] == '%' && i + 2 < n) {
			hi = hex_value((unsigned char)raw[i + 1]);
			lo = hi < 0 ? -1 : hex_value((unsigned char)raw[i + 2]);
		}
		if (hi >= 0 && lo >= 0) {
			dec[d++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			dec[d++] = raw[i];
		}
	}
	dec[d] = '\0';
	d = strcspn(dec, "?");
	for (size_t i = 0; i < d;) {
		unsigned char c = (unsigned char)dec[i];
		char piece[16];
		size_t len;

		if (!strncmp(dec + i, prefix, sizeof(prefix) - 1)) {
			/* the prefix and whatever hex follows: a stand-in, whole or cut */
			i += sizeof(prefix) - 1;
			while (i < d && hex_value((unsigned char)dec[i]) >= 0)
				i++;
			len = (size_t)snprintf(piece, sizeof(piece), "[stand-in]");
		} else if (c < 0x20 || c == 0x7f || c == '\\') {
			len = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", c);
			i++;
		} else {
			piece[0] = (char)c;
			piece[1] = '\0';
			len = 1;
			i++;
		}
		if (o + len > RECEIPT_PATH_MAX)
			break;
		memcpy(out + o, piece, len);
		o += len;
	}
	out[o] = '\0';
}

/* Whether the table has started_at_us (a receipts.db of an older broker has not). */
static bool has_started(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	bool ok = sqlite3_prepare_v2(db, "SELECT started_at_us FROM receipts LIMIT 0", -1, &st,
				     NULL) == SQLITE_OK;

	sqlite3_finalize(st);
	return ok;
}

/* WAL, then the table, its index and started_at_us (which a table made
 * before it lacks) in one transaction that takes the write lock first:
 * every session's broker opens the file, and brokers started together
 * would otherwise each read the schema and then wait on each other's read
 * to write it, which SQLite ends at once with "database is locked". */
static bool setup(sqlite3 *db)
{
	int rc, tries = 0;

	/* the change to WAL takes the file whole, and SQLite does not wait for
	 * it: another broker's open in the way is waited out here, 2 s at most */
	while ((rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL)) ==
		       SQLITE_BUSY &&
	       ++tries < 200)
		usleep(10000);
	if (rc != SQLITE_OK ||
	    sqlite3_exec(db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return false;
	if (sqlite3_exec(db, schema, NULL, NULL, NULL) == SQLITE_OK &&
	    (has_started(db) ||
	     sqlite3_exec(db,
			  "ALTER TABLE receipts ADD COLUMN started_at_us INTEGER NOT NULL "
			  "DEFAULT 0",
			  NULL, NULL, NULL) == SQLITE_OK) &&
	    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		return true;
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return false;
}

static void receipts_log(const char *what, sqlite3 *db)
{
	log_warnx("receipts: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

struct receipts *receipts_open(const char *path, bool create)
{
	int flags = create ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
	struct receipts *r = calloc(1, sizeof(*r));
	int fd;

	if (!r)
		return NULL;
	if (create) {
		/* the file is made 0600 before SQLite opens it */
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			int e = errno;

			free(r);
			errno = e;
			return NULL;
		}
		close(fd);
	}
	flags |= SQLITE_OPEN_FULLMUTEX;
	if (sqlite3_open_v2(path, &r->db, flags, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(r->db, 2000);
	if (create && !setup(r->db))
		goto fail;
	return r;
fail:
	receipts_log(path, r->db);
	receipts_close(r);
	errno = EIO;
	return NULL;
}

void receipts_close(struct receipts *r)
{
	if (!r)
		return;
	sqlite3_finalize(r->insert);
	sqlite3_close(r->db);
	free(r);
}

int receipts_add(struct receipts *r, const struct receipt *rc)
{
	sqlite3_stmt *st;
	int ok;

	if (!r->insert &&
	    sqlite3_prepare_v2(
		    r->db,
		    "INSERT INTO receipts (ended_at_ms, session, provider, "
		    "credential_var, host, method, path, query_len, status, duration_ms, "
		    "bytes_up, bytes_down, outcome, unrecorded, started_at_us) VALUES "
		    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
		    -1, &r->insert, NULL) != SQLITE_OK)
		return -EIO;
	st = r->insert;
	sqlite3_bind_int64(st, 1, rc->ended_at_ms);
	sqlite3_bind_text(st, 2, rc->session, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, rc->provider, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, rc->credential_var, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, rc->host, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 6, receipt_method(rc->method), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, rc->path, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)rc->query_len);
	sqlite3_bind_int(st, 9, rc->status);
	sqlite3_bind_int64(st, 10, rc->duration_ms);
	sqlite3_bind_int64(st, 11, (sqlite3_int64)rc->bytes_up);
	sqlite3_bind_int64(st, 12, (sqlite3_int64)rc->bytes_down);
	sqlite3_bind_text(st, 13, receipt_outcome_name(rc->outcome), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 14, (sqlite3_int64)rc->unrecorded);
	sqlite3_bind_int64(st, 15, rc->started_at_us);
	ok = sqlite3_step(st) == SQLITE_DONE;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ok ? 0 : -EIO;
}

int receipts_add_all(struct receipts *r, const struct receipt *rows, size_t n)
{
	int rc = 0;

	if (sqlite3_exec(r->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -EIO;
	for (size_t i = 0; i < n && !rc; i++)
		rc = receipts_add(r, &rows[i]);
	if (!rc && sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
	return -EIO;
}

static const char *col(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s ? (const char *)s : "";
}

int receipts_list(struct receipts *r, const char *session, receipt_fn fn, void *ctx)
{
	static const char cols[] =
		"SELECT ended_at_ms, session, provider, credential_var, host, method, "
		"path, query_len, status, duration_ms, bytes_up, bytes_down, "
		"outcome, unrecorded, %s FROM receipts WHERE ?1 IS NULL OR session = ?1 "
		"ORDER BY %s";
	char sql[sizeof(cols) + 64];
	sqlite3_stmt *st = NULL;
	int rc = 0, step;
	bool started = has_started(r->db);

	/* read-only, an older broker's table is listed as it was added */
	snprintf(sql, sizeof(sql), cols, started ? "started_at_us" : "0",
		 started ? "started_at_us, id" : "id");
	if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	if (session)
		sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct receipt row = {
			.ended_at_ms = sqlite3_column_int64(st, 0),
			.session = col(st, 1),
			.provider = col(st, 2),
			.credential_var = col(st, 3),
			.host = col(st, 4),
			.method = col(st, 5),
			.path = col(st, 6),
			.query_len = (uint64_t)sqlite3_column_int64(st, 7),
			.status = sqlite3_column_int(st, 8),
			.duration_ms = sqlite3_column_int64(st, 9),
			.bytes_up = (uint64_t)sqlite3_column_int64(st, 10),
			.bytes_down = (uint64_t)sqlite3_column_int64(st, 11),
			.outcome = outcome_parse(col(st, 12)),
			.unrecorded = (uint64_t)sqlite3_column_int64(st, 13),
			.started_at_us = sqlite3_column_int64(st, 14),
		};

		if ((rc = fn(ctx, &row)))
			break;
	}
	if (!rc && step != SQLITE_DONE)
		rc = -EIO;
	sqlite3_finalize(st);
	return rc;
}
