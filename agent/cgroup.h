/* Session cgroups under the cgroup v2 mount, wherever it is: /sys/fs/cgroup
 * on pure v2 hosts, /sys/fs/cgroup/unified on hybrid ones. On a host whose
 * cgroups are systemd's, inside the scope systemd delegates to errand. */
#ifndef ERRAND_CGROUP_H
#define ERRAND_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The transient scope systemd delegates to errand's sessions, in system.slice.
 * A scope, not the agent's own service: a delegated service whose subtree
 * holds live cgroups with controllers enabled cannot be started again
 * (systemd puts the new main process in the service's own cgroup, which
 * cgroup v2 then refuses), and sessions outlive restarts of the agent. */
#define CGROUP_SCOPE "errand-sessions.scope"
#define CGROUP_SCOPE_PATH "system.slice/" CGROUP_SCOPE
/* Beside the sessions' cgroups, the agent's empty one its hooks stay
 * attached to (enforce.c, hooks_hold); no session id takes the name, and
 * sweeps pass it by while it holds them. */
#define CGROUP_HOOKS "hooks"

/* Finds the cgroup2 mount from /proc/self/mountinfo, read again only once the
 * mount found last is gone (its path no longer has its root). 0 or -ENOENT (no cgroup2
 * mounted: the caller says "mount cgroup2 at /sys/fs/cgroup/unified"). */
int cgroup2_mount(char *out, size_t len);
/* Whether the cgroups at mount are systemd's to hand out: booted with
 * systemd (/run/systemd/system) and mount is the unified hierarchy at
 * /sys/fs/cgroup. */
bool cgroup_systemd(const char *mount);
/* Where sessions' cgroups go, relative to mount, into out: <name> on a host
 * without systemd, <CGROUP_SCOPE_PATH>/<name> on one with it. With create,
 * the scope is started when it does not run yet (systemd-run --scope with
 * Delegate=yes, a sleeping holder in its leaf "holder", the memory, cpu and
 * pids controllers enabled for the rest); without, -ENOENT while it does not
 * run. 0 or -errno. */
int cgroup_sessions_parent(const char *mount, const char *name, bool create, char *out, size_t len);

/* Creates <mount>/<parent>/<id> (the parent too when missing), mode 0755.
 * Writes the full path into out. 0 or -errno (-EEXIST if the session's exists). */
int cgroup_session_create(const char *mount, const char *parent, const char *id, char *out,
			  size_t len);
/* spawn_fn(fn, arg) (agent/spawn.h), the child born in the cgroup at path
 * (clone3 CLONE_INTO_CGROUP): moving a process in by writing cgroup.procs
 * waits for an RCU grace period (the cgroup core's thread-group lock),
 * often the longest wait of a session's start. Where the cgroup cannot be
 * opened or refuses a child so made, the child is born in this process's
 * cgroup, and must join its own. The child's pid, or -errno. */
pid_t cgroup_spawn_into(const char *path, int (*fn)(void *arg), void *arg);
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
