/* The agent's side of the DNS responder (see dns.h and dnspriv.h): it binds
 * the session's port 53, starts the unprivileged worker that serves it (this
 * binary exec'd again, confined before it reads a byte), checks each of the
 * worker's requests against the session's policy, programs what passes, and
 * restarts a worker that dies. The worker's side is agent/dns.c. */
#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <seccomp.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/dns.h"
#include "agent/dnspriv.h"
#include "agent/events.h"
#include "agent/spawn.h"
#include "lib/escape.h"
#include "lib/landlock.h"
#include "lib/log.h"
#include "lib/util.h"

#define NS_PER_S 1000000000ull
/* A worker that dies is restarted after DNS_RESPAWN_MIN_MS, doubling up to
 * DNS_RESPAWN_MAX_MS while it keeps dying within DNS_RESPAWN_STABLE_NS. */
#define DNS_RESPAWN_MIN_MS 100
#define DNS_RESPAWN_MAX_MS 10000
#define DNS_RESPAWN_STABLE_NS (10ull * NS_PER_S)
/* Messages handled for one session in one loop turn. */
#define DNS_CHAN_BUDGET 64
/* Refusals of a worker's request logged at most once a second. */
#define DNS_REFUSAL_LOG_NS NS_PER_S

/* ---- the policy, shared by the worker and the agent ---- */

static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

static void port_add(struct dnsp_port *ports, size_t *n, size_t max, const struct dnsp_port *p)
{
	for (size_t j = 0; j < *n; j++)
		if (ports[j].port == p->port)
			return; /* the policy's rule comes first and wins */
	if (*n < max)
		ports[(*n)++] = *p;
}

size_t dnsp_name_ports(const struct errand_config *cfg, const struct grant_set *grants, int64_t now,
		       const char *name, struct dnsp_port *ports, size_t max, int *wild)
{
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
		port_add(ports, &n, max, &(struct dnsp_port){.port = h->port});
	}
	for (size_t i = 0; grants && i < grants->n; i++) {
		const struct grant *g = &grants->v[i];

		if (!grant_live(g, now) || !host_rule_match(&g->rule, name))
			continue;
		if (!g->rule.wildcard)
			exact = true;
		port_add(ports, &n, max,
			 &(struct dnsp_port){.port = g->rule.port,
					     .grant = g->id,
					     .flags = g->kind == GRANT_ONCE ? ENTRY_F_ONCE : 0,
					     .until = g->kind == GRANT_UNTIL ? g->until : 0});
	}
	if (exact)
		*wild = -1;
	return n;
}

/* A name the session has been allowed to resolve, for the caps; also the
 * form the worker's start carries them in. */
struct seen_name {
	char name[DNS_NAME_MAX + 1];
	int wild; /* index of the wildcard rule that admitted it, or -1 */
};

struct dnsp_names {
	const struct errand_config *cfg;
	struct seen_name *seen;
	size_t n_seen;
	uint32_t *idx;	      /* open addressing over seen: index + 1; 0: empty */
	size_t slots;	      /* a power of two, at least twice dns.maxNames */
	uint32_t *wild_count; /* names admitted under each rule of cfg->allow */
	int fd;		      /* the record (dnsp_names_record), or -1 */
	off_t end;	      /* where its next line goes: after its last whole one */
};

/* The record of a session's names is the agent's alone, and read only at a
 * restart: a name and its rule are at most this long a line. */
#define NAMES_LINE_MAX (DNS_NAME_MAX + 16)

struct dnsp_names *dnsp_names_new(const struct errand_config *cfg)
{
	struct dnsp_names *t = calloc(1, sizeof(*t));
	size_t slots = 16;

	while (slots < 2 * (size_t)cfg->dns_max_names)
		slots *= 2;
	if (!t || !(t->seen = calloc(cfg->dns_max_names + 1, sizeof(*t->seen))) ||
	    !(t->idx = calloc(slots, sizeof(*t->idx))) ||
	    !(t->wild_count = calloc(cfg->n_allow + 1, sizeof(*t->wild_count)))) {
		dnsp_names_free(t);
		return NULL;
	}
	t->cfg = cfg;
	t->slots = slots;
	t->fd = -1;
	return t;
}

void dnsp_names_free(struct dnsp_names *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	free(t->seen);
	free(t->idx);
	free(t->wild_count);
	free(t);
}

/* The slot of name in the index: its own, or the empty one it would take. */
static size_t names_slot(const struct dnsp_names *t, const char *name)
{
	size_t mask = t->slots - 1, i = name_hash(name) & mask;

	for (; t->idx[i]; i = (i + 1) & mask)
		if (!strcmp(t->seen[t->idx[i] - 1].name, name))
			break;
	return i;
}

bool dnsp_names_seen(const struct dnsp_names *t, const char *name)
{
	return t->idx[names_slot(t, name)] != 0;
}

bool dnsp_names_room(const struct dnsp_names *t, int wild)
{
	if (t->n_seen >= t->cfg->dns_max_names)
		return false;
	return wild < 0 || t->wild_count[wild] < t->cfg->dns_max_wildcard_names;
}

/* Appends name's line to the record, before the name counts: a line cut
 * short by a kill is written over by the next, and its name was never
 * answered. 0 or -errno. */
static int names_write(struct dnsp_names *t, const char *name, int wild)
{
	char line[NAMES_LINE_MAX + 1];
	int len = snprintf(line, sizeof(line), "%d %s\n", wild, name);
	ssize_t n;

	if (t->fd < 0)
		return 0;
	if (len < 0 || (size_t)len >= sizeof(line))
		return -ENAMETOOLONG;
	do
		n = pwrite(t->fd, line, (size_t)len, t->end);
	while (n < 0 && errno == EINTR);
	if (n != len)
		return n < 0 ? -errno : -EIO;
	t->end += len;
	return 0;
}

int dnsp_names_admit(struct dnsp_names *t, const char *name, int wild)
{
	size_t i = names_slot(t, name);
	int rc;

	if (t->idx[i])
		return 0;
	if (!dnsp_names_room(t, wild))
		return -EDQUOT;
	if ((rc = names_write(t, name, wild)))
		return rc;
	snprintf(t->seen[t->n_seen].name, sizeof(t->seen[t->n_seen].name), "%s", name);
	t->seen[t->n_seen].wild = wild;
	t->n_seen++;
	t->idx[i] = (uint32_t)t->n_seen;
	if (wild >= 0)
		t->wild_count[wild]++;
	return 0;
}

/* One line of the record, "WILD NAME": admitted as it was, the rule index
 * kept when it still names a wildcard rule (the session's configuration is
 * its record's, the same at a restart), else counted as a name alone. */
static void names_load_line(struct dnsp_names *t, char *line)
{
	char norm[HOST_NAME_MAX_LEN + 1], *name, *end;
	long wild = strtol(line, &end, 10);

	if (end == line || *end != ' ')
		return;
	name = end + 1;
	if (host_name_normalize(name, norm, NULL, 0) || strlen(norm) > DNS_NAME_MAX)
		return;
	if (wild < 0 || (size_t)wild >= t->cfg->n_allow || !t->cfg->allow[wild].wildcard)
		wild = -1;
	dnsp_names_admit(t, norm, (int)wild);
}

int dnsp_names_record(struct dnsp_names *t, int fd)
{
	char buf[NAMES_LINE_MAX + 2];
	size_t have = 0;
	off_t at = 0;

	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1; /* not written while it is read */
	for (;;) {
		ssize_t n = pread(fd, buf + have, sizeof(buf) - 1 - have, at + (off_t)have);
		char *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = -errno;

			close(fd);
			return rc;
		}
		have += (size_t)n;
		buf[have] = '\0';
		nl = memchr(buf, '\n', have);
		if (!nl) {
			/* the end, or a line longer than any written: the
			 * next line goes where it starts */
			break;
		}
		*nl = '\0';
		names_load_line(t, buf);
		at += nl + 1 - buf;
		have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, have);
	}
	t->fd = fd;
	t->end = at;
	return 0;
}

static uint32_t ttl_clamp(const struct errand_config *cfg, uint32_t ttl)
{
	if (ttl < cfg->dns_ttl_floor)
		return cfg->dns_ttl_floor;
	return ttl > cfg->dns_ttl_cap ? cfg->dns_ttl_cap : ttl;
}

int dnsp_check_name(struct dnsp_policy *p, const void *msg, size_t len, int64_t unix_now)
{
	struct dnsp_name m;
	struct dnsp_port ports[64];
	char norm[HOST_NAME_MAX_LEN + 1];
	int wild;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, msg, sizeof(m));
	if (m.type != DNSP_NAME || !memchr(m.name, '\0', sizeof(m.name)) ||
	    host_name_normalize(m.name, norm, NULL, 0))
		return -EBADMSG;
	/* The rule it counts under is the agent's to find, not the worker's
	 * to say. */
	if (!dnsp_name_ports(p->cfg, p->grants, unix_now, norm, ports, ARRAY_SIZE(ports), &wild))
		return -EPERM;
	return dnsp_names_admit(p->names, norm, wild);
}

