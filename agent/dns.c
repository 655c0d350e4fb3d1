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

#include "agent/dns.h"
#include "agent/dnsmsg.h"
#include "lib/log.h"
#include "lib/util.h"

#define DNS_TCP_MAX 32
#define DNS_TCP_IDLE_NS (10ull * 1000000000ull)
#define DNS_CACHE_SIZE 512
#define DNS_CHAIN_DEPTH 8
#define DNS_RR_MAX 64
#define DNS_UPSTREAM_TIMEOUT_MS 5000
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
	uint64_t expires_ns; /* 0: empty */
	uint32_t ttl;
	size_t n;
	struct addr addrs[64];
};

/* A name the session has been allowed to resolve, for the caps. */
struct seen_name {
	char name[DNS_NAME_MAX + 1];
	int wild; /* index of the wildcard rule that admitted it, or -1 */
};

struct dns_responder {
	const struct errand_config *cfg;
	struct enforce *enf;
	char session[16];
	int udp_fd, tcp_fd;
	struct tcp_conn *conns[DNS_TCP_MAX];
	uint32_t next_gen;
	struct udp_batch *ub;
	ares_channel ch;
	bool ares_ok;
	ares_socket_t socks[ARES_GETSOCK_MAXNUM]; /* as of the last pollfds */
	int sock_bits;
	struct cache_entry *cache;
	struct seen_name *seen;
	size_t n_seen;
	const struct addr *self; /* the agent namespace's own addresses */
	size_t n_self;
	dns_event_fn fn;
	void *fn_arg;
	const struct grant_set *grants; /* the session's; NULL: none */
};

struct pending {
	struct dns_responder *r;
	struct client c;
};

static const char *qtype_name(uint16_t t, char buf[8])
{
	switch (t) {
	case DNS_TYPE_A:
		return "A";
	case DNS_TYPE_AAAA:
		return "AAAA";
	case DNS_TYPE_CNAME:
		return "CNAME";
	case DNS_TYPE_TXT:
		return "TXT";
	case DNS_TYPE_ANY:
		return "ANY";
	case 15:
		return "MX";
	default:
		snprintf(buf, 8, "%u", t);
		return buf;
	}
}

static void deny(struct dns_responder *r, const struct dns_query *q, const char *reason)
{
	struct event_rec ev = {.denied = true};
	char tb[8];

	ev.session = r->session;
	ev.name = q->name;
	ev.qtype = qtype_name(q->qtype, tb);
	ev.reason = reason;
	if (r->fn)
		r->fn(&ev, r->fn_arg);
}

static void tcp_close(struct dns_responder *r, int i)
{
	if (!r->conns[i])
		return;
	close(r->conns[i]->fd);
	free(r->conns[i]);
	r->conns[i] = NULL;
}

static void reply(struct dns_responder *r, const struct client *c, uint8_t rcode,
		  const struct addr *addrs, size_t n, uint32_t ttl)
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
		sendto(r->udp_fd, out + 2, (size_t)len, MSG_DONTWAIT, (struct sockaddr *)&c->from,
		       c->fromlen);
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

static uint32_t ttl_clamp(const struct errand_config *cfg, uint32_t ttl)
{
	if (ttl < cfg->dns_ttl_floor)
		return cfg->dns_ttl_floor;
	return ttl > cfg->dns_ttl_cap ? cfg->dns_ttl_cap : ttl;
}

/* One port a name may be reached on, and what opened it: a host rule of the
 * policy (grant 0) or a grant, whose entries carry its id and end with it. */
struct name_port {
	uint16_t port;
	uint32_t grant;
	uint32_t flags;
	int64_t until; /* unix seconds; 0: no end of its own */
};

static void port_add(struct name_port *ports, size_t *n, size_t max, const struct name_port *p)
{
	for (size_t j = 0; j < *n; j++)
		if (ports[j].port == p->port)
			return; /* the policy's rule comes first and wins */
	if (*n < max)
		ports[(*n)++] = *p;
}

