/* Names and the printed form of events (see events.h). The names are a
 * contract: logs, JSON, errandctl observe and tests use them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/events.h"
#include "lib/util.h"

static const char *const reasons[] = {
	[REASON_NONE] = "none",
	[REASON_NO_NETWORK] = "no-network",
	[REASON_NOT_ALLOWED] = "not-allowed",
	[REASON_EXPIRED] = "expired",
	[REASON_FORBIDDEN] = "forbidden",
	[REASON_SELF] = "self",
	[REASON_UDP] = "udp",
	[REASON_PORT] = "port",
	[REASON_SPOOF] = "spoof",
	[REASON_PROTO] = "proto",
	[REASON_FRAGMENT] = "fragment",
	[REASON_NO_FLOW] = "no-flow",
	[REASON_SOCKET] = "socket",
	[REASON_IPV6] = "ipv6",
	[REASON_DOT] = "dot",
	[REASON_GRANT_SPENT] = "grant-spent",
};
_Static_assert(ARRAY_SIZE(reasons) == REASON_MAX, "a reason without a name");

static const char *const hooks[] = {
	[HOOK_CONNECT4] = "connect4",
	[HOOK_CONNECT6] = "connect6",
	[HOOK_SENDMSG4] = "sendmsg4",
	[HOOK_SENDMSG6] = "sendmsg6",
	[HOOK_TC] = "tc",
	[HOOK_SOCK_CREATE] = "sock_create",
};

const char *event_reason_name(unsigned reason)
{
	return reason < ARRAY_SIZE(reasons) && reasons[reason] ? reasons[reason] : "unknown";
}

const char *event_hook_name(unsigned hook)
{
	return hook < ARRAY_SIZE(hooks) && hooks[hook] ? hooks[hook] : "unknown";
}

void event_from_bpf(const struct egress_event *ev, const char *session, struct event_rec *out)
{
	struct addr a;

	memset(out, 0, sizeof(*out));
	out->session = session;
	out->reason = event_reason_name(ev->reason);
	out->hook = event_hook_name(ev->hook);
	out->port = ev->port;
	switch (ev->proto) {
	case 6:
		snprintf(out->proto, sizeof(out->proto), "tcp");
		break;
	case 17:
		snprintf(out->proto, sizeof(out->proto), "udp");
		break;
	case 1:
		snprintf(out->proto, sizeof(out->proto), "icmp");
		break;
	default:
		snprintf(out->proto, sizeof(out->proto), "%u", ev->proto);
	}
	memcpy(a.b, ev->addr, 16);
	addr_str(&a, out->addr);
}

/* Names in events come from sessions: only DNS's own characters are
 * printed as they are, so a name can neither break a line nor a JSON string. */
static const char *safe_name(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++) {
		char c = s[i];

		buf[i] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
					 c == '_' || c == '*'
				 ? c
				 : '?';
	}
	buf[i] = '\0';
	return buf;
}

void event_format(const struct event_rec *ev, bool json, char *buf, size_t len)
{
	char name[256];

	if (ev->denied && json)
		snprintf(buf, len,
			 "{\"event\":\"denied\",\"session\":\"%s\",\"name\":\"%s\",\"type\":\"%s\","
			 "\"reason\":\"%s\"}",
			 ev->session, safe_name(ev->name, name, sizeof(name)), ev->qtype,
			 ev->reason);
	else if (ev->denied)
		snprintf(buf, len, "errand: session=%s denied name=%s type=%s reason=%s",
			 ev->session, safe_name(ev->name, name, sizeof(name)), ev->qtype,
			 ev->reason);
	else if (json)
		snprintf(buf, len,
			 "{\"event\":\"refused\",\"session\":\"%s\",\"proto\":\"%s\","
			 "\"addr\":\"%s\",\"port\":%u,\"reason\":\"%s\",\"hook\":\"%s\"}",
			 ev->session, ev->proto, ev->addr, ev->port, ev->reason, ev->hook);
	else
		snprintf(buf, len,
			 "errand: session=%s refused proto=%s addr=%s port=%u reason=%s hook=%s",
			 ev->session, ev->proto, ev->addr, ev->port, ev->reason, ev->hook);
}

void event_target(const struct event_rec *ev, char *buf, size_t len)
{
	if (ev->denied)
		snprintf(buf, len, "name %s", ev->name);
	else
		snprintf(buf, len, "%s %s %u", ev->proto, ev->addr, ev->port);
}

#define LIMITER_SLOTS 1024

struct limiter_slot {
	char target[300];
	uint64_t at_ns;
};

struct event_limiter {
	struct limiter_slot slots[LIMITER_SLOTS];
};

struct event_limiter *event_limiter_new(void)
{
	return calloc(1, sizeof(struct event_limiter));
}

void event_limiter_free(struct event_limiter *l)
{
	free(l);
}

bool event_limiter_pass(struct event_limiter *l, const char *target, uint64_t now_ns)
{
	struct limiter_slot *oldest = &l->slots[0];

	for (size_t i = 0; i < LIMITER_SLOTS; i++) {
		struct limiter_slot *s = &l->slots[i];

		if (s->at_ns && !strcmp(s->target, target)) {
			if (now_ns - s->at_ns < EVENT_LOG_INTERVAL_NS)
				return false;
			s->at_ns = now_ns;
			return true;
		}
		if (s->at_ns < oldest->at_ns)
			oldest = s;
	}
	/* A new target takes the stalest slot: a flood of distinct targets
	 * forgets old ones rather than growing without bound. */
	snprintf(oldest->target, sizeof(oldest->target), "%s", target);
	oldest->at_ns = now_ns ? now_ns : 1;
	return true;
}

uint64_t boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
