/* The session's resource limits that are per process rather than per
 * cgroup: the largest file it may write (RLIMIT_FSIZE, so a write past it
 * fails with EFBIG once SIGXFSZ is ignored), and no core files, which would
 * land in the project with whatever the process held. */
#include <errno.h>
#include <sys/resource.h>

#include "launcher/launch.h"
#include "lib/log.h"

static int set_limit(int resource, const char *name, rlim_t value)
{
	struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
	int r;

	if (setrlimit(resource, &rl) < 0) {
		r = -errno;
		log_warn("cannot set %s to %llu", name, (unsigned long long)value);
		return r;
	}
	return 0;
}

int rlimit_apply(const struct launch_args *a)
{
	int r = set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)a->fsize);

	return r < 0 ? r : set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0);
}
