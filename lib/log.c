/* Logging to stderr with the program's name; see log.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

static const char *prog = "errand";
static bool verbose;

void log_init(const char *progname, bool v)
{
	prog = progname;
	verbose = v;
}

bool log_verbose(void)
{
	return verbose;
}

/* The last warning, for a caller that must also hand it on (the agent
 * answering errandctl in one line). */
static char last_warning[1280];

const char *log_last_warning(void)
{
	return last_warning;
}

static void vlog(const char *fmt, va_list ap, int err)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (err)
		snprintf(last_warning, sizeof(last_warning), "%s: %s", buf, strerror(err));
	else
		snprintf(last_warning, sizeof(last_warning), "%s", buf);
	fprintf(stderr, "%s: %s\n", prog, last_warning);
}

void log_warn(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap, err);
	va_end(ap);
	errno = err;
}

void log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap, 0);
	va_end(ap);
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap, 0);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	vlog(fmt, ap, 0);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap, err);
	va_end(ap);
	exit(125);
}

void fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(fmt, ap, 0);
	va_end(ap);
	exit(125);
}
