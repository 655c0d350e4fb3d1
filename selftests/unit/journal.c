/* Guarantee: every receipt queued with the broker's receipt writer reaches
 * receipts.db with its own strings (session, host, method, path), however
 * many are queued while a batch is being written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/journal.h"
#include "broker/receipts.h"
#include "selftests/unit/test.h"

#define RECEIPTS 3000

struct seen {
	unsigned char *path; /* how many rows name each path /n */
	int rows, mismatched;
};

static int collect(void *ctx, const struct receipt *r)
{
	struct seen *s = ctx;
	char host[64];
	int n;

	s->rows++;
	if (sscanf(r->path, "/%d", &n) != 1 || n < 0 || n >= RECEIPTS) {
		s->mismatched++;
		return 0;
	}
	s->path[n]++;
	/* Each receipt's host and session carry its number too. */
	snprintf(host, sizeof(host), "h%d.test", n);
	if (strcmp(r->host, host) || atoi(r->session) != n)
		s->mismatched++;
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/errand-unit-journal.XXXXXX", path[128], cmd[160];
	struct seen s = {.path = calloc(RECEIPTS, 1)};
	struct receipts *db;
	int missing = 0;

	if (!CHECK_TRUE(mkdtemp(dir) != NULL, "a scratch directory"))
		return test_exit();
	snprintf(path, sizeof(path), "%s/receipts.db", dir);
	db = receipts_open(path, true);
	if (!CHECK_TRUE(db != NULL, "receipts.db is created") ||
	    !CHECK_INT(journal_start(db), 0, "the writer starts"))
		return test_exit();
	/* Queued as calls end: a few at a time, so most arrive while a batch
	 * is being written. */
	for (int i = 0; i < RECEIPTS; i++) {
		char session[16], host[64], p[32];
		struct receipt r = {.ended_at_ms = 1,
				    .started_at_us = journal_stamp(),
				    .session = session,
				    .provider = "p",
				    .credential_var = "P_API_KEY",
				    .host = host,
				    .method = "GET",
				    .path = p,
				    .outcome = RECEIPT_COMPLETED};

		snprintf(session, sizeof(session), "%08d", i);
		snprintf(host, sizeof(host), "h%d.test", i);
		snprintf(p, sizeof(p), "/%d", i);
		journal_add(&r);
		if (i % 8 == 7)
			usleep(200);
	}
	journal_stop();
	receipts_close(db);
	db = receipts_open(path, false);
	if (!CHECK_TRUE(db != NULL, "receipts.db opens read-only"))
		return test_exit();
	CHECK_INT(receipts_list(db, NULL, collect, &s), 0, "the rows are listed");
	for (int i = 0; i < RECEIPTS; i++)
		missing += s.path[i] != 1;
	CHECK_INT(s.rows, RECEIPTS, "a row for each receipt queued");
	CHECK_INT(missing, 0, "each receipt's path once, none twice, none missing");
	CHECK_INT(s.mismatched, 0, "each row's host and session its own path's");
	receipts_close(db);
	free(s.path);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0, "the scratch directory is removed");
	return test_exit();
}
