/* Guarantee: a receipt's path is decoded, cut at any query, scrubbed of
 * stand-ins, escaped and at most 256 bytes; receipts.db keeps rows as added
 * and lists them by session in the order the calls were made, whatever order
 * their receipts were added in (a table of an older broker gains the column,
 * its rows first); brokers opening it at once, new or older, all open it;
 * methods are standard names only. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker/receipts.h"
#include "selftests/unit/test.h"

static void test_path(void)
{
	char out[RECEIPT_PATH_MAX + 1], raw[2048];

	receipt_path("/v1/messages?key=sk-1", out);
	CHECK_STR(out, "/v1/messages", "the query is cut");
	receipt_path("/a%20b/c%3Fd=1", out);
	CHECK_STR(out, "/a b/c", "decoded once, and cut at an encoded ?");
	receipt_path("/x/errand-session-0123abcd/y", out);
	CHECK_STR(out, "/x/[stand-in]/y", "a stand-in, even a cut one, is scrubbed");
	receipt_path("/x/errand-session-%30%31ff/y", out);
	CHECK_STR(out, "/x/[stand-in]/y", "an encoded stand-in too");
	receipt_path("/a%0d%0aInjected: 1\\", out);
	CHECK_STR(out, "/a\\x0d\\x0aInjected: 1\\x5c", "control characters and \\ escaped");
	receipt_path("/bad%zz%4", out);
	CHECK_STR(out, "/bad%zz%4", "a broken escape is kept as sent");
	memset(raw, 'a', sizeof(raw) - 1);
	raw[0] = '/';
	raw[sizeof(raw) - 1] = '\0';
	receipt_path(raw, out);
	CHECK_INT((long long)strlen(out), RECEIPT_PATH_MAX, "a long path is cut to 256 bytes");
	memset(raw, 0, sizeof(raw));
	for (int i = 0; i < 100; i++)
		strcat(raw, "%01");
	receipt_path(raw, out);
	CHECK_INT((long long)strlen(out) % 4, 0, "no escape is cut in half");
	CHECK_TRUE(strlen(out) <= RECEIPT_PATH_MAX, "escapes count toward 256");
	CHECK_STR(receipt_method("POST"), "POST", "a standard method is kept");
	CHECK_STR(receipt_method("post"), "OTHER", "another spelling is OTHER");
	CHECK_STR(receipt_method("FROB"), "OTHER", "an unknown method is OTHER");
}

struct seen {
	int n;
	char sessions[8][16];
	int status[8];
	int64_t started[8];
};

static int collect(void *ctx, const struct receipt *r)
{
	struct seen *s = ctx;

	if (s->n == 8)
		return 1;
	snprintf(s->sessions[s->n], sizeof(s->sessions[0]), "%s", r->session);
	s->started[s->n] = r->started_at_us;
	s->status[s->n++] = r->status;
	return 0;
}

/* A row of provider p; each test sets what it checks. */
static const struct receipt base = {.ended_at_ms = 1,
				    .session = "a",
				    .provider = "p",
				    .credential_var = "P_API_KEY",
				    .host = "api.example.com",
				    .method = "GET",
				    .path = "/x",
				    .outcome = RECEIPT_COMPLETED};

/* A scratch directory in dir (a mkdtemp template) and receipts.db's path in
 * it; false when it cannot be made. */
static bool scratch(char *dir, char *path, size_t len)
{
	if (!CHECK_TRUE(mkdtemp(dir) != NULL, "a scratch directory"))
		return false;
	snprintf(path, len, "%s/receipts.db", dir);
	return true;
}

static void scratch_remove(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0, "the scratch directory is removed");
}

static void test_db(void)
{
	char dir[] = "/tmp/errand-unit-receipts.XXXXXX", path[128];
	struct receipt r = base;
	struct receipts *db;
	struct seen s = {0};

	if (!scratch(dir, path, sizeof(path)))
		return;
	db = receipts_open(path, true);
	if (!CHECK_TRUE(db != NULL, "receipts.db is created"))
		return;
	/* added as a late receipt would be: the first call's last */
	r.session = "b";
	r.status = 401;
	r.outcome = RECEIPT_DENIED;
	r.started_at_us = 20;
	CHECK_INT(receipts_add(db, &r), 0, "a row is added");
	r.session = "a";
	r.status = 502;
	r.started_at_us = 30;
	CHECK_INT(receipts_add(db, &r), 0, "a second");
	r.session = "a";
	r.status = 200;
	r.started_at_us = 10;
	CHECK_INT(receipts_add(db, &r), 0, "a third");
	receipts_close(db);
	db = receipts_open(path, false);
	if (!CHECK_TRUE(db != NULL, "receipts.db opens read-only"))
		return;
	CHECK_INT(receipts_list(db, "a", collect, &s), 0, "session a's rows are listed");
	CHECK_INT(s.n, 2, "two of them");
	CHECK_INT(s.status[0] * 1000 + s.status[1], 200502,
		  "in the order the calls were made, not the receipts added");
	CHECK_INT(s.started[0] * 1000 + s.started[1], 10030, "each with its call's stamp");
	s.n = 0;
	CHECK_INT(receipts_list(db, NULL, collect, &s), 0, "all rows are listed");
	CHECK_INT(s.n, 3, "three of them");
	CHECK_STR(s.sessions[1], "b", "every session's, in the order the calls were made");
	CHECK_STR(receipt_outcome_name(RECEIPT_UNREACHABLE), "upstream-unreachable",
		  "the outcome's name");
	receipts_close(db);
	scratch_remove(dir);
}

