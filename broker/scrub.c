/* Replaces a secret with "[redacted]" in a stream, however the stream
 * percent-encodes it: each byte of the value raw or as %XX, hex of either
 * case, and its ASCII letters in either case. One pass in linear time, with
 * KMP failure tables, so hostile input cannot make the scan quadratic; the
 * bytes that turn out not to be the secret go on exactly as they came.
 *
 * The input is read as tokens: "%XX" with two hex digits is one token (its
 * decoded byte), any other byte one token (itself), cut from the left. Four
 * matchers run over it:
 *  - raw: the secret's own bytes, byte by byte (a value holding '%' is
 *    found this way, and any match inside a token's bytes);
 *  - decoded: the secret over the tokens' decoded bytes, so each of its
 *    bytes may be raw or %XX of any case;
 *  - tail 1 and tail 2: a match that begins inside a "%XX" token, its first
 *    byte (or two) being that token's last hex digit (or two), read raw, and
 *    the rest over decoded tokens. Such a match may begin only right after
 *    such a token: a mark says where, and the KMP fall-back skips a border
 *    that does not begin at a mark (still amortised linear).
 * The first match to end wins (the longest of those ending together); then
 * all four start afresh after it. Held input is no longer a prefix of the
 * secret, so it is kept: at most 3 * len - 1 bytes (len - 1 tokens of up to
 * three bytes, and a "%" or "%X" that may begin the next).
 *
 * A value that holds "%XX" itself (a '%' and two hex digits) read back with
 * those three bytes raw and others encoded is cut into tokens otherwise: its
 * "%XX" becomes one decoded byte. So such a value has variants, each with
 * some of its "%XX" decoded (all of them for the first SCRUB_VARIANT_BITS,
 * and all decoded at once beyond), each a scrubber of its own chained after
 * it: what one passes on, the next reads. A value with a variant the
 * replacement holds, or one with a bracket, is refused as a value the
 * replacement holds is. Decoded forms are redacted wherever they come,
 * even where the host wrote them for another reason. Not found: a value
 * with more than four "%XX", echoed with some of those past the fourth
 * bare and others encoded; one that ends in "%" or "%X" echoed with hex
 * digits right after it. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "broker/scrub.h"
#include "lib/util.h"

#define OUT_BUF 4096

/* Where one scan stands: the stream's own, or scrub_buffer()'s scratch.
 * Offsets count bytes from the start of the stream. */
struct scan {
	uint64_t base;	  /* first byte not yet sent on */
	uint64_t tok_end; /* end of the last token read; the pending bytes follow */
	uint64_t ntok;	  /* tokens read */
	uint64_t *tokoff; /* tokoff[i % win]: where token i began */
	uint8_t *mark;	  /* mark[i % win]: bit c set when a tail-c match may begin at token i */
	uint8_t pend[3];  /* bytes not yet a token: "%" or "%X" (or what a match left) */
	size_t np;
	size_t q_raw; /* secret[0..q_raw) matched by the last raw bytes */
	size_t q[3];  /* q[c]: secret[c..c + q[c]) matched by the last tokens */
	size_t matches;
	uint64_t steps; /* the matchers' comparisons, for scrub_steps() */
};

struct scrub {
	struct scrub *next; /* a variant of the value, reading this one's output */
	uint8_t *secret;
	size_t len;
	uint32_t *fail[3]; /* fail[c][i]: longest proper border of secret[c..c + i] */
	bool tail[3];	   /* tail[c]: a match may begin with c hex digits of a token */
	bool lead[256];	   /* bytes that may begin a match: the rest is passed fast */
	size_t win;	   /* len + 1 tokens of history */
	uint8_t *repl;	   /* what each occurrence becomes */
	size_t repl_len;
	int error; /* the sink's error, final */
	struct scan stream, scratch;
	uint8_t *held; /* the stream's held bytes, at held[offset % held_cap] */
	size_t held_cap;
	size_t out_len; /* output gathered so the sink sees few large calls */
	uint8_t out[OUT_BUF];
};

