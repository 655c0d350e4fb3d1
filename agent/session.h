/* A session from start to teardown, as the embedded agent runs it: cgroup,
 * network namespace, veth and NAT, BPF enforcement verified, the record
 * written, then the launcher; afterwards everything removed again. */
#ifndef ERRAND_SESSION_H
#define ERRAND_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/config.h"

#define SESSION_ID_LEN 8

struct session_spec {
	const struct errand_config *cfg; /* policy: network, mode, rules, pins, ports */
	char *const *argv;		 /* CMD and its arguments, NULL-terminated */
	char *const *env;		 /* NAME=VALUE for the session, NULL-terminated */
	const char *project;		 /* absolute project directory */
	bool json;			 /* events as JSON lines */
};

/* Runs the session to its end. Returns the exit status errandctl should
 * give: CMD's own, or 125 when errand could not start it (one line on
 * stderr says why; nothing is left behind). */
int session_run(const struct session_spec *spec);
/* Removes what crashed runs left: every session object under cfg's paths and
 * in this network namespace whose session holds no lock. Count or -errno. */
int session_sweep(const struct errand_config *cfg);

#endif