int dnsp_check(struct dnsp_policy *p, const void *msg, size_t len, uint64_t now_ns,
	       int64_t unix_now, struct dnsp_entry *out, size_t max, size_t *n_out,
	       uint32_t *ttl_out)
{
	const struct errand_config *cfg = p->cfg;
	struct dnsp_program m;
	struct dnsp_port ports[64];
	char norm[HOST_NAME_MAX_LEN + 1];
	size_t n_ports, k = 0;
	uint64_t expires;
	uint32_t ttl;
	int wild, rc;

	*n_out = 0;
	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, msg, sizeof(m));
	/* No flag exists: in particular, none that asks for a pin. */
	if (m.type != DNSP_PROGRAM || m.flags || m.n == 0 || m.n > DNSP_ADDRS_MAX ||
	    (m.qtype != DNS_TYPE_A && m.qtype != DNS_TYPE_AAAA) ||
	    !memchr(m.name, '\0', sizeof(m.name)) || host_name_normalize(m.name, norm, NULL, 0))
		return -EBADMSG;
	n_ports = dnsp_name_ports(cfg, p->grants, unix_now, norm, ports, ARRAY_SIZE(ports), &wild);
	if (!n_ports)
		return -EPERM;
	if (m.n > cfg->dns_max_addrs)
		return -EDQUOT;
	for (size_t i = 0; i < m.n; i++) {
		const struct addr *a = &m.addrs[i];

		/* A v4-mapped address in an AAAA answer is IPv4 in disguise. */
		if (addr_is_v4(a) != (m.qtype == DNS_TYPE_A) ||
		    addr_forbidden(a, cfg->public_ranges, cfg->n_public))
			return -EACCES;
		for (size_t j = 0; j < p->n_self; j++)
			if (!memcmp(&p->self[j], a, sizeof(*a)))
				return -EACCES;
	}
	rc = dnsp_names_admit(p->names, norm, wild);
	if (rc)
		return rc;
	ttl = ttl_clamp(cfg, m.ttl);
	expires = now_ns + ((uint64_t)ttl + cfg->dns_grace) * NS_PER_S;
	for (size_t j = 0; j < n_ports; j++) {
		/* A grant with an end: neither the answer nor its entries outlive it. */
		if (ports[j].until && ports[j].until > unix_now) {
			uint64_t left = (uint64_t)(ports[j].until - unix_now);

			if (ttl > left)
				ttl = (uint32_t)left;
		}
	}
	for (size_t i = 0; i < m.n; i++) {
		for (size_t j = 0; j < n_ports; j++) {
			uint64_t exp = expires;

			if (ports[j].until)
				exp = now_ns + (uint64_t)(ports[j].until - unix_now) * NS_PER_S;
			if (k == max)
				return -E2BIG;
			out[k++] = (struct dnsp_entry){
				.addr = m.addrs[i],
				.port = ports[j].port,
				.expires_ns = exp < expires ? exp : expires,
				.flags = (ports[j].flags & ENTRY_F_ONCE) |
					 (config_intercepted_host(cfg, norm, ports[j].port)
						  ? ENTRY_F_RELAY
						  : 0),
				.grant = ports[j].grant};
		}
	}
	*n_out = k;
	*ttl_out = ttl;
	return 0;
}

/* ---- the worker's confinement ---- */

int dnsp_landlock_load(void)
{
	struct errand_landlock_ruleset_attr ra = {
		.handled_access_net =
			LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP,
	};
	int fd, rc = 0;

	if (landlock_abi() < LANDLOCK_ABI_NET)
		return 0;
	/* the prefix up to the network's rights: no file system right handled,
	 * and no rule: no TCP connect and no bind at all */
	fd = (int)syscall(__NR_landlock_create_ruleset, &ra,
			  offsetof(struct errand_landlock_ruleset_attr, scoped), 0);
	if (fd < 0)
		return -errno;
	if (syscall(__NR_landlock_restrict_self, fd, 0) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- the worker's upstream UDP ----
 *
 * Landlock's network rules cover TCP alone, and seccomp sees no address. So
 * the worker's UDP to its upstream resolvers goes through sockets it
 * connects before its filter, one pool of them at DNSP_FD_POOL and up, and
 * the filter refuses every new UDP socket, and on any descriptor from
 * DNSP_FD_POOL on connect, sendto with an address and sendmsg/sendmmsg
 * (whose addresses it cannot see). A socket connected to a resolver sends
 * only there. c-ares takes them through its socket functions: its UDP
 * socket is a copy (dup2, which the filter admits onto DNSP_FD_HANDOUT and
 * up alone) of a pool socket of the family, and its connect puts there the
 * pool socket already connected to the server it names; its close closes
 * the copy, so the pool socket serves the next connection to that server.
 *
 * Its TCP is the agent's to connect: the worker makes no socket and no
 * connect at all. c-ares's TCP socket is a handout descriptor that holds
 * nothing until its connect, which asks the agent on the worker's TCP
 * channel (DNSP_FD_TCP) for a connection to the server it names; the agent
 * makes it only to one of the session's upstream resolvers (address and
 * TCP port) and hands it over, connecting or connected, to be put there. */

struct pool_sock {
	int fd; /* DNSP_FD_POOL + its index */
	int family;
	struct sockaddr_storage peer;
	int user; /* the handout descriptor it is copied to, or -1 */
};

static struct pool_sock pool[DNSP_POOL_MAX];
static size_t n_pool;
/* Each handout descriptor: HAND_FREE, HAND_OPEN (a copy of some pool socket
 * of its family, not yet connected), the index of the pool socket it is,
 * HAND_TCP (a TCP socket to be, a copy of the TCP channel meanwhile) or
 * HAND_TCP_CONN (the agent's TCP connection). */
enum { HAND_TCP_CONN = -4, HAND_TCP = -3, HAND_FREE = -2, HAND_OPEN = -1 };
/* The handout descriptors are the values under this mask, for the filter. */
#define HAND_MASK (~(uint64_t)(DNSP_FD_LIMIT - DNSP_FD_HANDOUT - 1))
_Static_assert(((DNSP_FD_LIMIT - DNSP_FD_HANDOUT) & (DNSP_FD_LIMIT - DNSP_FD_HANDOUT - 1)) == 0 &&
		       DNSP_FD_HANDOUT % (DNSP_FD_LIMIT - DNSP_FD_HANDOUT) == 0,
	       "the handout descriptors are an aligned power of two");
static int hand[DNSP_FD_LIMIT - DNSP_FD_HANDOUT];
static int tcp_chan = -1; /* the worker's TCP channel to the agent */

static bool peer_is(const struct sockaddr_storage *peer, const struct sockaddr *sa, socklen_t len)
{
	const struct sockaddr_in *a = (const void *)peer, *b = (const void *)sa;
	const struct sockaddr_in6 *a6 = (const void *)peer, *b6 = (const void *)sa;

	if (sa->sa_family != peer->ss_family)
		return false;
	if (sa->sa_family == AF_INET)
		return len >= sizeof(*b) && a->sin_port == b->sin_port &&
		       a->sin_addr.s_addr == b->sin_addr.s_addr;
	return sa->sa_family == AF_INET6 && len >= sizeof(*b6) && a6->sin6_port == b6->sin6_port &&
	       !memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(a6->sin6_addr));
}

static int hand_index(ares_socket_t fd)
{
	int j = fd - DNSP_FD_HANDOUT;

	return j >= 0 && j < (int)ARRAY_SIZE(hand) && hand[j] != HAND_FREE ? j : -1;
}

static ares_socket_t pool_socket(int af, int type, int protocol, void *arg)
{
	(void)arg;
	(void)protocol;
	/* c-ares sets no option on a socket of its socket functions' */
	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (type != SOCK_DGRAM && (type != SOCK_STREAM || tcp_chan < 0)) {
		errno = EPROTONOSUPPORT;
		return ARES_SOCKET_BAD;
	}
	for (size_t j = 0; j < ARRAY_SIZE(hand); j++) {
		if (hand[j] != HAND_FREE)
			continue;
		if (type == SOCK_STREAM) {
			if (dup2(tcp_chan, DNSP_FD_HANDOUT + (int)j) < 0)
				return ARES_SOCKET_BAD;
			hand[j] = HAND_TCP;
			return DNSP_FD_HANDOUT + (int)j;
		}
		for (size_t k = 0; k < n_pool; k++) {
			if (pool[k].family != af)
				continue;
			if (dup2(pool[k].fd, DNSP_FD_HANDOUT + (int)j) < 0)
				return ARES_SOCKET_BAD;
			hand[j] = HAND_OPEN;
			return DNSP_FD_HANDOUT + (int)j;
		}
		break;
	}
	/* no resolver of that family, or every handout taken */
	errno = EAFNOSUPPORT;
	return ARES_SOCKET_BAD;
}

/* One answer on the TCP channel: its length, the descriptor it carried in
 * *got (-1: none). */
static ssize_t tcp_answer_read(struct dnsp_tcp_answer *ans, int *got)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = ans, .iov_len = sizeof(*ans)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	ssize_t n;

	*got = -1;
	do
		n = recvmsg(tcp_chan, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	c = n < 0 ? NULL : CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(got, CMSG_DATA(c), sizeof(*got));
	return n;
}

