/* sysprobe: the launcher tests' tool. Each subcommand attempts one thing a
 * session's seccomp filter, rlimits or namespaces decide, and prints what
 * happened: "ok", or the errno's name (ENOSYS, EAFNOSUPPORT, EPERM, EFBIG).
 * Exit 0 whatever the answer (the line is the result), 2 on a usage error. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#define X32_SYSCALL_BIT 0x40000000UL
#define I386_GETPID 20

static int usage(void)
{
	fprintf(stderr,
		"usage: sysprobe sys NAME[:NR]...     each syscall with zero arguments: "
		"NAME=RESULT\n"
		"       sysprobe socket FAMILY         packet|netlink|vsock|unix|inet|inet6|N\n"
		"       sysprobe ioctl tiocsti|tiocsti-high|tioclinux\n"
		"       sysprobe threads               pthread_create and join\n"
		"       sysprobe clone-ns              clone() asking for a new user namespace\n"
		"       sysprobe x32 | i386            getpid through that entry point\n"
		"       sysprobe fsize FILE BYTES      write BYTES to FILE, SIGXFSZ ignored\n"
		"       sysprobe read FILE | write FILE\n"
		"       sysprobe ifaddr IFACE          its IPv4 address/prefix (no netlink)\n"
		"       sysprobe net                   links=, routes=, gw= lines from "
		"/proc/net\n"
		"       sysprobe landlock-abi          the kernel's Landlock ABI (0: none)\n"
		"       sysprobe edit FILE | unlink PATH | mkdir DIR | rename A B | link A B\n"
		"       sysprobe unix-connect PATH     a stream connect to a bound socket\n"
		"       sysprobe unix-listen PATH      bind, listen, accept and close, forever\n");
	return 2;
}

static const char *err_name(int err)
{
	const char *n = strerrorname_np(err);

	return n ? n : "EUNKNOWN";
}

static int result(long r, int err)
{
	printf("%s\n", r < 0 ? err_name(err) : "ok");
	return 0;
}

/* Zero arguments do nothing harmful for any call the tests name; unfiltered
 * most fail with EFAULT or EINVAL, which is as good as a result. A name may
 * be NAME:NUMBER, for a call this libseccomp does not know. */
static int cmd_sys(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		const char *colon = strchr(argv[i], ':');
		int nr = colon ? atoi(colon + 1) : seccomp_syscall_resolve_name(argv[i]);
		long r;

		if (nr == __NR_SCMP_ERROR) {
			printf("%s=EUNKNOWN\n", argv[i]);
			continue;
		}
		errno = 0;
		r = syscall(nr, 0L, 0L, 0L, 0L, 0L, 0L);
		printf("%.*s=%s\n", colon ? (int)(colon - argv[i]) : (int)strlen(argv[i]), argv[i],
		       r < 0 ? err_name(errno) : "ok");
	}
	return 0;
}

static int cmd_socket(const char *fam)
{
	static const struct {
		const char *name;
		int af, type;
	} fams[] = {
		{"packet", AF_PACKET, SOCK_DGRAM}, {"netlink", AF_NETLINK, SOCK_RAW},
		{"vsock", AF_VSOCK, SOCK_STREAM},  {"unix", AF_UNIX, SOCK_STREAM},
		{"inet", AF_INET, SOCK_STREAM},	   {"inet6", AF_INET6, SOCK_STREAM},
	};
	int af = -1, type = SOCK_DGRAM, fd;

	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		if (!strcmp(fam, fams[i].name)) {
			af = fams[i].af;
			type = fams[i].type;
		}
	if (af < 0) {
		char *end;

		af = (int)strtol(fam, &end, 10);
		if (*end || af < 0)
			return usage();
	}
	fd = socket(af, type | SOCK_CLOEXEC, 0);
	return result(fd, errno);
}

