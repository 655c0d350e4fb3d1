/* Guarantee: a task given to the agent's kept threads (agent/workers.c)
 * never waits behind another (tasks that wait for each other all run at
 * once), threads are kept between tasks (no new thread for the next ones,
 * at most the set's keep idle), a task that lowers its thread's priority
 * leaves it at the process's for the next, and a forked child's sets start
 * empty and still run tasks. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/workers.h"
#include "selftests/unit/test.h"

#define ROUND 6
#define KEEP 4

static struct workers w = WORKERS_INIT(64 * 1024, KEEP);
static struct workers one = WORKERS_INIT(64 * 1024, 1);

static atomic_int started, finished, met;
static atomic_int tids[ROUND * 2];
static atomic_int nice_seen = -100, tid_a, tid_b;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Waits (5 s at most) until every task of its round has started. */
static void meet(void *arg)
{
	int i = (int)(long)arg, n = i < ROUND ? ROUND : KEEP;
	long long end = now_ms() + 5000;

	tids[i] = gettid();
	atomic_fetch_add(&started, 1);
	while (atomic_load(&started) < n && now_ms() < end)
		usleep(200);
	if (atomic_load(&started) >= n)
		atomic_fetch_add(&met, 1);
	atomic_fetch_add(&finished, 1);
}

static bool wait_for(atomic_int *v, int n)
{
	for (long long end = now_ms() + 10000; now_ms() < end; usleep(500))
		if (atomic_load(v) >= n)
			return true;
	return false;
}

static bool threads_settle(struct workers *s, unsigned n)
{
	for (long long end = now_ms() + 5000; now_ms() < end; usleep(1000))
		if (workers_threads(s) == n)
			return true;
	return false;
}

static void lower(void *arg)
{
	(void)arg;
	tid_a = gettid();
	setpriority(PRIO_PROCESS, 0, 10);
	atomic_fetch_add(&finished, 1);
}

static void look(void *arg)
{
	(void)arg;
	tid_b = gettid();
	errno = 0;
	nice_seen = getpriority(PRIO_PROCESS, 0);
	atomic_fetch_add(&finished, 1);
}

static void write_byte(void *arg)
{
	char b = 1;

	if (write((int)(long)arg, &b, 1) != 1)
		abort();
}

int main(void)
{
	bool reused = true;
	int p[2], st = -1, rc = 0;
	pid_t pid;

	for (long i = 0; i < ROUND; i++)
		rc |= workers_run(&w, meet, (void *)i);
	test_int(rc, 0, "each task was taken");
	wait_for(&finished, ROUND);
	test_int(atomic_load(&met), ROUND,
		 "six tasks that wait for each other all ran at once (none queued behind another)");
	test_report(threads_settle(&w, KEEP), "more threads stayed, or fewer",
		    "the idle threads past the set's keep (4) ended; 4 stayed (%u)",
		    workers_threads(&w));

	atomic_store(&started, 0);
	atomic_store(&finished, 0);
	atomic_store(&met, 0);
	for (long i = ROUND; i < ROUND + KEEP; i++)
		rc |= workers_run(&w, meet, (void *)i);
	wait_for(&finished, KEEP);
	test_int(atomic_load(&met), KEEP, "the next four tasks ran at once");
	for (int i = ROUND; i < ROUND + KEEP; i++) {
		bool seen = false;

		for (int j = 0; j < ROUND; j++)
			seen |= tids[j] == tids[i];
		reused &= seen;
	}
	test_report(reused, "a task ran in a thread made for it",
		    "they ran in threads kept from the first tasks");
	test_int(workers_threads(&w), KEEP, "no thread was made for them");

	atomic_store(&finished, 0);
	workers_run(&one, lower, NULL);
	wait_for(&finished, 1);
	threads_settle(&one, 1);
	usleep(20000); /* until it waits for the next task */
	workers_run(&one, look, NULL);
	wait_for(&finished, 2);
	test_int(tid_b, tid_a, "the second task ran in the thread of the first");
	test_int(nice_seen, 0, "a task that lowered its priority left the thread at the process's");

	if (pipe(p))
		return 1;
	pid = fork();
	if (pid == 0) {
		struct timespec half = {0, 500000000};
		char b;

		/* Its sets have no thread here: a task waiting for one of the
		 * parent's would never run. */
		if (workers_run(&w, write_byte, (void *)(long)p[1]))
			_exit(2);
		alarm(5);
		nanosleep(&half, NULL);
		_exit(read(p[0], &b, 1) == 1 ? 0 : 3);
	}
	if (pid > 0)
		waitpid(pid, &st, 0);
	test_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
		 "a forked child's task ran (its set started empty there)");
	test_int(workers_threads(&w), KEEP, "the parent's threads are still its own");
	return test_exit();
}