/* The agent's TCP connection to sa, put on fd: 0 connected, or -1 with
 * errno (EINPROGRESS: connecting; ECONNREFUSED where sa is not a resolver
 * of the session's; EAGAIN when the agent has not answered within the
 * channel's two seconds, an answer to an ask before passed by). */
static int tcp_connect(ares_socket_t fd, const struct sockaddr *sa, ares_socklen_t len)
{
	static uint32_t seq;
	struct dnsp_tcp_ask ask = {.type = DNSP_TCP_ASK, .len = len, .seq = ++seq};
	struct dnsp_tcp_answer ans;
	int got = -1;
	ssize_t n;

	if (len > sizeof(ask.sa)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&ask.sa, sa, len);
	if (write(tcp_chan, &ask, sizeof(ask)) != (ssize_t)sizeof(ask))
		return -1;
	/* an answer to an ask given up on (its wait timed out) is passed by */
	while ((n = tcp_answer_read(&ans, &got)) == (ssize_t)sizeof(ans) && ans.seq != seq) {
		if (got >= 0)
			close(got);
	}
	if (n != (ssize_t)sizeof(ans)) {
		if (got >= 0)
			close(got);
		errno = n < 0 ? errno : EPROTO;
		return -1;
	}
	if (ans.err && ans.err != EINPROGRESS) {
		if (got >= 0)
			close(got);
		errno = ans.err > 0 ? ans.err : EPROTO;
		return -1;
	}
	if (got < 0 || dup2(got, fd) < 0) {
		if (got >= 0)
			close(got);
		errno = got < 0 ? EPROTO : errno;
		return -1;
	}
	close(got);
	if (ans.err) {
		errno = ans.err;
		return -1;
	}
	return 0;
}

static int pool_connect(ares_socket_t fd, const struct sockaddr *sa, ares_socklen_t len, void *arg)
{
	int j = hand_index(fd);

	(void)arg;
	if (j < 0) {
		errno = EBADF;
		return -1;
	}
	if (hand[j] == HAND_TCP) {
		int rc = tcp_connect(fd, sa, len);

		if (!rc || errno == EINPROGRESS)
			hand[j] = HAND_TCP_CONN;
		/* c-ares keeps a socket whose connect says EAGAIN, as if it
		 * were connecting: this one is still the channel's copy */
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			errno = ETIMEDOUT;
		return rc;
	}
	if (hand[j] == HAND_TCP_CONN) {
		errno = EISCONN;
		return -1;
	}
	for (size_t k = 0; k < n_pool; k++) {
		if (pool[k].user >= 0 || !peer_is(&pool[k].peer, sa, len))
			continue;
		if (dup2(pool[k].fd, fd) < 0)
			return -1;
		if (hand[j] >= 0)
			pool[hand[j]].user = -1;
		hand[j] = (int)k;
		pool[k].user = fd;
		return 0;
	}
	/* not a resolver of the worker's start, or each of its sockets in use */
	errno = ECONNREFUSED;
	return -1;
}

static int pool_close(ares_socket_t fd, void *arg)
{
	int j = hand_index(fd);

	(void)arg;
	if (j >= 0) {
		if (hand[j] >= 0)
			pool[hand[j]].user = -1;
		hand[j] = HAND_FREE;
	}
	return close(fd);
}

static ares_ssize_t pool_recvfrom(ares_socket_t fd, void *buf, size_t len, int flags,
				  struct sockaddr *from, ares_socklen_t *fromlen, void *arg)
{
	(void)arg;
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

static ares_ssize_t pool_sendv(ares_socket_t fd, const struct iovec *iov, int n, void *arg)
{
	(void)arg;
	return writev(fd, iov, n);
}

static const struct ares_socket_functions pool_funcs = {
	.asocket = pool_socket,
	.aclose = pool_close,
	.aconnect = pool_connect,
	.arecvfrom = pool_recvfrom,
	.asendv = pool_sendv,
};

/* Opens the pool: DNSP_POOL_PER_SERVER UDP sockets connected to each of the
 * channel's servers (a server the worker cannot reach gets none: c-ares
 * finds it refused), and makes c-ares use it. 0 or -errno. */
static int pool_open(ares_channel ch)
{
	struct ares_addr_port_node *servers = NULL;
	int rc = 0;

	for (size_t j = 0; j < ARRAY_SIZE(hand); j++)
		hand[j] = HAND_FREE;
	if (ares_get_servers_ports(ch, &servers) != ARES_SUCCESS)
		return -ENOMEM;
	for (struct ares_addr_port_node *s = servers; s && !rc; s = s->next) {
		struct sockaddr_storage ss = {.ss_family = (sa_family_t)s->family};
		struct sockaddr_in *sin = (void *)&ss;
		struct sockaddr_in6 *sin6 = (void *)&ss;
		uint16_t port = htons(s->udp_port ? (uint16_t)s->udp_port : 53);
		socklen_t len;

		if (s->family == AF_INET) {
			sin->sin_port = port;
			sin->sin_addr = s->addr.addr4;
			len = sizeof(*sin);
		} else if (s->family == AF_INET6) {
			sin6->sin6_port = port;
			memcpy(&sin6->sin6_addr, &s->addr.addr6, sizeof(sin6->sin6_addr));
			len = sizeof(*sin6);
		} else {
			continue;
		}
		for (int r = 0; r < DNSP_POOL_PER_SERVER && n_pool < DNSP_POOL_MAX && !rc; r++) {
			struct pool_sock *p = &pool[n_pool];
			int fd = socket(s->family, SOCK_DGRAM | SOCK_NONBLOCK, 0);

			if (fd < 0) {
				rc = -errno;
				break;
			}
			if (connect(fd, (struct sockaddr *)&ss, len)) {
				close(fd);
				break;
			}
			p->fd = DNSP_FD_POOL + (int)n_pool;
			if (dup2(fd, p->fd) < 0)
				rc = -errno;
			close(fd);
			p->family = s->family;
			p->peer = ss;
			p->user = -1;
			n_pool += !rc;
		}
	}
	ares_free_data(servers);
	if (!rc)
		ares_set_socket_functions(ch, &pool_funcs, NULL);
	return rc;
}

int dnsp_worker_confine(void *ares, int tcp)
{
	int rc;

	tcp_chan = tcp;
	/* an agent that does not answer fails the connect, not the worker */
	if (tcp >= 0 && setsockopt(tcp, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 2},
				   sizeof(struct timeval)))
		return -errno;
	rc = pool_open(ares);
	if (!rc)
		rc = dnsp_landlock_load();
	if (!rc)
		rc = dnsp_seccomp_load();
	return rc;
}

int dnsp_seccomp_load(void)
{
	/* What the responder, c-ares and malloc call; anything else kills. */
	static const int allow[] = {
		SCMP_SYS(read),
		SCMP_SYS(write),
		SCMP_SYS(readv),
		SCMP_SYS(writev),
		SCMP_SYS(recvfrom),
		SCMP_SYS(recvmsg),
		SCMP_SYS(recvmmsg),
		SCMP_SYS(accept4),
		SCMP_SYS(close),
		SCMP_SYS(poll),
		SCMP_SYS(ppoll),
		SCMP_SYS(getsockname),
		SCMP_SYS(getpeername),
		SCMP_SYS(getsockopt),
		SCMP_SYS(clock_gettime),
		SCMP_SYS(gettimeofday),
		SCMP_SYS(time),
		SCMP_SYS(getrandom),
		SCMP_SYS(brk),
		SCMP_SYS(munmap),
		SCMP_SYS(mremap),
		SCMP_SYS(madvise),
		SCMP_SYS(futex),
		SCMP_SYS(rt_sigreturn),
		SCMP_SYS(restart_syscall),
		SCMP_SYS(exit),
		SCMP_SYS(exit_group),
		SCMP_SYS(getpid),
	};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	int rc = ctx ? 0 : -ENOMEM;

	for (size_t i = 0; !rc && i < ARRAY_SIZE(allow); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow[i], 0);
	/* Memory, never executable. */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	/* No socket() and no connect() at all: its upstream UDP sockets are
	 * connected before the filter (the pool), its TCP ones connected by
	 * the agent (tcp_connect). Below DNSP_FD_POOL: the channels and the
	 * session's sockets (the UDP ones bound to the session's link by the
	 * agent). From it on, the pool and c-ares's copies of it, connected
	 * to a resolver: no send that names an address, no sendmsg (that
	 * may). */
	/* MSG_FASTOPEN never: a TCP socket that is closed (a connection the
	 * agent made, refused or reset) is connected anew by a send that
	 * carries it and an address, where no connect is called. */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendmsg), 2,
				      SCMP_A0(SCMP_CMP_LT, DNSP_FD_POOL),
				      SCMP_A2(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendmmsg), 2,
				      SCMP_A0(SCMP_CMP_LT, DNSP_FD_POOL),
				      SCMP_A3(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 2,
				      SCMP_A0(SCMP_CMP_LT, DNSP_FD_POOL),
				      SCMP_A3(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 2,
				      SCMP_A4(SCMP_CMP_EQ, 0),
				      SCMP_A3(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, 0));
	/* c-ares's copies of the pool: onto the handout descriptors alone,
	 * every bit of the 64 compared (the kernel takes the low 32). */
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(dup2), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, HAND_MASK, DNSP_FD_HANDOUT));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(dup3), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, HAND_MASK, DNSP_FD_HANDOUT));
	/* Options of the socket and TCP levels only (TCP_NODELAY, buffer
	 * sizes): one of the IP or IPv6 level may route (an IPv6 routing
	 * header sends a connected socket's writes to its first hop). */
	for (int l = 0; !rc && l < 2; l++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setsockopt), 1,
				      SCMP_A1(SCMP_CMP_EQ, l ? IPPROTO_TCP : SOL_SOCKET));
	/* c-ares makes its sockets non-blocking. */
	for (size_t i = 0; !rc && i < 4; i++) {
		static const int cmds[] = {F_GETFL, F_SETFL, F_GETFD, F_SETFD};

		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				      SCMP_A1(SCMP_CMP_EQ, (uint64_t)cmds[i]));
	}
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_EQ, (uint64_t)FIONBIO));
	if (!rc)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

