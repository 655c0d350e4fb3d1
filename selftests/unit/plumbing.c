/* Unit test for the agent's plumbing: session cgroups, named network
 * namespaces, the session veth with its addressing, and the NAT table. It
 * unshares a network and a mount namespace first, so every link, address,
 * route, sysctl and nft table it makes dies with it; only the cgroup and a
 * directory under /run are outside, and both are removed on the way out.
 * Needs root (77 otherwise); 0 when every check passes, 1 when one fails. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nftables/libnftables.h>

#include "agent/cgroup.h"
#include "agent/nat.h"
#include "lib/addr.h"
#include "agent/netlink.h"
#include "agent/netns.h"
#include "lib/log.h"

#define A4(a, b, c, d) htonl((uint32_t)(a) << 24 | (b) << 16 | (c) << 8 | (d))

/* The session's link, a second one to a "far" namespace beyond the host,
 * and a third that must fail and leave nothing behind. */
#define GW1 A4(10, 231, 7, 1)
#define SESS1 A4(10, 231, 7, 2)
#define GW2 A4(10, 231, 8, 1)
#define FAR2 A4(10, 231, 8, 2)
#define GW3 A4(10, 231, 9, 1)
#define SESS3 A4(10, 231, 9, 2)

static int failures;
static char cg_mount[1024], cg_parent[32], run_dir[64], ns_dir[128], ns_s1[256], ns_far[256];
static pid_t child = -1;

