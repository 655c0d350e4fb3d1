/* errand-broker's socket I/O: every read, write and connect of a connection
 * goes through its thread's io_uring with a linked timeout, so no phase of a
 * call can outlast its deadline; the connection's fiber waits for it while
 * the thread serves others (fiber.h). Called from a fiber only: elsewhere,
 * or with the ring refusing entries, each returns -EAGAIN. */
#ifndef ERRAND_BROKER_RING_H
#define ERRAND_BROKER_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* One recv: bytes read (0 at end of stream), or -errno, -ETIMEDOUT when
 * timeout_ms passed first. */
ssize_t ring_recv(int fd, void *buf, size_t len, int timeout_ms);
/* Sends all of buf within timeout_ms (per send). 0 or -errno. */
int ring_send_all(int fd, const void *buf, size_t len, int timeout_ms);
/* connect(): 0 or -errno, -ETIMEDOUT when timeout_ms passed first. */
int ring_connect(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms);

/* Monotonic milliseconds, for deadlines. */
int64_t now_ms(void);
/* Wall-clock milliseconds since the epoch, for receipts. */
int64_t wall_ms(void);

#endif
