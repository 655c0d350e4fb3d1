/* libFuzzer target for the DNS codec (agent/dnsmsg.c): every input is tried
 * as a session's query and as upstream's answer, and whatever parses is
 * resolved and answered, with the codec's promises checked at each step. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/dnsmsg.h"
#include "lib/addr.h"
#include "selftests/fuzz/fuzz.h"

/* Input layout: byte 0 chooses, the rest is the message.
 *   bits 0-1  the name the answer is for (names[])
 *   bits 2-3  its qtype (qtypes[])
 *   bit 4     whether the query answered from it had EDNS
 *   bits 5-6  the max_len answers are built into (max_lens[])
 *   bit 7     expect an id other than the message's */
static const char *const names[] = {"www.example.com", "example.com", "a.example", ""};
static const uint16_t qtypes[] = {DNS_TYPE_A, DNS_TYPE_AAAA, DNS_TYPE_CNAME, DNS_TYPE_TXT};
static const size_t max_lens[] = {512, 1232, 65535, 60};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* A name as the codec promises it: at most 253 characters, lowercase,
 * printable without space, labels of 1..63 between single dots. */
static void check_name(const char *s)
{
	size_t len = strnlen(s, DNS_NAME_MAX + 1), label = 0;

	INV(len <= DNS_NAME_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		INV(c > 0x20 && c < 0x7f);
		INV(!(c >= 'A' && c <= 'Z'));
		if (c == '.') {
			INV(label > 0);
			label = 0;
		} else {
			INV(++label <= 63);
		}
	}
	INV(len == 0 || label > 0);
}

/* Builds q's answer with n of addrs and checks it: within max_len, a header
 * that says what was asked, and, untruncated, parsing back to the same. */
static void check_response(const struct dns_query *q, uint8_t rcode, const struct addr *addrs,
			   size_t n, uint32_t ttl, size_t max_len)
{
	static uint8_t out[65536];
	struct dns_rr rrs[64];
	size_t an, nrr = 0;
	uint8_t rc2;
	int len;

	len = dns_response_build(q, rcode, addrs, n, ttl, out, max_len);
	if (len == -ENOSPC) {
		/* only when the question and OPT alone cannot fit */
		INV(12 + strlen(q->name) + 2 + 4 + (q->edns ? 11 : 0) > max_len);
		return;
	}
	INV(len >= 12);
	INV((size_t)len <= max_len);
	INV(get16(out) == q->id);
	INV(out[2] & 0x80);		 /* QR */
	INV(((out[2] >> 3) & 0xf) == 0); /* opcode QUERY */
	INV(!!(out[2] & 0x01) == q->rd); /* RD echoed */
	INV((out[3] & 0xf) == rcode);
	INV(get16(out + 4) == (q->qtype ? 1 : 0));
	an = get16(out + 6);
	INV(an <= n);
	INV(!!(out[2] & 0x02) == (an < n)); /* TC exactly when answers were dropped */
	INV(get16(out + 8) == 0);
	INV(get16(out + 10) == (q->edns ? 1 : 0));
	if (!q->qtype || q->qclass != DNS_CLASS_IN || an < n || n > 64)
		return;
	INV(!dns_answer_parse(out, (size_t)len, q->id, q->name, q->qtype, &rc2, rrs, 64, &nrr));
	INV(rc2 == rcode);
	INV(nrr == n);
	for (size_t i = 0; i < n; i++) {
		INV(!memcmp(&rrs[i].addr, &addrs[i], sizeof(addrs[i])));
		INV(rrs[i].ttl == (ttl & 0x80000000u ? 0 : ttl));
		INV(!strcmp(rrs[i].owner, q->name));
	}
}

static struct addr pool_v4[40], pool_v6[40];

static void pools_init(void)
{
	static bool done;

	if (done)
		return;
	for (int i = 0; i < 40; i++) {
		addr_from_v4(&pool_v4[i], htonl(0xc0000200u + (uint32_t)i));
		memset(pool_v6[i].b, 0, 16);
		pool_v6[i].b[0] = 0x20;
		pool_v6[i].b[1] = 0x01;
		pool_v6[i].b[2] = 0x0d;
		pool_v6[i].b[3] = 0xb8;
		pool_v6[i].b[15] = (uint8_t)i;
	}
	pool_v6[39] = pool_v4[0]; /* v4-mapped, as an AAAA may carry */
	done = true;
}

