/* probe: the one test tool of errand's kernel-level selftests. Each subcommand
 * does one network thing (connect, send, raw send, serve, sniff) and prints one
 * line saying what happened: "ok ...", "sent", or the errno name (EPERM...).
 * Exit 0 on success, 1 on the failure it reports, 2 on a usage error. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
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
	fprintf(stderr, "usage: probe tcp ADDR PORT [--timeout S] [--from SRCADDR]\n"
			"       probe udp|udp-connect ADDR PORT [--size BYTES] [--from SRCADDR]\n"
			"       probe dns ADDR NAME [--tcp|--connected]\n"
			"       probe icmp ADDR | probe rawip ADDR PROTO\n"
			"       probe serve [--log FILE] [udp:|tcp:]ADDR:PORT...\n"
			"       probe sniff --log FILE [PROTO...]\n"
			"       probe bulk-serve ADDR:PORT | probe bulk ADDR PORT BYTES\n"
			"       probe rr ADDR PORT COUNT\n");
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
 * first), --size N (datagram size). Unknown ones are a usage error. */
struct opts {
	int timeout_s;
	const char *from;
	size_t size;
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
		v = strtol(argv[i + 1], &end, 10);
		if (*end)
			return -EINVAL;
		if (!strcmp(argv[i], "--timeout") && v > 0 && v <= 600)
			o->timeout_s = (int)v;
		else if (!strcmp(argv[i], "--size") && v > 0 && v <= 65507)
			o->size = (size_t)v;
		else
			return -EINVAL;
	}
	return 0;
}

/* A socket of the endpoint's family, bound to from (port 0) when given. */
static int socket_from(const struct endpoint *ep, int type, const char *from)
{
	struct endpoint src;
	int fd;

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

	if (argc < 3 || opts_parse(argc, argv, 3, &o) || o.size)
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
	struct opts o = {.size = 4};
	struct endpoint ep;
	char *data;
	uint16_t port;
	ssize_t n;
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
	if (connected) {
		if (connect(fd, (struct sockaddr *)&ep.ss, ep.len) < 0)
			return fail_errno(errno);
		n = send(fd, data, o.size, 0);
	} else {
		n = sendto(fd, data, o.size, 0, (struct sockaddr *)&ep.ss, ep.len);
	}
	if (n < 0)
		return fail_errno(errno);
	close(fd);
	free(data);
	printf("ok\n");
	return 0;
}

/* A minimal DNS query: id, RD, one question NAME IN A. Length or -EINVAL. */
static int dns_query_build(const char *name, uint8_t *out, size_t len)
{
	size_t o = 12;
	const char *p = name;

	if (len < 12 + 256 + 4)
		return -EINVAL;
	memset(out, 0, 12);
	out[0] = 0x3e;
	out[1] = 0x11; /* id */
	out[2] = 0x01; /* RD */
	out[5] = 1;    /* QDCOUNT */
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		if (l == 0 || l > 63 || o + l + 2 > 12 + 255)
			return -EINVAL;
		out[o++] = (uint8_t)l;
		memcpy(out + o, p, l);
		o += l;
		p += l;
		if (*p == '.')
			p++;
	}
	out[o++] = 0;
	out[o++] = 0;
	out[o++] = 1; /* QTYPE A */
	out[o++] = 0;
	out[o++] = 1; /* QCLASS IN */
	return (int)o;
}

