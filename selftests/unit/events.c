/* Guarantee: the log's limiter passes a target once per 30 s per reason (a
 * new reason for the same target is logged), stays bounded under a flood of
 * distinct targets, and events name their true protocol and reason (mptcp,
 * own, ip-options) and the count the kernel held back. */
#include <stdio.h>
#include <string.h>

#include "agent/events.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

#define S 1000000000ull

static void test_limiter(void)
{
	struct event_limiter *l = event_limiter_new();
	struct event_rec a = {
		.reason = "not-allowed", .proto = "tcp", .addr = "198.18.1.10", .port = 443};
	struct event_rec b = a;
	char ta[320], tb[320], t[320];
	int passed = 0;

	if (!CHECK_TRUE(l != NULL, "a limiter"))
		return;
	b.reason = "expired";
	event_target(&a, ta, sizeof(ta));
	event_target(&b, tb, sizeof(tb));
	CHECK_TRUE(strcmp(ta, tb) != 0, "one target, two reasons: two keys (%s, %s)", ta, tb);
	CHECK_TRUE(event_limiter_pass(l, ta, 100 * S), "the first refusal is logged");
	CHECK_FALSE(event_limiter_pass(l, ta, 101 * S), "the same again within 30 s is not");
	CHECK_TRUE(event_limiter_pass(l, tb, 102 * S), "the same target for another reason is");
	CHECK_FALSE(event_limiter_pass(l, tb, 103 * S), "... once");
	CHECK_TRUE(event_limiter_pass(l, ta, 131 * S), "after 30 s the first is logged again");

	/* A flood of distinct targets: each new one passes, none is lost track
	 * of while it is recent, and the table never grows. */
	for (int i = 0; i < 5000; i++) {
		snprintf(t, sizeof(t), "tcp 10.99.0.10 %d forbidden", i);
		passed += event_limiter_pass(l, t, 200 * S + (uint64_t)i);
	}
	CHECK_INT(passed, 5000, "5000 distinct targets are each logged once");
	snprintf(t, sizeof(t), "tcp 10.99.0.10 %d forbidden", 4999);
	CHECK_FALSE(event_limiter_pass(l, t, 201 * S), "the newest of them is still known");
	event_limiter_free(l);
}

static void test_names(void)
{
	struct egress_event bev = {.port = 443,
				   .proto = 262 & 0xff,
				   .proto_hi = 262 >> 8,
				   .reason = REASON_SOCKET,
				   .hook = HOOK_SOCK_CREATE};
	struct event_rec ev;
	char line[EVENT_LINE_MAX];

	event_from_bpf(&bev, "0a1b2c3d", &ev);
	CHECK_STR(ev.proto, "mptcp", "IPPROTO_MPTCP (262) is mptcp, not tcp");
	bev.proto = 6;
	bev.proto_hi = 0;
	event_from_bpf(&bev, "0a1b2c3d", &ev);
	CHECK_STR(ev.proto, "tcp", "6 is tcp");
	bev.proto = 0x12;
	bev.proto_hi = 1;
	event_from_bpf(&bev, "0a1b2c3d", &ev);
	CHECK_STR(ev.proto, "274", "a number past 255 is printed whole");
	CHECK_STR(event_reason_name(REASON_OWN), "own", "reason own");
	CHECK_STR(event_reason_name(REASON_IP_OPTIONS), "ip-options", "reason ip-options");
	CHECK_STR(event_reason_name(REASON_MAX), "unknown", "past the list: unknown");

	ev = (struct event_rec){.suppressed = true, .session = "0a1b2c3d", .count = 7, .total = 9};
	event_format(&ev, true, line, sizeof(line));
	CHECK_STR(line,
		  "{\"event\":\"suppressed\",\"session\":\"0a1b2c3d\",\"count\":7,\"total\":9}",
		  "suppressed as JSON");
	event_format(&ev, false, line, sizeof(line));
	CHECK_STR(line, "errand: session=0a1b2c3d suppressed count=7 total=9",
		  "suppressed as a line");
}

int main(void)
{
	test_limiter();
	test_names();
	return test_exit();
}
