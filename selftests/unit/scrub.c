/* Guarantee: every occurrence of the real key in what the broker relays,
 * raw or percent-encoded any way (each byte raw or %XX, hex of either case),
 * becomes "[redacted]", wherever the pieces it arrives in are cut; what is not
 * the key comes out byte for byte as it went in; at most 3 * len - 1 bytes
 * are ever held back (len - 1 without a "%"), the scan takes linear time, and
 * the output is what a plain whole-buffer replacement gives. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "broker/scrub.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

struct out {
	uint8_t b[1 << 16];
	size_t len;
};

static int out_take(void *ctx, const uint8_t *data, size_t len)
{
	struct out *o = ctx;

	if (o->len + len > sizeof(o->b))
		return -ENOSPC;
	memcpy(o->b + o->len, data, len);
	o->len += len;
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

/* The reference: left to right, a match is replaced and skipped. */
static size_t reference(const uint8_t *sec, size_t slen, const uint8_t *in, size_t n, uint8_t *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		if (n - i >= slen && same(in + i, sec, slen)) {
			memcpy(out + o, SCRUB_REPLACEMENT, strlen(SCRUB_REPLACEMENT));
			o += strlen(SCRUB_REPLACEMENT);
			i += slen;
		} else {
			out[o++] = in[i++];
		}
	}
	return o;
}

static struct out got;

/* got as a string, for CHECK_STR (short outputs only) */
static const char *got_str(void)
{
	static char str[200];
	size_t n = got.len < sizeof(str) - 1 ? got.len : sizeof(str) - 1;

	memcpy(str, got.b, n);
	str[n] = '\0';
	return str;
}
static uint8_t want[1 << 16];

/* Streams in[0..n) through s cut at cuts[0..n_cuts) and compares with the
 * reference; silent when equal, so many splits print one line. */
static bool stream_matches(struct scrub *s, const uint8_t *sec, size_t slen, const uint8_t *in,
			   size_t n, const size_t *cuts, size_t n_cuts)
{
	size_t prev = 0, wlen;

	got.len = 0;
	for (size_t c = 0; c <= n_cuts; c++) {
		size_t end = c < n_cuts ? cuts[c] : n;

		if (scrub_feed(s, in + prev, end - prev, out_take, &got))
			return false;
		prev = end;
	}
	if (scrub_finish(s, out_take, &got))
		return false;
	wlen = reference(sec, slen, in, n, want);
	return got.len == wlen && !memcmp(got.b, want, wlen);
}

static struct scrub *new_s(const char *secret)
{
	return scrub_new((const uint8_t *)secret, strlen(secret));
}

