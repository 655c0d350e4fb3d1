/* Measuring a session's disk use against its budget (see disk.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/disk.h"
#include "agent/events.h"

#define NS_PER_MS 1000000ull

/* Iterative over an explicit stack of directory streams, so a hostile tree
 * can neither exhaust errand's stack nor lead it out through a link. */
int disk_usage(const char *path, uint64_t *bytes)
{
	DIR *stack[DISK_DEPTH_MAX];
	struct stat st;
	int depth = 0, fd, err = 0;
	uint64_t total = 0;
	bool deep = false;
	dev_t dev;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	dev = st.st_dev;
	total += (uint64_t)st.st_blocks * 512;
	stack[depth] = fdopendir(fd);
	if (!stack[depth]) {
		close(fd);
		return -errno;
	}
	depth++;
	while (depth > 0) {
		DIR *d = stack[depth - 1];
		struct dirent *de = readdir(d);
		int sub;

		if (!de) {
			closedir(d);
			depth--;
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			err = err ? err : -errno;
			continue;
		}
		if (st.st_dev != dev)
			continue;
		total += (uint64_t)st.st_blocks * 512;
		if (!S_ISDIR(st.st_mode))
			continue;
		if (depth == DISK_DEPTH_MAX) {
			deep = true; /* what is below it is not counted */
			continue;
		}
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		stack[depth] = fdopendir(sub);
		if (!stack[depth]) {
			close(sub);
			continue;
		}
		depth++;
	}
	*bytes = total;
	if (deep)
		return -ELOOP;
	return err == -ENOENT ? 0 : err; /* files vanish while a session works */
}

/* What the paths hold, each counted as far as its walk got; deep when a
 * directory lies deeper than the walk goes. */
static uint64_t usage_of(const struct disk_watch *w, bool *deep)
{
	uint64_t sum = 0;

	for (int i = 0; i < 2; i++) {
		uint64_t b = 0;

		if (w->paths[i] && disk_usage(w->paths[i], &b) == -ELOOP)
			*deep = true;
		sum += b;
	}
	return sum;
}

/* One measurement; 1 once past the budget. Sets when the next one is due:
 * paced by how fast the session writes, the next look comes by half the time
 * the budget would last at the rate just seen, within 100 ms .. 1 s, and
 * never so often that measuring takes more than about a tenth of the time. */
static int disk_measure(struct disk_watch *w, uint64_t now_ns)
{
	uint64_t took, now, interval, sum, prev = w->used, left;
	uint64_t since = w->last_ns ? now_ns - w->last_ns : 0;

	sum = usage_of(w, &w->deep);
	now = boottime_ns();
	took = now - now_ns;
	w->used = sum > w->baseline ? sum - w->baseline : 0;
	w->last_ns = now_ns;
	/* a tree too deep to measure could hold anything: past the budget */
	if (w->used > w->budget || w->deep)
		return 1;
	left = w->budget - w->used;
	interval = 1000 * NS_PER_MS;
	if (w->used > prev && since) {
		uint64_t rate = (w->used - prev) * 1000 / (since / NS_PER_MS + 1); /* bytes/s */
		uint64_t lasts_ms = rate ? left * 1000 / rate : UINT64_MAX / NS_PER_MS;

		if (lasts_ms / 2 * NS_PER_MS < interval)
			interval = lasts_ms / 2 * NS_PER_MS;
	}
	if (interval < 100 * NS_PER_MS)
		interval = 100 * NS_PER_MS;
	if (interval < 10 * took)
		interval = 10 * took;
	w->next_ns = now + interval;
	return 0;
}

static void *disk_thread(void *arg)
{
	struct disk_watch *w = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		uint64_t now = boottime_ns();
		struct timespec ts;

		if (now < w->next_ns) {
			/* CLOCK_MONOTONIC for the wait (the condition's clock); the
			 * pace itself is kept in CLOCK_BOOTTIME. */
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)((w->next_ns - now) / 1000000000ull);
			ts.tv_nsec += (long)((w->next_ns - now) % 1000000000ull);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&w->wake, &w->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&w->lock);
		if (disk_measure(w, now) == 1) {
			if (write(w->efd, &one, sizeof(one)) != sizeof(one))
				return NULL;
			return NULL;
		}
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void paths_free(struct disk_watch *w)
{
	for (int i = 0; i < 2; i++) {
		free(w->paths[i]);
		w->paths[i] = NULL;
	}
}

int disk_watch_start(struct disk_watch *w, const char *project, const char *state, uint64_t budget)
{
	pthread_condattr_t ca;
	int rc;

	w->paths[0] = w->paths[1] = NULL;
	w->budget = budget;
	w->used = 0;
	w->efd = -1;
	w->running = false;
	w->stop = false;
	if (!budget)
		return 0;
	/* copies: the thread outlives the caller's buffers */
	if ((project && !(w->paths[0] = strdup(project))) ||
	    (state && !(w->paths[1] = strdup(state)))) {
		paths_free(w);
		return -ENOMEM;
	}
	w->baseline = usage_of(w, &w->deep);
	w->last_ns = boottime_ns();
	w->next_ns = w->last_ns + 100 * NS_PER_MS;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		paths_free(w);
		return -errno;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&w->thread, NULL, disk_thread, w);
	if (rc) {
		close(w->efd);
		w->efd = -1;
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		paths_free(w);
		return -rc;
	}
	w->running = true;
	return 0;
}

int disk_watch_fd(const struct disk_watch *w)
{
	return w->running ? w->efd : -1;
}

int disk_watch_check(struct disk_watch *w)
{
	uint64_t v;

	if (!w->running || read(w->efd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return 1;
}

void disk_watch_stop(struct disk_watch *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	close(w->efd);
	w->efd = -1;
	w->running = false;
	paths_free(w);
}
