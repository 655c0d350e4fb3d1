/* Guarantee: the DNS codec takes only well-formed messages (queries from
 * sessions, answers from upstream) and never reads past one, follows CNAME
 * chains only along their owners, and builds answers that parse back the same. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/dnsmsg.h"
#include "lib/addr.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

/* A message written by hand, so tests can say exactly what is on the wire. */
struct msg {
	uint8_t b[8192];
	size_t len;
};

static void m_u8(struct msg *m, unsigned int v)
{
	m->b[m->len++] = (uint8_t)v;
}

static void m_u16(struct msg *m, unsigned int v)
{
	m_u8(m, v >> 8);
	m_u8(m, v & 0xff);
}

static void m_u32(struct msg *m, uint32_t v)
{
	m_u16(m, v >> 16);
	m_u16(m, v & 0xffff);
}

static void m_bytes(struct msg *m, const void *p, size_t n)
{
	memcpy(m->b + m->len, p, n);
	m->len += n;
}

static void m_hdr(struct msg *m, unsigned int id, unsigned int flags, unsigned int qd,
		  unsigned int an, unsigned int ns, unsigned int ar)
{
	m->len = 0;
	m_u16(m, id);
	m_u16(m, flags);
	m_u16(m, qd);
	m_u16(m, an);
	m_u16(m, ns);
	m_u16(m, ar);
}

/* Labels of a dotted name without the root byte, so a pointer may follow. */
static void m_labels(struct msg *m, const char *name)
{
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		m_u8(m, (unsigned int)l);
		m_bytes(m, name, l);
		name += l + (dot ? 1 : 0);
	}
}

static void m_name(struct msg *m, const char *name)
{
	m_labels(m, name);
	m_u8(m, 0);
}

static void m_ptr(struct msg *m, size_t off)
{
	m_u16(m, 0xc000 | (unsigned int)off);
}

static void m_question(struct msg *m, const char *name, unsigned int qtype)
{
	m_name(m, name);
	m_u16(m, qtype);
	m_u16(m, DNS_CLASS_IN);
}

/* An OPT record with the given UDP size and no options. */
static void m_opt(struct msg *m, unsigned int size)
{
	m_u8(m, 0);
	m_u16(m, DNS_TYPE_OPT);
	m_u16(m, size);
	m_u32(m, 0);
	m_u16(m, 0);
}

/* A record's fixed part after its owner. */
static void m_rr(struct msg *m, unsigned int type, unsigned int rclass, uint32_t ttl,
		 unsigned int rdlen)
{
	m_u16(m, type);
	m_u16(m, rclass);
	m_u32(m, ttl);
	m_u16(m, rdlen);
}

static void m_a(struct msg *m, uint32_t ttl, const char *ip)
{
	struct addr a;

	addr_parse(ip, &a);
	m_rr(m, DNS_TYPE_A, DNS_CLASS_IN, ttl, 4);
	m_bytes(m, a.b + 12, 4);
}

static void m_aaaa(struct msg *m, uint32_t ttl, const char *ip)
{
	struct addr a;

	addr_parse(ip, &a);
	m_rr(m, DNS_TYPE_AAAA, DNS_CLASS_IN, ttl, 16);
	m_bytes(m, a.b, 16);
}

static void m_set16(struct msg *m, size_t off, unsigned int v)
{
	m->b[off] = (uint8_t)(v >> 8);
	m->b[off + 1] = v & 0xff;
}

/* Parsers get a heap copy of exactly len bytes, so ASan sees any read past it. */
static int query_parse(const uint8_t *b, size_t len, struct dns_query *q)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	memcpy(copy, b, len);
	rc = dns_query_parse(copy, len, q);
	free(copy);
	return rc;
}

static int qparse(const struct msg *m, struct dns_query *q)
{
	return query_parse(m->b, m->len, q);
}

static int answer_parse(const uint8_t *b, size_t len, uint16_t id, const char *name, uint16_t qtype,
			uint8_t *rcode, struct dns_rr *rrs, size_t max, size_t *n)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	memcpy(copy, b, len);
	rc = dns_answer_parse(copy, len, id, name, qtype, rcode, rrs, max, n);
	free(copy);
	return rc;
}

static int aparse(const struct msg *m, uint16_t id, const char *name, uint16_t qtype,
		  uint8_t *rcode, struct dns_rr *rrs, size_t max, size_t *n)
{
	return answer_parse(m->b, m->len, id, name, qtype, rcode, rrs, max, n);
}

static const char *ip(const struct addr *a)
{
	static char buf[4][ADDR_STRLEN];
	static int i;

	return addr_str(a, buf[i++ % 4]);
}

static struct addr addr_of(const char *s)
{
	struct addr a;

	if (addr_parse(s, &a)) {
		printf("# bad address %s\n", s);
		exit(1);
	}
	return a;
}