/* The ports the host rules admitting name give it, then the live grants';
 * 0 when none admits it. *wild is the first wildcard rule that admits it,
 * when no exact rule does. */
static size_t name_ports(const struct dns_responder *r, const char *name, struct name_port *ports,
			 size_t max, int *wild)
{
	const struct errand_config *cfg = r->cfg;
	int64_t now = time(NULL);
	size_t n = 0;
	bool exact = false;

	*wild = -1;
	for (size_t i = 0; i < cfg->n_allow; i++) {
		const struct host_rule *h = &cfg->allow[i];

		if (!host_rule_match(h, name))
			continue;
		if (h->wildcard && *wild < 0)
			*wild = (int)i;
		if (!h->wildcard)
			exact = true;
		port_add(ports, &n, max, &(struct name_port){.port = h->port});
	}
	for (size_t i = 0; r->grants && i < r->grants->n; i++) {
		const struct grant *g = &r->grants->v[i];

		if (!grant_live(g, now) || !host_rule_match(&g->rule, name))
			continue;
		if (!g->rule.wildcard)
			exact = true;
		port_add(ports, &n, max,
			 &(struct name_port){.port = g->rule.port,
					     .grant = g->id,
					     .flags = g->kind == GRANT_ONCE ? ENTRY_F_ONCE : 0,
					     .until = g->kind == GRANT_UNTIL ? g->until : 0});
	}
	if (exact)
		*wild = -1;
	return n;
}

void dns_responder_set_grants(struct dns_responder *r, const struct grant_set *grants)
{
	r->grants = grants;
}

/* Admits name under the caps: names a session, names under one wildcard. */
static bool name_admit(struct dns_responder *r, const char *name, int wild)
{
	size_t under = 0;

	for (size_t i = 0; i < r->n_seen; i++) {
		if (!strcmp(r->seen[i].name, name))
			return true;
		if (wild >= 0 && r->seen[i].wild == wild)
			under++;
	}
	if (r->n_seen >= r->cfg->dns_max_names)
		return false;
	if (wild >= 0 && under >= r->cfg->dns_max_wildcard_names)
		return false;
	snprintf(r->seen[r->n_seen].name, sizeof(r->seen[r->n_seen].name), "%s", name);
	r->seen[r->n_seen].wild = wild;
	r->n_seen++;
	return true;
}

/* Writes every (address, port) into the allow map, then answers. A failed
 * write answers SERVFAIL: never an address the kernel would refuse. */
static void program_and_reply(struct dns_responder *r, const struct client *c,
			      const struct addr *addrs, size_t n, uint32_t ttl)
{
	const struct errand_config *cfg = r->cfg;
	struct name_port ports[64];
	uint64_t expires, now = boottime_ns();
	int64_t unix_now = time(NULL);
	size_t n_ports;
	int wild, rc;

	ttl = ttl_clamp(cfg, ttl);
	expires = now + ((uint64_t)ttl + cfg->dns_grace) * NS_PER_S;
	n_ports = name_ports(r, c->q.name, ports, ARRAY_SIZE(ports), &wild);
	for (size_t j = 0; j < n_ports; j++) {
		/* A grant with an end: neither the answer nor its entries outlive it. */
		if (ports[j].until && ports[j].until > unix_now) {
			uint64_t left = (uint64_t)(ports[j].until - unix_now);

			if (ttl > left)
				ttl = (uint32_t)left;
		}
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n_ports; j++) {
			uint64_t exp = expires;

			if (ports[j].until)
				exp = now + (uint64_t)(ports[j].until - unix_now) * NS_PER_S;
			rc = enforce_allow_answer(r->enf, &addrs[i], ports[j].port,
						  exp < expires ? exp : expires, ports[j].flags,
						  ports[j].grant);
			if (rc) {
				char a[ADDR_STRLEN];

				log_warnx("session %s: cannot program %s:%u for %s: %s; answering "
					  "SERVFAIL",
					  r->session, addr_str(&addrs[i], a), ports[j].port,
					  c->q.name, strerror(-rc));
				reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
				return;
			}
		}
	}
	reply(r, c, DNS_RCODE_NOERROR, addrs, n, ttl);
}