static void check(bool ok, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void check(bool ok, const char *what, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok - %s\n", what);
		return;
	}
	failures++;
	printf("not ok - %s: ", what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static bool check_int(const char *what, long actual, long expected)
{
	check(actual == expected, what, "%ld vs %ld", actual, expected);
	return actual == expected;
}

static const char *ip4(uint32_t a, char *buf)
{
	return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

static bool check_ip4(const char *what, uint32_t actual, uint32_t expected)
{
	char x[INET_ADDRSTRLEN], y[INET_ADDRSTRLEN];

	check(actual == expected, what, "%s vs %s", ip4(actual, x), ip4(expected, y));
	return actual == expected;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The first line of a small file, or "" when it cannot be read. */
static const char *read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (!f)
		return buf;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return buf;
}

static int keep_named(const char *id, void *arg)
{
	return strcmp(id, arg) == 0;
}

/* nft through a context of the test's own, not nat.c's. */
static int nft(const char *cmd, char *out, size_t len)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	int r;

	if (!ctx)
		return -1;
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	r = nft_run_cmd_from_buffer(ctx, cmd);
	if (out)
		snprintf(out, len, "%s", nft_ctx_get_output_buffer(ctx));
	nft_ctx_free(ctx);
	return r;
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* TCP, so no ICMP leaves anything: a listener and a connect with a timeout. */
static int listen4(uint32_t addr, uint16_t *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = addr};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Accepts one connection within 2 s; its peer's address, or 0. */
static uint32_t accept_peer(int lfd)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd;

	if (poll(&p, 1, 2000) != 1)
		return 0;
	fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
	if (fd < 0)
		return 0;
	close(fd);
	return sa.sin_addr.s_addr;
}

struct conn {
	uint32_t dst;
	uint16_t port;
};

/* In a netns_run thread: connect with a 2 s timeout. 0 or -errno. */
static int connect_fn(void *arg)
{
	const struct conn *c = arg;
	struct sockaddr_in sa = {
		.sin_family = AF_INET, .sin_addr.s_addr = c->dst, .sin_port = htons(c->port)};
	struct pollfd p;
	int fd, err = 0;
	socklen_t el = sizeof(err);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	p = (struct pollfd){.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, 2000) != 1) {
		close(fd);
		return -ETIMEDOUT;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		err = errno;
	close(fd);
	return -err;
}

struct listener {
	uint32_t addr;
	uint16_t port;
	int fd;
};

static int listen_fn(void *arg)
{
	struct listener *l = arg;

	l->fd = listen4(l->addr, &l->port);
	return l->fd < 0 ? l->fd : 0;
}

/* Connects from the namespace at from to dst:port, accepted on lfd; the
 * source address the listener saw, or 0. */
static uint32_t connect_seen(const char *from, uint32_t dst, uint16_t port, int lfd, int *r)
{
	struct conn c = {.dst = dst, .port = port};

	*r = netns_run(from, connect_fn, &c);
	return *r == 0 ? accept_peer(lfd) : 0;
}

static int ns_ino_fn(void *arg)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return -errno;
	*(ino_t *)arg = st.st_ino;
	return 0;
}

static void test_cgroup(void)
{
	char path[PATH_MAX], want[PATH_MAX + 64], buf[PATH_MAX + 64], cgline[PATH_MAX];
	struct statfs sfs;
	struct stat st;
	uint64_t id = 0;
	int r, status;

	r = cgroup2_mount(cg_mount, sizeof(cg_mount));
	if (!check_int("cgroup2_mount finds the cgroup2 mount", r, 0))
		return;
	check(statfs(cg_mount, &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC,
	      "cgroup2_mount's path is cgroup2", "%s vs a cgroup2 mount", cg_mount);
	if (statfs("/sys/fs/cgroup/unified", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
		check(strcmp(cg_mount, "/sys/fs/cgroup/unified") == 0,
		      "cgroup2_mount on a hybrid host", "%s vs /sys/fs/cgroup/unified", cg_mount);
	check_int("cgroup2_mount with a short buffer", cgroup2_mount(buf, 4), -ENAMETOOLONG);

	snprintf(cg_parent, sizeof(cg_parent), "errtp-%d", (int)getpid());
	r = cgroup_session_create(cg_mount, cg_parent, "s1", path, sizeof(path));
	if (!check_int("cgroup_session_create", r, 0))
		return;
	snprintf(want, sizeof(want), "%s/%s/s1", cg_mount, cg_parent);
	check(strcmp(path, want) == 0, "cgroup_session_create's path", "%s vs %s", path, want);
	check(exists(path), "cgroup directory made", "missing vs present");
	check_int("cgroup_session_create again is -EEXIST",
		  cgroup_session_create(cg_mount, cg_parent, "s1", buf, sizeof(buf)), -EEXIST);
	check_int("cgroup_session_create rejects ..",
		  cgroup_session_create(cg_mount, cg_parent, "..", buf, sizeof(buf)), -EINVAL);

	r = cgroup_id(path, &id);
	check_int("cgroup_id", r, 0);
	if (stat(path, &st) == 0)
		check(id != 0 && id == (uint64_t)st.st_ino, "cgroup_id is the inode number",
		      "%llu vs %llu", (unsigned long long)id, (unsigned long long)st.st_ino);

	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	check(child > 0, "fork a sleeper", "%d vs a pid", (int)child);
	if (child <= 0)
		return;
	snprintf(buf, sizeof(buf), "%s/cgroup.procs", path);
	{
		FILE *f = fopen(buf, "we");
		bool ok = f && fprintf(f, "%d\n", (int)child) > 0;

		if (f && fclose(f) != 0)
			ok = false;
		check(ok, "move the sleeper into the cgroup", "write failed vs written");
	}
	/* The v2 line, "0::/path"; hybrid hosts list v1 hierarchies too. */
	snprintf(buf, sizeof(buf), "/proc/%d/cgroup", (int)child);
	snprintf(want, sizeof(want), "0::/%s/s1", cg_parent);
	cgline[0] = '\0';
	{
		FILE *f = fopen(buf, "re");

		while (f && fgets(cgline, sizeof(cgline), f)) {
			cgline[strcspn(cgline, "\n")] = '\0';
			if (strncmp(cgline, "0::", 3) == 0)
				break;
		}
		if (f)
			fclose(f);
	}
	check(strcmp(cgline, want) == 0, "sleeper is in the cgroup", "%s vs %s", cgline, want);

	check_int("cgroup_session_remove with a process inside", cgroup_session_remove(path), 0);
	r = waitpid(child, &status, 0);
	check(r == child && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	      "cgroup_session_remove killed the sleeper", "status %#x vs SIGKILL", status);
	child = -1;
	check(!exists(path), "cgroup directory removed", "present vs missing");
	check_int("cgroup_session_remove of a missing cgroup", cgroup_session_remove(path), 0);

	r = cgroup_session_create(cg_mount, cg_parent, "s2", buf, sizeof(buf));
	r = r ? r : cgroup_session_create(cg_mount, cg_parent, "s3", buf, sizeof(buf));
	check_int("make s2 and s3", r, 0);
	check_int("cgroup_sweep removes what keep rejects",
		  cgroup_sweep(cg_mount, cg_parent, keep_named, "s2"), 1);
	snprintf(path, sizeof(path), "%s/%s/s2", cg_mount, cg_parent);
	check(exists(path), "cgroup_sweep leaves what keep accepts", "missing vs present");
	snprintf(path, sizeof(path), "%s/%s/s3", cg_mount, cg_parent);
	check(!exists(path), "cgroup_sweep removed s3", "present vs missing");
	check_int("cgroup_sweep with no keep", cgroup_sweep(cg_mount, cg_parent, NULL, NULL), 1);

	snprintf(want, sizeof(want), "%s/nested", cg_parent);
	r = cgroup_session_create(cg_mount, want, "s4", path, sizeof(path));
	check_int("cgroup_session_create under a nested parent", r, 0);
	check_int("cgroup_sweep of a nested parent", cgroup_sweep(cg_mount, want, NULL, NULL), 1);
	snprintf(path, sizeof(path), "%s/%s/nested", cg_mount, cg_parent);
	check_int("remove the nested parent", rmdir(path) < 0 ? -errno : 0, 0);
	snprintf(want, sizeof(want), "%s/../x", cg_parent);
	check_int("cgroup_session_create rejects a parent with ..",
		  cgroup_session_create(cg_mount, want, "s5", buf, sizeof(buf)), -EINVAL);
}

static bool is_shared_mount(const char *dir)
{
	char line[4096];
	bool shared = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX];

		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 && strcmp(mnt, dir) == 0)
			shared = strstr(line, " shared:") != NULL;
	}
	fclose(f);
	return shared;
}

/* How many mounts of /proc/self/mountinfo are at path. */
static int mounts_at(const char *path)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX];

		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1 && strcmp(mnt, path) == 0)
			n++;
	}
	fclose(f);
	return n;
}

