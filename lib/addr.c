/* Addresses in errand's one 16-byte form (IPv4 v4-mapped): parsing, RFC 5952
 * text, ranges, and the forbidden-range table the DNS responder and the BPF
 * loader share; an address is judged by bpf/policy.h, the BPF programs' own
 * code, so both judge it the same way. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/addr.h"
#include "lib/util.h"

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool addr_is_v4(const struct addr *a)
{
	return !memcmp(a->b, v4_mapped_prefix, sizeof(v4_mapped_prefix));
}

uint32_t addr_v4(const struct addr *a)
{
	uint32_t be;

	memcpy(&be, a->b + 12, 4);
	return be;
}

void addr_from_v4(struct addr *out, uint32_t be)
{
	memcpy(out->b, v4_mapped_prefix, sizeof(v4_mapped_prefix));
	memcpy(out->b + 12, &be, 4);
}

int addr_parse(const char *s, struct addr *out)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (!s)
		return -EINVAL;
	/* inet_pton, not inet_aton: "127.1" and "0x7f.0.0.1" are not addresses here */
	if (inet_pton(AF_INET, s, &a4) == 1) {
		addr_from_v4(out, a4.s_addr);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &a6) == 1) {
		memcpy(out->b, a6.s6_addr, 16);
		return 0;
	}
	return -EINVAL;
}

/* Decimal 1..65535; 0 or -EINVAL (not a number), -ERANGE (0 or too big). */
static int port_parse(const char *s, uint16_t *port)
{
	unsigned long v = 0;
	size_t i;

	if (!*s)
		return -EINVAL;
	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (v <= 65535)
			v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -ERANGE;
	*port = (uint16_t)v;
	return 0;
}

int addr_port_parse(const char *s, struct addr *out, uint16_t *port)
{
	char host[INET6_ADDRSTRLEN];
	const char *p, *colon;
	struct addr a;
	uint16_t pt = 0;
	size_t len;
	int rc;

	if (!s)
		return -EINVAL;
	if (s[0] == '[') {
		/* brackets only for IPv6: they exist to set the port apart from its colons */
		p = strchr(s, ']');
		if (!p)
			return -EINVAL;
		len = (size_t)(p - s - 1);
		if (len >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, len);
		host[len] = '\0';
		if (addr_parse(host, &a) || strchr(host, ':') == NULL)
			return -EINVAL;
		if (p[1] == ':') {
			rc = port_parse(p + 2, &pt);
			if (rc)
				return rc;
		} else if (p[1]) {
			return -EINVAL;
		}
	} else {
		colon = strchr(s, ':');
		if (colon && !strchr(colon + 1, ':')) {
			/* one colon: IPv4 with a port; an IPv6 address has at least two */
			len = (size_t)(colon - s);
			if (len >= sizeof(host))
				return -EINVAL;
			memcpy(host, s, len);
			host[len] = '\0';
			if (addr_parse(host, &a) || !addr_is_v4(&a))
				return -EINVAL;
			rc = port_parse(colon + 1, &pt);
			if (rc)
				return rc;
		} else if (addr_parse(s, &a)) {
			return -EINVAL;
		}
	}
	*out = a;
	*port = pt;
	return 0;
}

/* Are the bits past prefixlen all zero? */
static bool host_bits_clear(const struct addr *a, unsigned prefixlen)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned first = i * 8;
		uint8_t mask;

		if (first + 8 <= prefixlen)
			continue;
		mask = first >= prefixlen ? 0xff : (uint8_t)(0xff >> (prefixlen - first));
		if (a->b[i] & mask)
			return false;
	}
	return true;
}

int cidr_parse(const char *s, struct cidr *out)
{
	char host[INET6_ADDRSTRLEN];
	const char *slash;
	unsigned long plen = 0, max;
	struct cidr c;
	size_t len, i;

	if (!s)
		return -EINVAL;
	slash = strchr(s, '/');
	len = slash ? (size_t)(slash - s) : strlen(s);
	if (len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (addr_parse(host, &c.a))
		return -EINVAL;
	/* "::ffff:10.0.0.0/104" is text in the v6 form; its prefix counts 128 bits */
	max = addr_is_v4(&c.a) && !strchr(host, ':') ? 32 : 128;
	if (slash) {
		if (!slash[1] || strlen(slash + 1) > 3)
			return -EINVAL;
		for (i = 1; slash[i]; i++) {
			if (slash[i] < '0' || slash[i] > '9')
				return -EINVAL;
			plen = plen * 10 + (unsigned long)(slash[i] - '0');
		}
		if (plen > max)
			return -EINVAL;
	} else {
		plen = max;
	}
	if (max == 32)
		plen += 96;
	/* 10.1.2.3/8 is refused rather than masked: the writer meant one of two things */
	if (!host_bits_clear(&c.a, (unsigned)plen))
		return -EINVAL;
	c.prefixlen = (uint8_t)plen;
	*out = c;
	return 0;
}

bool cidr_contains(const struct cidr *c, const struct addr *a)
{
	unsigned full = c->prefixlen / 8, rest = c->prefixlen % 8;

	if (c->prefixlen > 128)
		return false;
	if (memcmp(c->a.b, a->b, full))
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		if ((c->a.b[full] & mask) != (a->b[full] & mask))
			return false;
	}
	return true;
}

