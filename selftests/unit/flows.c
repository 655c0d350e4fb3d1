/* Guarantee: the backstop's flow entries end by their last segment, not their
 * SYN: a flow silent for EGRESS_FLOW_IDLE_S passes no more segments, one used
 * within it passes and is touched; a flow admitted under a grant passes only
 * while grants_live holds the grant and its end has not come, and its
 * segments toward the session are dropped with it. Run on the programs
 * themselves (BPF_PROG_TEST_RUN), with a clock the test cannot wait hours
 * for; the session found, as on a veth, by the ifindex the packet comes
 * in on (the test runs see loopback's). A segment of no flow is judged as its
 * SYN would be: it passes, and is a flow again, only while the policy admits
 * its destination, and never for a once grant; toward the session, by its
 * source alike. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "egress.h"
#include "egress.skel.h"
#include "selftests/unit/test.h"

#define NS 1000000000ull
#define SESS "10.213.0.2"
#define HOST "198.18.1.10"
#define SPORT 40000
#define DPORT 443

struct pkt {
	struct ethhdr eth;
	struct iphdr ip;
	struct tcphdr tcp;
} __attribute__((packed));

/* CLOCK_BOOTTIME is a grant's end's clock (the agent's);
 * CLOCK_MONOTONIC_COARSE a flow's (flow_now in bpf/egress.bpf.c). */
static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}
#define boot_ns() clock_ns(CLOCK_BOOTTIME)
#define flow_ns() clock_ns(CLOCK_MONOTONIC_COARSE)

/* A segment of the flow SESS:SPORT -> HOST:DPORT, outward (from the session)
 * or inward (toward it). */
static void segment(struct pkt *p, bool outward)
{
	memset(p, 0, sizeof(*p));
	p->eth.h_proto = htons(ETH_P_IP);
	p->ip.version = 4;
	p->ip.ihl = 5;
	p->ip.ttl = 64;
	p->ip.protocol = IPPROTO_TCP;
	p->ip.tot_len = htons(sizeof(p->ip) + sizeof(p->tcp));
	inet_pton(AF_INET, outward ? SESS : HOST, &p->ip.saddr);
	inet_pton(AF_INET, outward ? HOST : SESS, &p->ip.daddr);
	p->tcp.source = htons(outward ? SPORT : DPORT);
	p->tcp.dest = htons(outward ? DPORT : SPORT);
	p->tcp.doff = 5;
	p->tcp.ack = 1;
}

static int run(struct bpf_program *prog, bool outward)
{
	struct pkt p;
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = &p, .data_size_in = sizeof(p), .repeat = 1);

	segment(&p, outward);
	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &o))
		return -errno;
	return (int)o.retval;
}

static struct flow_key flow(void)
{
	struct flow_key k = {.sport = SPORT, .dport = DPORT, .proto = IPPROTO_TCP};

	k.daddr[10] = k.daddr[11] = 0xff;
	inet_pton(AF_INET, HOST, k.daddr + 12);
	return k;
}

/* The session's own maps, as enforce.c makes them, under its key. */
static int flows_fd, grants_fd;

static int inner(int outer, enum bpf_map_type type, __u32 key, __u32 value, __u32 max, __u32 flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = flags);
	uint64_t sess = 42;
	int fd = bpf_map_create(type, "t", key, value, max, &o);

	if (fd >= 0 && bpf_map_update_elem(outer, &sess, &fd, BPF_ANY))
		return -1;
	return fd;
}

static void flow_set(struct egress_bpf *s, uint64_t last_ns, uint32_t grant)
{
	struct flow_key k = flow();
	struct flow_val v = {.last_ns = last_ns, .grant = grant};

	(void)s;
	bpf_map_update_elem(flows_fd, &k, &v, BPF_ANY);
}

static uint64_t flow_last(struct egress_bpf *s)
{
	struct flow_key k = flow();
	struct flow_val v = {0};

	(void)s;
	bpf_map_lookup_elem(flows_fd, &k, &v);
	return v.last_ns;
}