static void test_basic(void)
{
	static const struct {
		const char *secret, *in, *out;
	} cases[] = {
		{"sk-live-123", "key=sk-live-123", "key=[redacted]"},
		{"sk-live-123", "sk-live-123 at start", "[redacted] at start"},
		{"sk-live-123", "at end sk-live-123", "at end [redacted]"},
		{"sk-live-123", "sk-live-123", "[redacted]"},
		{"sk-live-123", "sk-live-123sk-live-123", "[redacted][redacted]"},
		{"sk-live-123", "sk-live-12", "sk-live-12"},
		{"sk-live-123", "sk-live-12sk-live-123", "sk-live-12[redacted]"},
		{"sk-live-123", "", ""},
		{"aaab", "aaaaab", "aa[redacted]"},
		{"aaab", "aaaaaaaaaaaaab", "aaaaaaaaaa[redacted]"},
		{"aaab", "aaabaaab", "[redacted][redacted]"},
		{"aaab", "aaa", "aaa"},
		{"abab", "abababab", "[redacted][redacted]"},
		{"abab", "ababab", "[redacted]ab"},
		{"abcabd", "abcabcabd", "abc[redacted]"},
		{"xx", "xxx", "[redacted]x"},
		{"x", "xyx", "[redacted]y[redacted]"},
		{"ab", "aab", "a[redacted]"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct scrub *s = new_s(cases[i].secret);
		const uint8_t *in = (const uint8_t *)cases[i].in;
		size_t n = strlen(cases[i].in);
		uint8_t buf[256];
		size_t len;

		if (!CHECK_TRUE(s != NULL, "scrub_new \"%s\"", cases[i].secret))
			continue;
		got.len = 0;
		scrub_feed(s, in, n, out_take, &got);
		scrub_finish(s, out_take, &got);
		CHECK_STR(got_str(), cases[i].out, "stream: \"%s\" in \"%s\"", cases[i].secret,
			  cases[i].in);
		len = scrub_buffer(s, in, n, buf, sizeof(buf) - 1);
		buf[len < sizeof(buf) ? len : sizeof(buf) - 1] = '\0';
		CHECK_STR((char *)buf, cases[i].out, "buffer: \"%s\" in \"%s\"", cases[i].secret,
			  cases[i].in);
		scrub_free(s);
	}
}

static void test_refused(void)
{
	static const char *const bad[] = {"d", "red", "[redacted]", "acted]", "sk[1]", "a]", "[x"};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errno = 0;
		CHECK_TRUE(!new_s(bad[i]) && errno == EINVAL,
			   "secret \"%s\" refused: it could reappear in the output", bad[i]);
	}
	errno = 0;
	CHECK_TRUE(!scrub_new((const uint8_t *)"x", 0) && errno == EINVAL, "empty secret refused");
	scrub_free(NULL);
	CHECK_TRUE(true, "scrub_free(NULL) is fine");
}

/* The secret placed at every offset of a buffer, fed in two and in three
 * pieces cut at every pair of offsets. */
static void test_every_split(void)
{
	const char *secret = "errand-key-0123456789abcdef";
	size_t slen = strlen(secret), fails = 0, runs = 0;
	struct scrub *s = new_s(secret);
	uint8_t in[64];
	size_t n = sizeof(in);

	if (!CHECK_TRUE(s != NULL, "scrub_new"))
		return;
	for (size_t at = 0; at + slen <= n; at++) {
		memset(in, '.', n);
		memcpy(in + at, secret, slen);
		for (size_t a = 0; a <= n; a++) {
			size_t cuts2[] = {a};

			fails += !stream_matches(s, (const uint8_t *)secret, slen, in, n, cuts2, 1);
			runs++;
			for (size_t b = a; b <= n; b++) {
				size_t cuts3[] = {a, b};

				fails += !stream_matches(s, (const uint8_t *)secret, slen, in, n,
							 cuts3, 2);
				runs++;
			}
		}
		if (fails)
			break;
	}
	CHECK_INT(fails, 0,
		  "secret at every offset, split in two and three at every offset (%zu runs)",
		  runs);
	memset(in, '.', n);
	memcpy(in + 3, secret, slen);
	got.len = 0;
	scrub_feed(s, in, n, out_take, &got);
	scrub_finish(s, out_take, &got);
	CHECK_TRUE(got.len && !memmem(got.b, got.len, secret, slen), "the output holds no key");

	/* byte by byte: after each byte, at most len - 1 bytes are held */
	size_t held_max = 0, fed_out;
	uint8_t ref[256];

	memset(in, 'e', n);
	memcpy(in + 10, secret, slen - 1); /* a near-match that fails at its last byte */
	memcpy(in + 40, secret, 10);
	got.len = 0;
	for (size_t i = 0; i < n; i++) {
		scrub_feed(s, in + i, 1, out_take, &got);
		fed_out = reference((const uint8_t *)secret, slen, in, i + 1, ref);
		if (fed_out - got.len > held_max)
			held_max = fed_out - got.len;
	}
	scrub_finish(s, out_take, &got);
	CHECK_INT(held_max, slen - 1, "byte by byte, at most len - 1 bytes held back");
	CHECK_TRUE(got.len == n && !memcmp(got.b, in, n), "a near-match comes out unchanged");
	scrub_free(s);
}