const char *addr_str(const struct addr *a, char buf[ADDR_STRLEN])
{
	int best = -1, best_len = 0, cur = -1, cur_len = 0;
	uint16_t w[8];
	char *p = buf;

	if (addr_is_v4(a)) {
		const uint8_t *v = a->b + 12;

		snprintf(buf, ADDR_STRLEN, "%u.%u.%u.%u", v[0], v[1], v[2], v[3]);
		return buf;
	}
	/* RFC 5952: the longest run of two or more zero groups (the first on a
	 * tie) becomes "::", hex in lower case without leading zeros. */
	for (int i = 0; i < 8; i++) {
		w[i] = (uint16_t)(a->b[2 * i] << 8 | a->b[2 * i + 1]);
		if (w[i] == 0) {
			if (cur < 0) {
				cur = i;
				cur_len = 0;
			}
			cur_len++;
			if (cur_len > best_len) {
				best = cur;
				best_len = cur_len;
			}
		} else {
			cur = -1;
		}
	}
	if (best_len < 2)
		best = -1;
	for (int i = 0; i < 8; i++) {
		if (i == best) {
			*p++ = ':';
			*p++ = ':';
			i += best_len - 1;
			continue;
		}
		if (i > 0 && i != best + best_len)
			*p++ = ':';
		p += snprintf(p, 5, "%x", w[i]);
	}
	*p = '\0';
	return buf;
}

#define V4(o0, o1, o2, o3, len)                                                                    \
	{                                                                                          \
		.a = {.b = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, o0, o1, o2, o3}},            \
		.prefixlen = 96 + (len),                                                           \
	}
/* an IPv6 range given by its first four 16-bit groups and its last one */
#define V6(w0, w1, w2, w3, w7, len)                                                                \
	{                                                                                          \
		.a = {.b = {(w0) >> 8, 0xff & (w0), (w1) >> 8, 0xff & (w1), (w2) >> 8,             \
			    0xff & (w2), (w3) >> 8, 0xff & (w3), 0, 0, 0, 0, 0, 0, (w7) >> 8,      \
			    0xff & (w7)}},                                                         \
		.prefixlen = (len),                                                                \
	}

/* IPv4 ranges first, then IPv6. A range is an IPv4 one when
 * addr_is_v4(&c->a) && c->prefixlen >= 96, and goes into the 4-byte LPM trie
 * with prefixlen - 96; every other range goes into the 16-byte trie.
 *
 * ::ffff:0:0/96 (IPv4-mapped) is deliberately not in this table. errand keeps
 * every IPv4 address in that form, so as an entry it would read as
 * 0.0.0.0/0 and forbid all of IPv4. A mapped address is an IPv4 address to
 * errand and is judged by the IPv4 entries alone, by addr_forbidden() here
 * and by the BPF programs alike; that is how the carried address of this form
 * is "judged" as doc/design.md asks. */
