/* Guarantee: the tc backstop, as the agent loads, fills and attaches it (agent/enforce.c on a
 * veth and a cgroup of the test's own), drops with its reason every crafted frame a session may
 * not send (a spoofed source, IPv4 fragments, IPv4 options, IPv6 routing and extension headers,
 * ICMP, UDP but to the responder, a segment of a flow no SYN opened, a truncated header, a SYN
 * to a forbidden, expired, own, unlisted or DoT target, a once grant no connect spent) and passes
 * ARP, DNS to the responder and the SYN and segments of an admitted flow; an entry two names
 * share (one the policy's, one a grant's) stays the policy's; it moves a segment's
 * TCP timestamp by the boot's shift, its echo back, and leaves a TCP-AO segment's as it is.
 * BPF_PROG_TEST_RUN on the program the veth runs; the once grant is spent by a real connect() in
 * the session's cgroup, since no kernel errand supports runs its cgroup sock_addr programs under
 * BPF_PROG_TEST_RUN. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent/cgroup.h"
#include "agent/enforce.h"
#include "egress.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

#define SESS "10.213.0.2"
#define GW "10.213.0.1"
#define HOST "198.18.1.10"     /* allowed on 443 */
#define UNLISTED "198.18.1.20" /* no entry */
#define EXPIRED "198.18.1.12"  /* an entry whose expiry has passed */
#define ONCE "198.18.1.30"     /* a once grant's entry */
#define SELF "198.18.0.99"     /* one of the agent namespace's own addresses */
#define PRIVATE "10.99.0.10"   /* forbidden, though an entry names it */
#define PINNED "10.99.0.11"    /* forbidden, pinned by the operator */
#define RELAYED "198.18.1.40"  /* a secret host's answer: its connections go to the broker */
#define RELAY_PORT 15001
#define ONCE_GRANT 5

static int host_ifindex, peer_ifindex, prog_fd, guard_fd;
static struct enforce *enf;
static uint8_t last_reason;
static int n_events;

static void on_event(const struct egress_event *ev, void *arg)
{
	(void)arg;
	if (ev->reason == EVENT_GRANT_USED)
		return;
	last_reason = ev->reason;
	n_events++;
}

/* Runs prog on the frame as if it came in on ifindex; the verdict, and the
 * reason of the refusal event it wrote (0: none) in *why; the frame as the
 * program left it in out. */
static int run_out(int fd, int ifindex, const void *frame, size_t len, int *why, void *out,
		   size_t out_len)
{
	struct __sk_buff ctx = {.ifindex = (__u32)ifindex};
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = (__u32)len,
		    .data_out = out, .data_size_out = (__u32)out_len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = 1);

	last_reason = 0;
	n_events = 0;
	if (bpf_prog_test_run_opts(fd, &o))
		return -errno;
	enforce_events_drain(enf, on_event, NULL);
	*why = n_events ? last_reason : 0;
	return (int)o.retval;
}

/* Runs prog on the frame as if it came in on ifindex; the verdict, and the
 * reason of the refusal event it wrote (0: none) in *why. */
static int run_on(int fd, int ifindex, const void *frame, size_t len, int *why)
{
	uint8_t out[512];

	return run_out(fd, ifindex, frame, len, why, out, sizeof(out));
}

/* The verdict and the reason, as one check each. */
static void expect(const char *what, const void *frame, size_t len, int verdict, int reason)
{
	int why = -1, rc = run_on(prog_fd, host_ifindex, frame, len, &why);

	CHECK_INT(rc, verdict, "%s: %s", what, verdict == TC_ACT_OK ? "passes" : "dropped");
	CHECK_INT(why, reason, "%s: reason %d", what, reason);
}

struct frame4 {
	struct ethhdr eth;
	struct iphdr ip;
	union {
		struct tcphdr tcp;
		struct udphdr udp;
		uint8_t raw[64];
	};
} __attribute__((packed));

static uint32_t ip4(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a.s_addr;
}

/* An IPv4 frame from src to dst: a TCP segment (flags "S", "A") or a UDP
 * datagram, or a bare protocol; its length in *len. */
