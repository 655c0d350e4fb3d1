/* Grants: hosts added to a running session from the thread (errandctl grant
 * ID HOST [once|DURATION|always]). A grant names a host rule, never a path,
 * and opens only ports of sandbox.egressPorts; forbidden addresses stay
 * refused because the DNS responder and the kernel judge a granted name like
 * any other. Grants live in grants.json in the session's record directory,
 * which the session cannot reach; whoever changes the file holds the
 * directory's lock and replaces the file whole (a reader takes no lock),
 * and the session's agent (the daemon or an embedded errandctl) reloads it.
 * Also here: the suggestions the agent makes when a name is refused. */
#ifndef ERRAND_GRANT_H
#define ERRAND_GRANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "lib/hostrule.h"

#define GRANT_MAX 64
#define GRANTS_FILE "grants.json"

enum grant_kind {
	GRANT_ONCE,   /* until one connection has used it */
	GRANT_UNTIL,  /* until a time */
	GRANT_ALWAYS, /* for the session's life, or until revoked */
};

struct grant {
	uint32_t id; /* nonzero, never reused within a session: the allow entries carry it */
	struct host_rule rule;
	enum grant_kind kind;
	int64_t until; /* unix seconds, GRANT_UNTIL */
	bool used;     /* GRANT_ONCE */
};

struct grant_set {
	struct grant v[GRANT_MAX];
	size_t n;
	uint32_t next_id;
};

/* Parses "once", "always" or a duration ("90s", "10m", "2h", "1d", a bare
 * number is seconds) into kind and *seconds. 0 or -EINVAL with one line. */
int grant_kind_parse(const char *s, enum grant_kind *kind, int64_t *seconds, char *err,
		     size_t errlen);
/* Checks a host for a grant: a host rule whose port is one of ports.
 * 0 or -EINVAL with one line naming what to change. */
int grant_host_parse(const char *host, const uint16_t *ports, size_t n_ports, struct host_rule *out,
		     char *err, size_t errlen);
/* Whether the grant still admits its host at unix time now. */
bool grant_live(const struct grant *g, int64_t now);
const char *grant_kind_name(enum grant_kind k);

/* Reads record_dir's grants.json (missing: none). 0 or -errno. */
int grants_load(const char *record_dir, struct grant_set *gs);
/* Adds or replaces the grant for the same rule, under the directory's lock, and
 * returns the set as written in *gs. 0, -ENOSPC or -errno. */
int grants_put(const char *record_dir, const struct host_rule *rule, enum grant_kind kind,
	       int64_t until, struct grant_set *gs);
/* Removes the grants for the rule's host: on every port when any_port (the
 * operator named none), else on the rule's alone. 0, -ENOENT when none
 * matched, or -errno. */
int grants_revoke(const char *record_dir, const struct host_rule *rule, bool any_port,
		  struct grant_set *gs, uint32_t *ids, size_t *n_ids);
/* Marks a once grant used. 0 or -errno. */
int grants_mark_used(const char *record_dir, uint32_t id, struct grant_set *gs);
/* [{host, kind, until?, used?}] for show and sessions. */
json_t *grants_json(const struct grant_set *gs, int64_t now);

/* Suggestions: at most once a minute per host, three hosts a minute per
 * session. */
#define SUGGEST_INTERVAL_S 60
#define SUGGEST_HOSTS_PER_INTERVAL 3
struct suggest_limiter {
	struct {
		char host[HOST_NAME_MAX_LEN + 1];
		uint64_t at_ns;
	} recent[16];
};
/* True when host may be suggested now, and records it. */
bool suggest_pass(struct suggest_limiter *l, const char *host, uint64_t now_ns);

#endif
