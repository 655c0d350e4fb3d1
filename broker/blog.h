/* The broker's log lines: lib/log.c keeps one line in a shared buffer, and the
 * broker logs from many threads, so every line goes through one lock here. */
#ifndef ERRAND_BROKER_BLOG_H
#define ERRAND_BROKER_BLOG_H

#include <stdbool.h>

/* Quiet: blog_info says nothing; warnings are still written. */
void blog_quiet(bool quiet);
void blog_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void blog_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void blog_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