static const struct cidr forbidden[] = {
	V4(0, 0, 0, 0, 8),	    /* "this network" */
	V4(10, 0, 0, 0, 8),	    /* private */
	V4(100, 64, 0, 0, 10),	    /* shared address space (carrier-grade NAT) */
	V4(127, 0, 0, 0, 8),	    /* loopback */
	V4(169, 254, 0, 0, 16),	    /* link-local */
	V4(172, 16, 0, 0, 12),	    /* private */
	V4(192, 0, 0, 0, 24),	    /* IETF protocol assignments */
	V4(192, 0, 2, 0, 24),	    /* TEST-NET-1 */
	V4(192, 88, 99, 0, 24),	    /* 6to4 relay anycast (deprecated) */
	V4(192, 168, 0, 0, 16),	    /* private */
	V4(198, 18, 0, 0, 15),	    /* benchmarking; test worlds declare it public */
	V4(198, 51, 100, 0, 24),    /* TEST-NET-2 */
	V4(203, 0, 113, 0, 24),	    /* TEST-NET-3 */
	V4(224, 0, 0, 0, 4),	    /* multicast */
	V4(240, 0, 0, 0, 4),	    /* reserved */
	V4(255, 255, 255, 255, 32), /* limited broadcast */
	V4(169, 254, 169, 254, 32), /* cloud metadata (AWS, GCP, Azure, ...) */
	V4(168, 63, 129, 16, 32),   /* Azure wire server: outside every range above */
	V4(100, 100, 100, 200, 32), /* Alibaba Cloud metadata */
	V6(0, 0, 0, 0, 0, 128),	    /* unspecified */
	V6(0, 0, 0, 0, 1, 128),	    /* loopback */
	V6(0, 0, 0, 0, 0, 96),	    /* IPv4-compatible ::a.b.c.d (deprecated) */
	{			    /* SIIT ::ffff:0:a.b.c.d (IPv4-translated) */
	 .a = {.b = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0}},
	 .prefixlen = 96},
	V6(0x64, 0xff9b, 0, 0, 0, 96),	     /* NAT64 well-known prefix */
	V6(0x64, 0xff9b, 1, 0, 0, 48),	     /* NAT64 local use */
	V6(0x100, 0, 0, 0, 0, 64),	     /* discard-only */
	V6(0x100, 0, 0, 1, 0, 64),	     /* dummy prefix (RFC 9780) */
	V6(0x2001, 0, 0, 0, 0, 23),	     /* IETF protocol assignments */
	V6(0x2001, 0, 0, 0, 0, 32),	     /* Teredo */
	V6(0x2001, 0xdb8, 0, 0, 0, 32),	     /* documentation */
	V6(0x2002, 0, 0, 0, 0, 16),	     /* 6to4 */
	V6(0x3fff, 0, 0, 0, 0, 20),	     /* documentation */
	V6(0x5f00, 0, 0, 0, 0, 16),	     /* segment routing SIDs */
	V6(0xfc00, 0, 0, 0, 0, 7),	     /* unique local */
	V6(0xfe80, 0, 0, 0, 0, 10),	     /* link-local */
	V6(0xfec0, 0, 0, 0, 0, 10),	     /* site-local (deprecated) */
	V6(0xff00, 0, 0, 0, 0, 8),	     /* multicast */
	V6(0xfd00, 0xec2, 0, 0, 0x254, 128), /* AWS metadata over IPv6 */
};

const struct cidr *forbidden_ranges(size_t *n)
{
	*n = ARRAY_SIZE(forbidden);
	return forbidden;
}

/* A range is for IPv4 when its prefix covers the whole v4-mapped prefix. */
static bool cidr_is_v4(const struct cidr *c)
{
	return c->prefixlen >= 96 && addr_is_v4(&c->a);
}

/* Is a in one of the ranges of its own family? A v6 range that spans the
 * mapped prefix (::/0) never applies to IPv4: the BPF programs look IPv4 up
 * in the 4-byte tries only, and this must agree with them. */
static bool in_ranges(const struct addr *a, const struct cidr *c, size_t n)
{
	bool v4 = addr_is_v4(a);

	for (size_t i = 0; i < n; i++)
		if (cidr_is_v4(&c[i]) == v4 && cidr_contains(&c[i], a))
			return true;
	return false;
}

static bool judged_forbidden(const struct addr *a, const struct cidr *pub, size_t n)
{
	return in_ranges(a, forbidden, ARRAY_SIZE(forbidden)) && !in_ranges(a, pub, n);
}

/* The lookups of bpf/policy.h over the table above and the public ranges
 * given: the BPF programs make the same ones in their LPM tries. */
struct policy_public {
	const struct cidr *ranges;
	size_t n;
};

#define POLICY_CTX struct policy_public
#include "policy.h"

static bool policy_v4_listed(const struct policy_public *c, __u32 v4)
{
	struct addr a;

	addr_from_v4(&a, v4);
	return judged_forbidden(&a, c->ranges, c->n);
}

static bool policy_v6_listed(const struct policy_public *c, const __u8 a[16])
{
	struct addr x;

	memcpy(x.b, a, 16);
	return judged_forbidden(&x, c->ranges, c->n);
}

bool addr_forbidden(const struct addr *a, const struct cidr *public_ranges, size_t n)
{
	struct policy_public c = {.ranges = public_ranges, .n = n};

	return policy_forbidden(&c, a->b);
}
