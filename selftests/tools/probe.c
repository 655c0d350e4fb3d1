/* probe: the one test tool of errand's kernel-level selftests. Each subcommand
 * does one network thing (connect, send, raw send, DNS query, name lookup,
 * serve, sniff, serve DNS) and prints one line saying what happened: "ok ...",
 * "sent", "answer ...", or the errno name (EPERM...).
 * Exit 0 on success, 1 on the failure it reports, 2 on a usage error. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"

#define PAYLOAD "errand-probe"
#define READ_MAX 200
#define READ_TIMEOUT_MS 2000
#define DNS_TIMEOUT_MS 2000
#define MAX_LISTEN 32

struct endpoint {
	struct sockaddr_storage ss;
	socklen_t len;
};

static int usage(void)
{
	fprintf(stderr,
		"usage: probe tcp ADDR PORT [--timeout S] [--from SRCADDR] [--taken PID:FD]\n"
		"       probe sock-hold COUNT SECONDS\n"
		"       probe udp|udp-connect ADDR PORT [--size BYTES] [--count N]\n"
		"                 [--from SRCADDR]\n"
		"       probe tcp-hold ADDR PORT SECONDS\n"
		"       probe tcp-talk ADDR PORT SECONDS | probe tick-serve --log FILE ADDR:PORT\n"
		"       probe syn-serve --log FILE ADDR:PORT\n"
		"       probe dns ADDR NAME [--tcp|--connected] [--type A|AAAA|TXT|MX|ANY|N]\n"
		"                 [--timeout S]\n"
		"       probe dns-serve --zone FILE [--log FILE] [--silent] ADDR:PORT\n"
		"       probe dns-flood [--window N] ADDR SECONDS NAME... ('#' in a NAME: a "
		"counter)\n"
		"       probe resolve NAME [PORT]\n"
		"       probe icmp ADDR | probe rawip ADDR PROTO\n"
		"       probe serve [--log FILE] [udp:|tcp:]ADDR:PORT[@DEV][/echo]...\n"
		"       probe sniff --log FILE [PROTO...]\n"
		"       probe bulk-serve ADDR:PORT | probe bulk ADDR PORT BYTES\n"
		"       probe rr ADDR PORT COUNT [--parallel N]\n"
		"       probe tcp-reconnect ADDR PORT COUNT\n"
		"       probe mptcp ADDR PORT\n"
		"       probe srr ADDR PORT --via HOP [--tcp] [--strict]\n"
		"       probe flood ADDR PORT SECONDS [PORTS]\n"
		"       probe ip6 IFNAME plain|rh|hbh-rh|long|dst|frag|icmp [--src A] [--dst A] "
		"[--tcp PORT]\n"
		"                 [--mac MAC]\n");
	return 2;
}

/* Prints the errno's name ("EPERM") and returns 1, the status of a reported failure. */
static int fail_errno(int err)
{
	const char *name = strerrorname_np(err);

	if (name)
		printf("%s\n", name);
	else
		printf("errno%d\n", err);
	fflush(stdout);
	return 1;
}

static int parse_port(const char *s, uint16_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || v < 0 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

/* "198.18.1.10" or "2001:db8::1" (the form decides the family) and a port. */
static int endpoint_make(const char *addr, uint16_t port, struct endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ep->ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		if (inet_pton(AF_INET6, addr, &s6->sin6_addr) != 1)
			return -EINVAL;
		ep->len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ep->ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		if (inet_pton(AF_INET, addr, &s4->sin_addr) != 1)
			return -EINVAL;
		ep->len = sizeof(*s4);
	}
	return 0;
}

/* "ADDR:PORT" or "[ADDR6]:PORT". */
static int endpoint_parse(const char *s, struct endpoint *ep)
{
	char buf[128];
	const char *host, *port;
	char *colon;
	uint16_t p;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	if (buf[0] == '[') {
		char *close = strchr(buf, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		*close = '\0';
		host = buf + 1;
		port = close + 2;
	} else {
		colon = strrchr(buf, ':');
		if (!colon)
			return -EINVAL;
		*colon = '\0';
		host = buf;
		port = colon + 1;
	}
	if (parse_port(port, &p))
		return -EINVAL;
	return endpoint_make(host, p, ep);
}

/* "a.b.c.d:p" or "[v6]:p"; a v4-mapped v6 address is written as IPv4. */
static const char *sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], a, sizeof(a));
			snprintf(buf, len, "%s:%u", a, ntohs(s6->sin6_port));
		} else {
			inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
			snprintf(buf, len, "[%s]:%u", a, ntohs(s6->sin6_port));
		}
	} else {
		snprintf(buf, len, "family%d", sa->sa_family);
	}
	return buf;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for events on fd for at most timeout_ms. 1 ready, 0 timed out, -errno. */