/* On stdin (a terminal or not: the filter answers before the driver). */
static int cmd_ioctl(const char *what)
{
	unsigned long req;
	char c = 'x';
	long r;

	if (!strcmp(what, "tiocsti"))
		req = TIOCSTI;
	else if (!strcmp(what, "tiocsti-high"))
		req = TIOCSTI | (1UL << 32);
	else if (!strcmp(what, "tioclinux"))
		req = TIOCLINUX;
	else
		return usage();
	/* The raw call, so the upper bits reach the kernel as given. */
	r = syscall(SYS_ioctl, 0, req, &c);
	return result(r, errno);
}

static void *thread_main(void *arg)
{
	return arg;
}

static int cmd_threads(void)
{
	pthread_t t[4];
	int r;

	for (int i = 0; i < 4; i++) {
		r = pthread_create(&t[i], NULL, thread_main, NULL);
		if (r)
			return result(-1, r);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return result(0, 0);
}

static int cmd_clone_ns(void)
{
	long pid = syscall(SYS_clone, (unsigned long)CLONE_NEWUSER | SIGCHLD, 0UL, 0UL, 0UL, 0UL);
	int err = errno;

	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return result(pid, err);
}

static int cmd_x32(void)
{
	long r = syscall(X32_SYSCALL_BIT | SYS_getpid);

	return result(r, errno);
}

static int cmd_i386(void)
{
	long r;

	/* int 0x80 from a 64-bit process enters the kernel's i386 table. */
	__asm__ volatile("int $0x80"
			 : "=a"(r)
			 : "a"((long)I386_GETPID)
			 : "memory", "r8", "r9", "r10", "r11");
	return result(r < 0 && r > -4096 ? -1 : r, (int)-r);
}

static int cmd_fsize(const char *file, const char *bytes)
{
	long long want = atoll(bytes), done = 0;
	char buf[65536];
	int fd;

	signal(SIGXFSZ, SIG_IGN);
	memset(buf, 'x', sizeof(buf));
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return result(-1, errno);
	while (done < want) {
		size_t n =
			want - done < (long long)sizeof(buf) ? (size_t)(want - done) : sizeof(buf);
		ssize_t w = write(fd, buf, n);

		if (w < 0) {
			int e = errno;

			close(fd);
			return result(-1, e);
		}
		done += w;
	}
	close(fd);
	return result(0, 0);
}

static int cmd_open(const char *file, int flags)
{
	int fd = open(file, flags | O_CLOEXEC, 0600);

	if (fd >= 0)
		close(fd);
	return result(fd, errno);
}

static int cmd_ifaddr(const char *ifname)
{
	struct ifreq ifr = {0};
	char a[INET_ADDRSTRLEN];
	uint32_t mask;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), plen = 0;

	if (fd < 0)
		return result(-1, errno);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFADDR, &ifr) < 0)
		return result(-1, errno);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr, a, sizeof(a));
	if (ioctl(fd, SIOCGIFNETMASK, &ifr) < 0)
		return result(-1, errno);
	mask = ntohl(((struct sockaddr_in *)&ifr.ifr_netmask)->sin_addr.s_addr);
	for (; mask & 0x80000000U; mask <<= 1)
		plen++;
	printf("%s/%d\n", a, plen);
	close(fd);
	return 0;
}

static void ip4(const char *hex, char *out, size_t len)
{
	struct in_addr a = {.s_addr = (in_addr_t)strtoul(hex, NULL, 16)};

	inet_ntop(AF_INET, &a, out, (socklen_t)len);
}

/* What `ip link` and `ip route` would say, read without netlink (which a
 * session's filter refuses): "links=lo eth0 ", "routes=default via G dev
 * eth0;NET/LEN dev eth0;", "gw=G". */
