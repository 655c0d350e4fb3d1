/* Receipts queued by the calls' threads and written by one thread of its own
 * (see journal.h). A failed write loses the batch's receipts, and says so. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker/blog.h"
#include "broker/journal.h"

#define QUEUE_MAX 1024
#define GATHER_US 20000 /* a batch gathers this long: one transaction, not one a call */

/* A receipt with its strings held here. */
struct entry {
	struct receipt r;
	char strs[6][RECEIPT_PATH_MAX + 1];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct entry *queue; /* QUEUE_MAX entries, filled from 0 */
static size_t queued;
static bool stopping;
static bool writer_idle; /* waiting on wake: the next add signals it */
static pthread_t writer;
static struct receipts *db;

/* Points a receipt's strings at its entry's copies. */
static void entry_own(struct entry *e)
{
	const char **f[6] = {&e->r.session, &e->r.provider, &e->r.credential_var,
			     &e->r.host,    &e->r.method,   &e->r.path};

	for (int i = 0; i < 6; i++)
		*f[i] = e->strs[i];
}

static void batch_write(struct entry *batch, size_t n)
{
	struct receipt *rows = malloc(n * sizeof(*rows));

	for (size_t i = 0; rows && i < n; i++)
		rows[i] = batch[i].r;
	if (!db || !rows || receipts_add_all(db, rows, n))
		blog_warnx("%zu receipt%s cannot be written to receipts.db; the calls went on", n,
			   n == 1 ? "" : "s");
	free(rows);
}

static void *writer_main(void *arg)
{
	struct entry *batch = arg;

	pthread_mutex_lock(&lock);
	for (;;) {
		size_t n;

		while (!queued && !stopping) {
			writer_idle = true;
			pthread_cond_wait(&wake, &lock);
			writer_idle = false;
		}
		if (!queued && stopping)
			break;
		if (!stopping) {
			pthread_mutex_unlock(&lock);
			usleep(GATHER_US);
			pthread_mutex_lock(&lock);
		}
		n = queued;
		memcpy(batch, queue, n * sizeof(*batch));
		/* The copies' strings are the batch's own: the queue's are written
		 * again by the next add, as soon as the lock goes. */
		for (size_t i = 0; i < n; i++)
			entry_own(&batch[i]);
		queued = 0;
		pthread_mutex_unlock(&lock);
		batch_write(batch, n);
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	free(batch);
	return NULL;
}

int journal_start(struct receipts *r)
{
	struct entry *batch;
	int rc;

	db = r;
	queue = calloc(QUEUE_MAX, sizeof(*queue));
	batch = calloc(QUEUE_MAX, sizeof(*batch));
	if (!queue || !batch) {
		free(batch);
		return -ENOMEM;
	}
	rc = pthread_create(&writer, NULL, writer_main, batch);
	if (rc)
		free(batch);
	return -rc;
}

static void keep(struct entry *e, int i, const char *s)
{
	snprintf(e->strs[i], sizeof(e->strs[i]), "%s", s ? s : "");
}

void journal_add(const struct receipt *rc)
{
	struct entry *e;

	pthread_mutex_lock(&lock);
	if (queued == QUEUE_MAX) {
		pthread_mutex_unlock(&lock);
		blog_warnx("session=%s: a receipt cannot be queued (receipts.db is behind); the "
			   "call went on",
			   rc->session);
		return;
	}
	e = &queue[queued++];
	e->r = *rc;
	keep(e, 0, rc->session);
	keep(e, 1, rc->provider);
	keep(e, 2, rc->credential_var);
	keep(e, 3, rc->host);
	keep(e, 4, receipt_method(rc->method));
	keep(e, 5, rc->path);
	entry_own(e);
	if (writer_idle)
		pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
}

int64_t journal_stamp(void)
{
	static _Atomic int64_t last;
	struct timespec ts;
	int64_t now, prev = atomic_load(&last), next;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	do
		next = now > prev ? now : prev + 1;
	while (!atomic_compare_exchange_weak(&last, &prev, next));
	return next;
}

void journal_stop(void)
{
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	pthread_join(writer, NULL);
}