static int cmd_dns(int argc, char **argv)
{
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	struct endpoint ep;
	uint8_t q[512], a[4096];
	bool tcp = false, connected = false;
	char src[128];
	ssize_t n;
	int qlen, fd, r;

	if (argc == 4 && !strcmp(argv[3], "--tcp"))
		tcp = true;
	else if (argc == 4 && !strcmp(argv[3], "--connected"))
		connected = true;
	else if (argc != 3)
		return usage();
	if (endpoint_make(argv[1], 53, &ep))
		return usage();
	qlen = dns_query_build(argv[2], q + 2, sizeof(q) - 2);
	if (qlen < 0)
		return usage();

	if (tcp) {
		size_t got = 0, want = 2;

		fd = connect_timeout(&ep, SOCK_STREAM, DNS_TIMEOUT_MS, NULL);
		if (fd == -ETIMEDOUT) {
			printf("timeout\n");
			return 1;
		}
		if (fd < 0)
			return fail_errno(-fd);
		q[0] = (uint8_t)(qlen >> 8);
		q[1] = (uint8_t)qlen;
		if (write(fd, q, (size_t)qlen + 2) < 0)
			return fail_errno(errno);
		while (got < want) {
			r = wait_fd(fd, POLLIN, DNS_TIMEOUT_MS);
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
				want = 2 + (((size_t)a[0] << 8) | a[1]);
			if (want > sizeof(a))
				want = sizeof(a);
		}
		if (want < 2 + 4) {
			printf("short\n");
			return 1;
		}
		if (getpeername(fd, (struct sockaddr *)&from, &flen) < 0)
			return fail_errno(errno);
		printf("answer %u from %s\n", a[2 + 3] & 0x0f,
		       sockaddr_str((struct sockaddr *)&from, src, sizeof(src)));
		close(fd);
		return 0;
	}

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
	r = wait_fd(fd, POLLIN, DNS_TIMEOUT_MS);
	if (r == 0) {
		printf("timeout\n");
		return 1;
	}
	if (r < 0)
		return fail_errno(-r);
	n = recvfrom(fd, a, sizeof(a), 0, (struct sockaddr *)&from, &flen);
	if (n < 0)
		return fail_errno(errno);
	if (n < 4) {
		printf("short\n");
		return 1;
	}
	printf("answer %u from %s\n", a[3] & 0x0f,
	       sockaddr_str((struct sockaddr *)&from, src, sizeof(src)));
	close(fd);
	return 0;
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

static int listen_on(const struct endpoint *ep, int type)
{
	int fd, one = 1;

	fd = socket(ep->ss.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
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

/* TCP (and udp:-prefixed UDP) listeners: each TCP client gets "hello ADDR:PORT\n"
 * and is closed; every accept and datagram is logged to FILE. */
static int cmd_serve(int argc, char **argv)
{
	struct pollfd pfd[MAX_LISTEN];
	char names[MAX_LISTEN][64];
	bool udp[MAX_LISTEN];
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
		const char *spec = argv[i];
		struct endpoint ep;
		int fd;

		if (n == MAX_LISTEN)
			return usage();
		udp[n] = false;
		if (!strncmp(spec, "udp:", 4)) {
			udp[n] = true;
			spec += 4;
		} else if (!strncmp(spec, "tcp:", 4)) {
			spec += 4;
		}
		if (endpoint_parse(spec, &ep))
			return usage();
		fd = listen_on(&ep, udp[n] ? SOCK_DGRAM : SOCK_STREAM);
		if (fd < 0) {
			fprintf(stderr, "probe serve: %s: %s\n", spec, strerror(-fd));
			return fail_errno(-fd);
		}
		snprintf(names[n], sizeof(names[n]), "%s", spec);
		pfd[n].fd = fd;
		pfd[n].events = POLLIN;
		n++;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		for (i = 0; i < n; i++) {
			struct sockaddr_storage from;
			socklen_t flen = sizeof(from);
			char src[128];
			int c;

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
			close(c);
			if (logf)
				fprintf(logf, "accept %s from %s\n", names[i],
					sockaddr_str((struct sockaddr *)&from, src, sizeof(src)));
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
	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
	if (fd < 0)
		return fail_errno(errno);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct sockaddr_ll from;
		socklen_t flen = sizeof(from);
		const struct iphdr *ip = (const struct iphdr *)buf;
		char s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];
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
		if ((size_t)n < sizeof(*ip) || ip->version != 4)
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
	lfd = listen_on(&ep, SOCK_STREAM);
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

/* Connect, read the greeting, close; COUNT times. */
static int cmd_rr(int argc, char **argv)
{
	struct endpoint ep;
	char buf[READ_MAX + 1], *end;
	unsigned long count, i;
	uint16_t port;
	double t0, dt;

	if (argc != 4 || parse_port(argv[2], &port) || endpoint_make(argv[1], port, &ep))
		return usage();
	count = strtoul(argv[3], &end, 10);
	if (*end || count == 0)
		return usage();
	t0 = now_s();
	for (i = 0; i < count; i++) {
		int fd = connect_timeout(&ep, SOCK_STREAM, 3000, NULL);

		if (fd < 0)
			return fail_errno(-fd);
		ssize_t n = read_some(fd, buf, sizeof(buf), READ_TIMEOUT_MS);

		if (n < 0)
			return fail_errno((int)-n);
		close(fd);
	}
	dt = now_s() - t0;
	printf("ok %lu connections in %.3f s (%.0f/s)\n", count, dt,
	       dt > 0 ? (double)count / dt : 0.0);
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
	if (!strcmp(cmd, "dns"))
		return cmd_dns(argc, argv);
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
	return usage();
}
