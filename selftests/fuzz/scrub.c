/* libFuzzer target for the broker's key scrubber (broker/scrub.c): a secret
 * and an input from the fuzzer, the input fed in pieces it chooses; the
 * output must equal scrub_buffer()'s, never hold the key raw, equal a plain
 * whole-buffer replacement (of the key, then of its variants with its own
 * "%XX" decoded) where the input holds no "%", and where the secret holds
 * none, equal a brute-force replacement of every encoding of it. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/scrub.h"
#include "selftests/fuzz/fuzz.h"

struct out {
	uint8_t *b;
	size_t len, cap;
};

static int out_take(void *ctx, const uint8_t *d, size_t n)
{
	struct out *o = ctx;

	INV(o->len + n <= o->cap);
	memcpy(o->b + o->len, d, n);
	o->len += n;
	return 0;
}

/* ASCII letters without their case, as the scrubber compares. */
static uint8_t fold(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + ('a' - 'A')) : c;
}

static bool same(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fold(a[i]) != fold(b[i]))
			return false;
	return true;
}

/* Whether hay[0..n) holds needle[0..len), letters in any case. */
static bool within(const uint8_t *hay, size_t n, const uint8_t *needle, size_t len)
{
	for (size_t i = 0; i + len <= n; i++)
		if (same(hay + i, needle, len))
			return true;
	return false;
}

static size_t reference(const uint8_t *sec, size_t slen, const uint8_t *in, size_t n, uint8_t *out)
{
	const size_t rlen = strlen(SCRUB_REPLACEMENT);
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		if (n - i >= slen && same(in + i, sec, slen)) {
			memcpy(out + o, SCRUB_REPLACEMENT, rlen);
			o += rlen;
			i += slen;
		} else {
			out[o++] = in[i++];
		}
	}
	return o;
}

