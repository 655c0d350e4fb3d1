/* Logging for every errand process, after OpenBSD's log.c: warn appends the
 * errno text, warnx does not; fatal exits 125, the status errand uses for its
 * own failures. Lines go to stderr, prefixed with the program's name. */
#ifndef ERRAND_LOG_H
#define ERRAND_LOG_H

#include <stdarg.h>
#include <stdbool.h>

void log_init(const char *progname, bool verbose);
bool log_verbose(void);
/* The name each line starts with (log_init's). */
const char *log_prog(void);
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