typedef int (*emit_fn)(void *ctx, const uint8_t *data, size_t len);

/* One scan over one piece of input; bytes before in_start are in held. */
struct pass {
	struct scrub *s;
	struct scan *sc;
	const uint8_t *in;
	uint64_t in_start;
	emit_fn emit;
	void *ctx;
};

static const uint8_t replacement[] = SCRUB_REPLACEMENT;
#define REPLACEMENT_LEN (sizeof(replacement) - 1)

static uint32_t *fail_table(const uint8_t *p, size_t len)
{
	uint32_t *f = calloc(len, sizeof(*f));

	if (!f)
		return NULL;
	for (size_t i = 1, k = 0; i < len; i++) {
		while (k && p[i] != p[k])
			k = f[k - 1];
		if (p[i] == p[k])
			k++;
		f[i] = (uint32_t)k;
	}
	return f;
}

static int scan_init(struct scan *sc, size_t win)
{
	sc->tokoff = calloc(win, sizeof(*sc->tokoff));
	sc->mark = calloc(win, 1);
	return sc->tokoff && sc->mark ? 0 : -ENOMEM;
}

static void scan_reset(struct scan *sc, size_t win)
{
	memset(sc->mark, 0, win);
	explicit_bzero(sc->pend, sizeof(sc->pend));
	sc->base = sc->tok_end = sc->ntok = 0;
	sc->np = sc->q_raw = sc->matches = 0;
	memset(sc->q, 0, sizeof(sc->q));
}

static bool finds(struct scrub *s, const uint8_t *in, size_t n);

/* ASCII letters compare without their case: a host that echoes a key in
 * upper case (a hex token, a header value) still echoes the key. */
static uint8_t fold(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + ('a' - 'A')) : c;
}

struct scrub *scrub_new(const uint8_t *secret, size_t len)
{
	/* An occurrence in the output would have to overlap a "[redacted]"
	 * (one inside original bytes is always found): reaching past its start
	 * needs a "[", past its end a "]" (neither is a hex digit or "%", so
	 * neither hides in a "%XX"), and within it a substring of it. */
	if (!len || memchr(secret, '[', len) || memchr(secret, ']', len)) {
		errno = EINVAL;
		return NULL;
	}
	return scrub_new_as(secret, len, replacement, REPLACEMENT_LEN);
}