/* ---- the worker's TCP, connected by the agent ---- */

size_t dnsp_tcp_servers(void *ares, struct sockaddr_storage *out, size_t max)
{
	struct ares_addr_port_node *servers = NULL;
	size_t n = 0;

	if (ares_get_servers_ports(ares, &servers) != ARES_SUCCESS)
		return 0;
	for (struct ares_addr_port_node *s = servers; s && n < max; s = s->next) {
		uint16_t port = htons(s->tcp_port ? (uint16_t)s->tcp_port : 53);
		struct sockaddr_in *sin = (void *)&out[n];
		struct sockaddr_in6 *sin6 = (void *)&out[n];

		memset(&out[n], 0, sizeof(out[n]));
		if (s->family == AF_INET) {
			sin->sin_family = AF_INET;
			sin->sin_port = port;
			sin->sin_addr = s->addr.addr4;
		} else if (s->family == AF_INET6) {
			sin6->sin6_family = AF_INET6;
			sin6->sin6_port = port;
			memcpy(&sin6->sin6_addr, &s->addr.addr6, sizeof(sin6->sin6_addr));
		} else {
			continue;
		}
		n++;
	}
	ares_free_data(servers);
	return n;
}

static int tcp_answer(int chan, uint32_t seq, int err, int fd)
{
	struct dnsp_tcp_answer ans = {.err = err, .seq = seq};
	char ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &ans, .iov_len = sizeof(ans)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		struct cmsghdr *c;

		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(fd));
	}
	return sendmsg(chan, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(ans) ? 0 : -errno;
}

int dnsp_tcp_serve(int chan, const struct sockaddr_storage *servers, size_t n)
{
	struct dnsp_tcp_ask ask;
	ssize_t len = recv(chan, &ask, sizeof(ask), MSG_DONTWAIT | MSG_TRUNC);
	socklen_t salen;
	int fd, rc;

	if (len < 0)
		return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
	if (len == 0)
		return -EPIPE;
	if ((size_t)len != sizeof(ask) || ask.type != DNSP_TCP_ASK)
		return -EBADMSG;
	salen = ask.sa.ss_family == AF_INET    ? sizeof(struct sockaddr_in)
		: ask.sa.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					       : 0;
	for (size_t i = 0; salen && ask.len >= salen && i < n; i++) {
		if (!peer_is(&servers[i], (const struct sockaddr *)&ask.sa, salen))
			continue;
		fd = socket(ask.sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return tcp_answer(chan, ask.seq, errno, -1);
		rc = connect(fd, (const struct sockaddr *)&servers[i], salen) ? errno : 0;
		rc = tcp_answer(chan, ask.seq, rc, rc && rc != EINPROGRESS ? -1 : fd);
		close(fd);
		return rc;
	}
	/* not a resolver of the session's: the worker's TCP goes nowhere else */
	return tcp_answer(chan, ask.seq, ECONNREFUSED, -1);
}

/* ---- the agent's side ---- */

struct dns_responder {
	const struct errand_config *cfg;
	struct enforce *enf;
	char session[16];
	int listen[DNS_SOCKS]; /* bound here; the worker serves them */
	uid_t uid;
	gid_t gid;
	int chan; /* to the worker; -1: none running */
	int tcp;  /* the worker's TCP channel, with chan */
	struct sockaddr_storage tcp_servers[DNSP_POOL_MAX]; /* the resolvers TCP may reach */
	size_t n_tcp_servers;
	pid_t pid;
	uint64_t started_ns;
	uint64_t respawn_ns; /* when to start the next worker, with chan -1 */
	unsigned respawn_ms;
	bool started; /* a worker was started once */
	uint64_t refusal_log_ns;
	uint64_t refused; /* since the last log line */
	uint64_t unprogrammed_log_ns;
	uint64_t unprogrammed; /* answers not written, since the last log line */
	uint64_t log_ns;       /* the worker's log lines: a budget a second */
	unsigned logs;
	uint64_t ev_tat_ns; /* denied names' events: the bucket (handle_event) */
	uint64_t ev_held, ev_held_all, ev_log_ns; /* held back: since the last line, in all */
	struct dnsp_policy pol;
	struct grant_set sent; /* the grants the worker was last sent */
	dns_event_fn fn;
	void *fn_arg;
	void *buf; /* one message from the worker, and a byte more */
};

/* gw: v4-mapped for the gateway's IPv4 address, else its IPv6 one. */
static int bind_gw(int type, const struct addr *gw)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(DNS_PORT)};
	struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons(DNS_PORT)};
	bool v4 = addr_is_v4(gw);
	int one = 1;
	int fd = socket(v4 ? AF_INET : AF_INET6, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = addr_v4(gw);
	memcpy(&sa6.sin6_addr, gw->b, 16);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!v4)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, v4 ? (struct sockaddr *)&sa : (struct sockaddr *)&sa6,
		 v4 ? sizeof(sa) : sizeof(sa6)) ||
	    (type == SOCK_STREAM && listen(fd, 64))) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

/* The upstream resolvers as c-ares takes them: "a,b:53,[c]:53"; "" for
 * /etc/resolv.conf's. False when they do not fit (a list cut short could
 * end inside an address, and name another). */
static bool upstream_csv(const struct errand_config *cfg, char *csv, size_t len)
{
	csv[0] = '\0';
	for (char **u = cfg->dns_upstream; u && *u; u++) {
		size_t used = strlen(csv);

		if ((size_t)snprintf(csv + used, len - used, "%s%s", used ? "," : "", *u) >=
		    len - used)
			return false;
	}
	return true;
}

/* The upstream resolver: made in the worker before its filter is loaded
 * (c-ares reads /etc/resolv.conf, which the filter forbids), and once in
 * the agent at the responder's start, to refuse a session whose upstream
 * c-ares would not take, with a line that says why. */
static int upstream_init(const char *csv, ares_channel *ch, char *err, size_t errlen)
{
	struct ares_options opts = {};
	int rc, mask;

	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "cannot start c-ares: %s", ares_strerror(rc));
		return -ENOMEM;
	}
	opts.timeout = DNS_UPSTREAM_TIMEOUT_MS;
	opts.tries = 1;
	/* SERVFAIL and REFUSED reach errand as answers, not as retries. */
	opts.flags = ARES_FLAG_NOCHECKRESP;
	mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS;
#if ARES_VERSION >= 0x011700
	/* c-ares 1.23 and later cache answers themselves, up to an hour: the
	 * worker's own cache is the one that keeps to dns.ttlCap */
	opts.qcache_max_ttl = 0;
	mask |= ARES_OPT_QUERY_CACHE;
#endif
	rc = ares_init_options(ch, &opts, mask);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen,
			 "cannot set up the upstream resolver: %s; check dns.upstream "
			 "or /etc/resolv.conf",
			 ares_strerror(rc));
		return -EINVAL;
	}
	if (csv[0] && (rc = ares_set_servers_ports_csv(*ch, csv)) != ARES_SUCCESS) {
		snprintf(err, errlen, "dns.upstream %s: %s", csv, ares_strerror(rc));
		ares_destroy(*ch);
		return -EINVAL;
	}
	return 0;
}

/* The resolvers as c-ares's csv takes them ("1.2.3.4:53,[::1]:53"). */
static void servers_csv(const struct sockaddr_storage *servers, size_t n, char *csv, size_t len)
{
	size_t used = 0;

	csv[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		const struct sockaddr_in *sin = (const void *)&servers[i];
		const struct sockaddr_in6 *sin6 = (const void *)&servers[i];
		char a[INET6_ADDRSTRLEN];
		bool v6 = servers[i].ss_family == AF_INET6;

		if (!inet_ntop(servers[i].ss_family,
			       v6 ? (const void *)&sin6->sin6_addr : (const void *)&sin->sin_addr,
			       a, sizeof(a)))
			continue;
		used += (size_t)snprintf(csv + used, len - used, "%s%s%s%s:%u", used ? "," : "",
					 v6 ? "[" : "", a, v6 ? "]" : "",
					 ntohs(v6 ? sin6->sin6_port : sin->sin_port));
	}
}

