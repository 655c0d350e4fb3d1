/* String lists and small file reads (see strv.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/strv.h"
#include "lib/util.h"

int strv_push(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));
	char *copy;

	if (!nv)
		return -ENOMEM;
	*v = nv;
	copy = strdup(s);
	if (!copy) {
		nv[*n] = NULL;
		return -ENOMEM;
	}
	nv[(*n)++] = copy;
	nv[*n] = NULL;
	return 0;
}

void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

int file_read_text(const char *path, char *buf, size_t len)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}
