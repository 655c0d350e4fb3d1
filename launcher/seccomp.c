/* The session's syscall filter (libseccomp), loaded last before exec. Only
 * x86_64's own entry points pass: i386's (int 0x80) and x32's get ENOSYS
 * before the kernel sees them. Blocked calls get ENOSYS, as cowboy's
 * sheepdog tier does, so that programs take their fallbacks (glibc makes
 * threads with clone when clone3 is missing); socket() of a family other than
 * AF_UNIX, AF_INET and AF_INET6 gets EAFNOSUPPORT; the terminal ioctls that
 * push input into another program's terminal (TIOCSTI, TIOCLINUX) get EPERM,
 * compared on the low 32 bits the kernel reads; clone() asking for a new
 * namespace gets EPERM, as unshare and setns get ENOSYS; a mode with the
 * setuid or setgid bit, to chmod or to a call that creates a file, gets
 * EPERM (see mode_calls). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *const blocked[] = {
	"bpf",
	"ptrace",
	"process_vm_readv",
	"process_vm_writev",
	"perf_event_open",
	"userfaultfd",
	"keyctl",
	"add_key",
	"request_key",
	"mount",
	"umount2",
	"pivot_root",
	"move_mount",
	"open_tree",
	"fsopen",
	"fsmount",
	"fsconfig",
	"fspick",
	"mount_setattr",
	"open_tree_attr",
	"kexec_load",
	"kexec_file_load",
	"init_module",
	"finit_module",
	"delete_module",
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",
	"clone3",
	"unshare",
	"setns",
	/* Its mode hides in a struct the filter cannot read (see mode_calls);
	 * programs fall back to openat. */
	"openat2",
};

/* Calls that set a file's mode, and which argument holds it. The session
 * writes its project as the project's owner (an idmapped mount, see
 * ns.c): a setuid or setgid file it made there would run as that owner
 * (root, for a root-owned project) for whoever executes it on the host. */
static const struct {
	const char *name;
	unsigned int arg;
} mode_calls[] = {
	{"chmod", 1},  {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}, {"open", 2},
	{"openat", 3}, {"creat", 1},  {"mknod", 1},    {"mknodat", 2},
};

/* Calls newer than some libseccomp errand links knows (Debian 12's 2.5.4
 * lacks open_tree_attr), by number: every architecture numbers the calls
 * added since Linux 5.1 alike. */
static const struct {
	const char *name;
	int nr;
} newer[] = {
	{"fchmodat2", 452},	 /* Linux 6.6 */
	{"open_tree_attr", 467}, /* Linux 6.15: open_tree's clone, with attributes */
};

/* A call by name: libseccomp's number, else newer[]'s. One neither knows is
 * refused (-ENOSYS): the kernel would not see it filtered. A call of another
 * architecture only (socketcall, stat64 on x86_64; open, chmod on aarch64),
 * which libseccomp numbers below zero, is -ENOENT: there is nothing of it to
 * filter, and the filter refuses every other architecture whole. */
static int syscall_nr(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	for (size_t i = 0; nr == __NR_SCMP_ERROR && i < ARRAY_SIZE(newer); i++)
		if (!strcmp(newer[i].name, name))
			nr = newer[i].nr;
	if (nr < 0 && nr != __NR_SCMP_ERROR)
		return -ENOENT;
	if (nr == __NR_SCMP_ERROR) {
		log_warnx("errand's seccomp filter names %s, which neither libseccomp nor errand "
			  "knows the number of; rebuild errand against a newer libseccomp",
			  name);
		return -ENOSYS;
	}
	return nr;
}

static const unsigned long clone_ns[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
					 CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned int n,
		const struct scmp_arg_cmp *cmp)
{
	int nr = syscall_nr(name), r;

	if (nr == -ENOENT)
		return 0;
	if (nr < 0)
		return nr;
	r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	if (r < 0)
		log_warnx("cannot add the seccomp rule for %s: %s", name, strerror(-r));
	return r;
}

static int add_socket_rules(scmp_filter_ctx ctx)
{
	const uint32_t no = SCMP_ACT_ERRNO(EAFNOSUPPORT);
	struct scmp_arg_cmp gt = SCMP_A0(SCMP_CMP_GT, AF_INET6);
	int r;

	/* libseccomp takes one comparison per argument in a rule, so "not 1, 2
	 * or 10" is every value around them: 0, 3 to 9, and above 10 (which
	 * holds any value with upper bits set, too). */
	if ((r = rule(ctx, no, "socket", 1, &gt)) < 0)
		return r;
	for (unsigned long af = 0; af < AF_INET6; af++) {
		struct scmp_arg_cmp eq = SCMP_A0(SCMP_CMP_EQ, af);

		if (af == AF_UNIX || af == AF_INET)
			continue;
		if ((r = rule(ctx, no, "socket", 1, &eq)) < 0)
			return r;
	}
	return 0;
}

