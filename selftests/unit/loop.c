/* Guarantee: the agent's loop serves any number of descriptors (no fixed
 * table: 2000 pipes at once), never delivers an event to a handler deleted
 * earlier in the same turn nor to a new descriptor that took a deleted one's
 * number, and a job's done runs on the loop, once, after its work; hooks
 * deleted while hooks run are not called again; a lazy hook (one a session)
 * runs only when woken or when its due time came, which the loop waits
 * for. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/loop.h"
#include "selftests/unit/test.h"

#define MANY 2000

static int seen[MANY];
static struct loop *L;

static void count_fd(void *arg, int fd, uint32_t events)
{
	char b[8];

	(void)events;
	(void)fd;
	seen[(long)arg]++;
	if (read(fd, b, sizeof(b)) < 0)
		seen[(long)arg] += 1000;
}

static void test_many(void)
{
	static int p[MANY][2];
	struct rlimit rl = {MANY * 2 + 64, MANY * 2 + 64};
	int ok = 0, total = 0;

	setrlimit(RLIMIT_NOFILE, &rl);
	for (long i = 0; i < MANY; i++) {
		if (pipe2(p[i], O_NONBLOCK | O_CLOEXEC))
			break;
		ok += loop_add(L, p[i][0], EPOLLIN, count_fd, (void *)i) == 0;
		if (write(p[i][1], "x", 1) != 1)
			break;
	}
	CHECK_INT(ok, MANY, "2000 descriptors registered");
	for (int t = 0; t < 100; t++)
		loop_once(L, 0);
	for (int i = 0; i < MANY; i++)
		total += seen[i] == 1;
	CHECK_INT(total, MANY, "each served once");
	for (int i = 0; i < MANY; i++) {
		loop_del(L, p[i][0]);
		close(p[i][0]);
		close(p[i][1]);
	}
}

/* Two ready pipes; the first handler to run deletes and closes the other
 * and opens a new pipe in its place (the same number), ready too. */
static int a_fd[2], b_fd[2], c_fd[2];
static int a_calls, b_calls, c_calls;

static void on_c(void *arg, int fd, uint32_t events)
{
	(void)arg;
	(void)fd;
	(void)events;
	c_calls++;
}

static void on_ab(void *arg, int fd, uint32_t events)
{
	int *other = arg == a_fd ? b_fd : a_fd;
	int n;

	(void)events;
	(void)fd;
	if (arg == a_fd)
		a_calls++;
	else
		b_calls++;
	if (a_calls + b_calls > 1)
		return;
	n = other[0];
	loop_del(L, n);
	close(other[0]);
	close(other[1]);
	if (pipe2(c_fd, O_NONBLOCK | O_CLOEXEC) || write(c_fd[1], "y", 1) != 1)
		return;
	/* The lowest free number: the one just closed. */
	CHECK_INT(c_fd[0], n, "the new pipe took the deleted one's number");
	loop_add(L, c_fd[0], EPOLLIN | EPOLLET, on_c, NULL);
	other[0] = other[1] = -1;
}

static void test_stale(void)
{
	if (pipe2(a_fd, O_NONBLOCK | O_CLOEXEC) || pipe2(b_fd, O_NONBLOCK | O_CLOEXEC))
		return;
	loop_add(L, a_fd[0], EPOLLIN | EPOLLET, on_ab, a_fd);
	loop_add(L, b_fd[0], EPOLLIN | EPOLLET, on_ab, b_fd);
	if (write(a_fd[1], "x", 1) != 1 || write(b_fd[1], "x", 1) != 1)
		return;
	loop_once(L, 100);
	CHECK_INT(a_calls + b_calls, 1, "the deleted handler got no event of the turn");
	CHECK_INT(c_calls, 0, "nor did the new descriptor in its place");
	loop_once(L, 100);
	CHECK_INT(c_calls, 1, "the new descriptor's own event comes next turn");
	for (int *f = a_fd[0] >= 0 ? a_fd : b_fd; f; f = NULL) {
		loop_del(L, f[0]);
		close(f[0]);
		close(f[1]);
	}
	loop_del(L, c_fd[0]);
	close(c_fd[0]);
	close(c_fd[1]);
}

static int work_done, done_calls, done_saw_work;

static void work(void *arg)
{
	usleep(50000);
	*(int *)arg = 1;
}

static void done(void *arg)
{
	done_calls++;
	done_saw_work = *(int *)arg;
}