static int cmd_net(void)
{
	char line[512], ifc[IFNAMSIZ + 1], dst[9], gw[9], mask[9], a[INET_ADDRSTRLEN];
	char g[INET_ADDRSTRLEN] = "";
	FILE *f = fopen("/proc/net/dev", "re");
	int n = 0;

	printf("links=");
	while (f && fgets(line, sizeof(line), f))
		if (++n > 2 && sscanf(line, " %16[^:]:", ifc) == 1)
			printf("%s ", ifc);
	printf("\n");
	if (f)
		fclose(f);
	f = fopen("/proc/net/route", "re");
	printf("routes=");
	n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned int flags, m;
		int plen = 0;

		if (++n == 1 || sscanf(line, "%16s %8s %8s %x %*s %*s %*s %8s", ifc, dst, gw,
				       &flags, mask) != 5)
			continue;
		m = ntohl((uint32_t)strtoul(mask, NULL, 16));
		for (; m & 0x80000000U; m <<= 1)
			plen++;
		if (!strcmp(dst, "00000000") && plen == 0) {
			ip4(gw, g, sizeof(g));
			printf("default via %s dev %s;", g, ifc);
		} else {
			ip4(dst, a, sizeof(a));
			printf("%s/%d dev %s;", a, plen, ifc);
		}
	}
	printf("\ngw=%s\n", g);
	if (f)
		fclose(f);
	return 0;
}

/* The kernel's Landlock ABI, as errand's doctor should report it. */
static int cmd_landlock_abi(void)
{
	long abi = syscall(444 /* landlock_create_ruleset */, NULL, 0, 1u /* VERSION */);

	printf("%ld\n", abi < 0 ? 0 : abi);
	return 0;
}

/* errno read after the call returns (an argument list has no order). */
static int res(long r)
{
	return result(r, errno);
}

static int cmd_unix(const char *path, bool listen_)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	long r;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (!listen_) {
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		return result(r, errno);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0)
		return result(-1, errno);
	chmod(path, 0777);
	for (;;) {
		int c = accept(fd, NULL, NULL);

		if (c >= 0)
			close(c);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "sys") && argc > 2)
		return cmd_sys(argc - 2, argv + 2);
	if (!strcmp(argv[1], "landlock-abi") && argc == 2)
		return cmd_landlock_abi();
	if (!strcmp(argv[1], "socket") && argc == 3)
		return cmd_socket(argv[2]);
	if (!strcmp(argv[1], "ioctl") && argc == 3)
		return cmd_ioctl(argv[2]);
	if (!strcmp(argv[1], "threads") && argc == 2)
		return cmd_threads();
	if (!strcmp(argv[1], "clone-ns") && argc == 2)
		return cmd_clone_ns();
	if (!strcmp(argv[1], "x32") && argc == 2)
		return cmd_x32();
	if (!strcmp(argv[1], "i386") && argc == 2)
		return cmd_i386();
	if (!strcmp(argv[1], "fsize") && argc == 4)
		return cmd_fsize(argv[2], argv[3]);
	if (!strcmp(argv[1], "read") && argc == 3)
		return cmd_open(argv[2], O_RDONLY);
	if (!strcmp(argv[1], "write") && argc == 3)
		return cmd_open(argv[2], O_WRONLY | O_CREAT);
	if (!strcmp(argv[1], "ifaddr") && argc == 3)
		return cmd_ifaddr(argv[2]);
	if (!strcmp(argv[1], "net") && argc == 2)
		return cmd_net();
	if (!strcmp(argv[1], "edit") && argc == 3)
		return cmd_open(argv[2], O_WRONLY);
	if (!strcmp(argv[1], "unlink") && argc == 3)
		return res(unlink(argv[2]));
	if (!strcmp(argv[1], "mkdir") && argc == 3)
		return res(mkdir(argv[2], 0755));
	if (!strcmp(argv[1], "rename") && argc == 4)
		return res(rename(argv[2], argv[3]));
	if (!strcmp(argv[1], "link") && argc == 4)
		return res(link(argv[2], argv[3]));
	if (!strcmp(argv[1], "unix-connect") && argc == 3)
		return cmd_unix(argv[2], false);
	if (!strcmp(argv[1], "unix-listen") && argc == 3)
		return cmd_unix(argv[2], true);
	return usage();
}