static void frame4(struct frame4 *f, size_t *len, const char *src, const char *dst, int proto,
		   uint16_t sport, uint16_t dport, const char *flags)
{
	size_t l4 = proto == IPPROTO_TCP   ? sizeof(f->tcp)
		    : proto == IPPROTO_UDP ? sizeof(f->udp)
					   : 8;

	memset(f, 0, sizeof(*f));
	f->eth.h_proto = htons(ETH_P_IP);
	f->ip.version = 4;
	f->ip.ihl = 5;
	f->ip.ttl = 64;
	f->ip.protocol = (uint8_t)proto;
	f->ip.tot_len = htons((uint16_t)(sizeof(f->ip) + l4));
	f->ip.saddr = ip4(src);
	f->ip.daddr = ip4(dst);
	if (proto == IPPROTO_TCP) {
		f->tcp.source = htons(sport);
		f->tcp.dest = htons(dport);
		f->tcp.doff = 5;
		f->tcp.syn = strchr(flags, 'S') != NULL;
		f->tcp.ack = strchr(flags, 'A') != NULL;
	} else if (proto == IPPROTO_UDP) {
		f->udp.source = htons(sport);
		f->udp.dest = htons(dport);
		f->udp.len = htons(sizeof(f->udp));
	} else {
		f->raw[0] = 8; /* ICMP echo request */
	}
	*len = sizeof(f->eth) + sizeof(f->ip) + l4;
}

/* IPv6 from the session's side: a header chain given as (next header,
 * length in bytes) pairs, then a TCP SYN to 2001:4860::8888:443. */
static size_t frame6(uint8_t *buf, size_t cap, const uint8_t (*ext)[2], size_t n_ext)
{
	struct ethhdr *eth = (void *)buf;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	uint8_t *p = (uint8_t *)(ip6 + 1), *next = &ip6->nexthdr;
	struct tcphdr *th;

	memset(buf, 0, cap);
	eth->h_proto = htons(ETH_P_IPV6);
	ip6->version = 6;
	ip6->hop_limit = 64;
	inet_pton(AF_INET6, "fd65:7272:616e:64::2", &ip6->saddr);
	inet_pton(AF_INET6, "2001:4860::8888", &ip6->daddr);
	for (size_t i = 0; i < n_ext; i++) {
		*next = ext[i][0];
		next = p;
		/* hdrlen in 8-byte units past the first 8 (the fragment header's is 0) */
		p[1] = ext[i][0] == 44 ? 0 : (uint8_t)(ext[i][1] / 8 - 1);
		if (ext[i][0] == 43) {
			p[2] = 0; /* type 0: a source route */
			p[3] = 1; /* one address left */
		}
		p += ext[i][1];
	}
	*next = IPPROTO_TCP;
	th = (void *)p;
	th->source = htons(40000);
	th->dest = htons(443);
	th->doff = 5;
	th->syn = 1;
	p += sizeof(*th);
	ip6->payload_len = htons((uint16_t)(p - (uint8_t *)(ip6 + 1)));
	return (size_t)(p - buf);
}