static void test_query_normal(void)
{
	struct dns_query q;
	struct msg m;
	int len;

	len = dns_query_build(0x1234, "WWW.Example.COM", DNS_TYPE_A, m.b, sizeof(m.b));
	CHECK_INT(len, 12 + 17 + 4, "dns_query_build writes header, name and type/class");
	m.len = len > 0 ? (size_t)len : 0;
	if (!CHECK_INT(qparse(&m, &q), 0, "an A query parses"))
		return;
	CHECK_INT(q.id, 0x1234, "its id");
	CHECK_TRUE(q.rd, "its RD bit");
	CHECK_STR(q.name, "www.example.com", "its name, lowercased");
	CHECK_STR(q.asked, "WWW.Example.COM", "its name as asked, case kept");
	{
		uint8_t out[512];
		int n = dns_response_build(&q, DNS_RCODE_NOERROR, NULL, 0, 60, out, sizeof(out));

		/* a client randomizing case (0x20) finds its own question back */
		CHECK_TRUE(n > 12 + 17 && !memcmp(out + 12, m.b + 12, 17),
			   "the answer's question is the query's, byte for byte");
	}
	CHECK_INT(q.qtype, DNS_TYPE_A, "its qtype");
	CHECK_INT(q.qclass, DNS_CLASS_IN, "its qclass");
	CHECK_FALSE(q.edns, "no EDNS");
	CHECK_INT(q.edns_size, 512, "edns_size is 512 without EDNS");

	m_hdr(&m, 7, 0, 1, 0, 0, 0);
	m_question(&m, "_xmpp._tcp.a*b.example", DNS_TYPE_AAAA);
	CHECK_INT(qparse(&m, &q), 0, "'_' and '*' in labels are accepted");
	CHECK_FALSE(q.rd, "RD clear is read as clear");
	CHECK_STR(q.name, "_xmpp._tcp.a*b.example", "name with '_' and '*'");
	CHECK_INT(q.qtype, DNS_TYPE_AAAA, "AAAA qtype");

	m_hdr(&m, 7, 0x0100, 1, 0, 0, 0);
	m_question(&m, "", DNS_TYPE_NS);
	CHECK_INT(qparse(&m, &q), 0, "a query for the root parses");
	CHECK_STR(q.name, "", "the root is \"\"");

	static const struct {
		const char *label, *what;
	} bad[] = {
		{"a b", "a space"},	     {"a.b", "a '.' inside a label"},	  {"a\x7f", "DEL"},
		{"a\x01", "a control byte"}, {"caf\xc3\xa9", "a non-ASCII byte"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		size_t l = strlen(bad[i].label);

		m_hdr(&m, 7, 0, 1, 0, 0, 0);
		m_u8(&m, (unsigned int)l);
		m_bytes(&m, bad[i].label, l);
		m_name(&m, "example");
		m_u16(&m, DNS_TYPE_A);
		m_u16(&m, DNS_CLASS_IN);
		CHECK_INT(qparse(&m, &q), -EINVAL, "a label with %s is refused", bad[i].what);
	}

	m_hdr(&m, 7, 0, 1, 0, 0, 0);
	m_question(&m, "example.com", 0);
	CHECK_INT(qparse(&m, &q), -EINVAL, "qtype 0 (reserved) is refused");
}

static void test_query_edns(void)
{
	struct dns_query q;
	struct msg m;

	m_hdr(&m, 9, 0x0100, 1, 0, 0, 1);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_opt(&m, 4096);
	if (CHECK_INT(qparse(&m, &q), 0, "a query with OPT parses")) {
		CHECK_TRUE(q.edns, "edns is set");
		CHECK_INT(q.edns_size, 4096, "edns_size is the OPT's class");
	}
	m_hdr(&m, 9, 0x0100, 1, 0, 0, 1);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_opt(&m, 100);
	if (CHECK_INT(qparse(&m, &q), 0, "OPT with UDP size 100 parses"))
		CHECK_INT(q.edns_size, 512, "an OPT size below 512 is read as 512");

	/* an option: cookie, 8 bytes */
	m_hdr(&m, 9, 0, 1, 0, 0, 1);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_u8(&m, 0);
	m_rr(&m, DNS_TYPE_OPT, 1232, 0, 12);
	m_u16(&m, 10);
	m_u16(&m, 8);
	m_bytes(&m, "cookie!!", 8);
	CHECK_INT(qparse(&m, &q), 0, "OPT with a cookie option parses");
	m_set16(&m, m.len - 10, 9);
	CHECK_INT(qparse(&m, &q), -EINVAL, "OPT whose option overruns its rdata is refused");
	m_set16(&m, m.len - 10, 8);
	m_set16(&m, m.len - 14, 13);
	CHECK_INT(qparse(&m, &q), -EINVAL, "OPT whose rdlength overruns the message is refused");

	m_hdr(&m, 9, 0, 1, 0, 0, 1);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_name(&m, "example.com");
	m_rr(&m, DNS_TYPE_OPT, 1232, 0, 0);
	CHECK_INT(qparse(&m, &q), -EINVAL, "OPT with a non-root owner is refused");

	m_hdr(&m, 9, 0, 1, 0, 0, 1);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_u8(&m, 0);
	m_rr(&m, DNS_TYPE_TXT, DNS_CLASS_IN, 0, 0);
	CHECK_INT(qparse(&m, &q), -EINVAL, "an additional record other than OPT is refused");

	m_hdr(&m, 9, 0, 1, 0, 0, 2);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_opt(&m, 1232);
	m_opt(&m, 1232);
	CHECK_INT(qparse(&m, &q), -EINVAL, "two OPT records are refused");

	/* the OPT's root owner as a pointer to the question's root byte */
	m_hdr(&m, 9, 0, 1, 0, 0, 1);
	m_question(&m, "example.com", DNS_TYPE_A);
	m_ptr(&m, 12 + 13 - 1);
	m_rr(&m, DNS_TYPE_OPT, 1232, 0, 0);
	CHECK_INT(qparse(&m, &q), 0, "an OPT owner compressed to the question's root byte parses");
}

static void test_query_pointers(void)
{
	struct dns_query q;
	struct msg m;

	/* The question is a query's first name: a pointer in it can only go
	 * into the header (offset 4 holds 0: QDCOUNT's high byte, the root) or
	 * forward. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_labels(&m, "www");
	m_ptr(&m, 4);
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	CHECK_INT(qparse(&m, &q), -EINVAL, "a question compressed into the header is refused");

	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_labels(&m, "www");
	m_ptr(&m, 12 + 4 + 2 + 4);
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	m_name(&m, "example.com");
	CHECK_INT(qparse(&m, &q), -EINVAL, "a forward pointer in the question is refused");

	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_labels(&m, "www");
	m_ptr(&m, 12);
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	CHECK_INT(qparse(&m, &q), -EINVAL, "a pointer loop (to the name's own start) is refused");

	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_ptr(&m, 12);
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	CHECK_INT(qparse(&m, &q), -EINVAL, "a pointer to itself is refused");

	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_u8(&m, 0x40 | 1);
	m_u8(&m, 'a');
	m_u8(&m, 0);
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	CHECK_INT(qparse(&m, &q), -EINVAL, "the extended label type 0x40 is refused");
	m.b[12] = 0x80 | 1;
	CHECK_INT(qparse(&m, &q), -EINVAL, "the label type 0x80 is refused");
}

static void test_query_lengths(void)
{
	char label[70], name[300];
	struct dns_query q;
	struct msg m;

	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(name, sizeof(name), "%s.example", label);
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_question(&m, name, DNS_TYPE_A);
	CHECK_INT(qparse(&m, &q), 0, "a 63-byte label is accepted");

	/* 64 in a length byte is 0x40: the refused extended label type */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_u8(&m, 64);
	for (int i = 0; i < 64; i++)
		m_u8(&m, 'a');
	m_name(&m, "example");
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	CHECK_INT(qparse(&m, &q), -EINVAL, "a 64-byte label is refused");
	label[63] = 'a';
	label[64] = '\0';
	snprintf(name, sizeof(name), "%s.example", label);
	CHECK_INT(dns_query_build(1, name, DNS_TYPE_A, m.b, sizeof(m.b)), -EINVAL,
		  "dns_query_build refuses a 64-byte label");

	/* 63.63.63.61: 253 characters */
	memset(name, 'a', 253);
	for (int i = 63; i < 253; i += 64)
		name[i] = '.';
	name[253] = '\0';
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_question(&m, name, DNS_TYPE_A);
	if (CHECK_INT(qparse(&m, &q), 0, "a 253-character name is accepted"))
		CHECK_INT(strlen(q.name), 253, "and decoded whole");
	CHECK_INT(dns_query_build(1, name, DNS_TYPE_A, m.b, sizeof(m.b)), 12 + 255 + 4,
		  "dns_query_build writes a 253-character name");

	name[253] = 'a';
	name[254] = '\0';
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_question(&m, name, DNS_TYPE_A);
	CHECK_INT(qparse(&m, &q), -EINVAL, "a 254-character name is refused");
	CHECK_INT(dns_query_build(1, name, DNS_TYPE_A, m.b, sizeof(m.b)), -EINVAL,
		  "dns_query_build refuses a 254-character name");

	/* 4 labels of 63: 255 characters, 257 bytes on the wire */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	for (int l = 0; l < 4; l++) {
		m_u8(&m, 63);
		for (int i = 0; i < 63; i++)
			m_u8(&m, 'b');
	}
	m_u8(&m, 0);
	m_u16(&m, DNS_TYPE_A);
	m_u16(&m, DNS_CLASS_IN);
	CHECK_INT(qparse(&m, &q), -EINVAL, "a 255-character name is refused");

	CHECK_INT(dns_query_build(1, "a..b", DNS_TYPE_A, m.b, sizeof(m.b)), -EINVAL,
		  "dns_query_build refuses an empty label");
	CHECK_INT(dns_query_build(1, "a.b.", DNS_TYPE_A, m.b, sizeof(m.b)), -EINVAL,
		  "dns_query_build refuses a trailing dot");
	CHECK_INT(dns_query_build(1, "example.com", DNS_TYPE_A, m.b, 28), -ENOSPC,
		  "dns_query_build refuses a buffer too small");
}

static void test_query_truncated(void)
{
	struct dns_query q, before;
	int bad_rc = -1, bad_out = -1;
	struct msg m;

	m_hdr(&m, 0xbeef, 0x0100, 1, 0, 0, 1);
	m_question(&m, "www.example.com", DNS_TYPE_AAAA);
	m_u8(&m, 0);
	m_rr(&m, DNS_TYPE_OPT, 1232, 0, 8);
	m_u16(&m, 10);
	m_u16(&m, 4);
	m_u32(&m, 0x01020304);
	CHECK_INT(qparse(&m, &q), 0, "the whole query (%zu bytes) parses", m.len);
	for (size_t l = 0; l < m.len; l++) {
		int rc;

		memset(&q, 0x5a, sizeof(q));
		before = q;
		rc = query_parse(m.b, l, &q);
		if (rc != -EINVAL && bad_rc < 0)
			bad_rc = (int)l;
		/* under 12 bytes nothing is written; from 12 on the id is */
		if ((l < 12 && memcmp(&q, &before, sizeof(q))) || (l >= 12 && q.id != 0xbeef))
			if (bad_out < 0)
				bad_out = (int)l;
	}
	CHECK_INT(bad_rc, -1, "every truncation (0..%zu bytes) is -EINVAL (first other: length)",
		  m.len - 1);
	CHECK_INT(bad_out, -1,
		  "truncations leave out alone under 12 bytes, set its id from 12 (first other)");

	m.b[m.len++] = 0;
	CHECK_INT(qparse(&m, &q), -EINVAL, "a trailing byte is refused");
}

static void test_query_header(void)
{
	struct dns_query q;
	struct msg m;

	m_hdr(&m, 5, 0, 0, 0, 0, 0);
	CHECK_INT(qparse(&m, &q), -EINVAL, "QDCOUNT 0 is refused");
	CHECK_INT(q.id, 5, "with the id set");

	m_hdr(&m, 5, 0, 2, 0, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_question(&m, "b.example", DNS_TYPE_A);
	CHECK_INT(qparse(&m, &q), -EINVAL, "QDCOUNT 2 is refused");

	m_hdr(&m, 5, 0, 1, 1, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_a(&m, 60, "192.0.2.1");
	CHECK_INT(qparse(&m, &q), -EINVAL, "a query with an answer record is refused");

	m_hdr(&m, 5, 0, 1, 0, 1, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_a(&m, 60, "192.0.2.1");
	CHECK_INT(qparse(&m, &q), -EINVAL, "a query with an authority record is refused");

	m_hdr(&m, 5, 0x8000, 1, 0, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	CHECK_INT(qparse(&m, &q), -EINVAL, "QR=1 is refused");

	m_hdr(&m, 5, 0x0200, 1, 0, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	CHECK_INT(qparse(&m, &q), -EINVAL, "TC in a query is refused");

	m_hdr(&m, 0x4242, 2 << 11 | 0x0100, 1, 0, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	CHECK_INT(qparse(&m, &q), -EOPNOTSUPP, "opcode STATUS is -EOPNOTSUPP");
	CHECK_INT(q.id, 0x4242, "with the id set");
	CHECK_TRUE(q.rd, "and RD, to echo");
	CHECK_INT(q.qtype, 0, "and qtype 0 (no question to echo)");

	m_hdr(&m, 0x4343, 4 << 11, 0, 0, 0, 0);
	CHECK_INT(qparse(&m, &q), -EOPNOTSUPP,
		  "opcode NOTIFY is -EOPNOTSUPP even without a question");
	CHECK_INT(q.id, 0x4343, "with the id set");
}

/* Upstream's answer for www.example.com A: a chain through two CNAMEs,
 * compressed as servers do, with records to skip between. */
static void answer_chain(struct msg *m)
{
	size_t cdn, edge;

	m_hdr(m, 0x77, 0x8180, 1, 8, 1, 0);
	m_question(m, "WWW.example.COM", DNS_TYPE_A); /* 0x20 randomized case */
	m_ptr(m, 12);
	m_rr(m, DNS_TYPE_CNAME, DNS_CLASS_IN, 300, 5 + 2 + 2);
	cdn = m->len;
	m_labels(m, "cdn");
	m_labels(m, "ex");
	m_ptr(m, 12 + 4 + 8); /* "com" */
	m_ptr(m, 12);
	m_rr(m, DNS_TYPE_TXT, DNS_CLASS_IN, 10, 4);
	m_bytes(m, "\003txt", 4);
	m_ptr(m, cdn);
	m_rr(m, DNS_TYPE_CNAME, DNS_CLASS_IN, 120, 7);
	edge = m->len;
	m_labels(m, "edge");
	m_ptr(m, cdn + 4); /* "ex.com" */
	m_ptr(m, edge);
	m_a(m, 60, "192.0.2.1");
	m_ptr(m, edge);
	m_rr(m, DNS_TYPE_A, 3, 60, 4); /* class CH: skipped */
	m_u32(m, 0x0a000001);
	m_ptr(m, edge);
	m_a(m, 0x80000000u | 5, "192.0.2.2"); /* top bit: read as 0 */
	m_ptr(m, edge);
	m_aaaa(m, 90, "2001:db8::1");
	m_name(m, "unrelated.example");
	m_a(m, 30, "198.51.100.7");
	/* authority: never read, so it need not even be well formed */
	m_bytes(m, "\xff\xff\xff", 3);
}

static void test_answer(void)
{
	struct dns_rr rrs[16];
	uint8_t rcode = 99;
	struct msg m;
	size_t n = 99;

	answer_chain(&m);
	if (!CHECK_INT(aparse(&m, 0x77, "www.example.com", DNS_TYPE_A, &rcode, rrs, 16, &n), 0,
		       "an answer with a CNAME chain, A and AAAA parses"))
		return;
	CHECK_INT(rcode, 0, "rcode NOERROR");
	if (!CHECK_INT(n, 6, "six records taken (TXT and class CH skipped)"))
		return;
	CHECK_STR(rrs[0].owner, "www.example.com", "record 0 owner (a pointer to the question)");
	CHECK_INT(rrs[0].type, DNS_TYPE_CNAME, "record 0 is a CNAME");
	CHECK_STR(rrs[0].target, "cdn.ex.com", "record 0 target (labels and a pointer)");
	CHECK_INT(rrs[0].ttl, 300, "record 0 ttl");
	CHECK_STR(rrs[1].owner, "cdn.ex.com", "record 1 owner (a pointer to a pointer)");
	CHECK_STR(rrs[1].target, "edge.ex.com", "record 1 target");
	CHECK_INT(rrs[1].ttl, 120, "record 1 ttl");
	CHECK_STR(rrs[2].owner, "edge.ex.com", "record 2 owner (three pointers deep)");
	CHECK_INT(rrs[2].type, DNS_TYPE_A, "record 2 is an A");
	CHECK_STR(ip(&rrs[2].addr), "192.0.2.1", "record 2 address, v4-mapped");
	CHECK_TRUE(addr_is_v4(&rrs[2].addr), "record 2 address is v4-mapped");
	CHECK_INT(rrs[2].rclass, DNS_CLASS_IN, "record 2 class");
	CHECK_STR(ip(&rrs[3].addr), "192.0.2.2", "record 3 address");
	CHECK_INT(rrs[3].ttl, 0, "a TTL with the top bit set is read as 0");
	CHECK_INT(rrs[4].type, DNS_TYPE_AAAA, "record 4 is an AAAA");
	CHECK_STR(ip(&rrs[4].addr), "2001:db8::1", "record 4 address");
	CHECK_STR(rrs[5].owner, "unrelated.example", "record 5 is returned with its owner");

	CHECK_INT(aparse(&m, 0x77, "WWW.EXAMPLE.COM", DNS_TYPE_A, &rcode, rrs, 16, &n), 0,
		  "the question matches case-insensitively");
	rcode = 99;
	n = 99;
	CHECK_INT(aparse(&m, 0x78, "www.example.com", DNS_TYPE_A, &rcode, rrs, 16, &n), -EINVAL,
		  "a mismatched id is refused");
	CHECK_INT(rcode * 1000 + n, 99099, "and rcode and n are left alone");
	CHECK_INT(aparse(&m, 0x77, "ww.example.com", DNS_TYPE_A, &rcode, rrs, 16, &n), -EINVAL,
		  "a mismatched question name is refused");
	CHECK_INT(aparse(&m, 0x77, "www.example.com.evil", DNS_TYPE_A, &rcode, rrs, 16, &n),
		  -EINVAL, "a longer question name is refused");
	CHECK_INT(aparse(&m, 0x77, "www.example.com", DNS_TYPE_AAAA, &rcode, rrs, 16, &n), -EINVAL,
		  "a mismatched qtype is refused");
	CHECK_INT(aparse(&m, 0x77, "www.example.com", DNS_TYPE_A, &rcode, rrs, 5, &n), -E2BIG,
		  "more records than max is -E2BIG");
	m.b[2] &= 0x7f;
	CHECK_INT(aparse(&m, 0x77, "www.example.com", DNS_TYPE_A, &rcode, rrs, 16, &n), -EINVAL,
		  "QR=0 is refused");
	m.b[2] |= 0x80 | 0x02;
	CHECK_INT(aparse(&m, 0x77, "www.example.com", DNS_TYPE_A, &rcode, rrs, 16, &n), -EINVAL,
		  "TC is refused (retry over TCP)");
	m.b[2] &= ~0x02;
	m_set16(&m, 4, 2);
	CHECK_INT(aparse(&m, 0x77, "www.example.com", DNS_TYPE_A, &rcode, rrs, 16, &n), -EINVAL,
		  "QDCOUNT 2 is refused");

	/* Every strict prefix of an answer without authority is refused. */
	answer_chain(&m);
	m_set16(&m, 8, 0);
	m.len -= 3;
	int bad = -1;

	for (size_t l = 0; l < m.len; l++)
		if (answer_parse(m.b, l, 0x77, "www.example.com", DNS_TYPE_A, &rcode, rrs, 16,
				 &n) != -EINVAL &&
		    bad < 0)
			bad = (int)l;
	CHECK_INT(bad, -1, "every truncation of an answer (0..%zu bytes) is -EINVAL (first other)",
		  m.len - 1);

	m_hdr(&m, 3, 0x8183, 1, 0, 1, 0);
	m_question(&m, "nx.example", DNS_TYPE_A);
	m_name(&m, "example");
	m_rr(&m, DNS_TYPE_SOA, DNS_CLASS_IN, 60, 0);
	n = 99;
	CHECK_INT(aparse(&m, 3, "nx.example", DNS_TYPE_A, &rcode, rrs, 16, &n), 0,
		  "an NXDOMAIN answer parses");
	CHECK_INT(rcode, DNS_RCODE_NXDOMAIN, "its rcode is NXDOMAIN");
	CHECK_INT(n, 0, "with no records");
}

static void test_answer_bad_rdata(void)
{
	struct dns_rr rrs[4];
	uint8_t rcode;
	struct msg m;
	size_t n;

	static const struct {
		unsigned int type, rdlen;
		const char *what;
	} bad[] = {
		{DNS_TYPE_A, 5, "an A record with rdlength 5"},
		{DNS_TYPE_A, 3, "an A record with rdlength 3"},
		{DNS_TYPE_AAAA, 4, "an AAAA record with rdlength 4"},
		{DNS_TYPE_AAAA, 17, "an AAAA record with rdlength 17"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		m_hdr(&m, 1, 0x8180, 1, 1, 0, 0);
		m_question(&m, "a.example", DNS_TYPE_A);
		m_ptr(&m, 12);
		m_rr(&m, bad[i].type, DNS_CLASS_IN, 60, bad[i].rdlen);
		for (unsigned int j = 0; j < bad[i].rdlen; j++)
			m_u8(&m, 1);
		CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
			  "%s is refused", bad[i].what);
	}

	m_hdr(&m, 1, 0x8180, 1, 1, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_A, DNS_CLASS_IN, 60, 8);
	m_u32(&m, 0x01020304);
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
		  "an rdlength past the end of the message is refused");

	m_hdr(&m, 1, 0x8180, 1, 1, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 60, 4);
	m_name(&m, "b.example"); /* 11 bytes */
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
		  "a CNAME target spilling past its rdlength is refused");

	m_hdr(&m, 1, 0x8180, 1, 1, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 60, 4);
	m_ptr(&m, 12);
	m_u16(&m, 0);
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
		  "a CNAME target shorter than its rdlength is refused");

	/* a record of another type is skipped whatever its rdata */
	m_hdr(&m, 1, 0x8180, 1, 1, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, 99, DNS_CLASS_IN, 60, 3);
	m_bytes(&m, "\xc0\xff\x00", 3);
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), 0,
		  "a record of an unknown type is skipped");
	CHECK_INT(n, 0, "and not returned");
}

/* Pointer loops and chains in upstream's answers: the bytes sit in the rdata
 * of a skipped record and a later owner points at them. */
static void test_answer_pointers(void)
{
	struct dns_rr rrs[4];
	uint8_t rcode;
	struct msg m;
	size_t n, base;

	m_hdr(&m, 1, 0x8180, 1, 2, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, 99, DNS_CLASS_IN, 60, 4);
	base = m.len;
	m_ptr(&m, base + 2); /* forward, to the next pointer */
	m_ptr(&m, base);     /* back to the first: a loop */
	m_ptr(&m, base + 2);
	m_a(&m, 60, "192.0.2.1");
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
		  "a two-pointer loop is refused");

	m_hdr(&m, 1, 0x8180, 1, 2, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, 99, DNS_CLASS_IN, 60, 4);
	base = m.len;
	m_u8(&m, 1);
	m_u8(&m, 'x');
	m_ptr(&m, base); /* a label, then back to itself */
	m_ptr(&m, base);
	m_a(&m, 60, "192.0.2.1");
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
		  "a label-and-pointer loop is refused");

	/* A chain of k pointers, each to the one before, the first to "a.example". */
	for (int k = 10; k <= 200; k += 190) {
		m_hdr(&m, 1, 0x8180, 1, 2, 0, 0);
		m_question(&m, "a.example", DNS_TYPE_A);
		m_ptr(&m, 12);
		m_rr(&m, 99, DNS_CLASS_IN, 60, (unsigned int)(2 * k));
		base = m.len;
		m_ptr(&m, 12);
		for (int i = 1; i < k; i++)
			m_ptr(&m, base + 2 * (size_t)(i - 1));
		m_ptr(&m, base + 2 * (size_t)(k - 1));
		m_a(&m, 60, "192.0.2.1");
		if (k == 10) {
			CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), 0,
				  "a chain of %d pointers is followed", k + 1);
			CHECK_STR(n == 1 ? rrs[0].owner : "", "a.example", "to the right name");
		} else {
			CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n),
				  -EINVAL, "a chain of %d pointers is refused (hop limit)", k + 1);
		}
	}

	/* a name grown past 253 characters through pointers */
	char label[64];

	memset(label, 'q', 63);
	label[63] = '\0';
	m_hdr(&m, 1, 0x8180, 1, 2, 0, 0);
	m_question(&m, "a.example", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, 99, DNS_CLASS_IN, 60, 3 * 66);
	base = m.len;
	m_labels(&m, label);
	m_ptr(&m, 12); /* 73 characters */
	m_labels(&m, label);
	m_ptr(&m, base); /* 137 */
	m_labels(&m, label);
	m_ptr(&m, base + 66); /* 201 */
	m_labels(&m, label);
	m_ptr(&m, base + 132); /* the owner: 265 */
	m_a(&m, 60, "192.0.2.1");
	CHECK_INT(aparse(&m, 1, "a.example", DNS_TYPE_A, &rcode, rrs, 4, &n), -EINVAL,
		  "a name over 253 characters through pointers is refused");
}

