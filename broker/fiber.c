/* Fibers for errand-broker's connections (fiber.h). Each thread loops: run
 * every fiber whose operation is over until it waits again, then submit what
 * they asked for and wait for the next completions. A fiber's entries carry
 * its address (its timeout's with the low bit set); the thread's eventfd
 * read, which says fibers were handed to it, carries INBOX.
 *
 * On x86_64 a switch is a few instructions of its own (ctx_switch): glibc's
 * swapcontext saves and restores the signal mask with a system call each
 * time, two a wait, which were 9 % of the broker's CPU on intercepted calls
 * (BENCHMARKS.md). Elsewhere, and under AddressSanitizer (which follows
 * stacks through swapcontext), ucontext does it. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif
/* __CET__ bit 2: built for shadow stacks, which a return to an address no
 * call pushed would break (glibc's swapcontext keeps them) */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(FIBER_ASAN) &&               \
	!(defined(__CET__) && (__CET__ & 2))
#define FIBER_OWN_SWITCH 1
#endif

#include "broker/blog.h"
#include "broker/fiber.h"

/* A ring for every thread of every session's broker: kept small (its entries
 * are kernel memory). Completions past the CQ's 128 wait in the kernel's
 * overflow list until the thread reaps, none lost (IORING_FEAT_NODROP). */
#define RING_SQ 64
#define TAG_TIMEOUT 1u
#define INBOX 2u
#define GUARD 4096

struct worker;

#ifdef FIBER_OWN_SWITCH
/* Where a stack was left: its callee-saved registers, MXCSR and the x87
 * control word are on it, below the address the switch returns to. */
struct ctx {
	void *sp;
};

/* Saves the caller's state on its stack and its stack pointer in *from, then
 * takes up the stack at to where a switch (or context_make) left it. No
 * signal mask: no fiber changes it. */
void errand_fiber_switch(void **from, void *to);
__asm__(".text\n"
	".globl errand_fiber_switch\n"
	".hidden errand_fiber_switch\n"
	".type errand_fiber_switch, @function\n"
	"errand_fiber_switch:\n"
	"	pushq %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	subq $8, %rsp\n"
	"	stmxcsr (%rsp)\n"
	"	fnstcw 4(%rsp)\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	ldmxcsr (%rsp)\n"
	"	fldcw 4(%rsp)\n"
	"	addq $8, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	".size errand_fiber_switch, .-errand_fiber_switch\n");

static void ctx_switch(struct ctx *from, const struct ctx *to)
{
	errand_fiber_switch(&from->sp, to->sp);
}
#else
struct ctx {
	ucontext_t uc;
};

static void ctx_switch(struct ctx *from, const struct ctx *to)
{
	swapcontext(&from->uc, &to->uc);
}
#endif

struct fiber {
	struct ctx ctx;
	uint8_t *stack;
	void (*fn)(void *arg);
	void *arg;
	struct worker *w;
	struct fiber *next;
	int res;     /* the operation's result */
	int pending; /* its completions still to come */
	bool timed_out;
	bool done;
};

struct worker {
	pthread_t thread;
	struct io_uring ring;
	struct ctx sched;
	sem_t started; /* posted once the thread has made its ring (start_rc) */
	int start_rc;
	int efd;
	uint64_t efd_val;
	pthread_mutex_t mu;
	struct fiber *inbox, *inbox_tail; /* under mu: handed over, not yet run */
	struct fiber *ready, *ready_tail;
};

static struct worker workers[FIBER_THREADS_MAX];
static int n_workers;
static int start_err;
static atomic_uint next_worker;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread struct fiber *current;

static void ready_push(struct worker *w, struct fiber *f)
{
	f->next = NULL;
	if (w->ready_tail)
		w->ready_tail->next = f;
	else
		w->ready = f;
	w->ready_tail = f;
}

static struct io_uring_sqe *sqe_get(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		io_uring_submit(ring);
		sqe = io_uring_get_sqe(ring);
	}
	return sqe;
}

static void inbox_arm(struct worker *w)
{
	struct io_uring_sqe *sqe = sqe_get(&w->ring);

	if (!sqe) { /* the ring refuses submissions: nothing would run anyway */
		blog_warnx("broker thread: its ring takes no more entries");
		return;
	}
	io_uring_prep_read(sqe, w->efd, &w->efd_val, sizeof(w->efd_val), 0);
	io_uring_sqe_set_data64(sqe, INBOX);
}

static void inbox_take(struct worker *w)
{
	struct fiber *f, *next;

	pthread_mutex_lock(&w->mu);
	f = w->inbox;
	w->inbox = w->inbox_tail = NULL;
	pthread_mutex_unlock(&w->mu);
	for (; f; f = next) {
		next = f->next;
		ready_push(w, f);
	}
	inbox_arm(w);
}