static void backstop_ipv4(void)
{
	struct frame4 f;
	size_t len;
	int why;

	memset(&f, 0, sizeof(f));
	f.eth.h_proto = htons(ETH_P_ARP);
	expect("ARP", &f, sizeof(f.eth) + 28, TC_ACT_OK, 0);

	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40000, 443, "S");
	expect("a SYN to an allowed host's port", &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40000, 443, "A");
	expect("a segment of the flow that SYN opened", &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40001, 444, "A");
	expect("a segment of a flow no SYN opened, to a port not allowed (silently)", &f, len,
	       TC_ACT_SHOT, 0);
	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40001, 443, "A");
	expect("a segment of a flow the table does not hold, to an allowed host's port: judged "
	       "as its SYN, passes",
	       &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, HOST, SESS, IPPROTO_TCP, 443, 40000, "A");
	CHECK_INT(run_on(guard_fd, host_ifindex, &f, len, &why), TC_ACT_OK,
		  "toward the session, a segment of the admitted flow passes the flow guard");
	/* A flow the table does not hold is judged toward the session as its
	 * other side is on the way out (an ended one pushed out of the table
	 * passes no more either way). */
	frame4(&f, &len, HOST, SESS, IPPROTO_TCP, 443, 40077, "A");
	CHECK_INT(run_on(guard_fd, host_ifindex, &f, len, &why), TC_ACT_OK,
		  "toward the session, a segment of a flow the table does not hold, from an "
		  "allowed host's port: passes");
	frame4(&f, &len, UNLISTED, SESS, IPPROTO_TCP, 443, 40077, "A");
	CHECK_INT(run_on(guard_fd, host_ifindex, &f, len, &why), TC_ACT_SHOT,
		  "... from a host no entry names: dropped");
	frame4(&f, &len, ONCE, SESS, IPPROTO_TCP, 443, 40077, "A");
	CHECK_INT(run_on(guard_fd, host_ifindex, &f, len, &why), TC_ACT_SHOT,
		  "... from a once grant's host (never admitted twice): dropped");
	frame4(&f, &len, RELAYED, SESS, IPPROTO_TCP, 443, 40077, "A");
	CHECK_INT(run_on(guard_fd, host_ifindex, &f, len, &why), TC_ACT_SHOT,
		  "... from a secret host, straight: dropped");
	frame4(&f, &len, GW, SESS, IPPROTO_TCP, 53, 40077, "A");
	CHECK_INT(run_on(guard_fd, host_ifindex, &f, len, &why), TC_ACT_OK,
		  "... from the gateway (the responder, the broker): passes");

	frame4(&f, &len, SESS, UNLISTED, IPPROTO_TCP, 40002, 443, "S");
	expect("a SYN to a host no entry names", &f, len, TC_ACT_SHOT, REASON_NOT_ALLOWED);
	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40002, 8443, "S");
	expect("a SYN to the allowed host's other port", &f, len, TC_ACT_SHOT, REASON_NOT_ALLOWED);
	frame4(&f, &len, SESS, PRIVATE, IPPROTO_TCP, 40003, 443, "S");
	expect("a SYN to a private address an entry names", &f, len, TC_ACT_SHOT, REASON_FORBIDDEN);
	frame4(&f, &len, SESS, "169.254.169.254", IPPROTO_TCP, 40003, 443, "S");
	expect("a SYN to the metadata address", &f, len, TC_ACT_SHOT, REASON_FORBIDDEN);
	frame4(&f, &len, SESS, PINNED, IPPROTO_TCP, 40004, 443, "S");
	expect("a SYN to a pinned private address", &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, SESS, EXPIRED, IPPROTO_TCP, 40005, 443, "S");
	expect("a SYN to an expired entry", &f, len, TC_ACT_SHOT, REASON_EXPIRED);
	frame4(&f, &len, SESS, SELF, IPPROTO_TCP, 40006, 443, "S");
	expect("a SYN to the agent's own address", &f, len, TC_ACT_SHOT, REASON_SELF);
	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40007, 853, "S");
	expect("a SYN to DNS over TLS", &f, len, TC_ACT_SHOT, REASON_DOT);
	frame4(&f, &len, SESS, RELAYED, IPPROTO_TCP, 40008, 443, "S");
	expect("a SYN straight to a secret host, not through the broker's relay", &f, len,
	       TC_ACT_SHOT, REASON_NOT_ALLOWED);
	frame4(&f, &len, SESS, RELAYED, IPPROTO_TCP, 40008, 443, "A");
	expect("... nor a segment to it that no flow holds (silently)", &f, len, TC_ACT_SHOT, 0);
	frame4(&f, &len, SESS, GW, IPPROTO_TCP, 40009, RELAY_PORT, "S");
	expect("a SYN to the broker's relay port, where the hooks send it", &f, len, TC_ACT_OK, 0);

	frame4(&f, &len, "10.213.0.6", HOST, IPPROTO_TCP, 40000, 443, "S");
	expect("a spoofed source to an allowed host", &f, len, TC_ACT_SHOT, REASON_SPOOF);
	frame4(&f, &len, "10.213.0.6", GW, IPPROTO_UDP, 40000, 53, "");
	expect("a spoofed source to the responder", &f, len, TC_ACT_SHOT, REASON_SPOOF);

	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40000, 443, "A");
	f.ip.frag_off = htons(0x2000);
	expect("a first fragment (MF) of the admitted flow", &f, len, TC_ACT_SHOT, REASON_FRAGMENT);
	f.ip.frag_off = htons(185);
	expect("a later fragment (offset) of it", &f, len, TC_ACT_SHOT, REASON_FRAGMENT);

	/* A loose source route through the gateway to a private host, on the
	 * responder's port: options come first, even before the responder. */
	frame4(&f, &len, SESS, GW, IPPROTO_UDP, 40000, 53, "");
	memmove((uint8_t *)&f.ip + 24, (uint8_t *)&f.ip + 20, sizeof(f.udp));
	((uint8_t *)&f.ip)[20] = 131; /* LSRR */
	((uint8_t *)&f.ip)[21] = 3;   /* no hop of its own: the option alone */
	((uint8_t *)&f.ip)[22] = 4;
	((uint8_t *)&f.ip)[23] = 0; /* end of options */
	f.ip.ihl = 6;
	f.ip.tot_len = htons(24 + sizeof(f.udp));
	len += 4;
	expect("IPv4 options to the responder's port", &f, len, TC_ACT_SHOT, REASON_IP_OPTIONS);

	frame4(&f, &len, SESS, HOST, IPPROTO_ICMP, 0, 0, "");
	expect("ICMP to an allowed host", &f, len, TC_ACT_SHOT, REASON_PROTO);
	frame4(&f, &len, SESS, HOST, 132, 0, 0, "");
	expect("SCTP to an allowed host", &f, len, TC_ACT_SHOT, REASON_PROTO);

	frame4(&f, &len, SESS, GW, IPPROTO_UDP, 40000, 53, "");
	expect("UDP to the responder", &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, SESS, GW, IPPROTO_TCP, 40000, 53, "S");
	expect("TCP to the responder", &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, SESS, HOST, IPPROTO_UDP, 40000, 443, "");
	expect("UDP to an allowed host's port", &f, len, TC_ACT_SHOT, REASON_UDP);
	frame4(&f, &len, SESS, "8.8.8.8", IPPROTO_UDP, 40000, 53, "");
	expect("UDP DNS to another resolver", &f, len, TC_ACT_SHOT, REASON_UDP);

	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40000, 443, "A");
	expect("a TCP header cut short", &f, sizeof(f.eth) + sizeof(f.ip) + 10, TC_ACT_SHOT,
	       REASON_PROTO);
	/* An IPv4 header shorter than 20 bytes cannot be run: BPF_PROG_TEST_RUN
	 * refuses such a frame itself (EINVAL); one of ihl below 5 stands for it. */
	f.ip.ihl = 4;
	expect("an IPv4 header length below 5", &f, len, TC_ACT_SHOT, REASON_PROTO);
	frame4(&f, &len, SESS, GW, IPPROTO_UDP, 40000, 53, "");
	expect("a UDP header cut short", &f, sizeof(f.eth) + sizeof(f.ip) + 4, TC_ACT_SHOT,
	       REASON_PROTO);
	f.eth.h_proto = htons(0x88b5); /* local experimental ethertype */
	expect("another ethertype", &f, len, TC_ACT_SHOT, REASON_PROTO);

	frame4(&f, &len, SESS, HOST, IPPROTO_TCP, 40000, 443, "A");
	CHECK_INT(run_on(prog_fd, peer_ifindex, &f, len, &why), TC_ACT_SHOT,
		  "the admitted flow's segment on a veth of no session: dropped");
}

