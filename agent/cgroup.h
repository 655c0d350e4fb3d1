/* Session cgroups under the cgroup v2 mount, wherever it is: /sys/fs/cgroup
 * on pure v2 hosts, /sys/fs/cgroup/unified on hybrid ones. */
#ifndef ERRAND_CGROUP_H
#define ERRAND_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* Finds the cgroup2 mount from /proc/self/mountinfo. 0 or -ENOENT (no cgroup2
 * mounted: the caller says "mount cgroup2 at /sys/fs/cgroup/unified"). */
int cgroup2_mount(char *out, size_t len);
/* Creates <mount>/<parent>/<id> (the parent too when missing), mode 0755.
 * Writes the full path into out. 0 or -errno (-EEXIST if the session's exists). */
int cgroup_session_create(const char *mount, const char *parent, const char *id, char *out,
			  size_t len);
/* The cgroup's id (its inode number, as bpf_get_current_cgroup_id() sees it). */
int cgroup_id(const char *path, uint64_t *id);
/* Kills every process in the cgroup (cgroup.kill where the kernel has it,
 * else SIGKILL to each pid in cgroup.procs until empty, bounded to ~2 s),
 * then removes the directory. 0, or -errno; a missing directory is 0. */
int cgroup_session_remove(const char *path);
/* Removes every child of <mount>/<parent> whose name is not accepted by keep
 * (keep may be NULL: remove all). Returns the number removed or -errno. */
int cgroup_sweep(const char *mount, const char *parent, int (*keep)(const char *id, void *arg),
		 void *arg);

#endif
