/* The sessions errand-broker serves, as the agent registered them, and the
 * connections it holds for each, so that a session's stop closes them. */
#ifndef ERRAND_BROKER_SESSIONS_H
#define ERRAND_BROKER_SESSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "broker/registry.h"
#include "lib/addr.h"

/* A connection from a session: its peer and the descriptors a stop shuts. */
struct session_link {
	struct addr peer;
	int client_fd;
	int upstream_fd; /* -1 when none */
	struct session_link *prev, *next;
};

/* Handles one registry message; writes the answer ("ok" or "error ...") into
 * reply. 0 or -errno. */
int sessions_handle(const struct broker_msg *m, char *reply, size_t len);

/* The session calling from src and its stand-in for provider: copies both
 * and returns true; false when no session holds src (or it has no stand-in
 * for provider, then *standin is ""). */
bool sessions_lookup(const struct addr *src, const char *provider, char id[BROKER_SESSION_MAX + 1],
		     char standin[BROKER_STANDIN_LEN + 1]);

/* A denied call of session id: true when it is to be recorded now (at most
 * once a minute), with *unrecorded the denied calls left out since. */
bool sessions_denied_due(const char *id, uint64_t *unrecorded);

void sessions_link_add(struct session_link *l);
void sessions_link_del(struct session_link *l);
void sessions_link_upstream(struct session_link *l, int fd);

#endif
