/* A run request: what errandctl run asks for on top of the configuration
 * (--egress, --pin, --env, --project, --image, the command), as one JSON
 * object, the payload of the control protocol's run message. errandctl
 * builds it from its flags and checks it before anything is made; the agent
 * that runs the session (the daemon, or the embedded one) applies it to the
 * configuration with the same checks, and keeps it in the session's record
 * so a restarted agent re-adopts the session with exactly its policy. */
#ifndef ERRAND_REQUEST_H
#define ERRAND_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "lib/config.h"

/* Applies req to cfg (loaded from the configuration): --egress none, open or
 * host rules, pins, the image; checks the command, the project directory and
 * the environment. 0, or -EINVAL with one line in err naming what to change. */
int request_apply(struct errand_config *cfg, const json_t *req, char *err, size_t errlen);
/* Whether NAME=VALUE may be given with --env: 0 or -EINVAL with one line. */
int request_env_check(const char *kv, char *err, size_t errlen);

#endif