static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	long long deadline = now_ms() + timeout_ms;
	int r;

	for (;;) {
		int left = (int)(deadline - now_ms());

		if (left < 0)
			left = 0;
		r = poll(&p, 1, left);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

/* Non-blocking connect bounded by timeout_ms, from the source address from
 * when not NULL; the socket is left non-blocking. fd or -errno (-ETIMEDOUT when the time ran out).
 */
static int socket_from(const struct endpoint *ep, int type, const char *from);

static int connect_timeout(const struct endpoint *ep, int type, int timeout_ms, const char *from)
{
	int fd, r, err = 0;
	socklen_t elen = sizeof(err);

	fd = socket_from(ep, type | SOCK_NONBLOCK, from);
	if (fd < 0)
		return fd;
	if (connect(fd, (const struct sockaddr *)&ep->ss, ep->len) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return -err;
	}
	r = wait_fd(fd, POLLOUT, timeout_ms);
	if (r <= 0) {
		close(fd);
		return r == 0 ? -ETIMEDOUT : r;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		err = errno;
	if (err) {
		close(fd);
		return -err;
	}
	return fd;
}

/* Reads what the peer sends until EOF, len-1 bytes or timeout; NUL-terminates.
 * Bytes read or -errno. */
static ssize_t read_some(int fd, char *buf, size_t len, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	size_t got = 0;

	while (got + 1 < len) {
		int left = (int)(deadline - now_ms());
		ssize_t n;
		int r;

		if (left <= 0)
			break;
		r = wait_fd(fd, POLLIN, left);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (got)
				break;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

/* Trims whitespace at both ends and turns inner newlines into spaces. */
static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t'))
		*--e = '\0';
	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return s;
}

/* Options after ADDR PORT: --timeout S, --from ADDR (bind the source address
 * first), --size N (datagram size), --count N (datagrams sent), --taken
 * PID:FD (not a socket of its own: the one process PID holds as FD, taken
 * with pidfd_getfd; kept in taken, which socket_from reads). Unknown ones
 * are a usage error. */
static const char *taken;

struct opts {
	int timeout_s;
	const char *from;
	size_t size;
	long count;
};

static int opts_parse(int argc, char **argv, int first, struct opts *o)
{
	for (int i = first; i < argc; i += 2) {
		char *end;
		long v;

		if (i + 1 >= argc)
			return -EINVAL;
		if (!strcmp(argv[i], "--from")) {
			o->from = argv[i + 1];
			continue;
		}
		if (!strcmp(argv[i], "--taken")) {
			taken = argv[i + 1];
			continue;
		}
		v = strtol(argv[i + 1], &end, 10);
		if (*end)
			return -EINVAL;
		if (!strcmp(argv[i], "--timeout") && v > 0 && v <= 600)
			o->timeout_s = (int)v;
		else if (!strcmp(argv[i], "--size") && v > 0 && v <= 65507)
			o->size = (size_t)v;
		else if (!strcmp(argv[i], "--count") && v > 0 && v <= 1000000)
			o->count = v;
		else
			return -EINVAL;
	}
	return 0;
}

/* The socket process pid holds as fd spec "PID:FD", ours now, with type's
 * SOCK_NONBLOCK. */
static int socket_taken(const char *spec, int type)
{
	int pid, nfd, pfd, fd, n = 0;

	if (sscanf(spec, "%d:%d%n", &pid, &nfd, &n) != 2 || spec[n] || pid <= 0 || nfd < 0)
		return -EINVAL;
	pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return -errno;
	fd = (int)syscall(SYS_pidfd_getfd, pfd, nfd, 0);
	n = errno;
	close(pfd);
	if (fd < 0)
		return -n;
	if ((type & SOCK_NONBLOCK) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		n = errno;
		close(fd);
		return -n;
	}
	return fd;
}

/* A socket of the endpoint's family, bound to from (port 0) when given; or
 * the one --taken names. */
static int socket_from(const struct endpoint *ep, int type, const char *from)
{
	struct endpoint src;
	int fd;

	if (taken)
		return socket_taken(taken, type);
	fd = socket(ep->ss.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0 || !from)
		return fd < 0 ? -errno : fd;
	if (endpoint_make(from, 0, &src) || src.ss.ss_family != ep->ss.ss_family) {
		close(fd);
		return -EINVAL;
	}
	if (bind(fd, (struct sockaddr *)&src.ss, src.len) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

static int cmd_tcp(int argc, char **argv)
{
	struct opts o = {.timeout_s = 3};
	struct endpoint ep;
	char buf[READ_MAX + 1];
	uint16_t port;
	ssize_t n;
	int fd;

	if (argc < 3 || opts_parse(argc, argv, 3, &o) || o.size || o.count)
		return usage();
	if (parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	fd = connect_timeout(&ep, SOCK_STREAM, o.timeout_s * 1000, o.from);
	if (fd == -EINVAL && o.from)
		return usage();
	if (fd < 0)
		return fail_errno(-fd);
	n = read_some(fd, buf, sizeof(buf), READ_TIMEOUT_MS);
	close(fd);
	if (n < 0)
		return fail_errno((int)-n);
	printf("ok %s\n", trim(buf));
	return 0;
}

static int cmd_udp(int argc, char **argv, bool connected)
{
	struct opts o = {.size = 4, .count = 1};
	struct endpoint ep;
	char *data;
	uint16_t port;
	ssize_t n = 0;
	int fd;

	if (argc < 3 || opts_parse(argc, argv, 3, &o) || o.timeout_s)
		return usage();
	if (parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	data = malloc(o.size);
	if (!data)
		return fail_errno(ENOMEM);
	memset(data, 'x', o.size);
	memcpy(data, "ping", o.size < 4 ? o.size : 4);
	fd = socket_from(&ep, SOCK_DGRAM, o.from);
	if (fd == -EINVAL && o.from)
		return usage();
	if (fd < 0)
		return fail_errno(-fd);
	if (connected && connect(fd, (struct sockaddr *)&ep.ss, ep.len) < 0)
		return fail_errno(errno);
	for (long i = 0; i < o.count && n >= 0; i++)
		n = connected ? send(fd, data, o.size, 0)
			      : sendto(fd, data, o.size, 0, (struct sockaddr *)&ep.ss, ep.len);
	if (n < 0)
		return fail_errno(errno);
	close(fd);
	free(data);
	printf("ok\n");
	return 0;
}

/* DNS, both sides: the client (probe dns) and a small authoritative server
 * (probe dns-serve), the upstream of the test world. Written here on purpose,
 * apart from agent/dnsmsg.c: the test server must not share the code under
 * test. */
static FILE *log_open(const char *path);
static int listen_on(const struct endpoint *ep, int type, const char *dev);

#define DNS_T_A 1
#define DNS_T_CNAME 5
#define DNS_T_TXT 16
#define DNS_T_AAAA 28
#define DNS_T_ANY 255
#define DNS_NAME_TEXT 320 /* a name as text, with room for odd bytes */
#define DNS_UDP_MAX 512

static const struct {
	const char *name;
	uint16_t type;
} dns_types[] = {
	{"A", 1},    {"NS", 2},	   {"CNAME", 5}, {"SOA", 6},	{"PTR", 12},  {"MX", 15},
	{"TXT", 16}, {"AAAA", 28}, {"SRV", 33},	 {"HTTPS", 65}, {"ANY", 255},
};

static const char *dns_type_str(uint16_t t, char buf[8])
{
	for (size_t i = 0; i < sizeof(dns_types) / sizeof(dns_types[0]); i++)
		if (dns_types[i].type == t)
			return dns_types[i].name;
	snprintf(buf, 8, "%u", t);
	return buf;
}

/* A type's name (any case) or number. */
static int dns_type_parse(const char *s, uint16_t *out)
{
	char *end;
	long v;

	for (size_t i = 0; i < sizeof(dns_types) / sizeof(dns_types[0]); i++)
		if (!strcasecmp(s, dns_types[i].name)) {
			*out = dns_types[i].type;
			return 0;
		}
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end || v < 1 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

static const char *dns_rcode_str(unsigned rc, char buf[8])
{
	static const char *const names[] = {"NOERROR",	"FORMERR", "SERVFAIL",
					    "NXDOMAIN", "NOTIMP",  "REFUSED"};

	if (rc < sizeof(names) / sizeof(names[0]))
		return names[rc];
	snprintf(buf, 8, "%u", rc & 0xffff);
	return buf;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* NAME ("a.b.c", trailing dot optional, "." the root) as labels at out.
 * Length written or -EINVAL. */
static int dns_name_put(const char *name, uint8_t *out, size_t cap)
{
	const char *p = name;
	size_t o = 0;

	if (!strcmp(p, "."))
		p++;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		if (l == 0 || l > 63 || o + l + 2 > cap || o + l + 2 > 255)
			return -EINVAL;
		out[o++] = (uint8_t)l;
		memcpy(out + o, p, l);
		o += l;
		p += l;
		if (*p == '.')
			p++;
	}
	if (o + 1 > cap)
		return -EINVAL;
	out[o++] = 0;
	return (int)o;
}

/* The name at *off of message m, following compression pointers, as dotted
 * text (bytes outside printable ASCII, and dots inside labels, as '?'; the
 * root as "."). Advances *off past it. 0 or -EINVAL. */
static int dns_name_get(const uint8_t *m, size_t len, size_t *off, char *out, size_t outlen)
{
	size_t o = *off, w = 0;
	bool jumped = false;
	int hops = 0;

	for (;;) {
		uint8_t l;

		if (o >= len)
			return -EINVAL;
		l = m[o];
		if ((l & 0xc0) == 0xc0) {
			if (o + 1 >= len || ++hops > 32)
				return -EINVAL;
			if (!jumped)
				*off = o + 2;
			jumped = true;
			o = ((size_t)(l & 0x3f) << 8) | m[o + 1];
			continue;
		}
		if (l & 0xc0)
			return -EINVAL;
		o++;
		if (l == 0)
			break;
		if (o + l > len || w + l + 2 > outlen)
			return -EINVAL;
		if (w)
			out[w++] = '.';
		for (size_t i = 0; i < l; i++) {
			uint8_t c = m[o + i];

			out[w++] = c > 0x20 && c < 0x7f && c != '.' ? (char)c : '?';
		}
		o += l;
	}
	if (!jumped)
		*off = o;
	if (w == 0)
		out[w++] = '.';
	out[w] = '\0';
	return 0;
}

static void lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
}

/* A query: id, RD, one question NAME IN QTYPE. Length or -EINVAL. */
static int dns_query_build(const char *name, uint16_t id, uint16_t qtype, uint8_t *out, size_t len)
{
	int n;

	if (len < 12 + 4)
		return -EINVAL;
	memset(out, 0, 12);
	put16(out, id);
	out[2] = 0x01; /* RD */
	out[5] = 1;    /* QDCOUNT */
	n = dns_name_put(name, out + 12, len - 12 - 4);
	if (n < 0)
		return n;
	put16(out + 12 + n, qtype);
	put16(out + 12 + n + 2, 1); /* IN */
	return 12 + n + 4;
}

/* What probe dns reports of an answer. */
struct dns_result {
	unsigned rcode;
	bool tc;
	char addrs[2048]; /* A and AAAA records, comma-separated */
	long long ttl;	  /* their smallest TTL, -1 if none */
	char other[256];  /* the types of the other answer records */
};

static void list_add(char *list, size_t len, const char *item)
{
	size_t l = strlen(list);

	snprintf(list + l, len - l, "%s%s", l ? "," : "", item);
}

static int dns_answer_parse(const uint8_t *m, size_t len, uint16_t id, struct dns_result *r)
{
	char name[DNS_NAME_TEXT];
	size_t off = 12;
	unsigned qd, an;

	memset(r, 0, sizeof(*r));
	r->ttl = -1;
	if (len < 12)
		return -EINVAL;
	if (get16(m) != id || !(m[2] & 0x80))
		return -EBADMSG;
	r->rcode = m[3] & 0x0f;
	r->tc = m[2] & 0x02;
	qd = get16(m + 4);
	an = get16(m + 6);
	for (unsigned i = 0; i < qd; i++) {
		if (dns_name_get(m, len, &off, name, sizeof(name)) || off + 4 > len)
			return -EINVAL;
		off += 4;
	}
	for (unsigned i = 0; i < an; i++) {
		char a[INET6_ADDRSTRLEN], tbuf[8];
		uint16_t type, rdlen;
		uint32_t ttl;

		if (dns_name_get(m, len, &off, name, sizeof(name)) || off + 10 > len)
			return -EINVAL;
		type = get16(m + off);
		ttl = (uint32_t)get16(m + off + 4) << 16 | get16(m + off + 6);
		rdlen = get16(m + off + 8);
		off += 10;
		if (off + rdlen > len)
			return -EINVAL;
		if ((type == DNS_T_A && rdlen == 4) || (type == DNS_T_AAAA && rdlen == 16)) {
			inet_ntop(type == DNS_T_A ? AF_INET : AF_INET6, m + off, a, sizeof(a));
			list_add(r->addrs, sizeof(r->addrs), a);
			if (r->ttl < 0 || ttl < r->ttl)
				r->ttl = ttl;
		} else {
			list_add(r->other, sizeof(r->other), dns_type_str(type, tbuf));
		}
		off += rdlen;
	}
	return 0;
}

/* probe dns ADDR NAME [--tcp|--connected] [--type T] [--timeout S]: one query
 * to ADDR port 53; prints
 *   answer RCODE addrs=A1,A2 ttl=T [other=TYPES] [tc] from ADDR:PORT
 * ("from" last: the address the answer came back from, as the socket saw it). */
static int cmd_dns(int argc, char **argv)
{
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	struct dns_result res;
	struct endpoint ep;
	uint8_t q[2 + 512];
	static uint8_t a[2 + 65535];
	bool tcp = false, connected = false;
	char src[128], rbuf[8], ttl[24];
	uint16_t qtype = DNS_T_A, id;
	int timeout_ms = DNS_TIMEOUT_MS;
	size_t alen;
	ssize_t n;
	int qlen, fd, r;

	if (argc < 3)
		return usage();
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--tcp")) {
			tcp = true;
		} else if (!strcmp(argv[i], "--connected")) {
			connected = true;
		} else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
			if (dns_type_parse(argv[++i], &qtype))
				return usage();
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v <= 0 || v > 600)
				return usage();
			timeout_ms = (int)v * 1000;
		} else {
			return usage();
		}
	}
	if (tcp && connected)
		return usage();
	if (endpoint_make(argv[1], 53, &ep))
		return usage();
	id = (uint16_t)(getpid() ^ now_ms());
	qlen = dns_query_build(argv[2], id, qtype, q + 2, sizeof(q) - 2);
	if (qlen < 0)
		return usage();

	if (tcp) {
		size_t got = 0, want = 2;
		long long deadline = now_ms() + timeout_ms;

		fd = connect_timeout(&ep, SOCK_STREAM, timeout_ms, NULL);
		if (fd == -ETIMEDOUT) {
			printf("timeout\n");
			return 1;
		}
		if (fd < 0)
			return fail_errno(-fd);
		put16(q, (uint16_t)qlen);
		if (write(fd, q, (size_t)qlen + 2) < 0)
			return fail_errno(errno);
		while (got < want) {
			int left = (int)(deadline - now_ms());

			r = wait_fd(fd, POLLIN, left > 0 ? left : 0);
			if (r == 0) {
				printf("timeout\n");
				return 1;
			}
			if (r < 0)
				return fail_errno(-r);
			n = read(fd, a + got, sizeof(a) - got);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n < 0)
				return fail_errno(errno);
			if (n == 0) {
				printf("closed\n");
				return 1;
			}
			got += (size_t)n;
			if (got >= 2)
				want = 2 + (size_t)get16(a);
		}
		if (getpeername(fd, (struct sockaddr *)&from, &flen) < 0)
			return fail_errno(errno);
		close(fd);
		memmove(a, a + 2, want - 2);
		alen = want - 2;
	} else {
		fd = socket(ep.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail_errno(errno);
		if (connected) {
			if (connect(fd, (struct sockaddr *)&ep.ss, ep.len) < 0)
				return fail_errno(errno);
			n = send(fd, q + 2, (size_t)qlen, 0);
		} else {
			n = sendto(fd, q + 2, (size_t)qlen, 0, (struct sockaddr *)&ep.ss, ep.len);
		}
		if (n < 0)
			return fail_errno(errno);
		r = wait_fd(fd, POLLIN, timeout_ms);
		if (r == 0) {
			printf("timeout\n");
			return 1;
		}
		if (r < 0)
			return fail_errno(-r);
		n = recvfrom(fd, a, sizeof(a), 0, (struct sockaddr *)&from, &flen);
		if (n < 0)
			return fail_errno(errno);
		close(fd);
		alen = (size_t)n;
	}
	sockaddr_str((struct sockaddr *)&from, src, sizeof(src));
	r = dns_answer_parse(a, alen, id, &res);
	if (r == -EBADMSG) {
		printf("badid from %s\n", src);
		return 1;
	}
	if (r < 0) {
		printf("malformed from %s\n", src);
		return 1;
	}
	if (res.ttl < 0)
		snprintf(ttl, sizeof(ttl), "-");
	else
		snprintf(ttl, sizeof(ttl), "%lld", res.ttl);
	printf("answer %s addrs=%s ttl=%s%s%s%s from %s\n", dns_rcode_str(res.rcode, rbuf),
	       res.addrs, ttl, res.other[0] ? " other=" : "", res.other, res.tc ? " tc" : "", src);
	return 0;
}

/* The zone of probe dns-serve: "NAME TYPE VALUE [TTL]" lines. */
struct zrec {
	char name[256]; /* lowercased, no trailing dot */
	uint16_t type;
	uint32_t ttl;
	uint16_t rdlen;
	uint8_t rd[256];
	char target[256]; /* CNAME */
};

static struct zrec *zone;
static size_t zone_n;

static void name_norm(char *s)
{
	size_t l;

	lower(s);
	l = strlen(s);
	if (l > 1 && s[l - 1] == '.')
		s[l - 1] = '\0';
}

/* Reads the zone at path; the old one stays on an error (said on stderr).
 * Records or -1. */
static long zone_load(const char *path)
{
	struct zrec *z = NULL;
	size_t n = 0, cap = 0;
	char line[1024];
	int lineno = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "probe dns-serve: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *save, *name, *type, *value, *ttl, *extra, *hash;
		struct zrec *r;

		lineno++;
		if ((hash = strchr(line, '#')))
			*hash = '\0';
		name = strtok_r(line, " \t\r\n", &save);
		if (!name)
			continue;
		type = strtok_r(NULL, " \t\r\n", &save);
		value = strtok_r(NULL, " \t\r\n", &save);
		ttl = strtok_r(NULL, " \t\r\n", &save);
		extra = strtok_r(NULL, " \t\r\n", &save);
		if (!type || !value || extra || strlen(name) > 253)
			goto bad;
		if (n == cap) {
			struct zrec *nz;

			cap = cap ? cap * 2 : 64;
			nz = realloc(z, cap * sizeof(*z));
			if (!nz)
				goto bad;
			z = nz;
		}
		r = &z[n];
		memset(r, 0, sizeof(*r));
		snprintf(r->name, sizeof(r->name), "%s", name);
		name_norm(r->name);
		r->ttl = 60;
		if (ttl) {
			char *end;
			unsigned long v = strtoul(ttl, &end, 10);

			if (*end || *ttl == '-' || v > 0x7fffffffUL)
				goto bad;
			r->ttl = (uint32_t)v;
		}
		if (!strcasecmp(type, "A")) {
			r->type = DNS_T_A;
			r->rdlen = 4;
			if (inet_pton(AF_INET, value, r->rd) != 1)
				goto bad;
		} else if (!strcasecmp(type, "AAAA")) {
			r->type = DNS_T_AAAA;
			r->rdlen = 16;
			if (inet_pton(AF_INET6, value, r->rd) != 1)
				goto bad;
		} else if (!strcasecmp(type, "CNAME")) {
			int l;

			r->type = DNS_T_CNAME;
			snprintf(r->target, sizeof(r->target), "%s", value);
			name_norm(r->target);
			l = dns_name_put(r->target, r->rd, sizeof(r->rd));
			if (l < 0)
				goto bad;
			r->rdlen = (uint16_t)l;
		} else if (!strcasecmp(type, "TXT")) {
			size_t l = strlen(value);

			if (l > 255)
				goto bad;
			r->type = DNS_T_TXT;
			r->rd[0] = (uint8_t)l;
			memcpy(r->rd + 1, value, l);
			r->rdlen = (uint16_t)(l + 1);
		} else {
			goto bad;
		}
		n++;
	}
	fclose(f);
	free(zone);
	zone = z;
	zone_n = n;
	return (long)n;
bad:
	fprintf(stderr, "probe dns-serve: %s:%d: expected NAME A|AAAA|CNAME|TXT VALUE [TTL]\n",
		path, lineno);
	fclose(f);
	free(z);
	return -1;
}

/* Appends one record at *o: the owner as a pointer to the question when it is
 * the question's name, else in full. false when it does not fit. */
static bool rr_put(uint8_t *out, size_t cap, size_t *o, const struct zrec *r, bool owner_is_q)
{
	int nl;

	if (owner_is_q) {
		if (*o + 2 > cap)
			return false;
		put16(out + *o, 0xc00c);
		nl = 2;
	} else {
		nl = dns_name_put(r->name, out + *o, cap - *o);
		if (nl < 0)
			return false;
	}
	if (*o + (size_t)nl + 10 + r->rdlen > cap)
		return false;
	*o += (size_t)nl;
	put16(out + *o, r->type);
	put16(out + *o + 2, 1);
	put16(out + *o + 4, (uint16_t)(r->ttl >> 16));
	put16(out + *o + 6, (uint16_t)r->ttl);
	put16(out + *o + 8, r->rdlen);
	memcpy(out + *o + 10, r->rd, r->rdlen);
	*o += 10 + r->rdlen;
	return true;
}

/* The answer to query q, at out; its length, or 0 to drop the query. The
 * question's name (lowercased) and type go to qname and qtype for the log. */
static size_t dns_serve_answer(const uint8_t *q, size_t qlen, uint8_t *out, size_t cap,
			       size_t limit, char *qname, uint16_t *qtype)
{
	char cur[DNS_NAME_TEXT];
	size_t off = 12, o;
	unsigned an = 0, rcode = 0;
	bool first = true;

	qname[0] = '\0';
	*qtype = 0;
	if (qlen < 12 || (q[2] & 0x80) || cap < 12)
		return 0;
	memset(out, 0, 12);
	memcpy(out, q, 2);
	out[2] = (uint8_t)(0x80 | (q[2] & 0x78) | 0x04 | (q[2] & 0x01)); /* QR, opcode, AA, RD */
	out[3] = 0x80;							 /* RA */
	if (get16(q + 4) != 1 || dns_name_get(q, qlen, &off, qname, DNS_NAME_TEXT) ||
	    off + 4 > qlen || off > cap) {
		qname[0] = '\0';
		out[3] |= 1; /* FORMERR */
		return 12;
	}
	lower(qname);
	*qtype = get16(q + off);
	/* The question as asked (its case too), then the answers. */
	off += 4;
	memcpy(out + 12, q + 12, off - 12);
	out[5] = 1;
	o = off;
	if (q[2] & 0x78) {
		out[3] |= 4; /* NOTIMP */
		return o;
	}
	snprintf(cur, sizeof(cur), "%s", qname);
	for (int depth = 0; depth < 16; depth++) {
		const struct zrec *cname = NULL;
		bool exists = false, found = false;

		for (size_t i = 0; i < zone_n; i++) {
			const struct zrec *r = &zone[i];

			if (strcmp(r->name, cur))
				continue;
			exists = true;
			if (r->type == *qtype || *qtype == DNS_T_ANY) {
				if (!rr_put(out, cap, &o, r, first))
					return 0;
				an++;
				found = true;
			} else if (r->type == DNS_T_CNAME) {
				cname = r;
			}
		}
		if (!exists && first)
			rcode = 3; /* NXDOMAIN */
		if (found || !cname)
			break;
		/* Not the type asked but a CNAME: answer it, follow it in the zone. */
		if (!rr_put(out, cap, &o, cname, first))
			return 0;
		an++;
		snprintf(cur, sizeof(cur), "%s", cname->target);
		first = false;
	}
	out[3] |= (uint8_t)rcode;
	put16(out + 6, (uint16_t)an);
	if (o > limit) {
		/* Too long for UDP: truncated, the client retries over TCP. */
		out[2] |= 0x02;
		put16(out + 6, 0);
		o = off;
	}
	return o;
}

static volatile sig_atomic_t dns_hup;

static void on_hup(int sig)
{
	(void)sig;
	dns_hup = 1;
}

#define DNS_TCP_CLIENTS 32

struct dns_tcp_client {
	int fd;
	char src[128];
	size_t len;
	uint8_t buf[2 + 4096];
};

/* probe dns-serve --zone FILE [--log FILE] [--silent] ADDR:PORT: answers from
 * the zone over UDP and TCP on ADDR:PORT; logs "query NAME TYPE from SRC"
 * (" tcp" appended for TCP) for every query; with --silent, logs and never
 * answers. SIGHUP re-reads the zone ("reloaded N" on stdout). */
/* probe dns-flood [--window N] ADDR SECONDS NAME...: UDP queries (type A) to
 * ADDR port 53, the NAMEs in turn, about 3000 a second for SECONDS, reading
 * answers as they come; prints "flood sent=N answered=M servfail=K". A '#' in
 * a NAME becomes a counter, so every query asks a name of its own. With
 * --window, at most N queries wait for their answers at once, and the next
 * are sent as the answers come, unpaced: the flood goes at the pace of the
 * responder, whatever it is (a VM without KVM is 10 to 50 times slower), and
 * measures it. A window unanswered for a second is given up (those queries
 * are sent, not answered) and the flood goes on. */
static int cmd_dns_flood(int argc, char **argv)
{
	static uint8_t a[65535];
	unsigned long long sent = 0, answered = 0, servfail = 0, count = 0;
	unsigned long long window = 0, waiting = 0;
	struct endpoint ep;
	long long deadline, end, last = 0;
	char *endp;
	long secs;
	int fd;

	if (argc >= 3 && !strcmp(argv[1], "--window")) {
		window = strtoull(argv[2], &endp, 10);
		if (*endp || !window || window > 1024)
			return usage();
		argc -= 2;
		argv += 2;
	}
	if (argc < 4 || endpoint_make(argv[1], 53, &ep))
		return usage();
	secs = strtol(argv[2], &endp, 10);
	if (*endp || secs <= 0 || secs > 60)
		return usage();
	fd = socket(ep.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return fail_errno(errno);
	deadline = now_ms() + secs * 1000;
	end = deadline + 1000;
	last = now_ms();
	while (now_ms() < end) {
		ssize_t n;

		if (window && waiting && now_ms() - last >= 1000) {
			waiting = 0; /* given up */
			last = now_ms();
		}
		for (int i = 0; (window ? waiting < window : i < 16) && now_ms() < deadline; i++) {
			const char *tmpl = argv[3 + (count % (unsigned long long)(argc - 3))];
			char name[DNS_NAME_TEXT], num[24];
			const char *hash = strchr(tmpl, '#');
			uint8_t q[512];
			int qlen;

			if (hash) {
				snprintf(num, sizeof(num), "%llu", count);
				snprintf(name, sizeof(name), "%.*s%s%s", (int)(hash - tmpl), tmpl,
					 num, hash + 1);
			} else {
				snprintf(name, sizeof(name), "%s", tmpl);
			}
			count++;
			qlen = dns_query_build(name, (uint16_t)count, DNS_T_A, q, sizeof(q));
			if (qlen < 0)
				return usage();
			if (sendto(fd, q, (size_t)qlen, 0, (struct sockaddr *)&ep.ss, ep.len) ==
			    qlen) {
				sent++;
				waiting++;
			}
		}
		if (window) {
			struct pollfd p = {.fd = fd, .events = POLLIN};

			poll(&p, 1, 5);
		}
		while ((n = recv(fd, a, sizeof(a), 0)) >= 12) {
			answered++;
			waiting -= waiting > 0;
			last = now_ms();
			if ((a[3] & 0x0f) == 2)
				servfail++;
		}
		if (!window)
			usleep(5000);
		else if (!waiting && now_ms() >= deadline)
			break;
	}
	close(fd);
	printf("flood sent=%llu answered=%llu servfail=%llu\n", sent, answered, servfail);
	return 0;
}

static int cmd_dns_serve(int argc, char **argv)
{
	static struct dns_tcp_client tcp[DNS_TCP_CLIENTS];
	static uint8_t out[2 + 65535];
	const char *zpath = NULL, *logpath = NULL, *spec = NULL;
	struct pollfd pfd[2 + DNS_TCP_CLIENTS];
	bool silent = false;
	struct endpoint ep;
	struct sigaction sa;
	int ufd, tfd;
	FILE *logf;
	long nrec;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--zone") && i + 1 < argc)
			zpath = argv[++i];
		else if (!strcmp(argv[i], "--log") && i + 1 < argc)
			logpath = argv[++i];
		else if (!strcmp(argv[i], "--silent"))
			silent = true;
		else if (!spec && argv[i][0] != '-')
			spec = argv[i];
		else
			return usage();
	}
	if (!zpath || !spec || endpoint_parse(spec, &ep))
		return usage();
	nrec = zone_load(zpath);
	if (nrec < 0)
		return 2;
	logf = log_open(logpath);
	ufd = listen_on(&ep, SOCK_DGRAM, NULL);
	tfd = ufd < 0 ? ufd : listen_on(&ep, SOCK_STREAM, NULL);
	if (ufd < 0 || tfd < 0) {
		fprintf(stderr, "probe dns-serve: %s: %s\n", spec, strerror(ufd < 0 ? -ufd : -tfd));
		return fail_errno(ufd < 0 ? -ufd : -tfd);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_hup;
	sigaction(SIGHUP, &sa, NULL); /* no SA_RESTART: poll returns */
	for (int i = 0; i < DNS_TCP_CLIENTS; i++)
		tcp[i].fd = -1;
	printf("ready %ld records\n", nrec);
	fflush(stdout);
	for (;;) {
		char qname[DNS_NAME_TEXT], tbuf[8], src[128];
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		uint16_t qtype;
		uint8_t q[4096];
		int np = 2, idx[DNS_TCP_CLIENTS];
		size_t olen;
		ssize_t n;

		if (dns_hup) {
			dns_hup = 0;
			nrec = zone_load(zpath);
			printf("reloaded %ld\n", nrec);
			fflush(stdout);
		}
		pfd[0] = (struct pollfd){.fd = ufd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = tfd, .events = POLLIN};
		for (int i = 0; i < DNS_TCP_CLIENTS; i++) {
			if (tcp[i].fd < 0)
				continue;
			idx[np - 2] = i;
			pfd[np++] = (struct pollfd){.fd = tcp[i].fd, .events = POLLIN};
		}
		if (poll(pfd, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		if (pfd[0].revents & POLLIN) {
			n = recvfrom(ufd, q, sizeof(q), MSG_DONTWAIT, (struct sockaddr *)&from,
				     &flen);
			if (n >= 0) {
				olen = dns_serve_answer(q, (size_t)n, out, sizeof(out), DNS_UDP_MAX,
							qname, &qtype);
				sockaddr_str((struct sockaddr *)&from, src, sizeof(src));
				if (logf && qname[0])
					fprintf(logf, "query %s %s from %s\n", qname,
						dns_type_str(qtype, tbuf), src);
				if (olen && !silent)
					sendto(ufd, out, olen, 0, (struct sockaddr *)&from, flen);
			}
		}
		if (pfd[1].revents & POLLIN) {
			int c = accept4(tfd, (struct sockaddr *)&from, &flen, SOCK_CLOEXEC);
			int slot = -1;

			for (int i = 0; c >= 0 && i < DNS_TCP_CLIENTS; i++)
				if (tcp[i].fd < 0) {
					slot = i;
					break;
				}
			if (c >= 0 && slot < 0) {
				close(c);
			} else if (c >= 0) {
				tcp[slot].fd = c;
				tcp[slot].len = 0;
				sockaddr_str((struct sockaddr *)&from, tcp[slot].src,
					     sizeof(tcp[slot].src));
			}
		}
		for (int k = 2; k < np; k++) {
			struct dns_tcp_client *t = &tcp[idx[k - 2]];
			size_t mlen;

			if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(t->fd, t->buf + t->len, sizeof(t->buf) - t->len);
			if (n <= 0) {
				if (n < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				close(t->fd);
				t->fd = -1;
				continue;
			}
			t->len += (size_t)n;
			while (t->len >= 2 && t->len >= 2 + (mlen = get16(t->buf))) {
				olen = dns_serve_answer(t->buf + 2, mlen, out + 2, sizeof(out) - 2,
							sizeof(out) - 2, qname, &qtype);
				if (logf && qname[0])
					fprintf(logf, "query %s %s from %s tcp\n", qname,
						dns_type_str(qtype, tbuf), t->src);
				if (olen && !silent) {
					put16(out, (uint16_t)olen);
					if (write(t->fd, out, olen + 2) < 0) {
						/* the client went away; read sees it */
					}
				}
				memmove(t->buf, t->buf + 2 + mlen, t->len - 2 - mlen);
				t->len -= 2 + mlen;
			}
			if (t->len == sizeof(t->buf)) {
				close(t->fd); /* a query longer than any we answer */
				t->fd = -1;
			}
		}
	}
}

/* probe resolve NAME [PORT]: getaddrinfo as an ordinary program calls it;
 * "resolved A1,A2" or "noname EAI_xxx"; with PORT, then connects to the
 * first address and reads its greeting, as probe tcp ("ok hello ..."). */
static const char *eai_name(int e)
{
	switch (e) {
	case EAI_NONAME:
		return "EAI_NONAME";
	case EAI_AGAIN:
		return "EAI_AGAIN";
	case EAI_FAIL:
		return "EAI_FAIL";
	case EAI_NODATA:
		return "EAI_NODATA";
	case EAI_ADDRFAMILY:
		return "EAI_ADDRFAMILY";
	case EAI_FAMILY:
		return "EAI_FAMILY";
	case EAI_SERVICE:
		return "EAI_SERVICE";
	case EAI_MEMORY:
		return "EAI_MEMORY";
	case EAI_SYSTEM:
		return "EAI_SYSTEM";
	default:
		return "EAI_other";
	}
}

static int cmd_resolve(int argc, char **argv)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *ai;
	char list[2048] = "", buf[READ_MAX + 1];
	struct endpoint ep;
	uint16_t port = 0;
	ssize_t n;
	int r, fd;

	if (argc != 2 && argc != 3)
		return usage();
	if (argc == 3 && parse_port(argv[2], &port))
		return usage();
	r = getaddrinfo(argv[1], NULL, &hints, &res);
	if (r) {
		printf("noname %s\n", eai_name(r));
		return 1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		char a[INET6_ADDRSTRLEN], pad[INET6_ADDRSTRLEN + 2];
		const void *p =
			ai->ai_family == AF_INET
				? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
				: (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;

		inet_ntop(ai->ai_family, p, a, sizeof(a));
		snprintf(pad, sizeof(pad), ",%s,", a);
		{
			char cmp[sizeof(list) + 2];

			snprintf(cmp, sizeof(cmp), ",%s,", list);
			if (strstr(cmp, pad))
				continue;
		}
		list_add(list, sizeof(list), a);
	}
	printf("resolved %s\n", list);
	if (argc == 2) {
		freeaddrinfo(res);
		return 0;
	}
	memset(&ep, 0, sizeof(ep));
	memcpy(&ep.ss, res->ai_addr, res->ai_addrlen);
	ep.len = res->ai_addrlen;
	if (ep.ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ep.ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&ep.ss)->sin6_port = htons(port);
	freeaddrinfo(res);
	fd = connect_timeout(&ep, SOCK_STREAM, 3000, NULL);
	if (fd < 0)
		return fail_errno(-fd);
	n = read_some(fd, buf, sizeof(buf), READ_TIMEOUT_MS);
	close(fd);
	if (n < 0)
		return fail_errno((int)-n);
	printf("ok %s\n", trim(buf));
	return 0;
}

/* Reads one line (up to '\n', EOF or the timeout) into buf. Length, -errno,
 * or -ETIMEDOUT when nothing came. */
static ssize_t read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	size_t got = 0;

	while (got + 1 < len) {
		int left = (int)(deadline - now_ms());
		ssize_t n;
		int r;

		if (left <= 0)
			break;
		r = wait_fd(fd, POLLIN, left);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		n = read(fd, buf + got, 1);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		if (buf[got++] == '\n')
			break;
	}
	buf[got] = '\0';
	if (got == 0 && now_ms() >= deadline)
		return -ETIMEDOUT;
	return (ssize_t)got;
}

/* probe tcp-hold ADDR PORT SECONDS: connects, reads the greeting, holds the
 * connection SECONDS, then sends "ping" and reads it back (from a probe serve
 * /echo listener): "ok held SECONDS s, echo ping", the errno name, "eof" when
 * the peer closed, "timeout" when nothing came back. */
static int cmd_tcp_hold(int argc, char **argv)
{
	struct endpoint ep;
	char buf[READ_MAX + 1], *end;
	uint16_t port;
	long secs;
	ssize_t n;
	int fd;

	if (argc != 4 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	secs = strtol(argv[3], &end, 10);
	if (*end || secs < 0 || secs > 3600)
		return usage();
	fd = connect_timeout(&ep, SOCK_STREAM, 3000, NULL);
	if (fd < 0)
		return fail_errno(-fd);
	n = read_line(fd, buf, sizeof(buf), READ_TIMEOUT_MS);
	if (n == -ETIMEDOUT) {
		printf("timeout\n");
		return 1;
	}
	if (n < 0)
		return fail_errno((int)-n);
	if (n == 0) {
		printf("eof\n");
		return 1;
	}
	sleep((unsigned)secs);
	if (write(fd, "ping\n", 5) < 0)
		return fail_errno(errno);
	n = read_line(fd, buf, sizeof(buf), 3000);
	close(fd);
	if (n == -ETIMEDOUT) {
		printf("timeout\n");
		return 1;
	}
	if (n < 0)
		return fail_errno((int)-n);
	if (n == 0) {
		printf("eof\n");
		return 1;
	}
	printf("ok held %ld s, echo %s\n", secs, trim(buf));
	return 0;
}

/* COUNT IPv4 TCP sockets made and held, unconnected, for SECONDS: one line
 * "held pid=PID fds=FD..." first, for probe tcp --taken. */
static int cmd_sock_hold(int argc, char **argv)
{
	long count, secs;
	char *end, *end2;

	if (argc != 3)
		return usage();
	count = strtol(argv[1], &end, 10);
	secs = strtol(argv[2], &end2, 10);
	if (*end || *end2 || count < 1 || count > 16 || secs < 0 || secs > 3600)
		return usage();
	printf("held pid=%d fds=", (int)getpid());
	for (long i = 0; i < count; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			return fail_errno(errno);
		printf("%s%d", i ? " " : "", fd);
	}
	printf("\n");
	sleep((unsigned)secs);
	return 0;
}

#define TICK_MS 100

/* Reads what is there on fd (nonblocking) and hands out each complete line. */
static int lines_read(int fd, char *buf, size_t len, size_t *have, void (*fn)(const char *, void *),
		      void *arg)
{
	ssize_t n = recv(fd, buf + *have, len - 1 - *have, MSG_DONTWAIT);
	char *nl;

	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	*have += (size_t)n;
	buf[*have] = '\0';
	while ((nl = strchr(buf, '\n'))) {
		*nl = '\0';
		fn(buf, arg);
		*have -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, *have + 1);
	}
	if (*have == len - 1)
		*have = 0;
	return 0;
}

static void talk_line(const char *line, void *arg)
{
	(void)arg;
	printf("got %s\n", line);
}

/* probe tcp-talk ADDR PORT SECONDS: connects (to a probe tick-serve), then
 * for SECONDS sends "up N" every TICK_MS and prints "got LINE" for each line
 * that comes back, as it comes: a held connection's traffic in both
 * directions, line by line. Ends with "end sent=N" or the errno's name. */
static int cmd_tcp_talk(int argc, char **argv)
{
	struct endpoint ep;
	char buf[READ_MAX + 1];
	long long deadline, next;
	size_t have = 0;
	uint16_t port;
	unsigned sent = 0;
	char *end;
	long secs;
	int fd, rc;

	if (argc != 4 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	secs = strtol(argv[3], &end, 10);
	if (*end || secs <= 0 || secs > 3600)
		return usage();
	fd = connect_timeout(&ep, SOCK_STREAM, 3000, NULL);
	if (fd < 0)
		return fail_errno(-fd);
	printf("connected\n");
	deadline = now_ms() + secs * 1000;
	next = now_ms();
	while (now_ms() < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long wait = next - now_ms();

		if (wait <= 0) {
			char msg[32];
			int len = snprintf(msg, sizeof(msg), "up %u\n", sent + 1);

			/* A full send buffer (nothing acknowledged) is not an error. */
			if (send(fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) == len)
				sent++;
			else if (errno != EAGAIN)
				return fail_errno(errno);
			next += TICK_MS;
			continue;
		}
		if (poll(&p, 1, (int)wait) > 0 &&
		    (rc = lines_read(fd, buf, sizeof(buf), &have, talk_line, NULL)))
			return fail_errno(-rc);
	}
	close(fd);
	printf("end sent=%u\n", sent);
	return 0;
}

#define TICK_CLIENTS 8

struct tick_client {
	int fd;
	size_t have;
	unsigned ticks;
	char buf[READ_MAX + 1];
};

static void tick_line(const char *line, void *arg)
{
	FILE *logf = arg;

	fprintf(logf, "recv %s\n", line);
}

/* The arguments "--log FILE ADDR:PORT" of a server: FILE opened to append,
 * a TCP listener on ADDR:PORT. The listener, or -1 with *rc the status to
 * exit with (usage's, or the failure's, said). */
static int log_listen(int argc, char **argv, FILE **logf, int *rc)
{
	struct endpoint ep;
	int lfd;

	if (argc != 4 || strcmp(argv[1], "--log") || endpoint_parse(argv[3], &ep)) {
		*rc = usage();
		return -1;
	}
	*logf = log_open(argv[2]);
	lfd = listen_on(&ep, SOCK_STREAM, NULL);
	if (!*logf || lfd < 0) {
		*rc = fail_errno(lfd < 0 ? -lfd : errno);
		return -1;
	}
	return lfd;
}

/* probe tick-serve --log FILE ADDR:PORT: each TCP client gets "tick N" every
 * TICK_MS; each line a client sends is logged to FILE as "recv LINE". */
static int cmd_tick_serve(int argc, char **argv)
{
	struct tick_client c[TICK_CLIENTS];
	struct pollfd p[TICK_CLIENTS + 1];
	long long next;
	FILE *logf;
	int lfd, rc;

	if ((lfd = log_listen(argc, argv, &logf, &rc)) < 0)
		return rc;
	for (int i = 0; i < TICK_CLIENTS; i++)
		c[i].fd = -1;
	printf("ready\n");
	fflush(stdout);
	next = now_ms() + TICK_MS;
	for (;;) {
		long long wait = next - now_ms();

		if (wait <= 0) {
			for (int i = 0; i < TICK_CLIENTS; i++) {
				char msg[32];
				int len;

				if (c[i].fd < 0)
					continue;
				len = snprintf(msg, sizeof(msg), "tick %u\n", ++c[i].ticks);
				if (send(c[i].fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) <
					    0 &&
				    errno != EAGAIN) {
					fprintf(logf, "closed %s\n", strerrorname_np(errno));
					close(c[i].fd);
					c[i].fd = -1;
				}
			}
			next += TICK_MS;
			continue;
		}
		p[0].fd = lfd;
		p[0].events = POLLIN;
		for (int i = 0; i < TICK_CLIENTS; i++) {
			p[i + 1].fd = c[i].fd;
			p[i + 1].events = POLLIN;
		}
		if (poll(p, TICK_CLIENTS + 1, (int)wait) <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), i = 0;

			while (fd >= 0 && i < TICK_CLIENTS && c[i].fd >= 0)
				i++;
			if (fd >= 0 && i == TICK_CLIENTS)
				close(fd);
			else if (fd >= 0) {
				c[i] = (struct tick_client){.fd = fd};
				fprintf(logf, "accept\n");
			}
		}
		for (int i = 0; i < TICK_CLIENTS; i++) {
			if (c[i].fd < 0 || !p[i + 1].revents)
				continue;
			rc = lines_read(c[i].fd, c[i].buf, sizeof(c[i].buf), &c[i].have, tick_line,
					logf);
			if (rc) {
				fprintf(logf, "closed %s\n", strerrorname_np(-rc));
				close(c[i].fd);
				c[i].fd = -1;
			}
		}
	}
}

static uint16_t inet_csum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)(p[len - 1] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* Raw IPv4 socket of protocol proto; the kernel writes the IP header. */
static int raw_send(const char *addr, int proto, const void *data, size_t len)
{
	struct endpoint ep;
	int fd;

	if (endpoint_make(addr, 0, &ep) || ep.ss.ss_family != AF_INET)
		return usage();
	fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, proto);
	if (fd < 0)
		return fail_errno(errno);
	if (sendto(fd, data, len, 0, (struct sockaddr *)&ep.ss, ep.len) < 0)
		return fail_errno(errno);
	close(fd);
	printf("sent\n");
	return 0;
}

static int cmd_icmp(int argc, char **argv)
{
	uint8_t pkt[sizeof(struct icmphdr) + sizeof(PAYLOAD)];
	struct icmphdr *h = (struct icmphdr *)pkt;

	if (argc != 2)
		return usage();
	memset(pkt, 0, sizeof(pkt));
	h->type = ICMP_ECHO;
	h->un.echo.id = htons((uint16_t)getpid());
	h->un.echo.sequence = htons(1);
	memcpy(pkt + sizeof(*h), PAYLOAD, sizeof(PAYLOAD) - 1);
	h->checksum = inet_csum(pkt, sizeof(pkt) - 1);
	return raw_send(argv[1], IPPROTO_ICMP, pkt, sizeof(pkt) - 1);
}

static int cmd_rawip(int argc, char **argv)
{
	char *end;
	long proto;

	if (argc != 3)
		return usage();
	proto = strtol(argv[2], &end, 10);
	if (*end || proto <= 0 || proto > 255)
		return usage();
	return raw_send(argv[1], (int)proto, PAYLOAD, sizeof(PAYLOAD) - 1);
}

/* The TSval of a SYN's timestamp option, from its IP and TCP headers as
 * TCP_SAVED_SYN gives them; false when it carries none. */
static bool syn_tsval(const uint8_t *p, size_t len, uint32_t *tsval)
{
	size_t ip_len, off, end;

	if (len < 1)
		return false;
	ip_len = (p[0] >> 4) == 6 ? 40 : (size_t)(p[0] & 0x0f) * 4;
	if (len < ip_len + 20)
		return false;
	end = ip_len + (size_t)(p[ip_len + 12] >> 4) * 4;
	if (end > len)
		return false;
	for (off = ip_len + 20; off < end;) {
		uint8_t kind = p[off], olen;

		if (kind == TCPOPT_EOL)
			break;
		if (kind == TCPOPT_NOP) {
			off++;
			continue;
		}
		if (off + 1 >= end || (olen = p[off + 1]) < 2 || off + olen > end)
			break;
		if (kind == TCPOPT_TIMESTAMP && olen == TCPOLEN_TIMESTAMP) {
			*tsval = (uint32_t)p[off + 2] << 24 | (uint32_t)p[off + 3] << 16 |
				 (uint32_t)p[off + 4] << 8 | p[off + 5];
			return true;
		}
		off += olen;
	}
	return false;
}

/* Accepts TCP clients one at a time and logs the timestamp each one's SYN
 * carried ("tsval N", or "tsval none"), then sends PAYLOAD and closes. */
static int cmd_syn_serve(int argc, char **argv)
{
	FILE *logf;
	int lfd, rc, one = 1;

	if ((lfd = log_listen(argc, argv, &logf, &rc)) < 0)
		return rc;
	if (setsockopt(lfd, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof(one)) < 0)
		return fail_errno(errno);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		uint8_t syn[512];
		socklen_t len = sizeof(syn);
		uint32_t tsval;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			continue;
		if (getsockopt(fd, IPPROTO_TCP, TCP_SAVED_SYN, syn, &len) < 0)
			fprintf(logf, "tsval %s\n", strerrorname_np(errno));
		else if (syn_tsval(syn, len, &tsval))
			fprintf(logf, "tsval %u\n", tsval);
		else
			fprintf(logf, "tsval none\n");
		(void)!write(fd, PAYLOAD "\n", sizeof(PAYLOAD));
		close(fd);
	}
}

static FILE *log_open(const char *path)
{
	FILE *f;

	if (!path)
		return NULL;
	f = fopen(path, "a");
	if (!f)
		fatal("%s", path);
	setvbuf(f, NULL, _IOLBF, 0);
	return f;
}

/* dev: bound to that link (SO_BINDTODEVICE), or NULL. */
static int listen_on(const struct endpoint *ep, int type, const char *dev)
{
	int fd, one = 1;

	fd = socket(ep->ss.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (dev && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, (socklen_t)strlen(dev)) < 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	if (ep->ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&ep->ss, ep->len) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 64) < 0)) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

#define MAX_ECHO 32

/* TCP (and udp:-prefixed UDP) listeners: each TCP client gets "hello ADDR:PORT\n"
 * and is closed, except on listeners suffixed "/echo", which then echo what
 * the client sends until it closes; every accept and datagram is logged to FILE.
 * A listener suffixed "@DEV" is bound to that link (a UDP one then takes a
 * datagram from it before a socket of the same port bound to no link, or to
 * it before). */
static int cmd_serve(int argc, char **argv)
{
	struct pollfd pfd[MAX_LISTEN + MAX_ECHO];
	char names[MAX_LISTEN][64];
	bool udp[MAX_LISTEN], echo[MAX_LISTEN];
	int echo_fd[MAX_ECHO];
	const char *logpath = NULL;
	int n = 0, i = 1;
	FILE *logf;

	if (argc > 2 && !strcmp(argv[1], "--log")) {
		logpath = argv[2];
		i = 3;
	}
	if (i >= argc)
		return usage();
	logf = log_open(logpath);
	for (; i < argc; i++) {
		char spec[128], *dev;
		struct endpoint ep;
		size_t sl;
		int fd;

		if (n == MAX_LISTEN || strlen(argv[i]) >= sizeof(spec))
			return usage();
		snprintf(spec, sizeof(spec), "%s", argv[i]);
		udp[n] = false;
		echo[n] = false;
		sl = strlen(spec);
		if (sl > 5 && !strcmp(spec + sl - 5, "/echo")) {
			echo[n] = true;
			spec[sl - 5] = '\0';
		}
		if (!strncmp(spec, "udp:", 4)) {
			udp[n] = true;
			memmove(spec, spec + 4, strlen(spec + 4) + 1);
		} else if (!strncmp(spec, "tcp:", 4)) {
			memmove(spec, spec + 4, strlen(spec + 4) + 1);
		}
		if ((dev = strrchr(spec, '@')))
			*dev++ = '\0';
		if ((udp[n] && echo[n]) || endpoint_parse(spec, &ep))
			return usage();
		fd = listen_on(&ep, udp[n] ? SOCK_DGRAM : SOCK_STREAM, dev);
		if (fd < 0) {
			fprintf(stderr, "probe serve: %s: %s\n", spec, strerror(-fd));
			return fail_errno(-fd);
		}
		snprintf(names[n], sizeof(names[n]), "%s", spec);
		pfd[n].fd = fd;
		pfd[n].events = POLLIN;
		n++;
	}
	for (i = 0; i < MAX_ECHO; i++)
		echo_fd[i] = -1;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int np = n, idx[MAX_ECHO];

		for (i = 0; i < MAX_ECHO; i++) {
			if (echo_fd[i] < 0)
				continue;
			idx[np - n] = i;
			pfd[np].fd = echo_fd[i];
			pfd[np].events = POLLIN;
			pfd[np].revents = 0;
			np++;
		}
		if (poll(pfd, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		for (i = 0; i < n; i++) {
			struct sockaddr_storage from;
			socklen_t flen = sizeof(from);
			char src[128];
			int c, slot = -1;

			if (!(pfd[i].revents & POLLIN))
				continue;
			if (udp[i]) {
				char buf[2048];

				if (recvfrom(pfd[i].fd, buf, sizeof(buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &flen) < 0)
					continue;
				if (logf)
					fprintf(logf, "recv udp %s from %s\n", names[i],
						sockaddr_str((struct sockaddr *)&from, src,
							     sizeof(src)));
				continue;
			}
			c = accept4(pfd[i].fd, (struct sockaddr *)&from, &flen, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			/* A client already gone is still logged below. */
			dprintf(c, "hello %s\n", names[i]);
			for (int k = 0; echo[i] && k < MAX_ECHO; k++)
				if (echo_fd[k] < 0) {
					slot = k;
					break;
				}
			if (slot >= 0)
				echo_fd[slot] = c;
			else
				close(c);
			if (logf)
				fprintf(logf, "accept %s from %s\n", names[i],
					sockaddr_str((struct sockaddr *)&from, src, sizeof(src)));
		}
		for (i = n; i < np; i++) {
			int *fd = &echo_fd[idx[i - n]];
			char buf[4096];
			ssize_t r;

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(*fd, buf, sizeof(buf));
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0 || write(*fd, buf, (size_t)r) < 0) {
				close(*fd);
				*fd = -1;
			}
		}
	}
}

static bool contains(const uint8_t *hay, size_t hlen, const char *needle)
{
	size_t nlen = strlen(needle);

	if (hlen < nlen)
		return false;
	for (size_t i = 0; i + nlen <= hlen; i++)
		if (!memcmp(hay + i, needle, nlen))
			return true;
	return false;
}

/* Every IPv4 packet this namespace receives on any link whose payload holds
 * PAYLOAD or whose protocol is listed. Outgoing packets are not counted. */
static int cmd_sniff(int argc, char **argv)
{
	bool want[256] = {false};
	const char *logpath = NULL;
	uint8_t buf[65536];
	FILE *logf;
	int fd, i = 1;

	if (argc > 2 && !strcmp(argv[1], "--log")) {
		logpath = argv[2];
		i = 3;
	}
	if (!logpath)
		return usage();
	for (; i < argc; i++) {
		char *end;
		long p = strtol(argv[i], &end, 10);

		if (*end || p < 0 || p > 255)
			return usage();
		want[p] = true;
	}
	logf = log_open(logpath);
	/* Every protocol: IPv6 is logged too, its first next header as proto. */
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0)
		return fail_errno(errno);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct sockaddr_ll from;
		socklen_t flen = sizeof(from);
		const struct iphdr *ip = (const struct iphdr *)buf;
		char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
		ssize_t n;
		size_t hl;

		n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fatal("recvfrom");
		}
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (from.sll_protocol == htons(ETH_P_IPV6) && n >= 40 && (buf[0] >> 4) == 6) {
			if (!want[buf[6]] && !contains(buf + 40, (size_t)n - 40, PAYLOAD))
				continue;
			inet_ntop(AF_INET6, buf + 8, s, sizeof(s));
			inet_ntop(AF_INET6, buf + 24, d, sizeof(d));
			fprintf(logf, "got proto=%u src=%s dst=%s\n", buf[6], s, d);
			continue;
		}
		if (from.sll_protocol != htons(ETH_P_IP) || (size_t)n < sizeof(*ip) ||
		    ip->version != 4)
			continue;
		hl = (size_t)ip->ihl * 4;
		if (hl > (size_t)n)
			continue;
		if (!want[ip->protocol] && !contains(buf + hl, (size_t)n - hl, PAYLOAD))
			continue;
		inet_ntop(AF_INET, &ip->saddr, s, sizeof(s));
		inet_ntop(AF_INET, &ip->daddr, d, sizeof(d));
		fprintf(logf, "got proto=%u src=%s dst=%s\n", ip->protocol, s, d);
	}
}

/* Bulk receiver: reads each connection to its end, answers "ok BYTES\n". */
static int cmd_bulk_serve(int argc, char **argv)
{
	static char buf[1 << 16];
	struct endpoint ep;
	int lfd;

	if (argc != 2 || endpoint_parse(argv[1], &ep))
		return usage();
	lfd = listen_on(&ep, SOCK_STREAM, NULL);
	if (lfd < 0)
		return fail_errno(-lfd);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		unsigned long long total = 0;
		char line[64];
		ssize_t n;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0)
			continue;
		while ((n = read(c, buf, sizeof(buf))) > 0)
			total += (unsigned long long)n;
		snprintf(line, sizeof(line), "ok %llu\n", total);
		if (write(c, line, strlen(line)) < 0) {
			/* the client went away */
		}
		close(c);
	}
}

