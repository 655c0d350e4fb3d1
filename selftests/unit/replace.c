/* Guarantee: the streaming replacer errandctl run's output relay uses turns
 * every value (raw, and percent-encoded with hex digits of either case) into
 * its placeholder however the stream is cut, a value split across pieces
 * included, holds back only bytes that could begin a value (at most the
 * longest less one), lets them out unchanged at the end when no value
 * follows, and leaves a stream without values byte for byte as it was. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/replace.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

struct out {
	char buf[1 << 20];
	size_t len;
};

static int sink(void *ctx, const uint8_t *d, size_t n)
{
	struct out *o = ctx;

	if (o->len + n >= sizeof(o->buf))
		return -1;
	memcpy(o->buf + o->len, d, n);
	o->len += n;
	o->buf[o->len] = '\0';
	return 0;
}

static struct out out;

/* Adds that fail show in test_whole's count. */
static struct replacer *make(size_t chunk)
{
	struct replacer *r = replacer_new(chunk);

	if (!r)
		abort();
	replacer_add(r, "hunter2-secret", 14, "PH-A", 4, REPLACE_PCT);
	replacer_add(r, "va/42+x", 7, "PH-B", 4, REPLACE_PCT);
	replacer_add(r, "sk-abcdefgh", 11, "STANDIN", 7, 0);
	replacer_add(r, "sk-abcdefghijkl", 15, "LONGER", 6, 0);
	return r;
}

/* The whole of in fed in pieces cut at the offsets in cuts[0..n). */
static const char *run(struct replacer *r, const char *in, size_t len, const size_t *cuts, size_t n)
{
	size_t at = 0;

	out.len = 0;
	out.buf[0] = '\0';
	for (size_t i = 0; i <= n; i++) {
		size_t end = i < n ? cuts[i] : len;

		if (replacer_feed(r, in + at, end - at, sink, &out))
			return "(sink failed)";
		at = end;
	}
	if (replacer_finish(r, sink, &out))
		return "(sink failed)";
	return out.buf;
}

static void test_whole(void)
{
	struct replacer *r = make(4096);
	const char *in = "a hunter2-secret b va%2F42%2bx c va%2f42%2Bx d va/42+x e "
			 "sk-abcdefghijkl f sk-abcdefghXY g";
	const char *want = "a PH-A b PH-B c PH-B d PH-B e LONGER f STANDINXY g";

	CHECK_INT((long long)replacer_count(r), 5,
		  "the values: 2 raw, 1 encoded form (A's is its own), 2 keys");
	CHECK_INT((long long)replacer_lookbehind(r), 14,
		  "lookbehind: the longest value (the longer key, 15 bytes) less one");
	CHECK_STR(run(r, in, strlen(in), NULL, 0), want,
		  "in one piece: raw and encoded forms, either hex case, longest match first");
	replacer_free(r);
}

static void test_every_cut(void)
{
	const char *in = "x hunter2-secret y va%2F42%2Bx z sk-abcdefghijkl!";
	const char *want = "x PH-A y PH-B z LONGER!";
	size_t len = strlen(in);
	int bad = 0, bad2 = 0, bad1 = 0;

	for (size_t c = 0; c <= len; c++) {
		struct replacer *r = make(4096);

		bad += strcmp(run(r, in, len, &c, 1), want) != 0;
		replacer_free(r);
	}
	CHECK_INT(bad, 0, "a value split between two writes, at any byte, is still replaced");
	for (size_t c = 0; c <= len; c++) {
		for (size_t d = c; d <= len; d++) {
			struct replacer *r = make(4096);
			size_t cuts[2] = {c, d};

			bad2 += strcmp(run(r, in, len, cuts, 2), want) != 0;
			replacer_free(r);
		}
	}
	CHECK_INT(bad2, 0, "split into three at any two bytes: still replaced");
	{
		struct replacer *r = make(4096);
		size_t cuts[128];

		for (size_t i = 0; i < len - 1; i++)
			cuts[i] = i + 1;
		bad1 = strcmp(run(r, in, len, cuts, len - 1), want) != 0;
		replacer_free(r);
	}
	CHECK_INT(bad1, 0, "one byte a write: still replaced");
	{
		/* pieces larger than the replacer's chunk are cut inside it */
		struct replacer *r = make(3);

		CHECK_STR(run(r, in, len, NULL, 0), want, "a chunk of 3 bytes: still replaced");
		replacer_free(r);
	}
}