/* receipts.db as a broker before started_at_us made it, with two rows. */
static bool make_older(const char *path)
{
	sqlite3 *old;
	bool ok;

	if (sqlite3_open(path, &old) != SQLITE_OK)
		return false;
	ok = sqlite3_exec(old,
			  "CREATE TABLE receipts (id INTEGER PRIMARY KEY, ended_at_ms INTEGER "
			  "NOT NULL, session TEXT NOT NULL, provider TEXT NOT NULL, "
			  "credential_var TEXT NOT NULL, host TEXT NOT NULL, method TEXT NOT "
			  "NULL, path TEXT NOT NULL, query_len INTEGER NOT NULL, status "
			  "INTEGER NOT NULL, duration_ms INTEGER NOT NULL, bytes_up INTEGER "
			  "NOT NULL, bytes_down INTEGER NOT NULL, outcome TEXT NOT NULL, "
			  "unrecorded INTEGER NOT NULL);"
			  "INSERT INTO receipts VALUES (1, 1, 'a', 'p', 'P', 'h', 'GET', '/', 0, "
			  "401, 0, 0, 0, 'denied', 0), (2, 1, 'a', 'p', 'P', 'h', 'GET', '/', 0, "
			  "200, 0, 0, 0, 'completed', 0)",
			  NULL, NULL, NULL) == SQLITE_OK;
	sqlite3_close(old);
	return ok;
}

static void test_older_table(void)
{
	char dir[] = "/tmp/errand-unit-receipts.XXXXXX", path[128];
	struct receipt r = base;
	struct receipts *db;
	struct seen s = {0};

	if (!scratch(dir, path, sizeof(path)))
		return;
	CHECK_TRUE(make_older(path),
		   "an older receipts.db, with the table of the time and two rows");
	r.status = 204;
	r.started_at_us = 5;
	db = receipts_open(path, false);
	if (!CHECK_TRUE(db != NULL, "errandctl opens it read-only"))
		return;
	CHECK_INT(receipts_list(db, NULL, collect, &s), 0, "and lists it");
	CHECK_INT(s.n * 1000000 + s.status[0] * 1000 + s.status[1], 2401200,
		  "in the order its rows were added");
	receipts_close(db);
	db = receipts_open(path, true);
	if (!CHECK_TRUE(db != NULL, "a broker opens it"))
		return;
	CHECK_INT(receipts_add(db, &r), 0, "and adds a row");
	receipts_close(db);
	db = receipts_open(path, false);
	if (!CHECK_TRUE(db != NULL, "it opens read-only again"))
		return;
	s.n = 0;
	CHECK_INT(receipts_list(db, NULL, collect, &s), 0, "and lists");
	CHECK_INT(s.n, 3, "three rows");
	CHECK_INT(s.status[0] * 1000000 + s.status[1] * 1000 + s.status[2], 401200204,
		  "the older rows first, as added, then the new");
	CHECK_INT(s.started[0] + s.started[1] * 10 + s.started[2] * 100, 500,
		  "the older rows with no stamp, the new with its own");
	receipts_close(db);
	scratch_remove(dir);
}

/* Every session's broker opens receipts.db: eight at once, released
 * together, on an older one five times over and on none three times, each
 * open without fail. */
static void test_older_at_once(void)
{
	char dir[] = "/tmp/errand-unit-receipts.XXXXXX", path[128];
	int failed = 0;

	if (!scratch(dir, path, sizeof(path)))
		return;
	for (int round = 0; round < 8; round++) {
		int gate[2], st;

		unlink(path);
		if ((round < 5 && !make_older(path)) || pipe(gate))
			return;
		for (int i = 0; i < 8; i++)
			if (fork() == 0) {
				struct receipts *db;
				char c;

				close(gate[1]);
				(void)!read(gate[0], &c, 1); /* until the gate closes */
				db = receipts_open(path, true);
				receipts_close(db);
				_exit(db ? 0 : 1);
			}
		close(gate[0]);
		close(gate[1]);
		while (wait(&st) > 0)
			failed += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	CHECK_INT(failed, 0,
		  "eight brokers opening receipts.db at once, older or new, all open it");
	scratch_remove(dir);
}

int main(void)
{
	test_path();
	test_db();
	test_older_table();
	test_older_at_once();
	return test_exit();
}
