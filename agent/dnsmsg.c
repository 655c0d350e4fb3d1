/* The DNS codec of errand's responder (contract in dnsmsg.h): queries from
 * sessions and answers from upstream are both hostile, so every read is
 * bounds checked and names are decompressed iteratively under a hop limit. */
#include <errno.h>
#include <string.h>

#include "agent/dnsmsg.h"

#define DNS_HDR_LEN 12
#define DNS_WIRE_NAME_MAX 255 /* DNS_NAME_MAX characters plus the first length and the root */
#define DNS_LABEL_MAX 63
/* Real compressors chain a handful of pointers; targets must decrease too, so
 * this only bounds the work a hostile message can ask for. */
#define DNS_PTR_HOPS 128
#define DNS_EDNS_SIZE 1232 /* advertised in our OPT: fits common paths unfragmented */
#define DNS_RR_FIXED 10	   /* type, class, ttl, rdlength */
#define DNS_OPT_LEN 11	   /* root owner and a fixed part, no options */
#define DNS_MSG_MAX 65535  /* a TCP message's length is 16 bits */

#define DNS_F_QR 0x8000
#define DNS_F_TC 0x0200
#define DNS_F_RD 0x0100
#define DNS_F_RA 0x0080
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xf)
#define DNS_RCODE(flags) ((flags)&0xf)
#define DNS_OPCODE_QUERY 0

struct dns_hdr {
	uint16_t id, flags, qdcount, ancount, nscount, arcount;
};

/* A record's fixed part; rdata is the offset of its data in the message. */
struct dns_rr_hdr {
	uint16_t type, rclass, rdlen;
	uint32_t ttl;
	size_t rdata;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

/* True if n bytes from off lie within limit; written so nothing can wrap. */
static bool fits(size_t limit, size_t off, size_t n)
{
	return off <= limit && n <= limit - off;
}

/* RFC 2181 section 8: a TTL with the top bit set is to be read as 0. */
static uint32_t ttl_sane(uint32_t ttl)
{
	return ttl & 0x80000000u ? 0 : ttl;
}

/* Bytes a label may hold: printable ASCII without space, and no '.', which
 * would make the presentation form ambiguous. Host rules narrow it further. */
static bool label_byte_ok(uint8_t c)
{
	return c > 0x20 && c < 0x7f && c != '.';
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* ASCII case-insensitive, so the locale cannot change what matches. */
static bool name_eq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (lower(*a) != lower(*b))
			return false;
	return *a == *b;
}

static void hdr_read(const uint8_t *buf, struct dns_hdr *h)
{
	h->id = get16(buf);
	h->flags = get16(buf + 2);
	h->qdcount = get16(buf + 4);
	h->ancount = get16(buf + 6);
	h->nscount = get16(buf + 8);
	h->arcount = get16(buf + 10);
}

/* Reads the name at *off. With out, decodes it to lowercase presentation form
 * and refuses bytes label_byte_ok() refuses; without, only checks its
 * structure (to step over names of records nobody looks at). Every pointer
 * must point into the body and before where the current run of labels began,
 * so targets strictly decrease: loops and forward pointers are refused and
 * the walk ends even without the hop limit. On success *off is past the
 * name's bytes in place (after its first pointer, if any). */
static int name_read(const uint8_t *buf, size_t len, size_t *off, char *out)
{
	char tmp[DNS_NAME_MAX + 1];
	size_t pos = *off, run = *off, end = 0, n = 0;
	bool jumped = false;
	int hops = 0;

	for (;;) {
		uint8_t c;

		if (pos >= len)
			return -EINVAL;
		c = buf[pos];
		if (c == 0)
			break;
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (pos + 1 >= len)
				return -EINVAL;
			target = (size_t)(c & 0x3f) << 8 | buf[pos + 1];
			if (target < DNS_HDR_LEN || target >= run || ++hops > DNS_PTR_HOPS)
				return -EINVAL;
			if (!jumped)
				end = pos + 2;
			jumped = true;
			run = pos = target;
			continue;
		}
		/* 0x40 and 0x80 are the obsolete extended and binary label types */
		if (c > DNS_LABEL_MAX)
			return -EINVAL;
		if (!fits(len, pos + 1, c) || n + (n ? 1 : 0) + c > DNS_NAME_MAX)
			return -EINVAL;
		if (n)
			tmp[n++] = '.';
		for (size_t i = 0; i < c; i++) {
			uint8_t b = buf[pos + 1 + i];

			if (out && !label_byte_ok(b))
				return -EINVAL;
			tmp[n++] = lower((char)b);
		}
		pos += 1 + c;
	}
	if (!jumped)
		end = pos + 1;
	if (out) {
		tmp[n] = '\0';
		memcpy(out, tmp, n + 1);
	}
	*off = end;
	return 0;
}

