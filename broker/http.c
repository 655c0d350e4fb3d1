/* errand-broker's HTTP/1.1 parser (RFC 9112, strictly: CRLF only, no obs-fold,
 * one framing per message), fed in pieces with the head kept in a buffer of its
 * own; the path, capability and override-header rules of provider routes; and
 * the rules on fields and connections both of the broker's relays follow. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/http.h"
#include "lib/util.h"

enum state {
	S_START, /* request or status line */
	S_HEADERS,
	S_BODY_LENGTH,
	S_CHUNK_SIZE,
	S_CHUNK_BWS, /* whitespace after the size: only ";" may follow */
	S_CHUNK_EXT, /* extensions: skipped up to CR */
	S_CHUNK_SIZE_LF,
	S_CHUNK_DATA,
	S_CHUNK_DATA_CR,
	S_CHUNK_DATA_LF,
	S_TRAILERS,
	S_BODY_CLOSE,
	S_DONE,
};

struct http_parser {
	enum http_kind kind;
	bool head_request;
	enum state state;
	int error;	  /* negative errno once the message failed; final */
	int error_status; /* what to answer the peer with */

	/* Every line of the head and the trailers, CR replaced by NUL: views
	 * handed out point in here. */
	char buf[HTTP_HEAD_MAX + 1];
	size_t buf_len; /* bytes stored; the current line begins at line_start */
	size_t line_start;
	size_t head_bytes; /* bytes of head and trailers seen, CRLFs counted */

	const char *method, *target, *reason;
	int status, minor;

	struct http_header fields[HTTP_HEADERS_MAX];
	size_t n_fields, n_headers; /* trailers follow the n_headers headers */
	bool seen_cl, seen_te;
	unsigned int n_host;

	enum http_framing framing;
	uint64_t length;    /* Content-Length */
	uint64_t remaining; /* of the body or the current chunk */
	uint64_t chunk_size;
	size_t chunk_line; /* bytes of the chunk-size line so far */
	bool chunk_digits;
};

struct http_parser *http_parser_new(enum http_kind kind)
{
	struct http_parser *p = malloc(sizeof(*p));

	if (!p)
		return NULL;
	http_parser_reset(p, kind, false);
	return p;
}

void http_parser_free(struct http_parser *p)
{
	free(p);
}

void http_parser_reset(struct http_parser *p, enum http_kind kind, bool head_request)
{
	/* buf and fields are overwritten before they are read; clearing 64 KiB
	 * per message would cost more than the parse. */
	p->kind = kind;
	p->head_request = head_request;
	p->state = S_START;
	p->error = 0;
	p->error_status = 0;
	p->buf_len = 0;
	p->line_start = 0;
	p->head_bytes = 0;
	p->buf[0] = '\0';
	p->method = p->target = p->reason = p->buf;
	p->status = 0;
	p->minor = 1;
	p->n_fields = p->n_headers = 0;
	p->seen_cl = p->seen_te = false;
	p->n_host = 0;
	p->framing = HTTP_BODY_NONE;
	p->length = p->remaining = p->chunk_size = 0;
	p->chunk_line = 0;
	p->chunk_digits = false;
}

static int fail(struct http_parser *p, int status)
{
	p->error_status = status;
	p->error = status == 501 ? -EOPNOTSUPP : status == 400 ? -EBADMSG : -EMSGSIZE;
	return p->error;
}

/* RFC 9110 tchar */
static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c);
}

static bool is_token(const char *s, size_t len)
{
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_tchar((unsigned char)s[i]))
			return false;
	return true;
}

/* field-vchar, SP and HTAB: no CTL but HTAB, obs-text allowed */
static bool is_field_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int parse_version(struct http_parser *p, const char *s, size_t len)
{
	if (len != 8 || memcmp(s, "HTTP/1.", 7) || (s[7] != '0' && s[7] != '1'))
		return fail(p, 400);
	p->minor = s[7] - '0';
	return 0;
}