static void backstop_ipv6(void)
{
	static const uint8_t routing[][2] = {{43, 24}};
	static const uint8_t hop_routing[][2] = {{0, 8}, {43, 24}};
	static const uint8_t nine[][2] = {{60, 8}, {60, 8}, {60, 8}, {60, 8}, {60, 8},
					  {60, 8}, {60, 8}, {60, 8}, {60, 8}};
	static const uint8_t dest[][2] = {{60, 8}};
	static const uint8_t frag[][2] = {{44, 8}};
	uint8_t buf[256];
	size_t len;
	int why;

	len = frame6(buf, sizeof(buf), routing, 1);
	expect("IPv6 with a routing header", buf, len, TC_ACT_SHOT, REASON_IP_OPTIONS);
	len = frame6(buf, sizeof(buf), hop_routing, 2);
	expect("IPv6 with a routing header behind hop-by-hop options", buf, len, TC_ACT_SHOT,
	       REASON_IP_OPTIONS);
	len = frame6(buf, sizeof(buf), nine, 9);
	expect("IPv6 behind nine extension headers", buf, len, TC_ACT_SHOT, REASON_IP_OPTIONS);
	len = frame6(buf, sizeof(buf), routing, 1);
	expect("IPv6 with its routing header cut short", buf, sizeof(struct ethhdr) + 40 + 4,
	       TC_ACT_SHOT, REASON_IP_OPTIONS);
	len = frame6(buf, sizeof(buf), dest, 1);
	expect("IPv6 TCP behind destination options", buf, len, TC_ACT_SHOT, REASON_IPV6);
	len = frame6(buf, sizeof(buf), frag, 1);
	expect("an IPv6 fragment", buf, len, TC_ACT_SHOT, REASON_IPV6);
	len = frame6(buf, sizeof(buf), NULL, 0);
	expect("an IPv6 SYN to a public address", buf, len, TC_ACT_SHOT, REASON_IPV6);

	/* Toward the session (the same frames, turned around: the flow guard
	 * looks at the source), what would not leave it does not reach it. */
	len = frame6(buf, sizeof(buf), frag, 1);
	CHECK_INT(run_on(guard_fd, host_ifindex, buf, len, &why), TC_ACT_SHOT,
		  "toward the session, an IPv6 fragment: dropped");
	len = frame6(buf, sizeof(buf), routing, 1);
	CHECK_INT(run_on(guard_fd, host_ifindex, buf, len, &why), TC_ACT_SHOT,
		  "toward the session, IPv6 with a routing header: dropped");
	len = frame6(buf, sizeof(buf), nine, 9);
	CHECK_INT(run_on(guard_fd, host_ifindex, buf, len, &why), TC_ACT_SHOT,
		  "toward the session, IPv6 behind nine extension headers: dropped");
}

