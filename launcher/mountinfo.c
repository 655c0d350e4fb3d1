/* Whether a PID 1 made ahead still sees the host's mounts along the granted
 * paths: the mounts on, above and below each, read from the host's
 * mountinfo and from PID 1's, where the host's root is at /oldroot. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/escape.h"
#include "lib/util.h"

/* What of a mount both namespaces show alike: where it is (relative to the
 * reader's root, so PID 1's under its /oldroot), its file system (major:minor
 * of the superblock, which a copied mount keeps), the directory of that file
 * system it shows, and its own options (read-only, nosuid, ...). Mount ids
 * and parents are new in a copy, and the propagation fields changed when
 * PID 1 made its mounts private: neither is compared. */
struct mnt {
	const char *point;
	const char *dev, *root, *opts;
	size_t order; /* its place in the file: stacked mounts keep theirs */
};

/* The whole file: mountinfo is made as it is read, in pages. NULL with
 * errno set. The caller frees it. */
static char *read_all(const char *path)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 16384;
	char *buf = NULL, *grown;
	ssize_t n;

	if (fd < 0)
		return NULL;
	do {
		if (len + 1 >= cap || !buf) {
			cap *= buf ? 2 : 1;
			if (!(grown = realloc(buf, cap))) {
				free(buf);
				return NULL;
			}
			buf = grown;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return NULL;
		}
		len += (size_t)n;
	} while (n > 0);
	buf[len] = '\0';
	return buf;
}

/* The mounts of buf (cut up in place) under `under` ("" for all), with
 * their points made relative to it, but those at or below skip, and those
 * `along` does not want. The count, or -errno. */
static ssize_t parse(char *buf, const char *under, const char *skip,
		     bool (*along)(const char *point, const void *arg), const void *arg,
		     struct mnt **out)
{
	size_t n = 0, cap = 0, under_len = strlen(under);
	struct mnt *v = NULL, *grown;
	char *line, *next;

	for (line = buf; *line; line = next) {
		char *f[6], *p = line;
		const char *point;
		int k;

		next = strchr(line, '\n');
		next = next ? (*next = '\0', next + 1) : line + strlen(line);
		for (k = 0; k < 6 && p; k++) {
			f[k] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = '\0';
		}
		if (k < 6)
			continue; /* not a mount's line */
		esc_mountinfo_undo(f[4]);
		if (strncmp(f[4], under, under_len) || (f[4][under_len] && f[4][under_len] != '/'))
			continue;
		point = f[4][under_len] ? f[4] + under_len : "/";
		if ((skip && path_beneath(point, skip)) || !along(point, arg))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			if (!(grown = realloc(v, cap * sizeof(*v)))) {
				free(v);
				return -ENOMEM;
			}
			v = grown;
		}
		v[n] = (struct mnt){
			.point = point, .dev = f[2], .root = f[3], .opts = f[5], .order = n};
		n++;
	}
	*out = v;
	return (ssize_t)n;
}

static int mnt_cmp(const void *x, const void *y)
{
	const struct mnt *a = x, *b = y;
	int c = strcmp(a->point, b->point);

	if (c)
		return c;
	return a->order < b->order ? -1 : a->order > b->order;
}

bool mountinfo_differs(pid_t pid, const char *under, const char *skip,
		       bool (*along)(const char *point, const void *arg), const void *arg)
{
	cleanup_free char *mine = read_all("/proc/self/mountinfo"), *theirs = NULL;
	cleanup_free struct mnt *a = NULL, *b = NULL;
	char path[64];
	ssize_t na, nb;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	if (!mine || !(theirs = read_all(path)))
		return true;
	na = parse(mine, "", skip, along, arg, &a);
	nb = parse(theirs, under, skip, along, arg, &b);
	if (na < 0 || nb < 0 || na != nb)
		return true;
	/* In the host in the order they were mounted, in a copy in the order
	 * the copy walked the tree */
	qsort(a, (size_t)na, sizeof(*a), mnt_cmp);
	qsort(b, (size_t)nb, sizeof(*b), mnt_cmp);
	for (ssize_t i = 0; i < na; i++)
		if (strcmp(a[i].point, b[i].point) || strcmp(a[i].dev, b[i].dev) ||
		    strcmp(a[i].root, b[i].root) || strcmp(a[i].opts, b[i].opts))
			return true;
	return false;
}