#define RACERS 8

struct racer {
	pthread_barrier_t *go;
	char path[PATH_MAX];
	int r;
};

static void *race_create(void *arg)
{
	struct racer *x = arg;

	pthread_barrier_wait(x->go);
	x->r = netns_create(x->path);
	return NULL;
}

/* Namespaces made at once in a directory that is no mount point yet (an
 * agent's two preparations side by side on a fresh host): the directory is
 * bound onto itself once, and each namespace file is mounted once. */
static void test_netns_race(void)
{
	char dir[256];
	struct racer x[RACERS];
	pthread_t t[RACERS];
	pthread_barrier_t go;
	int made = 0, once = 0;

	snprintf(dir, sizeof(dir), "%s/race", run_dir);
	pthread_barrier_init(&go, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		x[i].go = &go;
		x[i].r = -EIO;
		snprintf(x[i].path, sizeof(x[i].path), "%s/r%d", dir, i);
		if (pthread_create(&t[i], NULL, race_create, &x[i]))
			x[i].path[0] = '\0';
	}
	for (int i = 0; i < RACERS; i++) {
		if (!x[i].path[0])
			continue;
		pthread_join(t[i], NULL);
		made += x[i].r == 0;
		once += mounts_at(x[i].path) == 1;
	}
	pthread_barrier_destroy(&go);
	check_int("netns_create from eight threads at once", made, RACERS);
	check_int("... the directory bound onto itself once", mounts_at(dir), 1);
	check_int("... each namespace file mounted once", once, RACERS);
	netns_sweep(dir, NULL, NULL);
	while (umount2(dir, MNT_DETACH) == 0)
		;
	rmdir(dir);
}

