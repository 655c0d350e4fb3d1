/* One session connection as errand-broker serves it, as a fiber (fiber.h):
 * the session's side and the upstream's, each with its buffers, the HTTP
 * parsers of both, and the steps the provider relay and the intercepted hosts
 * share (a request's head read, its body passed on, the answer's head read
 * and its body relayed, the broker's own answers). */
#ifndef ERRAND_BROKER_CONN_H
#define ERRAND_BROKER_CONN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker/http.h"
#include "broker/route.h"
#include "broker/sessions.h"
#include "broker/upstream.h"

#define CONN_BUF 65536
#define CONN_IO_MS 30000      /* a request or an answer part way through, either side */
#define CONN_ANSWER_MS 300000 /* an upstream thinking (model calls are slow) */
#define CONN_HOLD_MS 1	      /* what an answer has for the session, while more may follow */

/* Bytes on their way to one side, sent when the buffer is full or flushed. */
struct conn_out {
	struct upstream *to;
	bool wipe;   /* what it holds may hold a secret: wiped once sent */
	bool failed; /* a write failed: the side is gone, every later flush fails */
	size_t len;
	uint8_t b[CONN_BUF];
};

struct conn {
	struct upstream cl;	      /* the session's side: plain, or a TLS server */
	struct upstream up;	      /* the upstream's, open when up_route is set */
	const struct route *up_route; /* whose host up is open to, NULL when closed */
	struct session_link link;
	struct http_parser *req, *resp;
	uint8_t in[CONN_BUF]; /* from the session */
	size_t in_off, in_len;
	uint8_t up_in[CONN_BUF]; /* from the upstream */
	size_t up_off, up_len;
	struct conn_out out;	/* to the session */
	struct conn_out up_out; /* to the upstream; it holds secrets */
};

/* Readies c, zeroed by the caller and never moved after, for the accepted
 * session connection fd (the peer's address, the parsers, the link by which
 * a stopped session's connections are cut) and runs fn(arg) as a fiber,
 * which then owns c and ends it with conn_fini(). 0, or -errno with fd
 * closed and nothing left in c to free. */
int conn_start(struct conn *c, int fd, void (*fn)(void *arg), void *arg);
/* Closes both sides and frees what conn_start made (not c itself). */
void conn_fini(struct conn *c);

/* 0 or -errno. Bytes put after a failed flush are not sent. */
int conn_flush(struct conn_out *o);
int conn_put(struct conn_out *o, const void *data, size_t len);
int conn_str(struct conn_out *o, const char *s);
__attribute__((format(printf, 2, 3))) int conn_printf(struct conn_out *o, const char *fmt, ...);
/* data as one chunk of a chunked body when chunked (nothing for len 0), else
 * as it is. 0 or -errno. */
int conn_chunk(struct conn_out *o, bool chunked, const void *data, size_t len);

/* The broker's own answer: status, a text body, "Connection: close" when
 * close_after; flushed. 0 or -errno. */
int conn_answer(struct conn *c, int status, bool close_after, const char *body);
int conn_vanswerf(struct conn *c, int status, bool close_after, const char *fmt, va_list ap);
__attribute__((format(printf, 4, 5))) int conn_answerf(struct conn *c, int status, bool close_after,
						       const char *fmt, ...);

/* Bytes read from the session into in (0 at the end of the stream), or -errno. */
ssize_t conn_fill(struct conn *c, int timeout_ms);
/* The next request's head, waiting idle_ms for its first byte. 0, -ENODATA
 * when the session closed between requests, or another -errno (the
 * parser's: answered with http_error_status() by the caller). */
int conn_read_head(struct conn *c, int idle_ms);
/* Ends the head of a request that goes upstream: identity asked (the broker
 * relays nothing it cannot scrub), the body framed as the session framed it.
 * 0 or -errno. */
int conn_request_head_end(struct conn *c);
/* The rest of the session's request goes upstream as it arrives, chunked
 * anew when it came chunked, and flushed. Adds the body's bytes to *body and
 * the bytes it took of the session's stream to *wire (either may be NULL).
 * 0, the parser's -errno (the request is malformed), or another -errno. */
int conn_send_body(struct conn *c, uint64_t *body, uint64_t *wire);

/* Opens up to r's host (0 at once when it is open to r already, a connection
 * to another host closed first). 0, or the status to answer with and why, as
 * upstream_open(). */
int conn_up_open(struct conn *c, const struct upstream_env *env, const struct route *r, char *why,
		 size_t whylen);
/* Closes the upstream side, dropping what is buffered for or from it. */
void conn_up_drop(struct conn *c);
/* Bytes read from upstream into up_in (0 at the end of the stream), or -errno. */
ssize_t conn_up_fill(struct conn *c, int timeout_ms);
/* The answer's head, 1xx answers but 101 skipped; *any is set once a byte of
 * the answer came. 0, or -errno. */
int conn_read_answer_head(struct conn *c, bool head_request, bool *any);
/* Ends the head of an answer that goes to the session with its body framed
 * anew (its length changes as secrets are cut out): chunked to an HTTP/1.1
 * session, else read to the connection's end. Sets *chunked; sets
 * *close_after when the connection must close after the body. 0 or -errno. */
int conn_answer_head_end(struct conn *c, bool body, bool *chunked, bool *close_after);
/* Parses the answer's body into fn(ctx, ...) as it arrives; drain(ctx), when
 * set, before each wait for more. What the session is owed goes out when the
 * upstream pauses (nothing more within CONN_HOLD_MS), so a head and the body
 * written right after it travel as one: one TLS record, one wakeup of the
 * session, instead of two. 0 at the body's end, or -errno: fn's, drain's,
 * the session's or the upstream's. */
int conn_answer_body(struct conn *c, http_body_fn fn, int (*drain)(void *ctx), void *ctx);

#endif