static void complete(struct worker *w, const struct io_uring_cqe *cqe)
{
	uint64_t d = io_uring_cqe_get_data64(cqe);
	struct fiber *f = (struct fiber *)(uintptr_t)(d & ~(uint64_t)TAG_TIMEOUT);

	if (d == INBOX) {
		inbox_take(w);
		return;
	}
	if (d & TAG_TIMEOUT) {
		if (cqe->res == -ETIME)
			f->timed_out = true;
	} else {
		f->res = cqe->res;
	}
	if (--f->pending == 0)
		ready_push(w, f);
}

static void fiber_free(struct fiber *f)
{
	munmap(f->stack, FIBER_STACK);
	free(f);
}

/* A fiber's first switch lands here; once fn returns it goes back to the
 * thread's loop for good, which frees it. */
static void fiber_entry(void)
{
	struct fiber *f = current;

	f->fn(f->arg);
	f->done = true;
	ctx_switch(&f->ctx, &f->w->sched);
	__builtin_unreachable();
}

static void run(struct worker *w, struct fiber *f)
{
	current = f;
	ctx_switch(&w->sched, &f->ctx);
	current = NULL;
	if (f->done)
		fiber_free(f);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int rc;

	/* Made here, so this thread is the ring's single issuer: only it
	 * submits and reaps, always in the wait at the top of its loop, and the
	 * kernel leaves the completions' work for that wait (DEFER_TASKRUN)
	 * rather than interrupting the thread for each, as it does by default.
	 * Kernels before 6.1 refuse the flags: a ring without them there. */
	rc = io_uring_queue_init(RING_SQ, &w->ring,
				 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(RING_SQ, &w->ring, 0);
	w->start_rc = rc;
	sem_post(&w->started);
	if (rc)
		return NULL;
	inbox_arm(w);
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		struct fiber *f;

		while ((f = w->ready)) {
			w->ready = f->next;
			if (!w->ready)
				w->ready_tail = NULL;
			run(w, f);
		}
		io_uring_submit_and_wait(&w->ring, 1);
		io_uring_for_each_cqe(&w->ring, head, cqe)
		{
			seen++;
			complete(w, cqe);
		}
		io_uring_cq_advance(&w->ring, seen);
	}
	return NULL;
}

static int worker_init(struct worker *w)
{
	int rc;

	pthread_mutex_init(&w->mu, NULL);
	w->efd = eventfd(0, EFD_CLOEXEC);
	if (w->efd < 0)
		return -errno;
	/* counted only once its thread has a ring to wait on */
	if (sem_init(&w->started, 0, 0)) {
		rc = -errno;
		close(w->efd);
		return rc;
	}
	if ((rc = pthread_create(&w->thread, NULL, worker_main, w))) {
		sem_destroy(&w->started);
		close(w->efd);
		return -rc;
	}
	while (sem_wait(&w->started) && errno == EINTR)
		;
	sem_destroy(&w->started);
	if (w->start_rc) {
		pthread_join(w->thread, NULL);
		close(w->efd);
		return w->start_rc;
	}
	pthread_detach(w->thread);
	return 0;
}

static void workers_start(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus < 1 ? 1 : cpus > FIBER_THREADS_MAX ? FIBER_THREADS_MAX : (int)cpus;

	for (int i = 0; i < want; i++) {
		int rc = worker_init(&workers[n_workers]);

		if (rc) {
			start_err = rc;
			blog_warnx("broker thread %d of %d cannot start: %s", i + 1, want,
				   strerror(-rc));
			break;
		}
		n_workers++;
	}
}

#ifdef FIBER_OWN_SWITCH
/* The new stack as a switch would have left it: from its top, a return
 * address of none for fiber_entry (which never returns), fiber_entry's for
 * the switch, six registers of zero, this thread's MXCSR and x87 control
 * word. fiber_entry starts with the stack as a call leaves it (16-byte
 * aligned before the return address). */
static int context_make(struct fiber *f)
{
	uint64_t *sp = (uint64_t *)(f->stack + FIBER_STACK);
	uint32_t mxcsr;
	uint16_t fcw;

	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fcw));
	*--sp = 0;
	*--sp = (uint64_t)(uintptr_t)fiber_entry;
	for (int i = 0; i < 6; i++)
		*--sp = 0;
	*--sp = mxcsr | (uint64_t)fcw << 32;
	f->ctx.sp = sp;
	return 0;
}
#else
/* Its own function: getcontext returns twice as far as the compiler knows,
 * though here it never does (makecontext replaces what it saved). */