/* The TCP checksum of f's segment (tcp_len bytes) with its pseudo-header:
 * 0 where the segment's own checksum is right. */
static uint16_t tcp_csum(const struct frame4 *f, size_t tcp_len)
{
	const uint8_t *b = (const uint8_t *)&f->tcp;
	uint32_t sum = 0;

	sum += (ntohl(f->ip.saddr) >> 16) + (ntohl(f->ip.saddr) & 0xffff);
	sum += (ntohl(f->ip.daddr) >> 16) + (ntohl(f->ip.daddr) & 0xffff);
	sum += IPPROTO_TCP + (uint32_t)tcp_len;
	for (size_t i = 0; i < tcp_len; i += 2)
		sum += (uint32_t)(b[i] << 8 | (i + 1 < tcp_len ? b[i + 1] : 0));
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* A segment of the admitted flow (or its answer) carrying the options opts
 * (n bytes, a multiple of 4), its checksum right; its length. */
static size_t frame_opts(struct frame4 *f, const char *src, const char *dst, uint16_t sport,
			 uint16_t dport, const uint8_t *opts, size_t n)
{
	size_t len;

	frame4(f, &len, src, dst, IPPROTO_TCP, sport, dport, "A");
	memcpy(f->raw + sizeof(f->tcp), opts, n);
	f->tcp.doff = (uint16_t)((sizeof(f->tcp) + n) / 4);
	f->ip.tot_len = htons((uint16_t)(sizeof(f->ip) + sizeof(f->tcp) + n));
	f->tcp.check = htons(tcp_csum(f, sizeof(f->tcp) + n));
	return len + n;
}

/* The 32-bit number at byte at of f's options. */
static uint32_t opt32(const struct frame4 *f, size_t at)
{
	uint32_t v;

	memcpy(&v, f->raw + sizeof(f->tcp) + at, 4);
	return ntohl(v);
}

/* Runs a segment with the options opts through fd (inbound: toward the
 * session) and checks the value and echo of its timestamp option (its kind
 * at byte ts_at of opts) as it left, and that its checksum still holds. */
static void moved(int fd, const char *what, const uint8_t *opts, size_t n, size_t ts_at,
		  bool inbound, uint32_t val, uint32_t ecr)
{
	struct frame4 f, out;
	size_t len = inbound ? frame_opts(&f, HOST, SESS, 443, 40000, opts, n)
			     : frame_opts(&f, SESS, HOST, 40000, 443, opts, n);
	int why, rc;

	memset(&out, 0, sizeof(out));
	rc = run_out(fd, host_ifindex, &f, len, &why, &out, sizeof(out));
	CHECK_INT(rc, TC_ACT_OK, "%s: passes", what);
	CHECK_INT(opt32(&out, ts_at + 2), val, "%s: its timestamp", what);
	CHECK_INT(opt32(&out, ts_at + 6), ecr, "%s: its echo", what);
	CHECK_INT(tcp_csum(&out, sizeof(out.tcp) + n), 0, "%s: its checksum holds", what);
}

/* A session's timestamps leave moved by the boot's shift and their echoes
 * come back moved back (one clock for every session, not the host's
 * uptime); a segment signed with TCP-AO, whose MAC covers its options, or
 * one whose timestamp lies past the end of its options or past a malformed
 * option, is left as it is. */
static void timestamps(void)
{
	/* clang-format off */
	/* Linux's layout of a segment's options, and of a SYN's */
	static const uint8_t ts[] = {1, 1, 8, 10, 0, 0, 0x03, 0xe8, 0, 0, 0, 7};
	static const uint8_t syn[] = {2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0x03, 0xe8,
				      0, 0, 0, 0, 1, 3, 3, 7};
	/* an AO option (kind 29, key ids, a 12-byte MAC) before the timestamp, and after */
	static const uint8_t ao[] = {29, 16, 1, 1, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x10, 0x11,
				     0x12, 0x13, 0x14, 0x15, 1, 1, 8, 10, 0, 0, 0x03, 0xe8,
				     0, 0, 0, 7};
	static const uint8_t ao_after[] = {1, 1, 8, 10, 0, 0, 0x03, 0xe8, 0, 0, 0, 7,
					   29, 16, 1, 1, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x10,
					   0x11, 0x12, 0x13, 0x14, 0x15};
	/* a SYN's first sixteen bytes, then a four-byte AO option where its window scale is */
	static const uint8_t syn_ao[] = {2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0x03, 0xe8,
					 0, 0, 0, 0, 29, 4, 1, 1};
	/* the end of options before it; an option of length 0 before it */
	static const uint8_t eol[] = {0, 1, 8, 10, 0, 0, 0x03, 0xe8, 0, 0, 0, 7};
	static const uint8_t bad[] = {5, 0, 8, 10, 0, 0, 0x03, 0xe8, 0, 0, 0, 7};
	/* clang-format on */
	uint32_t shift = enforce_ts_shift();
	uint8_t back[sizeof(ts)], synack[sizeof(syn)];

	CHECK_TRUE(shift != 0, "this boot's timestamp shift is not 0 (%u)", shift);
	CHECK_INT(enforce_ts_shift(), shift, "and the same each time it is asked");
	moved(prog_fd, "a segment's timestamp, on its way out", ts, sizeof(ts), 2, false,
	      1000 + shift, 7);
	moved(prog_fd, "a timestamp in a SYN's layout, after MSS and SACK-permitted", syn,
	      sizeof(syn), 6, false, 1000 + shift, 0);
	moved(prog_fd, "a segment signed with TCP-AO", ao, sizeof(ao), 18, false, 1000, 7);
	moved(prog_fd, "a segment signed with TCP-AO after its timestamp", ao_after,
	      sizeof(ao_after), 2, false, 1000, 7);
	moved(prog_fd, "a SYN's layout whose last option is TCP-AO", syn_ao, sizeof(syn_ao), 6,
	      false, 1000, 0);
	moved(prog_fd, "a timestamp past the end of options", eol, sizeof(eol), 2, false, 1000, 7);
	moved(prog_fd, "a timestamp past an option of length 0", bad, sizeof(bad), 2, false, 1000,
	      7);

	/* Coming back: the echo of a moved value is moved back; an echo of 0 stays. */
	memcpy(back, ts, sizeof(ts));
	back[8] = (uint8_t)((1000 + shift) >> 24);
	back[9] = (uint8_t)((1000 + shift) >> 16);
	back[10] = (uint8_t)((1000 + shift) >> 8);
	back[11] = (uint8_t)(1000 + shift);
	moved(guard_fd, "the echo of a moved timestamp, on its way in", back, sizeof(back), 2, true,
	      1000, 1000);
	moved(guard_fd, "an echo of 0, on its way in", syn, sizeof(syn), 6, true, 1000, 0);
	memcpy(synack, syn, sizeof(syn));
	memcpy(synack + 12, back + 8, 4);
	moved(guard_fd, "the echo of a SYN-ACK's layout, on its way in", synack, sizeof(synack), 6,
	      true, 1000, 1000);
	moved(guard_fd, "an echo in a segment signed with TCP-AO", ao, sizeof(ao), 18, true, 1000,
	      7);
}

/* connect() from a child in the session's cgroup: 0 when the hooks let it
 * through (the test's network namespace has no route: ENETUNREACH then), or
 * the errno the hook gave. */
static int connect_in(const char *cgroup, const char *dst, uint16_t port)
{
	char procs[PATH_MAX];
	int st, p[2];
	pid_t pid;

	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
		int fd, rc = 0;
		FILE *f;

		if (path_fmt(procs, sizeof(procs), "%s/cgroup.procs", cgroup))
			_exit(100);
		f = fopen(procs, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f))
			_exit(100);
		sa.sin_addr.s_addr = ip4(dst);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			_exit(101);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			rc = errno == ENETUNREACH ? 0 : errno;
		_exit(rc);
	}
	close(p[0]);
	close(p[1]);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -EIO;
	return WEXITSTATUS(st);
}

