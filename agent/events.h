/* Events as errand reports them: refused connects (from the BPF ring buffer)
 * and denied names (from the DNS responder). One record form, printed as one
 * key=value line or one JSON object; the log shows each target at most once
 * per EVENT_LOG_INTERVAL, the live stream (errandctl observe) every event. */
#ifndef ERRAND_EVENTS_H
#define ERRAND_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress.h"
#include "lib/addr.h"

#define EVENT_LOG_INTERVAL_NS (30ull * 1000000000ull)
#define EVENT_LINE_MAX 640

struct event_rec {
	bool denied; /* a denied name; else a refused connect or packet */
	const char *session;
	const char *reason;
	/* refused */
	char proto[8];
	char addr[ADDR_STRLEN];
	unsigned port;
	const char *hook;
	/* denied */
	const char *name;
	const char *qtype;
};

const char *event_reason_name(unsigned reason);
const char *event_hook_name(unsigned hook);
void event_from_bpf(const struct egress_event *ev, const char *session, struct event_rec *out);
/* Writes the line (without newline) into buf. */
void event_format(const struct event_rec *ev, bool json, char *buf, size_t len);
/* The target a rate limit counts by: a name, or proto/address/port. */
void event_target(const struct event_rec *ev, char *buf, size_t len);

/* At most one log line per target per EVENT_LOG_INTERVAL_NS. */
struct event_limiter;
struct event_limiter *event_limiter_new(void); /* caller frees with event_limiter_free */
void event_limiter_free(struct event_limiter *l);
/* True when the target may be logged now (and records that it was). */
bool event_limiter_pass(struct event_limiter *l, const char *target, uint64_t now_ns);

uint64_t boottime_ns(void);

#endif