/* Writes name ("" for the root, no trailing dot) in wire form, uncompressed.
 * Returns its length or -EINVAL for an empty or long label, a long name, or a
 * byte label_byte_ok() refuses. Case is kept as given. */
static int name_encode(const char *name, uint8_t wire[DNS_WIRE_NAME_MAX])
{
	size_t n = 0, len, start;

	if (!name)
		return -EINVAL;
	len = strnlen(name, DNS_NAME_MAX + 1);
	if (len > DNS_NAME_MAX)
		return -EINVAL;
	if (len) {
		start = 0;
		for (size_t i = 0; i <= len; i++) {
			size_t l;

			if (i < len && name[i] != '.') {
				if (!label_byte_ok((uint8_t)name[i]))
					return -EINVAL;
				continue;
			}
			l = i - start;
			if (l == 0 || l > DNS_LABEL_MAX)
				return -EINVAL;
			wire[n++] = (uint8_t)l;
			memcpy(wire + n, name + start, l);
			n += l;
			start = i + 1;
		}
	}
	wire[n++] = 0;
	return (int)n;
}

/* Reads a record's fixed part at *off (its owner already stepped over) and
 * checks its rdata lies in the message; *off moves past the rdata. */
static int rr_hdr_read(const uint8_t *buf, size_t len, size_t *off, struct dns_rr_hdr *rr)
{
	size_t p = *off;

	if (!fits(len, p, DNS_RR_FIXED))
		return -EINVAL;
	rr->type = get16(buf + p);
	rr->rclass = get16(buf + p + 2);
	rr->ttl = get32(buf + p + 4);
	rr->rdlen = get16(buf + p + 8);
	rr->rdata = p + DNS_RR_FIXED;
	if (!fits(len, rr->rdata, rr->rdlen))
		return -EINVAL;
	*off = rr->rdata + rr->rdlen;
	return 0;
}

/* The question's name as its wire form wrote it (n bytes, checked by
 * name_read already: a query's first name has no pointer to take), with
 * the case of each letter kept, into q->asked. */
static void asked_copy(const uint8_t *w, size_t n, struct dns_query *q)
{
	size_t o = 0;

	for (size_t i = 0; i < n && w[i] && o < sizeof(q->asked) - 1;) {
		size_t c = w[i++];

		if (o)
			q->asked[o++] = '.';
		for (size_t k = 0; k < c && i < n && o < sizeof(q->asked) - 1; k++)
			q->asked[o++] = (char)w[i++];
	}
	q->asked[o] = '\0';
	/* a name that differs other than in case is not the one parsed */
	if (strcasecmp(q->asked, q->name))
		q->asked[0] = '\0';
}

/* The one additional record a query may carry: OPT, owned by the root, its
 * options well formed (RFC 6891 6.1.2). */
static int opt_read(const uint8_t *buf, size_t len, size_t *off, struct dns_query *q)
{
	char owner[DNS_NAME_MAX + 1];
	struct dns_rr_hdr rr;
	size_t p, end;
	int rc;

	rc = name_read(buf, len, off, owner);
	if (rc)
		return rc;
	if (owner[0])
		return -EINVAL;
	rc = rr_hdr_read(buf, len, off, &rr);
	if (rc)
		return rc;
	if (rr.type != DNS_TYPE_OPT)
		return -EINVAL;
	end = rr.rdata + rr.rdlen;
	for (p = rr.rdata; p < end;) {
		if (!fits(end, p, 4))
			return -EINVAL;
		p += 4;
		if (!fits(end, p, get16(buf + p - 2)))
			return -EINVAL;
		p += get16(buf + p - 2);
	}
	q->edns = true;
	q->edns_size = rr.rclass > DNS_UDP_MAX ? rr.rclass : DNS_UDP_MAX;
	return 0;
}

