/* errand-broker's socket I/O: each connection's thread owns a small io_uring
 * and every read, write and connect goes through it with a linked timeout,
 * so no phase of a call can outlast its deadline. */
#ifndef ERRAND_BROKER_RING_H
#define ERRAND_BROKER_RING_H

#include <liburing.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* 0 or -errno. */
int ring_setup(struct io_uring *ring);

/* One recv: bytes read (0 at end of stream), or -errno, -ETIMEDOUT when
 * timeout_ms passed first. */
ssize_t ring_recv(struct io_uring *ring, int fd, void *buf, size_t len, int timeout_ms);
/* Sends all of buf within timeout_ms (per send). 0 or -errno. */
int ring_send_all(struct io_uring *ring, int fd, const void *buf, size_t len, int timeout_ms);
/* connect(): 0 or -errno, -ETIMEDOUT when timeout_ms passed first. */
int ring_connect(struct io_uring *ring, int fd, const struct sockaddr *sa, socklen_t len,
		 int timeout_ms);

/* Monotonic milliseconds, for deadlines. */
int64_t now_ms(void);
/* Wall-clock milliseconds since the epoch, for receipts. */
int64_t wall_ms(void);

#endif