static int cmd_bulk(int argc, char **argv)
{
	static char buf[1 << 16];
	unsigned long long want, sent = 0;
	struct endpoint ep;
	char reply[64], *end;
	uint16_t port;
	double t0, dt;
	ssize_t n;
	int fd, flags;

	if (argc != 4 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	want = strtoull(argv[3], &end, 10);
	if (*end)
		return usage();
	memset(buf, 'x', sizeof(buf));
	t0 = now_s();
	fd = connect_timeout(&ep, SOCK_STREAM, 3000, NULL);
	if (fd < 0)
		return fail_errno(-fd);
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	while (sent < want) {
		size_t chunk = want - sent < sizeof(buf) ? (size_t)(want - sent) : sizeof(buf);
		ssize_t w = write(fd, buf, chunk);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return fail_errno(errno);
		}
		sent += (unsigned long long)w;
	}
	shutdown(fd, SHUT_WR);
	n = read_some(fd, reply, sizeof(reply), 30000);
	if (n < 0)
		return fail_errno((int)-n);
	dt = now_s() - t0;
	close(fd);
	printf("ok %llu bytes in %.3f s (%.1f Mbit/s) server: %s\n", sent, dt,
	       dt > 0 ? (double)sent * 8 / dt / 1e6 : 0.0, trim(reply));
	return 0;
}

