/* Guarantee: the agent programs from a DNS worker's request only what the
 * session's policy admits: a well-formed message of exactly its size, no
 * flag, a name its host rules or live grants admit, under dns.maxAddresses,
 * dns.maxNames and dns.maxWildcardNames, every address of the asked family,
 * none forbidden (in any IPv4-carrying form) and none the host's own; what
 * it programs is never a pinned entry. Each name counted is a line of the
 * session's record, and a table read back from it (a restarted agent's)
 * counts on from there. The worker's seccomp filter kills it
 * on any system call outside its allow-list (files, exec, fork, ptrace, bpf,
 * executable memory, any new socket, connect); confined whole, its UDP
 * reaches its upstream resolver (address and port) alone, through sockets
 * connected before its filter, and its TCP too, through connections the
 * agent makes to that resolver alone (one to another host it asks for is
 * refused); with Landlock's network rules (Linux 6.7), no TCP connect or
 * bind of its own either. */
#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <termios.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/dnspriv.h"
#include "agent/enforce.h"
#include "lib/landlock.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

#define NOW_NS (1000ull * 1000000000ull)
#define NOW_UNIX 1700000000

static struct errand_config cfg;
static struct grant_set grants;
static struct addr self[2];
static struct dnsp_policy pol;
static struct dnsp_entry out[4096];
static size_t n_out;
static uint32_t ttl_out;
static bool pinned_seen;

static void policy_reset(void)
{
	dnsp_names_free(pol.names);
	pol = (struct dnsp_policy){.cfg = &cfg, .grants = &grants, .self = self, .n_self = 2};
	pol.names = dnsp_names_new(&cfg);
}

static struct dnsp_program req(const char *name, uint16_t qtype, const char *addrs)
{
	struct dnsp_program m = {.type = DNSP_PROGRAM, .qtype = qtype, .ttl = 60};
	char buf[1024], *save;

	snprintf(m.name, sizeof(m.name), "%s", name);
	snprintf(buf, sizeof(buf), "%s", addrs);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (addr_parse(t, &m.addrs[m.n++]))
			abort();
	return m;
}

static int check_len(const struct dnsp_program *m, size_t len)
{
	int rc = dnsp_check(&pol, m, len, NOW_NS, NOW_UNIX, out, ARRAY_SIZE(out), &n_out, &ttl_out);

	for (size_t i = 0; !rc && i < n_out; i++)
		if (out[i].flags & ENTRY_F_PINNED)
			pinned_seen = true;
	return rc;
}

static int check(const struct dnsp_program *m)
{
	return check_len(m, sizeof(*m));
}

static void rule(const char *s)
{
	char err[256];

	if (host_rule_parse(s, &cfg.allow[cfg.n_allow++], err, sizeof(err)))
		abort();
}

static void grant(uint32_t id, const char *host, enum grant_kind kind, int64_t until)
{
	struct grant *g = &grants.v[grants.n++];
	char err[256];

	*g = (struct grant){.id = id, .kind = kind, .until = until};
	if (host_rule_parse(host, &g->rule, err, sizeof(err)))
		abort();
}

static void test_malformed(void)
{
	struct dnsp_program m = req("api.example.com", DNS_TYPE_A, "93.184.216.34");
	struct dnsp_program bad;

	CHECK_INT(check(&m), 0, "control: a well-formed request is admitted");
	CHECK_INT(check_len(&m, sizeof(m) - 1), -EBADMSG, "one byte short: refused");
	CHECK_INT(check_len(&m, sizeof(m) + 1), -EBADMSG, "one byte long: refused");
	CHECK_INT(check_len(&m, 4), -EBADMSG, "a type alone: refused");
	CHECK_INT(check_len(&m, 0), -EBADMSG, "empty: refused");
	bad = m;
	bad.type = DNSP_REPLY;
	CHECK_INT(check(&bad), -EBADMSG, "another message's type: refused");
	bad = m;
	bad.flags = ENTRY_F_PINNED;
	CHECK_INT(check(&bad), -EBADMSG,
		  "the pinned flag: refused (a worker cannot ask for a pin)");
	bad.flags = 1u << 31;
	CHECK_INT(check(&bad), -EBADMSG, "any other flag: refused");
	bad = m;
	bad.n = 0;
	CHECK_INT(check(&bad), -EBADMSG, "no address: refused");
	bad.n = DNSP_ADDRS_MAX + 1;
	CHECK_INT(check(&bad), -EBADMSG, "more addresses than the message holds: refused");
	bad.n = 0xffff;
	CHECK_INT(check(&bad), -EBADMSG, "n 65535: refused");
	bad = m;
	memset(bad.name, 'a', sizeof(bad.name));
	CHECK_INT(check(&bad), -EBADMSG, "a name without its NUL: refused");
	bad = m;
	snprintf(bad.name, sizeof(bad.name), "api.example.com\001");
	CHECK_INT(check(&bad), -EBADMSG, "a control byte in the name: refused");
	snprintf(bad.name, sizeof(bad.name), "api example.com");
	CHECK_INT(check(&bad), -EBADMSG, "a space in the name: refused");
	snprintf(bad.name, sizeof(bad.name), "*.example.com");
	CHECK_INT(check(&bad), -EBADMSG, "a wildcard as a name: refused");
	bad = m;
	bad.qtype = DNS_TYPE_TXT;
	CHECK_INT(check(&bad), -EBADMSG, "a type other than A or AAAA: refused");
}

