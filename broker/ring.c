/* One operation at a time on a connection's own ring, each linked to a
 * timeout: the thread waits for both completions, so nothing is left in
 * flight when a call returns. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "broker/ring.h"

#define RING_ENTRIES 8

int ring_setup(struct io_uring *ring)
{
	return io_uring_queue_init(RING_ENTRIES, ring, 0);
}

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

int64_t wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

/* Submits sqe (already prepared) with a linked timeout and returns the
 * operation's result; -ETIMEDOUT when the timeout cancelled it. */
static int ring_wait(struct io_uring *ring, struct io_uring_sqe *sqe, int timeout_ms)
{
	struct __kernel_timespec ts = {
		.tv_sec = timeout_ms / 1000,
		.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
	};
	struct io_uring_sqe *t;
	struct io_uring_cqe *cqe;
	int res = 0, seen = 0, rc;
	bool timed_out = false;

	sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, 1);
	t = io_uring_get_sqe(ring);
	io_uring_prep_link_timeout(t, &ts, 0);
	io_uring_sqe_set_data64(t, 2);
	/* one system call submits both and waits for both */
	rc = io_uring_submit_and_wait(ring, 2);
	if (rc < 0 && rc != -EINTR)
		return rc;
	while (seen < 2) {
		rc = io_uring_wait_cqe(ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc < 0)
			return rc;
		if (cqe->user_data == 1)
			res = cqe->res;
		else if (cqe->res == -ETIME)
			timed_out = true;
		io_uring_cqe_seen(ring, cqe);
		seen++;
	}
	if (timed_out && (res == -ECANCELED || res == -EINTR))
		return -ETIMEDOUT;
	return res;
}

ssize_t ring_recv(struct io_uring *ring, int fd, void *buf, size_t len, int timeout_ms)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_recv(sqe, fd, buf, len, 0);
	return ring_wait(ring, sqe, timeout_ms);
}

int ring_send_all(struct io_uring *ring, int fd, const void *buf, size_t len, int timeout_ms)
{
	const uint8_t *p = buf;

	while (len) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		int n;

		io_uring_prep_send(sqe, fd, p, len, MSG_NOSIGNAL);
		n = ring_wait(ring, sqe, timeout_ms);
		if (n < 0)
			return n;
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ring_connect(struct io_uring *ring, int fd, const struct sockaddr *sa, socklen_t len,
		 int timeout_ms)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_connect(sqe, fd, sa, len);
	return ring_wait(ring, sqe, timeout_ms);
}
