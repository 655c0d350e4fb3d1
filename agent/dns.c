/* The session's DNS responder (see dns.h). A name that is not allowed does
 * not exist and is never sent upstream, since a query name is a data channel.
 * An allowed name's addresses are filtered of forbidden ranges and written
 * into the session's allow map before the answer leaves, so the kernel never
 * refuses an address errand has just handed out, and never admits one it
 * did not. */
#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <poll.h>
#include <signal.h>

#include "agent/dns.h"
#include "agent/dnsmsg.h"
#include "agent/dnspriv.h"
#include "lib/util.h"

#define DNS_TCP_MAX 32
#define DNS_TCP_IDLE_NS (10ull * 1000000000ull)
/* The cache is set-associative: a name's hash picks a set of DNS_CACHE_WAYS
 * entries, so a lookup or an insertion costs the same however full it is. */
#define DNS_CACHE_SETS 64
#define DNS_CACHE_WAYS 8
#define DNS_CACHE_SIZE (DNS_CACHE_SETS * DNS_CACHE_WAYS)
/* A flood for one name must not become one upstream query a packet: a
 * negative answer (NXDOMAIN, NODATA, SERVFAIL, a timeout) is kept for
 * DNS_NEG_TTL_S and a TTL-0 answer for DNS_ZERO_TTL_S. */
#define DNS_NEG_TTL_S 5
#define DNS_ZERO_TTL_S 1
/* Upstream queries a session may make: a token bucket of DNS_UPSTREAM_BURST
 * refilled at DNS_UPSTREAM_RATE a second. A query over it is answered
 * SERVFAIL without an upstream query, counted, and logged at most every
 * DNS_LIMIT_LOG_S seconds. Queries for a name already asked upstream wait
 * for that answer (up to DNS_WAITERS of them) and cost no token. */
#define DNS_UPSTREAM_BURST 100
#define DNS_LIMIT_LOG_S 10
#define DNS_WAITERS 16
#define DNS_PENDING_BUCKETS 256
#define DNS_CHAIN_DEPTH 8
#define DNS_RR_MAX 64
#define DNS_UDP_BATCH 32
#define DNS_UDP_QMAX 4096
#define DNS_EDNS_MAX 1232
#define NS_PER_S 1000000000ull

struct tcp_conn {
	int fd;
	uint32_t gen; /* tells a reply for a closed and reused slot from a live one */
	uint64_t last_ns;
	size_t len;
	uint8_t buf[2 + 65535];
};

/* Where an answer goes back to. */
struct client {
	bool tcp;
	int udp; /* the UDP socket the query came on: DNS_SOCK_UDP4 or _UDP6 */
	int conn;
	uint32_t gen;
	struct sockaddr_storage from;
	socklen_t fromlen;
	struct dns_query q;
};

/* Queries in and answers out by the batch: one recvmmsg and one sendmmsg
 * for up to DNS_UDP_BATCH queries, instead of two system calls each. */
struct udp_batch {
	struct mmsghdr in[DNS_UDP_BATCH];
	struct iovec in_iov[DNS_UDP_BATCH];
	struct sockaddr_storage from[DNS_UDP_BATCH];
	uint8_t in_buf[DNS_UDP_BATCH][DNS_UDP_QMAX];
	struct mmsghdr out[DNS_UDP_BATCH];
	struct iovec out_iov[DNS_UDP_BATCH];
	struct sockaddr_storage to[DNS_UDP_BATCH];
	uint8_t out_buf[DNS_UDP_BATCH][DNS_EDNS_MAX];
	unsigned n_out;
	bool active; /* answers given now join the batch */
};

struct cache_entry {
	char name[DNS_NAME_MAX + 1];
	uint16_t qtype;
	uint8_t rcode;	     /* NOERROR (n may be 0: NODATA), NXDOMAIN or SERVFAIL */
	const char *why;     /* the denied-name reason a hit emits again; NULL: none */
	uint64_t expires_ns; /* 0: empty */
	/* Until when the agent's allow entries for these addresses outlast any
	 * answer from this entry (0: not known): a hit answered within it
	 * costs no round trip to the agent. Policy names only: a grant's
	 * entries can end with it. */
	uint64_t covered_ns;
	uint32_t ttl;
	size_t n;
	struct addr addrs[64];
};

struct pending;