static int hex_of(uint8_t c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Whether b[0..n) is exactly v[0..len) with each byte raw or %XX. */
static int is_encoding(const uint8_t *b, size_t n, const uint8_t *v, size_t len)
{
	for (; len && n; v++, len--) {
		if (fold(b[0]) == fold(v[0])) { /* v holds no '%': the raw byte is the only way */
			b++, n--;
		} else if (n >= 3 && b[0] == '%' && hex_of(b[1]) >= 0 && hex_of(b[2]) >= 0 &&
			   fold((uint8_t)(hex_of(b[1]) << 4 | hex_of(b[2]))) == fold(v[0])) {
			b += 3, n -= 3;
		} else {
			return 0;
		}
	}
	return !len && !n;
}

/* The match that ends first (the longest of those ending together) is
 * replaced, and the search goes on after it. */
static size_t reference_enc(const uint8_t *v, size_t len, const uint8_t *in, size_t n, uint8_t *out)
{
	const size_t rlen = strlen(SCRUB_REPLACEMENT);
	size_t base = 0, o = 0;

	for (size_t e = 1; e <= n; e++)
		for (size_t st = e >= 3 * len && e - 3 * len > base ? e - 3 * len : base;
		     st + len <= e; st++) {
			if (!is_encoding(in + st, e - st, v, len))
				continue;
			memcpy(out + o, in + base, st - base);
			o += st - base;
			memcpy(out + o, SCRUB_REPLACEMENT, rlen);
			o += rlen;
			base = e;
			break;
		}
	memcpy(out + o, in + base, n - base);
	return o + n - base;
}

/* Whether v[i..] begins with "%XX". */
static bool pct_at(const uint8_t *v, size_t len, size_t i)
{
	return i + 2 < len && v[i] == '%' && hex_of(v[i + 1]) >= 0 && hex_of(v[i + 2]) >= 0;
}

/* The value's variants, as broker/scrub.c makes them: its "%XX" (from the
 * left) decoded, each subset of the first four, then all at once where it
 * holds more. Their number (up to 16), each in v[k][0..len[k]). */
static size_t variants(const uint8_t *sec, size_t slen, uint8_t v[16][64], size_t len[16])
{
	size_t k = 0, bits, nv = 0;

	for (size_t i = 0; i < slen; i++)
		if (pct_at(sec, slen, i))
			k++, i += 2;
	bits = k < 4 ? k : 4;
	for (unsigned mask = 1; k && mask <= (1u << bits) - (k > 4 ? 0 : 1); mask++, nv++) {
		bool all = mask == 1u << bits;
		size_t j = 0;

		len[nv] = 0;
		for (size_t i = 0; i < slen; i++) {
			if (!pct_at(sec, slen, i)) {
				v[nv][len[nv]++] = sec[i];
				continue;
			}
			if (all || (j < 4 && (mask >> j & 1))) {
				v[nv][len[nv]++] =
					(uint8_t)(hex_of(sec[i + 1]) << 4 | hex_of(sec[i + 2]));
			} else {
				memcpy(v[nv] + len[nv], sec + i, 3);
				len[nv] += 3;
			}
			i += 2;
			j++;
		}
	}
	return nv;
}

/* Whether a variant could not be redacted: inside the replacement, or
 * holding a bracket (scrub_new refuses the value then). */
static bool variant_refused(const uint8_t *sec, size_t slen)
{
	static uint8_t v[16][64];
	size_t len[16], nv = variants(sec, slen, v, len);

	for (size_t k = 0; k < nv; k++)
		if (memchr(v[k], '[', len[k]) || memchr(v[k], ']', len[k]) ||
		    within((const uint8_t *)SCRUB_REPLACEMENT, strlen(SCRUB_REPLACEMENT), v[k],
			   len[k]))
			return true;
	return false;
}

/* The reference with the value's variants after it, in their order. out and
 * tmp hold n * 10 bytes. */
static size_t reference_variants(const uint8_t *sec, size_t slen, const uint8_t *in, size_t n,
				 uint8_t *out, uint8_t *tmp)
{
	static uint8_t v[16][64];
	size_t len[16], nv = variants(sec, slen, v, len), olen = reference(sec, slen, in, n, out);

	for (size_t k = 0; k < nv; k++) {
		memcpy(tmp, out, olen);
		olen = reference(v[k], len[k], tmp, olen, out);
	}
	return olen;
}

/* Input: byte 0 the secret's length (1..64), bytes 1-4 seed the cuts, then
 * the secret, then what is scrubbed. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t slen, n, wlen, blen, off = 0;
	const uint8_t *sec;
	uint8_t *in, *want, *buf;
	struct out got = {0};
	struct scrub *s;
	uint32_t cut;

	if (size < 6)
		return 0;
	slen = 1 + data[0] % 64;
	if (size < 5 + slen)
		return 0;
	memcpy(&cut, data + 1, 4);
	cut |= 1; /* xorshift stays at 0 from 0, and would cut only empty pieces */
	sec = data + 5;
	n = size - 5 - slen;
	s = scrub_new(sec, slen);
	if (!s) {
		INV(errno == EINVAL);
		INV(memchr(sec, '[', slen) || memchr(sec, ']', slen) ||
		    within((const uint8_t *)SCRUB_REPLACEMENT, strlen(SCRUB_REPLACEMENT), sec,
			   slen) ||
		    variant_refused(sec, slen));
		return 0;
	}
	/* exact-size copies, so ASan sees a read past either */
	in = malloc(n ? n : 1);
	want = malloc(n * 10 + 1);
	buf = malloc(n * 10 + 1);
	got.b = malloc(n * 10 + 1);
	got.cap = n * 10;
	INV(in && want && buf && got.b);
	memcpy(in, sec + slen, n);

	while (off < n) {
		size_t piece;

		cut ^= cut << 13;
		cut ^= cut >> 17;
		cut ^= cut << 5;
		piece = cut % 4 == 0 ? 0 : 1 + cut % (slen + 8); /* empty pieces too */
		if (piece > n - off)
			piece = n - off;
		INV(!scrub_feed(s, in + off, piece, out_take, &got));
		off += piece;
	}
	INV(!scrub_finish(s, out_take, &got));

	INV(!memmem(got.b, got.len, sec, slen));
	if (!memchr(sec, '%', slen) && n <= 1024)
		wlen = reference_enc(sec, slen, in, n, want);
	else if (!memchr(in, '%', n))
		wlen = reference_variants(sec, slen, in, n, want, buf);
	else
		wlen = scrub_buffer(s, in, n, want, n * 10);
	INV(got.len == wlen);
	INV(!memcmp(got.b, want, wlen));

	blen = scrub_buffer(s, in, n, buf, n * 10);
	INV(blen == wlen && !memcmp(buf, want, wlen));
	blen = scrub_buffer(s, in, n, buf, n / 2);
	INV(blen == wlen && !memcmp(buf, want, n / 2 < wlen ? n / 2 : wlen));

	/* s is ready for another stream after finish */
	got.len = 0;
	INV(!scrub_feed(s, in, n, out_take, &got));
	INV(!scrub_finish(s, out_take, &got));
	INV(got.len == wlen && !memcmp(got.b, want, wlen));

	scrub_free(s);
	free(in);
	free(want);
	free(buf);
	free(got.b);
	return 0;
}