/* METHOD SP request-target SP HTTP-version */
static int request_line(struct http_parser *p, char *line, size_t len)
{
	char *sp1 = memchr(line, ' ', len), *sp2;
	size_t tlen;

	if (!sp1 || !is_token(line, (size_t)(sp1 - line)))
		return fail(p, 400);
	sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - line));
	if (!sp2)
		return fail(p, 400);
	tlen = (size_t)(sp2 - sp1 - 1);
	if (!tlen)
		return fail(p, 400);
	for (size_t i = 0; i < tlen; i++) {
		unsigned char c = (unsigned char)sp1[1 + i];

		if (c <= 0x20 || c >= 0x7f)
			return fail(p, 400);
	}
	if (parse_version(p, sp2 + 1, len - (size_t)(sp2 + 1 - line)))
		return p->error;
	*sp1 = '\0';
	*sp2 = '\0';
	p->method = line;
	p->target = sp1 + 1;
	return 0;
}

/* HTTP-version SP 3DIGIT SP reason-phrase; a missing reason with its SP is
 * taken, as it leaves nothing to misread. */
static int status_line(struct http_parser *p, char *line, size_t len)
{
	if (len < 12 || line[8] != ' ' || parse_version(p, line, 8))
		return fail(p, 400);
	for (int i = 9; i < 12; i++)
		if (line[i] < '0' || line[i] > '9')
			return fail(p, 400);
	p->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	if (p->status < 100 || p->status > 599)
		return fail(p, 400);
	if (len > 12 && line[12] != ' ')
		return fail(p, 400);
	for (size_t i = 13; i < len; i++)
		if (!is_field_char((unsigned char)line[i]))
			return fail(p, 400);
	p->reason = len > 12 ? line + 13 : line + 12;
	return 0;
}

