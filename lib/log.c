/* Logging to stderr with the program's name; see log.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
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

const char *log_prog(void)
{
	return prog;
}

/* A line names what sessions control (names, paths): escaped whole, so none
 * of their bytes can forge a line or drive the operator's terminal. Each
 * call uses its own buffers: the agent logs from job threads too. */
static void vlog(const char *fmt, va_list ap, int err)
{
	char buf[1024], line[1280];
	size_t n;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* room kept for the errno text */
	esc_text(buf, line, sizeof(line) - 64);
	n = strlen(line);
	if (err)
		snprintf(line + n, sizeof(line) - n, ": %s", strerror(err));
	fprintf(stderr, "%s: %s\n", prog, line);
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