static struct cache_entry *cache_find(struct dns_responder *r, const char *name, uint16_t qtype,
				      uint64_t now)
{
	for (size_t i = 0; i < DNS_CACHE_SIZE; i++) {
		struct cache_entry *e = &r->cache[i];

		if (e->expires_ns > now && e->qtype == qtype && !strcmp(e->name, name))
			return e;
	}
	return NULL;
}

static void cache_put(struct dns_responder *r, const char *name, uint16_t qtype,
		      const struct addr *addrs, size_t n, uint32_t ttl)
{
	struct cache_entry *victim = &r->cache[0];
	uint64_t now = boottime_ns();

	if (ttl == 0 || n > ARRAY_SIZE(victim->addrs))
		return;
	for (size_t i = 0; i < DNS_CACHE_SIZE; i++) {
		struct cache_entry *e = &r->cache[i];

		if ((e->qtype == qtype && !strcmp(e->name, name)) || e->expires_ns <= now) {
			victim = e;
			break;
		}
		if (e->expires_ns < victim->expires_ns)
			victim = e;
	}
	snprintf(victim->name, sizeof(victim->name), "%s", name);
	victim->qtype = qtype;
	victim->ttl = ttl;
	victim->n = n;
	memcpy(victim->addrs, addrs, n * sizeof(*addrs));
	victim->expires_ns = now + (uint64_t)ttl * NS_PER_S;
}

/* Drops forbidden addresses (IPv4 carried in an AAAA record among them), the
 * agent's own, and those of the other family; *dropped says whether any
 * was dropped for being forbidden or the host's. */
static size_t filter_addrs(struct dns_responder *r, uint16_t qtype, struct addr *addrs, size_t n,
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

static void upstream_done(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct pending *p = arg;
	struct dns_responder *r = p->r;
	struct client *c = &p->c;
	struct dns_rr *rrs = NULL;
	struct addr addrs[64];
	size_t n_rr = 0, n = 0, dropped_cap = 0;
	uint32_t ttl = 0;
	uint8_t rcode = DNS_RCODE_SERVFAIL;
	bool forbidden;
	int rc;

	(void)timeouts;
	if (status == ARES_EDESTRUCTION)
		goto out;
	rrs = calloc(DNS_RR_MAX, sizeof(*rrs));
	if (!rrs) {
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		goto out;
	}
	if (!abuf || alen <= 0 ||
	    dns_answer_parse(abuf, (size_t)alen, header_id(abuf, alen), c->q.name, c->q.qtype,
			     &rcode, rrs, DNS_RR_MAX, &n_rr)) {
		if (status == ARES_ENOTFOUND) {
			reply(r, c, DNS_RCODE_NXDOMAIN, NULL, 0, 0);
		} else if (status == ARES_ENODATA) {
			reply(r, c, DNS_RCODE_NOERROR, NULL, 0, 0);
		} else {
			deny(r, &c->q, "upstream");
			log_debug("session %s: upstream failed for %s: %s", r->session, c->q.name,
				  ares_strerror(status));
			reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		}
		goto out;
	}
	if (rcode == DNS_RCODE_NXDOMAIN) {
		reply(r, c, DNS_RCODE_NXDOMAIN, NULL, 0, 0);
		goto out;
	}
	if (rcode != DNS_RCODE_NOERROR) {
		deny(r, &c->q, "upstream");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		goto out;
	}
	rc = dns_chain_resolve(rrs, n_rr, c->q.name, c->q.qtype, DNS_CHAIN_DEPTH, addrs,
			       ARRAY_SIZE(addrs), &n, &dropped_cap, &ttl);
	if (rc) {
		deny(r, &c->q, "upstream");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		goto out;
	}
	n = filter_addrs(r, c->q.qtype, addrs, n, &forbidden);
	if (forbidden)
		deny(r, &c->q, "forbidden");
	/* More addresses than a name may have: nothing is opened. */
	if (dropped_cap || n > r->cfg->dns_max_addrs) {
		deny(r, &c->q, "cap");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		goto out;
	}
	cache_put(r, c->q.name, c->q.qtype, addrs, n, ttl);
	program_and_reply(r, c, addrs, n, ttl);
out:
	free(rrs);
	free(p);
}

static const struct pin *find_pin(const struct errand_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_pins; i++)
		if (!strcmp(cfg->pins[i].name, name))
			return &cfg->pins[i];
	return NULL;
}