static int query_body(const uint8_t *buf, size_t len, const struct dns_hdr *h, struct dns_query *q)
{
	size_t off = DNS_HDR_LEN;
	int rc;

	if (h->flags & DNS_F_QR)
		return -EINVAL;
	if (DNS_OPCODE(h->flags) != DNS_OPCODE_QUERY)
		return -EOPNOTSUPP;
	/* a query has no reason to be truncated; taking part of one is guessing */
	if (h->flags & DNS_F_TC)
		return -EINVAL;
	if (h->qdcount != 1 || h->ancount || h->nscount || h->arcount > 1)
		return -EINVAL;
	rc = name_read(buf, len, &off, q->name);
	if (rc)
		return rc;
	asked_copy(buf + DNS_HDR_LEN, off - DNS_HDR_LEN, q);
	if (!fits(len, off, 4))
		return -EINVAL;
	q->qtype = get16(buf + off);
	q->qclass = get16(buf + off + 2);
	off += 4;
	/* type 0 is reserved; dns_response_build reads it as "no question" */
	if (q->qtype == 0)
		return -EINVAL;
	q->edns_size = DNS_UDP_MAX;
	if (h->arcount) {
		rc = opt_read(buf, len, &off, q);
		if (rc)
			return rc;
	}
	/* trailing bytes are not part of any DNS message: refused, not ignored */
	return off == len ? 0 : -EINVAL;
}

int dns_query_parse(const uint8_t *buf, size_t len, struct dns_query *out)
{
	struct dns_query q = {};
	struct dns_hdr h;
	int rc;

	if (!buf || !out || len < DNS_HDR_LEN)
		return -EINVAL;
	hdr_read(buf, &h);
	q.id = h.id;
	q.rd = h.flags & DNS_F_RD;
	rc = query_body(buf, len, &h, &q);
	if (rc) {
		/* What an error answer needs: id and RD; qtype 0 means no question. */
		memset(out, 0, sizeof(*out));
		out->id = q.id;
		out->rd = q.rd;
		return rc;
	}
	*out = q;
	return 0;
}