/* Whether c-ares takes the upstream; with servers (DNSP_POOL_MAX of them),
 * where its TCP goes, and in csv those resolvers for a worker to take as
 * they are, not as /etc/resolv.conf may say by the time it reads it. */
static int upstream_check(const struct errand_config *cfg, struct sockaddr_storage *servers,
			  size_t *n, char *out, size_t out_len, char *err, size_t errlen)
{
	ares_channel ch;
	char csv[1024];
	int rc;

	if (!upstream_csv(cfg, csv, sizeof(csv))) {
		snprintf(err, errlen,
			 "dns.upstream is longer than errand's DNS worker takes (%zu characters "
			 "joined by commas); name fewer resolvers",
			 sizeof(csv) - 1);
		return -E2BIG;
	}
	rc = upstream_init(csv, &ch, err, errlen);
	if (rc)
		return rc;
	if (servers) {
		*n = dnsp_tcp_servers(ch, servers, DNSP_POOL_MAX);
		servers_csv(servers, *n, out, out_len);
	}
	ares_destroy(ch);
	return 0;
}

/* ---- the worker: this same binary, exec'd again ---- */

/* What the worker is told at its start, in a sealed memfd it reads and
 * closes before anything else: what dns.c reads of the session's
 * configuration (the file's merged with the request's), the account to
 * become, its grants and the host's own addresses as they are now. Both
 * ends are the same build (the running binary, /proc/self/exe), which
 * size checks. Followed by n_allow struct host_rule, n_pins struct pin,
 * n_public struct cidr, n_self struct addr, n_names struct seen_name (the
 * names the session has spent, as the agent counts them: a new worker, after
 * a restart of its own or of the agent, does not start the caps again), and
 * upstream_len bytes: the upstream resolvers as the agent found them
 * when it started the worker (those its TCP may reach), comma-separated,
 * NUL-terminated. */
struct dnsp_init {
	uint32_t size; /* sizeof(struct dnsp_init) */
	char session[16];
	uint32_t uid, gid;
	int32_t parent;		   /* the agent's pid: another parent means it is gone */
	uint32_t pdeathsig;	   /* die with the thread that started it */
	int32_t listen[DNS_SOCKS]; /* the worker's descriptor of each socket, or -1 */
	uint32_t ttl_floor, ttl_cap, max_addrs, max_names, max_wild;
	uint32_t n_allow, n_pins, n_public, n_self, n_names, upstream_len;
	struct grant_set grants;
};

/* The running binary, for the worker's exec: opened once, early, so an
 * upgrade of the file on disk is never the worker of an older agent. */
static int self_exe = -1;
static pthread_once_t self_exe_once = PTHREAD_ONCE_INIT;

static void self_exe_open(void)
{
	self_exe = open("/proc/self/exe", O_PATH | O_CLOEXEC);
}

int dnsp_exe_open(void)
{
	pthread_once(&self_exe_once, self_exe_open);
	return self_exe >= 0 ? 0 : -errno;
}

bool dnsp_worker_argv(int argc, char **argv)
{
	return argc == 3 && !strcmp(argv[1], DNSP_WORKER_ARG);
}