struct dnsw {
	const struct errand_config *cfg;
	int chan; /* to the agent */
	char session[16];
	int listen[DNS_SOCKS]; /* UDP and TCP on the gateway's IPv4 and IPv6 addresses */
	struct tcp_conn *conns[DNS_TCP_MAX];
	uint32_t next_gen;
	struct udp_batch *ub;
	ares_channel ch;
	bool ares_ok;
	ares_socket_t socks[ARES_GETSOCK_MAXNUM]; /* as of the last pollfds */
	int sock_bits;
	struct cache_entry *cache;
	struct dnsp_names *names; /* for the caps; the agent keeps its own count */
	struct pending *pending[DNS_PENDING_BUCKETS]; /* upstream queries in flight */
	uint64_t tokens_milli; /* the upstream token bucket, in thousandths */
	uint64_t tokens_ns;    /* when it was last refilled */
	uint64_t limited;      /* queries refused by it since the last log line */
	uint64_t limited_total;
	uint64_t limit_log_ns;
	struct addr self[DNSP_SELF_MAX]; /* the agent namespace's own addresses */
	size_t n_self;
	struct grant_set grants; /* the session's, as the agent last sent them */
	bool quit;		 /* the agent went away */
	void *in;		 /* a message from the agent */
};

/* One upstream query in flight, and the clients waiting for its answer. */
struct pending {
	struct dnsw *r;
	struct pending *next; /* in r->pending[hash] */
	uint32_t hash;
	size_t n;
	struct client c[DNS_WAITERS];
};

/* FNV-1a over the (lowercased) name and the type. */
static uint32_t name_hash(const char *name, uint16_t qtype)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	h = (h ^ (qtype & 0xff)) * 16777619u;
	return (h ^ (qtype >> 8)) * 16777619u;
}

/* Sends one message to the agent. The channel is a SOCK_SEQPACKET socket:
 * a message arrives whole or not at all. */
static void chan_send(struct dnsw *r, const void *msg, size_t len)
{
	if (send(r->chan, msg, len, MSG_NOSIGNAL) != (ssize_t)len && errno != EINTR)
		r->quit = true;
}

static const char *const reasons[DNSP_R_MAX] = {
	[DNSP_R_NOT_ALLOWED] = "not-allowed", [DNSP_R_TYPE] = "type",	      [DNSP_R_CAP] = "cap",
	[DNSP_R_FORBIDDEN] = "forbidden",     [DNSP_R_UPSTREAM] = "upstream",
};

/* A denied-name event: the agent validates, escapes and emits it. */
static void deny(struct dnsw *r, const struct dns_query *q, const char *reason)
{
	struct dnsp_event ev = {.type = DNSP_EVENT, .qtype = q->qtype};

	for (uint16_t i = 0; i < DNSP_R_MAX; i++)
		if (!strcmp(reasons[i], reason))
			ev.reason = i;
	snprintf(ev.name, sizeof(ev.name), "%s", q->name);
	chan_send(r, &ev, sizeof(ev));
}

/* Log lines go through the agent too: the worker has no stderr. */
static void wlog(struct dnsw *r, enum dnsp_log_what what, const char *name, uint64_t a, uint64_t b)
{
	struct dnsp_log m = {.type = DNSP_LOG, .what = what, .a = a, .b = b};

	snprintf(m.name, sizeof(m.name), "%s", name ? name : "");
	chan_send(r, &m, sizeof(m));
}

static void apply_update(struct dnsw *r, const void *buf, size_t len);

static void tcp_close(struct dnsw *r, int i)
{
	if (!r->conns[i])
		return;
	close(r->conns[i]->fd);
	free(r->conns[i]);
	r->conns[i] = NULL;
}