static bool test_netns(void)
{
	char missing[PATH_MAX + 16];
	struct stat own, own_after, file;
	struct statfs sfs;
	ino_t inside = 0;
	int fd, r;

	snprintf(run_dir, sizeof(run_dir), "/run/errtp-%d", (int)getpid());
	snprintf(ns_dir, sizeof(ns_dir), "%s/netns", run_dir);
	snprintf(ns_s1, sizeof(ns_s1), "%s/s1", ns_dir);
	snprintf(ns_far, sizeof(ns_far), "%s/far", ns_dir);

	stat("/proc/thread-self/ns/net", &own);
	r = netns_create(ns_s1);
	if (!check_int("netns_create", r, 0))
		return false;
	stat("/proc/thread-self/ns/net", &own_after);
	check(own.st_ino == own_after.st_ino, "netns_create leaves the caller's namespace",
	      "%lu vs %lu", (unsigned long)own_after.st_ino, (unsigned long)own.st_ino);
	check(statfs(ns_s1, &sfs) == 0 && sfs.f_type == NSFS_MAGIC,
	      "netns_create mounted a namespace", "%#lx vs nsfs", (unsigned long)sfs.f_type);
	check(is_shared_mount(ns_dir), "netns dir is a shared mount point", "not shared vs shared");
	check_int("netns_create again is -EEXIST", netns_create(ns_s1), -EEXIST);

	fd = netns_open(ns_s1);
	check(fd >= 0, "netns_open", "%d vs an fd", fd);
	if (fd >= 0)
		close(fd);
	stat(ns_s1, &file);
	r = netns_run(ns_s1, ns_ino_fn, &inside);
	check_int("netns_run", r, 0);
	check(inside == file.st_ino && inside != own.st_ino, "netns_run runs inside the namespace",
	      "%lu vs %lu", (unsigned long)inside, (unsigned long)file.st_ino);
	stat("/proc/thread-self/ns/net", &own_after);
	check(own.st_ino == own_after.st_ino, "netns_run leaves the caller's namespace",
	      "%lu vs %lu", (unsigned long)own_after.st_ino, (unsigned long)own.st_ino);
	snprintf(missing, sizeof(missing), "%s/missing", ns_dir);
	check_int("netns_run on a missing path", netns_run(missing, ns_ino_fn, &inside), -ENOENT);
	check_int("netns_remove of a missing path", netns_remove(missing), 0);
	test_netns_race();

	return check_int("netns_create the far namespace", netns_create(ns_far), 0);
}

struct inspect {
	bool eth0_up, lo_up, old_gone, route;
	uint32_t addr, mask;
	char dis_all[8], dis_def[8], dis_eth0[8];
	int naddrs;
	bool has_sess, has_loopback;
};

static bool if_up(int s, const char *name)
{
	struct ifreq ifr = {0};

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	return ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
}

static uint32_t if_addr(int s, const char *name, unsigned long req)
{
	struct ifreq ifr = {0};

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(s, req, &ifr) < 0)
		return 0;
	return ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr;
}

/* In the session namespace: what veth_setup should have left there. */
static int inspect_fn(void *arg)
{
	struct inspect *in = arg;
	char line[256], ifname[32];
	struct addr *addrs = NULL;
	unsigned int dst, gw, flags;
	FILE *f;
	int s;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	in->eth0_up = if_up(s, "eth0");
	in->lo_up = if_up(s, "lo");
	in->addr = if_addr(s, "eth0", SIOCGIFADDR);
	in->mask = if_addr(s, "eth0", SIOCGIFNETMASK);
	close(s);
	in->old_gone = if_nametoindex("estest1") == 0;
	/* thread-self: /proc/self/net would show the main thread's namespace */
	f = fopen("/proc/thread-self/net/route", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%31s %x %x %x", ifname, &dst, &gw, &flags) == 4 &&
		    strcmp(ifname, "eth0") == 0 && dst == 0 && gw == GW1)
			in->route = true;
	if (f)
		fclose(f);
	read_line("/proc/sys/net/ipv6/conf/all/disable_ipv6", in->dis_all, sizeof(in->dis_all));
	read_line("/proc/sys/net/ipv6/conf/default/disable_ipv6", in->dis_def, sizeof(in->dis_def));
	read_line("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", in->dis_eth0, sizeof(in->dis_eth0));

	in->naddrs = netlink_self_addrs(&addrs);
	for (int i = 0; i < in->naddrs; i++) {
		uint32_t v4;

		memcpy(&v4, &addrs[i].b[12], 4);
		in->has_sess |= v4 == SESS1 && addrs[i].b[10] == 0xff;
		in->has_loopback |= v4 == A4(127, 0, 0, 1) && addrs[i].b[11] == 0xff;
	}
	free(addrs);
	return 0;
}

