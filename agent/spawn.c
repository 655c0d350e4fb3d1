/* A child started with CLONE_VM | CLONE_VFORK on a stack of its own, born in
 * a cgroup with CLONE_INTO_CGROUP (see spawn.h). glibc (2.36) has no clone3
 * wrapper and its syscall() cannot return on a new stack, so a few
 * instructions per architecture make the call and run the child's
 * function there, as glibc's own clone3 does. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/sched.h>

#include "agent/spawn.h"

/* The child runs a few system calls and an exec: what glibc's printf of an
 * error line needs fits many times over. A guard page below it. */
#define SPAWN_STACK (64 * 1024)
#define SPAWN_GUARD 4096

struct spawn_args {
	int (*fn)(void *arg);
	void *arg;
	const sigset_t *mask;
};

#define STR_(x) #x
#define STR(x) STR_(x)

#if defined(__x86_64__) || defined(__aarch64__)
#define HAVE_TRAMPOLINE 1
/* clone3(ca, size); in the child, on the stack ca names: exit(fn(arg)).
 * Returns the child's pid, or -errno, in the parent. */
long spawn_clone3(struct clone_args *ca, size_t size, int (*fn)(void *), void *arg)
	__attribute__((visibility("hidden")));
#endif

#if defined(__x86_64__)
/* rdi ca, rsi size, rdx fn, rcx arg. The system call keeps every register
 * but rax, rcx and r11, and the child starts with the parent's. */
/* clang-format off */
__asm__(".text\n"
	".globl spawn_clone3\n"
	".hidden spawn_clone3\n"
	".type spawn_clone3, @function\n"
	"spawn_clone3:\n"
#ifdef __CET__
	"	endbr64\n"
#endif
	"	mov %rcx, %r8\n"
	"	mov $" STR(SYS_clone3) ", %eax\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	xor %ebp, %ebp\n"
	"	mov %r8, %rdi\n"
	"	call *%rdx\n"
	"	mov %eax, %edi\n"
	"	mov $" STR(SYS_exit) ", %eax\n"
	"	syscall\n"
	"	hlt\n"
	".size spawn_clone3, .-spawn_clone3\n");
/* clang-format on */
#elif defined(__aarch64__)
/* x0 ca, x1 size, x2 fn, x3 arg; the system call keeps all but x0. */
/* clang-format off */
__asm__(".text\n"
	".globl spawn_clone3\n"
	".hidden spawn_clone3\n"
	".type spawn_clone3, %function\n"
	"spawn_clone3:\n"
#ifdef __ARM_FEATURE_BTI_DEFAULT
	"	hint #34\n"
#endif
	"	mov x8, #" STR(SYS_clone3) "\n"
	"	svc #0\n"
	"	cbz x0, 1f\n"
	"	ret\n"
	"1:	mov x29, xzr\n"
	"	mov x30, xzr\n"
	"	mov x0, x3\n"
	"	blr x2\n"
	"	mov x8, #" STR(SYS_exit) "\n"
	"	svc #0\n"
	"	brk #0\n"
	".size spawn_clone3, .-spawn_clone3\n");
/* clang-format on */
#endif

/* In the child, on its own stack. No handler of the parent's may run here,
 * on memory the parent uses: each goes back to its default before any
 * signal is let in (as posix_spawn does). */
static int child_main(void *p)
{
	const struct spawn_args *a = p;
	struct sigaction sa;

	for (int sig = 1; sig < _NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa))
			continue;
		if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
			sa.sa_handler = SIG_DFL;
			sa.sa_flags = 0;
			sigaction(sig, &sa, NULL);
		}
	}
	sigprocmask(SIG_SETMASK, a->mask, NULL);
	return a->fn(a->arg);
}

static long clone_vm(struct spawn_args *a, int cgroup_fd, char *stack)
{
	struct clone_args ca = {
		.exit_signal = SIGCHLD,
		.stack = (uintptr_t)stack,
		.stack_size = SPAWN_STACK,
	};
	long pid;

	if (cgroup_fd >= 0) {
		ca.flags = CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)cgroup_fd;
#ifdef HAVE_TRAMPOLINE
		ca.flags |= CLONE_VM | CLONE_VFORK;
		pid = spawn_clone3(&ca, sizeof(ca), child_main, a);
		if (pid >= 0)
			return pid;
#else
		/* Born in its cgroup all the same, by a fork. */
		ca.stack = 0;
		ca.stack_size = 0;
		pid = syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid == 0)
			_exit(child_main(a));
		if (pid > 0)
			return pid;
#endif
		/* No clone3 (a seccomp profile may refuse it), or the cgroup
		 * refuses a child so made: born here. */
	}
	pid = clone(child_main, stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
	return pid < 0 ? -errno : pid;
}

pid_t spawn_fn(int (*fn)(void *arg), void *arg, int cgroup_fd)
{
	sigset_t all, old;
	struct spawn_args a = {.fn = fn, .arg = arg, .mask = &old};
	char *map;
	long pid;

	map = mmap(NULL, SPAWN_GUARD + SPAWN_STACK, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (map == MAP_FAILED)
		return -errno;
	if (mprotect(map, SPAWN_GUARD, PROT_NONE)) {
		pid = -errno;
		munmap(map, SPAWN_GUARD + SPAWN_STACK);
		return (pid_t)pid;
	}
	/* Every signal waits until the child has its own mask (this thread's:
	 * old) and its handlers are reset. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone_vm(&a, cgroup_fd, map + SPAWN_GUARD);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* CLONE_VFORK: the child has exec'd or exited; its stack is free. */
	munmap(map, SPAWN_GUARD + SPAWN_STACK);
	return (pid_t)pid;
}