/* A count of the tc programs', summed over the CPUs of the veth's entry. */
static uint64_t tc_count(int fd, uint32_t ifindex, int idx)
{
	int ncpu = libbpf_num_possible_cpus();
	struct veth_sess_val v[ncpu > 0 ? ncpu : 1];
	uint64_t n = 0;

	if (ncpu <= 0 || bpf_map_lookup_elem(fd, &ifindex, v))
		return UINT64_MAX;
	for (int c = 0; c < ncpu; c++)
		n += v[c].cnt[idx];
	return n;
}

int main(void)
{
	const uint64_t idle = EGRESS_FLOW_IDLE_S * NS;
	struct sess_cfg cfg = {.cgid = 42, .mode = EGRESS_MODE_RESTRICTED, .ifindex = 1};
	uint32_t grant = 7, lo = 1, zero = 0;
	struct egress_bpf *s;
	int cfd, tfd, ncpu = libbpf_num_possible_cpus();
	uint64_t end, now;
	int gfd;

	if (geteuid() != 0) {
		printf("SKIP: needs root (loads BPF programs)\n");
		return 77;
	}
	libbpf_set_print(NULL);
	s = egress_bpf__open();
	if (!CHECK_TRUE(s != NULL, "open the egress object"))
		return test_exit();
	inet_pton(AF_INET, SESS, &cfg.sess_addr4);
	inet_pton(AF_INET, "10.213.0.1", &cfg.gw_addr4);
	if (!CHECK_INT(egress_bpf__load(s), 0, "load it")) {
		egress_bpf__destroy(s);
		return test_exit();
	}
	flows_fd = inner(bpf_map__fd(s->maps.flows_of), BPF_MAP_TYPE_LRU_HASH,
			 sizeof(struct flow_key), sizeof(struct flow_val), EGRESS_FLOWS_MAX, 0);
	grants_fd = gfd = inner(bpf_map__fd(s->maps.grants_of), BPF_MAP_TYPE_HASH, 4, 8,
				EGRESS_GRANTS_MAX, BPF_F_NO_PREALLOC);
	cfd = inner(bpf_map__fd(s->maps.cfg_of), BPF_MAP_TYPE_ARRAY, 4, sizeof(cfg), 1, 0);
	CHECK_TRUE(flows_fd >= 0 && gfd >= 0 && cfd >= 0, "the session's maps, in the set's");
	CHECK_INT(bpf_map_update_elem(cfd, &zero, &cfg, BPF_ANY), 0, "its config");
	tfd = bpf_map__fd(s->maps.veth_sess);
	if (!CHECK_TRUE(ncpu > 0, "the CPUs (%d)", ncpu)) {
		egress_bpf__destroy(s);
		return test_exit();
	}
	{
		/* its veth (every CPU's copy of the config, counts from 0) */
		struct veth_sess_val tv[ncpu];

		memset(tv, 0, sizeof(tv));
		for (int c = 0; c < ncpu; c++)
			tv[c].cfg = cfg;
		CHECK_INT(bpf_map_update_elem(tfd, &lo, tv, BPF_ANY), 0,
			  "its veth (loopback here)");
	}

	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT, "a segment of no flow: dropped");
	CHECK_INT(run(s->progs.errand_tc_out, false), TC_ACT_SHOT,
		  "toward the session, a segment of no flow is judged as its other side: dropped "
		  "(no entry admits its source)");

	/* The policy's flow (grant 0): idleness alone ends it. */
	now = flow_ns();
	flow_set(s, now - idle + 60 * NS, 0);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_OK,
		  "a flow silent for a minute less than the idle time passes");
	/* u64 clock arithmetic, as the program's: right even before 3 h of uptime */
	CHECK_TRUE(flow_last(s) - now < 10 * NS,
		   "... and its last segment is now: it ages from there");
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_OK,
		  "so it passes again (its SYN long before the idle time does not matter)");
	flow_set(s, flow_ns() - idle - NS, 0);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT,
		  "a flow silent for longer than %d s: dropped", EGRESS_FLOW_IDLE_S);
	CHECK_INT(run(s->progs.errand_tc_out, false), TC_ACT_SHOT, "... toward the session too");
	CHECK_INT(tc_count(tfd, lo, CNT_FLOW_ENDED), 2,
		  "both counted as an ended flow's, in the veth's entry");
	CHECK_INT(tc_count(tfd, lo, CNT_TC_PASS), 2, "... beside the two segments that passed");
	CHECK_INT(tc_count(tfd, lo, CNT_TC_DROP), 4,
		  "... and four dropped (the two of no flow, then these)");

	/* A grant's flow: grants_live decides. */
	flow_set(s, flow_ns(), grant);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT,
		  "a flow of a grant grants_live does not hold: dropped");
	end = 0;
	bpf_map_update_elem(gfd, &grant, &end, BPF_ANY);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_OK,
		  "its grant live (always): it passes");
	CHECK_INT(run(s->progs.errand_tc_out, false), TC_ACT_OK, "... both ways");
	end = boot_ns() + 60 * NS;
	bpf_map_update_elem(gfd, &grant, &end, BPF_ANY);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_OK,
		  "a grant ending in a minute: passes");
	end = boot_ns() - NS;
	bpf_map_update_elem(gfd, &grant, &end, BPF_ANY);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT,
		  "a grant whose end has come: dropped");
	CHECK_INT(run(s->progs.errand_tc_out, false), TC_ACT_SHOT, "... toward the session too");
	bpf_map_delete_elem(gfd, &grant);
	CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT,
		  "a revoked grant (deleted): dropped");
	CHECK_INT(run(s->progs.errand_tc_out, false), TC_ACT_SHOT, "... toward the session too");

	/* A segment of no flow (forgotten by the LRU, or never opened) is judged
	 * as its SYN would be, by the policy as it stands. */
	{
		struct allow_lkey ak = {.prefixlen = ALLOW_PREFIXLEN, .k.port = DPORT};
		struct allow_val av = {.flags = ENTRY_F_PINNED};
		struct flow_key k = flow();
		int afd, sfd;

		memcpy(ak.k.addr, k.daddr, 16);
		afd = inner(bpf_map__fd(s->maps.allow_of), BPF_MAP_TYPE_LPM_TRIE,
			    sizeof(struct allow_lkey), sizeof(struct allow_val),
			    EGRESS_ALLOW_MAX + 1, BPF_F_NO_PREALLOC);
		sfd = inner(bpf_map__fd(s->maps.self_of), BPF_MAP_TYPE_LPM_TRIE,
			    sizeof(struct lpm6_key), 1, EGRESS_SELF_MAX, BPF_F_NO_PREALLOC);
		CHECK_TRUE(afd >= 0 && sfd >= 0, "the session's allow and own-address maps");
		bpf_map_delete_elem(flows_fd, &k);
		CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT,
			  "no flow, and its destination not allowed: dropped");
		bpf_map_update_elem(afd, &ak, &av, BPF_ANY);
		CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_OK,
			  "no flow, its destination allowed now (pinned): it passes");
		CHECK_TRUE(flow_last(s) != 0, "... and is a flow again");
		bpf_map_delete_elem(flows_fd, &k);
		av.flags = ENTRY_F_ONCE;
		av.grant = grant;
		bpf_map_update_elem(afd, &ak, &av, BPF_ANY);
		CHECK_INT(run(s->progs.errand_tc_in, true), TC_ACT_SHOT,
			  "no flow, its destination a once grant's: dropped (once is one "
			  "connection)");
		close(afd);
		close(sfd);
	}

	close(flows_fd);
	close(grants_fd);
	close(cfd);
	egress_bpf__destroy(s);
	return test_exit();
}