static int has_link_fn(void *arg)
{
	return if_nametoindex(arg) != 0;
}

static bool test_veth(void)
{
	struct session_link l1 = {.host_if = "ehtest1",
				  .sess_if = "estest1",
				  .gw4 = GW1,
				  .sess4 = SESS1,
				  .prefixlen = 30};
	struct session_link l3 = {.host_if = "ehtest3",
				  .sess_if = "estest3",
				  .gw4 = GW3,
				  .sess4 = SESS3,
				  .prefixlen = 30};
	struct session_link dup = l1, bad = l1;
	struct inspect in = {0};
	struct addr *addrs = NULL;
	char buf[64];
	uint16_t port = 0;
	int r, n, lfd;
	bool found = false;

	r = veth_setup(&l1, ns_s1);
	if (!check_int("veth_setup", r, 0))
		return false;
	check_int("veth_setup fills host_ifindex", l1.host_ifindex,
		  (long)if_nametoindex("ehtest1"));
	check(if_nametoindex("estest1") == 0, "session side is not in the caller's namespace",
	      "present vs missing");
	check(strcmp(read_line("/proc/sys/net/ipv4/ip_forward", buf, sizeof(buf)), "1") == 0,
	      "ip_forward in the caller's namespace", "%s vs 1", buf);
	read_line("/proc/sys/net/ipv6/conf/ehtest1/disable_ipv6", buf, sizeof(buf));
	check(strcmp(buf, "1") == 0, "host side disable_ipv6", "%s vs 1", buf);

	r = netns_run(ns_s1, inspect_fn, &in);
	check_int("look inside the session namespace", r, 0);
	check(in.old_gone, "session side renamed", "estest1 still there vs eth0 only");
	check(in.eth0_up, "eth0 up in the session namespace", "down vs up");
	check(in.lo_up, "lo up in the session namespace", "down vs up");
	check_ip4("eth0's address", in.addr, SESS1);
	check_ip4("eth0's netmask", in.mask, A4(255, 255, 255, 252));
	check(in.route, "default route via gw4 on eth0", "missing vs present");
	check(strcmp(in.dis_all, "1") == 0, "session all/disable_ipv6", "%s vs 1", in.dis_all);
	check(strcmp(in.dis_def, "1") == 0, "session default/disable_ipv6", "%s vs 1", in.dis_def);
	check(strcmp(in.dis_eth0, "1") == 0, "session eth0/disable_ipv6", "%s vs 1", in.dis_eth0);
	check(in.naddrs >= 2 && in.has_sess && in.has_loopback,
	      "netlink_self_addrs in the session namespace",
	      "%d addresses, sess4 %s, 127.0.0.1 %s vs both", in.naddrs,
	      in.has_sess ? "found" : "missing", in.has_loopback ? "found" : "missing");

	lfd = listen4(GW1, &port);
	check(lfd >= 0, "listen on gw4", "%d vs an fd", lfd);
	if (lfd >= 0) {
		check_ip4("TCP from the session to gw4, seen from",
			  connect_seen(ns_s1, GW1, port, lfd, &r), SESS1);
		check_int("TCP connect from the session to gw4", r, 0);
		close(lfd);
	}

	n = netlink_self_addrs(&addrs);
	for (int i = 0; i < n; i++) {
		static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
		uint32_t v4;

		memcpy(&v4, &addrs[i].b[12], 4);
		found |= memcmp(addrs[i].b, mapped, 12) == 0 && v4 == GW1;
	}
	free(addrs);
	check(n > 0 && found, "netlink_self_addrs includes gw4 v4-mapped", "%d addresses, %s", n,
	      found ? "found" : "missing");
	check_int("netlink_addr4_in_use(gw4)", netlink_addr4_in_use(GW1), 1);
	check_int("netlink_addr4_in_use(sess4) outside", netlink_addr4_in_use(SESS1), 0);

	/* Failures leave nothing behind. */
	check_int("veth_setup over an existing host_if is -EEXIST", veth_setup(&dup, ns_s1),
		  -EEXIST);
	check_int("the existing host_if stays", (long)if_nametoindex("ehtest1"), l1.host_ifindex);
	bad.gw4 = A4(10, 231, 6, 1);
	check_int("veth_setup with gw4 off the subnet", veth_setup(&bad, ns_s1), -EINVAL);
	/* eth0 exists in s1 already, so the rename inside fails after the
	 * pair was made: the undo must take both sides. */
	r = veth_setup(&l3, ns_s1);
	check(r < 0, "veth_setup failing inside the namespace", "%d vs < 0", r);
	check(if_nametoindex("ehtest3") == 0, "failed veth_setup left no host side",
	      "present vs missing");
	check_int("failed veth_setup left no session side",
		  netns_run(ns_s1, has_link_fn, "estest3"), 0);
	return true;
}