static uint32_t rng = 2463534242u;

static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

/* Random secrets over small alphabets, so near-matches are everywhere, random
 * inputs with planted secrets, random cuts: equal to the reference. */
static void test_random(void)
{
	static uint8_t in[4096], buf[4096 * 10];
	size_t fails = 0, runs = 0, skipped = 0;

	for (int round = 0; round < 3000; round++) {
		const char *alpha = round % 3 == 0 ? "ab" : round % 3 == 1 ? "xyz" : "ab-_sk";
		size_t alen = strlen(alpha);
		size_t slen = 1 + next_rand() % (round % 5 == 0 ? 40 : 6);
		size_t n = next_rand() % (round % 10 == 0 ? sizeof(in) : 200);
		uint8_t sec[64];
		size_t cuts[8], n_cuts = next_rand() % 8, blen, wlen;
		struct scrub *s;

		for (size_t i = 0; i < slen; i++)
			sec[i] = (uint8_t)alpha[next_rand() % alen];
		s = scrub_new(sec, slen);
		if (!s) {
			skipped++; /* a secret inside "[redacted]" */
			continue;
		}
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)alpha[next_rand() % alen];
		for (size_t k = next_rand() % 4; k && n >= slen; k--)
			memcpy(in + next_rand() % (n - slen + 1), sec, slen);
		for (size_t c = 0; c < n_cuts; c++)
			cuts[c] = n ? next_rand() % (n + 1) : 0;
		/* ascending */
		for (size_t i = 1; i < n_cuts; i++)
			for (size_t j = i; j && cuts[j - 1] > cuts[j]; j--) {
				size_t t = cuts[j];

				cuts[j] = cuts[j - 1];
				cuts[j - 1] = t;
			}
		runs++;
		if (!stream_matches(s, sec, slen, in, n, cuts, n_cuts) ||
		    memmem(got.b, got.len, sec, slen))
			fails++;
		wlen = reference(sec, slen, in, n, want);
		blen = scrub_buffer(s, in, n, buf, sizeof(buf));
		if (blen != wlen || memcmp(buf, want, wlen))
			fails++;
		scrub_free(s);
	}
	CHECK_INT(fails, 0,
		  "random secrets, inputs and cuts equal the reference (%zu runs, %zu "
		  "secrets refused)",
		  runs, skipped);
}

static void test_buffer_cap(void)
{
	struct scrub *s = new_s("secret-key");
	const char *in = "Bearer secret-key, again secret-key";
	uint8_t buf[64];
	size_t len;

	if (!s)
		return;
	len = scrub_buffer(s, (const uint8_t *)in, strlen(in), buf, 10);
	CHECK_INT(len, strlen("Bearer [redacted], again [redacted]"),
		  "scrub_buffer says the whole length when out is small");
	CHECK_TRUE(!memcmp(buf, "Bearer [re", 10), "and writes what fits");
	CHECK_INT(scrub_buffer(s, (const uint8_t *)in, strlen(in), NULL, 0), len,
		  "with no room at all");
	/* scrub_buffer leaves a stream in progress alone */
	got.len = 0;
	scrub_feed(s, (const uint8_t *)"xx secret-", 10, out_take, &got);
	scrub_buffer(s, (const uint8_t *)"zzz", 3, buf, sizeof(buf));
	scrub_feed(s, (const uint8_t *)"key yy", 6, out_take, &got);
	scrub_finish(s, out_take, &got);
	CHECK_STR(got_str(), "xx [redacted] yy", "a stream across a scrub_buffer call");
	scrub_free(s);
}

static int sink_fail(void *ctx, const uint8_t *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return -EPIPE;
}