static void reply(struct dnsw *r, const struct client *c, uint8_t rcode, const struct addr *addrs,
		  size_t n, uint32_t ttl)
{
	uint8_t out[2 + 65535];
	size_t max = DNS_UDP_MAX;
	int len;

	if (c->tcp)
		max = 65535;
	else if (c->q.edns)
		max = c->q.edns_size < DNS_EDNS_MAX ? c->q.edns_size : DNS_EDNS_MAX;
	if (!c->tcp && r->ub->active && r->ub->n_out < DNS_UDP_BATCH) {
		struct udp_batch *ub = r->ub;
		unsigned k = ub->n_out;

		len = dns_response_build(&c->q, rcode, addrs, n, ttl, ub->out_buf[k], max);
		if (len < 0)
			return;
		memcpy(&ub->to[k], &c->from, c->fromlen);
		ub->out_iov[k] = (struct iovec){.iov_base = ub->out_buf[k], .iov_len = (size_t)len};
		ub->out[k].msg_hdr = (struct msghdr){.msg_name = &ub->to[k],
						     .msg_namelen = c->fromlen,
						     .msg_iov = &ub->out_iov[k],
						     .msg_iovlen = 1};
		ub->n_out++;
		return;
	}
	len = dns_response_build(&c->q, rcode, addrs, n, ttl, out + 2, max);
	if (len < 0)
		return;
	if (!c->tcp) {
		sendto(r->listen[c->udp], out + 2, (size_t)len, MSG_DONTWAIT,
		       (struct sockaddr *)&c->from, c->fromlen);
		return;
	}
	if (c->conn < 0 || !r->conns[c->conn] || r->conns[c->conn]->gen != c->gen)
		return; /* the client went away while upstream answered */
	out[0] = (uint8_t)(len >> 8);
	out[1] = (uint8_t)len;
	if (send(r->conns[c->conn]->fd, out, (size_t)len + 2, MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    len + 2)
		tcp_close(r, c->conn);
}

static size_t name_ports(const struct dnsw *r, const char *name, struct dnsp_port *ports,
			 size_t max, int *wild)
{
	return dnsp_name_ports(r->cfg, &r->grants, time(NULL), name, ports, max, wild);
}

/* Sends the agent a request and waits for its reply: the TTL it gives (0
 * for a DNSP_NAME), or -1 when it refused. Updates the agent sends
 * meanwhile are applied as they come. */
static int64_t agent_ask(struct dnsw *r, const void *msg, size_t msg_len)
{
	union {
		struct dnsp_reply reply;
		struct dnsp_grants grants;
		struct dnsp_self self;
	} *in = r->in;
	ssize_t len;

	chan_send(r, msg, msg_len);
	while (!r->quit) {
		len = recv(r->chan, in, sizeof(*in), 0);
		if (len < 0 && errno == EINTR)
			continue;
		if (len <= 0) {
			r->quit = true;
			break;
		}
		if ((size_t)len == sizeof(in->reply) && in->reply.type == DNSP_REPLY)
			return in->reply.status ? -1 : (int64_t)in->reply.ttl;
		apply_update(r, in, (size_t)len);
	}
	return -1;
}

/* Asks the agent to write every (address, port) of name's answer into the
 * allow map. The TTL it gives to answer with, or -1 when it refused or the
 * write failed: the answer is SERVFAIL then, never an address the kernel
 * would refuse. */
static int64_t program(struct dnsw *r, const struct dns_query *q, const struct addr *addrs,
		       size_t n, uint32_t ttl, struct cache_entry *ce)
{
	static struct dnsp_program m;
	int64_t t;

	memset(&m, 0, sizeof(m));
	m.type = DNSP_PROGRAM;
	m.qtype = q->qtype;
	m.n = (uint16_t)n;
	m.ttl = ttl;
	snprintf(m.name, sizeof(m.name), "%s", q->name);
	memcpy(m.addrs, addrs, n * sizeof(*addrs));
	t = agent_ask(r, &m, sizeof(m));
	if (t >= 0 && ce)
		ce->covered_ns = boottime_ns() + (uint64_t)t * NS_PER_S;
	return t;
}

/* A name the session has not spent yet: counted under the caps, here and by
 * the agent, which records it, before anything of it goes upstream. A
 * repeated name costs a lookup; a new one, a round trip to the agent. */
static bool name_spend(struct dnsw *r, const char *name, int wild)
{
	struct dnsp_name m = {.type = DNSP_NAME};

	if (dnsp_names_seen(r->names, name))
		return true;
	if (!dnsp_names_room(r->names, wild))
		return false;
	snprintf(m.name, sizeof(m.name), "%s", name);
	return agent_ask(r, &m, sizeof(m)) >= 0 && !dnsp_names_admit(r->names, name, wild);
}

/* Answers each client of one question (the same name and type) with addrs
 * once the agent has opened them: one request to the agent for them all. */
static void program_and_reply(struct dnsw *r, const struct client *c, size_t n_c,
			      const struct addr *addrs, size_t n, uint32_t ttl,
			      struct cache_entry *ce)
{
	int64_t t = n ? program(r, &c[0].q, addrs, n, ttl, ce) : 0;

	for (size_t i = 0; i < n_c; i++) {
		if (t < 0)
			reply(r, &c[i], DNS_RCODE_SERVFAIL, NULL, 0, 0);
		else
			reply(r, &c[i], DNS_RCODE_NOERROR, n ? addrs : NULL, n, (uint32_t)t);
	}
}

static struct cache_entry *cache_set(struct dnsw *r, const char *name, uint16_t qtype)
{
	return &r->cache[(name_hash(name, qtype) % DNS_CACHE_SETS) * DNS_CACHE_WAYS];
}

static struct cache_entry *cache_find(struct dnsw *r, const char *name, uint16_t qtype,
				      uint64_t now)
{
	struct cache_entry *set = cache_set(r, name, qtype);

	for (size_t i = 0; i < DNS_CACHE_WAYS; i++) {
		struct cache_entry *e = &set[i];

		if (e->expires_ns > now && e->qtype == qtype && !strcmp(e->name, name))
			return e;
	}
	return NULL;
}

/* Keeps an answer: addresses (rcode NOERROR) for their TTL up to dns.ttlCap
 * (a longer one is asked upstream again once the cap is over), or
 * DNS_ZERO_TTL_S for TTL 0; a negative one (n 0, or NXDOMAIN, or SERVFAIL
 * with the reason its hits emit again) for DNS_NEG_TTL_S. The entry, or NULL
 * if not kept. */
static struct cache_entry *cache_put(struct dnsw *r, const char *name, uint16_t qtype,
				     uint8_t rcode, const char *why, const struct addr *addrs,
				     size_t n, uint32_t ttl)
{
	struct cache_entry *set = cache_set(r, name, qtype), *victim = &set[0];
	uint64_t now = boottime_ns();

	if (n > ARRAY_SIZE(victim->addrs))
		return NULL;
	if (rcode != DNS_RCODE_NOERROR || n == 0)
		ttl = DNS_NEG_TTL_S;
	else if (ttl == 0)
		ttl = DNS_ZERO_TTL_S;
	else if (ttl > r->cfg->dns_ttl_cap)
		ttl = r->cfg->dns_ttl_cap;
	for (size_t i = 0; i < DNS_CACHE_WAYS; i++) {
		struct cache_entry *e = &set[i];

		if ((e->qtype == qtype && !strcmp(e->name, name)) || e->expires_ns <= now) {
			victim = e;
			break;
		}
		if (e->expires_ns < victim->expires_ns)
			victim = e;
	}
	snprintf(victim->name, sizeof(victim->name), "%s", name);
	victim->qtype = qtype;
	victim->rcode = rcode;
	victim->why = why;
	victim->ttl = ttl;
	victim->n = n;
	memcpy(victim->addrs, addrs, n * sizeof(*addrs));
	victim->expires_ns = now + (uint64_t)ttl * NS_PER_S;
	victim->covered_ns = 0;
	return victim;
}

/* As the agent clamps an answer's TTL (dnsp_check). */
static uint32_t ttl_clamp(const struct errand_config *cfg, uint32_t ttl)
{
	if (ttl < cfg->dns_ttl_floor)
		return cfg->dns_ttl_floor;
	return ttl > cfg->dns_ttl_cap ? cfg->dns_ttl_cap : ttl;
}

/* Whether a grant opens one of the name's ports: its entries can end with
 * the grant, so no answer of it is taken as covered. */
static bool name_granted(const struct dnsw *r, const char *name)
{
	struct dnsp_port ports[64];
	size_t n_ports;
	int wild;

	n_ports = name_ports(r, name, ports, ARRAY_SIZE(ports), &wild);
	for (size_t j = 0; j < n_ports; j++)
		if (ports[j].grant)
			return true;
	return false;
}

/* Answers from a cache entry, as upstream_done answered when it was made. */
static void cache_reply(struct dnsw *r, const struct client *c, struct cache_entry *e, uint64_t now)
{
	uint32_t ttl = (uint32_t)((e->expires_ns - now) / NS_PER_S);
	bool granted;

	if (e->why)
		deny(r, &c->q, e->why);
	if (e->rcode != DNS_RCODE_NOERROR) {
		reply(r, c, e->rcode, NULL, 0, 0);
		return;
	}
	granted = name_granted(r, c->q.name);
	/* Within what the agent's entries cover, the answer's TTL is what is
	 * left of it when that is less than the clamped TTL and no less than
	 * the floor: a name whose TTL is past the cap would otherwise never
	 * fit (the cap is both what the entry got and what each later answer
	 * asks for), and cost a round trip to the agent every answer. */
	if (!granted && e->n && e->covered_ns > now) {
		uint64_t left = (e->covered_ns - now) / NS_PER_S;
		uint32_t want = ttl_clamp(r->cfg, ttl);

		if (left >= want || (left >= r->cfg->dns_ttl_floor && left > 0)) {
			reply(r, c, DNS_RCODE_NOERROR, e->addrs, e->n,
			      left >= want ? want : (uint32_t)left);
			return;
		}
	}
	program_and_reply(r, c, 1, e->addrs, e->n, ttl, granted ? NULL : e);
}

/* Drops forbidden addresses (IPv4 carried in an AAAA record among them), the
 * agent's own, and those of the other family; *dropped says whether any
 * was dropped for being forbidden or the host's. */
static size_t filter_addrs(struct dnsw *r, uint16_t qtype, struct addr *addrs, size_t n,
			   bool *dropped)
{
	size_t k = 0;

	*dropped = false;
	for (size_t i = 0; i < n; i++) {
		bool v4 = addr_is_v4(&addrs[i]), own = false;

		for (size_t j = 0; j < r->n_self; j++)
			own |= !memcmp(&r->self[j], &addrs[i], sizeof(addrs[i]));
		if (own || (qtype == DNS_TYPE_AAAA && v4) ||
		    addr_forbidden(&addrs[i], r->cfg->public_ranges, r->cfg->n_public)) {
			*dropped = true;
			continue;
		}
		if (v4 != (qtype == DNS_TYPE_A))
			continue;
		addrs[k++] = addrs[i];
	}
	return k;
}

static uint16_t header_id(const unsigned char *buf, int len)
{
	return len >= 2 ? (uint16_t)(buf[0] << 8 | buf[1]) : 0;
}

static void pending_unlink(struct pending *p)
{
	struct pending **pp = &p->r->pending[p->hash % DNS_PENDING_BUCKETS];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			return;
		}
	}
}

