/* errand-broker's provider relay: one fiber a session connection, reading
 * its calls, checking stand-in, path and capabilities, calling the provider
 * with the real key and relaying the answer scrubbed of it. */
#ifndef ERRAND_BROKER_RELAY_H
#define ERRAND_BROKER_RELAY_H

#include <pthread.h>
#include <stddef.h>

#include "broker/receipts.h"
#include "broker/route.h"
#include "broker/upstream.h"
#include "lib/config.h"

#define RELAY_BODY_MAX (64ULL << 20) /* an answer's body, in bytes */

struct broker {
	const struct errand_config *cfg;
	struct route *routes; /* one a provider, in cfg's order */
	size_t n_routes;
	struct upstream_env env;
};

/* Serves the session connection fd as a fiber of its own, which owns fd
 * from here on (and closes it right away when the fiber cannot start). */
void relay_start(struct broker *b, int fd);

#endif
