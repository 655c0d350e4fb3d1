/* A session's disk budget (sandbox.limits.disk), measured, not enforced by a
 * filesystem: what the session's writable directories grew by since it
 * started, checked at a pace set by how close it is to the budget and by
 * what a measurement costs. */
#ifndef ERRAND_DISK_H
#define ERRAND_DISK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* How deep below its top a walk goes: a directory of the session's deeper
 * than this counts as past the budget. */
#define DISK_DEPTH_MAX 256

/* Bytes allocated below path (st_blocks), not following links nor crossing
 * onto another filesystem. 0 or -errno, -ELOOP when a directory lies deeper
 * than DISK_DEPTH_MAX; what could be read is counted. */
int disk_usage(const char *path, uint64_t *bytes);

struct disk_watch {
	char *paths[2];	   /* the project's and the state directory's, copies */
	uint64_t budget;   /* bytes; 0: none */
	uint64_t baseline; /* usage when the session started */
	uint64_t used;	   /* growth at the last measurement */
	bool deep;	   /* a directory lies deeper than errand measures */
	uint64_t next_ns;  /* CLOCK_BOOTTIME of the next measurement */
	uint64_t last_ns;  /* of the last one */
	/* The walks run in a thread of their own, never on the agent's loop:
	 * it writes efd once the budget is passed, and ends. */
	pthread_t thread;
	bool running;
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
};

/* Takes the baseline and starts the watching thread when there is a budget.
 * 0 or -errno. */
int disk_watch_start(struct disk_watch *w, const char *project, const char *state, uint64_t budget);
/* Readable once the session is past its budget; -1: no budget. */
int disk_watch_fd(const struct disk_watch *w);
/* After disk_watch_fd was readable: 1 when the session is past its budget
 * (used says by how much), else 0. */
int disk_watch_check(struct disk_watch *w);
/* Ends the thread (a walk under way finishes first). Safe on a watch never
 * started, and twice. */
void disk_watch_stop(struct disk_watch *w);

#endif
