/* Names and the printed form of refusal events (see events.h). The names are
 * a contract: logs, JSON and tests use them. */
#include <stdio.h>

#include "agent/events.h"
#include "lib/addr.h"
#include "lib/util.h"

static const char *const reasons[] = {
	[REASON_NONE] = "none",		  [REASON_NO_NETWORK] = "no-network",
	[REASON_NOT_ALLOWED] = "not-allowed", [REASON_EXPIRED] = "expired",
	[REASON_FORBIDDEN] = "forbidden",	  [REASON_SELF] = "self",
	[REASON_UDP] = "udp",		  [REASON_PORT] = "port",
	[REASON_SPOOF] = "spoof",		  [REASON_PROTO] = "proto",
	[REASON_FRAGMENT] = "fragment",	  [REASON_NO_FLOW] = "no-flow",
	[REASON_SOCKET] = "socket",		  [REASON_IPV6] = "ipv6",
	[REASON_DOT] = "dot",
};
_Static_assert(ARRAY_SIZE(reasons) == REASON_MAX, "a reason without a name");

static const char *const hooks[] = {
	[HOOK_CONNECT4] = "connect4", [HOOK_CONNECT6] = "connect6", [HOOK_SENDMSG4] = "sendmsg4",
	[HOOK_SENDMSG6] = "sendmsg6", [HOOK_TC] = "tc",		    [HOOK_SOCK_CREATE] = "sock_create",
};

const char *event_reason_name(unsigned reason)
{
	return reason < ARRAY_SIZE(reasons) && reasons[reason] ? reasons[reason] : "unknown";
}

const char *event_hook_name(unsigned hook)
{
	return hook < ARRAY_SIZE(hooks) && hooks[hook] ? hooks[hook] : "unknown";
}

const char *event_proto_name(unsigned proto, char buf[8])
{
	switch (proto) {
	case 6:
		return "tcp";
	case 17:
		return "udp";
	case 1:
		return "icmp";
	default:
		snprintf(buf, 8, "%u", proto);
		return buf;
	}
}

void event_format(const struct egress_event *ev, const char *session, bool json, char *buf,
		  size_t len)
{
	char a[ADDR_STRLEN], pbuf[8];
	const char *proto = event_proto_name(ev->proto, pbuf);
	struct addr addr;

	for (int i = 0; i < 16; i++)
		addr.b[i] = ev->addr[i];
	addr_str(&addr, a);
	if (json)
		snprintf(buf, len,
			 "{\"event\":\"refused\",\"session\":\"%s\",\"proto\":\"%s\","
			 "\"addr\":\"%s\",\"port\":%u,\"reason\":\"%s\",\"hook\":\"%s\"}",
			 session, proto, a, ev->port, event_reason_name(ev->reason),
			 event_hook_name(ev->hook));
	else
		snprintf(buf, len,
			 "errand: session=%s refused proto=%s addr=%s port=%u reason=%s hook=%s",
			 session, proto, a, ev->port, event_reason_name(ev->reason),
			 event_hook_name(ev->hook));
}
