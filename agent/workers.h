/* Threads kept for the agent's short work (loop jobs, map-in-map updates):
 * a set of them, made as work needs them and kept waiting for more instead
 * of ending with each piece of it. */
#ifndef ERRAND_AGENT_WORKERS_H
#define ERRAND_AGENT_WORKERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct workers_task;

/* Statically made (WORKERS_INIT) and kept for the process's life: its
 * threads wait in it between tasks. Fields are workers.c's own. */
struct workers {
	pthread_mutex_t mu;
	pthread_cond_t more; /* a task was queued */
	struct workers_task *head, *tail;
	unsigned queued;	  /* tasks no thread has taken yet */
	unsigned idle;		  /* threads waiting for one */
	unsigned threads;	  /* threads of this set alive */
	unsigned keep;		  /* idle threads kept at most; more end */
	size_t stack;		  /* each thread's stack; 0: glibc's default */
	struct workers *next_set; /* every set used, for fork */
	bool known;
};

#define WORKERS_INIT(stack_, keep_)                                                                \
	{                                                                                          \
		.mu = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER,                 \
		.keep = (keep_), .stack = (stack_)                                                 \
	}

/* Runs fn(arg) in a thread of the set: one waiting if there is one, else a
 * new one, so a task never waits behind another. The thread runs at the
 * process's priority again after fn (a task may lower its own). 0, or
 * -errno if no thread could take it (fn was not run). */
int workers_run(struct workers *w, void (*fn)(void *arg), void *arg);

/* The set's threads alive now, waiting or working (for tests). */
unsigned workers_threads(struct workers *w);

#endif
