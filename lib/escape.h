/* Text that a session controls (a DNS name, a path, an HTTP path), made safe
 * to show an operator: nothing it holds reaches a terminal or a log raw, and
 * a word shown inside a command to paste means exactly itself to a shell. */
#ifndef ERRAND_ESCAPE_H
#define ERRAND_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What esc_text() can make of n bytes, with its NUL. */
#define ESC_LEN(n) ((n)*4 + 1)

/* True when s is printable ASCII: esc_text() leaves it as it is. */
bool esc_clean(const char *s);
/* Writes s into buf: printable ASCII (space and backslash included) as it
 * is, every other byte (controls, ESC, DEL, C1 bytes and all of UTF-8) as
 * \xNN. Escaping what is escaped changes nothing, so a line another errand
 * process escaped goes through as it is. Cut to fit len, never inside an
 * escape. Returns buf. */
const char *esc_text(const char *s, char *buf, size_t len);
/* The same as esc_text() for n bytes that may hold NUL. */
const char *esc_textn(const char *s, size_t n, char *buf, size_t len);
/* s as one shell word to paste: as it is when made only of characters no
 * shell treats specially, else in single quotes, else (when it holds a byte
 * that is not printable ASCII) as bash's $'...' with \xNN. A word cut to fit
 * len is cut whole: buf is then empty. Returns buf. */
const char *esc_shell(const char *s, char *buf, size_t len);
/* Undoes, in place, the octal escapes (\040 for a space; tab, newline and
 * backslash too) /proc/PID/mountinfo puts in a path. */
void esc_mountinfo_undo(char *s);
/* Writes s to f as esc_text() does, whatever its length. */
void esc_fputs(const char *s, FILE *f);

#endif