static int context_make(struct fiber *f)
{
	if (getcontext(&f->ctx.uc))
		return -1;
	f->ctx.uc.uc_stack.ss_sp = f->stack;
	f->ctx.uc.uc_stack.ss_size = FIBER_STACK;
	f->ctx.uc.uc_link = NULL; /* fiber_entry never returns */
	makecontext(&f->ctx.uc, fiber_entry, 0);
	return 0;
}
#endif

static struct fiber *fiber_new(struct worker *w, void (*fn)(void *arg), void *arg)
{
	struct fiber *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->stack = mmap(NULL, FIBER_STACK, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (f->stack == MAP_FAILED) {
		free(f);
		return NULL;
	}
	/* the lowest page faults instead of running into another mapping */
	if (mprotect(f->stack, GUARD, PROT_NONE) || context_make(f)) {
		fiber_free(f);
		return NULL;
	}
	f->fn = fn;
	f->arg = arg;
	f->w = w;
	return f;
}

int fiber_start(void (*fn)(void *arg), void *arg)
{
	uint64_t one = 1;
	struct worker *w;
	struct fiber *f;

	pthread_once(&once, workers_start);
	if (!n_workers)
		return start_err ? start_err : -EAGAIN;
	w = &workers[atomic_fetch_add(&next_worker, 1) % (unsigned)n_workers];
	f = fiber_new(w, fn, arg);
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&w->mu);
	if (w->inbox_tail)
		w->inbox_tail->next = f;
	else
		w->inbox = f;
	w->inbox_tail = f;
	pthread_mutex_unlock(&w->mu);
	/* the counter only grows: a failed write would mean 2^64 - 1 unread */
	if (write(w->efd, &one, sizeof(one)) != sizeof(one))
		blog_warnx("broker thread: cannot wake it: %s", strerror(errno));
	return 0;
}

struct io_uring_sqe *fiber_sqe(void)
{
	struct io_uring *ring;

	if (!current)
		return NULL;
	ring = &current->w->ring;
	if (io_uring_sq_space_left(ring) < 2)
		io_uring_submit(ring);
	if (io_uring_sq_space_left(ring) < 2)
		return NULL;
	return io_uring_get_sqe(ring);
}

/* Lets the thread run others until f's pending completions are in. */
static void fiber_park(struct fiber *f, int pending)
{
	f->pending = pending;
	f->timed_out = false;
	f->res = 0;
	ctx_switch(&f->ctx, &f->w->sched);
}

int fiber_io(struct io_uring_sqe *sqe, int timeout_ms)
{
	struct __kernel_timespec ts = {
		.tv_sec = timeout_ms / 1000,
		.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
	};
	struct fiber *f = current;
	struct io_uring_sqe *t = io_uring_get_sqe(&f->w->ring); /* fiber_sqe left room */

	/* ts stays on this stack until the thread submits it, which is before
	 * this fiber runs again */
	sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, (uintptr_t)f);
	io_uring_prep_link_timeout(t, &ts, 0);
	io_uring_sqe_set_data64(t, (uintptr_t)f | TAG_TIMEOUT);
	fiber_park(f, 2);
	if (f->timed_out && (f->res == -ECANCELED || f->res == -EINTR))
		return -ETIMEDOUT;
	return f->res;
}

struct offload {
	void (*fn)(void *arg);
	void *arg;
	int efd;
};

static void *offload_main(void *arg)
{
	struct offload *o = arg;
	int efd = o->efd; /* o is the fiber's, gone once it has been woken */
	uint64_t one = 1;

	o->fn(o->arg);
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		blog_warnx("broker: a helper thread cannot say it is done: %s", strerror(errno));
	return NULL;
}

void fiber_offload(void (*fn)(void *arg), void *arg)
{
	struct offload o = {fn, arg, -1};
	struct io_uring_sqe *sqe;
	pthread_attr_t attr;
	pthread_t t;
	uint64_t val;
	int rc = -1;

	if (!current || !(sqe = fiber_sqe())) {
		fn(arg);
		return;
	}
	o.efd = eventfd(0, EFD_CLOEXEC);
	if (o.efd >= 0) {
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, offload_main, &o);
		pthread_attr_destroy(&attr);
	}
	if (rc) {
		/* the entry is taken: a no-op goes in instead */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, (uintptr_t)current);
		fiber_park(current, 1);
		if (o.efd >= 0)
			close(o.efd);
		fn(arg);
		return;
	}
	io_uring_prep_read(sqe, o.efd, &val, sizeof(val), 0);
	io_uring_sqe_set_data64(sqe, (uintptr_t)current);
	fiber_park(current, 1);
	/* never closed under a helper still to write: its write is waited for */
	if (current->res != (int)sizeof(val))
		while (read(o.efd, &val, sizeof(val)) < 0 && errno == EINTR)
			;
	close(o.efd);
}