static void test_nat(void)
{
	/* The far side's link is not one of the sessions' (eh*): the pool's
	 * masquerade applies to what leaves through it. */
	struct session_link l2 = {.host_if = "fhtest2",
				  .sess_if = "estest2",
				  .gw4 = GW2,
				  .sess4 = FAR2,
				  .prefixlen = 30};
	struct listener far = {.addr = FAR2, .fd = -1};
	char out[8192];
	int r;

	/* A namespace beyond the host, reached through the host's forwarding:
	 * what it sees as the source tells whether masquerade happened. */
	if (!check_int("veth_setup to the far namespace", veth_setup(&l2, ns_far), 0))
		return;
	r = netns_run(ns_far, listen_fn, &far);
	if (!check_int("listen in the far namespace", r, 0))
		return;
	check_ip4("forwarded TCP without NAT, seen from",
		  connect_seen(ns_s1, FAR2, far.port, far.fd, &r), SESS1);

	{
		struct cidr pool;

		cidr_parse("10.231.7.0/24", &pool);
		check_int("nat_pool", nat_pool(&pool), 0);
		r = nft("list table ip errand-pool-10.231.7.0-24", out, sizeof(out));
		check_int("nft list table ip errand-pool-10.231.7.0-24", r, 0);
		check(strstr(out, "type nat hook postrouting priority srcnat") != NULL,
		      "postrouting nat chain", "%s vs a srcnat chain", out);
		check(strstr(out, "ip saddr 10.231.7.0/24 oifname != \"eh*\" masquerade") != NULL,
		      "masquerade rule for the pool, out of anything but the sessions' veths",
		      "%s vs the rule", out);
		check(strstr(out, "type filter hook forward priority filter; policy accept;") !=
			      NULL,
		      "forward chain", "%s vs a forward chain", out);
		check(strstr(out, "iifname \"eh*\" accept") != NULL, "forward from the veths rule",
		      "%s vs the rule", out);
		check(strstr(out, "oifname \"eh*\" ct state established,related accept") != NULL,
		      "forward established back rule", "%s vs the rule", out);
		check_ip4("forwarded TCP with NAT, seen from",
			  connect_seen(ns_s1, FAR2, far.port, far.fd, &r), GW2);
		check_int("forwarded TCP connect with NAT", r, 0);
		check_int("nat_pool again (made once a process)", nat_pool(&pool), 0);
		nft("list table ip errand-pool-10.231.7.0-24", out, sizeof(out));
		check_int("one masquerade rule after nat_pool again", count_of(out, "masquerade"),
			  1);

		check_int("a session table of an older errand",
			  nft("add table ip errand-test1", NULL, 0), 0);
		check_int("an unrelated table", nft("add table ip errtp-other", NULL, 0), 0);
		check_int("nat_sweep removes an older errand's session table, nothing else",
			  nat_sweep(NULL, NULL), 1);
		check(nft("list table ip errand-test1", NULL, 0) != 0,
		      "nat_sweep removed errand-test1", "present vs missing");
		check_int("nat_sweep leaves the pool's table",
			  nft("list table ip errand-pool-10.231.7.0-24", NULL, 0), 0);
		check_int("nat_sweep leaves other tables",
			  nft("list table ip errtp-other", NULL, 0), 0);
		check_int("nat_remove of a missing table", nat_remove("test1"), 0);
		nft("delete table ip errand-pool-10.231.7.0-24", NULL, 0);
		check_ip4("forwarded TCP once the pool's table is gone, seen from",
			  connect_seen(ns_s1, FAR2, far.port, far.fd, &r), SESS1);
	}
	close(far.fd);
	nft("delete table ip errtp-other", NULL, 0);
}

