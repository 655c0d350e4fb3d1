/* Streaming replacement of byte strings; see replace.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/replace.h"

struct pattern {
	uint8_t *from, *to;
	size_t from_len, to_len;
	bool pct; /* the bytes after each '%' are hex digits of either case */
};

struct replacer {
	struct pattern pats[REPLACE_PATTERNS_MAX];
	size_t n, longest, chunk;
	bool first[256]; /* bytes some value begins with: the rest is passed fast */
	uint8_t *work;	 /* held bytes, then the piece: longest - 1 + chunk */
	size_t held;
};

struct replacer *replacer_new(size_t chunk)
{
	struct replacer *r;

	if (!chunk) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (r)
		r->chunk = chunk;
	return r;
}

void replacer_free(struct replacer *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		explicit_bzero(r->pats[i].from, r->pats[i].from_len);
		free(r->pats[i].from);
		free(r->pats[i].to);
	}
	if (r->work)
		explicit_bzero(r->work, r->longest - 1 + r->chunk);
	free(r->work);
	free(r);
}

static int pattern_add(struct replacer *r, uint8_t *from, size_t from_len, const void *to,
		       size_t to_len, bool pct)
{
	struct pattern *p = &r->pats[r->n];

	if (r->n == REPLACE_PATTERNS_MAX) {
		explicit_bzero(from, from_len);
		free(from);
		return -E2BIG;
	}
	p->to = malloc(to_len ? to_len : 1);
	if (!p->to) {
		explicit_bzero(from, from_len);
		free(from);
		return -ENOMEM;
	}
	if (from_len > r->longest) {
		uint8_t *w = malloc(from_len - 1 + r->chunk);

		if (!w) {
			explicit_bzero(from, from_len);
			free(from);
			free(p->to);
			return -ENOMEM;
		}
		/* nothing is held between streams' setup and their first feed */
		if (r->work) {
			memcpy(w, r->work, r->held);
			explicit_bzero(r->work, r->longest - 1 + r->chunk);
			free(r->work);
		}
		r->work = w;
		r->longest = from_len;
	}
	memcpy(p->to, to, to_len);
	p->from = from;
	p->from_len = from_len;
	p->to_len = to_len;
	p->pct = pct;
	r->first[from[0]] = true;
	r->n++;
	return 0;
}

static bool unreserved(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

int replacer_add(struct replacer *r, const void *from, size_t from_len, const void *to,
		 size_t to_len, unsigned int flags)
{
	static const char hex[] = "0123456789ABCDEF";
	const uint8_t *f = from;
	uint8_t *raw, *enc;
	size_t n = 0;
	int rc;

	if (!from_len)
		return -EINVAL;
	raw = malloc(from_len);
	if (!raw)
		return -ENOMEM;
	memcpy(raw, from, from_len);
	if ((rc = pattern_add(r, raw, from_len, to, to_len, false)))
		return rc;
	if (!(flags & REPLACE_PCT))
		return 0;
	enc = malloc(3 * from_len);
	if (!enc)
		return -ENOMEM;
	for (size_t i = 0; i < from_len; i++) {
		if (unreserved(f[i])) {
			enc[n++] = f[i];
		} else {
			enc[n++] = '%';
			enc[n++] = (uint8_t)hex[f[i] >> 4];
			enc[n++] = (uint8_t)hex[f[i] & 15];
		}
	}
	/* A value of unreserved bytes only is its own encoding. */
	if (n == from_len) {
		explicit_bzero(enc, 3 * from_len);
		free(enc);
		return 0;
	}
	return pattern_add(r, enc, n, to, to_len, true);
}

size_t replacer_count(const struct replacer *r)
{
	return r->n;
}

size_t replacer_lookbehind(const struct replacer *r)
{
	return r->longest ? r->longest - 1 : 0;
}

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

/* Whether d[0..n) equals the pattern's first n bytes. */
static bool pattern_eq(const struct pattern *p, const uint8_t *d, size_t n)
{
	if (!p->pct)
		return !memcmp(d, p->from, n);
	for (size_t j = 0; j < n; j++) {
		/* an encoded value's '%' is always an escape: two hex digits follow */
		bool hexdigit =
			(j >= 1 && p->from[j - 1] == '%') || (j >= 2 && p->from[j - 2] == '%');

		if (hexdigit ? lower(d[j]) != lower(p->from[j]) : d[j] != p->from[j])
			return false;
	}
	return true;
}

/* Replaces in work[0..len) up to where a value might continue past the end
 * (unless last), which is kept held. */
static int scan(struct replacer *r, size_t len, bool last, replace_sink sink, void *ctx)
{
	const uint8_t *d = r->work;
	size_t i = 0, run = 0;
	int rc;

	while (i < len) {
		const struct pattern *best = NULL;
		bool partial = false;

		if (!r->first[d[i]]) {
			i++;
			continue;
		}
		for (size_t k = 0; k < r->n; k++) {
			const struct pattern *p = &r->pats[k];

			if (p->from_len <= len - i) {
				if ((!best || p->from_len > best->from_len) &&
				    pattern_eq(p, d + i, p->from_len))
					best = p;
			} else if (!last && pattern_eq(p, d + i, len - i)) {
				/* a longer value may still match here */
				partial = true;
				break;
			}
		}
		if (partial)
			break;
		if (!best) {
			i++;
			continue;
		}
		if (i > run && (rc = sink(ctx, d + run, i - run)))
			return rc;
		if (best->to_len && (rc = sink(ctx, best->to, best->to_len)))
			return rc;
		i += best->from_len;
		run = i;
	}
	if (i > run && (rc = sink(ctx, d + run, i - run)))
		return rc;
	/* i > len - longest when something is held: it fits before the piece */
	r->held = len - i;
	memmove(r->work, d + i, r->held);
	return 0;
}

int replacer_feed(struct replacer *r, const void *in, size_t n, replace_sink sink, void *ctx)
{
	const uint8_t *p = in;
	int rc;

	if (!r->n)
		return n ? sink(ctx, p, n) : 0;
	while (n) {
		size_t piece = n < r->chunk ? n : r->chunk;

		memcpy(r->work + r->held, p, piece);
		if ((rc = scan(r, r->held + piece, false, sink, ctx)))
			return rc;
		p += piece;
		n -= piece;
	}
	return 0;
}

int replacer_finish(struct replacer *r, replace_sink sink, void *ctx)
{
	int rc;

	if (!r->n || !r->held)
		return 0;
	rc = scan(r, r->held, true, sink, ctx);
	explicit_bzero(r->work, r->longest - 1 + r->chunk);
	r->held = 0;
	return rc;
}