static int content_length(struct http_parser *p, const struct http_header *h)
{
	uint64_t v = 0;

	/* one, even when a second says the same: two is a smuggling attempt */
	if (p->seen_cl || !h->value_len)
		return fail(p, 400);
	p->seen_cl = true;
	for (size_t i = 0; i < h->value_len; i++) {
		unsigned int d = (unsigned char)h->value[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return fail(p, 400);
		v = v * 10 + d;
	}
	p->length = v;
	return 0;
}

/* Only "chunked", once: any other coding is one the broker does not decode
 * (501), and HTTP/1.0 has no chunked framing to trust. */
static int transfer_encoding(struct http_parser *p, const struct http_header *h)
{
	if (p->seen_te || p->minor == 0)
		return fail(p, 400);
	p->seen_te = true;
	if (h->value_len != 7 || strncasecmp(h->value, "chunked", 7))
		return fail(p, 501);
	return 0;
}

static bool name_is(const struct http_header *h, const char *name, size_t len)
{
	return h->name_len == len && !strncasecmp(h->name, name, len);
}

/* field-name ":" OWS field-value OWS */
static int field_line(struct http_parser *p, char *line, size_t len, bool trailer)
{
	struct http_header *h;
	char *colon, *v, *end;

	if (line[0] == ' ' || line[0] == '\t')
		return fail(p, 400); /* obs-fold, or whitespace before the first field */
	if (p->n_fields >= HTTP_HEADERS_MAX)
		return fail(p, 431);
	colon = memchr(line, ':', len);
	if (!colon || !is_token(line, (size_t)(colon - line)))
		return fail(p, 400); /* also "Name :", which RFC 9112 says to refuse */
	end = line + len;
	for (v = colon + 1; v < end; v++)
		if (!is_field_char((unsigned char)*v))
			return fail(p, 400);
	v = colon + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*colon = '\0';
	*end = '\0';
	h = &p->fields[p->n_fields++];
	h->name = line;
	h->name_len = (size_t)(colon - line);
	h->value = v;
	h->value_len = (size_t)(end - v);

	if (name_is(h, "content-length", 14))
		return trailer ? fail(p, 400) : content_length(p, h);
	if (name_is(h, "transfer-encoding", 17))
		return trailer ? fail(p, 400) : transfer_encoding(p, h);
	if (name_is(h, "host", 4)) {
		if (trailer)
			return fail(p, 400);
		p->n_host++;
	}
	return 0;
}

/* The empty line: settle how the body is framed. */
static int head_end(struct http_parser *p)
{
	p->n_headers = p->n_fields;
	if (p->seen_cl && p->seen_te)
		return fail(p, 400);
	if (p->kind == HTTP_REQUEST && (p->n_host > 1 || (p->minor == 1 && p->n_host == 0)))
		return fail(p, 400);

	if (p->kind == HTTP_RESPONSE &&
	    (p->head_request || p->status < 200 || p->status == 204 || p->status == 304))
		p->framing = HTTP_BODY_NONE;
	else if (p->seen_te)
		p->framing = HTTP_BODY_CHUNKED;
	else if (p->seen_cl)
		p->framing = HTTP_BODY_LENGTH;
	else if (p->kind == HTTP_RESPONSE)
		p->framing = HTTP_BODY_CLOSE;
	else
		p->framing = HTTP_BODY_NONE;

	switch (p->framing) {
	case HTTP_BODY_NONE:
		p->state = S_DONE;
		break;
	case HTTP_BODY_LENGTH:
		p->remaining = p->length;
		p->state = S_BODY_LENGTH;
		break;
	case HTTP_BODY_CHUNKED:
		p->state = S_CHUNK_SIZE;
		break;
	case HTTP_BODY_CLOSE:
		p->state = S_BODY_CLOSE;
		break;
	}
	return 0;
}

/* Gathers the current line into buf. Returns 1 with *line and *len set (CR
 * gone, NUL-terminated) once its LF came, 0 when data ran out first. */
static int take_line(struct http_parser *p, const uint8_t *data, size_t len, size_t *i, size_t cap,
		     int too_long, char **line, size_t *line_len)
{
	const uint8_t *lf = memchr(data + *i, '\n', len - *i);
	size_t n = lf ? (size_t)(lf - (data + *i)) : len - *i;
	size_t have = p->buf_len - p->line_start;

	/* checked before copying, so no line or head grows past its cap */
	if (have + n > cap + 1 || (have + n == cap + 1 && n && data[*i + n - 1] != '\r'))
		return fail(p, too_long); /* cap + 1 only when that last byte is the CR */
	if (p->head_bytes + n + (lf ? 1 : 0) > HTTP_HEAD_MAX)
		return fail(p, 431);
	memcpy(p->buf + p->buf_len, data + *i, n);
	p->buf_len += n;
	p->head_bytes += n;
	*i += n;
	if (!lf)
		return 0;
	(*i)++;
	p->head_bytes++;
	have += n;
	/* CRLF only: a bare LF ends no line; a bare CR is refused by the
	 * character checks of whatever holds it */
	if (!have || p->buf[p->buf_len - 1] != '\r')
		return fail(p, 400);
	if (have - 1 > cap)
		return fail(p, too_long);
	p->buf[p->buf_len - 1] = '\0';
	*line = p->buf + p->line_start;
	*line_len = have - 1;
	p->line_start = p->buf_len;
	return 1;
}

static int head_byte_line(struct http_parser *p, const uint8_t *data, size_t len, size_t *i)
{
	char *line;
	size_t n;
	int rc;

	if (p->state == S_START) {
		rc = take_line(p, data, len, i, HTTP_LINE_MAX, p->kind == HTTP_REQUEST ? 414 : 400,
			       &line, &n);
		if (rc <= 0)
			return rc;
		/* no empty lines before a request: strict, and nothing sends them */
		if (!n)
			return fail(p, 400);
		rc = p->kind == HTTP_REQUEST ? request_line(p, line, n) : status_line(p, line, n);
		if (rc)
			return rc;
		p->state = S_HEADERS;
		return 0;
	}
	rc = take_line(p, data, len, i, HTTP_LINE_MAX, 431, &line, &n);
	if (rc <= 0)
		return rc;
	if (n)
		return field_line(p, line, n, p->state == S_TRAILERS);
	if (p->state == S_TRAILERS) {
		p->state = S_DONE;
		return HTTP_DONE;
	}
	rc = head_end(p);
	return rc ? rc : HTTP_HEAD;
}

/* One byte of the chunk-size line or the CRLF after chunk data. */
static int chunk_byte(struct http_parser *p, unsigned char c)
{
	int d;

	if (p->state >= S_CHUNK_SIZE && p->state <= S_CHUNK_EXT &&
	    ++p->chunk_line > HTTP_CHUNK_LINE_MAX + 1) /* + 1: its CR */
		return fail(p, 400);
	switch (p->state) {
	case S_CHUNK_SIZE:
		d = hex_value(c);
		if (d >= 0) {
			if (p->chunk_size > UINT64_MAX >> 4)
				return fail(p, 400);
			p->chunk_size = p->chunk_size << 4 | (uint64_t)d;
			p->chunk_digits = true;
			return 0;
		}
		if (!p->chunk_digits)
			return fail(p, 400);
		if (c == '\r')
			p->state = S_CHUNK_SIZE_LF;
		else if (c == ';')
			p->state = S_CHUNK_EXT;
		else if (c == ' ' || c == '\t')
			p->state = S_CHUNK_BWS;
		else
			return fail(p, 400);
		return 0;
	case S_CHUNK_BWS:
		if (c == ';')
			p->state = S_CHUNK_EXT;
		else if (c != ' ' && c != '\t')
			return fail(p, 400);
		return 0;
	case S_CHUNK_EXT:
		if (c == '\r')
			p->state = S_CHUNK_SIZE_LF;
		else if (!is_field_char(c))
			return fail(p, 400);
		return 0;
	case S_CHUNK_SIZE_LF:
		if (c != '\n')
			return fail(p, 400);
		if (p->chunk_size) {
			p->remaining = p->chunk_size;
			p->state = S_CHUNK_DATA;
		} else {
			p->state = S_TRAILERS;
		}
		return 0;
	case S_CHUNK_DATA_CR:
		if (c != '\r')
			return fail(p, 400);
		p->state = S_CHUNK_DATA_LF;
		return 0;
	case S_CHUNK_DATA_LF:
		if (c != '\n')
			return fail(p, 400);
		p->state = S_CHUNK_SIZE;
		p->chunk_size = 0;
		p->chunk_line = 0;
		p->chunk_digits = false;
		return 0;
	default:
		return fail(p, 400);
	}
}

static int body_bytes(struct http_parser *p, const uint8_t *data, size_t n, http_body_fn body,
		      void *ctx)
{
	int rc;

	if (!body || !n)
		return 0;
	rc = body(ctx, data, n);
	if (rc < 0)
		p->error = rc;
	return rc < 0 ? rc : 0;
}

int http_parse(struct http_parser *p, const uint8_t *data, size_t len, size_t *consumed,
	       http_body_fn body, void *ctx)
{
	size_t i = 0, n;
	int rc = HTTP_MORE;

	*consumed = 0;
	if (p->error)
		return p->error;
	while (rc == HTTP_MORE) {
		switch (p->state) {
		case S_DONE:
			rc = HTTP_DONE;
			break;
		case S_START:
		case S_HEADERS:
		case S_TRAILERS:
			if (i == len)
				goto out;
			rc = head_byte_line(p, data, len, &i);
			break;
		case S_BODY_LENGTH:
			if (!p->remaining) {
				p->state = S_DONE;
				rc = HTTP_DONE;
				break;
			}
			/* fallthrough */
		case S_CHUNK_DATA:
		case S_BODY_CLOSE:
			if (i == len)
				goto out;
			n = len - i;
			if (p->state != S_BODY_CLOSE && n > p->remaining)
				n = (size_t)p->remaining;
			rc = body_bytes(p, data + i, n, body, ctx);
			if (rc)
				break;
			i += n;
			if (p->state != S_BODY_CLOSE)
				p->remaining -= n;
			if (p->state == S_CHUNK_DATA && !p->remaining)
				p->state = S_CHUNK_DATA_CR;
			break;
		default:
			if (i == len)
				goto out;
			rc = chunk_byte(p, data[i++]);
			break;
		}
	}
out:
	*consumed = i;
	return rc;
}

int http_parse_eof(struct http_parser *p)
{
	if (p->error)
		return p->error;
	if (p->state == S_BODY_CLOSE)
		p->state = S_DONE;
	if (p->state == S_DONE)
		return HTTP_DONE;
	if (p->state == S_START && p->buf_len == 0)
		return -ENODATA;
	return fail(p, 400);
}

int http_error_status(const struct http_parser *p)
{
	return p->error_status;
}

const char *http_method(const struct http_parser *p)
{
	return p->method;
}

const char *http_target(const struct http_parser *p)
{
	return p->target;
}

int http_status(const struct http_parser *p)
{
	return p->status;
}

const char *http_reason(const struct http_parser *p)
{
	return p->reason;
}

int http_version_minor(const struct http_parser *p)
{
	return p->minor;
}

enum http_framing http_framing(const struct http_parser *p)
{
	return p->framing;
}

uint64_t http_content_length(const struct http_parser *p)
{
	return p->length;
}

size_t http_header_count(const struct http_parser *p)
{
	return p->n_headers;
}

const struct http_header *http_header_at(const struct http_parser *p, size_t i)
{
	return i < p->n_headers ? &p->fields[i] : NULL;
}

const struct http_header *http_header_find(const struct http_parser *p, const char *name)
{
	for (size_t i = 0; i < p->n_headers; i++)
		if (!strcasecmp(p->fields[i].name, name))
			return &p->fields[i];
	return NULL;
}

size_t http_trailer_count(const struct http_parser *p)
{
	return p->state == S_DONE ? p->n_fields - p->n_headers : 0;
}

const struct http_header *http_trailer_at(const struct http_parser *p, size_t i)
{
	return i < http_trailer_count(p) ? &p->fields[p->n_headers + i] : NULL;
}

/* RFC 3986 pchar without pct-encoded and ";" (which http_path_check refuses):
 * unreserved, the other sub-delims, ":" and "@" */
static bool is_path_char(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("-._~!$&'()*+,=:@", c);
}

/* One segment, raw[0..len): what a server decoding it once could read as a
 * traversal, a separator or a parameter is refused. */
static int segment_check(const char *raw, size_t len)
{
	size_t dots = 0, decoded = 0;

	if (!len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)raw[i];

		if (c == '%') {
			int hi, lo;

			if (len - i < 3)
				return -EINVAL;
			hi = hex_value((unsigned char)raw[i + 1]);
			lo = hi < 0 ? -1 : hex_value((unsigned char)raw[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (unsigned char)(hi << 4 | lo);
			if (c == '/' || c == '\\' || c == ';' || c == '\0')
				return -EINVAL;
			i += 2;
		} else if (!is_path_char(c)) {
			return -EINVAL;
		}
		decoded++;
		if (c == '.')
			dots++;
	}
	if (dots == decoded && decoded <= 2)
		return -EINVAL;
	return 0;
}

int http_path_check(const char *raw_path)
{
	size_t end = strcspn(raw_path, "?");
	const char *s = raw_path;

	if (!end || raw_path[0] != '/')
		return -EINVAL;
	/* "/" alone and a trailing "/" are the only empty segments allowed:
	 * both are ordinary and read the same everywhere */
	while (s < raw_path + end) {
		const char *seg = s + 1;
		size_t len = strcspn(seg, "/?");
		int rc;

		if (seg + len == raw_path + end && !len)
			return 0;
		rc = segment_check(seg, len);
		if (rc)
			return rc;
		s = seg + len;
	}
	return 0;
}

/* Glob over segments: "*" is one segment as "?" is one character, "**" any
 * run as "*" is; with backtracking only to the last "**", the walk is at most
 * pattern segments times path segments, whatever a session sends. */
struct seg {
	const char *s;
	size_t len;
};

static bool seg_next(const char **pos, const char *end, struct seg *out)
{
	const char *s = *pos, *e;

	if (s >= end)
		return false;
	s++; /* the "/" */
	e = memchr(s, '/', (size_t)(end - s));
	if (!e)
		e = end;
	out->s = s;
	out->len = (size_t)(e - s);
	*pos = e;
	return true;
}

static bool seg_is(const struct seg *g, const char *lit)
{
	return g->len == strlen(lit) && !memcmp(g->s, lit, g->len);
}

static bool path_match(const char *pat, const char *pend, const char *path, const char *end)
{
	const char *pp = pat, *sp = path, *star_pp = NULL, *star_sp = NULL;
	struct seg pg, sg;

	for (;;) {
		if (!seg_next(&sp, end, &sg)) {
			/* path used up: what is left of the pattern must be "**" */
			while (seg_next(&pp, pend, &pg))
				if (!seg_is(&pg, "**"))
					return false;
			return true;
		}
		if (seg_next(&pp, pend, &pg)) {
			if (seg_is(&pg, "**")) {
				star_pp = pp;
				star_sp = sp - sg.len - 1; /* "**" takes none first */
				sp = star_sp;
				continue;
			}
			if ((seg_is(&pg, "*") && sg.len) ||
			    (pg.len == sg.len && !memcmp(pg.s, sg.s, sg.len)))
				continue;
		}
		if (!star_pp)
			return false;
		/* let the last "**" take one more segment and try again */
		sp = star_sp;
		seg_next(&sp, end, &sg);
		star_sp = sp;
		pp = star_pp;
	}
}

bool http_capability_match(const char *pattern_method, const char *pattern_path, const char *method,
			   const char *raw_path)
{
	size_t plen = strcspn(raw_path, "?");

	if (strcmp(pattern_method, "*") && strcmp(pattern_method, method))
		return false;
	if (!strcmp(pattern_path, "*"))
		return true;
	if (pattern_path[0] != '/' || raw_path[0] != '/')
		return false;
	return path_match(pattern_path, pattern_path + strlen(pattern_path), raw_path,
			  raw_path + plen);
}

static bool name_in(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

bool http_header_is_override(const char *name)
{
	static const char *const names[] = {
		"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
		"X-Original-URL",	  "X-Rewrite-URL",
	};

	return name_in(name, names, ARRAY_SIZE(names));
}

bool http_hop_by_hop(const char *name)
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

	return name_in(name, names, ARRAY_SIZE(names));
}

bool http_answer_field_dropped(const struct http_parser *resp, const char *name, bool body)
{
	return http_hop_by_hop(name) && !(!strcasecmp(name, "Content-Length") && !body &&
					  http_framing(resp) == HTTP_BODY_NONE);
}

bool http_answer_has_body(const struct http_parser *resp)
{
	switch (http_framing(resp)) {
	case HTTP_BODY_NONE:
		return false;
	case HTTP_BODY_LENGTH:
		return http_content_length(resp) > 0;
	default:
		return true;
	}
}

/* Whether a field line named name holds a list member other than want
 * (other), or want itself (!other). Every line of that name counts: a
 * second line is the same field (RFC 9110 5.3), and reading the first alone
 * let "identity" on one line hide "gzip" on the next. */
static bool field_has(const struct http_parser *p, const char *name, const char *want, bool other)
{
	for (size_t i = 0; i < http_header_count(p); i++) {
		const struct http_header *h = http_header_at(p, i);
		const char *v = h->value;

		if (strcasecmp(h->name, name))
			continue;
		while (*v) {
			size_t n;

			v += strspn(v, " \t,");
			n = strcspn(v, ",");
			while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
				n--;
			if (n && (strlen(want) == n && !strncasecmp(v, want, n)) != other)
				return true;
			v += strcspn(v, ",");
		}
	}
	return false;
}

bool http_answer_encoded(const struct http_parser *resp)
{
	return http_answer_has_body(resp) && field_has(resp, "Content-Encoding", "identity", true);
}

static bool says_close(const struct http_parser *p)
{
	return field_has(p, "Connection", "close", false);
}

bool http_request_keeps(const struct http_parser *req)
{
	const struct http_header *h = http_header_find(req, "Connection");

	if (says_close(req))
		return false;
	return http_version_minor(req) == 1 || (h && strcasestr(h->value, "keep-alive"));
}

bool http_answer_keeps(const struct http_parser *resp)
{
	return http_framing(resp) != HTTP_BODY_CLOSE && http_version_minor(resp) == 1 &&
	       !says_close(resp);
}

const char *http_status_text(int status)
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
	case 421:
		return "Misdirected Request";
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
