/* The client side of the proxy benchmark (bench/proxy.sh): the probe's "rr"
 * and "bulk" (selftests/tools/probe.c), each connection opened through an
 * HTTP CONNECT proxy, as a sandbox whose egress is a proxy (squid, tinyproxy)
 * makes it. Built by bench/proxy.sh; not part of errand.
 *
 *   connectc rr PROXY PPORT HOST PORT COUNT [PARALLEL]
 *                                              connect, CONNECT, read the
 *                                              greeting, close; COUNT times,
 *                                              by PARALLEL clients at once
 *   connectc bulk PROXY PPORT HOST PORT BYTES  send BYTES on one tunnel
 *   connectc sink ADDR PORT BYTES              the server of bulk: answers
 *                                              "ok BYTES" once it has them
 *
 * Prints what the probe prints ("ok 2000 connections in 0.3 s (6000/s)"). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "connectc: %s: %s\n", what, strerror(err));
	return 1;
}

/* A connected socket through the proxy to HOST:PORT, after the proxy's 2xx;
 * bytes past the answer's header (the server's greeting, when it came in the
 * same read) are counted in *extra. Returns the fd or -errno. */
static int tunnel(const struct sockaddr_in *proxy, const char *target, size_t *extra)
{
	char req[256], buf[4096];
	size_t got = 0;
	char *end;
	int fd, one = 1, n;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)proxy, sizeof(*proxy)) < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	n = snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
	if (write(fd, req, (size_t)n) != n) {
		close(fd);
		return -EIO;
	}
	for (;;) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);

		if (r <= 0) {
			close(fd);
			return r < 0 ? -errno : -ECONNRESET;
		}
		got += (size_t)r;
		buf[got] = 0;
		end = strstr(buf, "\r\n\r\n");
		if (end)
			break;
		if (got == sizeof(buf) - 1) {
			close(fd);
			return -EPROTO;
		}
	}
	if (strncmp(buf, "HTTP/1.", 7) || buf[9] != '2') {
		fprintf(stderr, "connectc: the proxy answered: %.*s\n", (int)strcspn(buf, "\r\n"),
			buf);
		close(fd);
		return -ECONNREFUSED;
	}
	*extra = got - (size_t)(end + 4 - buf);
	return fd;
}

/* COUNT tunnels one after another, each until the server's greeting came
 * through. 0, or the errno of the first that failed (said on stderr). */
static int rr_loop(const struct sockaddr_in *proxy, const char *target, unsigned long count)
{
	char buf[256];

	for (unsigned long i = 0; i < count; i++) {
		size_t extra = 0;
		int fd = tunnel(proxy, target, &extra);

		if (fd < 0) {
			fail("CONNECT", -fd);
			return -fd;
		}
		if (!extra) {
			ssize_t r = read(fd, buf, sizeof(buf));

			if (r <= 0) {
				int err = r < 0 ? errno : ECONNRESET;

				close(fd);
				fail("no greeting through the tunnel", err);
				return err;
			}
		}
		close(fd);
	}
	return 0;
}

/* One client, or PARALLEL processes side by side sharing the count, as the
 * probe's rr --parallel. */
static int rr(const struct sockaddr_in *proxy, const char *target, unsigned long count,
	      unsigned long parallel)
{
	double t0 = now_s(), dt;
	unsigned long started = 0;
	int err = 0;

	if (parallel == 1)
		err = rr_loop(proxy, target, count);
	for (unsigned long k = 0; parallel > 1 && k < parallel; k++) {
		pid_t pid = fork();

		if (pid < 0) {
			err = fail("fork", errno);
			break;
		}
		if (pid == 0) {
			int r = rr_loop(proxy, target, count / parallel + (k < count % parallel));

			_exit(r ? 1 : 0);
		}
		started++;
	}
	for (; started; started--) {
		int st;

		if (wait(&st) < 0)
			return fail("wait", errno);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			err = 1;
	}
	if (err)
		return 1;
	dt = now_s() - t0;
	printf("ok %lu connections in %.3f s (%.0f/s)\n", count, dt,
	       dt > 0 ? (double)count / dt : 0.0);
	return 0;
}