static void test_names(void)
{
	struct dnsp_program m;

	m = req("evil.example.net", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), -EPERM, "a name no rule or grant admits: refused");
	m = req("example.com", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), -EPERM, "the parent of a wildcard's domain: refused");
	m = req("api.example.com.evil.net", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), -EPERM, "an allowed name as a prefix of another: refused");
	m = req("API.Example.COM", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "an allowed name in another case: admitted as the same name");
	m = req("expired.example.org", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), -EPERM, "a name whose grant has ended: refused");
	m = req("granted.example.org", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "a name a live grant admits: admitted");
	CHECK_INT(n_out, 1, "... on the grant's port alone");
	CHECK_INT(out[0].port, 8443, "... 8443");
	CHECK_INT(out[0].grant, 7, "... carrying the grant's id");
	m = req("once.example.org", DNS_TYPE_A, "93.184.216.35");
	CHECK_INT(check(&m), 0, "a name a once grant admits: admitted");
	CHECK_INT(out[0].flags, ENTRY_F_ONCE, "... as a once entry, nothing more");
	m = req("until.example.org", DNS_TYPE_A, "93.184.216.36");
	m.ttl = 3600;
	CHECK_INT(check(&m), 0, "a name a grant with an end admits: admitted");
	CHECK_INT(ttl_out, 30, "... answered with a TTL that ends with the grant");
	CHECK_TRUE(out[0].expires_ns <= NOW_NS + 30ull * 1000000000ull,
		   "... and its entry ends with the grant too");
}

static void test_addresses(void)
{
	static const struct {
		const char *addr;
		uint16_t qtype;
		const char *what;
	} bad[] = {
		{"10.0.0.1", DNS_TYPE_A, "a private address (10.0.0.1)"},
		{"192.168.1.1", DNS_TYPE_A, "a private address (192.168.1.1)"},
		{"172.16.0.1", DNS_TYPE_A, "a private address (172.16.0.1)"},
		{"127.0.0.1", DNS_TYPE_A, "loopback"},
		{"0.0.0.0", DNS_TYPE_A, "0.0.0.0"},
		{"169.254.169.254", DNS_TYPE_A, "the cloud metadata address"},
		{"168.63.129.16", DNS_TYPE_A, "Azure's wire server"},
		{"100.64.0.1", DNS_TYPE_A, "a shared (CGNAT) address, where session gateways live"},
		{"224.0.0.1", DNS_TYPE_A, "multicast"},
		{"255.255.255.255", DNS_TYPE_A, "broadcast"},
		{"::ffff:10.0.0.1", DNS_TYPE_AAAA, "10.0.0.1 mapped into AAAA"},
		{"::ffff:93.184.216.34", DNS_TYPE_AAAA, "a public IPv4 address mapped into AAAA"},
		{"::ffff:0:a00:1", DNS_TYPE_AAAA, "10.0.0.1 IPv4-translated (SIIT)"},
		{"::a00:1", DNS_TYPE_AAAA, "10.0.0.1 IPv4-compatible"},
		{"64:ff9b::a00:1", DNS_TYPE_AAAA, "10.0.0.1 through NAT64"},
		{"64:ff9b::a9fe:a9fe", DNS_TYPE_AAAA, "the metadata address through NAT64"},
		{"2002:a00:1::1", DNS_TYPE_AAAA, "10.0.0.1 inside 6to4"},
		{"::1", DNS_TYPE_AAAA, "IPv6 loopback"},
		{"fe80::1", DNS_TYPE_AAAA, "IPv6 link-local"},
		{"fc00::1", DNS_TYPE_AAAA, "IPv6 unique local"},
		{"fd00:ec2::254", DNS_TYPE_AAAA, "EC2's IPv6 metadata address"},
		{"2606:2800:220:1::1", DNS_TYPE_A, "an IPv6 address in an A request"},
		{"93.184.216.99", DNS_TYPE_A, "the host's own public IPv4 address"},
		{"2001:db8:1::99", DNS_TYPE_AAAA, "the host's own IPv6 address"},
	};
	struct dnsp_program m;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		m = req("api.example.com", bad[i].qtype, bad[i].addr);
		CHECK_INT(check(&m), -EACCES, "%s: refused", bad[i].what);
	}
	m = req("api.example.com", DNS_TYPE_A, "93.184.216.34,10.0.0.1");
	CHECK_INT(check(&m), -EACCES,
		  "one forbidden address among public ones refuses the request");
	m = req("api.example.com", DNS_TYPE_AAAA, "2606:2800:220:1::1");
	CHECK_INT(check(&m), 0, "control: a public IPv6 address is admitted");
}

static void test_caps(void)
{
	struct dnsp_program m;
	char a[1024] = "";

	for (int i = 0; i < 5; i++)
		snprintf(a + strlen(a), sizeof(a) - strlen(a), "%s93.184.216.%d", i ? "," : "",
			 i + 1);
	m = req("api.example.com", DNS_TYPE_A, a);
	CHECK_INT(check(&m), -EDQUOT, "5 addresses, over dns.maxAddresses (4): refused");
	m.n = 4;
	CHECK_INT(check(&m), 0, "4 addresses: admitted");
	CHECK_INT(n_out, 8, "... each on both of the name's ports");
	policy_reset();
	m = req("w1.wild.example", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "a first name under *.wild.example");
	m = req("w2.wild.example", DNS_TYPE_A, "10.0.0.1");
	CHECK_INT(check(&m), -EACCES, "a refused request ...");
	m = req("w2.wild.example", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "... counts no name: a second name is admitted");
	m = req("w3.wild.example", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), -EDQUOT, "a third is over dns.maxWildcardNames (2): refused");
	m = req("w1.wild.example", DNS_TYPE_A, "93.184.216.35");
	CHECK_INT(check(&m), 0, "a name admitted before stays admitted");
	m = req("api.example.com", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "a third name (exact rule)");
	m = req("granted.example.org", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "a fourth name");
	m = req("once.example.org", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), -EDQUOT, "a fifth is over dns.maxNames (4): refused");
	policy_reset();
	m = req("api.example.com", DNS_TYPE_A, "93.184.216.34,93.184.216.35");
	CHECK_INT(dnsp_check(&pol, &m, sizeof(m), NOW_NS, NOW_UNIX, out, 3, &n_out, &ttl_out),
		  -E2BIG, "more entries than the caller has room for: refused, not cut");
}