/* Whether this kernel runs a cgroup sock_addr program under BPF_PROG_TEST_RUN:
 * said, never counted (none errand supports does: 6.1 to 6.18 answer ENOTSUPP). */
static void sock_addr_test_run(const char *pin_dir)
{
	char path[PATH_MAX];
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	int link, prog, rc;
	LIBBPF_OPTS(bpf_test_run_opts, o, .repeat = 1);

	if (path_fmt(path, sizeof(path), "%s/connect4", pin_dir))
		return;
	link = bpf_obj_get(path);
	if (link < 0 || bpf_obj_get_info_by_fd(link, &info, &len)) {
		CHECK_TRUE(false, "the connect4 link the loader pinned");
		if (link >= 0)
			close(link);
		return;
	}
	close(link);
	prog = bpf_prog_get_fd_by_id(info.prog_id);
	rc = bpf_prog_test_run_opts(prog, &o) ? -errno : 0;
	if (rc)
		printf("# cgroup sock_addr programs: BPF_PROG_TEST_RUN refused by this kernel (%s, "
		       "errno %d); the hooks are run here by real connect() calls instead\n",
		       strerror(-rc), -rc);
	else
		printf("# cgroup sock_addr programs: BPF_PROG_TEST_RUN runs them on this kernel; "
		       "not used here yet\n");
	close(prog);
}

