/* Small helpers every errand process uses: cleanup attributes in the manner of
 * bubblewrap, ownership hand-off, array sizes. */
#ifndef ERRAND_UTIL_H
#define ERRAND_UTIL_H

#include <stdlib.h>
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

#endif