static int blob_put(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t w = write(fd, c, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The worker's start, in a memfd sealed against change. Its descriptor, or
 * -errno. */
static int init_blob(const struct dns_responder *r, const int listen_fd[DNS_SOCKS], const char *csv)
{
	const struct errand_config *cfg = r->cfg;
	struct dnsp_init *in = calloc(1, sizeof(*in));
	size_t n_self = r->pol.n_self < DNSP_SELF_MAX ? r->pol.n_self : DNSP_SELF_MAX;
	int fd, rc;

	if (!in)
		return -ENOMEM;
	in->size = sizeof(*in);
	snprintf(in->session, sizeof(in->session), "%s", r->session);
	in->uid = r->uid;
	in->gid = r->gid;
	in->parent = getpid();
	/* It follows the thread that starts it: from another thread than the
	 * agent's main one, the channel's end (the worker exits on it) says
	 * the agent is gone. */
	in->pdeathsig = gettid() == getpid();
	memcpy(in->listen, listen_fd, sizeof(in->listen));
	in->ttl_floor = cfg->dns_ttl_floor;
	in->ttl_cap = cfg->dns_ttl_cap;
	in->max_addrs = cfg->dns_max_addrs;
	in->max_names = cfg->dns_max_names;
	in->max_wild = cfg->dns_max_wildcard_names;
	in->n_allow = (uint32_t)cfg->n_allow;
	in->n_pins = (uint32_t)cfg->n_pins;
	in->n_public = (uint32_t)cfg->n_public;
	in->n_self = (uint32_t)n_self;
	in->n_names = (uint32_t)r->pol.names->n_seen;
	in->upstream_len = (uint32_t)strlen(csv) + 1;
	if (r->pol.grants)
		in->grants = *r->pol.grants;
	fd = memfd_create("errand-dns-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		rc = -errno;
		free(in);
		return rc;
	}
	rc = blob_put(fd, in, sizeof(*in));
	if (!rc)
		rc = blob_put(fd, cfg->allow, cfg->n_allow * sizeof(*cfg->allow));
	if (!rc)
		rc = blob_put(fd, cfg->pins, cfg->n_pins * sizeof(*cfg->pins));
	if (!rc)
		rc = blob_put(fd, cfg->public_ranges, cfg->n_public * sizeof(*cfg->public_ranges));
	if (!rc)
		rc = blob_put(fd, r->pol.self, n_self * sizeof(*r->pol.self));
	if (!rc)
		rc = blob_put(fd, r->pol.names->seen, in->n_names * sizeof(struct seen_name));
	if (!rc)
		rc = blob_put(fd, csv, in->upstream_len);
	if (!rc && fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE))
		rc = -errno;
	free(in);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

/* What the worker's child needs before its exec. */
struct worker_exec {
	/* to become 3, 4, ...: the channel, the TCP channel, the sockets, the memfd */
	int keep[3 + DNS_SOCKS];
	int n;
	int exe;
	char *const *argv;
	int err; /* why the exec failed */
};

/* The child, sharing the agent's memory until its exec (spawn_fn): system
 * calls only. It keeps the channel (fd 3, and 0-2 as copies of it, so a
 * stray write reaches the agent as a malformed message), its TCP channel
 * (4), the DNS sockets (5...) and the memfd; every other descriptor ends at
 * the exec. Its
 * session, limits and no_new_privs are the process's own, not the
 * agent's; credentials change after the exec, where no memory is shared. */
static int worker_exec_child(void *arg)
{
	struct worker_exec *w = arg;
	int fds[3 + DNS_SOCKS], exe;

	/* Above every target first, so no dup2 below overwrites one kept
	 * (nor the binary's descriptor, which the exec closes). */
	exe = fcntl(w->exe, F_DUPFD_CLOEXEC, 3 + w->n);
	if (exe < 0)
		goto fail;
	for (int i = 0; i < w->n; i++)
		if ((fds[i] = fcntl(w->keep[i], F_DUPFD_CLOEXEC, 3 + w->n)) < 0)
			goto fail;
	for (int i = 0; i < w->n; i++)
		if (dup2(fds[i], 3 + i) < 0)
			goto fail;
	for (int fd = 0; fd < 3; fd++)
		if (dup2(3, fd) < 0)
			goto fail;
	if (close_range(3 + (unsigned)w->n, ~0U, CLOSE_RANGE_CLOEXEC) || setsid() < 0 ||
	    setrlimit(RLIMIT_NOFILE, &(struct rlimit){DNSP_FD_LIMIT, DNSP_FD_LIMIT}) ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		goto fail;
	syscall(SYS_execveat, exe, "", w->argv, environ, AT_EMPTY_PATH);
fail:
	w->err = errno;
	return 126;
}

static int worker_spawn(struct dns_responder *r, char *err, size_t errlen)
{
	struct worker_exec w = {.exe = self_exe};
	int listen_fd[DNS_SOCKS], sv[2], tv[2], init, rc;
	char fdarg[16], csv[DNSP_POOL_MAX * 56];
	char *argv[] = {"errand-dns", DNSP_WORKER_ARG, fdarg, NULL};
	pid_t pid;

	rc = dnsp_exe_open();
	if (rc) {
		snprintf(err, errlen, "cannot start the DNS worker: /proc/self/exe: %s",
			 strerror(-rc));
		return rc;
	}
	w.exe = self_exe;
	/* The resolvers as they are now: the worker's UDP goes to them and the
	 * agent connects its TCP to them alone. */
	rc = upstream_check(r->cfg, r->tcp_servers, &r->n_tcp_servers, csv, sizeof(csv), err,
			    errlen);
	if (rc)
		return rc;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		rc = -errno;
		snprintf(err, errlen, "cannot make the DNS worker's channel: %s", strerror(-rc));
		return rc;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tv)) {
		rc = -errno;
		snprintf(err, errlen, "cannot make the DNS worker's TCP channel: %s",
			 strerror(-rc));
		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	w.keep[w.n++] = sv[1];
	w.keep[w.n++] = tv[1]; /* DNSP_FD_TCP */
	for (int k = 0; k < DNS_SOCKS; k++) {
		listen_fd[k] = r->listen[k] >= 0 ? 3 + w.n : -1;
		if (r->listen[k] >= 0)
			w.keep[w.n++] = r->listen[k];
	}
	init = init_blob(r, listen_fd, csv);
	if (init < 0) {
		rc = init;
		snprintf(err, errlen, "cannot write the DNS worker's start: %s", strerror(-rc));
		close(sv[0]);
		close(sv[1]);
		close(tv[0]);
		close(tv[1]);
		return rc;
	}
	snprintf(fdarg, sizeof(fdarg), "%d", 3 + w.n);
	w.keep[w.n++] = init;
	w.argv = argv;
	pid = spawn_fn(worker_exec_child, &w, -1);
	close(init);
	close(sv[1]);
	close(tv[1]);
	if (pid > 0 && w.err) {
		/* CLONE_VFORK: it has already exited. */
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		pid = -w.err;
	}
	if (pid < 0) {
		close(sv[0]);
		close(tv[0]);
		snprintf(err, errlen, "cannot start the DNS worker: %s", strerror(-pid));
		return pid;
	}
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(tv[0], F_SETFL, O_NONBLOCK);
	r->chan = sv[0];
	r->tcp = tv[0];
	r->pid = pid;
	r->started_ns = boottime_ns();
	return 0;
}

/* The worker's start, read whole; NULL when it is not what this build
 * writes. */
static struct dnsp_init *init_read(int fd)
{
	struct stat st;
	struct dnsp_init *in;
	size_t size, got = 0;

	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(*in) || st.st_size > (64 << 20) ||
	    !(in = malloc((size_t)st.st_size)))
		return NULL;
	size = (size_t)st.st_size;
	while (got < size) {
		ssize_t n = pread(fd, (char *)in + got, size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != size || in->size != sizeof(*in) || in->n_self > DNSP_SELF_MAX ||
	    in->grants.n > GRANT_MAX || in->upstream_len == 0 || in->n_names > in->max_names ||
	    size != sizeof(*in) + in->n_allow * sizeof(struct host_rule) +
			    in->n_pins * sizeof(struct pin) + in->n_public * sizeof(struct cidr) +
			    in->n_self * sizeof(struct addr) +
			    in->n_names * sizeof(struct seen_name) + in->upstream_len ||
	    ((char *)in)[size - 1] != '\0') {
		free(in);
		return NULL;
	}
	return in;
}

/* No capability left in any set: the exec as root gave it root's, which
 * the change to errand-dns's uids takes from the permitted, effective and
 * ambient sets; the inheritable one is emptied here. */
static bool caps_drop_rest(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {};

	if (syscall(SYS_capset, &h, d) || syscall(SYS_capget, &h, d))
		return false;
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return false;
	return true;
}

int dnsp_worker_exec_main(char **argv)
{
	struct errand_config cfg = {};
	struct dns_worker_args a = {};
	struct dnsp_init *in;
	struct seen_name *seen;
	ares_channel ch;
	char err[256], *p, *end;
	long fd = strtol(argv[2], &end, 10);
	int top = DNSP_FD_TCP;

	/* Its life is the agent's to end (SIGKILL, PDEATHSIG, the channel's
	 * end): no handler of the agent's or errandctl's, and a terminal's ^C
	 * reaches the session, not its DNS. Not dumpable from its start. */
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_NAME, "errand-dns", 0, 0, 0);
	if (*end || fd <= DNSP_FD_TCP || fd > 64 || !(in = init_read((int)fd)))
		return 126;
	close((int)fd);
	p = (char *)(in + 1);
	cfg.allow = (struct host_rule *)p;
	cfg.n_allow = in->n_allow;
	p += in->n_allow * sizeof(struct host_rule);
	cfg.pins = (struct pin *)p;
	cfg.n_pins = in->n_pins;
	p += in->n_pins * sizeof(struct pin);
	cfg.public_ranges = (struct cidr *)p;
	cfg.n_public = in->n_public;
	p += in->n_public * sizeof(struct cidr);
	a.self = (struct addr *)p;
	a.n_self = in->n_self;
	p += in->n_self * sizeof(struct addr);
	seen = (struct seen_name *)p;
	p += in->n_names * sizeof(struct seen_name);
	cfg.dns_ttl_floor = in->ttl_floor;
	cfg.dns_ttl_cap = in->ttl_cap;
	cfg.dns_max_addrs = in->max_addrs;
	cfg.dns_max_names = in->max_names;
	cfg.dns_max_wildcard_names = in->max_wild;
	if (!(a.names = dnsp_names_new(&cfg)))
		return 126;
	for (size_t i = 0; i < in->n_names; i++) {
		int wild = seen[i].wild;

		seen[i].name[sizeof(seen[i].name) - 1] = '\0';
		if (wild < -1 || wild >= (int)cfg.n_allow)
			wild = -1;
		dnsp_names_admit(a.names, seen[i].name, wild);
	}
	for (int k = 0; k < DNS_SOCKS; k++)
		if (in->listen[k] > top)
			top = in->listen[k];
	/* The channels and the sockets; nothing else, whatever the exec left. */
	if (close_range((unsigned)top + 1, ~0U, 0))
		return 126;
	/* As root still, as the agent made it before: the same resolv.conf. */
	if (upstream_init(p, &ch, err, sizeof(err)))
		return 126;
	/* The bounding set emptied, and read back: an agent without
	 * CAP_SETPCAP would leave it whole with no word said. */
	for (int c = 0; c <= 63; c++) {
		if (!prctl(PR_CAPBSET_DROP, c, 0, 0, 0))
			continue;
		if (errno == EINVAL)
			break;
		return 126;
	}
	for (int c = 0; c <= 63; c++) {
		int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);

		if (r < 0)
			break;
		if (r)
			return 126;
	}
	if (setgroups(0, NULL) || setresgid(in->gid, in->gid, in->gid) ||
	    setresuid(in->uid, in->uid, in->uid) || !caps_drop_rest())
		return 126;
	/* Set after the change of credentials, which clears it. */
	if ((in->pdeathsig && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)) || getppid() != in->parent)
		return 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return 126;
	/* Before the first byte of the session's is read; Landlock's system
	 * calls are not in the filter's list. */
	if (dnsp_worker_confine(ch, DNSP_FD_TCP))
		return 126;
	a.cfg = &cfg;
	a.session = in->session;
	a.chan = 3;
	memcpy(a.listen, in->listen, sizeof(a.listen));
	a.ares = ch;
	a.grants = &in->grants;
	return dns_worker_main(&a) ? 1 : 0;
}

/* Ends the worker (if any) and reaps it; a new one starts after a delay
 * that grows while workers keep dying young. */
