/* Streaming redaction of one secret (a provider's real key) from what the
 * broker relays back to a session: every occurrence becomes "[redacted]",
 * raw or percent-encoded (each byte raw or %XX, hex of either case), also
 * across the boundaries of the pieces an answer arrives in. A value that
 * holds "%XX" itself is found with those decoded too (up to four of them in
 * any combination, and all at once). */
#ifndef ERRAND_BROKER_SCRUB_H
#define ERRAND_BROKER_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#define SCRUB_REPLACEMENT "[redacted]"

/* Receives scrubbed output in order; a negative return is handed back by the
 * scrub_feed() or scrub_finish() that called it. */
typedef int (*scrub_sink)(void *ctx, const uint8_t *data, size_t len);

struct scrub;

/* A scrubber for secret[0..len), which it copies. Returns one the caller owns
 * (scrub_free), or NULL with errno: EINVAL for an empty secret, or for one
 * that holds "[" or "]" or occurs within "[redacted]" itself, since only such
 * a secret could show up again in the output. */
struct scrub *scrub_new(const uint8_t *secret, size_t len);
/* The same with each occurrence replaced by repl[0..repl_len) (a secret's
 * placeholder): EINVAL when the secret occurs within repl. A secret that
 * holds "%XX" is looked for with some of those decoded too (every
 * combination of the first four, and all at once), each such variant a
 * scrubber chained after its own: EINVAL as well when a variant occurs
 * within repl or holds "[" or "]". */
struct scrub *scrub_new_as(const uint8_t *secret, size_t len, const uint8_t *repl, size_t repl_len);
/* The k-th variant of secret (k from 1) that scrub_new_as looks for, into
 * out (len bytes): its length, 0 past the last (at once for a secret with no
 * "%XX"). */
size_t scrub_variant(const uint8_t *secret, size_t len, unsigned k, uint8_t *out);
/* NULL-safe; wipes the copy of the secret. */
void scrub_free(struct scrub *s);

/* Scrubs in[0..n) into sink. Up to 3 * len - 1 bytes that could begin the
 * secret (in some encoding) are held until the next feed or scrub_finish();
 * len - 1 when the input holds no "%" (and as much again in each variant's
 * scrubber). Returns 0, or the sink's error, after which s only returns
 * that error. */
int scrub_feed(struct scrub *s, const uint8_t *in, size_t n, scrub_sink sink, void *ctx);

/* The stream ended: the held bytes go out. s is ready for a new stream. */
int scrub_finish(struct scrub *s, scrub_sink sink, void *ctx);

/* Scrubs one whole buffer (a header value), independent of any stream fed to
 * s (it uses scratch of its own in s, hence not const). Writes at most cap bytes to out and returns
 * the scrubbed length, which is more than cap when out was too small, as snprintf does;
 * SIZE_MAX, with nothing written, when a secret with variants finds no memory for their pass. */
size_t scrub_buffer(struct scrub *s, const uint8_t *in, size_t n, uint8_t *out, size_t cap);

/* The comparisons the stream's matchers have made since scrub_new(): at most
 * 8 a byte fed, whatever the input (for tests of the scan's linear time; the
 * secret's own scrubber's, not its variants'). */
uint64_t scrub_steps(const struct scrub *s);

#endif