static void test_sink_error(void)
{
	struct scrub *s = new_s("key");

	if (!s)
		return;
	CHECK_INT(scrub_feed(s, (const uint8_t *)"hello", 5, sink_fail, NULL), -EPIPE,
		  "a sink's error is returned");
	CHECK_INT(scrub_feed(s, (const uint8_t *)"x", 1, out_take, &got), -EPIPE, "and stays");
	CHECK_INT(scrub_finish(s, out_take, &got), -EPIPE, "finish too");
	scrub_free(s);
}

/* A secret's value turned back into its placeholder (an intercepted
 * host's answer), at every cut of the input. */
static void test_placeholder(void)
{
	static const char ph[] = "errand-secret-0123456789abcdef";
	static const char in[] = "a=v4lue/+x;b=v4lue/+x!v4lue/+";
	static const char exp[] =
		"a=errand-secret-0123456789abcdef;b=errand-secret-0123456789abcdef!v4lue/+";
	struct scrub *s =
		scrub_new_as((const uint8_t *)"v4lue/+x", 8, (const uint8_t *)ph, strlen(ph));

	if (!CHECK_TRUE(s != NULL, "scrub_new_as with a placeholder"))
		return;
	for (size_t cut = 0; cut <= strlen(in); cut++) {
		got.len = 0;
		scrub_feed(s, (const uint8_t *)in, cut, out_take, &got);
		scrub_feed(s, (const uint8_t *)in + cut, strlen(in) - cut, out_take, &got);
		scrub_finish(s, out_take, &got);
		CHECK_STR(got_str(), exp, "the value becomes the placeholder, cut at %zu", cut);
	}
	scrub_free(s);
	CHECK_TRUE(scrub_new_as((const uint8_t *)"secret-01", 9, (const uint8_t *)ph, strlen(ph)) ==
			   NULL,
		   "a value inside its placeholder is refused");
}

static int sink_count(void *ctx, const uint8_t *data, size_t len)
{
	(void)data;
	*(size_t *)ctx += len;
	return 0;
}

/* A hostile input for naive matching: a long run of near-matches. */
static void test_linear(void)
{
	static uint8_t in[1 << 20], sec[4096];
	size_t out = 0;
	struct scrub *s;

	memset(sec, 'a', sizeof(sec) - 1);
	sec[sizeof(sec) - 1] = 'b';
	memset(in, 'a', sizeof(in));
	s = scrub_new(sec, sizeof(sec));
	if (!CHECK_TRUE(s != NULL, "scrub_new of a 4 KiB secret"))
		return;
	for (int i = 0; i < 16; i++)
		scrub_feed(s, in, sizeof(in), sink_count, &out);
	scrub_finish(s, sink_count, &out);
	CHECK_INT(out, 16 << 20, "16 MiB of near-matches to a 4 KiB secret come out whole");
	CHECK_TRUE(scrub_steps(s) <= 8ULL * (16 << 20),
		   "and in linear time (%llu comparisons for %d bytes; a quadratic scan makes "
		   "thousands a byte)",
		   (unsigned long long)scrub_steps(s), 16 << 20);
	scrub_free(s);
}

