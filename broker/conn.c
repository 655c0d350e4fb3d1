/* The connection both of errand-broker's relays serve a session on: its two
 * sides through its fiber's ring calls, each read and write under a
 * deadline, and what goes upstream wiped from memory once it is sent (it
 * holds keys and secrets' values). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/mem.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/conn.h"
#include "broker/fiber.h"
#include "broker/ring.h"

static int peer_addr(int fd, struct addr *out)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	if (ss.ss_family == AF_INET)
		addr_from_v4(out, ((struct sockaddr_in *)&ss)->sin_addr.s_addr);
	else
		memcpy(out->b, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
	return 0;
}

static int conn_init(struct conn *c, int fd)
{
	int one = 1, rc;

	c->cl.fd = fd;
	c->up.fd = -1;
	c->link.client_fd = fd;
	c->link.upstream_fd = -1;
	c->out.to = &c->cl;
	c->up_out.to = &c->up;
	c->up_out.wipe = true;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((rc = peer_addr(fd, &c->link.peer))) {
		close(fd);
		return rc;
	}
	c->req = http_parser_new(HTTP_REQUEST);
	c->resp = http_parser_new(HTTP_RESPONSE);
	if (!c->req || !c->resp) {
		http_parser_free(c->req);
		http_parser_free(c->resp);
		close(fd);
		return -ENOMEM;
	}
	sessions_link_add(&c->link);
	return 0;
}

void conn_fini(struct conn *c)
{
	conn_up_drop(c);
	sessions_link_del(&c->link); /* before the close: the number may be reused */
	upstream_close(&c->cl);
	http_parser_free(c->req);
	http_parser_free(c->resp);
}

int conn_start(struct conn *c, int fd, void (*fn)(void *arg), void *arg)
{
	int rc;

	if ((rc = conn_init(c, fd)))
		return rc;
	if ((rc = fiber_start(fn, arg)))
		conn_fini(c);
	return rc;
}

/* ---- output to either side --------------------------------------------- */

int conn_flush(struct conn_out *o)
{
	int rc;

	if (o->failed)
		return -EPIPE;
	if (!o->len)
		return 0;
	rc = upstream_write(o->to, o->b, o->len, CONN_IO_MS);
	if (o->wipe)
		OPENSSL_cleanse(o->b, o->len);
	o->len = 0;
	if (rc)
		o->failed = true;
	return rc;
}

int conn_put(struct conn_out *o, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc;

	while (len) {
		size_t n = sizeof(o->b) - o->len;

		if (!n && (rc = conn_flush(o)))
			return rc;
		n = sizeof(o->b) - o->len;
		if (n > len)
			n = len;
		memcpy(o->b + o->len, p, n);
		o->len += n;
		p += n;
		len -= n;
	}
	return 0;
}

int conn_str(struct conn_out *o, const char *s)
{
	return conn_put(o, s, strlen(s));
}

int conn_printf(struct conn_out *o, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -EMSGSIZE;
	return conn_put(o, buf, (size_t)n);
}

int conn_chunk(struct conn_out *o, bool chunked, const void *data, size_t len)
{
	char size[32];
	int rc;

	if (!len)
		return 0;
	if (!chunked)
		return conn_put(o, data, len);
	snprintf(size, sizeof(size), "%zx\r\n", len);
	if ((rc = conn_str(o, size)) || (rc = conn_put(o, data, len)))
		return rc;
	return conn_put(o, "\r\n", 2);
}

int conn_answer(struct conn *c, int status, bool close_after, const char *body)
{
	size_t len = strlen(body);
	int rc;

	if ((rc = conn_printf(&c->out,
			      "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			      "Content-Length: %zu\r\n%s\r\n",
			      status, http_status_text(status), len,
			      close_after ? "Connection: close\r\n" : "")) ||
	    (rc = conn_put(&c->out, body, len)))
		return rc;
	return conn_flush(&c->out);
}

int conn_vanswerf(struct conn *c, int status, bool close_after, const char *fmt, va_list ap)
{
	char body[4096];

	vsnprintf(body, sizeof(body), fmt, ap);
	return conn_answer(c, status, close_after, body);
}