static void worker_end(struct dns_responder *r, const char *why)
{
	uint64_t now = boottime_ns();
	int ws = 0;

	if (r->chan < 0)
		return;
	close(r->chan);
	close(r->tcp);
	r->chan = r->tcp = -1;
	kill(r->pid, SIGKILL);
	while (waitpid(r->pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (!why)
		return;
	if (now - r->started_ns >= DNS_RESPAWN_STABLE_NS)
		r->respawn_ms = DNS_RESPAWN_MIN_MS;
	else if (r->respawn_ms < DNS_RESPAWN_MAX_MS)
		r->respawn_ms = r->respawn_ms * 2 > DNS_RESPAWN_MAX_MS ? DNS_RESPAWN_MAX_MS
								       : r->respawn_ms * 2;
	r->respawn_ns = now + (uint64_t)r->respawn_ms * 1000000ull;
	log_warnx("session %s: the DNS worker (pid %d) %s; its DNS is unanswered until a new one "
		  "starts in %u ms",
		  r->session, (int)r->pid, why, r->respawn_ms);
}

/* The session's names, from its record (made here when new): the agent's,
 * never the session's, and written at each new name (dnsp_names_record). */
static int names_open(struct dnsp_names *names, const char *record_dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/" DNS_NAMES_FILE, record_dir) >=
	    sizeof(path)) {
		snprintf(err, errlen, "the path of its DNS names under %s is too long", record_dir);
		return -ENAMETOOLONG;
	}
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s, where its DNS names are counted: %s", path,
			 strerror(-rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		snprintf(err, errlen,
			 "%s is not a file of the agent's alone (mode 0600); remove it and start "
			 "the session again",
			 path);
		close(fd);
		return -EPERM;
	}
	rc = dnsp_names_record(names, fd);
	if (rc)
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
	return rc;
}

struct dns_responder *dns_responder_new(const struct errand_config *cfg, struct enforce *enf,
					uint32_t gw4, const uint8_t *gw6, int socks[DNS_SOCKS],
					const struct addr *self, size_t n_self, const char *session,
					const char *dev, const char *record_dir, dns_event_fn fn,
					void *arg, char *err, size_t errlen)
{
	struct dns_responder *r = calloc(1, sizeof(*r));
	struct passwd pwd, *pw;
	char pwbuf[1024];
	char a[ADDR_STRLEN];
	struct addr gw;
	int rc;

	if (!r || !(r->pol.names = dnsp_names_new(cfg)) ||
	    !(r->buf = malloc(sizeof(struct dnsp_program) + 1))) {
		snprintf(err, errlen, "out of memory");
		for (int k = 0; k < DNS_SOCKS; k++)
			if (socks[k] >= 0)
				close(socks[k]);
		if (r)
			dnsp_names_free(r->pol.names);
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->cfg = cfg;
	r->enf = enf;
	r->chan = r->tcp = -1;
	r->respawn_ms = DNS_RESPAWN_MIN_MS;
	r->pol.cfg = cfg;
	r->pol.self = self;
	r->pol.n_self = n_self;
	r->fn = fn;
	r->fn_arg = arg;
	memcpy(r->listen, socks, sizeof(r->listen));
	snprintf(r->session, sizeof(r->session), "%s", session);
	/* getpwnam_r: sessions start in several threads, and getpwnam's
	 * answer is one buffer they would share. */
	rc = -getpwnam_r(DNS_WORKER_ACCOUNT, &pwd, pwbuf, sizeof(pwbuf), &pw);
	if (!pw) {
		rc = rc ? rc : -ENOENT;
		snprintf(err, errlen,
			 "the account %s that errand's DNS worker runs as does not exist; create "
			 "it with make accounts (useradd --system %s)",
			 DNS_WORKER_ACCOUNT, DNS_WORKER_ACCOUNT);
		goto fail;
	}
	r->uid = pw->pw_uid;
	r->gid = pw->pw_gid;
	if (record_dir && (rc = names_open(r->pol.names, record_dir, err, errlen)))
		goto fail;
	for (int k = 0; k < DNS_SOCKS; k++) {
		bool v6 = k == DNS_SOCK_UDP6 || k == DNS_SOCK_TCP6;

		if (r->listen[k] >= 0 || (v6 && !gw6))
			continue;
		if (v6)
			memcpy(gw.b, gw6, 16);
		else
			addr_from_v4(&gw, gw4);
		r->listen[k] = bind_gw(
			k == DNS_SOCK_UDP4 || k == DNS_SOCK_UDP6 ? SOCK_DGRAM : SOCK_STREAM, &gw);
		if (r->listen[k] < 0) {
			rc = r->listen[k];
			snprintf(err, errlen, "cannot listen for DNS on %s%s%s:53: %s",
				 v6 ? "[" : "", addr_str(&gw, a), v6 ? "]" : "", strerror(-rc));
			goto fail;
		}
	}
	/* Whatever sends on the gateway's UDP sockets (its worker, compromised
	 * or not, whatever address it names) leaves by the session's link
	 * alone: the worker's other UDP reaches its resolvers alone
	 * (dnsp_worker_confine). Only CAP_NET_RAW undoes it. On a restarted
	 * agent's sockets too. */
	for (int k = 0; k < DNS_SOCKS && dev; k++) {
		if ((k != DNS_SOCK_UDP4 && k != DNS_SOCK_UDP6) || r->listen[k] < 0)
			continue;
		if (setsockopt(r->listen[k], SOL_SOCKET, SO_BINDTODEVICE, dev,
			       (socklen_t)strlen(dev) + 1)) {
			rc = -errno;
			snprintf(err, errlen, "cannot bind its DNS sockets to %s: %s", dev,
				 strerror(-rc));
			goto fail;
		}
	}
	rc = upstream_check(cfg, NULL, NULL, NULL, 0, err, errlen);
	if (rc)
		goto fail;
	/* The worker starts when the session first asks (a datagram or a
	 * connection waiting on one of the bound sockets, which it then reads):
	 * its exec and start, the agent's binary and a millisecond and a half
	 * of CPU, are not a start's, and a session that never resolves a name
	 * (a build step, a command without network) never has one. */
	r->respawn_ns = 0;
	return r;
fail:
	dns_responder_free(r);
	errno = -rc;
	return NULL;
}

void dns_responder_fds(const struct dns_responder *r, int socks[DNS_SOCKS])
{
	memcpy(socks, r->listen, sizeof(r->listen));
}

void dns_responder_free(struct dns_responder *r)
{
	if (!r)
		return;
	worker_end(r, NULL);
	for (int k = 0; k < DNS_SOCKS; k++)
		if (r->listen[k] >= 0)
			close(r->listen[k]);
	dnsp_names_free(r->pol.names);
	free(r->buf);
	free(r);
}

/* Sends the worker an update; one it cannot take ends it, and the next
 * worker starts from the agent's state as it is then. */
static void worker_update(struct dns_responder *r, const void *msg, size_t len)
{
	if (r->chan < 0)
		return;
	if (send(r->chan, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
		worker_end(r, "could not take an update");
}

/* The worker learns of every change to the session's grants (the caller
 * may change them in place): before the agent answers whoever made it. */
static void grants_sync(struct dns_responder *r)
{
	static const struct grant_set none;
	const struct grant_set *g = r->pol.grants ? r->pol.grants : &none;

	if (g->n == r->sent.n && !memcmp(g->v, r->sent.v, g->n * sizeof(g->v[0])))
		return;
	dns_responder_set_grants(r, r->pol.grants);
}

/* An update's message, the caller's own: sessions start (and set these) in
 * several threads while the loop updates running workers. NULL when there is
 * no worker to send it to, or no memory (then the worker ends, and the next
 * starts from the agent's state). */
static void *update_msg(struct dns_responder *r, size_t len)
{
	void *m;

	if (r->chan < 0)
		return NULL;
	m = calloc(1, len);
	if (!m)
		worker_end(r, "could not take an update (out of memory)");
	return m;
}

void dns_responder_set_grants(struct dns_responder *r, const struct grant_set *grants)
{
	struct dnsp_grants *m;

	r->pol.grants = grants;
	r->sent.n = grants ? grants->n : 0;
	if (grants)
		memcpy(r->sent.v, grants->v, grants->n * sizeof(grants->v[0]));
	if (!(m = update_msg(r, sizeof(*m))))
		return;
	m->type = DNSP_GRANTS;
	if (grants) {
		m->n = (uint32_t)grants->n;
		memcpy(m->v, grants->v, grants->n * sizeof(grants->v[0]));
	}
	worker_update(r, m, sizeof(*m));
	free(m);
}

void dns_responder_set_self(struct dns_responder *r, const struct addr *self, size_t n_self)
{
	struct dnsp_self *m;

	r->pol.self = self;
	r->pol.n_self = n_self;
	if (!(m = update_msg(r, sizeof(*m))))
		return;
	m->type = DNSP_SELF;
	m->n = (uint32_t)(n_self < DNSP_SELF_MAX ? n_self : DNSP_SELF_MAX);
	memcpy(m->v, self, m->n * sizeof(self[0]));
	worker_update(r, m, sizeof(*m));
	free(m);
}

void dns_responder_pollfds(struct dns_responder *r, struct pollfd *fds, int *n, int max,
			   int *timeout_ms)
{
	if (r->chan >= 0) {
		if (*n < max)
			fds[(*n)++] = (struct pollfd){.fd = r->chan, .events = POLLIN};
		if (*n < max)
			fds[(*n)++] = (struct pollfd){.fd = r->tcp, .events = POLLIN};
		return;
	}
	/* No worker yet: the agent only waits for the session's first query,
	 * and reads none of it. */
	if (!r->started) {
		for (int k = 0; k < DNS_SOCKS; k++)
			if (r->listen[k] >= 0 && *n < max)
				fds[(*n)++] = (struct pollfd){.fd = r->listen[k], .events = POLLIN};
		return;
	}
	uint64_t now = boottime_ns();
	int ms = now >= r->respawn_ns ? 0 : (int)((r->respawn_ns - now) / 1000000ull) + 1;

	if (*timeout_ms < 0 || ms < *timeout_ms)
		*timeout_ms = ms;
}

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

/* A name from the worker: NUL-terminated, printable ASCII without spaces,
 * as the query parser admits. */
static bool name_valid(const char *name, size_t size)
{
	const char *end = memchr(name, '\0', size);

	if (!end)
		return false;
	for (const char *p = name; p < end; p++)
		if (*p < 0x21 || *p > 0x7e)
			return false;
	return true;
}

/* A refused request of the worker's: counted, logged at most once a second. */
static void refusal(struct dns_responder *r, const char *what, size_t size, int rc, uint64_t now)
{
	char name[DNS_NAME_MAX * 4 + 1];

	r->refused++;
	if (now - r->refusal_log_ns < DNS_REFUSAL_LOG_NS)
		return;
	log_warnx("session %s: refused %llu request(s) of its DNS worker, the last for %s: %s",
		  r->session, (unsigned long long)r->refused,
		  esc_textn(what, size, name, sizeof(name)), strerror(-rc));
	r->refusal_log_ns = now;
	r->refused = 0;
}

static void handle_program(struct dns_responder *r, const void *msg, size_t len)
{
	static struct dnsp_entry entries[DNSP_ADDRS_MAX * 64];
	struct dnsp_reply rep = {.type = DNSP_REPLY};
	const struct dnsp_program *m = msg;
	uint64_t now = boottime_ns();
	char a[ADDR_STRLEN];
	size_t n = 0;
	int rc;

	rc = dnsp_check(&r->pol, msg, len, now, time(NULL), entries, ARRAY_SIZE(entries), &n,
			&rep.ttl);
	if (rc)
		refusal(r, m->name, len >= sizeof(*m) ? sizeof(m->name) : 0, rc, now);
	for (size_t i = 0; !rc && i < n; i++) {
		rc = enforce_allow_answer(r->enf, &entries[i].addr, entries[i].port,
					  entries[i].expires_ns, entries[i].flags,
					  entries[i].grant);
		if (!rc)
			continue;
		/* Counted, and logged at most once a second: a session asking
		 * again and again for what no longer fits must not write the
		 * agent's log at its own pace. */
		r->unprogrammed++;
		if (now - r->unprogrammed_log_ns < DNS_REFUSAL_LOG_NS)
			continue;
		log_warnx("session %s: cannot program %s:%u for %s: %s; answering SERVFAIL "
			  "(%llu answer(s) since the last such line)",
			  r->session, addr_str(&entries[i].addr, a), entries[i].port, m->name,
			  strerror(-rc), (unsigned long long)r->unprogrammed);
		r->unprogrammed_log_ns = now;
		r->unprogrammed = 0;
	}
	rep.status = rc;
	if (send(r->chan, &rep, sizeof(rep), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(rep))
		worker_end(r, "did not take its reply");
}

/* A name the worker has not counted yet, before it goes upstream: counted
 * (and recorded) here, or refused. */
static void handle_name(struct dns_responder *r, const struct dnsp_name *m)
{
	struct dnsp_reply rep = {.type = DNSP_REPLY};

	rep.status = dnsp_check_name(&r->pol, m, sizeof(*m), time(NULL));
	if (rep.status)
		refusal(r, m->name, sizeof(m->name), rep.status, boottime_ns());
	if (send(r->chan, &rep, sizeof(rep), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(rep))
		worker_end(r, "did not take its reply");
}

/* Denied names are events as the kernel's refusals are, at as many a second
 * (EGRESS_EVENT_BURST, then EGRESS_EVENT_RATE): a session asking a name of
 * its own each query must not fill the agent's log, the state database and
 * every observer. Past the bucket a denial is counted, and the count logged
 * at most once per EVENT_LOG_INTERVAL_NS. */
#define DNS_EVENT_INTERVAL_NS (1000000000ull / EGRESS_EVENT_RATE)

static bool event_take(struct dns_responder *r)
{
	uint64_t now = boottime_ns(), tat = r->ev_tat_ns > now ? r->ev_tat_ns : now;

	if (tat - now <= (EGRESS_EVENT_BURST - 1) * DNS_EVENT_INTERVAL_NS) {
		r->ev_tat_ns = tat + DNS_EVENT_INTERVAL_NS;
		return true;
	}
	r->ev_held++;
	r->ev_held_all++;
	if (now - r->ev_log_ns >= EVENT_LOG_INTERVAL_NS) {
		r->ev_log_ns = now;
		log_warnx("session %s: %llu denied DNS names over the event rate (%d a second) not "
			  "reported one by one (%llu in all)",
			  r->session, (unsigned long long)r->ev_held, EGRESS_EVENT_RATE,
			  (unsigned long long)r->ev_held_all);
		r->ev_held = 0;
	}
	return false;
}

static void handle_event(struct dns_responder *r, const struct dnsp_event *m)
{
	static const char *const reasons[DNSP_R_MAX] = {
		[DNSP_R_NOT_ALLOWED] = "not-allowed",
		[DNSP_R_TYPE] = "type",
		[DNSP_R_CAP] = "cap",
		[DNSP_R_FORBIDDEN] = "forbidden",
		[DNSP_R_UPSTREAM] = "upstream",
	};
	struct event_rec ev = {.denied = true};
	char tb[8];

	ev.session = r->session;
	ev.name = m->name;
	ev.qtype = qtype_name(m->qtype, tb);
	ev.reason = reasons[m->reason];
	if (r->fn && event_take(r))
		r->fn(&ev, r->fn_arg);
}

/* The worker's own log lines, at most DNS_WORKER_LOGS a second, so that a
 * compromised worker cannot flood the agent's log. */
#define DNS_WORKER_LOGS 10

static void handle_log(struct dns_responder *r, const struct dnsp_log *m)
{
	uint64_t now = boottime_ns();

	if (now - r->log_ns >= NS_PER_S) {
		r->log_ns = now;
		r->logs = 0;
	}
	if (r->logs++ >= DNS_WORKER_LOGS)
		return;
	if (m->what == DNSP_LOG_RATE)
		log_warnx("session %s: %llu DNS queries over the upstream rate limit (%d a second) "
			  "answered SERVFAIL without asking upstream (%llu in all)",
			  r->session, (unsigned long long)m->a, DNS_UPSTREAM_RATE,
			  (unsigned long long)m->b);
	else
		log_debug("session %s: upstream failed for %s: %s", r->session, m->name,
			  ares_strerror((int)(int64_t)m->a));
}

/* Reads the worker's messages, each whole (SOCK_SEQPACKET) and of exactly
 * its type's size; anything else ends the worker. */
static void chan_process(struct dns_responder *r)
{
	for (int i = 0; i < DNS_CHAN_BUDGET && r->chan >= 0; i++) {
		ssize_t len = recv(r->chan, r->buf, sizeof(struct dnsp_program) + 1,
				   MSG_DONTWAIT | MSG_TRUNC);
		uint32_t type;

		if (len < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (len <= 0) {
			worker_end(r, len == 0 ? "ended" : "broke its channel");
			return;
		}
		memcpy(&type, r->buf, len >= 4 ? sizeof(type) : 0);
		if (len >= 4 && type == DNSP_PROGRAM &&
		    (size_t)len == sizeof(struct dnsp_program)) {
			handle_program(r, r->buf, (size_t)len);
		} else if (len >= 4 && type == DNSP_NAME &&
			   (size_t)len == sizeof(struct dnsp_name)) {
			handle_name(r, r->buf);
		} else if (len >= 4 && type == DNSP_EVENT &&
			   (size_t)len == sizeof(struct dnsp_event) &&
			   ((struct dnsp_event *)r->buf)->reason < DNSP_R_MAX &&
			   name_valid(((struct dnsp_event *)r->buf)->name, DNS_NAME_MAX + 1)) {
			handle_event(r, r->buf);
		} else if (len >= 4 && type == DNSP_LOG && (size_t)len == sizeof(struct dnsp_log) &&
			   ((struct dnsp_log *)r->buf)->what < DNSP_LOG_MAX &&
			   name_valid(((struct dnsp_log *)r->buf)->name, DNS_NAME_MAX + 1)) {
			handle_log(r, r->buf);
		} else {
			worker_end(r, "sent a malformed message");
			return;
		}
	}
}

/* The worker's asks for TCP connections, a few a turn: one it cannot make
 * ends it, as a malformed message does. */
static void tcp_process(struct dns_responder *r)
{
	for (int i = 0; i < DNS_CHAN_BUDGET && r->chan >= 0; i++) {
		int rc = dnsp_tcp_serve(r->tcp, r->tcp_servers, r->n_tcp_servers);

		if (rc == -EAGAIN)
			return;
		if (rc) {
			worker_end(r, rc == -EPIPE     ? "ended"
				      : rc == -EBADMSG ? "sent a malformed message"
						       : "broke its TCP channel");
			return;
		}
	}
}

/* A query waits on one of the bound sockets. */
static bool asked(const struct dns_responder *r, const struct pollfd *fds, int n)
{
	for (int j = 0; j < n; j++)
		for (int k = 0; k < DNS_SOCKS; k++)
			if (r->listen[k] >= 0 && fds[j].fd == r->listen[k] && fds[j].revents)
				return true;
	return false;
}

void dns_responder_process(struct dns_responder *r, const struct pollfd *fds, int n)
{
	char err[256];

	if (r->chan >= 0)
		grants_sync(r);
	for (int j = 0; j < n && r->chan >= 0; j++) {
		if (fds[j].fd == r->chan && fds[j].revents)
			chan_process(r);
		else if (r->chan >= 0 && fds[j].fd == r->tcp && fds[j].revents)
			tcp_process(r);
	}
	if (r->chan < 0 && !r->started && !asked(r, fds, n))
		return;
	if (r->chan < 0 && boottime_ns() >= r->respawn_ns) {
		if (worker_spawn(r, err, sizeof(err))) {
			r->respawn_ns = boottime_ns() + (uint64_t)DNS_RESPAWN_MAX_MS * 1000000ull;
			log_warnx("session %s: %s; its DNS goes unanswered until one starts (next "
				  "try in %u ms)",
				  r->session, err, DNS_RESPAWN_MAX_MS);
		} else if (r->started) {
			log_info("session %s: a new DNS worker (pid %d) serves its DNS", r->session,
				 (int)r->pid);
		}
		r->started = true;
	}
}