/* The time runs until the server (connectc sink) has every byte: it answers
 * then, without waiting for the client's end, since a proxy that sees the
 * client's half close may close both halves (squid and tinyproxy do), and
 * the time to EOF would not count what the proxy still had to send. */
static int bulk(const struct sockaddr_in *proxy, const char *target, unsigned long long want)
{
	static char buf[1 << 16];
	unsigned long long sent = 0;
	double t0 = now_s(), dt;
	char reply[64];
	size_t extra = 0;
	ssize_t n;
	int fd;

	memset(buf, 'x', sizeof(buf));
	fd = tunnel(proxy, target, &extra);
	if (fd < 0)
		return fail("CONNECT", -fd);
	while (sent < want) {
		size_t chunk = want - sent < sizeof(buf) ? (size_t)(want - sent) : sizeof(buf);
		ssize_t w = write(fd, buf, chunk);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return fail("write", errno);
		}
		sent += (unsigned long long)w;
	}
	n = read(fd, reply, sizeof(reply) - 1);
	dt = now_s() - t0;
	close(fd);
	if (n <= 0)
		return fail("no answer from the sink", n < 0 ? errno : ECONNRESET);
	reply[n] = 0;
	reply[strcspn(reply, "\r\n")] = 0;
	printf("ok %llu bytes in %.3f s (%.1f Mbit/s) server: %s\n", sent, dt,
	       dt > 0 ? (double)sent * 8 / dt / 1e6 : 0.0, reply);
	return 0;
}

/* One connection at a time: reads BYTES (or to the end), answers "ok N". */
static int sink(const char *addr, const char *port, unsigned long long want)
{
	static char buf[1 << 16];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int lfd, one = 1;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return fail(addr, EINVAL);
	sa.sin_port = htons((unsigned short)atoi(port));
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return fail("socket", errno);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0)
		return fail("bind", errno);
	for (;;) {
		unsigned long long total = 0;
		char line[64];
		ssize_t n = 0;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0)
			continue;
		while (total < want && (n = read(c, buf, sizeof(buf))) > 0)
			total += (unsigned long long)n;
		n = snprintf(line, sizeof(line), "ok %llu\n", total);
		if (write(c, line, (size_t)n) < 0) {
			/* the client went away */
		}
		close(c);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in proxy = {.sin_family = AF_INET};
	char target[128];
	unsigned long parallel = 1;
	char *end;
	unsigned long long n;

	if (argc == 5 && !strcmp(argv[1], "sink")) {
		n = strtoull(argv[4], &end, 10);
		return *end || !n ? 2 : sink(argv[2], argv[3], n);
	}
	if (argc == 8 && !strcmp(argv[1], "rr")) {
		parallel = strtoul(argv[7], &end, 10);
		if (*end || !parallel || parallel > 64) {
			fprintf(stderr, "connectc: %s: not a number of clients (1 to 64)\n",
				argv[7]);
			return 2;
		}
		argc--;
	}
	if (argc != 7 || inet_pton(AF_INET, argv[2], &proxy.sin_addr) != 1) {
		fprintf(stderr, "usage: connectc rr PROXY PPORT HOST PORT COUNT [PARALLEL]\n"
				"       connectc bulk PROXY PPORT HOST PORT BYTES\n"
				"       connectc sink ADDR PORT BYTES\n");
		return 2;
	}
	proxy.sin_port = htons((unsigned short)atoi(argv[3]));
	snprintf(target, sizeof(target), "%s:%s", argv[4], argv[5]);
	n = strtoull(argv[6], &end, 10);
	if (*end || !n) {
		fprintf(stderr, "connectc: %s: not a count\n", argv[6]);
		return 2;
	}
	if (!strcmp(argv[1], "rr"))
		return rr(&proxy, target, n, parallel < n ? parallel : n);
	if (!strcmp(argv[1], "bulk"))
		return bulk(&proxy, target, n);
	fprintf(stderr, "connectc: %s: rr or bulk\n", argv[1]);
	return 2;
}