/* COUNT connections, one after another: connect, read the greeting, close. 0,
 * or the errno of the first that failed. */
static int rr_loop(const struct endpoint *ep, unsigned long count)
{
	char buf[READ_MAX + 1];

	for (unsigned long i = 0; i < count; i++) {
		int fd = connect_timeout(ep, SOCK_STREAM, 3000, NULL);

		if (fd < 0)
			return -fd;
		ssize_t n = read_some(fd, buf, sizeof(buf), READ_TIMEOUT_MS);

		close(fd);
		if (n < 0)
			return (int)-n;
	}
	return 0;
}

/* probe rr ADDR PORT COUNT [--parallel N]: the connect rate, one client, or N
 * processes side by side sharing the COUNT (what a busy host's sessions
 * make: the rate is then bound by the CPU each connection costs rather than
 * by one connection's round trips). */
static int cmd_rr(int argc, char **argv)
{
	unsigned long count, parallel = 1;
	struct endpoint ep;
	uint16_t port;
	double t0, dt;
	char *end;
	int err = 0;

	if ((argc != 4 && argc != 6) || parse_port(argv[2], &port) ||
	    endpoint_make(argv[1], port, &ep))
		return usage();
	count = strtoul(argv[3], &end, 10);
	if (*end || count == 0)
		return usage();
	if (argc == 6) {
		parallel = strtoul(argv[5], &end, 10);
		if (strcmp(argv[4], "--parallel") || *end || parallel == 0 || parallel > 64 ||
		    parallel > count)
			return usage();
	}
	t0 = now_s();
	if (parallel == 1) {
		err = rr_loop(&ep, count);
	} else {
		unsigned long started = 0;

		for (unsigned long k = 0; k < parallel; k++) {
			pid_t pid = fork();

			if (pid < 0) {
				err = errno;
				break;
			}
			/* a child's status is its errno (all below 256) */
			if (pid == 0)
				_exit(rr_loop(&ep, count / parallel + (k < count % parallel)));
			started++;
		}
		for (; started; started--) {
			int st;

			if (wait(&st) < 0)
				fatal("wait");
			if (!err && (!WIFEXITED(st) || WEXITSTATUS(st)))
				err = WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
		}
	}
	if (err)
		return fail_errno(err);
	dt = now_s() - t0;
	printf("ok %lu connections in %.3f s (%.0f/s)\n", count, dt,
	       dt > 0 ? (double)count / dt : 0.0);
	return 0;
}

