/* What errandctl sessions, show and denied print, and what grant, revoke and
 * stop do to a session, built from state.db, the session's record and its
 * pins: the daemon answers with these, and errandctl calls them itself when
 * no daemon runs, so both give the same answer. */
#ifndef ERRAND_INSPECT_H
#define ERRAND_INSPECT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "agent/grant.h"
#include "agent/state.h"
#include "lib/config.h"

/* Running sessions: [{id, command, uptime, mode, allowed, refusals, owner}]. */
json_t *inspect_sessions(struct state *st, const struct errand_config *cfg);
/* One session: policy, allow-map entries with expiry, attached programs,
 * counters, gaps, grants. NULL with one line in err. */
json_t *inspect_show(struct state *st, const struct errand_config *cfg, const char *id, char *err,
		     size_t errlen);
/* Refusals of one session (NULL: all), oldest first. */
json_t *inspect_denied(struct state *st, const char *id);
/* The broker's receipts of one session (NULL: all), in the order the calls were made, from
 * receipts.db under paths.state (none yet: an empty list). */
json_t *inspect_receipts(const struct errand_config *cfg, const char *id);

/* Checks that id is a running session and host may be granted to it (its
 * egressPorts), then writes the grant into its record. The session's agent
 * rereads it; *record_dir says where. 0 or -errno with one line in err. */
int inspect_grant(struct state *st, const struct errand_config *cfg, const char *id,
		  const char *host, enum grant_kind kind, int64_t seconds, char *err,
		  size_t errlen);
int inspect_revoke(struct state *st, const struct errand_config *cfg, const char *id,
		   const char *host, char *err, size_t errlen);
/* Kills every process of a running session through its cgroup. */
int inspect_stop(struct state *st, const char *id, char *err, size_t errlen);
/* Whether a running session's row names a live launcher. */
bool inspect_alive(const struct state_session *row);
/* Whether the process that ran the session (an agent, an errandctl run) is
 * still there, its pid in *pid. */
bool inspect_owner_alive(const struct state_session *row, pid_t *pid);

/* Tables for a person. */
void inspect_print_sessions(const json_t *sessions, FILE *f);
void inspect_print_show(const json_t *show, FILE *f);
void inspect_print_denied(const json_t *denied, FILE *f);
void inspect_print_receipts(const json_t *receipts, FILE *f);

#endif