static int hex_of(uint8_t c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Whether b[0..n) is exactly v[0..L) with each byte raw or %XX (any case). */
static bool is_encoding(const uint8_t *b, size_t n, const uint8_t *v, size_t L)
{
	if (!L || !n)
		return !L && !n;
	if (fold(b[0]) == fold(v[0]) && is_encoding(b + 1, n - 1, v + 1, L - 1))
		return true;
	return n >= 3 && b[0] == '%' && hex_of(b[1]) >= 0 && hex_of(b[2]) >= 0 &&
	       fold((uint8_t)(hex_of(b[1]) << 4 | hex_of(b[2]))) == fold(v[0]) &&
	       is_encoding(b + 3, n - 3, v + 1, L - 1);
}

/* The reference for encodings, by brute force: the match that ends first
 * (the longest of those ending together) is replaced, and the search goes on
 * after it. */
static size_t reference_enc(const uint8_t *v, size_t L, const uint8_t *in, size_t n, uint8_t *out)
{
	size_t base = 0, o = 0;

	for (size_t e = 1; e <= n; e++)
		for (size_t st = e >= 3 * L && e - 3 * L > base ? e - 3 * L : base; st + L <= e;
		     st++) {
			if (!is_encoding(in + st, e - st, v, L))
				continue;
			memcpy(out + o, in + base, st - base);
			o += st - base;
			memcpy(out + o, SCRUB_REPLACEMENT, strlen(SCRUB_REPLACEMENT));
			o += strlen(SCRUB_REPLACEMENT);
			base = e;
			break;
		}
	memcpy(out + o, in + base, n - base);
	return o + n - base;
}

/* Whether out[0..n) still holds v in some encoding. */
static bool holds_encoding(const uint8_t *v, size_t L, const uint8_t *out, size_t n)
{
	for (size_t st = 0; st < n; st++)
		for (size_t e = st + L; e <= n && e <= st + 3 * L; e++)
			if (is_encoding(out + st, e - st, v, L))
				return true;
	return false;
}

/* in streamed whole, cut in two at every offset and fed byte by byte, and
 * scrubbed as one buffer: each must give want. */
static void check_all_cuts(struct scrub *s, const char *in, const char *expect, const char *what)
{
	size_t n = strlen(in), bad = 0;
	uint8_t buf[512];
	size_t len;

	for (size_t cut = 0; cut <= n; cut++) {
		got.len = 0;
		scrub_feed(s, (const uint8_t *)in, cut, out_take, &got);
		scrub_feed(s, (const uint8_t *)in + cut, n - cut, out_take, &got);
		scrub_finish(s, out_take, &got);
		bad += strcmp(got_str(), expect) != 0;
	}
	got.len = 0;
	for (size_t i = 0; i < n; i++)
		scrub_feed(s, (const uint8_t *)in + i, 1, out_take, &got);
	scrub_finish(s, out_take, &got);
	bad += strcmp(got_str(), expect) != 0;
	CHECK_INT(bad, 0, "%s: cut at every offset and byte by byte (\"%s\" gives \"%s\")", what,
		  in, got_str());
	len = scrub_buffer(s, (const uint8_t *)in, n, buf, sizeof(buf) - 1);
	buf[len < sizeof(buf) ? len : sizeof(buf) - 1] = '\0';
	CHECK_STR((char *)buf, expect, "%s: as one buffer", what);
}

/* The value echoed percent-encoded otherwise than errand writes it. */
static void test_encoded(void)
{
	static const struct {
		const char *secret, *in, *out, *what;
	} cases[] = {
		{"ab/cd+e", "v=ab%2Fcd%2Be;", "v=[redacted];", "errand's own encoding"},
		{"ab/cd+e", "v=ab%2fcd%2be;", "v=[redacted];", "lower-case hex"},
		{"ab/cd+e", "v=ab%2fcd%2Be;", "v=[redacted];", "mixed-case hex"},
		{"ab/cd+e", "v=%61%62%2F%63%64%2B%65;", "v=[redacted];", "every byte encoded"},
		{"ab/cd+e", "v=%61b/c%64+%65;", "v=[redacted];", "some bytes encoded, some not"},
		{"ab/cd+e", "v=ab%2fcd%2bf;", "v=ab%2fcd%2bf;", "a near-miss in its last byte"},
		{"ab/cd+e", "v=ab%2fcd%2", "v=ab%2fcd%2", "a near-miss cut inside a %XX"},
		{"ab/cd+e", "v=%2%61b%2fcd%2be", "v=%2[redacted]", "a broken %XX before it"},
		{"ab/cd+e", "%%61%62/cd+e%", "%[redacted]%", "a bare % on either side"},
		{"ab/cd+e", "ab%2Fcd%2Beab/cd+e", "[redacted][redacted]", "twice, two forms"},
		{"2fab/x", "a%2fab%2fx", "a%[redacted]", "a match that begins inside a %XX"},
		{"f0ab/x", "q%2f0ab%2Fx", "q%2[redacted]", "one that begins with its last digit"},
		{"41/x", "%41%2fx", "%[redacted]", "and one with both digits"},
		{"4", "%41", "%[redacted]1", "a hex digit for a secret"},
		{"a%b/c", "a%b/c a%25b%2Fc a%25%62%2fc", "[redacted] [redacted] [redacted]",
		 "a value holding %: raw, and as %25"},
		{"x%41y", "x%41y x%2541y", "[redacted] [redacted]", "a value holding %41"},
		{"x%41y", "x%41z", "x%41z", "whose near-miss passes unchanged"},
		{"sk-Live", "sk-live SK%2dLIVE %73k-Liv%65", "[redacted] [redacted] [redacted]",
		 "letters in any case: an echo in upper or lower case is the value"},
		{"sk-Live", "sk-Lixe", "sk-Lixe",
		 "... whose near-miss passes unchanged, case and all"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct scrub *s = new_s(cases[i].secret);

		if (!CHECK_TRUE(s != NULL, "scrub_new \"%s\"", cases[i].secret))
			continue;
		check_all_cuts(s, cases[i].in, cases[i].out, cases[i].what);
		scrub_free(s);
	}
}

/* Random values over hex digits and bytes that get encoded, inputs with
 * encodings planted (each byte raw or %XX, either case), random cuts: equal
 * to the brute-force reference, and no encoding left in the output. */
static void test_encoded_random(void)
{
	static uint8_t in[600], buf[600 * 10];
	static const char val_alpha[] = "aA1f/ ";
	static const char in_alpha[] = "aA1f/ %6";
	size_t fails = 0, runs = 0, left = 0, planted = 0;

	for (int round = 0; round < 3000; round++) {
		size_t slen = 1 + next_rand() % 6, n = 0, target = next_rand() % 160;
		uint8_t sec[8];
		size_t cuts[8], n_cuts = next_rand() % 8, wlen, blen;
		struct scrub *s;

		for (size_t i = 0; i < slen; i++)
			sec[i] = (uint8_t)val_alpha[next_rand() % (sizeof(val_alpha) - 1)];
		s = scrub_new(sec, slen);
		if (!s)
			continue;
		while (n < target) {
			if (next_rand() % 8) {
				in[n++] = (uint8_t)in_alpha[next_rand() % (sizeof(in_alpha) - 1)];
				continue;
			}
			for (size_t i = 0; i < slen; i++) {
				static const char up[] = "0123456789ABCDEF",
						  lo[] = "0123456789abcdef";
				uint32_t r = next_rand();

				if (r % 3 == 0) {
					in[n++] = sec[i];
				} else {
					in[n++] = '%';
					in[n++] = (uint8_t)(r & 4 ? up : lo)[sec[i] >> 4];
					in[n++] = (uint8_t)(r & 8 ? up : lo)[sec[i] & 15];
				}
			}
			planted++;
		}
		for (size_t c = 0; c < n_cuts; c++)
			cuts[c] = next_rand() % (n + 1);
		for (size_t i = 1; i < n_cuts; i++)
			for (size_t j = i; j && cuts[j - 1] > cuts[j]; j--) {
				size_t t = cuts[j];

				cuts[j] = cuts[j - 1];
				cuts[j - 1] = t;
			}
		runs++;
		wlen = reference_enc(sec, slen, in, n, want);
		got.len = 0;
		for (size_t c = 0, prev = 0; c <= n_cuts; c++) {
			size_t end = c < n_cuts ? cuts[c] : n;

			scrub_feed(s, in + prev, end - prev, out_take, &got);
			prev = end;
		}
		scrub_finish(s, out_take, &got);
		if (got.len != wlen || memcmp(got.b, want, wlen))
			fails++;
		blen = scrub_buffer(s, in, n, buf, sizeof(buf));
		if (blen != wlen || memcmp(buf, want, wlen))
			fails++;
		left += holds_encoding(sec, slen, got.b, got.len);
		scrub_free(s);
	}
	CHECK_INT(fails, 0,
		  "encoded values planted at random, random cuts: equal the reference "
		  "(%zu runs, %zu planted)",
		  runs, planted);
	CHECK_INT(left, 0, "and no output holds the value in any encoding");
}

/* Held back: a near-miss every byte of which is encoded is held whole until
 * it fails, 3 * len - 1 bytes at most, and then comes out unchanged. */
static void test_encoded_held(void)
{
	const char *secret = "key/0123456789";
	size_t slen = strlen(secret), n = 0, held_max = 0;
	struct scrub *s = new_s(secret);
	uint8_t in[128];

	if (!CHECK_TRUE(s != NULL, "scrub_new"))
		return;
	n = (size_t)sprintf((char *)in, "x=");
	for (size_t i = 0; i + 1 < slen; i++)
		n += (size_t)sprintf((char *)in + n, "%%%02x", (unsigned)(uint8_t)secret[i]);
	n += (size_t)sprintf((char *)in + n, "%%3;tail");
	got.len = 0;
	for (size_t i = 0; i < n; i++) {
		scrub_feed(s, in + i, 1, out_take, &got);
		if (i + 1 - got.len > held_max)
			held_max = i + 1 - got.len;
	}
	scrub_finish(s, out_take, &got);
	CHECK_INT(held_max, 3 * slen - 1, "byte by byte, at most 3 * len - 1 bytes held back");
	CHECK_TRUE(got.len == n && !memcmp(got.b, in, n),
		   "an encoded near-miss comes out byte for byte");
	scrub_free(s);
}

/* Hostile encoded input: long runs of partial matches, in each form (the
 * last begins each run inside a "%XX", its last digit being the first 'a'). */
static void test_encoded_linear(void)
{
	static uint8_t in[3 << 20], sec[4096];
	static char tail[3 + 5000 * 3 + 1] = "%6a";
	const char *const unit[] = {"%61", "a%61", tail};
	struct scrub *s;

	memset(sec, 'a', sizeof(sec) - 1);
	sec[sizeof(sec) - 1] = 'b';
	for (size_t i = 0; i < 5000; i++)
		memcpy(tail + 3 + 3 * i, "%61", 3);
	s = scrub_new(sec, sizeof(sec));
	if (!CHECK_TRUE(s != NULL, "scrub_new of a 4 KiB secret"))
		return;
	for (size_t u = 0; u < ARRAY_SIZE(unit); u++) {
		size_t ulen = strlen(unit[u]), n = sizeof(in) / ulen * ulen, out = 0;
		uint64_t steps0 = scrub_steps(s), steps;

		for (size_t i = 0; i < n; i += ulen)
			memcpy(in + i, unit[u], ulen);
		for (int i = 0; i < 4; i++)
			scrub_feed(s, in, n, sink_count, &out);
		scrub_finish(s, sink_count, &out);
		steps = scrub_steps(s) - steps0;
		CHECK_INT(out, 4 * n, "12 MiB of \"%.9s\"..., near-matches encoded, come out whole",
			  unit[u]);
		CHECK_TRUE(steps <= 8 * 4 * (uint64_t)n,
			   "and in linear time (%llu comparisons for %zu bytes)",
			   (unsigned long long)steps, 4 * n);
	}
	scrub_free(s);
}

/* echo of v[0..len) into out, each byte raw or %XX (hex of either case)
 * by r's bits, the value's own '%' raw where keep_pct: its length. */
static size_t echo(const char *v, size_t len, uint32_t r, bool keep_pct, char *out)
{
	static const char up[] = "0123456789ABCDEF", lo[] = "0123456789abcdef";
	size_t o = 0;

	for (size_t i = 0; i < len; i++, r = r * 1103515245u + 12345u) {
		uint8_t c = (uint8_t)v[i];

		if ((r >> 16) % 2 || (keep_pct && c == '%')) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = ((r >> 20) & 1 ? up : lo)[c >> 4];
			out[o++] = ((r >> 21) & 1 ? up : lo)[c & 15];
		}
	}
	return o;
}

/* A value that holds "%XX" itself, echoed with its '%' raw and the two hex
 * digits after it raw too, reads as one decoded byte there: still found. */
static void test_percent_value(void)
{
	static const char *const vals[] = {"ab%41cd",	  "x%2Fy%41z",	   "%2541",
					   "k%4%41%%42-", "a%2Fb%3Dc%2Bd", "%41%42%43%44"};
	char in[256], expect[256];
	size_t fails = 0, runs = 0;

	for (size_t v = 0; v < ARRAY_SIZE(vals); v++) {
		size_t len = strlen(vals[v]);
		struct scrub *s = scrub_new((const uint8_t *)vals[v], len);

		if (!CHECK_TRUE(s != NULL, "scrub_new of %s", vals[v]))
			continue;
		for (uint32_t r = 1; r < 2000; r++) {
			size_t n = 0, cuts[3];
			uint8_t buf[1024];

			n += (size_t)snprintf(in, sizeof(in), "pre ");
			n += echo(vals[v], len, r * 2654435761u, r % 3 != 0, in + n);
			n += (size_t)snprintf(in + n, sizeof(in) - n, " post");
			snprintf(expect, sizeof(expect), "pre [redacted] post");
			for (size_t c = 0; c < 3; c++)
				cuts[c] = (r * (c + 7)) % (n + 1);
			for (size_t i = 1; i < 3; i++)
				for (size_t j = i; j && cuts[j - 1] > cuts[j]; j--) {
					size_t t = cuts[j];

					cuts[j] = cuts[j - 1];
					cuts[j - 1] = t;
				}
			runs++;
			got.len = 0;
			for (size_t c = 0, at = 0; c <= 3; c++) {
				size_t to = c < 3 ? cuts[c] : n;

				scrub_feed(s, (const uint8_t *)in + at, to - at, out_take, &got);
				at = to;
			}
			scrub_finish(s, out_take, &got);
			if (got.len != strlen(expect) || memcmp(got.b, expect, got.len) ||
			    scrub_buffer(s, (const uint8_t *)in, n, buf, sizeof(buf)) !=
				    strlen(expect) ||
			    memcmp(buf, expect, strlen(expect))) {
				if (!fails)
					printf("# %s: \"%.*s\" came out \"%.*s\"\n", vals[v],
					       (int)n, in, (int)got.len, got.b);
				fails++;
			}
		}
		scrub_free(s);
	}
	CHECK_INT(fails, 0,
		  "values holding %%XX (up to four), echoed each byte raw or encoded, their own "
		  "%%XX raw or not, in pieces: always redacted (%zu runs)",
		  runs);
	errno = 0;
	CHECK_TRUE(!scrub_new((const uint8_t *)"r%65d", 5) && errno == EINVAL,
		   "a value whose variant \"[redacted]\" holds (r%%65d: red) is refused");
	errno = 0;
	CHECK_TRUE(!scrub_new((const uint8_t *)"a%5Db", 5) && errno == EINVAL,
		   "... and one whose variant holds a bracket (a%%5Db: a]b)");
	errno = 0;
	CHECK_TRUE(!scrub_new_as((const uint8_t *)"%65rrand", 8,
				 (const uint8_t *)"errand-secret-0123", 18) &&
			   errno == EINVAL,
		   "... and one whose variant its placeholder holds (%%65rrand: errand)");
}

int main(void)
{
	test_basic();
	test_refused();
	test_every_split();
	test_random();
	test_buffer_cap();
	test_sink_error();
	test_placeholder();
	test_linear();
	test_encoded();
	test_encoded_random();
	test_encoded_held();
	test_encoded_linear();
	test_percent_value();
	return test_exit();
}