static const char *errno_name(int err)
{
	return strerrorname_np(err) ?: "errno?";
}

/* One TCP socket connected COUNT times, disconnected by connect(AF_UNSPEC)
 * after each: what a once grant must admit only the first of. Prints every
 * attempt's result on one line ("ok EPERM EPERM"). */
static int cmd_tcp_reconnect(int argc, char **argv)
{
	struct sockaddr unspec = {.sa_family = AF_UNSPEC};
	struct timeval tv = {.tv_sec = 3};
	struct endpoint ep;
	unsigned long count;
	uint16_t port;
	char *end;
	int fd;

	if (argc != 4 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	count = strtoul(argv[3], &end, 10);
	if (*end || count < 1 || count > 100)
		return usage();
	fd = socket(ep.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail_errno(errno);
	/* a connect the backstop drops gives up after 3 s */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (unsigned long i = 0; i < count; i++) {
		int rc = connect(fd, (struct sockaddr *)&ep.ss, ep.len);

		printf("%s%s", i ? " " : "", rc ? errno_name(errno) : "ok");
		if (connect(fd, &unspec, sizeof(unspec)))
			fatal("connect(AF_UNSPEC)");
	}
	printf("\n");
	close(fd);
	return 0;
}

/* An MPTCP socket, then a connect: errand admits neither. */
static int cmd_mptcp(int argc, char **argv)
{
	struct timeval tv = {.tv_sec = 3};
	struct endpoint ep;
	uint16_t port;
	int fd;

	if (argc != 3 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	fd = socket(ep.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 262 /* IPPROTO_MPTCP */);
	if (fd < 0)
		return fail_errno(errno);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ep.ss, ep.len))
		return fail_errno(errno);
	close(fd);
	printf("ok\n");
	return 0;
}

/* A datagram (or, --tcp, a connect) to ADDR:PORT carrying a loose (or,
 * --strict, strict) source route through HOP: the kernel sends it to HOP,
 * which, if it takes source routes, forwards it to ADDR. */
static int cmd_srr(int argc, char **argv)
{
	struct timeval tv = {.tv_sec = 2};
	bool tcp = false, strict = false;
	struct in_addr hop = {0};
	struct endpoint ep;
	uint8_t opt[8];
	uint16_t port;
	int fd;

	if (argc < 5 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep) ||
	    ep.ss.ss_family != AF_INET)
		return usage();
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--via") && i + 1 < argc) {
			if (inet_pton(AF_INET, argv[++i], &hop) != 1)
				return usage();
		} else if (!strcmp(argv[i], "--tcp")) {
			tcp = true;
		} else if (!strcmp(argv[i], "--strict")) {
			strict = true;
		} else {
			return usage();
		}
	}
	if (!hop.s_addr)
		return usage();
	/* type, length, pointer, the first hop (the kernel sends there and
	 * writes ADDR in its slot), end of options */
	opt[0] = strict ? 0x89 : 0x83;
	opt[1] = 7;
	opt[2] = 4;
	memcpy(opt + 3, &hop, 4);
	opt[7] = 0;
	fd = socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail_errno(errno);
	if (setsockopt(fd, IPPROTO_IP, IP_OPTIONS, opt, sizeof(opt)))
		return fail_errno(errno);
	if (tcp) {
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, (struct sockaddr *)&ep.ss, ep.len))
			return fail_errno(errno == EINPROGRESS ? ETIMEDOUT : errno);
		printf("ok\n");
	} else {
		if (sendto(fd, PAYLOAD, strlen(PAYLOAD), 0, (struct sockaddr *)&ep.ss, ep.len) < 0)
			return fail_errno(errno);
		printf("sent\n");
	}
	close(fd);
	return 0;
}

