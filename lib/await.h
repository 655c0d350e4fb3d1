/* A launcher started ahead with a prepared network (the agent's pool) waits
 * on a socket for its session: the command line it would have been started
 * with, and the descriptors that command line names, each put back on the
 * number it names. The agent sends (await_send), errand-launch receives
 * (await_recv). */
#ifndef ERRAND_AWAIT_H
#define ERRAND_AWAIT_H

#include <stddef.h>

/* The descriptors one command line can carry: stdio, the held DNS sockets,
 * the lent user namespace. */
#define AWAIT_FDS_MAX 12

/* Sends args (NULL-terminated) and fds[i], each to become number target[i]
 * in the launcher, with the priority (nice) the session runs at, on the
 * stream socket sock. 0 or -errno (-EPIPE: the launcher is gone). */
int await_send(int sock, const char *const *args, const int *fds, const int *target, size_t n,
	       int nice);

/* Waits on sock for await_send's message, puts each descriptor on its
 * number; sock is closed in every case. *argv (NULL-terminated, one allocation the caller
 * owns) and *argc on success; 0, -ENODATA when the agent closed sock without
 * a session (the prepared network was discarded), or -errno. */
int await_recv(int sock, int *argc, char ***argv, int *nice);

#endif
