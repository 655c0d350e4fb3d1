/* Replaces a secret with "[redacted]" in a stream, in linear time: a KMP
 * failure table says how far a partial match falls back, so hostile input
 * cannot make the scan quadratic, and what is held back is always a prefix of
 * the secret, so it needs no buffer of its own. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "broker/scrub.h"

#define OUT_BUF 4096

struct scrub {
	uint8_t *secret;
	size_t len;
	size_t *fail;	/* fail[i]: longest proper border of secret[0..i] */
	size_t matched; /* bytes of the secret held back: secret[0..matched) */
	uint8_t *repl;	/* what each occurrence becomes */
	size_t repl_len;
	int error;	/* the sink's error, final */
	size_t out_len; /* output gathered so the sink sees few large calls */
	uint8_t out[OUT_BUF];
};

typedef int (*emit_fn)(void *ctx, const uint8_t *data, size_t len);

static const uint8_t replacement[] = SCRUB_REPLACEMENT;
#define REPLACEMENT_LEN (sizeof(replacement) - 1)

struct scrub *scrub_new(const uint8_t *secret, size_t len)
{
	/* An occurrence in the output would have to overlap a "[redacted]"
	 * (one inside original bytes is always found): reaching past its start
	 * needs a "[", past its end a "]", and within it a substring of it. */
	if (!len || memchr(secret, '[', len) || memchr(secret, ']', len)) {
		errno = EINVAL;
		return NULL;
	}
	return scrub_new_as(secret, len, replacement, REPLACEMENT_LEN);
}

struct scrub *scrub_new_as(const uint8_t *secret, size_t len, const uint8_t *repl, size_t repl_len)
{
	struct scrub *s;

	if (!len || !repl_len || memmem(repl, repl_len, secret, len)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->secret = malloc(len);
	s->repl = malloc(repl_len);
	s->fail = calloc(len, sizeof(*s->fail));
	if (!s->secret || !s->fail || !s->repl) {
		scrub_free(s);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(s->secret, secret, len);
	s->len = len;
	memcpy(s->repl, repl, repl_len);
	s->repl_len = repl_len;
	for (size_t i = 1, k = 0; i < len; i++) {
		while (k && secret[i] != secret[k])
			k = s->fail[k - 1];
		if (secret[i] == secret[k])
			k++;
		s->fail[i] = k;
	}
	return s;
}

void scrub_free(struct scrub *s)
{
	if (!s)
		return;
	if (s->secret)
		explicit_bzero(s->secret, s->len);
	/* the held bytes are a prefix of the secret */
	explicit_bzero(s->out, sizeof(s->out));
	free(s->secret);
	free(s->repl);
	free(s->fail);
	free(s);
}

/* The scan itself, from the state *matched, emitting through emit. */
static int scrub_run(const struct scrub *s, size_t *matched, const uint8_t *in, size_t n,
		     emit_fn emit, void *ctx)
{
	size_t q = *matched, i = 0;
	int rc = 0;

	while (i < n) {
		if (!q) {
			/* nothing held: skip to the secret's first byte at memchr speed */
			const uint8_t *hit = memchr(in + i, s->secret[0], n - i);
			size_t skip = hit ? (size_t)(hit - (in + i)) : n - i;

			if (skip && (rc = emit(ctx, in + i, skip)))
				break;
			i += skip;
			if (!hit)
				break;
			q = 1;
			i++;
		} else if (in[i] == s->secret[q]) {
			q++;
			i++;
		} else {
			/* fall back to the longest border; the bytes that drop off
			 * the front of the held window are secret[0..q - border) */
			size_t border = s->fail[q - 1];

			if ((rc = emit(ctx, s->secret, q - border)))
				break;
			q = border;
			continue;
		}
		if (q == s->len) {
			q = 0;
			if ((rc = emit(ctx, s->repl, s->repl_len)))
				break;
		}
	}
	*matched = q;
	return rc;
}

struct stream_out {
	struct scrub *s;
	scrub_sink sink;
	void *ctx;
};

static int stream_flush(struct stream_out *o)
{
	int rc = 0;

	if (o->s->out_len)
		rc = o->sink(o->ctx, o->s->out, o->s->out_len);
	o->s->out_len = 0;
	return rc < 0 ? rc : 0;
}

static int stream_emit(void *ctx, const uint8_t *data, size_t len)
{
	struct stream_out *o = ctx;
	struct scrub *s = o->s;
	int rc;

	if (len <= OUT_BUF - s->out_len) {
		memcpy(s->out + s->out_len, data, len);
		s->out_len += len;
		return 0;
	}
	rc = stream_flush(o);
	if (rc)
		return rc;
	if (len <= OUT_BUF) {
		memcpy(s->out, data, len);
		s->out_len = len;
		return 0;
	}
	/* a long clean run goes to the sink straight from the input */
	rc = o->sink(o->ctx, data, len);
	return rc < 0 ? rc : 0;
}

int scrub_feed(struct scrub *s, const uint8_t *in, size_t n, scrub_sink sink, void *ctx)
{
	struct stream_out o = {s, sink, ctx};
	int rc;

	if (s->error)
		return s->error;
	rc = scrub_run(s, &s->matched, in, n, stream_emit, &o);
	if (!rc)
		rc = stream_flush(&o);
	if (rc)
		s->error = rc;
	return rc;
}

int scrub_finish(struct scrub *s, scrub_sink sink, void *ctx)
{
	struct stream_out o = {s, sink, ctx};
	int rc;

	if (s->error)
		return s->error;
	rc = stream_emit(&o, s->secret, s->matched);
	s->matched = 0;
	if (!rc)
		rc = stream_flush(&o);
	if (rc)
		s->error = rc;
	return rc;
}

struct buffer_out {
	uint8_t *out;
	size_t cap, len;
};

static int buffer_emit(void *ctx, const uint8_t *data, size_t len)
{
	struct buffer_out *b = ctx;

	if (b->len < b->cap)
		memcpy(b->out + b->len, data, len < b->cap - b->len ? len : b->cap - b->len);
	b->len += len;
	return 0;
}

size_t scrub_buffer(const struct scrub *s, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	struct buffer_out b = {out, cap, 0};
	size_t q = 0;

	scrub_run(s, &q, in, n, buffer_emit, &b);
	buffer_emit(&b, s->secret, q);
	return b.len;
}
