/* Refusal events from the ring buffer, as errand prints them: one line each,
 * key=value for people and grep, or one JSON object with --json. */
#ifndef ERRAND_EVENTS_H
#define ERRAND_EVENTS_H

#include <stdbool.h>
#include <stddef.h>

#include "egress.h"

const char *event_reason_name(unsigned reason);
const char *event_hook_name(unsigned hook);
const char *event_proto_name(unsigned proto, char buf[8]);
/* Writes the line (without newline) into buf. */
void event_format(const struct egress_event *ev, const char *session, bool json, char *buf,
		  size_t len);

#endif
