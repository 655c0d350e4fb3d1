/* Named asserts for the unit tests, after the kernel selftests: each check
 * prints one line, "ok - what" or "not ok - what: actual X, expected Y", and
 * test_exit() prints the tally and gives main its status. */
#ifndef ERRAND_SELFTESTS_UNIT_TEST_H
#define ERRAND_SELFTESTS_UNIT_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int test_passed, test_failed;

/* detail: what went wrong, printed after the name only on failure */
__attribute__((format(printf, 3, 4))) static inline bool test_report(bool ok, const char *detail,
								     const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (!ok)
		printf(": %s", detail);
	printf("\n");
	fflush(stdout);
	if (ok)
		test_passed++;
	else
		test_failed++;
	return ok;
}

static inline bool test_int(long long actual, long long expected, const char *what)
{
	char d[96];

	snprintf(d, sizeof(d), "actual %lld, expected %lld", actual, expected);
	return test_report(actual == expected, d, "%s", what);
}

static inline bool test_str(const char *actual, const char *expected, const char *what)
{
	bool ok = actual && expected ? !strcmp(actual, expected) : actual == expected;
	char d[1024];

	snprintf(d, sizeof(d), "actual \"%s\", expected \"%s\"", actual ? actual : "(null)",
		 expected ? expected : "(null)");
	return test_report(ok, d, "%s", what);
}

static inline bool test_contains(const char *haystack, const char *needle, const char *what)
{
	char d[1024];

	snprintf(d, sizeof(d), "actual \"%s\", expected it to contain \"%s\"",
		 haystack ? haystack : "(null)", needle);
	return test_report(haystack && strstr(haystack, needle), d, "%s", what);
}

/* The name of a check may be a format: CHECK_INT(rc, 0, "parse %s", s). The
 * actual value is taken before the name is formatted, so a name may show
 * what computing it wrote (an error message, say). */
#define TEST_NAME(...) (snprintf(test_name_, sizeof(test_name_), __VA_ARGS__), test_name_)

#define CHECK_INT(actual, expected, ...)                                                           \
	({                                                                                         \
		long long test_actual_ = (long long)(actual);                                      \
		char test_name_[1024];                                                             \
		test_int(test_actual_, (long long)(expected), TEST_NAME(__VA_ARGS__));             \
	})
#define CHECK_STR(actual, expected, ...)                                                           \
	({                                                                                         \
		const char *test_actual_ = (actual);                                               \
		char test_name_[1024];                                                             \
		test_str(test_actual_, (expected), TEST_NAME(__VA_ARGS__));                        \
	})
#define CHECK_CONTAINS(haystack, needle, ...)                                                      \
	({                                                                                         \
		const char *test_actual_ = (haystack);                                             \
		char test_name_[1024];                                                             \
		test_contains(test_actual_, (needle), TEST_NAME(__VA_ARGS__));                     \
	})
#define CHECK_TRUE(cond, ...)                                                                      \
	({                                                                                         \
		bool test_actual_ = (cond);                                                        \
		char test_name_[1024];                                                             \
		test_report(test_actual_, "actual false, expected true", "%s",                     \
			    TEST_NAME(__VA_ARGS__));                                               \
	})
#define CHECK_FALSE(cond, ...)                                                                     \
	({                                                                                         \
		bool test_actual_ = (cond);                                                        \
		char test_name_[1024];                                                             \
		test_report(!test_actual_, "actual true, expected false", "%s",                    \
			    TEST_NAME(__VA_ARGS__));                                               \
	})

/* The last line the runner reads; main returns this. */
static inline int test_exit(void)
{
	printf("%d passed, %d failed, 0 skipped\n", test_passed, test_failed);
	return test_failed ? 1 : 0;
}

#endif
