/* One session connection: calls read with the strict parser, judged (session
 * by source address, stand-in in the placement's header, path, capabilities),
 * forwarded with the real key in that header alone, and answered with the
 * provider's reply, the key scrubbed from head and body as they stream. Each
 * call leaves a receipt and one log line, neither holding a query, a header
 * value or a body. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <openssl/mem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker/http.h"
#include "broker/journal.h"
#include "broker/relay.h"
#include "broker/ring.h"
#include "broker/scrub.h"
#include "broker/sessions.h"
#include "broker/blog.h"
#include "lib/util.h"

#define IO_BUF 65536
#define HEAD_OUT_MAX (HTTP_HEAD_MAX + 8192)
#define CLIENT_IDLE_MS 120000	  /* a kept-alive connection waiting for its next call */
#define CLIENT_IO_MS 30000	  /* a call part way through */
#define UPSTREAM_ANSWER_MS 300000 /* a provider thinking (model calls are slow) */
#define UPSTREAM_WRITE_MS 30000
#define RELAY_CONN_MAX 1024  /* connections at once, every session together */
#define RELAY_REREAD_MS 2000 /* how long a 401 waits for the agent to read the key again */

static _Atomic int conns_open;

struct conn {
	struct broker *b;
	int fd;
	struct session_link link;
	struct io_uring ring;
	struct http_parser *req, *resp;
	uint8_t in[IO_BUF]; /* from the session */
	size_t in_off, in_len;
	uint8_t up_in[IO_BUF]; /* from the provider */
	size_t up_off, up_len;
	uint8_t up_out[IO_BUF]; /* to the provider, before it is sent */
	size_t up_out_len;
	uint8_t out[IO_BUF]; /* to the session */
	size_t out_len;
	uint8_t body[IO_BUF]; /* scrubbed answer body, not yet framed */
	size_t body_len;
	struct upstream up;
	const struct route *up_route; /* whose provider up is open to, NULL when closed */
	bool client_failed;
};

/* One call on the connection. */
struct call {
	struct route *route;
	char session[BROKER_SESSION_MAX + 1];
	char standin[BROKER_STANDIN_LEN + 1];
	char key[ROUTE_KEY_MAX];
	int key_len;
	const char *method;
	const char *rest; /* the raw path after the route, query included */
	char path[RECEIPT_PATH_MAX + 1];
	uint64_t query_len;
	int64_t start;
	int status;
	enum receipt_outcome outcome;
	bool receipt;	     /* a receipt is due */
	uint64_t unrecorded; /* denied calls left unrecorded before this one */
	bool log_entry;	     /* the log line names the capability entry for the call */
	uint64_t up_bytes, down_bytes, answer_bytes;
	bool req_chunked;
	bool chunked_out;
	bool close_after;
	struct scrub *scrub;
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- output to the session -------------------------------------------- */

static int out_flush(struct conn *c)
{
	int rc;

	if (!c->out_len || c->client_failed)
		return c->client_failed ? -EPIPE : 0;
	rc = ring_send_all(&c->ring, c->fd, c->out, c->out_len, CLIENT_IO_MS);
	c->out_len = 0;
	if (rc)
		c->client_failed = true;
	return rc;
}

static int out_put(struct conn *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc;

	while (len) {
		size_t n = sizeof(c->out) - c->out_len;

		if (!n && (rc = out_flush(c)))
			return rc;
		n = sizeof(c->out) - c->out_len;
		if (n > len)
			n = len;
		memcpy(c->out + c->out_len, p, n);
		c->out_len += n;
		p += n;
		len -= n;
	}
	return 0;
}

__attribute__((format(printf, 2, 3))) static int out_printf(struct conn *c, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -EMSGSIZE;
	return out_put(c, buf, (size_t)n);
}

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 504:
		return "Gateway Timeout";
	}
	return "Error";
}

/* The broker's own answer: status, a text body, and the connection closed
 * after it when close_after (always after a refused call with a body unread). */