/* One answer-section record of interest, decoded into r. */
static int answer_rr_read(const uint8_t *buf, size_t len, size_t owner_off,
			  const struct dns_rr_hdr *rr, struct dns_rr *r)
{
	uint32_t be;
	size_t t;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = name_read(buf, len, &owner_off, r->owner);
	if (rc)
		return rc;
	r->type = rr->type;
	r->rclass = rr->rclass;
	r->ttl = ttl_sane(rr->ttl);
	switch (rr->type) {
	case DNS_TYPE_A:
		if (rr->rdlen != 4)
			return -EINVAL;
		memcpy(&be, buf + rr->rdata, 4); /* network order, as addr_from_v4 wants */
		addr_from_v4(&r->addr, be);
		return 0;
	case DNS_TYPE_AAAA:
		if (rr->rdlen != 16)
			return -EINVAL;
		memcpy(r->addr.b, buf + rr->rdata, 16);
		return 0;
	case DNS_TYPE_CNAME:
		t = rr->rdata;
		rc = name_read(buf, len, &t, r->target);
		if (rc)
			return rc;
		/* the target must be exactly the rdata, not spill past or stop short */
		return t == rr->rdata + rr->rdlen ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

int dns_answer_parse(const uint8_t *buf, size_t len, uint16_t id, const char *name, uint16_t qtype,
		     uint8_t *rcode, struct dns_rr *rrs, size_t max, size_t *n)
{
	char qname[DNS_NAME_MAX + 1];
	struct dns_hdr h;
	size_t off = DNS_HDR_LEN, count = 0;
	int rc;

	if (!buf || !name || !rcode || !n || (max && !rrs) || len < DNS_HDR_LEN)
		return -EINVAL;
	hdr_read(buf, &h);
	/* TC: the answer section may be cut short; the caller retries over TCP
	 * (c-ares does by itself) rather than take part of an RRset as all. */
	if (!(h.flags & DNS_F_QR) || h.id != id || DNS_OPCODE(h.flags) != DNS_OPCODE_QUERY ||
	    (h.flags & DNS_F_TC) || h.qdcount != 1)
		return -EINVAL;
	rc = name_read(buf, len, &off, qname);
	if (rc)
		return rc;
	if (!fits(len, off, 4) || get16(buf + off) != qtype ||
	    get16(buf + off + 2) != DNS_CLASS_IN || !name_eq(qname, name))
		return -EINVAL;
	off += 4;
	/* authority and additional are never read: nothing errand takes is there */
	for (unsigned int i = 0; i < h.ancount; i++) {
		size_t owner_off = off;
		struct dns_rr_hdr rr;

		rc = name_read(buf, len, &off, NULL);
		if (rc)
			return rc;
		rc = rr_hdr_read(buf, len, &off, &rr);
		if (rc)
			return rc;
		if (rr.rclass != DNS_CLASS_IN ||
		    (rr.type != DNS_TYPE_A && rr.type != DNS_TYPE_AAAA &&
		     rr.type != DNS_TYPE_CNAME))
			continue;
		if (count == max)
			return -E2BIG;
		rc = answer_rr_read(buf, len, owner_off, &rr, &rrs[count]);
		if (rc)
			return rc;
		count++;
	}
	*rcode = DNS_RCODE(h.flags);
	*n = count;
	return 0;
}

/* The first CNAME owned by owner; a name has at most one (RFC 2181 10.1). */
static const struct dns_rr *cname_of(const struct dns_rr *rrs, size_t n, const char *owner)
{
	for (size_t i = 0; i < n; i++)
		if (rrs[i].type == DNS_TYPE_CNAME && rrs[i].rclass == DNS_CLASS_IN &&
		    name_eq(rrs[i].owner, owner))
			return &rrs[i];
	return NULL;
}

int dns_chain_resolve(const struct dns_rr *rrs, size_t n, const char *name, uint16_t qtype,
		      int max_depth, struct addr *addrs, size_t max_addrs, size_t *n_addrs,
		      size_t *dropped, uint32_t *ttl)
{
	const struct dns_rr *c;
	const char *cur = name;
	size_t depth = 0, taken = 0, lost = 0;
	uint32_t low = UINT32_MAX;

	if ((n && !rrs) || !name || max_depth < 0 || (max_addrs && !addrs) || !n_addrs ||
	    !dropped || !ttl)
		return -EINVAL;
	while ((c = cname_of(rrs, n, cur))) {
		if (qtype == DNS_TYPE_CNAME) {
			/* the CNAME is the answer: no addresses to take */
			*n_addrs = 0;
			*dropped = 0;
			*ttl = c->ttl;
			return 0;
		}
		/* a chain longer than the records given must revisit one: a loop */
		if (++depth > (size_t)max_depth || depth > n)
			return -ELOOP;
		if (c->ttl < low)
			low = c->ttl;
		cur = c->target;
	}
	if (qtype == DNS_TYPE_A || qtype == DNS_TYPE_AAAA) {
		for (size_t i = 0; i < n; i++) {
			const struct dns_rr *r = &rrs[i];
			bool dup = false;

			if (r->type != qtype || r->rclass != DNS_CLASS_IN ||
			    !name_eq(r->owner, cur))
				continue;
			for (size_t j = 0; j < taken && !dup; j++)
				dup = !memcmp(&addrs[j], &r->addr, sizeof(r->addr));
			if (dup)
				continue;
			if (taken == max_addrs) {
				lost++;
				continue;
			}
			addrs[taken++] = r->addr;
			if (r->ttl < low)
				low = r->ttl;
		}
	}
	*n_addrs = taken;
	*dropped = lost;
	*ttl = depth || taken ? low : 0; /* nothing used: nothing to keep */
	return 0;
}

/* The record type for a, or 0 if it cannot answer qtype. An AAAA answer
 * carries all 16 bytes as upstream gave them, v4-mapped or not. */
static uint16_t answer_type(uint16_t qtype, const struct addr *a)
{
	switch (qtype) {
	case DNS_TYPE_A:
		return addr_is_v4(a) ? DNS_TYPE_A : 0;
	case DNS_TYPE_AAAA:
		return DNS_TYPE_AAAA;
	default:
		return addr_is_v4(a) ? DNS_TYPE_A : DNS_TYPE_AAAA;
	}
}

int dns_response_build(const struct dns_query *q, uint8_t rcode, const struct addr *addrs, size_t n,
		       uint32_t ttl, uint8_t *out, size_t max_len)
{
	uint8_t wire[DNS_WIRE_NAME_MAX];
	bool question, tc = false;
	size_t pos, fixed, room, ancount = 0;
	uint16_t flags;
	int wlen = 0;

	if (!q || !out || (n && !addrs) || rcode > 0xf)
		return -EINVAL;
	if (max_len > DNS_MSG_MAX)
		max_len = DNS_MSG_MAX;
	/* qtype 0 comes from a failed dns_query_parse: answer without a question */
	question = q->qtype != 0;
	if (question) {
		wlen = name_encode(q->asked[0] ? q->asked : q->name, wire);
		if (wlen < 0)
			return wlen;
	} else if (n) {
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (!answer_type(q->qtype, &addrs[i]))
			return -EINVAL;
	fixed = DNS_HDR_LEN + (question ? (size_t)wlen + 4 : 0) + (q->edns ? DNS_OPT_LEN : 0);
	if (fixed > max_len)
		return -ENOSPC;

	/* Answers in order while they fit; the OPT's room is kept for it. */
	room = max_len - fixed;
	pos = DNS_HDR_LEN;
	if (question) {
		memcpy(out + pos, wire, (size_t)wlen);
		pos += (size_t)wlen;
		put16(out + pos, q->qtype);
		put16(out + pos + 2, q->qclass);
		pos += 4;
	}
	for (size_t i = 0; i < n && ancount < 0xffff; i++) {
		uint16_t type = answer_type(q->qtype, &addrs[i]);
		size_t rdlen = type == DNS_TYPE_A ? 4 : 16, size = 2 + DNS_RR_FIXED + rdlen;

		if (size > room) {
			tc = true;
			break;
		}
		room -= size;
		put16(out + pos, 0xc000 | DNS_HDR_LEN); /* the question's name */
		put16(out + pos + 2, type);
		put16(out + pos + 4, DNS_CLASS_IN);
		put32(out + pos + 6, ttl_sane(ttl));
		put16(out + pos + 10, (uint16_t)rdlen);
		memcpy(out + pos + 12, type == DNS_TYPE_A ? addrs[i].b + 12 : addrs[i].b, rdlen);
		pos += size;
		ancount++;
	}
	if (q->edns) {
		out[pos] = 0; /* root owner */
		put16(out + pos + 1, DNS_TYPE_OPT);
		put16(out + pos + 3, DNS_EDNS_SIZE);
		put32(out + pos + 5, 0); /* extended rcode 0, version 0, no DO */
		put16(out + pos + 9, 0);
		pos += DNS_OPT_LEN;
	}
	flags = DNS_F_QR | DNS_F_RA | rcode | (q->rd ? DNS_F_RD : 0) | (tc ? DNS_F_TC : 0);
	put16(out, q->id);
	put16(out + 2, flags);
	put16(out + 4, question ? 1 : 0);
	put16(out + 6, (uint16_t)ancount);
	put16(out + 8, 0);
	put16(out + 10, q->edns ? 1 : 0);
	return (int)pos;
}

int dns_query_build(uint16_t id, const char *name, uint16_t qtype, uint8_t *out, size_t max_len)
{
	uint8_t wire[DNS_WIRE_NAME_MAX];
	int wlen;
	size_t len;

	if (!out)
		return -EINVAL;
	wlen = name_encode(name, wire);
	if (wlen < 0)
		return wlen;
	len = DNS_HDR_LEN + (size_t)wlen + 4;
	if (len > max_len)
		return -ENOSPC;
	put16(out, id);
	put16(out + 2, DNS_F_RD); /* errand asks recursive resolvers */
	put16(out + 4, 1);
	memset(out + 6, 0, 6);
	memcpy(out + DNS_HDR_LEN, wire, (size_t)wlen);
	put16(out + DNS_HDR_LEN + wlen, qtype);
	put16(out + DNS_HDR_LEN + wlen + 2, DNS_CLASS_IN);
	return (int)len;
}
