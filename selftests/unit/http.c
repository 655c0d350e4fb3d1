/* Guarantee: the broker's HTTP/1.1 parser takes only messages with one reading
 * (CRLF only, no obs-fold, one framing, size caps), whatever pieces they come
 * in; paths that could be read differently are refused; capabilities match raw
 * segments with * and **; the override headers are recognised. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

struct body {
	char b[1 << 17];
	size_t len;
};

static int body_collect(void *ctx, const uint8_t *data, size_t len)
{
	struct body *b = ctx;

	if (b->len + len > sizeof(b->b))
		return -ENOSPC;
	memcpy(b->b + b->len, data, len);
	b->len += len;
	return 0;
}

/* Feeds msg[0..len) cut at cuts[] (ascending), or in pieces of step bytes when
 * step is set, until the message is done or fails; at the end of the input,
 * eof says whether the peer then closed. Returns what the parser last said. */
static int feed(struct http_parser *p, const char *msg, size_t len, const size_t *cuts,
		size_t n_cuts, size_t step, bool eof, struct body *b, size_t *used)
{
	size_t off = 0, c = 0, used_one;
	int rc;

	b->len = 0;
	for (;;) {
		size_t end = len;

		if (step)
			end = off + step < len ? off + step : len;
		else if (c < n_cuts && cuts[c] <= len)
			end = cuts[c];
		rc = http_parse(p, (const uint8_t *)msg + off, end - off, &used_one, body_collect,
				b);
		off += used_one;
		if (rc < 0 || rc == HTTP_DONE)
			break;
		if (rc == HTTP_HEAD)
			continue;
		/* HTTP_MORE: the piece is used up */
		if (off < len) {
			if (!step && c < n_cuts && off >= cuts[c])
				c++;
			continue;
		}
		if (eof)
			rc = http_parse_eof(p);
		break;
	}
	if (used)
		*used = off;
	return rc;
}

static struct http_parser *req, *resp;
static struct body body;

static int parse_req(const char *msg, size_t len)
{
	http_parser_reset(req, HTTP_REQUEST, false);
	return feed(req, msg, len, NULL, 0, 0, false, &body, NULL);
}

static int parse_req_s(const char *msg)
{
	return parse_req(msg, strlen(msg));
}

static int parse_resp(const char *msg, bool head_request, bool eof)
{
	http_parser_reset(resp, HTTP_RESPONSE, head_request);
	return feed(resp, msg, strlen(msg), NULL, 0, 0, eof, &body, NULL);
}

static const char *header(struct http_parser *p, const char *name)
{
	const struct http_header *h = http_header_find(p, name);

	return h ? h->value : NULL;
}

