/* Resolve, judge, dial, verify: the broker's only way out. c-ares runs on a
 * channel of its own per lookup, on a helper thread (its poll would hold up
 * every connection of the fiber's thread); TLS runs over a BIO pair whose
 * network side the connection's ring calls read and write, so the deadlines
 * hold in the handshake too. */
#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/fiber.h"
#include "broker/ring.h"
#include "broker/upstream.h"
#include "lib/addr.h"
#include "broker/blog.h"
#include "lib/util.h"

#define MAX_ADDRS 16
#define TLS_BIO_BUF 65536
#define NET_CHUNK 16384

struct lookup {
	bool done;
	int status;
	struct addr addrs[MAX_ADDRS];
	size_t n;
};

static void lookup_done(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct lookup *l = arg;

	(void)timeouts;
	l->done = true;
	l->status = status;
	for (struct ares_addrinfo_node *n = res ? res->nodes : NULL; n && l->n < MAX_ADDRS;
	     n = n->ai_next) {
		if (n->ai_family == AF_INET)
			addr_from_v4(&l->addrs[l->n++],
				     ((struct sockaddr_in *)n->ai_addr)->sin_addr.s_addr);
		else if (n->ai_family == AF_INET6)
			memcpy(l->addrs[l->n++].b, &((struct sockaddr_in6 *)n->ai_addr)->sin6_addr,
			       16);
	}
	if (res)
		ares_freeaddrinfo(res);
}

/* Drives one channel until the lookup ends or the deadline passes. */
static void lookup_run(ares_channel ch, struct lookup *l, int64_t deadline)
{
	while (!l->done) {
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		struct pollfd pfd[ARES_GETSOCK_MAXNUM];
		struct timeval maxtv, tv, *tvp;
		int64_t left = deadline - now_ms();
		int bits, n = 0, ms;

		if (left <= 0) {
			ares_cancel(ch); /* calls lookup_done with ARES_ECANCELLED */
			l->status = ARES_ETIMEOUT;
			return;
		}
		bits = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
		for (int i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
			short ev = (short)((ARES_GETSOCK_READABLE(bits, i) ? POLLIN : 0) |
					   (ARES_GETSOCK_WRITABLE(bits, i) ? POLLOUT : 0));

			if (ev)
				pfd[n++] = (struct pollfd){.fd = socks[i], .events = ev};
		}
		maxtv.tv_sec = left / 1000;
		maxtv.tv_usec = (left % 1000) * 1000;
		tvp = ares_timeout(ch, &maxtv, &tv);
		ms = (int)(tvp->tv_sec * 1000 + tvp->tv_usec / 1000) + 1;
		if (poll(pfd, (nfds_t)n, ms) <= 0) {
			ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
			continue;
		}
		for (int i = 0; i < n; i++)
			ares_process_fd(ch,
					pfd[i].revents & (POLLIN | POLLERR | POLLHUP)
						? pfd[i].fd
						: ARES_SOCKET_BAD,
					pfd[i].revents & POLLOUT ? pfd[i].fd : ARES_SOCKET_BAD);
	}
}

/* 0 with the name's addresses, or the status to answer and why. Blocks. */
static int resolve_here(const struct upstream_env *env, const char *host, struct lookup *l,
			char *why, size_t whylen)
{
	struct ares_options opts = {.timeout = 1500, .tries = 3};
	struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC};
	char servers[1024] = "";
	ares_channel ch;
	int rc;

	rc = ares_init_options(&ch, &opts, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
	if (rc != ARES_SUCCESS) {
		snprintf(why, whylen, "the resolver cannot start: %s", ares_strerror(rc));
		return 502;
	}
	for (char **s = env->cfg->dns_upstream; s && *s; s++) {
		size_t len = strlen(servers);

		snprintf(servers + len, sizeof(servers) - len, "%s%s", len ? "," : "", *s);
	}
	if (*servers && (rc = ares_set_servers_ports_csv(ch, servers)) != ARES_SUCCESS) {
		ares_destroy(ch);
		snprintf(why, whylen, "dns.upstream cannot be used: %s", ares_strerror(rc));
		return 502;
	}
	ares_getaddrinfo(ch, host, NULL, &hints, lookup_done, l);
	lookup_run(ch, l, now_ms() + UPSTREAM_LOOKUP_MS);
	ares_destroy(ch);
	if (l->status == ARES_ETIMEOUT && !l->n) {
		snprintf(why, whylen, "the name did not resolve in time (%s, lookup)", host);
		return 504;
	}
	if (!l->n) {
		snprintf(why, whylen, "the name did not resolve (%s: %s)", host,
			 ares_strerror(l->status));
		return 502;
	}
	return 0;
}

struct resolve_job {
	const struct upstream_env *env;
	const char *host;
	struct lookup *l;
	char *why;
	size_t whylen;
	int status;
};

static void resolve_job_run(void *arg)
{
	struct resolve_job *j = arg;

	j->status = resolve_here(j->env, j->host, j->l, j->why, j->whylen);
}

