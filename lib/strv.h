/* Growing NULL-terminated string lists, and small whole-file reads: what the
 * agent's sweeps and the probes of /proc, /sys and cgroupfs need. */
#ifndef ERRAND_STRV_H
#define ERRAND_STRV_H

#include <stddef.h>

/* Appends a copy of s to *v (which holds *n strings, NULL-terminated; both 0
 * and NULL to start). 0 or -ENOMEM, *v unchanged on error. */
int strv_push(char ***v, size_t *n, const char *s);
/* Frees every string and the list; NULL-safe. */
void strv_free(char **v);
/* Reads the first len-1 bytes of path into buf, NUL-terminated. 0 or -errno. */
int file_read_text(const char *path, char *buf, size_t len);

#endif