static struct dns_rr rr_cname(const char *owner, const char *target, uint32_t ttl)
{
	struct dns_rr r = {.type = DNS_TYPE_CNAME, .rclass = DNS_CLASS_IN, .ttl = ttl};

	strcpy(r.owner, owner);
	strcpy(r.target, target);
	return r;
}

static struct dns_rr rr_addr(const char *owner, const char *a, uint32_t ttl)
{
	struct dns_rr r = {.rclass = DNS_CLASS_IN, .ttl = ttl};

	strcpy(r.owner, owner);
	r.addr = addr_of(a);
	r.type = addr_is_v4(&r.addr) ? DNS_TYPE_A : DNS_TYPE_AAAA;
	return r;
}

static void test_chain(void)
{
	struct addr addrs[8];
	size_t n = 99, dropped = 99;
	uint32_t ttl = 99;
	int rc;

	struct dns_rr abc[] = {
		rr_addr("evil.example", "198.51.100.66", 5), /* not on the chain */
		rr_cname("evil.example", "c.example", 1),    /* not on the chain */
		rr_cname("a.example", "b.example", 300),
		rr_addr("a.example", "198.51.100.1", 5), /* a's, but a is not the end */
		rr_cname("b.example", "c.example", 60),
		rr_addr("c.example", "192.0.2.1", 120),
		rr_addr("c.example", "2001:db8::1", 2),
		rr_addr("c.example", "192.0.2.2", 40),
		rr_addr("c.example", "192.0.2.1", 1), /* a duplicate */
	};
	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "A.Example", DNS_TYPE_A, 8, addrs, 8, &n,
			       &dropped, &ttl);
	if (CHECK_INT(rc, 0, "a -> b -> c resolves")) {
		CHECK_INT(n, 2,
			  "to c's two A addresses (others' and AAAA ignored, duplicate once)");
		CHECK_STR(n > 0 ? ip(&addrs[0]) : "", "192.0.2.1", "first address");
		CHECK_STR(n > 1 ? ip(&addrs[1]) : "", "192.0.2.2", "second address");
		CHECK_INT(dropped, 0, "none dropped");
		CHECK_INT(ttl, 40, "ttl is the lowest over the CNAMEs and addresses taken");
	}
	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "a.example", DNS_TYPE_AAAA, 8, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, 0, "the same chain for AAAA");
	CHECK_STR(n == 1 ? ip(&addrs[0]) : "", "2001:db8::1", "gives c's AAAA");
	CHECK_INT(ttl, 2, "with its ttl");

	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "a.example", DNS_TYPE_A, 2, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, 0, "max_depth 2 allows two CNAMEs");
	n = dropped = ttl = 99;
	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "a.example", DNS_TYPE_A, 1, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, -ELOOP, "max_depth 1 with two CNAMEs is -ELOOP");
	CHECK_INT(n + dropped + ttl, 99 * 3, "and the outputs are left alone");

	struct dns_rr loop[] = {
		rr_cname("a.example", "b.example", 60),
		rr_cname("b.example", "A.example", 60),
		rr_addr("a.example", "192.0.2.1", 60),
	};
	rc = dns_chain_resolve(loop, ARRAY_SIZE(loop), "a.example", DNS_TYPE_A, 1000, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, -ELOOP, "a CNAME loop is -ELOOP whatever max_depth");

	struct dns_rr many[] = {
		rr_cname("a.example", "c.example", 500), rr_addr("c.example", "192.0.2.1", 100),
		rr_addr("c.example", "192.0.2.2", 90),	 rr_addr("c.example", "192.0.2.3", 5),
		rr_addr("c.example", "192.0.2.4", 5),	 rr_addr("c.example", "192.0.2.5", 5),
	};
	rc = dns_chain_resolve(many, ARRAY_SIZE(many), "a.example", DNS_TYPE_A, 8, addrs, 2, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, 0, "more addresses than max_addrs resolves");
	CHECK_INT(n, 2, "max_addrs taken");
	CHECK_INT(dropped, 3, "the rest counted as dropped");
	CHECK_INT(ttl, 90, "ttl over the addresses taken, not the dropped");

	many[0].ttl = 7;
	dns_chain_resolve(many, ARRAY_SIZE(many), "a.example", DNS_TYPE_A, 8, addrs, 8, &n,
			  &dropped, &ttl);
	CHECK_INT(ttl, 5, "ttl the lowest of all (all addresses taken)");
	many[0].ttl = 3;
	dns_chain_resolve(many, ARRAY_SIZE(many), "a.example", DNS_TYPE_A, 8, addrs, 8, &n,
			  &dropped, &ttl);
	CHECK_INT(ttl, 3, "ttl the CNAME's when it is lowest");

	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "a.example", DNS_TYPE_CNAME, 8, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, 0, "qtype CNAME resolves");
	CHECK_INT(n, 0, "to no addresses");
	CHECK_INT(ttl, 300, "with the first hop's ttl");

	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "nothing.example", DNS_TYPE_A, 8, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, 0, "a name with no records resolves");
	CHECK_INT(n + ttl, 0, "to no addresses, ttl 0");

	rc = dns_chain_resolve(abc, ARRAY_SIZE(abc), "b.example", DNS_TYPE_TXT, 8, addrs, 8, &n,
			       &dropped, &ttl);
	CHECK_INT(rc, 0, "qtype TXT follows the chain");
	CHECK_INT(n, 0, "and takes no addresses");
	CHECK_INT(ttl, 60, "ttl over the CNAMEs used");
}

