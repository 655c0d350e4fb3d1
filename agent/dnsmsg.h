/* DNS messages as errand's responder reads and writes them: queries from
 * sessions, answers from upstream, and the answers it sends back. The parser
 * is errand's own and is fuzzed (selftests/fuzz/dnsmsg.c). */
#ifndef ERRAND_DNSMSG_H
#define ERRAND_DNSMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/addr.h"

#define DNS_NAME_MAX 253 /* presentation form, no trailing dot */
#define DNS_TYPE_A 1
#define DNS_TYPE_NS 2
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_SOA 6
#define DNS_TYPE_TXT 16
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_OPT 41
#define DNS_TYPE_ANY 255
#define DNS_CLASS_IN 1

#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5

#define DNS_UDP_MAX 512 /* without EDNS */

struct dns_query {
	uint16_t id;
	bool rd;		     /* recursion desired, echoed */
	char name[DNS_NAME_MAX + 1]; /* lowercased, no trailing dot; "" for the root */
	/* name as asked, its case kept: the answer's question echoes it, for
	 * a client that randomizes case (0x20) and checks it back; "": name */
	char asked[DNS_NAME_MAX + 1];
	uint16_t qtype, qclass;
	bool edns;	    /* an OPT record was present */
	uint16_t edns_size; /* its UDP payload size (at least 512) */
};

/* Parses a query: QR=0, opcode QUERY, exactly one question, no answer or
 * authority records, at most one OPT in additional. Names are decoded with
 * compression pointers (loops and forward pointers refused), each label
 * 1..63 bytes, the whole at most 253 characters; bytes outside printable
 * ASCII in a label are refused (errand's host rules admit only
 * [a-z0-9-_] anyway). Returns 0, -EINVAL (answer FORMERR), -EOPNOTSUPP
 * (opcode other than QUERY: answer NOTIMP). On -EOPNOTSUPP and on -EINVAL
 * after a readable header, out->id is set so an error answer can be sent. */
int dns_query_parse(const uint8_t *buf, size_t len, struct dns_query *out);

struct dns_rr {
	char owner[DNS_NAME_MAX + 1]; /* lowercased, no trailing dot */
	uint16_t type, rclass;
	uint32_t ttl;
	struct addr addr;	       /* A (v4-mapped) and AAAA */
	char target[DNS_NAME_MAX + 1]; /* CNAME */
};

/* Parses an upstream answer: header (must be QR=1, id as expected), the
 * question (must equal name/qtype, case-insensitively), then the answer
 * section: A, AAAA and CNAME records of class IN are returned in order, other
 * records skipped; rdata lengths checked (A 4, AAAA 16). At most max records
 * (more: -E2BIG). Returns 0 or -EINVAL; *rcode is the header's. */
int dns_answer_parse(const uint8_t *buf, size_t len, uint16_t id, const char *name, uint16_t qtype,
		     uint8_t *rcode, struct dns_rr *rrs, size_t max, size_t *n);

/* Follows the CNAME chain from name through rrs with owner continuity (each
 * step's owner is the previous step's target; records whose owner is not on
 * the chain are ignored), at most max_depth CNAMEs (more: -ELOOP), then
 * collects the addresses of qtype owned by the chain's last name, at most
 * max_addrs (more are dropped silently, counted in *dropped). *ttl is the
 * lowest TTL over the CNAMEs used and the address records taken. 0 or -errno. */
int dns_chain_resolve(const struct dns_rr *rrs, size_t n, const char *name, uint16_t qtype,
		      int max_depth, struct addr *addrs, size_t max_addrs, size_t *n_addrs,
		      size_t *dropped, uint32_t *ttl);

/* Builds the answer to q: id, QR=1, RD echoed, RA=1, AA=0, rcode; the
 * question as asked; one record per address, owned by the queried name, of
 * q->qtype (A for v4-mapped, AAAA otherwise), with ttl; an OPT record when q
 * had one. If it would exceed max_len, answers are dropped and TC is set.
 * Returns the length written, or -errno. */
int dns_response_build(const struct dns_query *q, uint8_t rcode, const struct addr *addrs, size_t n,
		       uint32_t ttl, uint8_t *out, size_t max_len);
/* Builds a query for name/qtype with the given id (for tests and tools). */
int dns_query_build(uint16_t id, const char *name, uint16_t qtype, uint8_t *out, size_t max_len);

#endif