static int name_check(const char *name)
{
	struct dnsp_name m = {.type = DNSP_NAME};

	snprintf(m.name, sizeof(m.name), "%s", name);
	return dnsp_check_name(&pol, &m, sizeof(m), NOW_UNIX);
}

/* The record of a session's names: a table made again from it (the agent's
 * restart) counts on from where the last one left off. */
static void test_record(void)
{
	struct dnsp_names *t;
	struct dnsp_name bad = {.type = DNSP_NAME};
	struct dnsp_program m;
	char text[512];
	ssize_t len;
	int fd = memfd_create("dns-names", MFD_CLOEXEC);

	CHECK_TRUE(fd >= 0, "a file for the record");
	CHECK_INT(dnsp_names_record(pol.names, dup(fd)), 0, "an empty record is read");
	CHECK_INT(name_check("w1.wild.example"), 0,
		  "a name asked before it goes upstream: counted");
	CHECK_INT(name_check("w2.wild.example"), 0, "a second under *.wild.example");
	CHECK_INT(name_check("w3.wild.example"), -EDQUOT,
		  "a third is over dns.maxWildcardNames (2): refused");
	CHECK_INT(name_check("evil.example.net"), -EPERM, "a name no rule admits: refused");
	CHECK_INT(dnsp_check_name(&pol, &bad, sizeof(bad), NOW_UNIX), -EBADMSG,
		  "an empty name: refused");
	memset(bad.name, 'a', sizeof(bad.name));
	CHECK_INT(dnsp_check_name(&pol, &bad, sizeof(bad), NOW_UNIX), -EBADMSG,
		  "a name without its NUL: refused");
	CHECK_INT(dnsp_check_name(&pol, &bad, sizeof(bad) - 1, NOW_UNIX), -EBADMSG,
		  "one byte short: refused");
	m = req("api.example.com", DNS_TYPE_A, "93.184.216.34");
	CHECK_INT(check(&m), 0, "a third name, programmed");
	len = pread(fd, text, sizeof(text) - 1, 0);
	text[len > 0 ? len : 0] = '\0';
	CHECK_STR(text, "2 w1.wild.example\n2 w2.wild.example\n-1 api.example.com\n",
		  "each name counted is a line of the record, with its wildcard rule");

	/* The agent's restart: a new table from the record. A line cut short
	 * (a kill in the middle of its write) follows the whole ones. */
	CHECK_INT((int)pwrite(fd, "-1 granted.exa", 14, len), 14, "a line cut short");
	t = dnsp_names_new(&cfg);
	CHECK_INT(dnsp_names_record(t, dup(fd)), 0, "the record is read back");
	CHECK_TRUE(dnsp_names_seen(t, "w1.wild.example") && dnsp_names_seen(t, "api.example.com"),
		   "its names are seen");
	CHECK_FALSE(dnsp_names_seen(t, "granted.exa"), "the line cut short is not");
	CHECK_FALSE(dnsp_names_room(t, 2), "*.wild.example's names are still at its cap");
	CHECK_INT(dnsp_names_admit(t, "w3.wild.example", 2), -EDQUOT,
		  "a new name under it is refused after the restart");
	CHECK_INT(dnsp_names_admit(t, "w2.wild.example", 2), 0, "a name counted before is not");
	CHECK_INT(dnsp_names_admit(t, "granted.example.org", -1), 0, "a fourth name");
	CHECK_INT(dnsp_names_admit(t, "once.example.org", -1), -EDQUOT,
		  "a fifth is over dns.maxNames (4), after the restart too");
	dnsp_names_free(t);
	len = pread(fd, text, sizeof(text) - 1, 0);
	text[len > 0 ? len : 0] = '\0';
	CHECK_STR(text,
		  "2 w1.wild.example\n2 w2.wild.example\n-1 api.example.com\n"
		  "-1 granted.example.org\n",
		  "the next line is written over the one cut short");

	/* A rule index that names no wildcard rule counts the name alone. */
	CHECK_INT(ftruncate(fd, 0), 0, "an emptied record");
	CHECK_INT((int)pwrite(fd, "0 a1.wild.example\n7 a2.wild.example\nx bad\n", 42, 0), 42,
		  "lines with rule indexes that name no wildcard rule, and one malformed");
	t = dnsp_names_new(&cfg);
	CHECK_INT(dnsp_names_record(t, fd), 0, "... are read");
	CHECK_TRUE(dnsp_names_seen(t, "a1.wild.example") && dnsp_names_seen(t, "a2.wild.example"),
		   "... their names counted");
	CHECK_TRUE(dnsp_names_room(t, 2), "... under no wildcard rule");
	CHECK_FALSE(dnsp_names_seen(t, "bad"), "the malformed line is not");
	dnsp_names_free(t);
}