/* Non-blocking connects on fresh TCP sockets in a tight loop for SECONDS,
 * cycling over PORTS ports from PORT: the flood of refusals one process of a
 * session can make. Prints how many connects were made and refused. */
static int cmd_flood(int argc, char **argv)
{
	unsigned long secs, ports = 1, n = 0, refused = 0;
	struct endpoint ep;
	uint16_t port;
	double until;
	char *end;

	if (argc < 4 || argc > 5 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	secs = strtoul(argv[3], &end, 10);
	if (*end || secs < 1 || secs > 60)
		return usage();
	if (argc == 5) {
		ports = strtoul(argv[4], &end, 10);
		if (*end || ports < 1 || ports + port > 65536)
			return usage();
	}
	until = now_s() + (double)secs;
	for (;;) {
		uint16_t p = (uint16_t)(port + n % ports);
		int fd;

		if ((n & 1023) == 0 && now_s() >= until)
			break;
		if (ep.ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ep.ss)->sin_port = htons(p);
		else
			((struct sockaddr_in6 *)&ep.ss)->sin6_port = htons(p);
		fd = socket(ep.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail_errno(errno);
		if (connect(fd, (struct sockaddr *)&ep.ss, ep.len) && errno == EPERM)
			refused++;
		close(fd);
		n++;
	}
	printf("ok %lu connects, %lu refused\n", n, refused);
	return 0;
}

/* The TCP/UDP/ICMPv6 checksum over the IPv6 pseudo-header. */
static uint16_t csum6(const uint8_t *src, const uint8_t *dst, uint8_t proto, const uint8_t *l4,
		      size_t len)
{
	uint32_t sum = 0;

	for (int i = 0; i < 16; i += 2)
		sum += (uint32_t)(src[i] << 8 | src[i + 1]) + (uint32_t)(dst[i] << 8 | dst[i + 1]);
	sum += (uint32_t)len + proto;
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(l4[i] << 8 | l4[i + 1]);
	if (len & 1)
		sum += (uint32_t)(l4[len - 1] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* An IPv6 datagram written straight onto IFNAME (a packet socket, so no IP
 * stack of ours judges it), from fe80::1 to 2606:4700::1 unless --src and
 * --dst say otherwise, carrying UDP 12345 -> 443 (or with --tcp PORT a TCP
 * SYN 12345 -> PORT, or with icmp an echo request) and the probe's payload:
 * plain, with a routing header (type 0, one segment left), with hop-by-hop
 * options before one, behind a chain of nine destination-options headers
 * (long), behind one (dst), or as the first fragment of two (frag). To
 * the broadcast address unless --mac names the next hop's (a router forwards
 * only what was sent to it). */
static int cmd_ip6(int argc, char **argv)
{
	uint8_t pkt[40 + 9 * 8 + 24 + 8 + 20 + sizeof(PAYLOAD)] = {0};
	struct sockaddr_ll sll = {0};
	uint8_t *p = pkt + 40, *next = pkt + 6, *l4, l4proto = 17;
	const char *kind, *src = "fe80::1", *dst = "2606:4700::1";
	uint16_t tcp_port = 0;
	uint8_t mac[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	size_t len, l4len;
	int fd;

	if (argc < 3)
		return usage();
	kind = argv[2];
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--src") && i + 1 < argc)
			src = argv[++i];
		else if (!strcmp(argv[i], "--dst") && i + 1 < argc)
			dst = argv[++i];
		else if (!strcmp(argv[i], "--tcp") && i + 1 < argc &&
			 !parse_port(argv[i + 1], &tcp_port))
			i++;
		else if (!strcmp(argv[i], "--mac") && i + 1 < argc &&
			 sscanf(argv[i + 1], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1],
				&mac[2], &mac[3], &mac[4], &mac[5]) == 6)
			i++;
		else
			return usage();
	}
	pkt[0] = 0x60;
	pkt[7] = 64;
	if (inet_pton(AF_INET6, src, pkt + 8) != 1 || inet_pton(AF_INET6, dst, pkt + 24) != 1)
		return usage();
	if (!strcmp(kind, "hbh-rh") || !strcmp(kind, "long") || !strcmp(kind, "dst")) {
		int n = !strcmp(kind, "long") ? 9 : 1;

		for (int i = 0; i < n; i++) {
			*next = !strcmp(kind, "hbh-rh")
					? 0
					: 60; /* hop-by-hop, or destination options */
			next = p;	      /* its next-header byte */
			p[1] = 0;	      /* 8 bytes: PadN fills the rest */
			p[2] = 1;
			p[3] = 4;
			p += 8;
		}
	}
	if (!strcmp(kind, "rh") || !strcmp(kind, "hbh-rh")) {
		*next = 43;
		next = p;
		p[1] = 2; /* 24 bytes: the header and one address */
		p[2] = 0;
		p[3] = 1;
		inet_pton(AF_INET6, "2606:4700::2", p + 8);
		p += 24;
	} else if (!strcmp(kind, "frag")) {
		*next = 44;
		next = p;
		p[3] = 1; /* offset 0, more fragments */
		p[7] = 0x2a;
		p += 8;
	} else if (strcmp(kind, "plain") && strcmp(kind, "long") && strcmp(kind, "dst") &&
		   strcmp(kind, "icmp")) {
		return usage();
	}
	l4 = p;
	if (!strcmp(kind, "icmp")) {
		l4proto = 58;
		p[0] = 128; /* echo request */
		p += 8;
	} else if (tcp_port) {
		l4proto = 6;
		p[0] = 0x30; /* 12345 -> PORT, SYN */
		p[1] = 0x39;
		p[2] = (uint8_t)(tcp_port >> 8);
		p[3] = (uint8_t)tcp_port;
		p[7] = 1;
		p[12] = 5 << 4;
		p[13] = 0x02;
		p[14] = 0xff;
		p += 20;
	} else {
		p[0] = 0x30; /* UDP 12345 -> 443 */
		p[1] = 0x39;
		p[2] = 0x01;
		p[3] = 0xbb;
		p[5] = (uint8_t)(8 + sizeof(PAYLOAD));
		p += 8;
	}
	*next = l4proto;
	memcpy(p, PAYLOAD, sizeof(PAYLOAD));
	p += sizeof(PAYLOAD);
	l4len = (size_t)(p - l4);
	{
		uint16_t c = csum6(pkt + 8, pkt + 24, l4proto, l4, l4len);
		uint8_t *at = l4 + (l4proto == 17 ? 6 : l4proto == 6 ? 16 : 2);

		at[0] = (uint8_t)(c >> 8);
		at[1] = (uint8_t)c;
	}
	len = (size_t)(p - pkt);
	pkt[4] = (uint8_t)((len - 40) >> 8);
	pkt[5] = (uint8_t)(len - 40);
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IPV6));
	if (fd < 0)
		return fail_errno(errno);
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_IPV6);
	sll.sll_ifindex = (int)if_nametoindex(argv[1]);
	sll.sll_halen = 6;
	memcpy(sll.sll_addr, mac, 6);
	if (!sll.sll_ifindex)
		return fail_errno(ENODEV);
	if (sendto(fd, pkt, len, 0, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		return fail_errno(errno);
	close(fd);
	printf("sent\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;

	log_init("probe", false);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return usage();
	cmd = argv[1];
	argc--;
	argv++;
	if (!strcmp(cmd, "tcp"))
		return cmd_tcp(argc, argv);
	if (!strcmp(cmd, "udp"))
		return cmd_udp(argc, argv, false);
	if (!strcmp(cmd, "udp-connect"))
		return cmd_udp(argc, argv, true);
	if (!strcmp(cmd, "tcp-hold"))
		return cmd_tcp_hold(argc, argv);
	if (!strcmp(cmd, "sock-hold"))
		return cmd_sock_hold(argc, argv);
	if (!strcmp(cmd, "tcp-talk"))
		return cmd_tcp_talk(argc, argv);
	if (!strcmp(cmd, "tick-serve"))
		return cmd_tick_serve(argc, argv);
	if (!strcmp(cmd, "syn-serve"))
		return cmd_syn_serve(argc, argv);
	if (!strcmp(cmd, "dns"))
		return cmd_dns(argc, argv);
	if (!strcmp(cmd, "dns-serve"))
		return cmd_dns_serve(argc, argv);
	if (!strcmp(cmd, "dns-flood"))
		return cmd_dns_flood(argc, argv);
	if (!strcmp(cmd, "resolve"))
		return cmd_resolve(argc, argv);
	if (!strcmp(cmd, "icmp"))
		return cmd_icmp(argc, argv);
	if (!strcmp(cmd, "rawip"))
		return cmd_rawip(argc, argv);
	if (!strcmp(cmd, "serve"))
		return cmd_serve(argc, argv);
	if (!strcmp(cmd, "sniff"))
		return cmd_sniff(argc, argv);
	if (!strcmp(cmd, "bulk-serve"))
		return cmd_bulk_serve(argc, argv);
	if (!strcmp(cmd, "bulk"))
		return cmd_bulk(argc, argv);
	if (!strcmp(cmd, "rr"))
		return cmd_rr(argc, argv);
	if (!strcmp(cmd, "tcp-reconnect"))
		return cmd_tcp_reconnect(argc, argv);
	if (!strcmp(cmd, "mptcp"))
		return cmd_mptcp(argc, argv);
	if (!strcmp(cmd, "srr"))
		return cmd_srr(argc, argv);
	if (!strcmp(cmd, "flood"))
		return cmd_flood(argc, argv);
	if (!strcmp(cmd, "ip6"))
		return cmd_ip6(argc, argv);
	return usage();
}