/* Two names on one address and port (a CDN's), one the policy's and one a
 * grant's: the entry stays the policy's, whatever order the answers came
 * in, so the policy's host never spends the grant nor ends with it. */
static void shared_address(void)
{
	const uint64_t min = 60ull * 1000000000ull;
	struct timespec ts;
	struct addr a;
	uint32_t grant = 99;
	uint64_t now;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	addr_parse("198.18.1.50", &a);
	enforce_allow_answer(enf, &a, 443, now + min, 0, 0);
	enforce_allow_answer(enf, &a, 443, now + 2 * min, ENTRY_F_ONCE, 7);
	CHECK_INT(enforce_entry_grant(enf, &a, 443, &grant), 0, "the shared entry is there");
	CHECK_INT((int)grant, 0, "a once grant's later answer leaves the policy's entry as it is");
	addr_parse("198.18.1.51", &a);
	enforce_allow_answer(enf, &a, 443, now + 2 * min, 0, 8);
	enforce_allow_answer(enf, &a, 443, now + min, 0, 0);
	grant = 99;
	CHECK_INT(enforce_entry_grant(enf, &a, 443, &grant), 0, "the other shared entry is there");
	CHECK_INT((int)grant, 0,
		  "the policy's answer takes over a grant's live entry that outlasts it");
}

static void once_grant(const char *cgroup)
{
	struct frame4 f;
	size_t len;

	frame4(&f, &len, SESS, ONCE, IPPROTO_TCP, 40010, 443, "S");
	expect("a SYN of a once grant no connect spent", &f, len, TC_ACT_SHOT, REASON_GRANT_SPENT);
	CHECK_INT(connect_in(cgroup, ONCE, 443), 0, "the first connect spends the once grant");
	CHECK_INT(connect_in(cgroup, ONCE, 443), EPERM, "the second is refused");
	enforce_events_drain(enf, on_event, NULL);
	frame4(&f, &len, SESS, ONCE, IPPROTO_TCP, 40011, 443, "S");
	expect("a SYN of the once grant its connect spent", &f, len, TC_ACT_OK, 0);
	expect("... and its retransmission", &f, len, TC_ACT_OK, 0);
	frame4(&f, &len, SESS, ONCE, IPPROTO_TCP, 40012, 443, "S");
	expect("a SYN of another connection (another port) to the spent grant's host", &f, len,
	       TC_ACT_SHOT, REASON_GRANT_SPENT);
	CHECK_INT(connect_in(cgroup, PRIVATE, 443), EPERM,
		  "connect to a private address an entry names: refused by the hook");
}

/* What the test pinned: the session's directory and the program set under
 * bpf_dir/prog, which the agent's teardown keeps for the next session. */
static void remove_pins(const char *bpf_dir, const char *pin_dir)
{
	char prog[PATH_MAX], path[PATH_MAX * 2 + 2];
	struct dirent *d, *e;
	DIR *sets, *set;

	enforce_unpin(pin_dir);
	if (path_fmt(prog, sizeof(prog), "%s/prog", bpf_dir))
		return;
	sets = opendir(prog);
	while (sets && (d = readdir(sets))) {
		if (d->d_name[0] == '.')
			continue;
		if (path_fmt(path, sizeof(path), "%s/%s", prog, d->d_name))
			continue;
		set = opendir(path);
		while (set && (e = readdir(set))) {
			char file[PATH_MAX * 3];

			if (e->d_name[0] != '.' &&
			    !path_fmt(file, sizeof(file), "%s/%s", path, e->d_name))
				unlink(file);
		}
		if (set)
			closedir(set);
		rmdir(path);
	}
	if (sets)
		closedir(sets);
	rmdir(prog);
	rmdir(bpf_dir);
}