static void test_ttl(void)
{
	struct dnsp_program m = req("api.example.com", DNS_TYPE_A, "93.184.216.34");

	m.ttl = 0xffffffffu;
	CHECK_INT(check(&m), 0, "a huge TTL is admitted ...");
	CHECK_INT(ttl_out, 300, "... clamped to dns.ttlCap");
	CHECK_TRUE(out[0].expires_ns == NOW_NS + 305ull * 1000000000ull,
		   "... and its entries end at the cap plus dns.grace");
	m.ttl = 0;
	CHECK_INT(check(&m), 0, "TTL 0 is admitted ...");
	CHECK_INT(ttl_out, 5, "... raised to dns.ttlFloor");
}

/* Runs fn in a child under the worker's filter: its exit status, or 128 +
 * the signal that ended it. */
static int filtered(void (*fn)(void))
{
	int ws;
	pid_t pid = fork();

	if (pid == 0) {
		if (dnsp_seccomp_load())
			_exit(99);
		fn();
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &ws, 0) != pid)
		return -1;
	return WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
}

#define SYS_CASE(name, body)                                                                       \
	static void name(void)                                                                     \
	{                                                                                          \
		body;                                                                              \
	}

SYS_CASE(sc_open, open("/etc/passwd", O_RDONLY))
SYS_CASE(sc_openat, syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY))
SYS_CASE(sc_unix, socket(AF_UNIX, SOCK_STREAM, 0))
SYS_CASE(sc_netlink, socket(AF_NETLINK, SOCK_RAW, 0))
SYS_CASE(sc_packet, socket(AF_PACKET, SOCK_RAW, 0))
SYS_CASE(sc_raw4, socket(AF_INET, SOCK_RAW, IPPROTO_RAW))
SYS_CASE(sc_ping, socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP))
SYS_CASE(sc_seqpacket, socket(AF_INET, SOCK_SEQPACKET, 0))
SYS_CASE(sc_execve, execl("/bin/true", "true", (char *)NULL))
SYS_CASE(sc_fork, syscall(SYS_fork))
SYS_CASE(sc_clone, syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0))
SYS_CASE(sc_ptrace, ptrace(PTRACE_TRACEME, 0, 0, 0))
SYS_CASE(sc_bpf, syscall(SYS_bpf, BPF_MAP_CREATE, 0, 0))
SYS_CASE(sc_mmap_exec, mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
SYS_CASE(sc_kill, kill(getppid(), 0))
SYS_CASE(sc_setuid, syscall(SYS_setuid, 0))
SYS_CASE(sc_dup, syscall(SYS_dup, 0))
SYS_CASE(sc_fcntl_dup, fcntl(0, F_DUPFD, 10))
SYS_CASE(sc_ioctl, ioctl(0, TIOCSTI, "x"))
SYS_CASE(sc_udp4, socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0))
SYS_CASE(sc_udp6, socket(AF_INET6, SOCK_DGRAM, 0))
SYS_CASE(sc_bind, {
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
})

SYS_CASE(sc_tcp4, socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0))
SYS_CASE(sc_tcp6, socket(AF_INET6, SOCK_STREAM, 0))
static void sc_fastopen_sendto(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};

	sendto(0, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&sa, sizeof(sa));
}

static void sc_fastopen_sendmsg(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
	struct iovec iov = {.iov_base = "x", .iov_len = 1};
	struct msghdr m = {
		.msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1};

	sendmsg(0, &m, MSG_FASTOPEN);
}

static void sc_connect(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};

	connect(0, (struct sockaddr *)&sa, sizeof(sa));
}

static void sc_allowed(void)
{
	struct timespec ts;
	void *p;

	if (fcntl(1, F_SETFL, fcntl(1, F_GETFL)))
		_exit(2);
	p = malloc(16 << 20); /* mmap */
	if (!p)
		_exit(3);
	memset(p, 1, 16 << 20);
	free(p);
	if (clock_gettime(CLOCK_BOOTTIME, &ts))
		_exit(4);
}

static void test_seccomp(void)
{
	static const struct {
		void (*fn)(void);
		const char *what;
	} killed[] = {
		{sc_open, "open a file"},
		{sc_openat, "openat a file"},
		{sc_unix, "a Unix socket"},
		{sc_netlink, "a netlink socket"},
		{sc_packet, "a packet socket"},
		{sc_raw4, "a raw IPv4 socket"},
		{sc_ping, "an ICMP (ping) socket"},
		{sc_seqpacket, "a SOCK_SEQPACKET IPv4 socket"},
		{sc_execve, "execve"},
		{sc_fork, "fork"},
		{sc_clone, "clone"},
		{sc_ptrace, "ptrace"},
		{sc_bpf, "bpf"},
		{sc_mmap_exec, "executable memory"},
		{sc_kill, "kill"},
		{sc_setuid, "setuid"},
		{sc_dup, "dup"},
		{sc_fcntl_dup, "fcntl F_DUPFD"},
		{sc_ioctl, "ioctl TIOCSTI"},
		{sc_bind, "bind"},
		{sc_udp4, "a new UDP socket (IPv4)"},
		{sc_udp6, "a new UDP socket (IPv6)"},
		{sc_tcp4, "a TCP socket (IPv4)"},
		{sc_tcp6, "a TCP socket (IPv6)"},
		{sc_connect, "connect"},
		{sc_fastopen_sendto,
		 "sendto with MSG_FASTOPEN (which connects a closed TCP socket anew, anywhere)"},
		{sc_fastopen_sendmsg, "sendmsg with MSG_FASTOPEN"},
	};

	CHECK_INT(filtered(sc_allowed), 0, "under the worker's filter: fcntl, malloc, clocks work");
	for (size_t i = 0; i < ARRAY_SIZE(killed); i++)
		CHECK_INT(filtered(killed[i].fn), 128 + SIGSYS,
			  "under the worker's filter: %s kills", killed[i].what);
}