static void test_requests(void)
{
	const char *get = "GET /v1/models?limit=5 HTTP/1.1\r\n"
			  "Host: api.example.com\r\n"
			  "Accept:  */*  \r\n"
			  "X-Empty:\r\n"
			  "X-Tab:\tv\t1\t\r\n"
			  "X-Obs-Text: caf\xc3\xa9\r\n"
			  "\r\nGET / HTTP/1.1\r\n";
	size_t used;
	int rc;

	http_parser_reset(req, HTTP_REQUEST, false);
	rc = feed(req, get, strlen(get), NULL, 0, 0, false, &body, &used);
	CHECK_INT(rc, HTTP_DONE, "GET parses to the end");
	CHECK_INT(used, strlen(get) - strlen("GET / HTTP/1.1\r\n"),
		  "GET stops before the pipelined request");
	CHECK_STR(http_method(req), "GET", "method");
	CHECK_STR(http_target(req), "/v1/models?limit=5", "target raw with its query");
	CHECK_INT(http_version_minor(req), 1, "version 1.1");
	CHECK_INT(http_framing(req), HTTP_BODY_NONE, "GET without length has no body");
	CHECK_INT(http_header_count(req), 5, "five headers");
	CHECK_STR(http_header_at(req, 0)->name, "Host", "header name as sent");
	CHECK_INT(http_header_at(req, 0)->name_len, 4, "header name length");
	CHECK_STR(header(req, "host"), "api.example.com", "lookup is case-insensitive");
	CHECK_STR(header(req, "accept"), "*/*", "OWS trimmed both sides");
	CHECK_INT(http_header_find(req, "accept")->value_len, 3, "value length after trim");
	CHECK_STR(header(req, "x-empty"), "", "empty value");
	CHECK_STR(header(req, "x-tab"), "v\t1", "HTAB inside a value kept, around trimmed");
	CHECK_STR(header(req, "x-obs-text"), "caf\xc3\xa9", "obs-text taken");
	CHECK_TRUE(http_header_find(req, "x-missing") == NULL, "a missing header is NULL");
	CHECK_TRUE(http_header_at(req, 5) == NULL, "header_at past the end is NULL");

	rc = parse_req_s("POST /v1/messages HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n"
			 "hello worldEXTRA");
	CHECK_INT(rc, HTTP_DONE, "POST with Content-Length");
	CHECK_INT(http_framing(req), HTTP_BODY_LENGTH, "framing is length");
	CHECK_INT(http_content_length(req), 11, "length 11");
	CHECK_INT(body.len, 11, "body is 11 bytes, the rest left");
	CHECK_TRUE(!memcmp(body.b, "hello world", 11), "body bytes");

	CHECK_INT(parse_req_s("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"), HTTP_DONE,
		  "Content-Length 0");
	CHECK_INT(parse_req_s("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\nabcdefg"),
		  HTTP_DONE, "Content-Length with leading zeros");
	CHECK_INT(body.len, 7, "leading zeros read as 7");
	CHECK_INT(parse_req_s("GET / HTTP/1.0\r\n\r\n"), HTTP_DONE, "HTTP/1.0 without Host");
	CHECK_INT(http_version_minor(req), 0, "version 1.0");
	CHECK_INT(parse_req_s("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_DONE,
		  "asterisk-form target");
	CHECK_INT(parse_req_s("CONNECT api.example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_DONE,
		  "authority-form target");
	CHECK_STR(http_target(req), "api.example.com:443", "authority-form kept as sent");
	CHECK_INT(parse_req_s("M-SEARCH /%2e%2E/x HTTP/1.1\r\nHost: h\r\n\r\n"), HTTP_DONE,
		  "token method, encoded target taken raw");
	CHECK_STR(http_target(req), "/%2e%2E/x", "target not decoded");
	CHECK_INT(parse_req_s("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED\r\n\r\n"
			      "0\r\n\r\n"),
		  HTTP_DONE, "Transfer-Encoding chunked in another case");
	CHECK_INT(http_framing(req), HTTP_BODY_CHUNKED, "framing is chunked");
	CHECK_INT(parse_req_s("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  chunked \r\n\r\n"
			      "0\r\n\r\n"),
		  HTTP_DONE, "Transfer-Encoding with OWS");

	{
		const char *m = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
		size_t u;

		http_parser_reset(req, HTTP_REQUEST, false);
		CHECK_INT(http_parse(req, (const uint8_t *)m, strlen(m), &u, NULL, NULL), HTTP_HEAD,
			  "the parser stops after the head");
		CHECK_INT(u, strlen(m) - 3, "having taken the head only");
		rc = http_parse(req, (const uint8_t *)m + u, strlen(m) - u, &u, NULL, NULL);
		CHECK_INT(rc, HTTP_DONE, "a NULL body callback drops the body");
		CHECK_INT(u, 3, "and takes it");
	}
}

static int fail_body(void *ctx, const uint8_t *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return -EPIPE;
}

static void test_body_error(void)
{
	const char *m = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
	size_t u;

	http_parser_reset(req, HTTP_REQUEST, false);
	http_parse(req, (const uint8_t *)m, strlen(m), &u, fail_body, NULL);
	CHECK_INT(http_parse(req, (const uint8_t *)m + u, strlen(m) - u, &u, fail_body, NULL),
		  -EPIPE, "a body callback's error is returned");
	CHECK_INT(http_parse(req, (const uint8_t *)"x", 1, &u, fail_body, NULL), -EPIPE,
		  "and stays");
}

struct bad {
	const char *why;
	const char *msg;
	int status;
};

static void test_bad_requests(void)
{
	static const struct bad cases[] = {
		{"CL with TE",
		 "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: "
		 "chunked\r\n\r\n",
		 400},
		{"TE with CL",
		 "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: "
		 "5\r\n\r\n",
		 400},
		{"CL 0 with TE",
		 "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nTransfer-Encoding: "
		 "chunked\r\n\r\n",
		 400},
		{"duplicate CL, equal",
		 "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
		 400},
		{"duplicate CL, different",
		 "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n",
		 400},
		{"CL list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n", 400},
		{"CL letters", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", 400},
		{"CL negative", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400},
		{"CL plus", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", 400},
		{"CL hex", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", 400},
		{"CL inner space", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\n",
		 400},
		{"CL empty", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", 400},
		{"CL overflow",
		 "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551616\r\n\r\n", 400},
		{"CL far overflow",
		 "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		 400},
		{"TE gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"TE gzip, chunked",
		 "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
		{"TE chunked, chunked",
		 "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501},
		{"TE identity", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n",
		 501},
		{"TE chunkedx", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunkedx\r\n\r\n",
		 501},
		{"TE empty", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 501},
		{"TE twice",
		 "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
		 "chunked\r\n\r\n",
		 400},
		{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n", 400},
		{"obs-fold with tab", "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n",
		 400},
		{"space before first header", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400},
		{"bare LF ends request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", 400},
		{"bare LF ends header", "GET / HTTP/1.1\r\nHost: h\n\r\n", 400},
		{"bare LF ends head", "GET / HTTP/1.1\r\nHost: h\r\n\n", 400},
		{"bare CR in request line", "GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"bare CR in value", "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400},
		{"bare CR as blank line", "GET / HTTP/1.1\r\nHost: h\r\n\r\r\n", 400},
		{"CRCRLF", "GET / HTTP/1.1\r\r\nHost: h\r\n\r\n", 400},
		{"leading empty line", "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"tab separator", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"space in target", "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"trailing space", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400},
		{"no version", "GET /\r\nHost: h\r\n\r\n", 400},
		{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", 400},
		{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 400},
		{"lower-case version", "GET / http/1.1\r\nHost: h\r\n\r\n", 400},
		{"HTTP/1.10", "GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400},
		{"method not a token", "GE(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"empty method", " / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"DEL in target", "GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"non-ASCII target", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
		{"no colon", "GET / HTTP/1.1\r\nHost: h\r\nJunk\r\n\r\n", 400},
		{"empty name", "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400},
		{"name not a token", "GET / HTTP/1.1\r\nHost: h\r\nX@Y: v\r\n\r\n", 400},
		{"CTL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n", 400},
		{"DEL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", 400},
		{"no Host in 1.1", "GET / HTTP/1.1\r\nX: y\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400},
		{"two Hosts in 1.0", "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400},
	};
	int rc;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		rc = parse_req_s(cases[i].msg);
		CHECK_INT(http_error_status(req), cases[i].status, "%s: %d", cases[i].why,
			  cases[i].status);
		CHECK_INT(rc, cases[i].status == 501 ? -EOPNOTSUPP : -EBADMSG, "%s: error code",
			  cases[i].why);
	}

	/* NUL inside a line: lengths, not C strings, decide */
	static const char nul_value[] = "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n";
	static const char nul_target[] = "GET /a\0b HTTP/1.1\r\nHost: h\r\n\r\n";

	parse_req(nul_value, sizeof(nul_value) - 1);
	CHECK_INT(http_error_status(req), 400, "NUL in a value: 400");
	parse_req(nul_target, sizeof(nul_target) - 1);
	CHECK_INT(http_error_status(req), 400, "NUL in the target: 400");

	/* an error is final */
	size_t u;

	parse_req_s("GET / HTTP/1.1\r\nHost: h\r\n a\r\n\r\n");
	CHECK_INT(http_parse(req, (const uint8_t *)"GET", 3, &u, NULL, NULL), -EBADMSG,
		  "after an error the parser only repeats it");
	CHECK_INT(u, 0, "and takes nothing");
}

/* A head of exactly total bytes (CRLFs counted), its header lines at most
 * line bytes, with extra headers beyond Host. */
static size_t build_head(char *out, size_t total, size_t line, size_t *n_headers)
{
	size_t len = (size_t)sprintf(out, "GET / HTTP/1.1\r\nHost: h\r\n");

	*n_headers = 1;
	while (len + 2 < total) {
		size_t want = total - len - 2, take;

		/* a line of at least "X000:" + CRLF, at most line + CRLF */
		take = want < line + 2 ? want : line + 2;
		if (want - take != 0 && want - take < 7)
			take -= 7;
		len += (size_t)sprintf(out + len, "X%03zu:", *n_headers);
		memset(out + len, 'v', take - 7);
		len += take - 7;
		memcpy(out + len, "\r\n", 2);
		len += 2;
		(*n_headers)++;
	}
	memcpy(out + len, "\r\n", 2);
	return len + 2;
}

static void test_caps(void)
{
	static char m[HTTP_HEAD_MAX * 2];
	size_t len, n;
	int rc;

	/* the request line: 8192 bytes without CRLF is the most */
	len = (size_t)sprintf(m, "GET /");
	memset(m + len, 'a', HTTP_LINE_MAX - len - 9);
	len = HTTP_LINE_MAX - 9;
	len += (size_t)sprintf(m + len, " HTTP/1.1\r\nHost: h\r\n\r\n");
	CHECK_INT(parse_req(m, len), HTTP_DONE, "request line of %d bytes", HTTP_LINE_MAX);
	len = (size_t)sprintf(m, "GET /");
	memset(m + len, 'a', HTTP_LINE_MAX - len - 8);
	len = HTTP_LINE_MAX - 8;
	len += (size_t)sprintf(m + len, " HTTP/1.1\r\nHost: h\r\n\r\n");
	rc = parse_req(m, len);
	CHECK_INT(http_error_status(req), 414, "request line of %d bytes: 414", HTTP_LINE_MAX + 1);
	CHECK_INT(rc, -EMSGSIZE, "request line too long: -EMSGSIZE");

	/* one header line: 8192 bytes without CRLF */
	len = (size_t)sprintf(m, "GET / HTTP/1.1\r\nHost: h\r\nX:");
	memset(m + len, 'v', HTTP_LINE_MAX - 2);
	len += HTTP_LINE_MAX - 2;
	len += (size_t)sprintf(m + len, "\r\n\r\n");
	CHECK_INT(parse_req(m, len), HTTP_DONE, "header line of %d bytes", HTTP_LINE_MAX);
	CHECK_INT(http_header_find(req, "x")->value_len, HTTP_LINE_MAX - 2, "its value whole");
	len = (size_t)sprintf(m, "GET / HTTP/1.1\r\nHost: h\r\nX:");
	memset(m + len, 'v', HTTP_LINE_MAX - 1);
	len += HTTP_LINE_MAX - 1;
	len += (size_t)sprintf(m + len, "\r\n\r\n");
	parse_req(m, len);
	CHECK_INT(http_error_status(req), 431, "header line of %d bytes: 431", HTTP_LINE_MAX + 1);
	/* refused before its end arrives, so it is never buffered whole */
	http_parser_reset(req, HTTP_REQUEST, false);
	rc = http_parse(req, (const uint8_t *)m, len - 4, &n, NULL, NULL);
	CHECK_INT(rc, -EMSGSIZE, "a long header line is refused before its CRLF");

	/* 100 headers, and one more */
	len = (size_t)sprintf(m, "GET / HTTP/1.1\r\nHost: h\r\n");
	for (int i = 1; i < HTTP_HEADERS_MAX; i++)
		len += (size_t)sprintf(m + len, "X-%d: %d\r\n", i, i);
	CHECK_INT(parse_req(m, len + (size_t)sprintf(m + len, "\r\n")), HTTP_DONE, "%d headers",
		  HTTP_HEADERS_MAX);
	CHECK_INT(http_header_count(req), HTTP_HEADERS_MAX, "all of them kept");
	CHECK_STR(http_header_at(req, 99)->value, "99", "the last one's value");
	len += (size_t)sprintf(m + len, "X-100: 100\r\n\r\n");
	parse_req(m, len);
	CHECK_INT(http_error_status(req), 431, "%d headers: 431", HTTP_HEADERS_MAX + 1);

	/* the whole head: 64 KiB with every CRLF */
	len = build_head(m, HTTP_HEAD_MAX, HTTP_LINE_MAX, &n);
	CHECK_INT(len, HTTP_HEAD_MAX, "built a head of %d bytes", HTTP_HEAD_MAX);
	CHECK_INT(parse_req(m, len), HTTP_DONE, "head of %d bytes (%zu headers)", HTTP_HEAD_MAX, n);
	len = build_head(m, HTTP_HEAD_MAX + 1, HTTP_LINE_MAX, &n);
	parse_req(m, len);
	CHECK_INT(http_error_status(req), 431, "head of %d bytes: 431", HTTP_HEAD_MAX + 1);
	/* in pieces too */
	http_parser_reset(req, HTTP_REQUEST, false);
	rc = feed(req, m, len, NULL, 0, 1000, false, &body, NULL);
	CHECK_INT(http_error_status(req), 431, "head of %d bytes in pieces: 431",
		  HTTP_HEAD_MAX + 1);
}

static const char chunked_msg[] = "POST /v1/messages HTTP/1.1\r\n"
				  "Host: h\r\n"
				  "Transfer-Encoding: chunked\r\n"
				  "\r\n"
				  "5\r\nhello\r\n"
				  "1;name=value;other=\"q;uoted\"\r\n \r\n"
				  "000A ; ext\r\nworld, and\r\n"
				  "1a\r\n abcdefghijklmnopqrstuvwxy\r\n"
				  "0\r\n"
				  "X-Checksum: abc\r\n"
				  "X-Other:  two \r\n"
				  "\r\n";
static const char chunked_body[] = "hello world, and abcdefghijklmnopqrstuvwxy";

static bool chunked_same(void)
{
	return body.len == strlen(chunked_body) && !memcmp(body.b, chunked_body, body.len) &&
	       http_trailer_count(req) == 2 &&
	       !strcmp(http_trailer_at(req, 0)->name, "X-Checksum") &&
	       !strcmp(http_trailer_at(req, 1)->value, "two");
}

/* One split: silent when it parses the same, the first failure shown. */
static bool chunked_split(const size_t *cuts, size_t n_cuts, size_t step, size_t *fails)
{
	size_t len = sizeof(chunked_msg) - 1;
	int rc;

	http_parser_reset(req, HTTP_REQUEST, false);
	rc = feed(req, chunked_msg, len, cuts, n_cuts, step, false, &body, NULL);
	if (rc == HTTP_DONE && chunked_same())
		return true;
	if (!(*fails)++)
		CHECK_INT(rc, HTTP_DONE,
			  "first failing split: cuts %zu %zu, step %zu (body %zu bytes)",
			  n_cuts ? cuts[0] : 0, n_cuts > 1 ? cuts[1] : 0, step, body.len);
	return false;
}

static void test_chunked(void)
{
	size_t len = sizeof(chunked_msg) - 1, fails = 0, runs = 0, used;
	int rc;

	http_parser_reset(req, HTTP_REQUEST, false);
	rc = feed(req, chunked_msg, len, NULL, 0, 0, false, &body, &used);
	CHECK_INT(rc, HTTP_DONE, "chunked body in one piece");
	CHECK_INT(used, len, "all of it used");
	CHECK_INT(http_header_count(req), 2, "trailers are not headers");
	CHECK_INT(body.len, strlen(chunked_body), "de-chunked body length");
	CHECK_TRUE(chunked_same(), "de-chunked body bytes and both trailers");
	CHECK_STR(http_trailer_at(req, 1)->value, "two", "trailer value trimmed");

	for (size_t step = 1; step <= 3; step++, runs++)
		chunked_split(NULL, 0, step, &fails);
	for (size_t a = 0; a <= len; a++, runs++) {
		size_t cuts[] = {a};

		chunked_split(cuts, 1, 0, &fails);
	}
	for (size_t a = 0; a <= len; a++)
		for (size_t b = a; b <= len; b++, runs++) {
			size_t cuts[] = {a, b};

			chunked_split(cuts, 2, 0, &fails);
		}
	CHECK_INT(fails, 0,
		  "chunked body split at every offset: 1..3-byte steps, two and three pieces "
		  "(%zu runs)",
		  runs);

	static const struct bad bad[] = {
		{"no CRLF after data", "5\r\nhelloX\r\n0\r\n\r\n", 400},
		{"LF only after data", "5\r\nhello\n0\r\n\r\n", 400},
		{"LF only after size", "5\nhello\r\n0\r\n\r\n", 400},
		{"bad hex", "5g\r\nhello\r\n0\r\n\r\n", 400},
		{"no size", "\r\nhello\r\n0\r\n\r\n", 400},
		{"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", 400},
		{"negative", "-5\r\nhello\r\n0\r\n\r\n", 400},
		{"space after size, no ext", "5 \r\nhello\r\n0\r\n\r\n", 400},
		{"space before size", " 5\r\nhello\r\n0\r\n\r\n", 400},
		{"bare LF in ext", "5;a\nb\r\nhello\r\n0\r\n\r\n", 400},
		{"CTL in ext", "5;a\x01\r\nhello\r\n0\r\n\r\n", 400},
		{"size overflow", "10000000000000000\r\nx\r\n0\r\n\r\n", 400},
		{"obs-fold trailer", "0\r\nX: a\r\n b\r\n\r\n", 400},
		{"CL trailer", "0\r\nContent-Length: 5\r\n\r\n", 400},
		{"TE trailer", "0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"Host trailer", "0\r\nHost: x\r\n\r\n", 400},
		{"bare LF ends trailers", "0\r\nX: a\r\n\n", 400},
		{"bad trailer name", "0\r\nX Y: a\r\n\r\n", 400},
	};
	static char m[4096];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		size_t n = (size_t)snprintf(m, sizeof(m),
					    "POST / HTTP/1.1\r\nHost: h\r\n"
					    "Transfer-Encoding: chunked\r\n\r\n%s",
					    bad[i].msg);
		parse_req(m, n);
		CHECK_INT(http_error_status(req), bad[i].status, "chunked, %s: %d", bad[i].why,
			  bad[i].status);
	}

	/* a size with leading zeros and the largest that fits are taken */
	CHECK_INT(parse_req_s("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "00000000000000000000001\r\nx\r\n0\r\n\r\n"),
		  HTTP_DONE, "chunk size with many leading zeros");
	{
		const char *h = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
				"fffffffffffffff\r\nxyz";

		CHECK_INT(parse_req_s(h), HTTP_MORE, "a 15-digit chunk size waits for its data");
		CHECK_INT(body.len, 3, "and hands on what came");
	}

	/* extensions are capped */
	size_t n = (size_t)sprintf(m, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
				      "chunked\r\n\r\n1;");
	size_t start = n;

	memset(m + n, 'e', HTTP_CHUNK_LINE_MAX - 2);
	n += HTTP_CHUNK_LINE_MAX - 2;
	n += (size_t)sprintf(m + n, "\r\nx\r\n0\r\n\r\n");
	CHECK_INT(parse_req(m, n), HTTP_DONE, "chunk line of %d bytes", HTTP_CHUNK_LINE_MAX);
	n = start;
	memset(m + n, 'e', HTTP_CHUNK_LINE_MAX - 1);
	n += HTTP_CHUNK_LINE_MAX - 1;
	n += (size_t)sprintf(m + n, "\r\nx\r\n0\r\n\r\n");
	parse_req(m, n);
	CHECK_INT(http_error_status(req), 400, "chunk line of %d bytes: 400",
		  HTTP_CHUNK_LINE_MAX + 1);

	/* truncated */
	http_parser_reset(req, HTTP_REQUEST, false);
	rc = feed(req, chunked_msg, len - 3, NULL, 0, 0, true, &body, NULL);
	CHECK_INT(rc, -EBADMSG, "a chunked body cut short at close");
}

static void test_responses(void)
{
	int rc;

	rc = parse_resp("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			"Content-Length: 2\r\n\r\n{}",
			false, false);
	CHECK_INT(rc, HTTP_DONE, "response with Content-Length");
	CHECK_INT(http_status(resp), 200, "status 200");
	CHECK_STR(http_reason(resp), "OK", "reason");
	CHECK_STR(header(resp, "content-type"), "application/json", "response header");
	CHECK_INT(http_framing(resp), HTTP_BODY_LENGTH, "framing length");
	CHECK_INT(body.len, 2, "body length");

	CHECK_FALSE(http_answer_encoded(resp), "an answer without Content-Encoding is not encoded");
	parse_resp("HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 2\r\n\r\nab",
		   false, false);
	CHECK_FALSE(http_answer_encoded(resp), "Content-Encoding: identity is not encoded");
	parse_resp("HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\n"
		   "Content-Length: 2\r\n\r\nab",
		   false, false);
	CHECK_TRUE(http_answer_encoded(resp),
		   "gzip on a second Content-Encoding line is encoded (identity on the first)");
	parse_resp("HTTP/1.1 200 OK\r\nContent-Encoding: Identity , gzip\r\nContent-Length: 2\r\n"
		   "\r\nab",
		   false, false);
	CHECK_TRUE(http_answer_encoded(resp), "gzip after identity in one list is encoded");

	rc = parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			"3\r\nabc\r\n0\r\n\r\n",
			false, false);
	CHECK_INT(rc, HTTP_DONE, "chunked response");
	CHECK_INT(body.len, 3, "chunked response body");

	rc = parse_resp("HTTP/1.0 200 OK\r\n\r\nuntil the end", false, true);
	CHECK_INT(rc, HTTP_DONE, "response read until close");
	CHECK_INT(http_framing(resp), HTTP_BODY_CLOSE, "framing until close");
	CHECK_INT(body.len, strlen("until the end"), "body until close");
	CHECK_INT(parse_resp("HTTP/1.1 200 OK\r\n\r\npart", false, false), HTTP_MORE,
		  "until close: not done while open");

	rc = parse_resp("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", false, false);
	CHECK_INT(rc, HTTP_DONE, "204 ends at its head");
	CHECK_INT(http_framing(resp), HTTP_BODY_NONE, "204 has no body");
	rc = parse_resp("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", false, false);
	CHECK_INT(rc == HTTP_DONE && http_framing(resp) == HTTP_BODY_NONE, 1, "304 has no body");
	rc = parse_resp("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", false, false);
	CHECK_INT(rc == HTTP_DONE && http_status(resp) == 100, 1, "100 Continue is a message");
	rc = parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", true, false);
	CHECK_INT(rc == HTTP_DONE && http_framing(resp) == HTTP_BODY_NONE, 1,
		  "the answer to HEAD has no body");
	rc = parse_resp("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", false, false);
	CHECK_INT(rc, HTTP_DONE, "empty reason");
	CHECK_STR(http_reason(resp), "", "reason is empty");
	rc = parse_resp("HTTP/1.1 502\r\nContent-Length: 0\r\n\r\n", false, false);
	CHECK_INT(rc, HTTP_DONE, "no reason and no SP");
	CHECK_INT(http_status(resp), 502, "status 502");
	rc = parse_resp("HTTP/1.1 200 OK with\ttab\r\nContent-Length: 0\r\n\r\n", false, false);
	CHECK_STR(http_reason(resp), "OK with\ttab", "reason with SP and HTAB");

	static const struct bad bad[] = {
		{"status 99", "HTTP/1.1 099 X\r\n\r\n", 400},
		{"status 600", "HTTP/1.1 600 X\r\n\r\n", 400},
		{"four digits", "HTTP/1.1 2000 OK\r\n\r\n", 400},
		{"two digits", "HTTP/1.1 20 OK\r\n\r\n", 400},
		{"letters", "HTTP/1.1 2x0 OK\r\n\r\n", 400},
		{"HTTP/2", "HTTP/2 200 OK\r\n\r\n", 400},
		{"ICY", "ICY 200 OK\r\n\r\n", 400},
		{"CTL in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", 400},
		{"CL with TE",
		 "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"duplicate CL",
		 "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400},
		{"TE gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"TE in 1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 400},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", 400},
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		parse_resp(bad[i].msg, false, false);
		CHECK_INT(http_error_status(resp), bad[i].status, "response, %s: %d", bad[i].why,
			  bad[i].status);
	}

	CHECK_INT(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false, true),
		  -EBADMSG, "a body cut short at close");
	CHECK_INT(parse_resp("HTTP/1.1 200 OK\r\nContent-", false, true), -EBADMSG,
		  "a head cut short at close");
	http_parser_reset(resp, HTTP_RESPONSE, false);
	CHECK_INT(http_parse_eof(resp), -ENODATA, "a close before any byte is no message");
}

static void test_paths(void)
{
	static const char *const good[] = {
		"/",
		"/v1/messages",
		"/v1/models/",
		"/v1/models/gemini-pro:generateContent",
		"/a%20b",
		"/a%2e",
		"/%2e%2e%2e",
		"/...",
		"/.well-known/x",
		"/a.b/c..d",
		"/~user/a-b_c!$&'()*+,=@",
		"/%25",
		"/%252e",
		"/%C3%A9",
		"/v1/x?q=../..//;%zz\\#",
		"/v1?",
	};
	static const char *const bad[] = {
		"",
		"v1/messages",
		"?a",
		"//",
		"//v1",
		"/v1//messages",
		"/v1/messages//",
		"/.",
		"/./v1",
		"/v1/.",
		"/v1/./x",
		"/..",
		"/../v1",
		"/v1/..",
		"/v1/../x",
		"/%2e",
		"/%2E",
		"/%2e%2e",
		"/%2E%2e",
		"/.%2e",
		"/%2e.",
		"/v1/%2e%2e/x",
		"/v1/%2e?x",
		"/a%2fb",
		"/a%2Fb",
		"/%2f",
		"/a%5cb",
		"/a%5Cb",
		"/a\\b",
		"/a;b",
		"/a;",
		"/;x/b",
		"/v1;jsessionid=1/x",
		"/a%3bb",
		"/a%3Bb",
		"/a%00b",
		"/%",
		"/a%",
		"/a%2",
		"/a%2?x",
		"/%zz",
		"/%2g",
		"/%g2",
		"/a b",
		"/a#b",
		"/a\x7f",
		"/a\x01",
		"/caf\xc3\xa9",
		"/a\"b",
		"/a<b>",
		"/a|b",
		"/a{b}",
		"/a^b",
		"/a`b",
		"/a[b]",
	};

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		CHECK_INT(http_path_check(good[i]), 0, "path \"%s\" taken", good[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_INT(http_path_check(bad[i]), -EINVAL, "path \"%s\" refused (400)", bad[i]);
}

static void test_capabilities(void)
{
	static const struct {
		const char *pm, *pp, *m, *path;
		bool match;
	} cases[] = {
		{"POST", "/v1/messages", "POST", "/v1/messages", true},
		{"POST", "/v1/messages", "POST", "/v1/messages?beta=true", true},
		{"POST", "/v1/messages", "GET", "/v1/messages", false},
		{"POST", "/v1/messages", "post", "/v1/messages", false},
		{"*", "/v1/messages", "DELETE", "/v1/messages", true},
		{"POST", "/v1/messages", "POST", "/v1/messages/", false},
		{"POST", "/v1/messages", "POST", "/v1/messages/x", false},
		{"POST", "/v1/messages", "POST", "/v1/Messages", false},
		{"POST", "/v1/messages", "POST", "/v1", false},
		{"POST", "/v1/messages", "POST", "/v1/messages%2f", false},
		{"GET", "/v1/models/*", "GET", "/v1/models/claude", true},
		{"GET", "/v1/models/*", "GET", "/v1/models/claude?x=/a/b", true},
		{"GET", "/v1/models/*", "GET", "/v1/models", false},
		{"GET", "/v1/models/*", "GET", "/v1/models/", false},
		{"GET", "/v1/models/*", "GET", "/v1/models/a/b", false},
		{"GET", "/v1/*/x", "GET", "/v1/a/x", true},
		{"GET", "/v1/*/x", "GET", "/v1/a/b/x", false},
		{"GET", "/v1/*/*", "GET", "/v1/a/b", true},
		{"GET", "/v1/**", "GET", "/v1", true},
		{"GET", "/v1/**", "GET", "/v1/", true},
		{"GET", "/v1/**", "GET", "/v1/a", true},
		{"GET", "/v1/**", "GET", "/v1/a/b/c", true},
		{"GET", "/v1/**", "GET", "/v2/a", false},
		{"GET", "/v1/**", "GET", "/v10", false},
		{"GET", "/**", "GET", "/", true},
		{"GET", "/**", "GET", "/anything/at/all", true},
		{"GET", "/v1/**/files", "GET", "/v1/files", true},
		{"GET", "/v1/**/files", "GET", "/v1/a/files", true},
		{"GET", "/v1/**/files", "GET", "/v1/a/b/c/files", true},
		{"GET", "/v1/**/files", "GET", "/v1/a/b/c/files/x", false},
		{"GET", "/v1/**/files", "GET", "/v1/files/files", true},
		{"GET", "/**/a/**/b", "GET", "/x/a/y/z/b", true},
		{"GET", "/**/a/**/b", "GET", "/a/b", true},
		{"GET", "/**/a/**/b", "GET", "/b/a", false},
		{"GET", "/**/*/c", "GET", "/c", false},
		{"GET", "/**/*/c", "GET", "/x/c", true},
		{"GET", "/v1/*", "GET", "/v1/%2e%2e", true},
		{"GET", "/v1/a%2Fb", "GET", "/v1/a%2Fb", true},
		{"GET", "/v1/a%2Fb", "GET", "/v1/a%2fb", false},
		{"GET", "/v1/a/b", "GET", "/v1/a%2Fb", false},
		{"GET", "*", "GET", "/anything?x", true},
		{"*", "*", "PATCH", "/", true},
		{"GET", "/", "GET", "/", true},
		{"GET", "/", "GET", "/a", false},
		{"GET", "/v1", "GET", "v1", false},
		{"GET", "v1", "GET", "v1", false},
		{"GET", "/v1/*", "GET", "/v1/*", true},
		{"GET", "/v1/x*", "GET", "/v1/xy", false},
		{"GET", "/v1/x*", "GET", "/v1/x*", true},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		CHECK_INT(
			http_capability_match(cases[i].pm, cases[i].pp, cases[i].m, cases[i].path),
			cases[i].match, "capability %s %s %s %s %s", cases[i].pm, cases[i].pp,
			cases[i].match ? "matches" : "does not match", cases[i].m, cases[i].path);

	/* many "**" against a long path stays a quick walk */
	static char pat[4096], path[8192];
	size_t n = 0;

	for (int i = 0; i < 60; i++)
		n += (size_t)sprintf(pat + n, "/**/a");
	sprintf(pat + n, "/z");
	n = 0;
	for (int i = 0; i < 2000; i++)
		n += (size_t)sprintf(path + n, "/a");
	CHECK_FALSE(http_capability_match("GET", pat, "GET", path),
		    "60 \"**\" against 2000 segments: no match, quickly");
}

static void test_override(void)
{
	static const char *const yes[] = {
		"X-HTTP-Method-Override", "x-http-method-override", "X-HTTP-Method",
		"X-Method-Override",	  "X-Original-URL",	    "x-original-url",
		"X-Rewrite-URL",	  "X-REWRITE-URL",
	};
	static const char *const no[] = {
		"X-HTTP-Method-Overrides", "X-HTTP", "X-Forwarded-For",
		"X-Original-URI",	   "",	     "Host",
	};

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
		CHECK_TRUE(http_header_is_override(yes[i]), "%s is an override header", yes[i]);
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		CHECK_FALSE(http_header_is_override(no[i]), "\"%s\" is not", no[i]);
}

int main(void)
{
	req = http_parser_new(HTTP_REQUEST);
	resp = http_parser_new(HTTP_RESPONSE);
	if (!req || !resp)
		return 1;
	test_requests();
	test_body_error();
	test_bad_requests();
	test_caps();
	test_chunked();
	test_responses();
	test_paths();
	test_capabilities();
	test_override();
	http_parser_free(req);
	http_parser_free(resp);
	return test_exit();
}