static struct pending *pending_find(struct dnsw *r, const char *name, uint16_t qtype, uint32_t hash)
{
	for (struct pending *p = r->pending[hash % DNS_PENDING_BUCKETS]; p; p = p->next)
		if (p->hash == hash && p->c[0].q.qtype == qtype && !strcmp(p->c[0].q.name, name))
			return p;
	return NULL;
}

/* Every client waiting on p gets the same outcome: an rcode (with the
 * denied-name reason, once), or addresses to program and answer. */
static void pending_reply(struct dnsw *r, struct pending *p, uint8_t rcode, const char *why,
			  const struct addr *addrs, size_t n, uint32_t ttl, struct cache_entry *ce)
{
	if (why)
		deny(r, &p->c[0].q, why);
	if (rcode == DNS_RCODE_NOERROR && n) {
		program_and_reply(r, p->c, p->n, addrs, n, ttl, ce);
		return;
	}
	for (size_t i = 0; i < p->n; i++)
		reply(r, &p->c[i], rcode, NULL, 0, 0);
}

static void upstream_done(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct pending *p = arg;
	struct dnsw *r = p->r;
	const struct dns_query *q = &p->c[0].q;
	struct dns_rr *rrs = NULL;
	struct addr addrs[64];
	struct cache_entry *ce;
	size_t n_rr = 0, n = 0, dropped_cap = 0;
	uint32_t ttl = 0;
	uint8_t rcode = DNS_RCODE_SERVFAIL;
	const char *why = NULL;
	bool forbidden;
	int rc;

	(void)timeouts;
	pending_unlink(p);
	if (status == ARES_EDESTRUCTION)
		goto out;
	rrs = calloc(DNS_RR_MAX, sizeof(*rrs));
	if (!rrs) {
		pending_reply(r, p, DNS_RCODE_SERVFAIL, NULL, NULL, 0, 0, NULL);
		goto out;
	}
	if (!abuf || alen <= 0 ||
	    dns_answer_parse(abuf, (size_t)alen, header_id(abuf, alen), q->name, q->qtype, &rcode,
			     rrs, DNS_RR_MAX, &n_rr)) {
		if (status == ARES_ENOTFOUND) {
			rcode = DNS_RCODE_NXDOMAIN;
		} else if (status == ARES_ENODATA) {
			rcode = DNS_RCODE_NOERROR;
		} else {
			why = "upstream";
			rcode = DNS_RCODE_SERVFAIL;
			wlog(r, DNSP_LOG_UPSTREAM, q->name, (uint64_t)(int64_t)status, 0);
		}
		goto negative;
	}
	if (rcode == DNS_RCODE_NXDOMAIN)
		goto negative;
	if (rcode != DNS_RCODE_NOERROR) {
		why = "upstream";
		rcode = DNS_RCODE_SERVFAIL;
		goto negative;
	}
	rc = dns_chain_resolve(rrs, n_rr, q->name, q->qtype, DNS_CHAIN_DEPTH, addrs,
			       ARRAY_SIZE(addrs), &n, &dropped_cap, &ttl);
	if (rc) {
		why = "upstream";
		rcode = DNS_RCODE_SERVFAIL;
		goto negative;
	}
	n = filter_addrs(r, q->qtype, addrs, n, &forbidden);
	if (forbidden)
		deny(r, q, "forbidden");
	/* More addresses than a name may have: nothing is opened. */
	if (dropped_cap || n > r->cfg->dns_max_addrs) {
		why = "cap";
		rcode = DNS_RCODE_SERVFAIL;
		goto negative;
	}
	ce = cache_put(r, q->name, q->qtype, DNS_RCODE_NOERROR, NULL, addrs, n, ttl);
	/* Its hits answer from what these writes cover (cache_reply). */
	pending_reply(r, p, DNS_RCODE_NOERROR, NULL, addrs, n, ttl,
		      name_granted(r, q->name) ? NULL : ce);
	goto out;
negative:
	/* Kept briefly, so a flood of the same question asks upstream once. */
	cache_put(r, q->name, q->qtype, rcode, why, NULL, 0, 0);
	pending_reply(r, p, rcode, why, NULL, 0, 0, NULL);
out:
	free(rrs);
	free(p);
}

