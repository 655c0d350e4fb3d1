/* Addresses as errand keeps them: 16 bytes, IPv4 v4-mapped (::ffff:a.b.c.d),
 * so one form serves both families in maps, configuration and events.
 * Also the forbidden ranges of doc/design.md, as one table. */
#ifndef ERRAND_ADDR_H
#define ERRAND_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addr {
	uint8_t b[16];
};

/* A range; prefixlen counts bits of the 16-byte form, so 10.0.0.0/8 is
 * stored as ::ffff:10.0.0.0/104. */
struct cidr {
	struct addr a;
	uint8_t prefixlen;
};

#define ADDR_STRLEN 48 /* an IPv6 address in brackets with a port fits */

/* "198.18.0.1" or "2001:db8::1" (no brackets, no port). 0 or -EINVAL. */
int addr_parse(const char *s, struct addr *out);
/* "IP", "IP:PORT", "[IPv6]" or "[IPv6]:PORT"; *port is 0 when none is given.
 * 0 or -EINVAL (bad address), -ERANGE (port 0 or above 65535). */
int addr_port_parse(const char *s, struct addr *out, uint16_t *port);
/* "10.0.0.0/8", "fc00::/7"; a bare address is a /32 or /128. 0 or -EINVAL. */
int cidr_parse(const char *s, struct cidr *out);
bool addr_is_v4(const struct addr *a);
uint32_t addr_v4(const struct addr *a); /* network order; only for addr_is_v4() */
void addr_from_v4(struct addr *out, uint32_t be);
/* Writes "a.b.c.d" for v4-mapped addresses, RFC 5952 text otherwise. */
const char *addr_str(const struct addr *a, char buf[ADDR_STRLEN]);
bool cidr_contains(const struct cidr *c, const struct addr *a);

/* The forbidden ranges (doc/design.md "Forbidden ranges"): IANA special-purpose
 * ranges that are not globally reachable, cloud metadata addresses, and the
 * v6 forms that carry a v4 address. Static storage, never freed. */
const struct cidr *forbidden_ranges(size_t *n);
/* True if a is in a forbidden range and in none of the n public ranges given.
 * For NAT64, 6to4, Teredo, IPv4-compatible, SIIT and ISATAP forms the carried
 * IPv4 address is judged too. */
bool addr_forbidden(const struct addr *a, const struct cidr *public_ranges, size_t n);

#endif
