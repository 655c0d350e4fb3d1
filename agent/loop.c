/* epoll with one handler per descriptor, hooks once a turn, and job threads
 * that report back through a pipe (see loop.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/events.h"
#include "agent/loop.h"
#include "agent/workers.h"
#include "lib/log.h"

#define LOOP_BATCH 64

struct handler {
	loop_fn fn; /* NULL: none */
	void *arg;
	uint32_t gen; /* which registration of fd an event belongs to */
};

struct hook {
	loop_prepare_fn prepare;
	loop_check_fn check;
	loop_lazy_fn lazy; /* instead of both */
	void *arg;
	uint64_t due_ns; /* lazy: when it runs without a wake */
	bool woken;
	bool dead;
};

struct loop {
	int epfd;
	struct handler *h; /* indexed by fd, grown as needed */
	size_t n_h;
	uint32_t gen;
	struct hook *hooks;
	size_t n_hooks, cap_hooks;
	bool in_hooks;
	unsigned jobs;
};

struct job {
	struct loop *l;
	void (*work)(void *);
	void (*done)(void *);
	void *arg;
	int pipe[2];
};

/* Job threads kept between jobs: a start, its refill and its teardown are
 * three, and a thread made for each cost more than some of them. */
#define LOOP_JOB_THREADS_KEPT 8
static struct workers job_workers = WORKERS_INIT(0, LOOP_JOB_THREADS_KEPT);

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l->h);
	free(l->hooks);
	free(l);
}

int loop_add(struct loop *l, int fd, uint32_t events, loop_fn fn, void *arg)
{
	struct epoll_event ev = {.events = events};

	if (fd < 0)
		return -EBADF;
	if ((size_t)fd >= l->n_h) {
		size_t n = (size_t)fd * 2 + 16;
		struct handler *h = realloc(l->h, n * sizeof(*h));

		if (!h)
			return -ENOMEM;
		memset(h + l->n_h, 0, (n - l->n_h) * sizeof(*h));
		l->h = h;
		l->n_h = n;
	}
	if (l->h[fd].fn)
		return -EEXIST;
	l->gen++;
	ev.data.u64 = (uint64_t)l->gen << 32 | (uint32_t)fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	l->h[fd] = (struct handler){.fn = fn, .arg = arg, .gen = l->gen};
	return 0;
}

int loop_mod(struct loop *l, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events};

	if (fd < 0 || (size_t)fd >= l->n_h || !l->h[fd].fn)
		return -ENOENT;
	ev.data.u64 = (uint64_t)l->h[fd].gen << 32 | (uint32_t)fd;
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) ? -errno : 0;
}

void loop_del(struct loop *l, int fd)
{
	if (fd < 0 || (size_t)fd >= l->n_h || !l->h[fd].fn)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->h[fd] = (struct handler){};
}

int loop_hook_add(struct loop *l, loop_prepare_fn prepare, loop_check_fn check, void *arg)
{
	if (l->n_hooks == l->cap_hooks) {
		size_t n = l->cap_hooks ? l->cap_hooks * 2 : 16;
		struct hook *h = realloc(l->hooks, n * sizeof(*h));

		if (!h)
			return -ENOMEM;
		l->hooks = h;
		l->cap_hooks = n;
	}
	l->hooks[l->n_hooks++] = (struct hook){.prepare = prepare, .check = check, .arg = arg};
	return 0;
}

int loop_hook_add_lazy(struct loop *l, loop_lazy_fn check, void *arg)
{
	int rc = loop_hook_add(l, NULL, NULL, arg);

	if (rc)
		return rc;
	l->hooks[l->n_hooks - 1].lazy = check;
	l->hooks[l->n_hooks - 1].woken = true;
	return 0;
}

void loop_hook_wake(struct loop *l, void *arg)
{
	for (size_t i = 0; i < l->n_hooks; i++)
		if (l->hooks[i].arg == arg && l->hooks[i].lazy)
			l->hooks[i].woken = true;
}