static void test_response(void)
{
	struct dns_query q = {
		.id = 0x5151, .rd = true, .qtype = DNS_TYPE_A, .qclass = DNS_CLASS_IN};
	struct addr v4[40], v6[2];
	struct dns_rr rrs[64];
	uint8_t out[4096], rcode;
	size_t n;
	int len;

	strcpy(q.name, "api.example.com");
	for (int i = 0; i < 40; i++) {
		char s[32];

		snprintf(s, sizeof(s), "192.0.2.%d", i + 1);
		v4[i] = addr_of(s);
	}
	v6[0] = addr_of("2001:db8::1");
	v6[1] = addr_of("::ffff:192.0.2.9"); /* as upstream may give it in AAAA */

	len = dns_response_build(&q, DNS_RCODE_NOERROR, v4, 2, 300, out, 512);
	CHECK_INT(len, 12 + 17 + 4 + 2 * 16, "an A answer of two records: length");
	CHECK_INT(out[0] << 8 | out[1], 0x5151, "its id");
	CHECK_INT(out[2] << 8 | out[3], 0x8180, "its flags: QR, RD echoed, RA, NOERROR");
	n = 0;
	if (CHECK_INT(answer_parse(out, len > 0 ? (size_t)len : 0, 0x5151, "api.example.com",
				   DNS_TYPE_A, &rcode, rrs, 64, &n),
		      0, "the A answer parses back")) {
		CHECK_INT(n, 2, "two records");
		CHECK_STR(ip(&rrs[0].addr), "192.0.2.1", "first address back");
		CHECK_STR(ip(&rrs[1].addr), "192.0.2.2", "second address back");
		CHECK_STR(rrs[1].owner, "api.example.com", "owner back");
		CHECK_INT(rrs[0].ttl, 300, "ttl back");
	}

	q.qtype = DNS_TYPE_AAAA;
	q.rd = false;
	len = dns_response_build(&q, DNS_RCODE_NOERROR, v6, 2, 42, out, 512);
	CHECK_INT(len, 12 + 17 + 4 + 2 * 28, "an AAAA answer of two records: length");
	CHECK_INT(out[2] << 8 | out[3], 0x8080, "RD clear echoed");
	n = 0;
	if (CHECK_INT(answer_parse(out, len > 0 ? (size_t)len : 0, 0x5151, "api.example.com",
				   DNS_TYPE_AAAA, &rcode, rrs, 64, &n),
		      0, "the AAAA answer parses back")) {
		CHECK_INT(n, 2, "two records");
		CHECK_STR(ip(&rrs[0].addr), "2001:db8::1", "first address back");
		CHECK_INT(rrs[1].type, DNS_TYPE_AAAA, "a v4-mapped address stays AAAA");
		CHECK_STR(ip(&rrs[1].addr), "192.0.2.9", "second address back");
		CHECK_INT(rrs[1].ttl, 42, "ttl back");
	}
	CHECK_INT(dns_response_build(&q, 0, v4, 1, 42, out, 512) > 0, 1,
		  "a v4-mapped address answers AAAA");
	q.qtype = DNS_TYPE_A;
	CHECK_INT(dns_response_build(&q, 0, v6, 1, 42, out, 512), -EINVAL,
		  "an IPv6 address cannot answer A");

	/* 40 A records: 33 + 640 bytes, over 512 */
	len = dns_response_build(&q, DNS_RCODE_NOERROR, v4, 40, 60, out, 512);
	CHECK_TRUE(len > 0 && len <= 512, "40 A records in 512 bytes: length %d within 512", len);
	CHECK_TRUE(out[2] & 0x02, "TC is set");
	CHECK_INT(out[6] << 8 | out[7], (512 - 33) / 16, "as many records as fit");
	len = dns_response_build(&q, DNS_RCODE_NOERROR, v4, 40, 60, out, 4096);
	CHECK_FALSE(out[2] & 0x02, "in 4096 bytes TC is clear");
	CHECK_INT(out[6] << 8 | out[7], 40, "and all 40 are there");
	n = 0;
	answer_parse(out, len > 0 ? (size_t)len : 0, 0x5151, "api.example.com", DNS_TYPE_A, &rcode,
		     rrs, 64, &n);
	CHECK_STR(n == 40 ? ip(&rrs[39].addr) : "", "192.0.2.40", "the last parses back");

	len = dns_response_build(&q, DNS_RCODE_NXDOMAIN, NULL, 0, 0, out, 512);
	CHECK_INT(len, 12 + 17 + 4, "NXDOMAIN: header and question only");
	CHECK_INT(out[3] & 0xf, DNS_RCODE_NXDOMAIN, "rcode NXDOMAIN");
	CHECK_INT(out[6] << 8 | out[7], 0, "no answers");
	CHECK_INT(out[4] << 8 | out[5], 1, "the question kept");
	n = 99;
	CHECK_INT(answer_parse(out, len > 0 ? (size_t)len : 0, 0x5151, "api.example.com",
			       DNS_TYPE_A, &rcode, rrs, 64, &n),
		  0, "NXDOMAIN parses back");
	CHECK_INT(rcode * 100 + n, DNS_RCODE_NXDOMAIN * 100, "as NXDOMAIN, no records");

	q.edns = true;
	q.edns_size = 4096;
	len = dns_response_build(&q, DNS_RCODE_NOERROR, v4, 1, 60, out, 512);
	CHECK_INT(len, 12 + 17 + 4 + 16 + 11, "with EDNS: the OPT record added");
	CHECK_INT(out[10] << 8 | out[11], 1, "ARCOUNT 1");
	if (len == 12 + 17 + 4 + 16 + 11) {
		static const uint8_t opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};

		CHECK_TRUE(!memcmp(out + len - 11, opt, 11),
			   "the OPT: root, type 41, size 1232, no options");
	}
	CHECK_INT(answer_parse(out, len > 0 ? (size_t)len : 0, 0x5151, "api.example.com",
			       DNS_TYPE_A, &rcode, rrs, 64, &n),
		  0, "the EDNS answer parses back");
	len = dns_response_build(&q, DNS_RCODE_NOERROR, v4, 40, 60, out, 512);
	CHECK_TRUE(len > 0 && len <= 512 && (out[2] & 0x02),
		   "with EDNS and 40 records: within 512 (%d) and TC", len);
	CHECK_INT(out[10] << 8 | out[11], 1, "the OPT kept when truncating");
	CHECK_INT(out[len - 9], 41, "and last");

	CHECK_INT(dns_response_build(&q, 0, NULL, 0, 0, out, 40), -ENOSPC,
		  "a buffer too small for the question and OPT is -ENOSPC");
	CHECK_INT(dns_response_build(&q, 16, NULL, 0, 0, out, 512), -EINVAL,
		  "an rcode over 15 is refused");

	/* What the responder does with a query that failed to parse. */
	static const uint8_t status[] = {0xab, 0xcd, 0x11, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xff};

	CHECK_INT(query_parse(status, sizeof(status), &q), -EOPNOTSUPP, "a STATUS query");
	len = dns_response_build(&q, DNS_RCODE_NOTIMP, NULL, 0, 0, out, 512);
	CHECK_INT(len, 12, "its NOTIMP answer is a bare header");
	CHECK_INT(out[0] << 8 | out[1], 0xabcd, "with its id");
	CHECK_INT(out[2] << 8 | out[3], 0x8184, "QR, RD echoed, RA, NOTIMP");
	CHECK_INT(out[4] << 8 | out[5], 0, "no question");
	CHECK_INT(dns_response_build(&q, DNS_RCODE_NOTIMP, v4, 1, 0, out, 512), -EINVAL,
		  "no answers without a question");
}

int main(void)
{
	test_query_normal();
	test_query_edns();
	test_query_pointers();
	test_query_lengths();
	test_query_truncated();
	test_query_header();
	test_answer();
	test_answer_bad_rdata();
	test_answer_pointers();
	test_chain();
	test_response();
	return test_exit();
}