int main(void)
{
	char mnt[PATH_MAX], cg[PATH_MAX], bpf_dir[PATH_MAX], pin_dir[PATH_MAX], err[512];
	char path[PATH_MAX];
	struct cidr pub;
	struct addr self, a;
	uint16_t ports[] = {443};
	struct enforce_params p = {
		.mode = EGRESS_MODE_RESTRICTED,
		.dns_port = 53,
		.ports = ports,
		.n_ports = 1,
		.public_ranges = &pub,
		.n_public = 1,
		.self = &self,
		.n_self = 1,
	};
	uint64_t now;
	struct timespec ts;

	if (geteuid() != 0) {
		printf("SKIP: needs root (loads and attaches BPF programs)\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* A network namespace of the test's own for its veth: nothing it makes
	 * is seen outside, and it goes with the process. */
	if (!CHECK_INT(unshare(CLONE_NEWNET) ? -errno : 0, 0, "a network namespace of its own"))
		return test_exit();
	if (!CHECK_INT(system("ip link add eh0 type veth peer name es0 && ip link set eh0 up"), 0,
		       "a veth pair in it"))
		return test_exit();
	host_ifindex = (int)if_nametoindex("eh0");
	peer_ifindex = (int)if_nametoindex("es0");
	if (!CHECK_INT(cgroup2_mount(mnt, sizeof(mnt)), 0, "the cgroup2 mount"))
		return test_exit();
	/* errt<pid>: the runner sweeps what a crashed run of it left */
	if (path_fmt(cg, sizeof(cg), "%s/errt%d-backstop", mnt, (int)getpid()) ||
	    path_fmt(bpf_dir, sizeof(bpf_dir), "/sys/fs/bpf/errt%d-backstop", (int)getpid()) ||
	    path_fmt(pin_dir, sizeof(pin_dir), "%s/sess", bpf_dir))
		return test_exit();
	if (!CHECK_INT(mkdir(cg, 0755) ? -errno : 0, 0, "a cgroup of its own") ||
	    !CHECK_INT(mkdir(bpf_dir, 0700) ? -errno : 0, 0, "a bpffs directory of its own"))
		goto out;

	cidr_parse("198.18.0.0/15", &pub);
	addr_parse(SELF, &self);
	p.pin_dir = pin_dir;
	p.cgroup_path = cg;
	cgroup_id(cg, &p.cgroup_id);
	p.host_ifindex = host_ifindex;
	p.sess4 = ip4(SESS);
	p.gw4 = ip4(GW);
	p.relay_port = RELAY_PORT;
	err[0] = '\0';
	enf = enforce_attach(&p, NULL, err, sizeof(err));
	if (!CHECK_TRUE(enf != NULL, "the agent's loader attaches the session (%s)", err))
		goto out;
	prog_fd = path_fmt(path, sizeof(path), "%s/tc_ingress", pin_dir) ? -1 : bpf_obj_get(path);
	guard_fd = path_fmt(path, sizeof(path), "%s/tc_egress", pin_dir) ? -1 : bpf_obj_get(path);
	if (!CHECK_TRUE(prog_fd >= 0 && guard_fd >= 0, "the backstop and flow guard it pinned"))
		goto out;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	addr_parse(HOST, &a);
	CHECK_INT(enforce_allow(enf, &a, 443, 0, 0), 0, "allow %s:443", HOST);
	addr_parse(PRIVATE, &a);
	CHECK_INT(enforce_allow(enf, &a, 443, 0, 0), 0, "an entry for %s:443", PRIVATE);
	addr_parse(PINNED, &a);
	CHECK_INT(enforce_allow(enf, &a, 443, 0, ENTRY_F_PINNED), 0, "pin %s:443", PINNED);
	addr_parse(EXPIRED, &a);
	CHECK_INT(enforce_allow(enf, &a, 443, now - 1000000000ull, 0), 0, "an expired entry");
	addr_parse(SELF, &a);
	CHECK_INT(enforce_allow(enf, &a, 443, 0, 0), 0, "an entry for the agent's own address");
	addr_parse(ONCE, &a);
	CHECK_INT(enforce_allow_answer(enf, &a, 443, 0, ENTRY_F_ONCE, ONCE_GRANT), 0,
		  "a once grant's entry");
	addr_parse(RELAYED, &a);
	CHECK_INT(enforce_allow(enf, &a, 443, 0, ENTRY_F_RELAY), 0, "a secret host's entry");

	backstop_ipv4();
	backstop_ipv6();
	timestamps();
	once_grant(cg);
	shared_address();
	sock_addr_test_run(pin_dir);

out:
	if (prog_fd > 0)
		close(prog_fd);
	if (guard_fd > 0)
		close(guard_fd);
	enforce_free(enf);
	remove_pins(bpf_dir, pin_dir);
	rmdir(cg);
	return test_exit();
}