/* What a TCP connect to 127.0.0.1:port and a TCP bind meet under the
 * worker's Landlock rules (no port allowed), in a network namespace
 * of the child's own with its loopback down, so nothing is sent anywhere:
 * the connect's errno (EACCES: Landlock's), or 200 + the step that failed. */
static int tcp_under_landlock(uint16_t port, bool bind_too)
{
	int ws;
	pid_t pid = fork();

	if (pid == 0) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
		int fd;

		if (unshare(CLONE_NEWNET) && unshare(CLONE_NEWUSER | CLONE_NEWNET))
			_exit(201);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || dnsp_landlock_load())
			_exit(202);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			_exit(203);
		if (bind_too) {
			sa.sin_port = 0;
			_exit(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0);
		}
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		_exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ? errno : 0);
	}
	if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws))
		return -1;
	return WEXITSTATUS(ws);
}

static void test_landlock(void)
{
	if (landlock_abi() < LANDLOCK_ABI_NET) {
		/* the documented gap: nothing but the seccomp filter holds it */
		CHECK_INT(tcp_under_landlock(80, false), ENETUNREACH,
			  "Landlock ABI %d, no network rules: the worker's connect to port 80 is "
			  "not refused by Landlock",
			  landlock_abi());
		return;
	}
	CHECK_INT(tcp_under_landlock(80, false), EACCES,
		  "under the worker's Landlock rules: TCP to port 80 (an instance's metadata, "
		  "a host's web service) is refused");
	CHECK_INT(tcp_under_landlock(6379, false), EACCES, "... and to port 6379");
	CHECK_INT(tcp_under_landlock(53, false), EACCES,
		  "... and to a resolver's port (53): the agent connects its TCP");
	CHECK_INT(tcp_under_landlock(0, true), EACCES, "... a TCP bind is refused");
}

/* ---- the worker's UDP, under its whole confinement ---- */

#define UP_PORT 5353
static struct sockaddr_in up_sa = {.sin_family = AF_INET};
static int tcp_fd = -1; /* the confined child's TCP channel */
static struct sockaddr_in world_sa = {.sin_family = AF_INET};

static void resolved(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	(void)timeouts;
	(void)abuf;
	(void)alen;
	*(int *)arg = status;
}

/* What code in the worker tries once it is confined, in a child: 0 when
 * its attempt went through. */
static int udp_resolve(ares_channel ch)
{
	int status = -1;

	ares_query(ch, "up.example", 1 /* IN */, DNS_TYPE_A, resolved, &status);
	for (int i = 0; i < 100 && status == -1; i++) {
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		struct pollfd p[ARES_GETSOCK_MAXNUM];
		int bits = ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM), n = 0;

		for (int k = 0; k < ARES_GETSOCK_MAXNUM; k++)
			if (ARES_GETSOCK_READABLE(bits, k) || ARES_GETSOCK_WRITABLE(bits, k))
				p[n++] = (struct pollfd){
					.fd = socks[k],
					.events = (short)((ARES_GETSOCK_READABLE(bits, k) ? POLLIN
											  : 0) |
							  (ARES_GETSOCK_WRITABLE(bits, k) ? POLLOUT
											  : 0))};
		poll(p, (nfds_t)n, 20);
		for (int k = 0; k < n; k++)
			ares_process_fd(ch, p[k].revents & ~POLLOUT ? p[k].fd : ARES_SOCKET_BAD,
					p[k].revents & POLLOUT ? p[k].fd : ARES_SOCKET_BAD);
		ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	}
	return status == ARES_SUCCESS ? 0 : 10 + status;
}

static int udp_send_pool(ares_channel ch)
{
	(void)ch;
	return send(DNSP_FD_POOL, "pool", 4, 0) == 4 ? 0 : 1;
}

static int udp_new_socket(ares_channel ch)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	(void)ch;
	return fd >= 0 && sendto(fd, "new", 3, 0, (struct sockaddr *)&world_sa, sizeof(world_sa)) ==
				       3
		       ? 0
		       : 1;
}

static int udp_sendto_pool(ares_channel ch)
{
	(void)ch;
	return sendto(DNSP_FD_POOL, "to", 2, 0, (struct sockaddr *)&world_sa, sizeof(world_sa)) == 2
		       ? 0
		       : 1;
}

static int udp_connect_pool(ares_channel ch)
{
	(void)ch;
	return connect(DNSP_FD_POOL, (struct sockaddr *)&world_sa, sizeof(world_sa)) ||
			       send(DNSP_FD_POOL, "conn", 4, 0) != 4
		       ? 1
		       : 0;
}

static int udp_sendmsg_pool(ares_channel ch)
{
	struct iovec iov = {.iov_base = "msg", .iov_len = 3};
	struct msghdr m = {.msg_name = &world_sa,
			   .msg_namelen = sizeof(world_sa),
			   .msg_iov = &iov,
			   .msg_iovlen = 1};

	(void)ch;
	return sendmsg(DNSP_FD_POOL, &m, 0) == 3 ? 0 : 1;
}