static int answer(struct conn *c, struct call *k, int status, const char *body, bool close_after)
{
	size_t len = strlen(body);
	int rc;

	k->status = status;
	k->close_after |= close_after;
	if ((rc = out_printf(c,
			     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			     "Content-Length: %zu\r\n%s\r\n",
			     status, status_text(status), len,
			     k->close_after ? "Connection: close\r\n" : "")) ||
	    (rc = out_put(c, body, len)))
		return rc;
	return out_flush(c);
}

__attribute__((format(printf, 4, 5))) static int answerf(struct conn *c, struct call *k, int status,
							 const char *fmt, ...)
{
	char body[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	return answer(c, k, status, body, k->req_chunked || http_framing(c->req) != HTTP_BODY_NONE);
}

/* ---- input from the session ------------------------------------------- */

/* Bytes read into in (0 at the end of the stream), or -errno. */
static ssize_t client_fill(struct conn *c, int timeout_ms)
{
	ssize_t n;

	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	if (c->in_len == sizeof(c->in)) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	n = ring_recv(&c->ring, c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, timeout_ms);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

/* The next call's head. 0, -ENODATA when the session closed between calls,
 * or another -errno (the parser's, answered by the caller). */
static int read_head(struct conn *c)
{
	bool first = true;
	size_t used;
	int rc;

	http_parser_reset(c->req, HTTP_REQUEST, false);
	for (;;) {
		if (c->in_off == c->in_len) {
			ssize_t n = client_fill(c, first ? CLIENT_IDLE_MS : CLIENT_IO_MS);

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

/* ---- output to the provider ------------------------------------------- */

static int up_flush(struct conn *c)
{
	int rc = 0;

	if (c->up_out_len)
		rc = upstream_write(&c->up, c->up_out, c->up_out_len, UPSTREAM_WRITE_MS);
	OPENSSL_cleanse(c->up_out, c->up_out_len); /* the head held the key */
	c->up_out_len = 0;
	return rc;
}

static int up_put(struct conn *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc;

	while (len) {
		size_t n = sizeof(c->up_out) - c->up_out_len;

		if (!n && (rc = up_flush(c)))
			return rc;
		n = sizeof(c->up_out) - c->up_out_len;
		if (n > len)
			n = len;
		memcpy(c->up_out + c->up_out_len, p, n);
		c->up_out_len += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int up_str(struct conn *c, const char *s)
{
	return up_put(c, s, strlen(s));
}

static void up_drop(struct conn *c)
{
	upstream_close(&c->up);
	sessions_link_upstream(&c->link, -1);
	c->up_route = NULL;
	c->up_off = c->up_len = 0;
}

/* ---- judging the call -------------------------------------------------- */

static struct route *route_find(struct broker *b, const char *name, size_t len)
{
	for (size_t i = 0; i < b->n_routes; i++)
		if (strlen(b->routes[i].p->name) == len && !memcmp(b->routes[i].p->name, name, len))
			return &b->routes[i];
	return NULL;
}

static const char *placement_header(const struct config_provider *p)
{
	return p->placement == PLACEMENT_BEARER ? "Authorization" : "x-api-key";
}

static const char *other_header(const struct config_provider *p)
{
	return p->placement == PLACEMENT_BEARER ? "x-api-key" : "Authorization";
}

static bool value_is(const char *v, size_t len, const char *want)
{
	size_t n = strlen(want);

	return len == n && !CRYPTO_memcmp(v, want, n);
}

/* The stand-in as the placement's header carries it. */
static bool standin_presented(const struct http_header *h, const struct config_provider *p,
			      const char *standin)
{
	if (!h || !*standin)
		return false;
	if (p->placement == PLACEMENT_X_API_KEY)
		return value_is(h->value, h->value_len, standin);
	return h->value_len > 7 && !strncasecmp(h->value, "Bearer ", 7) &&
	       value_is(h->value + 7, h->value_len - 7, standin);
}

static bool holds_standin(const struct http_parser *req, const char *name)
{
	for (size_t i = 0; i < http_header_count(req); i++) {
		const struct http_header *h = http_header_at(req, i);

		if (!strcasecmp(h->name, name) && strstr(h->value, BROKER_STANDIN_PREFIX))
			return true;
	}
	return false;
}

/* The entry that would name the call, for the log. */
static void capability_entry(const char *method, const char *raw, char *out, size_t len)
{
	char path[RECEIPT_PATH_MAX + 1];

	receipt_path(raw, path);
	snprintf(out, len, "{\"method\": \"%s\", \"path\": \"%s\"}", receipt_method(method), path);
}

/* 0 to forward; otherwise the call was answered (401, 403, 400). */
static int judge(struct conn *c, struct call *k, bool *answered)
{
	const struct config_provider *p = k->route->p;
	const struct http_header *h = http_header_find(c->req, placement_header(p));
	char entry[RECEIPT_PATH_MAX + 64];
	bool named = false;

	*answered = true;
	if (holds_standin(c->req, other_header(p))) {
		k->outcome = RECEIPT_REFUSED;
		blog_info("session=%s provider=%s: the stand-in came in %s, not %s", k->session,
			  p->name, other_header(p), placement_header(p));
		return answerf(c, k, 401,
			       "errand-broker: provider %s takes the stand-in in %s only\n",
			       p->name, placement_header(p));
	}
	if (!standin_presented(h, p, k->standin)) {
		k->outcome = RECEIPT_DENIED;
		k->receipt = sessions_denied_due(k->session, &k->unrecorded);
		if (k->receipt && k->unrecorded)
			blog_info(
				"session=%s: %llu denied calls left unrecorded since the last one",
				k->session, (unsigned long long)k->unrecorded);
		blog_info("session=%s provider=%s: denied, no stand-in of this session in %s",
			  k->session, p->name, placement_header(p));
		return answerf(c, k, 401,
			       "errand-broker: provider %s needs this session's stand-in in %s\n",
			       p->name, placement_header(p));
	}
	k->receipt = true;
	if (http_path_check(k->rest)) {
		k->outcome = RECEIPT_REFUSED;
		return answerf(c, k, 400,
			       "errand-broker: the path could be read more than one way (an empty, "
			       ". or .. segment, an encoded /, \\ or dot segment, or ; "
			       "parameters)\n");
	}
	for (size_t i = 0; i < p->n_caps && !named; i++)
		named = http_capability_match(p->caps[i].method, p->caps[i].path, k->method,
					      k->rest);
	if (p->has_caps && !p->all_calls && !named) {
		capability_entry(k->method, k->rest, entry, sizeof(entry));
		if (p->strict) {
			char list[3072];
			size_t o = 0;

			k->outcome = RECEIPT_REFUSED;
			blog_info("session=%s provider=%s: refused, not in capabilities; an entry "
				  "naming it: %s",
				  k->session, p->name, entry);
			for (size_t i = 0; i < p->n_caps && o < sizeof(list); i++)
				o += (size_t)snprintf(list + o, sizeof(list) - o, "  %s %s\n",
						      p->caps[i].method, p->caps[i].path);
			return answerf(c, k, 403,
				       "errand-broker: provider %s's capabilities do not name this "
				       "call; they allow:\n%s",
				       p->name, list);
		}
		blog_warnx("session=%s provider=%s: not in capabilities, forwarded "
			   "(strictCapabilities would refuse it); an entry naming it: %s",
			   k->session, p->name, entry);
	} else if (!p->has_caps) {
		/* said in the call's one log line: a list can be written from a day's log */
		k->log_entry = true;
	}
	*answered = false;
	return 0;
}

/* ---- the call upstream ------------------------------------------------- */

static bool hop_by_hop(const char *name)
{
	static const char *const names[] = {
		"Connection",
		"Keep-Alive",
		"Proxy-Connection",
		"Proxy-Authorization",
		"TE",
		"Trailer",
		"Upgrade",
		"Transfer-Encoding",
		"Content-Length",
		"Proxy-Authenticate",
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

static bool request_drop(const char *name)
{
	/* the session's own Host, Expect, encodings and credentials never go
	 * on: the broker writes those itself */
	return hop_by_hop(name) || http_header_is_override(name) || !strcasecmp(name, "Host") ||
	       !strcasecmp(name, "Expect") || !strcasecmp(name, "Accept-Encoding") ||
	       !strcasecmp(name, "Authorization") || !strcasecmp(name, "x-api-key");
}

static int send_head(struct conn *c, struct call *k)
{
	const struct config_provider *p = k->route->p;
	bool v6 = strchr(p->host, ':') != NULL;
	char line[1024];
	int rc;

	if ((rc = up_str(c, k->method)) || (rc = up_str(c, " ")) ||
	    (rc = up_str(c, p->base_path)) || (rc = up_str(c, k->rest[0] == '?' ? "/" : "")) ||
	    (rc = up_str(c, k->rest)) || (rc = up_str(c, " HTTP/1.1\r\nHost: ")) ||
	    (rc = up_str(c, v6 ? "[" : "")) || (rc = up_str(c, p->host)) ||
	    (rc = up_str(c, v6 ? "]" : "")))
		return rc;
	if (p->port != (p->tls ? 443 : 80)) {
		snprintf(line, sizeof(line), ":%u", p->port);
		if ((rc = up_str(c, line)))
			return rc;
	}
	if ((rc = up_str(c, "\r\n")))
		return rc;
	for (size_t i = 0; i < http_header_count(c->req); i++) {
		const struct http_header *h = http_header_at(c->req, i);

		if (request_drop(h->name))
			continue;
		if ((rc = up_put(c, h->name, h->name_len)) || (rc = up_str(c, ": ")) ||
		    (rc = up_put(c, h->value, h->value_len)) || (rc = up_str(c, "\r\n")))
			return rc;
	}
	if ((rc = up_str(c, p->placement == PLACEMENT_BEARER ? "Authorization: Bearer "
							     : "x-api-key: ")) ||
	    (rc = up_put(c, k->key, (size_t)k->key_len)) ||
	    (rc = up_str(c, "\r\nAccept-Encoding: identity\r\n")))
		return rc;
	if (http_framing(c->req) == HTTP_BODY_LENGTH) {
		snprintf(line, sizeof(line), "Content-Length: %llu\r\n",
			 (unsigned long long)http_content_length(c->req));
		if ((rc = up_str(c, line)))
			return rc;
	} else if (k->req_chunked && (rc = up_str(c, "Transfer-Encoding: chunked\r\n"))) {
		return rc;
	}
	return up_str(c, "\r\n");
}

struct body_ctx {
	struct conn *c;
	struct call *k;
};

static int request_body(void *ctx, const uint8_t *data, size_t len)
{
	struct body_ctx *x = ctx;
	char size[32];
	int rc;

	x->k->up_bytes += len;
	if (!x->k->req_chunked)
		return up_put(x->c, data, len);
	snprintf(size, sizeof(size), "%zx\r\n", len);
	if ((rc = up_str(x->c, size)) || (rc = up_put(x->c, data, len)))
		return rc;
	return up_str(x->c, "\r\n");
}

/* The rest of the session's call goes on as it arrives. 0, -EBADMSG (answer
 * 400), or another -errno. */
static int send_body(struct conn *c, struct call *k)
{
	struct body_ctx x = {c, k};
	size_t used;
	int rc;

	for (;;) {
		rc = http_parse(c->req, c->in + c->in_off, c->in_len - c->in_off, &used,
				request_body, &x);
		c->in_off += used;
		if (rc == HTTP_DONE)
			break;
		if (rc < 0)
			return rc;
		if ((rc = up_flush(c)))
			return rc;
		ssize_t n = client_fill(c, CLIENT_IO_MS);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
	}
	if (k->req_chunked && (rc = up_str(c, "0\r\n\r\n")))
		return rc;
	return up_flush(c);
}

static void on_upstream_fd(void *ctx, int fd)
{
	struct conn *c = ctx;

	sessions_link_upstream(&c->link, fd);
}

/* ---- the answer -------------------------------------------------------- */

static ssize_t up_fill(struct conn *c, int timeout_ms)
{
	ssize_t n;

	c->up_off = 0;
	c->up_len = 0;
	n = upstream_read(&c->up, c->up_in, sizeof(c->up_in), timeout_ms);
	if (n > 0)
		c->up_len = (size_t)n;
	return n;
}

/* The provider's head, 1xx answers skipped. 0, or -errno. */
static int read_answer_head(struct conn *c, bool head_request, bool *any)
{
	size_t used;
	int rc;

	http_parser_reset(c->resp, HTTP_RESPONSE, head_request);
	for (;;) {
		if (c->up_off == c->up_len) {
			ssize_t n = up_fill(c, UPSTREAM_ANSWER_MS);

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

static bool answer_has_body(const struct http_parser *r)
{
	switch (http_framing(r)) {
	case HTTP_BODY_NONE:
		return false;
	case HTTP_BODY_LENGTH:
		return http_content_length(r) > 0;
	default:
		return true;
	}
}

static int body_emit(struct conn *c, struct call *k)
{
	char size[32];
	int rc;

	if (!c->body_len)
		return 0;
	k->down_bytes += c->body_len;
	if (k->chunked_out) {
		snprintf(size, sizeof(size), "%zx\r\n", c->body_len);
		if ((rc = out_put(c, size, strlen(size))))
			return rc;
	}
	if ((rc = out_put(c, c->body, c->body_len)))
		return rc;
	c->body_len = 0;
	return k->chunked_out ? out_put(c, "\r\n", 2) : 0;
}

static int body_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct body_ctx *x = ctx;
	struct conn *c = x->c;
	int rc;

	while (len) {
		size_t n = sizeof(c->body) - c->body_len;

		if (!n && (rc = body_emit(c, x->k)))
			return rc;
		n = sizeof(c->body) - c->body_len;
		if (n > len)
			n = len;
		memcpy(c->body + c->body_len, data, n);
		c->body_len += n;
		data += n;
		len -= n;
	}
	return 0;
}

static int answer_body(void *ctx, const uint8_t *data, size_t len)
{
	struct body_ctx *x = ctx;

	x->k->answer_bytes += len;
	if (x->k->answer_bytes > RELAY_BODY_MAX)
		return -EFBIG;
	return scrub_feed(x->k->scrub, data, len, body_sink, x);
}

/* The provider's head as the session gets it: hop-by-hop fields gone, every
 * line scrubbed of the key, the body framed anew (its length changes when
 * the key is cut out of it). */
static int relay_head(struct conn *c, struct call *k)
{
	const struct http_parser *r = c->resp;
	uint8_t line[HTTP_LINE_MAX + 64], clean[HTTP_LINE_MAX * 2];
	bool body = answer_has_body(r);
	size_t n;
	int rc;

	n = (size_t)snprintf((char *)line, sizeof(line), "HTTP/1.1 %d %s", http_status(r),
			     http_reason(r));
	n = scrub_buffer(k->scrub, line, n < sizeof(line) ? n : sizeof(line) - 1, clean,
			 sizeof(clean));
	if ((rc = out_put(c, clean, n < sizeof(clean) ? n : sizeof(clean))) ||
	    (rc = out_put(c, "\r\n", 2)))
		return rc;
	for (size_t i = 0; i < http_header_count(r); i++) {
		const struct http_header *h = http_header_at(r, i);

		if (hop_by_hop(h->name) && !(strcasecmp(h->name, "Content-Length") == 0 && !body &&
					     http_framing(r) == HTTP_BODY_NONE))
			continue;
		if (h->name_len + h->value_len + 2 >= sizeof(line))
			continue;
		n = (size_t)snprintf((char *)line, sizeof(line), "%s: %s", h->name, h->value);
		n = scrub_buffer(k->scrub, line, n, clean, sizeof(clean));
		if (n > sizeof(clean))
			continue;
		if ((rc = out_put(c, clean, n)) || (rc = out_put(c, "\r\n", 2)))
			return rc;
	}
	if (body) {
		k->chunked_out = http_version_minor(c->req) == 1;
		if (!k->chunked_out)
			k->close_after = true;
		else if ((rc = out_printf(c, "Transfer-Encoding: chunked\r\n")))
			return rc;
	} else if (http_framing(r) == HTTP_BODY_LENGTH &&
		   (rc = out_printf(c, "Content-Length: 0\r\n"))) {
		return rc;
	}
	if (k->close_after && (rc = out_printf(c, "Connection: close\r\n")))
		return rc;
	return out_put(c, "\r\n", 2);
}

/* Relays the answer's body. 0, -EFBIG when it streamed past the cap (cut),
 * -EPIPE when the session hung up, another -errno when the provider failed. */
static int relay_body(struct conn *c, struct call *k)
{
	struct body_ctx x = {c, k};
	size_t used;
	int rc;

	for (;;) {
		rc = http_parse(c->resp, c->up_in + c->up_off, c->up_len - c->up_off, &used,
				answer_body, &x);
		c->up_off += used;
		if (rc == HTTP_DONE)
			break;
		if (rc < 0)
			return c->client_failed ? -EPIPE : rc;
		if ((rc = body_emit(c, k)) || (rc = out_flush(c)))
			return -EPIPE;
		ssize_t n = up_fill(c, UPSTREAM_ANSWER_MS);

		if (n == 0) {
			rc = http_parse_eof(c->resp);
			if (rc != HTTP_DONE)
				return -ECONNRESET;
			break;
		}
		if (n < 0)
			return (int)n;
	}
	if ((rc = scrub_finish(k->scrub, body_sink, &x)) || (rc = body_emit(c, k)) ||
	    (k->chunked_out && (rc = out_put(c, "0\r\n\r\n", 5))) || (rc = out_flush(c)))
		return -EPIPE;
	return 0;
}

/* Whether the provider's connection may carry the next call. */
static bool upstream_reusable(const struct conn *c)
{
	const struct http_header *h = http_header_find(c->resp, "Connection");

	return http_framing(c->resp) != HTTP_BODY_CLOSE && http_version_minor(c->resp) == 1 &&
	       !(h && strcasestr(h->value, "close")) && c->up_off == c->up_len;
}

static int open_upstream(struct conn *c, struct call *k)
{
	char why[512];
	int st;

	if (c->up_route == k->route)
		return 0;
	if (c->up_route)
		up_drop(c);
	st = upstream_open(&c->up, &c->b->env, k->route, &c->ring, on_upstream_fd, c, why,
			   sizeof(why));
	if (st) {
		sessions_link_upstream(&c->link, -1);
		k->outcome = st == 403 ? RECEIPT_REFUSED : RECEIPT_UNREACHABLE;
		blog_warnx("session=%s provider=%s: %s", k->session, k->route->p->name, why);
		answerf(c, k, st, "errand-broker: %s\n", why);
		return st;
	}
	c->up_route = k->route;
	return 0;
}

static void forward_answer(struct conn *c, struct call *k)
{
	const struct http_parser *r = c->resp;
	const struct http_header *ce = http_header_find(r, "Content-Encoding");
	int rc;

	k->status = http_status(r);
	if (k->status == 101) {
		up_drop(c);
		k->outcome = RECEIPT_REFUSED;
		answerf(c, k, 502,
			"errand-broker: the provider switched protocols, which the "
			"broker does not relay\n");
		return;
	}
	if (answer_has_body(r) && ce && strcasecmp(ce->value, "identity")) {
		up_drop(c);
		k->outcome = RECEIPT_REFUSED;
		blog_warnx("session=%s provider=%s: refused a compressed answer (the broker asks "
			   "for identity)",
			   k->session, k->route->p->name);
		answerf(c, k, 502,
			"errand-broker: the provider answered compressed; the broker asked for "
			"identity and relays nothing it cannot scrub\n");
		return;
	}
	if (http_framing(r) == HTTP_BODY_LENGTH && http_content_length(r) > RELAY_BODY_MAX) {
		up_drop(c);
		k->outcome = RECEIPT_REFUSED;
		blog_warnx("session=%s provider=%s: refused an answer of %llu bytes, more than "
			   "64 MiB",
			   k->session, k->route->p->name,
			   (unsigned long long)http_content_length(r));
		answerf(c, k, 502,
			"errand-broker: the provider's answer declared %llu bytes, more than "
			"64 MiB\n",
			(unsigned long long)http_content_length(r));
		return;
	}
	if (k->status == 401)
		/* the key may have been rotated: the agent reads the file again, before
		 * the session learns of the 401 and calls again */
		route_key_reread(k->route, RELAY_REREAD_MS);
	rc = relay_head(c, k);
	if (!rc)
		rc = relay_body(c, k);
	if (rc) {
		up_drop(c);
		k->close_after = true;
		k->outcome = RECEIPT_INTERRUPTED;
		if (rc == -EFBIG)
			blog_warnx("session=%s provider=%s: the answer streamed past 64 MiB; cut",
				   k->session, k->route->p->name);
		else if (rc == -EPIPE || c->client_failed)
			blog_info("session=%s provider=%s: the session hung up part way",
				  k->session, k->route->p->name);
		else
			blog_warnx("session=%s provider=%s: the answer failed part way (%s)",
				   k->session, k->route->p->name, strerror(-rc));
		return;
	}
	k->outcome = RECEIPT_COMPLETED;
	if (!upstream_reusable(c))
		up_drop(c);
}

/* Forwards the judged call and relays its answer. */
static void forward(struct conn *c, struct call *k)
{
	bool head = !strcmp(k->method, "HEAD"), any = false, reused = c->up_route == k->route;
	int rc;

	k->key_len = route_key(k->route, k->key, sizeof(k->key));
	if (k->key_len < 0) {
		blog_warnx("provider %s: no key was handed to the broker (%s); the agent reads "
			   "credentialFile %s and hands it",
			   k->route->p->name, strerror(-k->key_len), k->route->p->credential_file);
		k->outcome = RECEIPT_REFUSED;
		answerf(c, k, 502,
			"errand-broker: provider %s's key was not handed to the broker\n",
			k->route->p->name);
		return;
	}
	k->scrub = scrub_new((const uint8_t *)k->key, (size_t)k->key_len);
	if (!k->scrub) {
		k->outcome = RECEIPT_REFUSED;
		answerf(c, k, 502, "errand-broker: provider %s's key cannot be scrubbed\n",
			k->route->p->name);
		return;
	}
again:
	if (open_upstream(c, k))
		return;
	rc = send_head(c, k);
	if (!rc)
		rc = send_body(c, k);
	if (rc == -EBADMSG || rc == -EMSGSIZE || rc == -EOPNOTSUPP) {
		up_drop(c);
		k->outcome = RECEIPT_REFUSED;
		answer(c, k, http_error_status(c->req) ? http_error_status(c->req) : 400,
		       "errand-broker: the call's body is malformed\n", true);
		return;
	}
	if (!rc)
		rc = read_answer_head(c, head, &any);
	if (rc && reused && !any && !k->up_bytes && http_framing(c->req) == HTTP_BODY_NONE) {
		/* a kept connection the provider had closed: once more, fresh */
		up_drop(c);
		reused = false;
		goto again;
	}
	if (rc) {
		up_drop(c);
		k->outcome = RECEIPT_UNREACHABLE;
		blog_warnx("session=%s provider=%s: the provider's answer failed (%s)", k->session,
			   k->route->p->name, strerror(-rc));
		answerf(c, k, rc == -ETIMEDOUT ? 504 : 502,
			"errand-broker: upstream unreachable (%s: %s)\n", k->route->p->host,
			rc == -ETIMEDOUT ? "no answer in time" : "the answer failed");
		return;
	}
	forward_answer(c, k);
}

static void receipt_write(struct call *k)
{
	struct receipt r = {
		.ended_at_ms = wall_ms(),
		.session = k->session,
		.provider = k->route->p->name,
		.credential_var = k->route->key_var,
		.host = k->route->p->host,
		.method = k->method,
		.path = k->path,
		.query_len = k->query_len,
		.status = k->status,
		.duration_ms = now_ms() - k->start,
		.bytes_up = k->up_bytes,
		.bytes_down = k->down_bytes,
		.outcome = k->outcome,
		.unrecorded = k->unrecorded,
	};

	journal_add(&r);
}

/* Whether the session wants the connection kept after this call. */
static bool client_keeps(const struct http_parser *req)
{
	const struct http_header *h = http_header_find(req, "Connection");

	if (h && strcasestr(h->value, "close"))
		return false;
	return http_version_minor(req) == 1 || (h && strcasestr(h->value, "keep-alive"));
}

/* One call. Returns whether the connection goes on. */
static bool serve_call(struct conn *c)
{
	struct call k = {.outcome = RECEIPT_REFUSED};
	char entry[RECEIPT_PATH_MAX + 64];
	const char *target, *name;
	size_t nlen;
	int rc;
	bool answered;

	rc = read_head(c);
	k.start = now_ms();
	if (rc < 0) {
		if (http_error_status(c->req))
			answer(c, &k, http_error_status(c->req),
			       "errand-broker: the request is malformed\n", true);
		return false;
	}
	k.method = http_method(c->req);
	target = http_target(c->req);
	k.req_chunked = http_framing(c->req) == HTTP_BODY_CHUNKED;
	k.close_after = !client_keeps(c->req);
	if (strncmp(target, "/providers/", 11)) {
		answerf(c, &k, 404, "errand-broker: calls go to /providers/NAME/...\n");
		return !k.close_after;
	}
	name = target + 11;
	nlen = strcspn(name, "/?");
	k.route = route_find(c->b, name, nlen);
	if (!k.route) {
		answerf(c, &k, 404, "errand-broker: no provider route of that name\n");
		return !k.close_after;
	}
	if (!sessions_lookup(&c->link.peer, k.route->p->name, k.session, k.standin)) {
		char a[ADDR_STRLEN];

		blog_info("provider %s: a call from %s, which holds no session; refused",
			  k.route->p->name, addr_str(&c->link.peer, a));
		k.close_after = true;
		answerf(c, &k, 403, "errand-broker: no running session calls from this address\n");
		return false;
	}
	k.rest = name[nlen] ? name + nlen : "/";
	receipt_path(k.rest, k.path);
	if (strchr(k.rest, '?'))
		k.query_len = strlen(strchr(k.rest, '?') + 1);
	judge(c, &k, &answered);
	if (!answered)
		forward(c, &k);
	if (k.outcome != RECEIPT_DENIED)
		k.receipt = true;
	if (k.receipt)
		receipt_write(&k);
	entry[0] = '\0';
	if (k.log_entry)
		capability_entry(k.method, k.rest, entry, sizeof(entry));
	blog_info("session=%s provider=%s %s %s -> %d %s (%lld ms, %llu bytes up, %llu down)%s%s",
		  k.session, k.route->p->name, receipt_method(k.method), k.path, k.status,
		  receipt_outcome_name(k.outcome), (long long)(now_ms() - k.start),
		  (unsigned long long)k.up_bytes, (unsigned long long)k.down_bytes,
		  *entry ? "; an entry naming it: " : "", entry);
	scrub_free(k.scrub);
	OPENSSL_cleanse(k.key, sizeof(k.key));
	return !k.close_after && !c->client_failed;
}

static void conn_free(struct conn *c)
{
	conns_open--;
	up_drop(c);
	sessions_link_del(&c->link);
	close(c->fd);
	io_uring_queue_exit(&c->ring);
	http_parser_free(c->req);
	http_parser_free(c->resp);
	free(c);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;

	while (serve_call(c))
		;
	conn_free(c);
	return NULL;
}

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

void relay_start(struct broker *b, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	pthread_attr_t attr;
	pthread_t t;
	int one = 1, rc;

	if (!c || conns_open >= RELAY_CONN_MAX) {
		if (c)
			blog_warnx("%d session connections are open; one more is closed",
				   RELAY_CONN_MAX);
		free(c);
		close(fd);
		return;
	}
	conns_open++;
	c->b = b;
	c->fd = fd;
	c->up.fd = -1;
	c->link.client_fd = fd;
	c->link.upstream_fd = -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((rc = peer_addr(fd, &c->link.peer)) || (rc = ring_setup(&c->ring))) {
		blog_warnx("a session connection cannot be served: %s", strerror(-rc));
		conns_open--;
		close(fd);
		free(c);
		return;
	}
	c->req = http_parser_new(HTTP_REQUEST);
	c->resp = http_parser_new(HTTP_RESPONSE);
	sessions_link_add(&c->link);
	if (!c->req || !c->resp) {
		conn_free(c);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc) {
		blog_warnx("a session connection cannot be served: %s", strerror(rc));
		conn_free(c);
	}
}
