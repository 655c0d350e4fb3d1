/* errand-broker's way to a provider: the name resolved with c-ares on this
 * host's resolver (dns.upstream when set) within 5 s, every address judged
 * against the forbidden ranges, the dial within 10 s across all of them, and
 * TLS verified against the route's roots. Redirects are the caller's to pass
 * back; nothing here follows one. */
#ifndef ERRAND_BROKER_UPSTREAM_H
#define ERRAND_BROKER_UPSTREAM_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "broker/route.h"
#include "lib/config.h"

#define UPSTREAM_LOOKUP_MS 5000
#define UPSTREAM_DIAL_MS 10000

struct upstream {
	int fd; /* -1 when closed */
	SSL *ssl;
	BIO *net; /* the network side of ssl's BIO pair */
	bool cut; /* the stream ended without TLS's close_notify: it may be cut */
	const struct route *route;
};

/* What the broker was configured with that upstream judging needs. */
struct upstream_env {
	const struct errand_config *cfg; /* public_ranges, dns_upstream */
};

/* Opens u to r's provider. 0, or the status to answer the session with (403,
 * 502, 504) and the reason, one line without secrets, in why. on_fd, when
 * set, is told the descriptor before the dial (so a stopped session can cut
 * it). */
int upstream_open(struct upstream *u, const struct upstream_env *env, const struct route *r,
		  void (*on_fd)(void *ctx, int fd), void *ctx, char *why, size_t whylen);
/* The session's side of an intercepted connection: u is readied on the
 * accepted fd (which u then holds) as a TLS server of ctx, and the handshake
 * run within timeout_ms. 0 or -errno (-EPROTO: the handshake failed). */
int upstream_accept(struct upstream *u, SSL_CTX *ctx, int fd, int timeout_ms);
/* Bytes read (0 at the end of the stream), or -errno; -ETIMEDOUT past timeout_ms. */
ssize_t upstream_read(struct upstream *u, void *buf, size_t len, int timeout_ms);
/* 0 or -errno. */
int upstream_write(struct upstream *u, const void *buf, size_t len, int timeout_ms);
void upstream_close(struct upstream *u); /* NULL-safe; leaves u closed (fd -1) */

#endif