/* A copy of the pool below it, where sends may name an address: onto fd
 * 5, and onto 5 with high bits the kernel drops. */
static int udp_dup_low(ares_channel ch)
{
	(void)ch;
	if (syscall(SYS_dup3, DNSP_FD_POOL, 5, 0) != 5)
		return 1;
	return sendto(5, "dup", 3, 0, (struct sockaddr *)&world_sa, sizeof(world_sa)) == 3 ? 0 : 1;
}

static int udp_dup_high_bits(ares_channel ch)
{
	(void)ch;
	if (syscall(SYS_dup3, DNSP_FD_POOL, (1ull << 32) | 5, 0) != 5)
		return 1;
	return sendto(5, "dup", 3, 0, (struct sockaddr *)&world_sa, sizeof(world_sa)) == 3 ? 0 : 1;
}

/* An IPv6 routing header (or IPv4 source route) set on an upstream socket
 * would send its plain writes to the header's first hop instead of its
 * peer: no option of the IP or IPv6 level is the worker's to set. */
static int udp_rthdr_pool(ares_channel ch)
{
	uint8_t rthdr[24] = {0, 2, 0, 1}; /* type 0, one address: left as zeros */

	(void)ch;
	return setsockopt(DNSP_FD_POOL, IPPROTO_IPV6, IPV6_RTHDR, rthdr, sizeof(rthdr)) ? 1 : 0;
}

static int udp_ipopts_pool(ares_channel ch)
{
	uint8_t lsrr[8] = {IPOPT_LSRR, 7, 4, 127, 0, 0, 2, IPOPT_END};

	(void)ch;
	return setsockopt(DNSP_FD_POOL, IPPROTO_IP, IP_OPTIONS, lsrr, sizeof(lsrr)) ? 1 : 0;
}

/* The upstream's answer to the query in buf (n bytes): one A record. */
static size_t answer(uint8_t *buf, size_t n)
{
	static const uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34};

	buf[2] = 0x81;
	buf[3] = 0x80;
	buf[7] = 1;
	memcpy(buf + n, rr, sizeof(rr));
	return n + sizeof(rr);
}

/* The upstream's TCP: one query on a connection taken from tcp_up, answered. */
static void answer_tcp(int tcp_up)
{
	uint8_t buf[512];
	int c = accept4(tcp_up, NULL, NULL, SOCK_CLOEXEC);
	ssize_t n;

	if (c < 0)
		return;
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 1},
		   sizeof(struct timeval));
	n = recv(c, buf, 2, MSG_WAITALL) == 2 && (buf[0] << 8 | buf[1]) <= (int)sizeof(buf) - 18
		    ? recv(c, buf + 2, (size_t)(buf[0] << 8 | buf[1]), MSG_WAITALL) + 2
		    : 0;
	if (n > 14 && (size_t)(buf[0] << 8 | buf[1]) == (size_t)n - 2 && buf[4] == 0x01) {
		size_t len = answer(buf + 2, (size_t)n - 2);

		buf[0] = (uint8_t)(len >> 8);
		buf[1] = (uint8_t)len;
		send(c, buf, len + 2, MSG_NOSIGNAL);
	}
	close(c);
}

/* Runs fn in a child confined as the worker is (dnsp_worker_confine, its
 * c-ares channel's one upstream 127.0.0.1:5353, over TCP alone with usevc),
 * its TCP channel served here as the agent serves it; meanwhile answers the
 * queries that come on up and tcp_up (-1: none) with an A record. fn's
 * status, or 128 + the signal. */
static int confined_as(int (*fn)(ares_channel), int up, int tcp_up, bool usevc)
{
	uint8_t buf[512];
	struct sockaddr_storage servers[1];
	struct sockaddr_in from;
	socklen_t fromlen = sizeof(from);
	ssize_t n;
	int ws = 0, tv[2];
	pid_t pid;

	fflush(stdout);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tv))
		return -1;
	pid = fork();
	if (pid == 0) {
		ares_channel ch;
		struct ares_options o = {
			.timeout = 1000, .tries = 1, .flags = usevc ? ARES_FLAG_USEVC : 0};

		close(tv[0]);
		if (ares_library_init(ARES_LIB_INIT_ALL) ||
		    ares_init_options(&ch, &o,
				      ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS) ||
		    ares_set_servers_ports_csv(ch, "127.0.0.1:5353"))
			_exit(201);
		tcp_fd = tv[1];
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || dnsp_worker_confine(ch, tv[1]))
			_exit(202);
		_exit(fn(ch));
	}
	close(tv[1]);
	if (pid < 0) {
		close(tv[0]);
		return -1;
	}
	memset(servers, 0, sizeof(servers));
	memcpy(&servers[0], &up_sa, sizeof(up_sa));
	/* The agent's side and the upstream, until the child ends. */
	while (waitpid(pid, &ws, WNOHANG) == 0) {
		struct pollfd p[3] = {{.fd = tv[0], .events = POLLIN},
				      {.fd = up, .events = POLLIN},
				      {.fd = tcp_up, .events = POLLIN}};

		if (poll(p, 3, 20) <= 0)
			continue;
		if (p[0].revents)
			dnsp_tcp_serve(tv[0], servers, 1);
		if ((p[1].revents & POLLIN) &&
		    (n = recvfrom(up, buf, sizeof(buf) - 16, 0, (struct sockaddr *)&from,
				  &fromlen)) > 12 &&
		    buf[2] == 0x01)
			sendto(up, buf, answer(buf, (size_t)n), 0, (struct sockaddr *)&from,
			       fromlen);
		if (p[2].revents & POLLIN)
			answer_tcp(tcp_up);
	}
	close(tv[0]);
	return WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : WEXITSTATUS(ws);
}