static void test_job(void)
{
	int t = 0;

	CHECK_INT(loop_job(L, work, done, &work_done), 0, "a job starts");
	CHECK_INT(loop_jobs(L), 1, "one job runs");
	while (loop_jobs(L) && t++ < 100)
		loop_once(L, 100);
	CHECK_INT(done_calls, 1, "its done ran once, on the loop");
	CHECK_INT(done_saw_work, 1, "after its work");
	CHECK_INT(loop_jobs(L), 0, "no job left");
}

static int hook_calls;

static void hook_check(void *arg)
{
	(void)arg;
	hook_calls++;
	loop_hook_del(L, &hook_calls);
}

static void test_hooks(void)
{
	loop_hook_add(L, NULL, hook_check, &hook_calls);
	loop_once(L, 0);
	loop_once(L, 0);
	CHECK_INT(hook_calls, 1, "a hook that deletes itself runs once");
}

#define LAZY_N 1000
static int lazy_calls[LAZY_N];
static int lazy_in_ms[LAZY_N]; /* when it is due next: -1 only when woken */

static uint64_t lazy_check(void *arg, uint64_t now)
{
	int i = (int)((int *)arg - lazy_calls);

	lazy_calls[i]++;
	return lazy_in_ms[i] < 0 ? UINT64_MAX : now + (uint64_t)lazy_in_ms[i] * 1000000ull;
}

static void lazy_wake(void *arg, int fd, uint32_t events)
{
	char b;

	(void)arg;
	(void)events;
	if (read(fd, &b, 1) == 1)
		loop_hook_wake(L, &lazy_calls[b == 'a' ? 500 : 7]);
}

static int sum(void)
{
	int t = 0;

	for (int i = 0; i < LAZY_N; i++)
		t += lazy_calls[i];
	return t;
}

static void test_lazy(void)
{
	int p[2];
	char b = 'a';

	for (int i = 0; i < LAZY_N; i++) {
		lazy_in_ms[i] = -1;
		if (loop_hook_add_lazy(L, lazy_check, &lazy_calls[i]))
			break;
	}
	if (!CHECK_TRUE(pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0, "a pipe"))
		return;
	loop_add(L, p[0], EPOLLIN, lazy_wake, NULL);
	loop_once(L, 0);
	CHECK_INT(sum(), LAZY_N, "each lazy hook runs once in the turn it is added in");
	for (int i = 0; i < 5; i++)
		loop_once(L, 0);
	CHECK_INT(sum(), LAZY_N, "idle lazy hooks do not run in later turns");
	if (write(p[1], &b, 1) != 1)
		return;
	loop_once(L, 100);
	CHECK_INT(lazy_calls[500], 2, "a hook woken by a handler runs in that turn ...");
	CHECK_INT(sum(), LAZY_N + 1, "... and no other");
	/* Due at once: it runs next turn unwoken. */
	lazy_in_ms[7] = 0;
	b = 'b';
	if (write(p[1], &b, 1) != 1)
		return;
	loop_once(L, 100);
	CHECK_INT(lazy_calls[7], 2, "woken once more");
	lazy_in_ms[7] = -1;
	loop_once(L, 0);
	CHECK_INT(lazy_calls[7], 3, "a hook due now runs again next turn, unwoken");
	/* Due in 2 s: with no event and no limit, the loop waits for it. */
	lazy_in_ms[7] = 2000;
	if (write(p[1], &b, 1) != 1)
		return;
	loop_once(L, 100);
	CHECK_INT(lazy_calls[7], 4, "woken again, due in 2 s");
	lazy_in_ms[7] = -1;
	loop_once(L, 0);
	CHECK_INT(lazy_calls[7], 4, "not before it is due");
	alarm(20); /* a loop that ignored the due time would wait for ever */
	loop_once(L, -1);
	alarm(0);
	CHECK_INT(lazy_calls[7], 5, "with no limit, the loop waits until the hook is due");
	loop_del(L, p[0]);
	close(p[0]);
	close(p[1]);
	for (int i = 0; i < LAZY_N; i++)
		loop_hook_del(L, &lazy_calls[i]);
	loop_once(L, 0);
	CHECK_INT(sum(), LAZY_N + 5, "deleted lazy hooks run no more");
}

int main(void)
{
	L = loop_new();
	if (!CHECK_TRUE(L != NULL, "a loop"))
		return test_exit();
	test_many();
	test_stale();
	test_job();
	test_hooks();
	test_lazy();
	loop_free(L);
	return test_exit();
}
