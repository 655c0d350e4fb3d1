/* One operation at a time for a connection, each linked to a timeout, on
 * its thread's ring: the fiber waits for both completions, so nothing is
 * left in flight when a call returns. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "broker/fiber.h"
#include "broker/ring.h"

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

ssize_t ring_recv(int fd, void *buf, size_t len, int timeout_ms)
{
	struct io_uring_sqe *sqe = fiber_sqe();

	if (!sqe)
		return -EAGAIN;
	io_uring_prep_recv(sqe, fd, buf, len, 0);
	return fiber_io(sqe, timeout_ms);
}

int ring_send_all(int fd, const void *buf, size_t len, int timeout_ms)
{
	const uint8_t *p = buf;

	while (len) {
		struct io_uring_sqe *sqe = fiber_sqe();
		int n;

		if (!sqe)
			return -EAGAIN;
		io_uring_prep_send(sqe, fd, p, len, MSG_NOSIGNAL);
		n = fiber_io(sqe, timeout_ms);
		if (n < 0)
			return n;
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ring_connect(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	struct io_uring_sqe *sqe = fiber_sqe();

	if (!sqe)
		return -EAGAIN;
	io_uring_prep_connect(sqe, fd, sa, len);
	return fiber_io(sqe, timeout_ms);
}