static int confined(int (*fn)(ares_channel), int up)
{
	return confined_as(fn, up, -1, false);
}

/* What a compromised worker asks of the agent on its TCP channel: a
 * connection to another host on the resolver's port. 0 when it got one. */
static int tcp_ask_other(ares_channel ch)
{
	struct dnsp_tcp_ask ask = {.type = DNSP_TCP_ASK, .len = sizeof(world_sa), .seq = 7};
	char ctl[CMSG_SPACE(sizeof(int))];
	struct dnsp_tcp_answer ans = {.err = -1};
	struct iovec iov = {.iov_base = &ans, .iov_len = sizeof(ans)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};

	(void)ch;
	memcpy(&ask.sa, &world_sa, sizeof(world_sa));
	if (write(tcp_fd, &ask, sizeof(ask)) != sizeof(ask) ||
	    recvmsg(tcp_fd, &m, 0) != sizeof(ans))
		return 1;
	return ans.err == ECONNREFUSED && ans.seq == 7 && !CMSG_FIRSTHDR(&m) ? 2 : 0;
}

/* One ask served as the agent serves it, the resolvers those c-ares makes
 * of "127.0.0.1:5353,[2001:db8::53]:53": dnsp_tcp_serve's status, the
 * answer's error in *err and whether it carried a socket. */
static int serve_ask(const void *ask, size_t len, int *err, bool *sock)
{
	struct sockaddr_storage servers[4];
	struct dnsp_tcp_answer ans = {.err = -1};
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &ans, .iov_len = sizeof(ans)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct ares_options o = {.timeout = 1000};
	ares_channel ch;
	size_t n = 0;
	int tv[2], rc;

	*err = -1;
	*sock = false;
	if (ares_init_options(&ch, &o, ARES_OPT_TIMEOUTMS))
		return -1000;
	if (!ares_set_servers_ports_csv(ch, "127.0.0.1:5353,[2001:db8::53]:53"))
		n = dnsp_tcp_servers(ch, servers, 4);
	ares_destroy(ch);
	if (n != 2 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tv))
		return -1001;
	if (write(tv[1], ask, len) != (ssize_t)len)
		return -1002;
	rc = dnsp_tcp_serve(tv[0], servers, n);
	if (recvmsg(tv[1], &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == sizeof(ans)) {
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);

		*err = ans.err;
		if (c && c->cmsg_type == SCM_RIGHTS) {
			int fd;

			memcpy(&fd, CMSG_DATA(c), sizeof(fd));
			close(fd);
			*sock = true;
		}
	}
	close(tv[0]);
	close(tv[1]);
	return rc;
}

static struct dnsp_tcp_ask ask4(uint32_t addr, uint16_t port)
{
	struct dnsp_tcp_ask a = {.type = DNSP_TCP_ASK, .len = sizeof(struct sockaddr_in)};
	struct sockaddr_in *sin = (void *)&a.sa;

	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(addr);
	sin->sin_port = htons(port);
	return a;
}

/* The agent's side of the TCP channel, in the child's namespace (the
 * upstream 127.0.0.1:5353 listening). */
static void tcp_serve_checks(void)
{
	struct dnsp_tcp_ask a = ask4(0x7f000001, UP_PORT), mapped = {.type = DNSP_TCP_ASK};
	struct sockaddr_in6 *sin6 = (void *)&mapped.sa;
	bool sock;
	int err;

	CHECK_INT(serve_ask(&a, sizeof(a), &err, &sock), 0, "the agent serves a worker's TCP ask");
	CHECK_TRUE((err == 0 || err == EINPROGRESS) && sock,
		   "... for the upstream (127.0.0.1:5353): a connection handed over (err %d)", err);
	a = ask4(0x7f000001, 80);
	serve_ask(&a, sizeof(a), &err, &sock);
	CHECK_TRUE(err == ECONNREFUSED && !sock,
		   "... for the upstream's address on another port (80): ECONNREFUSED, no socket");
	mapped.len = sizeof(*sin6);
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(UP_PORT);
	sin6->sin6_addr.s6_addr[10] = sin6->sin6_addr.s6_addr[11] = 0xff;
	sin6->sin6_addr.s6_addr[12] = 127;
	sin6->sin6_addr.s6_addr[15] = 1;
	serve_ask(&mapped, sizeof(mapped), &err, &sock);
	CHECK_TRUE(err == ECONNREFUSED && !sock,
		   "... for it as a v4-mapped IPv6 address: ECONNREFUSED, no socket");
	memset(&sin6->sin6_addr, 0, sizeof(sin6->sin6_addr));
	inet_pton(AF_INET6, "2001:db8::53", &sin6->sin6_addr);
	sin6->sin6_port = htons(53);
	serve_ask(&mapped, sizeof(mapped), &err, &sock);
	CHECK_TRUE(err != ECONNREFUSED && err != -1,
		   "... for the IPv6 resolver ([2001:db8::53]:53): connected to (here unreachable: "
		   "err %d)",
		   err);
	CHECK_INT(serve_ask(&a, 10, &err, &sock), -EBADMSG,
		  "a short ask is malformed: the agent ends the worker");
	a.type = DNSP_PROGRAM;
	CHECK_INT(serve_ask(&a, sizeof(a), &err, &sock), -EBADMSG, "... and one of another type");
}

