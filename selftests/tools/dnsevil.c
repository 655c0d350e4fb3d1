/* dnsevil: plays a fully compromised DNS worker against the real agent. It
 * takes a copy of a (stopped) worker's channel to the agent with
 * pidfd_getfd(2), as an attacker running code in the worker holds it, and
 * sends what the test asks, printing the agent's answer to each:
 *
 *   dnsevil PID REQUEST...
 *     program NAME A|AAAA ADDR[,ADDR...] [TTL [FLAGS]]
 *                              "reply 0 ttl=T" or "reply EPERM" (the status)
 *     many NAME COUNT          program COUNT distinct public IPv4 addresses
 *     event NAME REASON        a denied-name event ("sent")
 *     raw SIZE                 a message of SIZE bytes typed DNSP_PROGRAM
 *                              ("closed": the agent ended the worker)
 *     udp FD ADDR PORT         a datagram sent to IPv4 ADDR:PORT on the
 *                              worker's descriptor FD (5: its UDP socket on
 *                              the gateway), as code in it would ("sent" or
 *                              the errno's name)
 *
 * The worker must be stopped (SIGSTOP) so that it does not read the replies. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/dnspriv.h"

static int usage(void)
{
	fprintf(stderr, "usage: dnsevil PID program NAME A|AAAA ADDR[,ADDR...] [TTL [FLAGS]] | "
			"many NAME COUNT | event NAME REASON | raw SIZE | udp FD ADDR PORT ...\n");
	return 2;
}

/* The agent's answer to one request, or what became of the channel. */
static void await_reply(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct dnsp_reply r;
	ssize_t n;

	if (poll(&p, 1, 5000) != 1) {
		printf("timeout\n");
		return;
	}
	n = recv(fd, &r, sizeof(r), 0);
	if (n == 0 || (n < 0 && errno == ECONNRESET)) {
		printf("closed\n");
	} else if (n != sizeof(r) || r.type != DNSP_REPLY) {
		printf("unexpected %zd bytes\n", n);
	} else if (r.status == 0) {
		printf("reply 0 ttl=%u\n", r.ttl);
	} else {
		const char *e = strerrorname_np(-r.status);

		printf("reply %s\n", e ? e : "?");
	}
	fflush(stdout);
}

static int addrs_parse(char *list, struct dnsp_program *m)
{
	for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (m->n == DNSP_ADDRS_MAX || addr_parse(t, &m->addrs[m->n]))
			return -1;
		m->n++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct dnsp_program m;
	int pidfd, fd, i = 2;

	if (argc < 3)
		return usage();
	pidfd = (int)syscall(SYS_pidfd_open, atoi(argv[1]), 0);
	if (pidfd < 0) {
		perror("pidfd_open");
		return 1;
	}
	/* fd 3: the worker's channel (agent/dnspriv.c worker_child). */
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, 3, 0);
	if (fd < 0) {
		perror("pidfd_getfd");
		return 1;
	}
	/* A reply meant for the worker before it was stopped is not ours. */
	usleep(200000);
	while (recv(fd, &m, sizeof(m), MSG_DONTWAIT) > 0)
		;
	while (i < argc) {
		const char *cmd = argv[i++];

		memset(&m, 0, sizeof(m));
		m.type = DNSP_PROGRAM;
		m.ttl = 60;
		if (!strcmp(cmd, "program") && i + 3 <= argc) {
			snprintf(m.name, sizeof(m.name), "%s", argv[i]);
			m.qtype = !strcmp(argv[i + 1], "AAAA") ? DNS_TYPE_AAAA : DNS_TYPE_A;
			if (addrs_parse(argv[i + 2], &m))
				return usage();
			i += 3;
			if (i < argc && argv[i][0] >= '0' && argv[i][0] <= '9')
				m.ttl = (uint32_t)strtoul(argv[i++], NULL, 10);
			if (i < argc && argv[i][0] >= '0' && argv[i][0] <= '9')
				m.flags = (uint32_t)strtoul(argv[i++], NULL, 0);
			send(fd, &m, sizeof(m), MSG_NOSIGNAL);
			await_reply(fd);
		} else if (!strcmp(cmd, "many") && i + 2 <= argc) {
			snprintf(m.name, sizeof(m.name), "%s", argv[i]);
			m.qtype = DNS_TYPE_A;
			m.n = (uint16_t)atoi(argv[i + 1]);
			if (m.n > DNSP_ADDRS_MAX)
				return usage();
			for (int k = 0; k < m.n; k++)
				addr_from_v4(&m.addrs[k], htonl(0xc6120200u + (uint32_t)k + 1));
			i += 2;
			send(fd, &m, sizeof(m), MSG_NOSIGNAL);
			await_reply(fd);
		} else if (!strcmp(cmd, "event") && i + 2 <= argc) {
			struct dnsp_event ev = {.type = DNSP_EVENT, .qtype = DNS_TYPE_A};

			snprintf(ev.name, sizeof(ev.name), "%s", argv[i]);
			ev.reason = (uint16_t)atoi(argv[i + 1]);
			i += 2;
			send(fd, &ev, sizeof(ev), MSG_NOSIGNAL);
			printf("sent\n");
			fflush(stdout);
		} else if (!strcmp(cmd, "raw") && i + 1 <= argc) {
			static uint8_t buf[sizeof(m) + 64];
			size_t size = (size_t)atoi(argv[i++]);

			if (size > sizeof(buf) || size < 4)
				return usage();
			memcpy(buf, &m, size < sizeof(m) ? size : sizeof(m));
			send(fd, buf, size, MSG_NOSIGNAL);
			await_reply(fd);
		} else if (!strcmp(cmd, "udp") && i + 3 <= argc) {
			struct sockaddr_in sa = {.sin_family = AF_INET,
						 .sin_port = htons((uint16_t)atoi(argv[i + 2]))};
			int wfd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(argv[i]), 0);

			if (wfd < 0 || inet_pton(AF_INET, argv[i + 1], &sa.sin_addr) != 1)
				return usage();
			i += 3;
			if (sendto(wfd, "evil", 4, 0, (struct sockaddr *)&sa, sizeof(sa)) == 4)
				printf("sent\n");
			else
				printf("%s\n",
				       strerrorname_np(errno) ? strerrorname_np(errno) : "?");
			fflush(stdout);
			close(wfd);
		} else {
			return usage();
		}
	}
	return 0;
}