/* Takes one upstream token; false when the session is over its rate. */
static bool upstream_token(struct dnsw *r, uint64_t now)
{
	uint64_t max = (uint64_t)DNS_UPSTREAM_BURST * 1000;

	if (now > r->tokens_ns) {
		uint64_t add = (now - r->tokens_ns) / (NS_PER_S / 1000 / DNS_UPSTREAM_RATE);

		r->tokens_milli = r->tokens_milli + add > max ? max : r->tokens_milli + add;
		/* what the division left over counts towards the next token */
		r->tokens_ns = r->tokens_milli == max
				       ? now
				       : r->tokens_ns + add * (NS_PER_S / 1000 / DNS_UPSTREAM_RATE);
	}
	if (r->tokens_milli >= 1000) {
		r->tokens_milli -= 1000;
		return true;
	}
	r->limited++;
	r->limited_total++;
	if (now - r->limit_log_ns >= (uint64_t)DNS_LIMIT_LOG_S * NS_PER_S) {
		wlog(r, DNSP_LOG_RATE, NULL, r->limited, r->limited_total);
		r->limited = 0;
		r->limit_log_ns = now;
	}
	return false;
}

static const struct pin *find_pin(const struct errand_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_pins; i++)
		if (!strcmp(cfg->pins[i].name, name))
			return &cfg->pins[i];
	return NULL;
}