/* In a child with a network namespace of its own, its loopback up: the
 * upstream resolver (127.0.0.1:5353) and a host that is none (127.0.0.2:5353,
 * as any host on the wan). Its exit status: 0 when each of its checks (its
 * own lines) passed. */
static int udp_checks(void)
{
	static const struct {
		int (*fn)(ares_channel);
		const char *what;
	} killed[] = {
		{udp_new_socket, "a new UDP socket to another host"},
		{udp_sendto_pool, "sendto another host on an upstream socket"},
		{udp_connect_pool, "connect an upstream socket to another host"},
		{udp_sendmsg_pool,
		 "sendmsg (an address the filter cannot see) on an upstream socket"},
		{udp_dup_low,
		 "a copy of an upstream socket below the pool, where sends name addresses"},
		{udp_dup_high_bits, "... onto a descriptor whose high bits the kernel drops"},
		{udp_rthdr_pool, "an IPv6 routing header set on an upstream socket"},
		{udp_ipopts_pool, "an IPv4 source route set on an upstream socket"},
	};
	struct ifreq ifr = {.ifr_name = "lo"};
	char buf[64];
	int s, up, world, tcp_up, tcp_world;

	if (unshare(CLONE_NEWNET) && unshare(CLONE_NEWUSER | CLONE_NEWNET))
		return 201;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	ifr.ifr_flags = IFF_UP;
	if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr))
		return 202;
	up_sa.sin_addr.s_addr = htonl(0x7f000001);
	world_sa.sin_addr.s_addr = htonl(0x7f000002);
	up_sa.sin_port = world_sa.sin_port = htons(UP_PORT);
	up = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	world = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	tcp_up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	tcp_world = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (up < 0 || world < 0 || tcp_up < 0 || tcp_world < 0 ||
	    bind(up, (struct sockaddr *)&up_sa, sizeof(up_sa)) ||
	    bind(world, (struct sockaddr *)&world_sa, sizeof(world_sa)) ||
	    bind(tcp_up, (struct sockaddr *)&up_sa, sizeof(up_sa)) ||
	    bind(tcp_world, (struct sockaddr *)&world_sa, sizeof(world_sa)) || listen(tcp_up, 4) ||
	    listen(tcp_world, 4))
		return 203;
	CHECK_INT(confined_as(udp_resolve, -1, tcp_up, true), 0,
		  "confined as the worker, over TCP alone: a name resolves through the upstream, "
		  "on the connection the agent made for it");
	CHECK_INT(confined(tcp_ask_other, -1), 2,
		  "... a TCP connection to another host on the resolver's port, asked of the "
		  "agent, is refused and no socket handed over");
	CHECK_INT(accept(tcp_world, NULL, NULL), -1, "the other host got no TCP connection");
	tcp_serve_checks();
	CHECK_INT(confined(udp_resolve, up), 0,
		  "confined as the worker: a name resolves through the upstream (c-ares on its "
		  "connected sockets)");
	CHECK_INT(confined(udp_send_pool, -1), 0, "... a send on an upstream socket goes");
	CHECK_INT(recv(up, buf, sizeof(buf), MSG_DONTWAIT), 4, "... to the upstream");
	for (size_t i = 0; i < ARRAY_SIZE(killed); i++)
		CHECK_INT(confined(killed[i].fn, -1), 128 + SIGSYS,
			  "confined as the worker: %s kills", killed[i].what);
	CHECK_INT(recv(world, buf, sizeof(buf), MSG_DONTWAIT), -1,
		  "the other host got no datagram from it");
	return test_failed ? 1 : 0;
}

static void test_udp(void)
{
	int ws;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(udp_checks());
	CHECK_TRUE(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
		   "the worker's UDP and TCP reach its upstream resolver alone (the checks above; "
		   "status %d)",
		   pid > 0 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

int main(void)
{
	config_defaults(&cfg);
	cfg.allow = calloc(8, sizeof(*cfg.allow));
	rule("api.example.com:443");
	rule("api.example.com:8080");
	rule("*.wild.example:443");
	cfg.dns_max_addrs = 4;
	cfg.dns_max_names = 4;
	cfg.dns_max_wildcard_names = 2;
	cfg.dns_ttl_floor = 5;
	cfg.dns_ttl_cap = 300;
	cfg.dns_grace = 5;
	grant(7, "granted.example.org:8443", GRANT_ALWAYS, 0);
	grant(8, "expired.example.org:443", GRANT_UNTIL, NOW_UNIX - 10);
	grant(9, "once.example.org:443", GRANT_ONCE, 0);
	grant(10, "until.example.org:443", GRANT_UNTIL, NOW_UNIX + 30);
	if (addr_parse("93.184.216.99", &self[0]) || addr_parse("2001:db8:1::99", &self[1]))
		abort();
	/* 2001:db8::/32 is documentation space: forbidden unless declared public. */
	cfg.public_ranges = calloc(1, sizeof(*cfg.public_ranges));
	if (cidr_parse("2001:db8::/32", &cfg.public_ranges[0]))
		abort();
	cfg.n_public = 1;

	policy_reset();
	test_malformed();
	policy_reset();
	test_names();
	policy_reset();
	test_addresses();
	policy_reset();
	test_caps();
	policy_reset();
	test_record();
	policy_reset();
	test_ttl();
	CHECK_FALSE(pinned_seen, "no admitted request produced a pinned entry");
	test_seccomp();
	test_landlock();
	test_udp();
	return test_exit();
}