static int add_mode_rules(scmp_filter_ctx ctx)
{
	const unsigned long bits[] = {S_ISUID, S_ISGID};
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(mode_calls); i++) {
		int nr = syscall_nr(mode_calls[i].name);

		if (nr == -ENOENT)
			continue;
		if (nr < 0)
			return nr;
		for (size_t b = 0; b < ARRAY_SIZE(bits); b++) {
			struct scmp_arg_cmp c = {mode_calls[i].arg, SCMP_CMP_MASKED_EQ, bits[b],
						 bits[b]};

			r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &c);
			if (r < 0) {
				log_warnx("cannot add the seccomp rule for %s: %s",
					  mode_calls[i].name, strerror(-r));
				return r;
			}
		}
	}
	return 0;
}

static int build(scmp_filter_ctx ctx, const struct launch_list *block)
{
	const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX};
	int r;

	/* The native arch only: anything else (i386, and x32, which x86_64
	 * filters set apart by the syscall number's x32 bit) is a bad arch. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS))) < 0) {
		log_warnx("cannot set the seccomp filter's action for other architectures: %s",
			  strerror(-r));
		return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(blocked); i++)
		if ((r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), blocked[i], 0, NULL)) < 0)
			return r;
	for (size_t i = 0; i < block->n; i++) {
		if (seccomp_syscall_resolve_name(block->v[i]) == __NR_SCMP_ERROR) {
			log_warnx("--block-syscall %s: libseccomp knows no such system call; check "
				  "the name",
				  block->v[i]);
			return -EINVAL;
		}
		if ((r = rule(ctx, SCMP_ACT_ERRNO(ENOSYS), block->v[i], 0, NULL)) < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(clone_ns); i++) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns[i], clone_ns[i]);

		if ((r = rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &c)) < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(ioctls); i++) {
		/* The kernel reads the request as 32 bits: TIOCSTI | 1 << 32 is TIOCSTI. */
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, ioctls[i]);

		if ((r = rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &c)) < 0)
			return r;
	}
	if ((r = add_mode_rules(ctx)) < 0)
		return r;
	return add_socket_rules(ctx);
}

/* The filter errand's own list makes, as the kernel takes it: built by a
 * launcher started ahead while it waits for its session (libseccomp's
 * rules and their translation are a third of a millisecond). */
static struct sock_fprog ahead;

void seccomp_prepare(void)
{
	static const struct launch_list none;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	struct stat st;
	void *prog = NULL;
	int fd = -1;

	if (!ctx)
		return;
	if (build(ctx, &none) == 0 && (fd = memfd_create("errand-seccomp", MFD_CLOEXEC)) >= 0 &&
	    seccomp_export_bpf(ctx, fd) == 0 && fstat(fd, &st) == 0 && st.st_size > 0 &&
	    st.st_size % sizeof(struct sock_filter) == 0 &&
	    st.st_size <= BPF_MAXINSNS * (off_t)sizeof(struct sock_filter) &&
	    (prog = malloc((size_t)st.st_size)) &&
	    pread(fd, prog, (size_t)st.st_size, 0) == st.st_size) {
		ahead.filter = prog;
		ahead.len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
		prog = NULL;
	}
	free(prog);
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
}

static int load_failed(int r)
{
	log_warnx("cannot load the seccomp filter: %s; this requires CONFIG_SECCOMP_FILTER",
		  strerror(-r));
	return r;
}

int seccomp_apply(const struct launch_args *a)
{
	scmp_filter_ctx ctx;
	int r;

	/* no_new_privs is the outer launcher's, inherited */
	if (ahead.filter && a->block.n == 0) {
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &ahead) == 0)
			return 0;
		return load_failed(-errno);
	}
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		log_warnx("cannot set up a seccomp filter; this requires libseccomp and "
			  "CONFIG_SECCOMP_FILTER");
		return -ENOMEM;
	}
	r = build(ctx, &a->block); /* each failure of which says itself */
	if (r == 0 && (r = seccomp_load(ctx)) < 0)
		load_failed(r);
	seccomp_release(ctx);
	return r;
}