static void handle_query(struct dns_responder *r, struct client *c, const uint8_t *buf, size_t len)
{
	struct dns_query *q = &c->q;
	const struct pin *pin;
	struct cache_entry *ce;
	struct pending *p;
	char norm[HOST_NAME_MAX_LEN + 1];
	struct name_port ports[64];
	int rc, wild;

	memset(q, 0, sizeof(*q));
	rc = dns_query_parse(buf, len, q);
	if (rc == -EOPNOTSUPP) {
		q->name[0] = '\0';
		reply(r, c, DNS_RCODE_NOTIMP, NULL, 0, 0);
		return;
	}
	if (rc) {
		if (len >= 12) {
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
	if (!name_admit(r, q->name, wild)) {
		deny(r, q, "cap");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	ce = cache_find(r, q->name, q->qtype, boottime_ns());
	if (ce) {
		uint64_t left = (ce->expires_ns - boottime_ns()) / NS_PER_S;

		program_and_reply(r, c, ce->addrs, ce->n, (uint32_t)left);
		return;
	}
	if (!r->ares_ok) {
		deny(r, q, "upstream");
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	p = malloc(sizeof(*p));
	if (!p) {
		reply(r, c, DNS_RCODE_SERVFAIL, NULL, 0, 0);
		return;
	}
	p->r = r;
	p->c = *c;
	ares_query(r->ch, q->name, DNS_CLASS_IN, q->qtype, upstream_done, p);
}

static void udp_flush(struct dns_responder *r)
{
	struct udp_batch *ub = r->ub;
	unsigned done = 0;

	while (done < ub->n_out) {
		int n = sendmmsg(r->udp_fd, ub->out + done, ub->n_out - done, MSG_DONTWAIT);

		/* A full socket buffer drops the rest: the resolver asks again. */
		if (n <= 0)
			break;
		done += (unsigned)n;
	}
	ub->n_out = 0;
}

static void udp_read(struct dns_responder *r)
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
		n = recvmmsg(r->udp_fd, ub->in, DNS_UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		ub->active = true;
		ub->n_out = 0;
		for (int i = 0; i < n; i++) {
			struct client c = {.tcp = false, .conn = -1};

			/* A query longer than any errand answers is not read in part. */
			if (ub->in[i].msg_hdr.msg_flags & MSG_TRUNC)
				continue;
			memcpy(&c.from, &ub->from[i], ub->in[i].msg_hdr.msg_namelen);
			c.fromlen = ub->in[i].msg_hdr.msg_namelen;
			handle_query(r, &c, ub->in_buf[i], ub->in[i].msg_len);
		}
		ub->active = false;
		udp_flush(r);
		if (n < DNS_UDP_BATCH)
			return;
	}
}

static void tcp_accept(struct dns_responder *r)
{
	int fd = accept4(r->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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

static void tcp_read(struct dns_responder *r, int i)
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

static int bind_gw(int type, uint32_t gw4)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(DNS_PORT)};
	int one = 1;
	int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = gw4;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    (type == SOCK_STREAM && listen(fd, 64))) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

static int upstream_init(struct dns_responder *r, char *err, size_t errlen)
{
	struct ares_options opts = {};
	char csv[1024] = "";
	int rc;

	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "cannot start c-ares: %s", ares_strerror(rc));
		return -ENOMEM;
	}
	opts.timeout = DNS_UPSTREAM_TIMEOUT_MS;
	opts.tries = 1;
	/* SERVFAIL and REFUSED reach errand as answers, not as retries. */
	opts.flags = ARES_FLAG_NOCHECKRESP;
	rc = ares_init_options(&r->ch, &opts, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen,
			 "cannot set up the upstream resolver: %s; check dns.upstream "
			 "or /etc/resolv.conf",
			 ares_strerror(rc));
		return -EINVAL;
	}
	for (char **u = r->cfg->dns_upstream; u && *u; u++) {
		size_t len = strlen(csv);

		snprintf(csv + len, sizeof(csv) - len, "%s%s", len ? "," : "", *u);
	}
	if (csv[0] && (rc = ares_set_servers_ports_csv(r->ch, csv)) != ARES_SUCCESS) {
		snprintf(err, errlen, "dns.upstream %s: %s", csv, ares_strerror(rc));
		ares_destroy(r->ch);
		return -EINVAL;
	}
	r->ares_ok = true;
	return 0;
}