static void fuzz_query(const uint8_t *msg, size_t len, uint8_t sel)
{
	struct dns_query q, before;
	size_t n;
	int rc;

	memset(&q, 0xa5, sizeof(q));
	before = q;
	rc = dns_query_parse(msg, len, &q);
	INV(rc == 0 || rc == -EINVAL || rc == -EOPNOTSUPP);
	if (len < 12) {
		INV(rc == -EINVAL);
		INV(!memcmp(&q, &before, sizeof(q))); /* no header: nothing written */
		return;
	}
	INV(q.id == get16(msg));
	if (rc) {
		/* the error answer the responder sends: a bare header */
		INV(q.qtype == 0 && !q.edns);
		check_response(&q, rc == -EOPNOTSUPP ? DNS_RCODE_NOTIMP : DNS_RCODE_FORMERR, NULL,
			       0, 0, max_lens[(sel >> 5) & 3]);
		return;
	}
	check_name(q.name);
	INV(q.qtype != 0);
	INV(q.edns_size >= 512);
	INV(q.edns || q.edns_size == 512);
	n = len % 41;
	check_response(&q, DNS_RCODE_NOERROR, q.qtype == DNS_TYPE_A ? pool_v4 : pool_v6, n,
		       (uint32_t)len * 2654435761u, max_lens[(sel >> 5) & 3]);
	check_response(&q, DNS_RCODE_NXDOMAIN, NULL, 0, 0, 512);
	q.edns = !q.edns;
	check_response(&q, DNS_RCODE_NOERROR, q.qtype == DNS_TYPE_A ? pool_v4 : pool_v6, n, 60,
		       65535);
}

static void fuzz_answer(const uint8_t *msg, size_t len, uint8_t sel)
{
	const char *name = names[sel & 3];
	uint16_t qtype = qtypes[(sel >> 2) & 3], id;
	struct dns_rr rrs[16];
	struct addr addrs[4];
	size_t n = 777, n_addrs, dropped;
	uint8_t rcode = 77;
	uint32_t ttl;
	int rc;

	id = len >= 2 ? get16(msg) : 0;
	if (sel & 0x80)
		id ^= 1;
	rc = dns_answer_parse(msg, len, id, name, qtype, &rcode, rrs, 16, &n);
	INV(rc == 0 || rc == -EINVAL || rc == -E2BIG);
	if (rc) {
		INV(n == 777 && rcode == 77); /* written only on success */
		return;
	}
	INV(!(sel & 0x80));
	INV(rcode <= 15);
	INV(n <= 16);
	for (size_t i = 0; i < n; i++) {
		const struct dns_rr *r = &rrs[i];

		check_name(r->owner);
		INV(r->rclass == DNS_CLASS_IN);
		INV(r->ttl <= 0x7fffffffu);
		INV(r->type == DNS_TYPE_A || r->type == DNS_TYPE_AAAA || r->type == DNS_TYPE_CNAME);
		if (r->type == DNS_TYPE_A)
			INV(addr_is_v4(&r->addr));
		if (r->type == DNS_TYPE_CNAME)
			check_name(r->target);
	}

	rc = dns_chain_resolve(rrs, n, name, qtype, 1 + ((sel >> 5) & 3) * 3, addrs, 4, &n_addrs,
			       &dropped, &ttl);
	INV(rc == 0 || rc == -ELOOP);
	if (rc)
		return;
	INV(n_addrs <= 4);
	INV(n_addrs + dropped <= n);
	INV(ttl <= 0x7fffffffu);
	if (qtype != DNS_TYPE_A && qtype != DNS_TYPE_AAAA)
		INV(n_addrs == 0 && dropped == 0);
	for (size_t i = 0; i < n_addrs; i++) {
		if (qtype == DNS_TYPE_A)
			INV(addr_is_v4(&addrs[i]));
		for (size_t j = 0; j < i; j++)
			INV(memcmp(&addrs[i], &addrs[j], sizeof(addrs[i])));
	}

	/* the answer the responder would give a session that asked this */
	struct dns_query q = {.id = (uint16_t)(id * 31),
			      .rd = sel & 1,
			      .qtype = qtype,
			      .qclass = DNS_CLASS_IN,
			      .edns = sel & 0x10,
			      .edns_size = 1232};

	strcpy(q.name, name);
	check_response(&q, rcode, addrs, n_addrs, ttl, max_lens[(sel >> 5) & 3]);
}

/* dns_query_build of the input as a name: what it takes parses back. */
static void fuzz_build(const uint8_t *msg, size_t len, uint8_t sel)
{
	char name[300];
	uint8_t out[600];
	struct dns_query q;
	size_t l = len < sizeof(name) - 1 ? len : sizeof(name) - 1;
	int rc;

	memcpy(name, msg, l);
	name[l] = '\0';
	rc = dns_query_build(0x1234, name, qtypes[(sel >> 2) & 3], out, sizeof(out));
	if (rc < 0) {
		INV(rc == -EINVAL);
		return;
	}
	INV(rc <= (int)sizeof(out));
	INV(!dns_query_parse(out, (size_t)rc, &q));
	INV(q.id == 0x1234 && q.rd && q.qtype == qtypes[(sel >> 2) & 3]);
	INV(!strcasecmp(q.name, name));
	check_name(q.name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *msg;
	uint8_t sel;

	if (size < 1)
		return 0;
	pools_init();
	sel = data[0];
	/* an exact-size copy, so ASan sees any read past the message */
	msg = malloc(size - 1 ? size - 1 : 1);
	if (!msg)
		return 0;
	memcpy(msg, data + 1, size - 1);
	fuzz_query(msg, size - 1, sel);
	fuzz_answer(msg, size - 1, sel);
	fuzz_build(msg, size - 1, sel);
	free(msg);
	return 0;
}
