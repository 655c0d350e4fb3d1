/* Streaming replacement of byte strings (a secret's value by its placeholder)
 * in a stream that arrives in pieces: a value split between two pieces is
 * still replaced, and only the bytes that could begin a value are held back
 * (at most the longest value less one byte) until the next piece or the end.
 * Once made, a replacer allocates nothing: it may run in a process forked
 * from a threaded one. */
#ifndef ERRAND_LIB_REPLACE_H
#define ERRAND_LIB_REPLACE_H

#include <stddef.h>
#include <stdint.h>

#define REPLACE_PATTERNS_MAX 128
#define REPLACE_PCT 1u /* also the value percent-encoded, hex digits of either case */

/* Receives the replaced stream in order; a negative return stops the feed and
 * is handed back by it. */
typedef int (*replace_sink)(void *ctx, const uint8_t *data, size_t len);

struct replacer;

/* An empty replacer that takes pieces of up to chunk bytes at a time (larger
 * ones are cut). The caller owns it (replacer_free), or NULL with errno. */
struct replacer *replacer_new(size_t chunk);
/* NULL-safe; wipes the values and what is held. */
void replacer_free(struct replacer *r);
/* Replaces from[0..from_len) by to[0..to_len) from now on; with REPLACE_PCT,
 * its percent-encoded form (RFC 3986 unreserved bytes kept) as well. Where
 * several values match at one place, the longest wins. 0, or -EINVAL (an
 * empty value), -E2BIG (past REPLACE_PATTERNS_MAX), -ENOMEM. */
int replacer_add(struct replacer *r, const void *from, size_t from_len, const void *to,
		 size_t to_len, unsigned int flags);
/* How many values it replaces (each form counts). */
size_t replacer_count(const struct replacer *r);
/* The bytes it may hold back at most: the longest value less one. */
size_t replacer_lookbehind(const struct replacer *r);

/* Replaces in in[0..n) and what was held into sink. 0 or the sink's error. */
int replacer_feed(struct replacer *r, const void *in, size_t n, replace_sink sink, void *ctx);
/* The stream ended: what was held goes out, replaced where it matches. The
 * replacer is ready for a new stream. 0 or the sink's error. */
int replacer_finish(struct replacer *r, replace_sink sink, void *ctx);

#endif
