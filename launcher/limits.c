/* The session's memory, cpu and pids limits, written by the outer launcher
 * into the session's cgroup before it joins it. A controller errand's cgroup
 * was not given (its cgroup.controllers lacks it) cannot be used: the agent
 * states that as a gap at start and refuses unless told to run anyway, so
 * here it is only skipped. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

#define CPU_PERIOD 100000 /* cpu.max's default period, microseconds */

static int write_file(const char *path, const char *text)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		return -errno;
	return 0;
}

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/* The controller for the session's cgroup: 1 once its parent's
 * subtree_control has it, 0 when the parent has none to give (the gap the
 * agent states), -errno when it could not be read or enabled (a parent
 * with processes of its own takes no controller for its children: EBUSY).
 * A limit that cannot be had refuses the session, never runs it without. */
static int controller(const char *parent, const char *name)
{
	char path[PATH_MAX], list[512], plus[32];
	int r;

	if (path_fmt(path, sizeof(path), "%s/cgroup.controllers", parent))
		return -ENAMETOOLONG;
	if ((r = file_read_text(path, list, sizeof(list))) < 0)
		goto fail;
	if (!has_word(list, name))
		return 0;
	if (path_fmt(path, sizeof(path), "%s/cgroup.subtree_control", parent))
		return -ENAMETOOLONG;
	if ((r = file_read_text(path, list, sizeof(list))) < 0)
		goto fail;
	if (has_word(list, name))
		return 1;
	snprintf(plus, sizeof(plus), "+%s", name);
	if ((r = write_file(path, plus)) == 0)
		return 1;
fail:
	errno = -r;
	log_warn("cannot give the session's cgroup the %s controller (%s)", name, path);
	return r;
}

static int set(const char *cgroup, const char *file, const char *value)
{
	char path[PATH_MAX];
	int r;

	if (path_fmt(path, sizeof(path), "%s/%s", cgroup, file))
		return -ENAMETOOLONG;
	r = write_file(path, value);
	if (r < 0) {
		errno = -r;
		log_warn("cannot write %s to %s", value, path);
	}
	return r;
}

int limits_apply(const struct launch_args *a)
{
	char parent[PATH_MAX], swap[PATH_MAX], v[64];
	char *slash;
	int r = 0;

	if (!a->memory && !a->cpu_milli && !a->pids)
		return 0;
	if (path_fmt(parent, sizeof(parent), "%s", a->cgroup))
		return -ENAMETOOLONG;
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return 0;
	*slash = '\0';
	if (a->memory && (r = controller(parent, "memory")) > 0) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)a->memory);
		r = set(a->cgroup, "memory.max", v);
		/* Swap would let the session past memory.max; the file is there
		 * only where the kernel accounts swap. */
		if (r == 0 && !path_fmt(swap, sizeof(swap), "%s/memory.swap.max", a->cgroup) &&
		    access(swap, F_OK) == 0)
			r = set(a->cgroup, "memory.swap.max", "0");
	}
	if (r >= 0 && a->cpu_milli && (r = controller(parent, "cpu")) > 0) {
		snprintf(v, sizeof(v), "%llu %d",
			 (unsigned long long)a->cpu_milli * CPU_PERIOD / 1000, CPU_PERIOD);
		r = set(a->cgroup, "cpu.max", v);
	}
	if (r >= 0 && a->pids && (r = controller(parent, "pids")) > 0) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)a->pids);
		r = set(a->cgroup, "pids.max", v);
	}
	log_debug("limits for %s: memory %llu, cpu %llu/1000, pids %llu", a->cgroup,
		  (unsigned long long)a->memory, (unsigned long long)a->cpu_milli,
		  (unsigned long long)a->pids);
	return r < 0 ? r : 0;
}