/* One scrubber, for secret alone. */
static struct scrub *scrub_make(const uint8_t *secret, size_t len, const uint8_t *repl,
				size_t repl_len)
{
	struct scrub *s;

	if (!len || !repl_len || len > UINT32_MAX / 3) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->len = len;
	s->win = len + 1;
	s->held_cap = 3 * len;
	s->secret = malloc(len);
	s->repl = malloc(repl_len);
	s->held = malloc(s->held_cap);
	for (size_t i = 0; s->secret && i < len; i++)
		s->secret[i] = fold(secret[i]);
	s->fail[0] = s->secret ? fail_table(s->secret, len) : NULL;
	/* a tail match needs at least one decoded token after the digits;
	 * shorter ones lie within a token's bytes, where the raw matcher sees
	 * them */
	for (size_t c = 1; c <= 2 && s->secret; c++) {
		s->tail[c] = len > c && hex_value(secret[c - 1]) >= 0 && hex_value(secret[0]) >= 0;
		if (s->tail[c])
			s->fail[c] = fail_table(s->secret + c, len - c);
	}
	if (!s->secret || !s->repl || !s->held || !s->fail[0] || (s->tail[1] && !s->fail[1]) ||
	    (s->tail[2] && !s->fail[2]) || scan_init(&s->stream, s->win) ||
	    scan_init(&s->scratch, s->win)) {
		scrub_free(s);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(s->repl, repl, repl_len);
	s->repl_len = repl_len;
	s->lead[s->secret[0]] = true;
	s->lead[s->secret[0] >= 'a' && s->secret[0] <= 'z' ? s->secret[0] - ('a' - 'A')
							   : s->secret[0]] = true;
	s->lead['%'] = true;
	if (finds(s, repl, repl_len)) {
		scrub_free(s);
		errno = EINVAL;
		return NULL;
	}
	return s;
}

#define SCRUB_VARIANT_BITS 4

/* Whether secret[i..] begins with "%XX". */
static bool percent_here(const uint8_t *secret, size_t len, size_t i)
{
	return i + 2 < len && secret[i] == '%' && hex_value(secret[i + 1]) >= 0 &&
	       hex_value(secret[i + 2]) >= 0;
}

/* secret with its k-th "%XX" (from the left, as tokens are cut) decoded
 * where bit k of mask is set, or every one with all, into v: its length,
 * and in *n the number of "%XX" it holds. */
static size_t variant(const uint8_t *secret, size_t len, unsigned mask, bool all, uint8_t *v,
		      size_t *n)
{
	size_t o = 0, k = 0;

	for (size_t i = 0; i < len; i++) {
		if (!percent_here(secret, len, i)) {
			v[o++] = secret[i];
			continue;
		}
		if (all || (k < SCRUB_VARIANT_BITS && (mask >> k & 1))) {
			v[o++] =
				(uint8_t)(hex_value(secret[i + 1]) << 4 | hex_value(secret[i + 2]));
		} else {
			memcpy(v + o, secret + i, 3);
			o += 3;
		}
		i += 2;
		k++;
	}
	*n = k;
	return o;
}

size_t scrub_variant(const uint8_t *secret, size_t len, unsigned k, uint8_t *out)
{
	size_t n_at, bits;

	variant(secret, len, 0, false, out, &n_at);
	bits = n_at < SCRUB_VARIANT_BITS ? n_at : SCRUB_VARIANT_BITS;
	/* each subset of the first bits, then (more of them) all at once */
	if (!n_at || k < 1 || k > (1u << bits) - (n_at > SCRUB_VARIANT_BITS ? 0 : 1))
		return 0;
	return variant(secret, len, k, k == 1u << bits, out, &n_at);
}

struct scrub *scrub_new_as(const uint8_t *secret, size_t len, const uint8_t *repl, size_t repl_len)
{
	struct scrub *s = scrub_make(secret, len, repl, repl_len), **tail;
	size_t vlen;
	uint8_t *v;

	/* variants come only from a %XX in the value */
	if (!s || !memchr(secret, '%', len))
		return s;
	v = malloc(len);
	if (!v) {
		scrub_free(s);
		errno = ENOMEM;
		return NULL;
	}
	tail = &s->next;
	for (unsigned k = 1; (vlen = scrub_variant(secret, len, k, v)); k++) {
		/* a variant the replacement holds could not be redacted, nor one
		 * with a bracket, which could match across a "[redacted]" */
		if (memchr(v, '[', vlen) || memchr(v, ']', vlen))
			*tail = NULL, errno = EINVAL;
		else
			*tail = scrub_make(v, vlen, repl, repl_len);
		if (!*tail) {
			int e = errno;

			explicit_bzero(v, len);
			free(v);
			scrub_free(s);
			errno = e;
			return NULL;
		}
		tail = &(*tail)->next;
	}
	explicit_bzero(v, len);
	free(v);
	return s;
}

void scrub_free(struct scrub *s)
{
	if (!s)
		return;
	scrub_free(s->next);
	if (s->secret)
		explicit_bzero(s->secret, s->len);
	/* the held bytes may be most of the secret */
	if (s->held)
		explicit_bzero(s->held, s->held_cap);
	explicit_bzero(s->out, sizeof(s->out));
	explicit_bzero(s->stream.pend, sizeof(s->stream.pend));
	explicit_bzero(s->scratch.pend, sizeof(s->scratch.pend));
	/* what the secret's borders and first byte say of it */
	explicit_bzero(s->lead, sizeof(s->lead));
	for (size_t c = 0; c < 3; c++)
		if (s->fail[c])
			explicit_bzero(s->fail[c], (s->len - c) * sizeof(*s->fail[c]));
	free(s->secret);
	free(s->repl);
	free(s->held);
	for (size_t c = 0; c < 3; c++)
		free(s->fail[c]);
	free(s->stream.tokoff);
	free(s->stream.mark);
	free(s->scratch.tokoff);
	free(s->scratch.mark);
	free(s);
}

/* Input [a, b) to the emitter: what came before this piece from held. */
static int emit_range(const struct pass *p, uint64_t a, uint64_t b)
{
	const struct scrub *s = p->s;
	int rc;

	while (a < b && a < p->in_start) {
		size_t at = (size_t)(a % s->held_cap);
		uint64_t end = b < p->in_start ? b : p->in_start;
		size_t n = end - a < s->held_cap - at ? (size_t)(end - a) : s->held_cap - at;

		if ((rc = p->emit(p->ctx, s->held + at, n)))
			return rc;
		a += n;
	}
	if (a < b)
		return p->emit(p->ctx, p->in + (a - p->in_start), (size_t)(b - a));
	return 0;
}

/* A match of [start, end): what precedes it goes on, it becomes the
 * replacement, and every matcher begins afresh at end. */
static int matched(const struct pass *p, uint64_t start, uint64_t end)
{
	struct scan *sc = p->sc;
	int rc = emit_range(p, sc->base, start);

	if (!rc)
		rc = p->emit(p->ctx, p->s->repl, p->s->repl_len);
	sc->base = end;
	sc->q_raw = 0;
	memset(sc->q, 0, sizeof(sc->q));
	sc->mark[sc->ntok % p->s->win] = 0;
	sc->matches++;
	return rc;
}

static size_t kmp_step(struct scan *sc, const uint8_t *pat, const uint32_t *fail, size_t q,
		       uint8_t c)
{
	sc->steps++;
	while (q && pat[q] != c) {
		q = fail[q - 1];
		sc->steps++;
	}
	return q + (pat[q] == c);
}

/* One token bytes[0..len) decoded to d, at sc->tok_end. A raw match that
 * ends inside it gives its remaining bytes back to the pending ones. */
static int token(const struct pass *p, const uint8_t *bytes, size_t len, uint8_t d)
{
	const struct scrub *s = p->s;
	struct scan *sc = p->sc;
	uint64_t t0 = sc->tok_end, t1 = t0 + len, start = UINT64_MAX;
	size_t win = s->win, L = s->len;

	for (size_t k = 0; k < len; k++) {
		sc->q_raw = kmp_step(sc, s->secret, s->fail[0], sc->q_raw, fold(bytes[k]));
		if (sc->q_raw < L)
			continue;
		if (k + 1 == len) {
			start = t1 - L; /* the tokens' matchers may end here too */
			break;
		}
		/* inside a "%XX": its hex digits left are read again */
		memmove(sc->pend + (len - k - 1), sc->pend, sc->np);
		memcpy(sc->pend, bytes + k + 1, len - k - 1);
		sc->np += len - k - 1;
		sc->tok_end = t0 + k + 1;
		return matched(p, t0 + k + 1 - L, t0 + k + 1);
	}
	d = fold(d);
	sc->tokoff[sc->ntok % win] = t0;
	sc->q[0] = kmp_step(sc, s->secret, s->fail[0], sc->q[0], d);
	if (sc->q[0] == L && sc->tokoff[(sc->ntok + 1 - L) % win] < start)
		start = sc->tokoff[(sc->ntok + 1 - L) % win];
	for (size_t c = 1; c <= 2; c++) {
		const uint8_t *pat = s->secret + c;
		size_t q = sc->q[c], n = L - c;

		if (!s->tail[c])
			continue;
		/* only a state whose first token follows a mark is one */
		sc->steps++;
		while (q && (pat[q] != d || !(sc->mark[(sc->ntok - q) % win] & (1 << c)))) {
			q = s->fail[c][q - 1];
			sc->steps++;
		}
		if (q)
			q++;
		else
			q = pat[0] == d && (sc->mark[sc->ntok % win] & (1 << c));
		sc->q[c] = q;
		if (q == n && sc->tokoff[(sc->ntok + 1 - n) % win] - c < start)
			start = sc->tokoff[(sc->ntok + 1 - n) % win] - c;
	}
	sc->ntok++;
	sc->tok_end = t1;
	if (start != UINT64_MAX)
		return matched(p, start, t1);
	sc->mark[sc->ntok % win] = 0;
	if (len == 3)
		for (size_t c = 1; c <= 2; c++)
			if (s->tail[c] && fold(bytes[3 - c]) == s->secret[0] &&
			    (c == 1 || fold(bytes[2]) == s->secret[1]))
				sc->mark[sc->ntok % win] |= (uint8_t)(1 << c);
	return 0;
}

/* The pending bytes cut into tokens, as far as they can be; at the end
 * (final) a "%" or "%X" left is bytes of its own. */
static int tokens(const struct pass *p, bool final)
{
	struct scan *sc = p->sc;
	int rc = 0;

	while (sc->np && !rc) {
		uint8_t b[3];
		size_t len = 1;
		uint8_t d = sc->pend[0];

		if (d == '%' && (sc->np < 2 || hex_value(sc->pend[1]) >= 0) &&
		    (sc->np < 3 || hex_value(sc->pend[2]) >= 0)) {
			if (sc->np < 3 && !final)
				break;
			if (sc->np == 3) {
				len = 3;
				d = (uint8_t)(hex_value(sc->pend[1]) << 4 | hex_value(sc->pend[2]));
			}
		}
		memcpy(b, sc->pend, len);
		sc->np -= len;
		memmove(sc->pend, sc->pend + len, sc->np);
		rc = token(p, b, len, d);
	}
	return rc;
}

static bool idle(const struct scrub *s, const struct scan *sc)
{
	return !sc->np && !sc->q_raw && !sc->q[0] && !sc->q[1] && !sc->q[2] &&
	       !sc->mark[sc->ntok % s->win];
}

/* The scan of one piece, from the state p->sc. */
static int scan_run(const struct pass *p, size_t n)
{
	const struct scrub *s = p->s;
	struct scan *sc = p->sc;
	size_t i = 0;
	int rc = 0;

	while (i < n && !rc) {
		if (idle(s, sc)) {
			/* nothing held: skip what cannot begin a match */
			while (i < n && !s->lead[p->in[i]])
				i++;
			sc->tok_end = p->in_start + i;
			if (i == n)
				break;
		}
		sc->pend[sc->np++] = p->in[i++];
		rc = tokens(p, false);
	}
	return rc;
}

/* Where the earliest match still possible begins: what precedes goes on. */
static uint64_t scan_safe(const struct scrub *s, const struct scan *sc)
{
	uint64_t safe = sc->tok_end, at;

	if (sc->q_raw && sc->tok_end - sc->q_raw < safe)
		safe = sc->tok_end - sc->q_raw;
	if (sc->q[0] && (at = sc->tokoff[(sc->ntok - sc->q[0]) % s->win]) < safe)
		safe = at;
	for (size_t c = 1; c <= 2; c++) {
		if (sc->q[c])
			at = sc->tokoff[(sc->ntok - sc->q[c]) % s->win] - c;
		else if (sc->mark[sc->ntok % s->win] & (1 << c))
			at = sc->tok_end - c;
		else
			continue;
		if (at < safe)
			safe = at;
	}
	return safe;
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

static int feed_one(struct scrub *s, const uint8_t *in, size_t n, scrub_sink sink, void *ctx)
{
	struct stream_out o = {s, sink, ctx};
	struct scan *sc = &s->stream;
	uint64_t start = sc->tok_end + sc->np, end = start + n, safe, from;
	struct pass p = {s, sc, in, start, stream_emit, &o};
	int rc;

	if (s->error)
		return s->error;
	rc = scan_run(&p, n);
	if (!rc) {
		safe = scan_safe(s, sc);
		rc = emit_range(&p, sc->base, safe);
		sc->base = safe;
	}
	/* keep what is held and came in this piece (at most 3 * len - 1
	 * bytes are held, so nothing still needed is written over) */
	for (from = sc->base > start ? sc->base : start; !rc && from < end;) {
		size_t at = (size_t)(from % s->held_cap);
		size_t k = end - from < s->held_cap - at ? (size_t)(end - from) : s->held_cap - at;

		memcpy(s->held + at, in + (from - start), k);
		from += k;
	}
	if (!rc)
		rc = stream_flush(&o);
	if (rc)
		s->error = rc;
	return rc;
}

/* The end of a scan: the pending bytes read, all that is held goes on. */
static int scan_end(const struct pass *p, uint64_t end)
{
	int rc = tokens(p, true);

	return rc ? rc : emit_range(p, p->sc->base, end);
}

static int finish_one(struct scrub *s, scrub_sink sink, void *ctx)
{
	struct stream_out o = {s, sink, ctx};
	struct scan *sc = &s->stream;
	uint64_t end = sc->tok_end + sc->np;
	struct pass p = {s, sc, NULL, end, stream_emit, &o};
	int rc;

	if (s->error)
		return s->error;
	rc = scan_end(&p, end);
	scan_reset(sc, s->win);
	explicit_bzero(s->held, s->held_cap);
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

static size_t buffer_scan(struct scrub *s, const uint8_t *in, size_t n, struct buffer_out *b)
{
	struct scan *sc = &s->scratch;
	struct pass p = {s, sc, in, 0, buffer_emit, b};
	size_t found;

	scan_reset(sc, s->win);
	scan_run(&p, n);
	scan_end(&p, n);
	found = sc->matches;
	scan_reset(sc, s->win);
	return found;
}

uint64_t scrub_steps(const struct scrub *s)
{
	return s->stream.steps;
}

static size_t buffer_one(struct scrub *s, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	struct buffer_out b = {out, cap, 0};

	buffer_scan(s, in, n, &b);
	return b.len;
}

/* What a scrubber passes on goes to the next, a variant of its value. */
struct forward {
	struct scrub *next;
	scrub_sink sink;
	void *ctx;
};

static int forward_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct forward *f = ctx;

	return scrub_feed(f->next, data, len, f->sink, f->ctx);
}

int scrub_feed(struct scrub *s, const uint8_t *in, size_t n, scrub_sink sink, void *ctx)
{
	struct forward f = {s->next, sink, ctx};

	return s->next ? feed_one(s, in, n, forward_sink, &f) : feed_one(s, in, n, sink, ctx);
}

int scrub_finish(struct scrub *s, scrub_sink sink, void *ctx)
{
	struct forward f = {s->next, sink, ctx};
	int rc;

	if (!s->next)
		return finish_one(s, sink, ctx);
	rc = finish_one(s, forward_sink, &f);
	if (!rc && (rc = scrub_finish(s->next, sink, ctx)))
		s->error = rc; /* the sink's, final for the whole chain */
	return rc;
}

size_t scrub_buffer(struct scrub *s, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	size_t len, got;
	uint8_t *mid;

	if (!s->next)
		return buffer_one(s, in, n, out, cap);
	/* through each variant in turn; with no memory for that, SIZE_MAX */
	len = buffer_one(s, in, n, NULL, 0);
	mid = malloc(len ? len : 1);
	if (!mid)
		return SIZE_MAX;
	buffer_one(s, in, n, mid, len);
	got = scrub_buffer(s->next, mid, len, out, cap);
	explicit_bzero(mid, len);
	free(mid);
	return got;
}

/* Whether in[0..n) holds the secret in any encoding. */
static bool finds(struct scrub *s, const uint8_t *in, size_t n)
{
	struct buffer_out b = {NULL, 0, 0};

	return buffer_scan(s, in, n, &b) != 0;
}
