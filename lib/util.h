/* Small helpers every errand process uses: cleanup attributes in the manner of
 * bubblewrap, ownership hand-off, array sizes. */
#ifndef ERRAND_UTIL_H
#define ERRAND_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd); /* never retried: the descriptor is gone either way */
}

#define cleanup_free __attribute__((cleanup(cleanup_freep)))
#define cleanup_close __attribute__((cleanup(cleanup_closep)))

/* Hand ownership on: returns *pp and leaves NULL behind for the cleanup. */
static inline void *steal_pointer_(void *pp)
{
	void **p = pp, *v = *p;

	*p = NULL;
	return v;
}
#define steal_pointer(pp) steal_pointer_(pp)

static inline int steal_fd(int *fd)
{
	int v = *fd;

	*fd = -1;
	return v;
}

/* snprintf for paths and names: -ENAMETOOLONG instead of a silent cut. */
__attribute__((format(printf, 3, 4))) static inline int path_fmt(char *buf, size_t len,
								 const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A hex digit's value, or -1. */
static inline int hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A name errand takes from a peer or a file to use in paths and messages
 * (a session id, a provider): 1..max of letters, digits, '-' and '_'. */
static inline bool name_token_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return false;
	return true;
}

#endif
