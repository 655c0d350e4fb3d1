/* Turns the kernel's run-time statistics of BPF programs on
 * (BPF_ENABLE_STATS) until it is ended: meanwhile each program's
 * run_time_ns and run_cnt (bpftool prog show) count. For bench/egress.sh,
 * which reads them before and after one arm to say what errand's programs
 * cost a connection; not part of errand.
 *
 *   bpfstats    prints "on" once they are, then waits for a signal; exit
 *               status 1 when they cannot be turned on
 *
 * They cost a clock read or two each time a program runs, on every program
 * of the host: an arm measured under them is slower than the rounds. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.enable_stats.type = BPF_STATS_RUN_TIME;
	/* On while this descriptor is open: until this process ends. */
	fd = (int)syscall(__NR_bpf, BPF_ENABLE_STATS, &attr, sizeof(attr));
	if (fd < 0) {
		fprintf(stderr, "bpfstats: cannot turn BPF run-time statistics on: %s\n",
			strerror(errno));
		return 1;
	}
	printf("on\n");
	fflush(stdout);
	for (;;)
		pause();
}