struct dns_responder *dns_responder_new(const struct errand_config *cfg, struct enforce *enf,
					uint32_t gw4, const struct addr *self, size_t n_self,
					const char *session, dns_event_fn fn, void *arg, char *err,
					size_t errlen)
{
	struct dns_responder *r = calloc(1, sizeof(*r));
	char a[ADDR_STRLEN];
	struct addr gw;
	int rc;

	if (!r || !(r->cache = calloc(DNS_CACHE_SIZE, sizeof(*r->cache))) ||
	    !(r->ub = calloc(1, sizeof(*r->ub))) ||
	    !(r->seen = calloc(cfg->dns_max_names, sizeof(*r->seen)))) {
		snprintf(err, errlen, "out of memory");
		if (r) {
			free(r->cache);
			free(r->ub);
		}
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->cfg = cfg;
	r->enf = enf;
	r->self = self;
	r->n_self = n_self;
	r->fn = fn;
	r->fn_arg = arg;
	r->udp_fd = r->tcp_fd = -1;
	snprintf(r->session, sizeof(r->session), "%s", session);
	addr_from_v4(&gw, gw4);
	r->udp_fd = bind_gw(SOCK_DGRAM, gw4);
	r->tcp_fd = r->udp_fd < 0 ? r->udp_fd : bind_gw(SOCK_STREAM, gw4);
	if (r->udp_fd < 0 || r->tcp_fd < 0) {
		rc = r->udp_fd < 0 ? r->udp_fd : r->tcp_fd;
		snprintf(err, errlen, "cannot listen for DNS on %s:53: %s", addr_str(&gw, a),
			 strerror(-rc));
		goto fail;
	}
	rc = upstream_init(r, err, errlen);
	if (rc)
		goto fail;
	return r;
fail:
	dns_responder_free(r);
	errno = -rc;
	return NULL;
}

void dns_responder_free(struct dns_responder *r)
{
	if (!r)
		return;
	/* Pending queries are called back with ARES_EDESTRUCTION and free themselves. */
	if (r->ares_ok)
		ares_destroy(r->ch);
	for (int i = 0; i < DNS_TCP_MAX; i++)
		tcp_close(r, i);
	if (r->udp_fd >= 0)
		close(r->udp_fd);
	if (r->tcp_fd >= 0)
		close(r->tcp_fd);
	free(r->cache);
	free(r->ub);
	free(r->seen);
	free(r);
}

void dns_responder_pollfds(struct dns_responder *r, struct pollfd *fds, int *n, int max,
			   int *timeout_ms)
{
	ares_socket_t socks[ARES_GETSOCK_MAXNUM];
	struct timeval tv, *tvp;
	int bits;

	if (*n < max)
		fds[(*n)++] = (struct pollfd){.fd = r->udp_fd, .events = POLLIN};
	if (*n < max)
		fds[(*n)++] = (struct pollfd){.fd = r->tcp_fd, .events = POLLIN};
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

void dns_responder_process(struct dns_responder *r, const struct pollfd *fds, int n)
{
	uint64_t now = boottime_ns();

	for (int j = 0; j < n; j++) {
		if (!fds[j].revents)
			continue;
		if (fds[j].fd == r->udp_fd) {
			udp_read(r);
			continue;
		}
		if (fds[j].fd == r->tcp_fd) {
			tcp_accept(r);
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
