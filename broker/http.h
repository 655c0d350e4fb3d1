/* errand-broker's own strict HTTP/1.1 parser: request heads from sessions and
 * response heads from providers, fed in pieces, bodies decoded as they come;
 * plus the path, capability and header rules a provider route applies. */
#ifndef ERRAND_BROKER_HTTP_H
#define ERRAND_BROKER_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_LINE_MAX 8192	 /* request or status line, a header line, without CRLF */
#define HTTP_HEAD_MAX 65536	 /* the head with every CRLF; trailers share it */
#define HTTP_HEADERS_MAX 100	 /* header and trailer fields together */
#define HTTP_CHUNK_LINE_MAX 1024 /* chunk-size line with its extensions, without CRLF */

enum http_kind {
	HTTP_REQUEST,
	HTTP_RESPONSE,
};

enum http_framing {
	HTTP_BODY_NONE,
	HTTP_BODY_LENGTH,
	HTTP_BODY_CHUNKED,
	HTTP_BODY_CLOSE, /* responses only: the body ends when the connection does */
};

/* Views into the parser's buffer, NUL-terminated, valid until the next
 * http_parser_reset() or http_parser_free(). Values have OWS trimmed. */
struct http_header {
	const char *name;
	const char *value;
	size_t name_len;
	size_t value_len;
};

/* What http_parse() returns when it does not fail. */
enum {
	HTTP_MORE = 0, /* every byte taken, the message goes on */
	HTTP_HEAD = 1, /* the head is complete; the caller may look before the body */
	HTTP_DONE = 2, /* the message is complete; bytes after it are left */
};

/* Receives body bytes, de-chunked, as they are parsed. A negative return
 * stops the parser and http_parse() returns it. */
typedef int (*http_body_fn)(void *ctx, const uint8_t *data, size_t len);

struct http_parser; /* opaque; about 70 KiB, so allocated */

/* Returns a parser the caller owns (http_parser_free), or NULL with errno. */
struct http_parser *http_parser_new(enum http_kind kind);
void http_parser_free(struct http_parser *p);

/* Readies p for the next message on the connection. head_request: the
 * response answers a HEAD, so it carries no body whatever it declares. */
void http_parser_reset(struct http_parser *p, enum http_kind kind, bool head_request);

/* Parses what it can of data[0..len), writing into *consumed how much it
 * took, and hands body bytes to body (which may be NULL to drop them). It
 * stops after the head and after the message. Returns HTTP_MORE, HTTP_HEAD,
 * HTTP_DONE, what body returned, or for a malformed message -EBADMSG (400),
 * -EMSGSIZE (414 or 431) or -EOPNOTSUPP (501); http_error_status() says
 * which status to answer. An error is final: later calls return it again. */
int http_parse(struct http_parser *p, const uint8_t *data, size_t len, size_t *consumed,
	       http_body_fn body, void *ctx);

/* The peer closed. Returns HTTP_DONE when that ends the message (a response
 * read until close, or one already done), -ENODATA when no byte of a next
 * message had come, and -EBADMSG when the message was cut short. */
int http_parse_eof(struct http_parser *p);

/* The status to answer the peer with after an error, 0 if none. */
int http_error_status(const struct http_parser *p);

/* The parsed head; valid once http_parse() returned HTTP_HEAD. Strings are
 * NUL-terminated views into the parser's buffer. */
const char *http_method(const struct http_parser *p); /* requests */
const char *http_target(const struct http_parser *p); /* requests, raw as sent */
int http_status(const struct http_parser *p);	      /* responses */
const char *http_reason(const struct http_parser *p); /* responses, may be "" */
int http_version_minor(const struct http_parser *p);  /* 0 or 1 */
enum http_framing http_framing(const struct http_parser *p);
uint64_t http_content_length(const struct http_parser *p); /* HTTP_BODY_LENGTH */
size_t http_header_count(const struct http_parser *p);
const struct http_header *http_header_at(const struct http_parser *p, size_t i);
/* The first header named name (case-insensitive), or NULL. */
const struct http_header *http_header_find(const struct http_parser *p, const char *name);
/* Trailers of a chunked body; valid once http_parse() returned HTTP_DONE. */
size_t http_trailer_count(const struct http_parser *p);
const struct http_header *http_trailer_at(const struct http_parser *p, size_t i);

/* A provider route's path (what follows the route, from its "/" up to any
 * query) as the broker may forward it: 0, or -EINVAL (answer 400) for an
 * empty segment, a "." or ".." segment raw or decoded once, a segment that
 * decodes to "/", "\", ";" or NUL, a ";" parameter, a "%" without two hex
 * digits, or a byte a path may not carry raw. The query is not examined. */
int http_path_check(const char *raw_path);

/* Whether a capability entry names the call: the method upper case or "*",
 * the path on raw segments before decoding, the query never; a "*" segment
 * matches one non-empty segment, a "**" segment any number, none included;
 * a pattern path of "*" alone matches every path. */
bool http_capability_match(const char *pattern_method, const char *pattern_path, const char *method,
			   const char *raw_path);

/* Headers that ask a server to run a request as another method or at another
 * path; the broker never forwards them. */
bool http_header_is_override(const char *name);

/* Fields of one hop, not of the message (RFC 9110 7.6.1), and the framing
 * fields, which the broker writes anew for every message it passes on. */
bool http_hop_by_hop(const char *name);
/* Whether the broker leaves field name out of an answer it passes on (resp,
 * body: whether it has one): a hop-by-hop field, but for the Content-Length
 * of an answer that declares no body (to a HEAD, a 304). */
bool http_answer_field_dropped(const struct http_parser *resp, const char *name, bool body);
/* Whether an answer carries body bytes. */
bool http_answer_has_body(const struct http_parser *resp);
/* Whether an answer's body comes in a Content-Encoding other than identity,
 * which no scrubber can read. */
bool http_answer_encoded(const struct http_parser *resp);
/* Whether the sender of req wants the connection kept after it. */
bool http_request_keeps(const struct http_parser *req);
/* Whether resp leaves its connection fit for the next request: HTTP/1.1, not
 * read to the connection's end, no "Connection: close". */
bool http_answer_keeps(const struct http_parser *resp);
/* The reason phrase of the broker's own answers with status. */
const char *http_status_text(int status);

#endif