static void handle_query(struct dnsw *r, struct client *c, const uint8_t *buf, size_t len)
{
	struct dns_query *q = &c->q;
	const struct pin *pin;
	struct cache_entry *ce;
	struct pending *p;
	char norm[HOST_NAME_MAX_LEN + 1];
	struct dnsp_port ports[64];
	uint64_t now;
	uint32_t hash;
	int rc, wild;

	memset(q, 0, sizeof(*q));
	rc = dns_query_parse(buf, len, q);
	if (rc == -EOPNOTSUPP) {
		q->name[0] = '\0';
		reply(r, c, DNS_RCODE_NOTIMP, NULL, 0, 0);
		return;
	}
	if (rc) {
		/* An answer (QR set) gets none: two responders would bounce
		 * their errors between them for ever. */
		if (len >= 12 && !(buf[2] & 0x80)) {
			q->name[0] = '\0';
			reply(r, c, DNS_RCODE_FORMERR, NULL, 0, 0);
		}
		return;
	}
	if (q->qclass != DNS_CLASS_IN) {
		reply(r, c, DNS_RCODE_REFUSED, NULL, 0, 0);
		return;
	}
	if (host_name_normalize(q->name, norm, NULL, 0) ||
	    !name_ports(r, q->name, ports, ARRAY_SIZE(ports), &wild)) {
		deny(r, q, "not-allowed");
		reply(r, c, DNS_RCODE_NXDOMAIN, NULL, 0, 0);
		return;
	}
	if (q->qtype != DNS_TYPE_A && q->qtype != DNS_TYPE_AAAA) {
		/* A CNAME question has an answer errand does not give: the chain
		 * is always flattened. Anything else is not errand's to relay. */
		if (q->qtype == DNS_TYPE_CNAME) {
			reply(r, c, DNS_RCODE_NOERROR, NULL, 0, 0);
		} else {
			deny(r, q, "type");
			reply(r, c, DNS_RCODE_REFUSED, NULL, 0, 0);
		}
		return;
	}
	pin = find_pin(r->cfg, q->name);
	if (pin) {
		/* The operator vouched: answered here, programmed at start. */
		bool match = addr_is_v4(&pin->addr) == (q->qtype == DNS_TYPE_A);

		reply(r, c, DNS_RCODE_NOERROR, &pin->addr, match ? 1 : 0, r->cfg->dns_ttl_cap);
		return;
	}
	if (!name_spend(r, norm, wild)) {
		deny(r, q, "cap");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	now = boottime_ns();
	ce = cache_find(r, q->name, q->qtype, now);
	if (ce) {
		cache_reply(r, c, ce, now);
		return;
	}
	if (!r->ares_ok) {
		deny(r, q, "upstream");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	/* The same question already upstream: wait for its answer. */
	hash = name_hash(q->name, q->qtype);
	p = pending_find(r, q->name, q->qtype, hash);
	if (p) {
		if (p->n < DNS_WAITERS)
			p->c[p->n++] = *c;
		else
			reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	if (!upstream_token(r, now)) {
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	p = malloc(sizeof(*p));
	if (!p) {
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	p->r = r;
	p->hash = hash;
	p->n = 1;
	p->c[0] = *c;
	p->next = r->pending[hash % DNS_PENDING_BUCKETS];
	r->pending[hash % DNS_PENDING_BUCKETS] = p;
	ares_query(r->ch, q->name, DNS_CLASS_IN, q->qtype, upstream_done, p);
}

static void udp_flush(struct dnsw *r, int fd)
{
	struct udp_batch *ub = r->ub;
	unsigned done = 0;

	while (done < ub->n_out) {
		int n = sendmmsg(fd, ub->out + done, ub->n_out - done, MSG_DONTWAIT);

		/* A full socket buffer drops the rest: the resolver asks again. */
		if (n <= 0)
			break;
		done += (unsigned)n;
	}
	ub->n_out = 0;
}

static void udp_read(struct dnsw *r, int k)
{
	struct udp_batch *ub = r->ub;

	for (int round = 0; round < 2; round++) {
		int n;

		for (int i = 0; i < DNS_UDP_BATCH; i++) {
			ub->in_iov[i] =
				(struct iovec){.iov_base = ub->in_buf[i], .iov_len = DNS_UDP_QMAX};
			ub->in[i].msg_hdr = (struct msghdr){.msg_name = &ub->from[i],
							    .msg_namelen = sizeof(ub->from[i]),
							    .msg_iov = &ub->in_iov[i],
							    .msg_iovlen = 1};
		}
		n = recvmmsg(r->listen[k], ub->in, DNS_UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		ub->active = true;
		ub->n_out = 0;
		for (int i = 0; i < n; i++) {
			struct client c = {.tcp = false, .udp = k, .conn = -1};

			/* A query longer than any errand answers is not read in part. */
			if (ub->in[i].msg_hdr.msg_flags & MSG_TRUNC)
				continue;
			memcpy(&c.from, &ub->from[i], ub->in[i].msg_hdr.msg_namelen);
			c.fromlen = ub->in[i].msg_hdr.msg_namelen;
			handle_query(r, &c, ub->in_buf[i], ub->in[i].msg_len);
		}
		ub->active = false;
		udp_flush(r, r->listen[k]);
		if (n < DNS_UDP_BATCH)
			return;
	}
}

static void tcp_accept(struct dnsw *r, int k)
{
	int fd = accept4(r->listen[k], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	int i;

	if (fd < 0)
		return;
	for (i = 0; i < DNS_TCP_MAX && r->conns[i]; i++)
		;
	if (i == DNS_TCP_MAX || !(r->conns[i] = malloc(sizeof(struct tcp_conn)))) {
		close(fd);
		return;
	}
	r->conns[i]->fd = fd;
	r->conns[i]->gen = ++r->next_gen;
	r->conns[i]->len = 0;
	r->conns[i]->last_ns = boottime_ns();
}

static void tcp_read(struct dnsw *r, int i)
{
	struct tcp_conn *t = r->conns[i];
	ssize_t n = read(t->fd, t->buf + t->len, sizeof(t->buf) - t->len);

	if (n <= 0) {
		if (n == 0 || errno != EAGAIN)
			tcp_close(r, i);
		return;
	}
	t->len += (size_t)n;
	t->last_ns = boottime_ns();
	while (r->conns[i] && t->len >= 2) {
		size_t msg = (size_t)t->buf[0] << 8 | t->buf[1];
		struct client c = {.tcp = true, .conn = i, .gen = t->gen};

		if (t->len < 2 + msg)
			break;
		handle_query(r, &c, t->buf + 2, msg);
		if (!r->conns[i])
			return;
		t->len -= 2 + msg;
		memmove(t->buf, t->buf + 2 + msg, t->len);
	}
}

static void dnsw_pollfds(struct dnsw *r, struct pollfd *fds, int *n, int max, int *timeout_ms)
{
	ares_socket_t socks[ARES_GETSOCK_MAXNUM];
	struct timeval tv, *tvp;
	int bits;

	for (int k = 0; k < DNS_SOCKS; k++)
		if (r->listen[k] >= 0 && *n < max)
			fds[(*n)++] = (struct pollfd){.fd = r->listen[k], .events = POLLIN};
	for (int i = 0; i < DNS_TCP_MAX; i++) {
		if (!r->conns[i])
			continue;
		if (*n < max)
			fds[(*n)++] = (struct pollfd){.fd = r->conns[i]->fd, .events = POLLIN};
		if (*timeout_ms < 0 || *timeout_ms > 1000)
			*timeout_ms = 1000; /* to notice idle clients */
	}
	if (!r->ares_ok)
		return;
	bits = r->sock_bits = ares_getsock(r->ch, socks, ARES_GETSOCK_MAXNUM);
	memcpy(r->socks, socks, sizeof(socks));
	for (int i = 0; i < ARES_GETSOCK_MAXNUM && *n < max; i++) {
		short ev = 0;

		if (ARES_GETSOCK_READABLE(bits, i))
			ev |= POLLIN;
		if (ARES_GETSOCK_WRITABLE(bits, i))
			ev |= POLLOUT;
		if (ev)
			fds[(*n)++] = (struct pollfd){.fd = socks[i], .events = ev};
	}
	tvp = ares_timeout(r->ch, NULL, &tv);
	if (tvp) {
		int ms = (int)(tvp->tv_sec * 1000 + tvp->tv_usec / 1000) + 1;

		if (*timeout_ms < 0 || ms < *timeout_ms)
			*timeout_ms = ms;
	}
}

static void dnsw_process(struct dnsw *r, const struct pollfd *fds, int n)
{
	uint64_t now = boottime_ns();

	for (int j = 0; j < n; j++) {
		if (!fds[j].revents)
			continue;
		if (fds[j].fd == r->listen[DNS_SOCK_UDP4] ||
		    fds[j].fd == r->listen[DNS_SOCK_UDP6]) {
			udp_read(r, fds[j].fd == r->listen[DNS_SOCK_UDP4] ? DNS_SOCK_UDP4
									  : DNS_SOCK_UDP6);
			continue;
		}
		if (fds[j].fd == r->listen[DNS_SOCK_TCP4] ||
		    fds[j].fd == r->listen[DNS_SOCK_TCP6]) {
			tcp_accept(r, fds[j].fd == r->listen[DNS_SOCK_TCP4] ? DNS_SOCK_TCP4
									    : DNS_SOCK_TCP6);
			continue;
		}
		for (int i = 0; i < DNS_TCP_MAX; i++)
			if (r->conns[i] && r->conns[i]->fd == fds[j].fd)
				tcp_read(r, i);
		for (int i = 0; r->ares_ok && i < ARES_GETSOCK_MAXNUM; i++) {
			ares_socket_t s = fds[j].fd;

			if (r->socks[i] != s || !(ARES_GETSOCK_READABLE(r->sock_bits, i) ||
						  ARES_GETSOCK_WRITABLE(r->sock_bits, i)))
				continue;
			ares_process_fd(
				r->ch,
				fds[j].revents & (POLLIN | POLLERR | POLLHUP) ? s : ARES_SOCKET_BAD,
				fds[j].revents & POLLOUT ? s : ARES_SOCKET_BAD);
			break;
		}
	}
	if (r->ares_ok)
		ares_process_fd(r->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timeouts */
	for (int i = 0; i < DNS_TCP_MAX; i++)
		if (r->conns[i] && now > r->conns[i]->last_ns &&
		    now - r->conns[i]->last_ns > DNS_TCP_IDLE_NS)
			tcp_close(r, i);
}

/* An update from the agent: its grants or the host's own addresses. */
static void apply_update(struct dnsw *r, const void *buf, size_t len)
{
	const struct dnsp_grants *g = buf;
	const struct dnsp_self *sf = buf;

	if (len == sizeof(*g) && g->type == DNSP_GRANTS && g->n <= GRANT_MAX) {
		r->grants.n = g->n;
		memcpy(r->grants.v, g->v, g->n * sizeof(g->v[0]));
		/* A name may have gained a port the agent has not programmed. */
		for (size_t i = 0; i < DNS_CACHE_SIZE; i++)
			r->cache[i].covered_ns = 0;
	} else if (len == sizeof(*sf) && sf->type == DNSP_SELF && sf->n <= DNSP_SELF_MAX) {
		r->n_self = sf->n;
		memcpy(r->self, sf->v, sf->n * sizeof(sf->v[0]));
		/* A cached answer may hold an address that is the host's now. */
		for (size_t i = 0; i < DNS_CACHE_SIZE; i++)
			r->cache[i].expires_ns = 0;
	}
}

static void chan_read(struct dnsw *r)
{
	for (;;) {
		ssize_t len =
			recv(r->chan, r->in, sizeof(struct dnsp_grants) + sizeof(struct dnsp_self),
			     MSG_DONTWAIT);

		if (len < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (len <= 0) {
			r->quit = true;
			return;
		}
		apply_update(r, r->in, (size_t)len);
	}
}

int dns_worker_main(const struct dns_worker_args *a)
{
	static struct pollfd fds[4 + DNS_TCP_MAX + ARES_GETSOCK_MAXNUM + 1];
	struct dnsw *r = calloc(1, sizeof(*r));

	if (!r || !(r->cache = calloc(DNS_CACHE_SIZE, sizeof(*r->cache))) ||
	    !(r->ub = calloc(1, sizeof(*r->ub))) || !(r->names = a->names) ||
	    !(r->in = malloc(sizeof(struct dnsp_grants) + sizeof(struct dnsp_self))))
		return -ENOMEM;
	r->tokens_milli = (uint64_t)DNS_UPSTREAM_BURST * 1000;
	r->tokens_ns = boottime_ns();
	r->cfg = a->cfg;
	r->chan = a->chan;
	memcpy(r->listen, a->listen, sizeof(r->listen));
	snprintf(r->session, sizeof(r->session), "%s", a->session);
	r->ch = a->ares;
	r->ares_ok = true;
	if (a->grants) {
		r->grants.n = a->grants->n;
		memcpy(r->grants.v, a->grants->v, a->grants->n * sizeof(r->grants.v[0]));
	}
	r->n_self = a->n_self < DNSP_SELF_MAX ? a->n_self : DNSP_SELF_MAX;
	memcpy(r->self, a->self, r->n_self * sizeof(r->self[0]));
	while (!r->quit) {
		int n = 0, timeout = -1;

		fds[n++] = (struct pollfd){.fd = r->chan, .events = POLLIN};
		dnsw_pollfds(r, fds, &n, (int)ARRAY_SIZE(fds), &timeout);
		if (poll(fds, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
			chan_read(r);
		dnsw_process(r, fds + 1, n - 1);
	}
	return 0;
}
