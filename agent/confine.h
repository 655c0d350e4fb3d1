/* The launcher options that carry a session's confinement, from the
 * configuration: what the agent appends to errand-launch's command line. */
#ifndef ERRAND_CONFINE_H
#define ERRAND_CONFINE_H

#include <stddef.h>

#include "lib/config.h"

/* Appends to args[*n..max) the options that carry the session's confinement:
 * --project DIR and --state DIR (each when not NULL; absolute paths), the
 * policy grants (--policy-read/--policy-write/--policy-exec PATH),
 * --path-extra DIR, --env NAME=VALUE for sandbox.env, --block-syscall NAME,
 * --image DIR, the sizes (--fsize, --tmp-size, --shm-size BYTES), the cgroup
 * limits (--memory BYTES, --cpu-milli N, --pids N) and --landlock-min N.
 * Returns 0, or -E2BIG with *n unchanged when they do not fit (or memory
 * ran out). Strings stay owned by cfg and the caller, except the numbers,
 * formatted into this thread's storage of this file (valid until its next
 * call), and sandbox.rules' directories, written to *store: one allocation
 * (NULL: none) the caller frees once args are used, whatever the result. */
int confine_launch_args(const struct errand_config *cfg, const char *project_dir,
			const char *state_dir, const char **args, size_t *n, size_t max,
			char **store);

/* Removes the directory tree at path as root without following anything in
 * it: the session's state directory, where a session may leave a symbolic
 * link to any host directory (opendir()-based removal would empty that
 * directory as root). Descends with openat(O_NOFOLLOW), never crosses onto
 * another filesystem, holds two descriptors whatever the depth. A missing
 * path is 0; else 0 or the first -errno (what could be removed is). The
 * session's processes must be gone: nothing may rename in it meanwhile. */
int confine_remove_tree(const char *path);

#endif
