/* Named network namespaces for sessions: a fresh netns bind-mounted on a file
 * under <run>/netns/, the way iproute2 keeps /run/netns, so it outlives the
 * process that made it and can be entered by path. */
#ifndef ERRAND_NETNS_H
#define ERRAND_NETNS_H

/* Creates a new network namespace and bind-mounts it at path (the directory
 * is created 0755 and made a shared mount point if it is not one). The
 * caller's own namespace is unchanged when this returns, also on error; safe
 * in a multi-threaded process (the work happens in a helper thread).
 * 0 or -errno; -EEXIST if path is already a namespace. */
int netns_create(const char *path);
/* Opens the namespace at path: an fd for setns(2), O_CLOEXEC. fd or -errno. */
int netns_open(const char *path);
/* Runs fn(arg) with the calling thread inside the namespace at path, then
 * returns it to its own namespace (in a helper thread, so the caller's thread
 * never moves). Returns fn's result, or -errno if entering failed. */
int netns_run(const char *path, int (*fn)(void *arg), void *arg);
/* Unmounts and removes path. A missing path is 0. */
int netns_remove(const char *path);
/* Removes every namespace file in dir whose name is not accepted by keep
 * (NULL: all). Returns the number removed or -errno. */
int netns_sweep(const char *dir, int (*keep)(const char *id, void *arg), void *arg);

#endif
