/* The output relay of a session that holds placeholders or stand-ins: its
 * stdout and stderr reach the caller only through a process of the agent's
 * (root, never the caller's errandctl) that turns every secret's value of 8
 * bytes or more and every provider's real key, raw and percent-encoded, back
 * into the placeholder or stand-in, streaming. Without them, the session
 * writes to the caller's descriptors itself. */
#ifndef ERRAND_AGENT_OUTSCRUB_H
#define ERRAND_AGENT_OUTSCRUB_H

#include <stdbool.h>
#include <sys/types.h>

#include "lib/config.h"

#define OUTSCRUB_MIN_SECRET 8 /* bytes: a shorter secret's value is left as it is */

struct outscrub {
	pid_t pid;    /* the relay; 0: none */
	int pidfd;    /* readable once it has written everything and exited; -1: none */
	int ends[2];  /* the session's stdout and stderr (pipes) until it has them */
	bool started; /* a relay was started, whether or not it still runs */
};

/* Makes o empty: no relay. */
void outscrub_init(struct outscrub *o);
/* Reads the values of cfg's secrets (paths.secrets) and of the keys of the
 * providers whose stand-in broker_env ("NAME=VALUE" strings) holds, with the
 * placeholders in secret_env (cfg's secrets' order). When there is one to
 * replace, starts the relay on the caller's stdout and stderr (caller[1],
 * caller[2], or this process's 1 and 2 when caller is NULL) and writes to
 * fds[0..3) what the session is to get: the caller's stdin and the relay's
 * pipes; otherwise fds is the caller's own. Touches nothing the daemon's loop
 * uses. 0, or -errno with one line in err. */
int outscrub_start(const struct errand_config *cfg, char *const *secret_env,
		   char *const *broker_env, const int *caller, int fds[3], struct outscrub *o,
		   char *err, size_t errlen);
/* Closes this process's copies of the session's ends once the launcher holds
 * them (or could not start): the relay sees the end when the session's do. */
void outscrub_spawned(struct outscrub *o);
/* The relay exited (its pidfd is readable): reaps it, closes the pidfd. */
void outscrub_reap(struct outscrub *o);
/* Kills the relay (both its processes) at once; its pidfd tells when. */
void outscrub_stop(struct outscrub *o);
/* Ends the relay at once (SIGKILL), reaps it and closes what o holds. */
void outscrub_kill(struct outscrub *o);
/* Closes what o holds and leaves the relay running (another agent takes the
 * session over; the relay goes on writing). */
void outscrub_detach(struct outscrub *o);

#endif