static void test_sweeps(void)
{
	char path[PATH_MAX + 16];

	check_int("a second session-named veth, ehtest2",
		  system("ip link add ehtest2 type veth peer name estest2"), 0);
	check_int("veth_sweep removes what keep rejects", veth_sweep("ehtest", keep_named, "2"), 1);
	check(if_nametoindex("ehtest1") == 0, "veth_sweep removed ehtest1", "present vs missing");
	check(if_nametoindex("ehtest2") != 0, "veth_sweep leaves what keep accepts",
	      "missing vs present");
	check_int("veth_remove", veth_remove("ehtest2"), 0);
	check(if_nametoindex("ehtest2") == 0, "veth_remove removed ehtest2", "present vs missing");
	check_int("veth_remove of a missing link", veth_remove("ehtest2"), 0);
	check_int("veth_remove refuses a non-veth", veth_remove("lo"), -EINVAL);
	check_int("veth_sweep refuses an empty prefix", veth_sweep("", NULL, NULL), -EINVAL);

	snprintf(path, sizeof(path), "%s/s2", ns_dir);
	check_int("netns_create s2", netns_create(path), 0);
	check_int("netns_sweep removes what keep rejects", netns_sweep(ns_dir, keep_named, "s2"),
		  2);
	check(!exists(ns_s1) && !exists(ns_far), "netns_sweep removed s1 and far",
	      "present vs missing");
	check(exists(path), "netns_sweep leaves what keep accepts", "missing vs present");
	check_int("netns_remove", netns_remove(path), 0);
	check(!exists(path), "netns_remove removed the file", "present vs missing");
	check_int("netns_sweep with nothing left", netns_sweep(ns_dir, NULL, NULL), 0);
}

/* Undoes what the checks left, passed or not. The namespaces and mounts go
 * with the process anyway; the cgroup and the directory under /run do not. */
static void cleanup(void)
{
	char path[PATH_MAX + 16];

	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	veth_remove("ehtest1");
	veth_remove("ehtest2");
	veth_remove("fhtest2");
	veth_remove("ehtest3");
	if (ns_dir[0]) {
		netns_sweep(ns_dir, NULL, NULL);
		umount2(ns_dir, MNT_DETACH);
		rmdir(ns_dir);
		rmdir(run_dir);
	}
	if (cg_parent[0]) {
		cgroup_sweep(cg_mount, cg_parent, NULL, NULL);
		snprintf(path, sizeof(path), "%s/%s", cg_mount, cg_parent);
		if (rmdir(path) < 0 && errno != ENOENT) {
			printf("not ok - remove cgroup %s: %s vs removed\n", path, strerror(errno));
			failures++;
		}
	}
	if (run_dir[0] && exists(run_dir)) {
		printf("not ok - remove %s: present vs removed\n", run_dir);
		failures++;
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	log_init("unit-plumbing", false);
	if (geteuid() != 0) {
		printf("SKIP: plumbing needs root\n");
		return 77;
	}
	/* Before any thread exists: the whole process moves, so nothing below
	 * can touch the host's links, routes, sysctls, firewall or mounts. */
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		printf("not ok - unshare a network and mount namespace: %s vs done\n",
		       strerror(errno));
		return 1;
	}

	test_cgroup();
	if (test_netns() && test_veth())
		test_nat();
	test_sweeps();
	cleanup();
	printf("%s - plumbing: %d failed\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