static void test_holding(void)
{
	struct replacer *r = make(4096);

	out.len = 0;
	out.buf[0] = '\0';
	replacer_feed(r, "prompt$ ", 8, sink, &out);
	CHECK_STR(out.buf, "prompt$ ", "output that cannot begin a value goes out at once");
	replacer_feed(r, "ok hunter2-se", 13, sink, &out);
	CHECK_STR(out.buf, "prompt$ ok ", "only the bytes that may begin a value are held");
	replacer_feed(r, "cref", 4, sink, &out);
	CHECK_STR(out.buf, "prompt$ ok hunter2-secref", "once they cannot, they go out unchanged");
	replacer_feed(r, " sk-abcdefgh", 12, sink, &out);
	CHECK_STR(out.buf, "prompt$ ok hunter2-secref ",
		  "a key that a longer one may continue is held");
	replacer_finish(r, sink, &out);
	CHECK_STR(out.buf, "prompt$ ok hunter2-secref STANDIN", "at the end it is replaced");
	out.len = 0;
	replacer_feed(r, "zzsk-abcdefghijk", 16, sink, &out);
	CHECK_INT((long long)out.len, 16 - (long long)replacer_lookbehind(r),
		  "what is held is at most the longest value less one byte");
	replacer_feed(r, "l", 1, sink, &out);
	CHECK_STR(out.buf, "zzLONGER", "and its last byte completes it");
	out.len = 0;
	out.buf[0] = '\0';
	replacer_feed(r, "end: hunter2", 12, sink, &out);
	replacer_finish(r, sink, &out);
	CHECK_STR(out.buf, "end: hunter2",
		  "a prefix of a value left at the end goes out unchanged");
	replacer_free(r);
}

static void test_identity(void)
{
	struct replacer *r = replacer_new(65536), *s = make(65536);
	static char in[600000];
	size_t cuts[64], n = 0;
	unsigned int seed = 7;
	const char *got;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(rand_r(&seed) & 0xff);
	for (size_t at = 0; n < ARRAY_SIZE(cuts);) {
		at += 1 + (size_t)rand_r(&seed) % 16384;
		if (at >= sizeof(in))
			break;
		cuts[n++] = at;
	}
	got = run(r, in, sizeof(in), cuts, n);
	CHECK_TRUE(out.len == sizeof(in) && !memcmp(got, in, sizeof(in)),
		   "without values, binary data comes out byte for byte");
	/* random bytes hold no value: with values, it is the same */
	got = run(s, in, sizeof(in), cuts, n);
	CHECK_TRUE(out.len == sizeof(in) && !memcmp(got, in, sizeof(in)),
		   "with values that do not occur, binary data comes out byte for byte");
	replacer_free(r);
	replacer_free(s);
}

static void test_errors(void)
{
	struct replacer *r = replacer_new(16);

	CHECK_INT(replacer_add(r, "", 0, "x", 1, 0), -EINVAL, "an empty value is refused");
	for (int i = 0; i < REPLACE_PATTERNS_MAX; i++)
		replacer_add(r, "abcdefgh", 8, "x", 1, 0);
	CHECK_INT(replacer_add(r, "abcdefgh", 8, "x", 1, 0), -E2BIG, "past the limit, -E2BIG");
	replacer_free(r);
}

int main(void)
{
	test_whole();
	test_every_cut();
	test_holding();
	test_identity();
	test_errors();
	return test_exit();
}