static int resolve(const struct upstream_env *env, const char *host, struct lookup *l, char *why,
		   size_t whylen)
{
	struct resolve_job j = {env, host, l, why, whylen, 502};

	fiber_offload(resolve_job_run, &j);
	return j.status;
}

static void sockaddr_of(const struct addr *a, uint16_t port, struct sockaddr_storage *ss,
			socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (addr_is_v4(a)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr.s_addr = addr_v4(a);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, a->b, 16);
		*len = sizeof(*sin6);
	}
}

/* Every address judged, then dialled in turn until one answers, all within
 * UPSTREAM_DIAL_MS. */
static int dial(struct upstream *u, const struct upstream_env *env, const struct route *r,
		const struct lookup *l, void (*on_fd)(void *ctx, int fd), void *ctx, char *why,
		size_t whylen)
{
	const struct config_provider *p = r->p;
	int64_t deadline = now_ms() + UPSTREAM_DIAL_MS;
	char text[ADDR_STRLEN];
	int last = 0, allowed = 0, one = 1;

	for (size_t i = 0; i < l->n; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		int64_t left = deadline - now_ms();
		int fd, rc;

		/* allowInternal lifts the rule only for an address written as
		 * one: what a name points at is not the operator's to decide */
		if (addr_forbidden(&l->addrs[i], env->cfg->public_ranges, env->cfg->n_public) &&
		    !(p->host_literal && p->allow_internal)) {
			blog_debug("provider %s: %s is not a public address; not dialled", p->name,
				   addr_str(&l->addrs[i], text));
			continue;
		}
		allowed++;
		if (left <= 0) {
			last = -ETIMEDOUT;
			break;
		}
		fd = socket(addr_is_v4(&l->addrs[i]) ? AF_INET : AF_INET6,
			    SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			last = -errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (on_fd)
			on_fd(ctx, fd);
		sockaddr_of(&l->addrs[i], p->port, &ss, &len);
		rc = ring_connect(fd, (struct sockaddr *)&ss, len, (int)left);
		if (!rc) {
			u->fd = fd;
			return 0;
		}
		if (on_fd)
			on_fd(ctx, -1);
		close(fd);
		last = rc;
		blog_info("provider %s: dial %s port %u: %s", p->name, addr_str(&l->addrs[i], text),
			  p->port, strerror(-rc));
	}
	if (!allowed) {
		snprintf(why, whylen, "not a public host (%s)", p->host);
		return 403;
	}
	snprintf(why, whylen, "upstream unreachable (%s port %u, dial: %s)", p->host, p->port,
		 last == -ETIMEDOUT ? "timed out" : strerror(-last));
	return 502;
}

/* Everything ssl wrote goes out on the socket. */
static int net_flush(struct upstream *u, int timeout_ms)
{
	uint8_t buf[NET_CHUNK];
	int n, rc;

	while ((n = BIO_read(u->net, buf, sizeof(buf))) > 0)
		if ((rc = ring_send_all(u->fd, buf, (size_t)n, timeout_ms)))
			return rc;
	return 0;
}

/* What the socket has goes to ssl. 1, 0 at the end of the stream, or -errno. */
static int net_fill(struct upstream *u, int timeout_ms)
{
	uint8_t buf[TLS_BIO_BUF];
	size_t room = BIO_ctrl_get_write_guarantee(u->net);
	ssize_t n;

	if (room > sizeof(buf))
		room = sizeof(buf);
	if (!room)
		return -ENOBUFS;
	n = ring_recv(u->fd, buf, room, timeout_ms);
	if (n <= 0) {
		if (n == 0)
			BIO_shutdown_wr(u->net);
		return (int)n;
	}
	return BIO_write(u->net, buf, (int)n) == (int)n ? 1 : -EIO;
}

/* Runs one TLS step (handshake, read or write) until it completes. Returns
 * its positive result, 0 for a clean end, or -errno. */
static int tls_step(struct upstream *u, int (*step)(SSL *, void *, int), void *buf, int len,
		    int timeout_ms)
{
	for (;;) {
		int n, err, rc;

		/* the thread's error queue is every fiber's on it: only this
		 * step's errors may count */
		ERR_clear_error();
		n = step(u->ssl, buf, len);

		err = n > 0 ? SSL_ERROR_NONE : SSL_get_error(u->ssl, n);
		if ((rc = net_flush(u, timeout_ms)))
			return rc;
		switch (err) {
		case SSL_ERROR_NONE:
			return n;
		case SSL_ERROR_ZERO_RETURN:
			return 0;
		case SSL_ERROR_WANT_READ:
			rc = net_fill(u, timeout_ms);
			/* the socket ended inside or instead of a record: only a
			 * close_notify (SSL_ERROR_ZERO_RETURN) tells a whole stream */
			u->cut |= rc == 0;
			if (rc <= 0)
				return rc;
			break;
		case SSL_ERROR_WANT_WRITE:
			break;
		default:
			return -EPROTO;
		}
	}
}

static int do_handshake(SSL *ssl, void *buf, int len)
{
	(void)buf;
	(void)len;
	return SSL_do_handshake(ssl);
}

static int do_read(SSL *ssl, void *buf, int len)
{
	return SSL_read(ssl, buf, len);
}

static int do_write(SSL *ssl, void *buf, int len)
{
	return SSL_write(ssl, buf, len);
}

static int tls_start(struct upstream *u, const struct route *r, int64_t deadline, char *why,
		     size_t whylen)
{
	const struct config_provider *p = r->p;
	X509_VERIFY_PARAM *param;
	BIO *inner = NULL;
	int rc;

	u->ssl = SSL_new(r->tls);
	if (!u->ssl || !BIO_new_bio_pair(&inner, TLS_BIO_BUF, &u->net, TLS_BIO_BUF)) {
		snprintf(why, whylen, "upstream unreachable (%s: out of memory)", p->host);
		return 502;
	}
	SSL_set_bio(u->ssl, inner, inner);
	SSL_set_connect_state(u->ssl);
	param = SSL_get0_param(u->ssl);
	if (p->host_literal) {
		X509_VERIFY_PARAM_set1_ip_asc(param, p->host);
	} else {
		SSL_set_tlsext_host_name(u->ssl, p->host);
		X509_VERIFY_PARAM_set1_host(param, p->host, strlen(p->host));
	}
	SSL_set_alpn_protos(u->ssl, (const uint8_t *)"\x08http/1.1", 9);
	rc = tls_step(u, do_handshake, NULL, 0,
		      (int)(deadline > now_ms() ? deadline - now_ms() : 1));
	if (rc > 0)
		return 0;
	if (SSL_get_verify_result(u->ssl) != X509_V_OK)
		snprintf(why, whylen, "upstream unreachable (%s: certificate not trusted: %s)",
			 p->host, X509_verify_cert_error_string(SSL_get_verify_result(u->ssl)));
	else
		snprintf(why, whylen, "upstream unreachable (%s: TLS handshake failed%s)", p->host,
			 rc == -ETIMEDOUT ? ", timed out" : "");
	ERR_clear_error();
	return 502;
}

int upstream_open(struct upstream *u, const struct upstream_env *env, const struct route *r,
		  void (*on_fd)(void *ctx, int fd), void *ctx, char *why, size_t whylen)
{
	struct lookup l = {0};
	int64_t start;
	int rc;

	memset(u, 0, sizeof(*u));
	u->fd = -1;
	u->route = r;
	if (r->p->host_literal) {
		addr_parse(r->p->host, &l.addrs[0]);
		l.n = 1;
	} else if ((rc = resolve(env, r->p->host, &l, why, whylen))) {
		return rc;
	}
	start = now_ms();
	if ((rc = dial(u, env, r, &l, on_fd, ctx, why, whylen)))
		return rc;
	if (r->tls && (rc = tls_start(u, r, start + UPSTREAM_DIAL_MS, why, whylen))) {
		if (on_fd)
			on_fd(ctx, -1); /* unlinked before its number is free again */
		upstream_close(u);
		return rc;
	}
	return 0;
}

int upstream_accept(struct upstream *u, SSL_CTX *ctx, int fd, int timeout_ms)
{
	BIO *inner = NULL;
	int rc;

	memset(u, 0, sizeof(*u));
	u->fd = fd;
	u->ssl = SSL_new(ctx);
	if (!u->ssl || !BIO_new_bio_pair(&inner, TLS_BIO_BUF, &u->net, TLS_BIO_BUF))
		return -ENOMEM;
	SSL_set_bio(u->ssl, inner, inner);
	SSL_set_accept_state(u->ssl);
	rc = tls_step(u, do_handshake, NULL, 0, timeout_ms);
	ERR_clear_error();
	return rc > 0 ? 0 : rc ? rc : -EPROTO;
}

ssize_t upstream_read(struct upstream *u, void *buf, size_t len, int timeout_ms)
{
	if (!u->ssl)
		return ring_recv(u->fd, buf, len, timeout_ms);
	return tls_step(u, do_read, buf, (int)(len > INT32_MAX ? INT32_MAX : len), timeout_ms);
}

int upstream_write(struct upstream *u, const void *buf, size_t len, int timeout_ms)
{
	const uint8_t *p = buf;

	if (!u->ssl)
		return ring_send_all(u->fd, buf, len, timeout_ms);
	while (len) {
		int chunk = len > NET_CHUNK ? NET_CHUNK : (int)len;
		int n = tls_step(u, do_write, (void *)p, chunk, timeout_ms);

		if (n <= 0)
			return n ? n : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void upstream_close(struct upstream *u)
{
	if (!u)
		return;
	if (u->ssl)
		SSL_free(u->ssl); /* frees the inner BIO of the pair */
	if (u->net)
		BIO_free(u->net);
	if (u->fd >= 0)
		close(u->fd);
	u->ssl = NULL;
	u->net = NULL;
	u->fd = -1;
}
