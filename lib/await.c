/* The hand-over to a launcher started ahead (see await.h): one header with
 * the descriptors attached, then the command line, NUL-separated. */
#include "lib/await.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AWAIT_MAGIC 0x65726177u	  /* "eraw" */
#define AWAIT_ARGS_MAX (1u << 21) /* execve's own bound on a command line */

struct await_header {
	uint32_t magic;
	uint32_t n_fds;
	uint32_t len; /* of the command line that follows */
	int32_t nice;
	int32_t target[AWAIT_FDS_MAX];
};

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, char *p, size_t len)
{
	while (len) {
		ssize_t r = read(fd, p, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EPROTO;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

int await_send(int sock, const char *const *args, const int *fds, const int *target, size_t n,
	       int nice)
{
	struct await_header h = {.magic = AWAIT_MAGIC, .n_fds = (uint32_t)n, .nice = nice};
	union {
		char buf[CMSG_SPACE(sizeof(int) * AWAIT_FDS_MAX)];
		struct cmsghdr align;
	} c = {};
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;
	size_t len = 0, off = 0;
	char *text;
	ssize_t w;
	int rc;

	if (n == 0 || n > AWAIT_FDS_MAX)
		return -EINVAL;
	for (size_t i = 0; args[i]; i++)
		len += strlen(args[i]) + 1;
	if (len > AWAIT_ARGS_MAX)
		return -E2BIG;
	text = malloc(len ? len : 1);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; args[i]; i++) {
		size_t l = strlen(args[i]) + 1;

		memcpy(text + off, args[i], l);
		off += l;
	}
	h.len = (uint32_t)len;
	for (size_t i = 0; i < n; i++)
		h.target[i] = target[i];
	m.msg_control = c.buf;
	m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	do
		w = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		rc = -errno;
	else if ((size_t)w < sizeof(h))
		rc = write_all(sock, (const char *)&h + w, sizeof(h) - (size_t)w);
	else
		rc = 0;
	if (!rc)
		rc = write_all(sock, text, len);
	free(text);
	return rc;
}

/* Each received descriptor goes on its number; they are all moved above
 * every such number first, so none is overwritten before it is placed. */
static int place_fds(const int *got, const int32_t *target, size_t n)
{
	int moved[AWAIT_FDS_MAX], top = 2;

	for (size_t i = 0; i < n; i++) {
		if (target[i] < 0)
			return -EBADF;
		if (target[i] > top)
			top = target[i];
	}
	for (size_t i = 0; i < n; i++) {
		moved[i] = fcntl(got[i], F_DUPFD_CLOEXEC, top + 1);
		if (moved[i] < 0)
			return -errno;
		close(got[i]);
	}
	for (size_t i = 0; i < n; i++) {
		if (dup2(moved[i], target[i]) < 0)
			return -errno;
		close(moved[i]);
	}
	return 0;
}

int await_recv(int sock, int *argc, char ***argv, int *nice)
{
	struct await_header h;
	union {
		char buf[CMSG_SPACE(sizeof(int) * AWAIT_FDS_MAX)];
		struct cmsghdr align;
	} c;
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = c.buf,
			   .msg_controllen = sizeof(c.buf)};
	int got[AWAIT_FDS_MAX], n_got = 0, rc;
	char *text = NULL, **v = NULL;
	size_t n = 0;
	ssize_t r;

	do
		r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		rc = r == 0 ? -ENODATA : -errno;
		close(sock);
		return rc;
	}
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (size_t i = 0; i < k && n_got < AWAIT_FDS_MAX; i++)
			memcpy(&got[n_got++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
	}
	rc = (m.msg_flags & MSG_CTRUNC) ? -EMSGSIZE : 0;
	if (!rc && (size_t)r < sizeof(h))
		rc = read_all(sock, (char *)&h + r, sizeof(h) - (size_t)r);
	if (!rc && (h.magic != AWAIT_MAGIC || h.n_fds != (uint32_t)n_got || h.len == 0 ||
		    h.len > AWAIT_ARGS_MAX))
		rc = -EPROTO;
	if (!rc && !(text = malloc(h.len)))
		rc = -ENOMEM;
	if (!rc)
		rc = read_all(sock, text, h.len);
	if (!rc && text[h.len - 1] != '\0')
		rc = -EPROTO;
	if (!rc) {
		for (size_t i = 0; i < h.len; i++)
			n += text[i] == '\0';
		/* the pointers and the strings in one allocation */
		v = malloc((n + 1) * sizeof(*v) + h.len);
		if (!v)
			rc = -ENOMEM;
	}
	if (!rc) {
		char *p = memcpy((char *)(v + n + 1), text, h.len);

		for (size_t i = 0; i < n; i++) {
			v[i] = p;
			p += strlen(p) + 1;
		}
		v[n] = NULL;
	}
	free(text);
	/* sock may sit on a number the command line names */
	close(sock);
	if (!rc) {
		rc = place_fds(got, h.target, (size_t)n_got);
		n_got = 0; /* placed, or closed on the way */
	}
	for (int i = 0; i < n_got; i++)
		close(got[i]);
	if (rc) {
		free(v);
		return rc;
	}
	*argc = (int)n;
	*argv = v;
	*nice = h.nice;
	return 0;
}
