/* errand-broker's connections as fibers: a few threads, one a CPU (at most
 * FIBER_THREADS_MAX), each running many connections on stacks of their own
 * and waiting for all of their I/O on one io_uring. A connection's code reads
 * as if it had the thread to itself (ring.c's calls return when their
 * operation is over); underneath, a wait hands the thread to whichever
 * connection's operation is over next. Under load a thread finds many
 * completions each time it waits and runs them in turn, where a thread a
 * connection slept and woke for each of them.
 *
 * A fiber must never block its thread: what waits on anything but the ring
 * (a c-ares lookup, a condition variable) goes through fiber_offload. No
 * lock may be held across a ring call. */
#ifndef ERRAND_BROKER_FIBER_H
#define ERRAND_BROKER_FIBER_H

#include <liburing.h>

#define FIBER_THREADS_MAX 4
#define FIBER_STACK (1024 * 1024) /* reserved, not committed: touched pages only */

/* Runs fn(arg) as a fiber on one of the threads, started at the first call.
 * 0, or -errno with nothing started. */
int fiber_start(void (*fn)(void *arg), void *arg);

/* A submission entry of the calling fiber's ring with room for one more after
 * it (for fiber_io's timeout), or NULL outside a fiber. */
struct io_uring_sqe *fiber_sqe(void);
/* Submits sqe (from fiber_sqe, prepared) linked to a timeout of timeout_ms
 * and waits, letting other fibers run, until both are over. The operation's
 * result; -ETIMEDOUT when the timeout cancelled it. */
int fiber_io(struct io_uring_sqe *sqe, int timeout_ms);
/* Runs fn(arg) on a thread of its own and waits for it to return, letting
 * other fibers run. Outside a fiber, or when no thread can be started, runs
 * it in place (holding up the thread's other fibers meanwhile). */
void fiber_offload(void (*fn)(void *arg), void *arg);

#endif
