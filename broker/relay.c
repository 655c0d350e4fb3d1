/* One session connection: calls read with the strict parser, judged (session
 * by source address, stand-in in the placement's header, path, capabilities),
 * forwarded with the real key in that header alone, and answered with the
 * provider's reply, the key scrubbed from head and body as they stream. Each
 * call leaves a receipt and one log line, neither holding a query, a header
 * value or a body. */
#include <errno.h>
#include <stdarg.h>
#include <openssl/mem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "broker/conn.h"
#include "broker/fiber.h"
#include "broker/http.h"
#include "broker/journal.h"
#include "broker/relay.h"
#include "broker/ring.h"
#include "broker/scrub.h"
#include "broker/sessions.h"
#include "broker/blog.h"
#include "lib/util.h"

#define CLIENT_IDLE_MS 120000 /* a kept-alive connection waiting for its next call */
#define RELAY_CONN_MAX 1024   /* connections at once, every session together */
#define RELAY_REREAD_MS 2000  /* how long a 401 waits for the agent to read the key again */

static _Atomic int conns_open;

struct rconn {
	struct conn io; /* the session's side plain, the provider's as its route says */
	struct broker *b;
	uint8_t body[CONN_BUF]; /* scrubbed answer body, not yet framed */
	size_t body_len;
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
	int64_t started; /* journal_stamp() */
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

/* ---- the broker's own answers ----------------------------------------- */

/* The broker's own answer: status, a text body, and the connection closed
 * after it when close_after (always after a refused call with a body unread). */
static int answer(struct rconn *c, struct call *k, int status, const char *body, bool close_after)
{
	k->status = status;
	k->close_after |= close_after;
	return conn_answer(&c->io, status, k->close_after, body);
}

__attribute__((format(printf, 4, 5))) static int answerf(struct rconn *c, struct call *k,
							 int status, const char *fmt, ...)
{
	va_list ap;
	int rc;

	k->status = status;
	k->close_after |= k->req_chunked || http_framing(c->io.req) != HTTP_BODY_NONE;
	va_start(ap, fmt);
	rc = conn_vanswerf(&c->io, status, k->close_after, fmt, ap);
	va_end(ap);
	return rc;
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
static int judge(struct rconn *c, struct call *k, bool *answered)
{
	const struct config_provider *p = k->route->p;
	const struct http_header *h = http_header_find(c->io.req, placement_header(p));
	char entry[RECEIPT_PATH_MAX + 64];
	bool named = false;

	*answered = true;
	if (holds_standin(c->io.req, other_header(p))) {
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

static bool request_drop(const char *name)
{
	/* the session's own Host, Expect, encodings and credentials never go
	 * on: the broker writes those itself */
	return http_hop_by_hop(name) || http_header_is_override(name) ||
	       !strcasecmp(name, "Host") || !strcasecmp(name, "Expect") ||
	       !strcasecmp(name, "Accept-Encoding") || !strcasecmp(name, "Authorization") ||
	       !strcasecmp(name, "x-api-key");
}

static int send_head(struct rconn *c, struct call *k)
{
	const struct config_provider *p = k->route->p;
	const struct http_parser *req = c->io.req;
	struct conn_out *o = &c->io.up_out;
	bool v6 = strchr(p->host, ':') != NULL;
	char line[1024];
	int rc;

	if ((rc = conn_str(o, k->method)) || (rc = conn_str(o, " ")) ||
	    (rc = conn_str(o, p->base_path)) || (rc = conn_str(o, k->rest[0] == '?' ? "/" : "")) ||
	    (rc = conn_str(o, k->rest)) || (rc = conn_str(o, " HTTP/1.1\r\nHost: ")) ||
	    (rc = conn_str(o, v6 ? "[" : "")) || (rc = conn_str(o, p->host)) ||
	    (rc = conn_str(o, v6 ? "]" : "")))
		return rc;
	if (p->port != (p->tls ? 443 : 80)) {
		snprintf(line, sizeof(line), ":%u", p->port);
		if ((rc = conn_str(o, line)))
			return rc;
	}
	if ((rc = conn_str(o, "\r\n")))
		return rc;
	for (size_t i = 0; i < http_header_count(req); i++) {
		const struct http_header *h = http_header_at(req, i);

		if (request_drop(h->name))
			continue;
		if ((rc = conn_put(o, h->name, h->name_len)) || (rc = conn_str(o, ": ")) ||
		    (rc = conn_put(o, h->value, h->value_len)) || (rc = conn_str(o, "\r\n")))
			return rc;
	}
	if ((rc = conn_str(o, p->placement == PLACEMENT_BEARER ? "Authorization: Bearer "
							       : "x-api-key: ")) ||
	    (rc = conn_put(o, k->key, (size_t)k->key_len)) || (rc = conn_str(o, "\r\n")))
		return rc;
	return conn_request_head_end(&c->io);
}

/* ---- the answer -------------------------------------------------------- */

struct body_ctx {
	struct rconn *c;
	struct call *k;
};

/* The scrubbed body so far goes to the session, framed. */
static int body_emit(void *ctx)
{
	struct body_ctx *x = ctx;
	struct rconn *c = x->c;
	int rc;

	x->k->down_bytes += c->body_len;
	if ((rc = conn_chunk(&c->io.out, x->k->chunked_out, c->body, c->body_len)))
		return rc;
	c->body_len = 0;
	return 0;
}

static int body_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct body_ctx *x = ctx;
	struct rconn *c = x->c;
	int rc;

	while (len) {
		size_t n = sizeof(c->body) - c->body_len;

		if (!n && (rc = body_emit(x)))
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
static int relay_head(struct rconn *c, struct call *k)
{
	const struct http_parser *r = c->io.resp;
	struct conn_out *o = &c->io.out;
	uint8_t line[HTTP_LINE_MAX + 64], clean[HTTP_LINE_MAX * 2];
	bool body = http_answer_has_body(r);
	size_t n;
	int rc;

	n = (size_t)snprintf((char *)line, sizeof(line), "HTTP/1.1 %d %s", http_status(r),
			     http_reason(r));
	n = scrub_buffer(k->scrub, line, n < sizeof(line) ? n : sizeof(line) - 1, clean,
			 sizeof(clean));
	if (n == SIZE_MAX)
		return -ENOMEM;
	if ((rc = conn_put(o, clean, n < sizeof(clean) ? n : sizeof(clean))) ||
	    (rc = conn_put(o, "\r\n", 2)))
		return rc;
	for (size_t i = 0; i < http_header_count(r); i++) {
		const struct http_header *h = http_header_at(r, i);

		if (http_answer_field_dropped(r, h->name, body))
			continue;
		if (h->name_len + h->value_len + 2 >= sizeof(line))
			continue;
		n = (size_t)snprintf((char *)line, sizeof(line), "%s: %s", h->name, h->value);
		n = scrub_buffer(k->scrub, line, n, clean, sizeof(clean));
		if (n == SIZE_MAX)
			return -ENOMEM;
		if (n > sizeof(clean))
			continue;
		if ((rc = conn_put(o, clean, n)) || (rc = conn_put(o, "\r\n", 2)))
			return rc;
	}
	return conn_answer_head_end(&c->io, body, &k->chunked_out, &k->close_after);
}

static void reread_run(void *route)
{
	route_key_reread(route, RELAY_REREAD_MS);
}

/* Relays the answer's body. 0, -EFBIG when it streamed past the cap (cut),
 * -EPIPE when the session hung up, another -errno when the provider failed. */
static int relay_body(struct rconn *c, struct call *k)
{
	struct body_ctx x = {c, k};
	int rc;

	rc = conn_answer_body(&c->io, answer_body, body_emit, &x);
	if (rc)
		return c->io.out.failed ? -EPIPE : rc;
	if ((rc = scrub_finish(k->scrub, body_sink, &x)) || (rc = body_emit(&x)) ||
	    (k->chunked_out && (rc = conn_put(&c->io.out, "0\r\n\r\n", 5))) ||
	    (rc = conn_flush(&c->io.out)))
		return -EPIPE;
	return 0;
}

static int open_upstream(struct rconn *c, struct call *k)
{
	char why[512];
	int st;

	st = conn_up_open(&c->io, &c->b->env, k->route, why, sizeof(why));
	if (st) {
		k->outcome = st == 403 ? RECEIPT_REFUSED : RECEIPT_UNREACHABLE;
		blog_warnx("session=%s provider=%s: %s", k->session, k->route->p->name, why);
		answerf(c, k, st, "errand-broker: %s\n", why);
		return st;
	}
	return 0;
}

static void forward_answer(struct rconn *c, struct call *k)
{
	const struct http_parser *r = c->io.resp;
	int rc;

	k->status = http_status(r);
	if (k->status == 101) {
		conn_up_drop(&c->io);
		k->outcome = RECEIPT_REFUSED;
		answerf(c, k, 502,
			"errand-broker: the provider switched protocols, which the "
			"broker does not relay\n");
		return;
	}
	if (http_answer_encoded(r)) {
		conn_up_drop(&c->io);
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
		conn_up_drop(&c->io);
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
		 * the session learns of the 401 and calls again (waited for on a
		 * thread of its own, not the fiber's) */
		fiber_offload(reread_run, (void *)k->route);
	rc = relay_head(c, k);
	if (!rc)
		rc = relay_body(c, k);
	if (rc) {
		conn_up_drop(&c->io);
		k->close_after = true;
		k->outcome = RECEIPT_INTERRUPTED;
		if (rc == -EFBIG)
			blog_warnx("session=%s provider=%s: the answer streamed past 64 MiB; cut",
				   k->session, k->route->p->name);
		else if (rc == -EPIPE || c->io.out.failed)
			blog_info("session=%s provider=%s: the session hung up part way",
				  k->session, k->route->p->name);
		else if (c->io.up.cut)
			blog_warnx("session=%s provider=%s: the answer's TLS stream ended "
				   "without close_notify; cut",
				   k->session, k->route->p->name);
		else
			blog_warnx("session=%s provider=%s: the answer failed part way (%s)",
				   k->session, k->route->p->name, strerror(-rc));
		return;
	}
	k->outcome = RECEIPT_COMPLETED;
	/* the connection carries the next call only when nothing of it is left */
	if (!http_answer_keeps(r) || c->io.up_off != c->io.up_len)
		conn_up_drop(&c->io);
}

/* Forwards the judged call and relays its answer. */
static void forward(struct rconn *c, struct call *k)
{
	bool head = !strcmp(k->method, "HEAD"), any = false, reused = c->io.up_route == k->route;
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
		rc = conn_send_body(&c->io, &k->up_bytes, NULL);
	if (rc == -EBADMSG || rc == -EMSGSIZE || rc == -EOPNOTSUPP) {
		conn_up_drop(&c->io);
		k->outcome = RECEIPT_REFUSED;
		answer(c, k, http_error_status(c->io.req) ? http_error_status(c->io.req) : 400,
		       "errand-broker: the call's body is malformed\n", true);
		return;
	}
	if (!rc)
		rc = conn_read_answer_head(&c->io, head, &any);
	if (rc && reused && !any && (rc == -ECONNRESET || rc == -EPIPE) && !k->up_bytes &&
	    http_framing(c->io.req) == HTTP_BODY_NONE) {
		/* a kept connection the provider had closed: once more, fresh;
		 * never after a timeout, where it may have acted on the call */
		conn_up_drop(&c->io);
		reused = false;
		goto again;
	}
	if (rc) {
		conn_up_drop(&c->io);
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
		.started_at_us = k->started,
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

/* One call. Returns whether the connection goes on. */
static bool serve_call(struct rconn *c)
{
	struct call k = {.outcome = RECEIPT_REFUSED};
	char entry[RECEIPT_PATH_MAX + 64];
	const char *target, *name;
	size_t nlen;
	int rc;
	bool answered;

	rc = conn_read_head(&c->io, CLIENT_IDLE_MS);
	k.start = now_ms();
	k.started = journal_stamp();
	if (rc < 0) {
		if (http_error_status(c->io.req))
			answer(c, &k, http_error_status(c->io.req),
			       "errand-broker: the request is malformed\n", true);
		return false;
	}
	k.method = http_method(c->io.req);
	target = http_target(c->io.req);
	k.req_chunked = http_framing(c->io.req) == HTTP_BODY_CHUNKED;
	k.close_after = !http_request_keeps(c->io.req);
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
	if (!sessions_lookup(&c->io.link.peer, k.route->p->name, k.session, k.standin)) {
		char a[ADDR_STRLEN];

		blog_info("provider %s: a call from %s, which holds no session; refused",
			  k.route->p->name, addr_str(&c->io.link.peer, a));
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
	return !k.close_after && !c->io.out.failed;
}

static void rconn_free(struct rconn *c)
{
	conns_open--;
	conn_fini(&c->io);
	free(c);
}

static void rconn_main(void *arg)
{
	struct rconn *c = arg;

	while (serve_call(c))
		;
	rconn_free(c);
}

void relay_start(struct broker *b, int fd)
{
	struct rconn *c = calloc(1, sizeof(*c));
	int rc;

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
	if ((rc = conn_start(&c->io, fd, rconn_main, c))) {
		blog_warnx("a session connection cannot be served: %s", strerror(-rc));
		conns_open--;
		free(c);
	}
}
