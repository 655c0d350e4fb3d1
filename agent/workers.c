/* Threads kept for short work. Making a thread and ending it costs a kernel
 * stack, the faults of its first touches of its own stack and, at its end,
 * glibc's madvise of that stack, which interrupts every CPU to flush it: on
 * a virtual machine more than the one system call an op thread makes. A
 * start, its pool refill and its teardown used to make 28 threads. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/workers.h"

struct workers_task {
	void (*fn)(void *arg);
	void *arg;
	struct workers_task *next;
};

/* Every set that has made a thread, so a fork can set them right in the
 * child, which has none of their threads. */
static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;
static struct workers *sets;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&sets_mu);
	for (struct workers *w = sets; w; w = w->next_set)
		pthread_mutex_lock(&w->mu);
}

static void fork_parent(void)
{
	for (struct workers *w = sets; w; w = w->next_set)
		pthread_mutex_unlock(&w->mu);
	pthread_mutex_unlock(&sets_mu);
}

/* The child has only the forking thread: no set has a thread there, and the
 * tasks queued are the parent's to run. */
static void fork_child(void)
{
	for (struct workers *w = sets; w; w = w->next_set) {
		pthread_mutex_unlock(&w->mu);
		pthread_cond_init(&w->more, NULL);
		w->head = w->tail = NULL;
		w->queued = w->idle = w->threads = 0;
	}
	pthread_mutex_unlock(&sets_mu);
}

static void atfork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void set_known(struct workers *w)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&sets_mu);
	if (!w->known) {
		w->known = true;
		w->next_set = sets;
		sets = w;
	}
	pthread_mutex_unlock(&sets_mu);
}

/* The process's priority (its first thread's), which a task may have left
 * lowered for the thread. */
static int process_nice(void)
{
	int n;

	errno = 0;
	n = getpriority(PRIO_PROCESS, (id_t)getpid());
	return errno ? 0 : n;
}

static void *worker_main(void *arg)
{
	struct workers *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct workers_task *t = w->head;

		if (t) {
			void (*fn)(void *) = t->fn;
			void *fn_arg = t->arg;
			int nice;

			w->head = t->next;
			if (!w->head)
				w->tail = NULL;
			w->queued--;
			pthread_mutex_unlock(&w->mu);
			free(t);
			fn(fn_arg);
			/* A thread that cannot get its priority back ends, so no
			 * start runs at a refill's. */
			nice = process_nice();
			if (getpriority(PRIO_PROCESS, 0) != nice &&
			    setpriority(PRIO_PROCESS, 0, nice)) {
				pthread_mutex_lock(&w->mu);
				break;
			}
			pthread_mutex_lock(&w->mu);
			continue;
		}
		if (w->idle >= w->keep)
			break;
		w->idle++;
		pthread_cond_wait(&w->more, &w->mu);
		w->idle--;
	}
	w->threads--;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int thread_start(struct workers *w)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if ((rc = pthread_attr_init(&attr)))
		return -rc;
	rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!rc && w->stack)
		rc = pthread_attr_setstacksize(&attr, w->stack);
	if (!rc)
		rc = pthread_create(&t, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	return -rc;
}

int workers_run(struct workers *w, void (*fn)(void *arg), void *arg)
{
	struct workers_task *t = malloc(sizeof(*t));
	int rc = 0;

	if (!t)
		return -ENOMEM;
	*t = (struct workers_task){.fn = fn, .arg = arg};
	if (!w->known)
		set_known(w);
	pthread_mutex_lock(&w->mu);
	/* Every waiting thread already has a task of the queue to take: one
	 * more thread, made before the task is queued so a failure leaves
	 * nothing behind. It takes a task once the lock is let go. */
	if (w->queued >= w->idle) {
		if ((rc = thread_start(w))) {
			pthread_mutex_unlock(&w->mu);
			free(t);
			return rc;
		}
		w->threads++;
	}
	if (w->tail)
		w->tail->next = t;
	else
		w->head = t;
	w->tail = t;
	w->queued++;
	pthread_cond_signal(&w->more);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

unsigned workers_threads(struct workers *w)
{
	unsigned n;

	pthread_mutex_lock(&w->mu);
	n = w->threads;
	pthread_mutex_unlock(&w->mu);
	return n;
}
