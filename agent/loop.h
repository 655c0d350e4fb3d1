/* The agent's event loop: epoll, one handler per descriptor, no fixed table
 * and so no overflow path. Work that may take long (a session's start and
 * teardown, the orphan sweep, the doctor probe, a disk walk) never runs in a
 * handler: it runs in a job thread that reports back through a descriptor
 * (loop_job), so a stall of one session holds up no other. */
#ifndef ERRAND_LOOP_H
#define ERRAND_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct loop;

/* Called with the epoll events seen on fd. It may add and delete any
 * descriptor, its own too. */
typedef void (*loop_fn)(void *arg, int fd, uint32_t events);
/* Once a turn: prepare before the wait (lower *timeout_ms, -1: none), check
 * after the handlers ran. Either may be NULL. */
typedef void (*loop_prepare_fn)(void *arg, int *timeout_ms);
typedef void (*loop_check_fn)(void *arg);

struct loop *loop_new(void);
/* Every descriptor and hook must have been deleted. */
void loop_free(struct loop *l);
/* 0 or -errno (-EEXIST: fd has a handler already). */
int loop_add(struct loop *l, int fd, uint32_t events, loop_fn fn, void *arg);
int loop_mod(struct loop *l, int fd, uint32_t events);
/* Events already seen for fd are not delivered any more. */
void loop_del(struct loop *l, int fd);
/* 0 or -ENOMEM. The pair (arg) identifies the hook for loop_hook_del. */
int loop_hook_add(struct loop *l, loop_prepare_fn prepare, loop_check_fn check, void *arg);
void loop_hook_del(struct loop *l, void *arg);
/* A hook of which there are many (one a session): its check runs in a turn
 * only once loop_hook_wake woke it or its due time came, so an idle one
 * costs a turn a look at its entry, not a call into memory of its own. It
 * returns when it must run next without a wake (boottime ns; 0: next turn;
 * UINT64_MAX: only when woken). It runs in the turn it is added in. */
typedef uint64_t (*loop_lazy_fn)(void *arg, uint64_t now_ns);
int loop_hook_add_lazy(struct loop *l, loop_lazy_fn check, void *arg);
/* From a handler or any code of the loop's thread: arg's hook runs this
 * turn (or the next, when the checks ran already). */
void loop_hook_wake(struct loop *l, void *arg);
/* One turn: prepare, wait (at most max_ms, -1: as the hooks say), handlers,
 * check. 0 or -errno (-EINTR is 0). */
int loop_once(struct loop *l, int max_ms);

/* Runs work(arg) in a thread of its own; done(arg) then runs on the loop,
 * in a handler, after the thread ended. The thread must touch nothing the
 * loop uses. 0 or -errno (neither function runs then). */
int loop_job(struct loop *l, void (*work)(void *arg), void (*done)(void *arg), void *arg);
/* Jobs started and not yet done. */
unsigned loop_jobs(const struct loop *l);

#endif
