/* Guarantee: the broker's fibers (broker/fiber.c) each get what their own
 * ring call waited for, also 300 at once (more entries than a thread's ring
 * holds); a call past its deadline returns -ETIMEDOUT then, not before, and
 * holds up no other fiber meanwhile; work handed to a helper thread
 * (fiber_offload) holds up none of the fibers of any thread; outside a
 * fiber, ring calls refuse (-EAGAIN) and an offload runs in place; a fiber's
 * registers and floating-point rounding mode are its own across its waits,
 * whatever the fibers it switched with did meanwhile. */
#include <errno.h>
#include <fenv.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker/fiber.h"
#include "broker/ring.h"
#include "selftests/unit/test.h"

#define MANY 300
#define SLEEPERS (2 * FIBER_THREADS_MAX)

struct reader {
	int fd;
	int timeout_ms;
	ssize_t got;
	char byte;
	int64_t took_ms;
};

static atomic_int done_readers, done_sleepers, woken_early;

static void read_one(void *arg)
{
	struct reader *r = arg;
	int64_t t0 = now_ms();

	r->got = ring_recv(r->fd, &r->byte, 1, r->timeout_ms);
	r->took_ms = now_ms() - t0;
	atomic_fetch_add(&done_readers, 1);
}

/* A reader whose byte is already written. 0, or -1 (the test cannot go on). */
static int fed_reader(struct reader *r)
{
	int p[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
		return -1;
	*r = (struct reader){.fd = p[0], .timeout_ms = 10000};
	return fiber_start(read_one, r) || write(p[1], "x", 1) != 1 ? -1 : 0;
}

static void nap(void *arg)
{
	(void)arg;
	usleep(1000 * 1000);
}

static void sleeper(void *arg)
{
	(void)arg;
	fiber_offload(nap, NULL);
	atomic_fetch_add(&done_sleepers, 1);
}

/* Waits (10 s at most) until *n reaches want. */
static bool await(atomic_int *n, int want)
{
	int64_t end = now_ms() + 10000;

	while (atomic_load(n) < want && now_ms() < end)
		usleep(1000);
	return atomic_load(n) >= want;
}

/* Work whose every value lives across the waits (in callee-saved registers,
 * where the compiler can) and whose result depends on the rounding mode. */
struct keeper {
	int fd;
	int round;
	uint64_t seed;
	uint64_t sum;
	double x;
	int round_after;
};

static atomic_int done_keepers;

static void keep_work(struct keeper *k, bool waits)
{
	uint64_t a = k->seed, b = k->seed * 3 + 1, c = k->seed ^ 0x5555, d = ~k->seed;
	volatile double step = 1.0 / 3.0; /* computed at run time, in the mode */
	double x = (double)k->seed;

	fesetround(k->round);
	for (int i = 0; i < 20; i++) {
		char byte = (char)i;

		if (waits && ring_recv(k->fd, &byte, 1, 10000) != 1)
			byte = -1;
		a += (uint64_t)byte;
		b ^= a << 7;
		c += b >> 3;
		d -= c * 31;
		x = x * 1.1 + byte * step;
	}
	k->round_after = fegetround();
	fesetround(FE_TONEAREST);
	k->sum = a + b + c + d;
	k->x = x;
}

static void keeper_main(void *arg)
{
	keep_work(arg, true);
	atomic_fetch_add(&done_keepers, 1);
}

static void ran_here(void *arg)
{
	*(int *)arg = 1;
}

int main(void)
{
	static struct reader rs[MANY];
	static int peer[MANY];
	struct reader late = {.timeout_ms = 2000}, quick[SLEEPERS];
	int sv[2], bad = 0, here = 0;

	/* outside a fiber */
	test_int(ring_recv(0, &here, 1, 10), -EAGAIN, "a ring call outside a fiber refuses");
	fiber_offload(ran_here, &here);
	test_int(here, 1, "an offload outside a fiber runs in place");

	/* many fibers, each its own socket pair */
	for (int i = 0; i < MANY; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return 1;
		rs[i] = (struct reader){.fd = sv[0], .timeout_ms = 10000};
		peer[i] = sv[1];
		if (fiber_start(read_one, &rs[i]))
			return 1;
	}
	usleep(100 * 1000); /* all of them waiting */
	for (int i = 0; i < MANY; i++) {
		char b = (char)('a' + i % 26);

		if (write(peer[i], &b, 1) != 1)
			return 1;
	}
	test_int(await(&done_readers, MANY), 1, "300 fibers waiting at once all return");
	for (int i = 0; i < MANY; i++)
		bad += rs[i].got != 1 || rs[i].byte != (char)('a' + i % 26);
	test_int(bad, 0, "each with the byte its own peer wrote");

	/* a deadline passing, while others go on */
	atomic_store(&done_readers, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 1;
	late.fd = sv[0];
	if (fiber_start(read_one, &late))
		return 1;
	for (int i = 0; i < 4; i++)
		if (fed_reader(&rs[i]))
			return 1;
	test_int(await(&done_readers, 4), 1, "fibers go on while another waits out its deadline");
	test_int(atomic_load(&done_readers), 4, "(which has not returned by then)");
	test_int(await(&done_readers, 5), 1, "the one past its deadline returns");
	test_int(late.got, -ETIMEDOUT, "with -ETIMEDOUT");
	test_int(late.took_ms >= 1990 && late.took_ms < 5000, 1, "its 2 s after it began");

	/* offloads on every thread, and fibers meanwhile */
	atomic_store(&done_readers, 0);
	for (int i = 0; i < SLEEPERS; i++)
		if (fiber_start(sleeper, NULL))
			return 1;
	usleep(50 * 1000);
	for (int i = 0; i < SLEEPERS; i++)
		if (fed_reader(&quick[i]))
			return 1;
	test_int(await(&done_readers, SLEEPERS), 1, "fibers on every thread return");
	woken_early = atomic_load(&done_sleepers);
	test_int(woken_early, 0, "while the helpers of fibers on those threads still sleep");
	test_int(await(&done_sleepers, SLEEPERS), 1,
		 "the fibers that handed work off return after it");

	/* fibers in four rounding modes, taking turns on the threads at every
	 * byte: each ends as the same work done with no fiber around */
	{
		static const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
		struct keeper ks[16], want;
		int kpeer[16], wrong = 0, modes_lost = 0;

		for (int i = 0; i < 16; i++) {
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
				return 1;
			ks[i] = (struct keeper){
				.fd = sv[0], .round = modes[i % 4], .seed = 1000003u * (uint64_t)i};
			kpeer[i] = sv[1];
			if (fiber_start(keeper_main, &ks[i]))
				return 1;
		}
		for (int n = 0; n < 20; n++) {
			usleep(2000);
			for (int i = 0; i < 16; i++) {
				char b = (char)n;

				if (write(kpeer[i], &b, 1) != 1)
					return 1;
			}
		}
		test_int(await(&done_keepers, 16), 1,
			 "16 fibers working across 20 waits each return");
		for (int i = 0; i < 16; i++) {
			want = (struct keeper){.round = ks[i].round, .seed = ks[i].seed};
			keep_work(&want, false);
			wrong += want.sum != ks[i].sum || want.x != ks[i].x;
			modes_lost += ks[i].round_after != ks[i].round;
		}
		test_int(wrong, 0, "each with its own registers' result, as done without fibers");
		test_int(modes_lost, 0, "each in its own rounding mode to the end");
		/* the modes do give different results: the checks above can tell */
		want = (struct keeper){.round = FE_UPWARD, .seed = 7};
		keep_work(&want, false);
		ks[0] = (struct keeper){.round = FE_DOWNWARD, .seed = 7};
		keep_work(&ks[0], false);
		test_int(want.x != ks[0].x, 1, "(the rounding mode changes the result)");
	}
	return test_exit();
}