void loop_hook_del(struct loop *l, void *arg)
{
	for (size_t i = 0; i < l->n_hooks; i++)
		if (l->hooks[i].arg == arg)
			l->hooks[i].dead = true;
}

/* Hooks deleted while the hooks ran are removed once they are done. */
static void hooks_compact(struct loop *l)
{
	size_t k = 0;

	for (size_t i = 0; i < l->n_hooks; i++)
		if (!l->hooks[i].dead)
			l->hooks[k++] = l->hooks[i];
	l->n_hooks = k;
}

int loop_once(struct loop *l, int max_ms)
{
	struct epoll_event ev[LOOP_BATCH];
	int timeout = max_ms, n;

	uint64_t now = boottime_ns();

	hooks_compact(l);
	for (size_t i = 0; i < l->n_hooks; i++) {
		const struct hook *k = &l->hooks[i];

		if (k->dead)
			continue;
		if (k->prepare) {
			k->prepare(k->arg, &timeout);
		} else if (k->lazy && (k->woken || k->due_ns <= now)) {
			timeout = 0;
		} else if (k->lazy && k->due_ns != UINT64_MAX) {
			uint64_t ms = (k->due_ns - now) / 1000000ull + 1;

			if (timeout < 0 || ms < (uint64_t)timeout)
				timeout = (int)ms;
		}
	}
	n = epoll_wait(l->epfd, ev, LOOP_BATCH, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)ev[i].data.u64;
		uint32_t gen = (uint32_t)(ev[i].data.u64 >> 32);
		struct handler h;

		if ((size_t)fd >= l->n_h || !l->h[fd].fn || l->h[fd].gen != gen)
			continue; /* deleted by an earlier handler of this turn */
		h = l->h[fd];
		h.fn(h.arg, fd, ev[i].events);
	}
	/* Hooks added in this turn's handlers run from here too. A check may
	 * add hooks (the array moves) or delete them. */
	now = boottime_ns();
	for (size_t i = 0; i < l->n_hooks; i++) {
		uint64_t due;

		if (l->hooks[i].dead)
			continue;
		if (l->hooks[i].check) {
			l->hooks[i].check(l->hooks[i].arg);
			continue;
		}
		if (!l->hooks[i].lazy || (!l->hooks[i].woken && l->hooks[i].due_ns > now))
			continue;
		l->hooks[i].woken = false;
		due = l->hooks[i].lazy(l->hooks[i].arg, now);
		l->hooks[i].due_ns = due;
	}
	hooks_compact(l);
	return 0;
}

static void job_run(void *arg)
{
	struct job *j = arg;
	char b = 1;

	j->work(j->arg);
	/* Once this byte is written the job is the loop's: nothing here
	 * touches it after. */
	while (write(j->pipe[1], &b, 1) < 0 && errno == EINTR)
		;
}

static void job_done(void *arg, int fd, uint32_t events)
{
	struct job *j = arg;
	char b;

	(void)events;
	if (read(fd, &b, 1) != 1 && errno == EAGAIN)
		return;
	loop_del(j->l, fd);
	close(j->pipe[0]);
	close(j->pipe[1]);
	j->l->jobs--;
	j->done(j->arg);
	free(j);
}

int loop_job(struct loop *l, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -ENOMEM;
	*j = (struct job){.l = l, .work = work, .done = done, .arg = arg};
	if (pipe2(j->pipe, O_CLOEXEC | O_NONBLOCK)) {
		rc = -errno;
		free(j);
		return rc;
	}
	if ((rc = loop_add(l, j->pipe[0], EPOLLIN, job_done, j)) ||
	    (rc = workers_run(&job_workers, job_run, j))) {
		loop_del(l, j->pipe[0]);
		close(j->pipe[0]);
		close(j->pipe[1]);
		free(j);
		return rc;
	}
	l->jobs++;
	return 0;
}

unsigned loop_jobs(const struct loop *l)
{
	return l->jobs;
}
