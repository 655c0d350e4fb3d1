/* One lock around lib/log.c for the broker's threads; see blog.h. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "broker/blog.h"
#include "lib/log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool quiet;

void blog_quiet(bool q)
{
	quiet = q;
}

#define BLOG(fn)                                                                                   \
	do {                                                                                       \
		char line[1024];                                                                   \
		va_list ap;                                                                        \
                                                                                                   \
		va_start(ap, fmt);                                                                 \
		vsnprintf(line, sizeof(line), fmt, ap);                                            \
		va_end(ap);                                                                        \
		pthread_mutex_lock(&lock);                                                         \
		fn("%s", line);                                                                    \
		pthread_mutex_unlock(&lock);                                                       \
	} while (0)

void blog_info(const char *fmt, ...)
{
	if (!quiet)
		BLOG(log_info);
}

void blog_warnx(const char *fmt, ...)
{
	BLOG(log_warnx);
}

void blog_debug(const char *fmt, ...)
{
	if (log_verbose())
		BLOG(log_debug);
}
