/* libFuzzer target for the broker's HTTP parser (broker/http.c): each input is
 * parsed whole and again in pieces the input chooses, and both readings must
 * agree; what parses is checked against the parser's promises. The path and
 * capability rules get the input as a path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/http.h"
#include "selftests/fuzz/fuzz.h"

#define MAX_MSGS 4

/* What one reading saw, to compare with the other. */
struct reading {
	int rc[MAX_MSGS];
	int status[MAX_MSGS];
	size_t used[MAX_MSGS];
	size_t n_headers[MAX_MSGS], n_trailers[MAX_MSGS];
	int framing[MAX_MSGS];
	size_t n_msgs;
	uint8_t *body;
	size_t body_len, body_cap;
};

static int body_take(void *ctx, const uint8_t *d, size_t n)
{
	struct reading *r = ctx;

	INV(n > 0);
	INV(r->body_len + n <= r->body_cap); /* never more than came in */
	memcpy(r->body + r->body_len, d, n);
	r->body_len += n;
	return 0;
}

static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void check_field(const struct http_header *h)
{
	INV(h->name_len > 0 && strlen(h->name) == h->name_len);
	for (size_t i = 0; i < h->name_len; i++)
		INV(is_tchar((unsigned char)h->name[i]));
	INV(h->value[h->value_len] == '\0');
	for (size_t i = 0; i < h->value_len; i++) {
		unsigned char c = (unsigned char)h->value[i];

		INV(c == '\t' || (c >= 0x20 && c != 0x7f));
	}
	if (h->value_len) {
		INV(h->value[0] != ' ' && h->value[0] != '\t');
		INV(h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t');
	}
}

static void check_head(struct http_parser *p, enum http_kind kind, bool head_request)
{
	size_t n = http_header_count(p);
	bool cl = false, te = false;

	INV(n <= HTTP_HEADERS_MAX);
	INV(http_version_minor(p) == 0 || http_version_minor(p) == 1);
	for (size_t i = 0; i < n; i++) {
		const struct http_header *h = http_header_at(p, i);

		check_field(h);
		if (!strcasecmp(h->name, "content-length")) {
			INV(!cl);
			cl = true;
		}
		if (!strcasecmp(h->name, "transfer-encoding")) {
			INV(!te && !strcasecmp(h->value, "chunked"));
			te = true;
		}
	}
	INV(!(cl && te));
	if (kind == HTTP_REQUEST) {
		const char *m = http_method(p), *t = http_target(p);

		INV(*m && *t);
		for (; *m; m++)
			INV(is_tchar((unsigned char)*m));
		for (; *t; t++)
			INV(*t > 0x20 && *t < 0x7f);
		INV(http_framing(p) != HTTP_BODY_CLOSE);
	} else {
		INV(http_status(p) >= 100 && http_status(p) <= 599);
		if (head_request)
			INV(http_framing(p) == HTTP_BODY_NONE);
	}
	if (http_framing(p) == HTTP_BODY_CHUNKED)
		INV(te);
	if (http_framing(p) == HTTP_BODY_LENGTH)
		INV(cl);
}

/* Parses msg[0..len) as up to MAX_MSGS messages in a row, in pieces whose
 * sizes come from cut (0: whole), then a close. */
static void read_all(struct http_parser *p, enum http_kind kind, bool head_request,
		     const uint8_t *msg, size_t len, uint32_t cut, struct reading *r)
{
	size_t off = 0, piece_end = 0;

	r->n_msgs = 0;
	r->body_len = 0;
	for (size_t m = 0; m < MAX_MSGS; m++) {
		size_t start = off;
		int rc;

		http_parser_reset(p, kind, head_request);
		for (;;) {
			size_t used;

			if (piece_end <= off) {
				/* a small xorshift picks piece sizes 1..16 */
				cut ^= cut << 13;
				cut ^= cut >> 17;
				cut ^= cut << 5;
				piece_end = cut ? off + 1 + cut % 16 : len;
				if (piece_end > len)
					piece_end = len;
			}
			rc = http_parse(p, msg + off, piece_end - off, &used, body_take, r);
			INV(used <= piece_end - off);
			off += used;
			if (rc < 0) {
				INV(rc == -EBADMSG || rc == -EMSGSIZE || rc == -EOPNOTSUPP);
				if (rc == -EBADMSG)
					INV(http_error_status(p) == 400);
				else if (rc == -EOPNOTSUPP)
					INV(http_error_status(p) == 501);
				else
					INV(http_error_status(p) == 431 ||
					    (kind == HTTP_REQUEST && http_error_status(p) == 414));
				break;
			}
			if (rc == HTTP_HEAD) {
				check_head(p, kind, head_request);
				continue;
			}
			if (rc == HTTP_DONE)
				break;
			INV(rc == HTTP_MORE && off == piece_end);
			if (off == len) {
				rc = http_parse_eof(p);
				break;
			}
		}
		r->rc[m] = rc;
		r->status[m] = http_error_status(p);
		r->used[m] = off - start;
		r->n_headers[m] = rc == HTTP_DONE ? http_header_count(p) : 0;
		r->n_trailers[m] = rc == HTTP_DONE ? http_trailer_count(p) : 0;
		r->framing[m] = rc == HTTP_DONE ? (int)http_framing(p) : -1;
		if (rc == HTTP_DONE)
			for (size_t i = 0; i < http_trailer_count(p); i++)
				check_field(http_trailer_at(p, i));
		r->n_msgs++;
		if (rc != HTTP_DONE || off == len)
			break;
	}
}

static void fuzz_parse(const uint8_t *msg, size_t len, uint8_t sel, uint32_t cut)
{
	static struct http_parser *p;
	static struct reading a, b;
	enum http_kind kind = sel & 1 ? HTTP_RESPONSE : HTTP_REQUEST;
	bool head_request = sel & 2;

	if (!p)
		p = http_parser_new(HTTP_REQUEST);
	INV(p);
	free(a.body);
	free(b.body);
	a.body = malloc(len + 1);
	b.body = malloc(len + 1);
	INV(a.body && b.body);
	a.body_cap = b.body_cap = len;

	read_all(p, kind, head_request, msg, len, 0, &a);
	read_all(p, kind, head_request, msg, len, cut | 1, &b);
	INV(a.n_msgs == b.n_msgs);
	for (size_t m = 0; m < a.n_msgs; m++) {
		INV(a.rc[m] == b.rc[m]);
		INV(a.status[m] == b.status[m]);
		INV(a.n_headers[m] == b.n_headers[m]);
		INV(a.n_trailers[m] == b.n_trailers[m]);
		INV(a.framing[m] == b.framing[m]);
		if (a.rc[m] == HTTP_DONE)
			INV(a.used[m] == b.used[m]);
	}
	INV(a.body_len == b.body_len);
	INV(!memcmp(a.body, b.body, a.body_len));
}

/* The input as a path: what the checker takes reads one way only. */
static void fuzz_path(const uint8_t *msg, size_t len)
{
	char path[1024], pat[1024];
	size_t n = len < sizeof(path) - 1 ? len : sizeof(path) - 1, plen;

	memcpy(path, msg, n);
	path[n] = '\0';
	plen = strcspn(path, "?");
	if (!http_path_check(path)) {
		INV(path[0] == '/');
		for (size_t i = 0; i < plen; i++) {
			unsigned char c = (unsigned char)path[i];

			INV(c > 0x20 && c < 0x7f && c != ';' && c != '\\' && c != '#');
			if (c == '/')
				INV(i + 1 == plen || path[i + 1] != '/');
			if (c == '%')
				INV(i + 2 < plen);
		}
		/* a path with no "*" in it is its own capability */
		memcpy(pat, path, plen);
		pat[plen] = '\0';
		INV(!strstr(pat, "/./") && !strstr(pat, "/../"));
		if (!strchr(pat, '*'))
			INV(http_capability_match("GET", pat, "GET", path));
		INV(http_capability_match("*", "/**", "PUT", path));
	}
	/* the input as pattern and path: never more than "**" allows */
	if (http_capability_match("GET", path, "GET", "/a/b") && !strchr(path, '*'))
		INV(!strcmp(path, "/a/b"));
	(void)http_header_is_override(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *msg;
	uint32_t cut;

	if (size < 5)
		return 0;
	memcpy(&cut, data + 1, 4);
	/* an exact-size copy, so ASan sees any read past the message */
	msg = malloc(size - 5 ? size - 5 : 1);
	if (!msg)
		return 0;
	memcpy(msg, data + 5, size - 5);
	fuzz_parse(msg, size - 5, data[0], cut);
	fuzz_path(msg, size - 5);
	free(msg);
	return 0;
}