int conn_answerf(struct conn *c, int status, bool close_after, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = conn_vanswerf(c, status, close_after, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- the session's request --------------------------------------------- */

ssize_t conn_fill(struct conn *c, int timeout_ms)
{
	ssize_t n;

	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	if (c->in_len == sizeof(c->in)) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	n = upstream_read(&c->cl, c->in + c->in_len, sizeof(c->in) - c->in_len, timeout_ms);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

int conn_read_head(struct conn *c, int idle_ms)
{
	bool first = true;
	size_t used;
	int rc;

	http_parser_reset(c->req, HTTP_REQUEST, false);
	for (;;) {
		if (c->in_off == c->in_len) {
			ssize_t n = conn_fill(c, first ? idle_ms : CONN_IO_MS);

			if (n == 0)
				return http_parse_eof(c->req) == -ENODATA ? -ENODATA : -ECONNRESET;
			if (n < 0)
				return (int)n;
		}
		rc = http_parse(c->req, c->in + c->in_off, c->in_len - c->in_off, &used, NULL,
				NULL);
		c->in_off += used;
		first = false;
		if (rc == HTTP_HEAD || rc == HTTP_DONE)
			return 0;
		if (rc < 0)
			return rc;
	}
}

int conn_request_head_end(struct conn *c)
{
	struct conn_out *o = &c->up_out;
	char line[64];
	int rc = 0;

	if ((rc = conn_str(o, "Accept-Encoding: identity\r\n")))
		return rc;
	if (http_framing(c->req) == HTTP_BODY_LENGTH) {
		snprintf(line, sizeof(line), "Content-Length: %llu\r\n",
			 (unsigned long long)http_content_length(c->req));
		rc = conn_str(o, line);
	} else if (http_framing(c->req) == HTTP_BODY_CHUNKED) {
		rc = conn_str(o, "Transfer-Encoding: chunked\r\n");
	}
	return rc ? rc : conn_str(o, "\r\n");
}

struct request_body {
	struct conn *c;
	bool chunked;
	uint64_t *bytes;
};

static int request_body(void *ctx, const uint8_t *data, size_t len)
{
	struct request_body *x = ctx;

	if (x->bytes)
		*x->bytes += len;
	return conn_chunk(&x->c->up_out, x->chunked, data, len);
}

int conn_send_body(struct conn *c, uint64_t *body, uint64_t *wire)
{
	struct request_body x = {c, http_framing(c->req) == HTTP_BODY_CHUNKED, body};
	size_t used;
	int rc;

	for (;;) {
		rc = http_parse(c->req, c->in + c->in_off, c->in_len - c->in_off, &used,
				request_body, &x);
		c->in_off += used;
		if (wire)
			*wire += used;
		if (rc == HTTP_DONE)
			break;
		if (rc < 0)
			return rc;
		if ((rc = conn_flush(&c->up_out)))
			return rc;
		ssize_t n = conn_fill(c, CONN_IO_MS);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
	}
	if (x.chunked && (rc = conn_str(&c->up_out, "0\r\n\r\n")))
		return rc;
	return conn_flush(&c->up_out);
}

/* ---- the upstream's answer --------------------------------------------- */

static void on_upstream_fd(void *ctx, int fd)
{
	struct conn *c = ctx;

	sessions_link_upstream(&c->link, fd);
}

int conn_up_open(struct conn *c, const struct upstream_env *env, const struct route *r, char *why,
		 size_t whylen)
{
	int st;

	if (c->up_route == r)
		return 0;
	if (c->up_route)
		conn_up_drop(c);
	st = upstream_open(&c->up, env, r, on_upstream_fd, c, why, whylen);
	if (st) {
		sessions_link_upstream(&c->link, -1);
		return st;
	}
	c->up_route = r;
	return 0;
}

void conn_up_drop(struct conn *c)
{
	/* Unlinked first: once closed, its number may be another connection's,
	 * which a session's end would shut down. */
	sessions_link_upstream(&c->link, -1);
	upstream_close(&c->up);
	c->up_route = NULL;
	c->up_off = c->up_len = 0;
	OPENSSL_cleanse(c->up_out.b, c->up_out.len);
	c->up_out.len = 0;
	c->up_out.failed = false;
}

ssize_t conn_up_fill(struct conn *c, int timeout_ms)
{
	ssize_t n;

	c->up_off = c->up_len = 0;
	n = upstream_read(&c->up, c->up_in, sizeof(c->up_in), timeout_ms);
	if (n > 0)
		c->up_len = (size_t)n;
	return n;
}

int conn_read_answer_head(struct conn *c, bool head_request, bool *any)
{
	size_t used;
	int rc;

	http_parser_reset(c->resp, HTTP_RESPONSE, head_request);
	for (;;) {
		if (c->up_off == c->up_len) {
			ssize_t n = conn_up_fill(c, CONN_ANSWER_MS);

			if (n == 0)
				return -ECONNRESET;
			if (n < 0)
				return (int)n;
			*any = true;
		}
		rc = http_parse(c->resp, c->up_in + c->up_off, c->up_len - c->up_off, &used, NULL,
				NULL);
		c->up_off += used;
		if (rc < 0)
			return rc;
		if (rc == HTTP_HEAD || rc == HTTP_DONE) {
			int st = http_status(c->resp);

			if (st >= 200 || st == 101)
				return 0;
			http_parser_reset(c->resp, HTTP_RESPONSE, head_request);
		}
	}
}

int conn_answer_head_end(struct conn *c, bool body, bool *chunked, bool *close_after)
{
	int rc = 0;

	*chunked = body && http_version_minor(c->req) == 1;
	if (body && !*chunked)
		*close_after = true;
	if (*chunked)
		rc = conn_str(&c->out, "Transfer-Encoding: chunked\r\n");
	else if (!body && http_framing(c->resp) == HTTP_BODY_LENGTH)
		rc = conn_str(&c->out, "Content-Length: 0\r\n");
	if (!rc && *close_after)
		rc = conn_str(&c->out, "Connection: close\r\n");
	return rc ? rc : conn_put(&c->out, "\r\n", 2);
}

int conn_answer_body(struct conn *c, http_body_fn fn, int (*drain)(void *ctx), void *ctx)
{
	size_t used;
	int rc;

	for (;;) {
		rc = http_parse(c->resp, c->up_in + c->up_off, c->up_len - c->up_off, &used, fn,
				ctx);
		c->up_off += used;
		if (rc == HTTP_DONE)
			return 0;
		if (rc < 0)
			return rc;
		if (drain && (rc = drain(ctx)))
			return rc;
		/* a pause of the upstream sends what is held, then waits */
		ssize_t n = c->out.len ? conn_up_fill(c, CONN_HOLD_MS) : -ETIMEDOUT;

		if (n == -ETIMEDOUT) {
			if ((rc = conn_flush(&c->out)))
				return rc;
			n = conn_up_fill(c, CONN_ANSWER_MS);
		}

		/* an answer the close ends is whole only if TLS says so */
		if (n == 0)
			return http_parse_eof(c->resp) == HTTP_DONE && !c->up.cut ? 0 : -ECONNRESET;
		if (n < 0)
			return (int)n;
	}
}
