// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Egress enforcement, one program set for every session. The cgroup sock_addr hooks decide every
 * connect and datagram send of the session's processes; the tc program on the
 * host side of the session's veth is the backstop that holds against raw
 * sockets and processes outside the cgroup. One object, so both read the same
 * maps; userspace loads and verifies it once, pins it under
 * /sys/fs/bpf/errand/prog/<object hash>/, and gives each session maps of its
 * own (pinned under /sys/fs/bpf/errand/<session>/) found by its key. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "egress.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_ARP 0x0806
#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define IP_MF 0x2000
#define IP_OFFSET 0x1FFF
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define AF_INET 2
#define AF_INET6 10

/* One program set serves every session. A session is found by its key, the
 * id of its cgroup: the cgroup hooks take it from their cgroup's storage
 * (sess_cg: the hooks that run for a socket are those of the cgroup it was
 * made in, so a socket passed out keeps its session), the tc programs from
 * the veth they run on (veth_sess). Each outer map below gives, for that key,
 * a map of the session's own, which no other key reaches: a key can never
 * name another session. */
#define INNER(name, ...)                                                                           \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);                                           \
		__uint(max_entries, EGRESS_SESSIONS_MAX);                                          \
		__type(key, __u64);                                                                \
		__array(values, struct {__VA_ARGS__});                                             \
	} name SEC(".maps")

/* The session's settings (egress.h, struct sess_cfg), one entry. */
INNER(cfg_of, __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
      __uint(key_size, sizeof(__u32)); __uint(value_size, sizeof(struct sess_cfg)););

/* Maps looked up once a connect (and a SYN), never a segment, are LPM tries
 * of full-length keys: memory per entry, no bucket array (egress.h). */
INNER(allow_of, __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, EGRESS_ALLOW_MAX + 1);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(struct allow_lkey));
      __uint(value_size, sizeof(struct allow_val)););

INNER(flows_of, __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, EGRESS_FLOWS_MAX);
      __uint(key_size, sizeof(struct flow_key)); __uint(value_size, sizeof(struct flow_val)););

/* treatAsPublic, per session (the embedded errandctl may read another config) */
INNER(public4_of, __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, EGRESS_FORBID_MAX);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(struct lpm4_key));
      __uint(value_size, sizeof(__u8)););

INNER(public6_of, __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, EGRESS_FORBID_MAX);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(struct lpm6_key));
      __uint(value_size, sizeof(__u8)););

INNER(self_of, __uint(type, BPF_MAP_TYPE_LPM_TRIE); __uint(max_entries, EGRESS_SELF_MAX);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(struct lpm6_key));
      __uint(value_size, sizeof(__u8)););

/* Open mode's ports (sandbox.egressPorts). */
INNER(ports_of, __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, EGRESS_PORTS_MAX);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(__u16));
      __uint(value_size, sizeof(__u8)););

/* once_used: the once grants a connection has spent, by grant id, with the
 * cookie of the socket that spent it; and the source port of its first SYN
 * (EGRESS_ONCE_SYN). */
INNER(once_of, __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, EGRESS_ONCE_MAX);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(__u32));
      __uint(value_size, sizeof(__u64)););

/* grants_live: the grants whose flows may pass, with their end (egress.h). */
INNER(grants_of, __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, EGRESS_GRANTS_MAX);
      __uint(map_flags, BPF_F_NO_PREALLOC); __uint(key_size, sizeof(__u32));
      __uint(value_size, sizeof(__u64)););

/* Each session's refusals on a ring buffer of its own, which its agent polls. */
INNER(events_of, __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, EGRESS_EVENTS_BYTES););

INNER(counters_of, __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, CNT_MAX);
      __uint(key_size, sizeof(__u32)); __uint(value_size, sizeof(__u64)););

/* The forbidden ranges are the same for every session. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_FORBID_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm4_key);
	__type(value, __u8);
} forbid4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_FORBID_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm6_key);
	__type(value, __u8);
} forbid6 SEC(".maps");

/* The host side of each session's veth: its ifindex -> the session's key,
 * a copy of its settings and the tc programs' counts (egress.h): a segment
 * finds all of them in one lookup where the config and the counters were
 * two outer maps and two inner ones. Per CPU, so that the counts are
 * plain increments; allocated per entry (a preallocated per-CPU table is
 * its full size on every CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, EGRESS_SESSIONS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct veth_sess_val);
} veth_sess SEC(".maps");

/* The session whose cgroup a hook is linked to: its key, which the agent
 * writes into the cgroup's storage when it links the session's hooks (0,
 * none, until then). The hooks that run for a socket are those of the
 * cgroup it was made in (an accepted socket's: its listener's), whoever
 * uses it, so this is the session of the socket, found without storing
 * anything on the socket itself. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_STORAGE);
	__type(key, __u64);
	__type(value, __u64);
} sess_cg SEC(".maps");

/* The destination a DNS socket named before it was sent to the responder, so
 * recvmsg and getpeername can give it back and resolvers accept the answer. */
struct dns_orig {
	__u8 addr[16];
	__u16 port; /* network order */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct dns_orig);
} dns_origs SEC(".maps");

/* One session, as a hook found it. */
struct sess {
	__u64 key;
	struct sess_cfg *c;	  /* its settings (in tc, veth_sess's copy) */
	struct veth_sess_val *tc; /* in tc: its veth_sess value, this CPU's; NULL in the hooks */
};

/* The policy's decisions, shared with userspace; its lookups are defined below. */
#define POLICY_CTX struct sess
#define POLICY_WITH_VERDICT
#include "policy.h"

static __always_inline void *inner(void *outer, const struct sess *s)
{
	return bpf_map_lookup_elem(outer, &s->key);
}

static __always_inline bool sess_find(__u64 key, struct sess *s)
{
	__u32 zero = 0;
	void *m;

	s->key = key;
	s->c = NULL;
	s->tc = NULL;
	m = key ? bpf_map_lookup_elem(&cfg_of, &key) : NULL;
	if (m)
		s->c = bpf_map_lookup_elem(m, &zero);
	return s->c != NULL;
}

/* The session of the socket a cgroup hook runs for (sess_cg). */
static __always_inline bool sess_of_hook(struct sess *s)
{
	__u64 *k = bpf_get_local_storage(&sess_cg, 0);

	return sess_find(*k, s);
}

/* The session whose veth a tc program runs on. */
static __always_inline bool sess_of_veth(__u32 ifindex, struct sess *s)
{
	struct veth_sess_val *v = bpf_map_lookup_elem(&veth_sess, &ifindex);

	s->tc = v;
	s->c = v ? &v->cfg : NULL;
	s->key = v ? v->cfg.cgid : 0;
	return s->key != 0;
}

static __always_inline void count(const struct sess *s, __u32 idx)
{
	void *m = s->tc ? NULL : inner(&counters_of, s);
	__u64 *v = s->tc ? &s->tc->cnt[idx] : m ? bpf_map_lookup_elem(m, &idx) : NULL;

	if (v)
		*v += 1;
}

static __always_inline void map_v4(__u8 out[16], __u32 addr4)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &addr4, 4);
}

/* Word compares, not a byte loop: every branch in a loop multiplies the
 * verifier's work, and every session loads these programs afresh. */
static __always_inline bool is_v4_mapped(const __u8 a[16])
{
	return policy_is_v4_mapped(a);
}

/* Whether a packet's address (IPv4 mapped when it came in IPv4) is the
 * session's gateway, which DNS and the broker answer from. */
static __always_inline bool is_gateway(const struct sess *s, const __u8 a[16], bool v6)
{
	__u32 w[4];

	__builtin_memcpy(w, a, 16);
	if (!v6)
		return w[3] == s->c->gw_addr4;
	return w[0] == s->c->gw_addr6[0] && w[1] == s->c->gw_addr6[1] &&
	       w[2] == s->c->gw_addr6[2] && w[3] == s->c->gw_addr6[3];
}

/* One record on the ring buffer: a refusal, or a once grant spent. */
static __always_inline void event_put(const struct sess *s, const __u8 addr[16], __u16 port,
				      __u16 proto, __u8 reason, __u8 hook)
{
	struct egress_event *e;
	void *rb = inner(&events_of, s);

	e = rb ? bpf_ringbuf_reserve(rb, sizeof(*e), 0) : NULL;
	if (!e) {
		count(s, CNT_EVENTS_LOST);
		return;
	}
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = s->key;
	__builtin_memcpy(e->addr, addr, 16);
	e->port = port;
	e->proto = (__u8)proto;
	e->proto_hi = (__u8)(proto >> 8);
	e->reason = reason;
	e->hook = hook;
	__builtin_memset(e->pad, 0, sizeof(e->pad));
	bpf_ringbuf_submit(e, 0);
}

#define EVENT_INTERVAL_NS (1000000000ull / EGRESS_EVENT_RATE)

/* A token from the session's event bucket, or false when it is empty. */
static __always_inline bool event_take(const struct sess *s)
{
	__u64 now = bpf_ktime_get_boot_ns(), tat;
	struct sess_cfg *c = s->c;
	__u32 zero = 0;

	/* One bucket a session: in tc, the config map's, not the copy. */
	if (s->tc) {
		c = inner(&cfg_of, s);
		if (c)
			c = bpf_map_lookup_elem(c, &zero);
		if (!c)
			return false;
	}
	tat = c->ev_tat_ns;
	if (tat < now)
		tat = now;
	if (tat - now > (EGRESS_EVENT_BURST - 1) * EVENT_INTERVAL_NS)
		return false;
	c->ev_tat_ns = tat + EVENT_INTERVAL_NS;
	return true;
}

/* A refusal: always counted, reported while the session's bucket lasts. */
static __always_inline void emit(const struct sess *s, const __u8 addr[16], __u16 port, __u16 proto,
				 __u8 reason, __u8 hook)
{
	count(s, CNT_REFUSED);
	if (!event_take(s)) {
		count(s, CNT_EVENTS_SUPPRESSED);
		return;
	}
	event_put(s, addr, port, proto, reason, hook);
}

static __always_inline bool v4_in(void *trie, __u32 addr4)
{
	struct lpm4_key k = {.prefixlen = 32};

	__builtin_memcpy(k.addr, &addr4, 4);
	return trie && bpf_map_lookup_elem(trie, &k) != NULL;
}

static __always_inline bool v4_forbidden(const struct sess *s, __u32 addr4)
{
	return v4_in(&forbid4, addr4) && !v4_in(inner(&public4_of, s), addr4);
}

POLICY_FN bool policy_v4_listed(const struct sess *s, __u32 v4)
{
	return v4_forbidden(s, v4);
}

/* A native IPv6 address by its own range; the IPv4 addresses its forms carry
 * are judged by policy_forbidden (policy.h). */
POLICY_FN bool policy_v6_listed(const struct sess *s, const __u8 a[16])
{
	struct lpm6_key k = {.prefixlen = 128};
	void *pub;

	__builtin_memcpy(k.addr, a, 16);
	if (!bpf_map_lookup_elem(&forbid6, &k))
		return false;
	pub = inner(&public6_of, s);
	return !pub || !bpf_map_lookup_elem(pub, &k);
}

static __always_inline bool port_open(const struct sess *s, __u16 port)
{
	void *m = inner(&ports_of, s);

	return m && bpf_map_lookup_elem(m, &port) != NULL;
}

POLICY_FN __u32 policy_mode(const struct sess *s)
{
	return s->c->mode;
}

POLICY_FN bool policy_self(const struct sess *s, const __u8 a[16])
{
	struct lpm6_key k = {.prefixlen = 128};
	void *self = inner(&self_of, s);

	__builtin_memcpy(k.addr, a, 16);
	/* a session without its map refuses as if every address were the agent's */
	return !self || bpf_map_lookup_elem(self, &k);
}

POLICY_FN const struct allow_val *policy_entry(const struct sess *s, const __u8 a[16], __u16 port)
{
	struct allow_lkey k = {.prefixlen = ALLOW_PREFIXLEN, .k.port = port};
	void *allow = inner(&allow_of, s);

	__builtin_memcpy(k.k.addr, a, 16);
	return allow ? bpf_map_lookup_elem(allow, &k) : NULL;
}

POLICY_FN bool policy_port_open(const struct sess *s, __u16 port)
{
	return port_open(s, port);
}

POLICY_FN __u64 policy_now(void)
{
	return bpf_ktime_get_boot_ns();
}

POLICY_FN int policy_once_claim(const struct sess *s, __u32 grant, __u64 token)
{
	void *once = inner(&once_of, s);

	return !once || bpf_map_update_elem(once, &grant, &token, BPF_NOEXIST);
}

POLICY_FN bool policy_once_spent(const struct sess *s, __u32 grant)
{
	void *once = inner(&once_of, s);

	return once && bpf_map_lookup_elem(once, &grant);
}

/* The policy (policy.h), shared by every hook and the backstop. */
static __always_inline __u8 verdict(const struct sess *s, const __u8 addr[16], __u16 port,
				    __u32 *flags, __u32 *grant)
{
	return policy_verdict(s, addr, port, flags, grant);
}

/* The broker of the session's provider routes listens on its gateway, and
 * its listener for intercepted hosts beside it. */
static __always_inline bool to_broker(const struct sess *s, __u32 dst4, __u16 port, __u8 proto)
{
	return s->c->mode != EGRESS_MODE_NONE && proto == IPPROTO_TCP && dst4 == s->c->gw_addr4 &&
	       ((s->c->broker_port && port == s->c->broker_port) ||
		(s->c->relay_port && port == s->c->relay_port));
}

/* An entry flagged for the relay: the connect goes to the broker's
 * intercept listener instead, the address asked kept with the socket for
 * getpeername. */
static __always_inline bool relay_to_broker(const struct sess *s, __u32 flags, __u8 proto)
{
	return (flags & ENTRY_F_RELAY) && s->c->relay_port && proto == IPPROTO_TCP;
}

/* A once grant admits one connection: the first connect to mark it spent
 * wins, and every later one is refused, from another socket or from the same
 * one disconnected (connect(AF_UNSPEC)) and connected again. A TCP socket's
 * connect() asked again while it connects never reaches this hook (the
 * kernel answers EALREADY first). The agent hears of it to retire the
 * grant's entries. */
static __always_inline __u8 spend_once(const struct sess *s, struct bpf_sock_addr *ctx,
				       const __u8 addr[16], __u16 port, __u8 proto, __u32 grant,
				       __u8 hook)
{
	if (policy_once_spend(s, grant, bpf_get_socket_cookie(ctx)))
		return REASON_GRANT_SPENT;
	event_put(s, addr, port, proto, EVENT_GRANT_USED, hook);
	return REASON_NONE;
}

static __always_inline void dns_remember(struct bpf_sock_addr *ctx, const __u8 addr[16])
{
	struct dns_orig *o;
	struct bpf_sock *sk = ctx->sk;

	if (!sk)
		return;
	o = bpf_sk_storage_get(&dns_origs, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o)
		return;
	__builtin_memcpy(o->addr, addr, 16);
	o->port = ctx->user_port;
}

/* Shared body of connect4 and sendmsg4. */
static __always_inline int decide4(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u32 dst = ctx->user_ip4;
	__u16 port = bpf_ntohs(ctx->user_port);
	__u8 proto = ctx->type == SOCK_DGRAM ? IPPROTO_UDP : IPPROTO_TCP;
	__u8 addr[16];
	__u32 flags, grant;
	struct sess sess, *s = &sess;
	__u8 why;

	/* No session of its own: nothing passes. */
	if (!sess_of_hook(s))
		return 0;
	map_v4(addr, dst);
	/* Loopback is the session's own: its network namespace has no other. */
	if ((bpf_ntohl(dst) >> 24) == 127)
		return 1;
	if (s->c->mode != EGRESS_MODE_NONE && port == DNS_PORT) {
		dns_remember(ctx, addr);
		ctx->user_ip4 = s->c->gw_addr4;
		ctx->user_port = bpf_htons(s->c->dns_port);
		count(s, CNT_DNS_REDIRECT);
		return 1;
	}
	/* 0.0.0.0 and the session's own address lead back into the session:
	 * refused, as what they are. */
	if (s->c->mode != EGRESS_MODE_NONE && (dst == 0 || dst == s->c->sess_addr4)) {
		emit(s, addr, port, proto, REASON_OWN, hook);
		return 0;
	}
	if (s->c->mode != EGRESS_MODE_NONE && proto == IPPROTO_UDP) {
		emit(s, addr, port, proto, REASON_UDP, hook);
		return 0;
	}
	/* The session's broker: exactly its address and port. */
	if (to_broker(s, dst, port, proto)) {
		count(s, CNT_ALLOWED);
		return 1;
	}
	why = verdict(s, addr, port, &flags, &grant);
	if (!why && (flags & ENTRY_F_ONCE))
		why = spend_once(s, ctx, addr, port, proto, grant, hook);
	if (why) {
		emit(s, addr, port, proto, why, hook);
		return 0;
	}
	if (relay_to_broker(s, flags, proto)) {
		dns_remember(ctx, addr);
		ctx->user_ip4 = s->c->gw_addr4;
		ctx->user_port = bpf_htons(s->c->relay_port);
	}
	count(s, CNT_ALLOWED);
	return 1;
}

static __always_inline bool is_loopback6(const __u32 a[4])
{
	return a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == bpf_htonl(1);
}

static __always_inline int decide6(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u16 port = bpf_ntohs(ctx->user_port);
	__u8 proto = ctx->type == SOCK_DGRAM ? IPPROTO_UDP : IPPROTO_TCP;
	__u32 a32[4];
	__u8 addr[16];
	__u32 flags, grant;
	struct sess sess, *s = &sess;
	__u8 why;

	if (!sess_of_hook(s))
		return 0;
	a32[0] = ctx->user_ip6[0];
	a32[1] = ctx->user_ip6[1];
	a32[2] = ctx->user_ip6[2];
	a32[3] = ctx->user_ip6[3];
	__builtin_memcpy(addr, a32, 16);
	if (is_loopback6(a32))
		return 1;
	if (is_v4_mapped(addr) && (addr[12] == 127))
		return 1;
	if (s->c->mode != EGRESS_MODE_NONE && port == DNS_PORT) {
		dns_remember(ctx, addr);
		if (!is_v4_mapped(addr) && s->c->gw_addr6[0]) {
			/* A native IPv6 address: the responder's IPv6 address on the
			 * gateway, since the kernel refuses a UDP sendmsg6 rewritten
			 * to a v4-mapped one (ENOTSUPP). */
			ctx->user_ip6[0] = s->c->gw_addr6[0];
			ctx->user_ip6[1] = s->c->gw_addr6[1];
			ctx->user_ip6[2] = s->c->gw_addr6[2];
			ctx->user_ip6[3] = s->c->gw_addr6[3];
		} else {
			/* The responder's IPv4 address, v4-mapped on a dual-stack socket. */
			ctx->user_ip6[0] = 0;
			ctx->user_ip6[1] = 0;
			ctx->user_ip6[2] = bpf_htonl(0xffff);
			ctx->user_ip6[3] = s->c->gw_addr4;
		}
		ctx->user_port = bpf_htons(s->c->dns_port);
		count(s, CNT_DNS_REDIRECT);
		return 1;
	}
	if (s->c->mode != EGRESS_MODE_NONE &&
	    ((!a32[0] && !a32[1] && !a32[2] && !a32[3]) ||
	     (is_v4_mapped(addr) && (!a32[3] || a32[3] == s->c->sess_addr4)) ||
	     (s->c->sess_addr6[0] && a32[0] == s->c->sess_addr6[0] &&
	      a32[1] == s->c->sess_addr6[1] && a32[2] == s->c->sess_addr6[2] &&
	      a32[3] == s->c->sess_addr6[3]))) {
		emit(s, addr, port, proto, REASON_OWN, hook);
		return 0;
	}
	if (s->c->mode != EGRESS_MODE_NONE && proto == IPPROTO_UDP) {
		emit(s, addr, port, proto, REASON_UDP, hook);
		return 0;
	}
	if (is_v4_mapped(addr) && to_broker(s, a32[3], port, proto)) {
		count(s, CNT_ALLOWED);
		return 1;
	}
	why = verdict(s, addr, port, &flags, &grant);
	if (!why && (flags & ENTRY_F_ONCE))
		why = spend_once(s, ctx, addr, port, proto, grant, hook);
	if (why) {
		emit(s, addr, port, proto, why, hook);
		return 0;
	}
	/* The broker listens on the gateway's IPv4 address: a secret host's
	 * native IPv6 address would pass it by, so it is refused (clients
	 * fall back to IPv4). */
	if (relay_to_broker(s, flags, proto) && !is_v4_mapped(addr)) {
		emit(s, addr, port, proto, REASON_NOT_ALLOWED, hook);
		return 0;
	}
	if (relay_to_broker(s, flags, proto)) {
		dns_remember(ctx, addr);
		ctx->user_ip6[3] = s->c->gw_addr4;
		ctx->user_port = bpf_htons(s->c->relay_port);
	}
	count(s, CNT_ALLOWED);
	return 1;
}

SEC("cgroup/connect4")
int errand_conn4(struct bpf_sock_addr *ctx)
{
	return decide4(ctx, HOOK_CONNECT4);
}

SEC("cgroup/sendmsg4")
int errand_send4(struct bpf_sock_addr *ctx)
{
	return decide4(ctx, HOOK_SENDMSG4);
}

SEC("cgroup/connect6")
int errand_conn6(struct bpf_sock_addr *ctx)
{
	return decide6(ctx, HOOK_CONNECT6);
}

SEC("cgroup/sendmsg6")
int errand_send6(struct bpf_sock_addr *ctx)
{
	return decide6(ctx, HOOK_SENDMSG6);
}

/* Answers from the responder come back under the address the resolver asked. */
static __always_inline void restore4(struct bpf_sock_addr *ctx)
{
	struct sess sess, *s = &sess;
	struct dns_orig *o;
	__u32 a4;

	if (!sess_of_hook(s))
		return;
	if (ctx->user_ip4 != s->c->gw_addr4 || !ctx->sk ||
	    (ctx->user_port != bpf_htons(s->c->dns_port) &&
	     !(s->c->relay_port && ctx->user_port == bpf_htons(s->c->relay_port))))
		return;
	o = bpf_sk_storage_get(&dns_origs, ctx->sk, 0, 0);
	if (!o || !is_v4_mapped(o->addr))
		return;
	__builtin_memcpy(&a4, o->addr + 12, 4);
	ctx->user_ip4 = a4;
	ctx->user_port = o->port;
}

static __always_inline void restore6(struct bpf_sock_addr *ctx)
{
	struct sess sess, *s = &sess;
	struct dns_orig *o;
	__u32 a32[4];
	bool gw4, gw6;

	if (!sess_of_hook(s))
		return;
	gw4 = !ctx->user_ip6[0] && !ctx->user_ip6[1] && ctx->user_ip6[2] == bpf_htonl(0xffff) &&
	      ctx->user_ip6[3] == s->c->gw_addr4;
	gw6 = s->c->gw_addr6[0] && ctx->user_ip6[0] == s->c->gw_addr6[0] &&
	      ctx->user_ip6[1] == s->c->gw_addr6[1] && ctx->user_ip6[2] == s->c->gw_addr6[2] &&
	      ctx->user_ip6[3] == s->c->gw_addr6[3];

	if (!(gw4 || gw6) || !ctx->sk ||
	    (ctx->user_port != bpf_htons(s->c->dns_port) &&
	     !(gw4 && s->c->relay_port && ctx->user_port == bpf_htons(s->c->relay_port))))
		return;
	o = bpf_sk_storage_get(&dns_origs, ctx->sk, 0, 0);
	if (!o)
		return;
	__builtin_memcpy(a32, o->addr, 16);
	ctx->user_ip6[0] = a32[0];
	ctx->user_ip6[1] = a32[1];
	ctx->user_ip6[2] = a32[2];
	ctx->user_ip6[3] = a32[3];
	ctx->user_port = o->port;
}

SEC("cgroup/recvmsg4")
int errand_recv4(struct bpf_sock_addr *ctx)
{
	restore4(ctx);
	return 1;
}

SEC("cgroup/recvmsg6")
int errand_recv6(struct bpf_sock_addr *ctx)
{
	restore6(ctx);
	return 1;
}

SEC("cgroup/getpeername4")
int errand_peer4(struct bpf_sock_addr *ctx)
{
	restore4(ctx);
	return 1;
}

SEC("cgroup/getpeername6")
int errand_peer6(struct bpf_sock_addr *ctx)
{
	restore6(ctx);
	return 1;
}

/* Only TCP and UDP sockets may be made: raw and ICMP sockets would carry
 * packets that no sock_addr hook sees. */
SEC("cgroup/sock_create")
int errand_sock(struct bpf_sock *sk)
{
	struct sess sess, *s = &sess;
	__u8 zero[16] = {};

	if ((sk->type == SOCK_STREAM && sk->protocol == IPPROTO_TCP) ||
	    (sk->type == SOCK_DGRAM && sk->protocol == IPPROTO_UDP))
		return 1;
	if (sess_of_hook(s))
		emit(s, zero, 0, (__u16)sk->protocol, REASON_SOCKET, HOOK_SOCK_CREATE);
	return 0;
}

#define FLOW_IDLE_NS (EGRESS_FLOW_IDLE_S * 1000000000ull)
/* last_ns is written at most this often: a store per segment would bounce
 * the entry's cache line between CPUs for nothing. */
#define FLOW_TOUCH_NS 1000000000ull

/* A flow's clock (flow_val.last_ns): the coarse monotonic one, the time of
 * the last tick, read without the clock source. Each segment read the boot
 * clock, a fenced read of the TSC (35 to 45 ns a run under traffic); a
 * flow's idleness (hours) needs no finer. A grant's end is the boot
 * clock's (the agent's): read only for a grant's flow. */
static __always_inline __u64 flow_now(void)
{
	return bpf_ktime_get_coarse_ns();
}

/* A flow passes while it has been used within FLOW_IDLE_NS and the grant
 * that admitted it (if one did) is neither revoked nor past its end. An
 * ended flow is left in the map as it is, so both directions keep dropping
 * its segments until a new SYN of the same ports replaces it. */
static __always_inline bool flow_live(const struct sess *s, const struct flow_val *v, __u64 now)
{
	__u32 grant = v->grant;
	__u64 *end;

	if (now - v->last_ns > FLOW_IDLE_NS)
		return false;
	if (!grant)
		return true;
	end = inner(&grants_of, s);
	if (end)
		end = bpf_map_lookup_elem(end, &grant);
	return end && (!*end || bpf_ktime_get_boot_ns() < *end);
}

#define IPV6_EXT_MAX 8
#define NEXTHDR_HOP 0
#define NEXTHDR_ROUTING 43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_DEST 60

/* Does an IPv6 packet carry a routing header? Extension headers are walked
 * up to IPV6_EXT_MAX; a chain longer than that, or cut short, counts as one. */
static __always_inline bool ip6_routed(void *p, void *end)
{
	struct ipv6hdr *ip6 = p;
	struct ipv6_opt_hdr *h;
	__u8 nh;

	if ((void *)(ip6 + 1) > end)
		return true;
	nh = ip6->nexthdr;
	p = ip6 + 1;
	for (int i = 0; i < IPV6_EXT_MAX; i++) {
		h = p;
		if ((void *)(h + 1) > end)
			return true;
		switch (nh) {
		case NEXTHDR_ROUTING:
			return true;
		case NEXTHDR_HOP:
		case NEXTHDR_DEST:
			p += (h->hdrlen + 1) * 8;
			break;
		case NEXTHDR_FRAGMENT:
			p += 8;
			break;
		case IPPROTO_AH:
			p += (h->hdrlen + 2) * 4;
			break;
		default:
			return false;
		}
		nh = h->nexthdr;
	}
	return true;
}

#define NEXTHDR_ICMPV6 58
enum { TC6_REFUSE, TC6_PASS, TC6_QUIET, TC6_L4 };

static __always_inline bool ip6_is(const struct in6_addr *a, const __u32 w[4])
{
	return a->in6_u.u6_addr32[0] == w[0] && a->in6_u.u6_addr32[1] == w[1] &&
	       a->in6_u.u6_addr32[2] == w[2] && a->in6_u.u6_addr32[3] == w[3];
}

/* The transport header of an IPv6 packet: hop-by-hop, destination options
 * and AH headers walked, up to IPV6_EXT_MAX. 0 with *proto and *l4 set;
 * REASON_FRAGMENT for a fragment header anywhere; REASON_IP_OPTIONS for a
 * chain longer than the bound or cut short (ip6_routed has refused routing
 * headers before). */
static __always_inline __u8 ip6_l4(void *p, void *end, __u8 *proto, __u8 **l4)
{
	struct ipv6hdr *ip6 = p;
	struct ipv6_opt_hdr *h;
	__u8 nh;

	if ((void *)(ip6 + 1) > end)
		return REASON_IP_OPTIONS;
	nh = ip6->nexthdr;
	p = ip6 + 1;
	for (int i = 0; i < IPV6_EXT_MAX; i++) {
		h = p;
		switch (nh) {
		case NEXTHDR_HOP:
		case NEXTHDR_DEST:
			if ((void *)(h + 1) > end)
				return REASON_IP_OPTIONS;
			p += (h->hdrlen + 1) * 8;
			break;
		case IPPROTO_AH:
			if ((void *)(h + 1) > end)
				return REASON_IP_OPTIONS;
			p += (h->hdrlen + 2) * 4;
			break;
		case NEXTHDR_FRAGMENT:
			return REASON_FRAGMENT;
		case NEXTHDR_ROUTING:
			return REASON_IP_OPTIONS;
		default:
			*proto = nh;
			*l4 = p;
			return 0;
		}
		nh = h->nexthdr;
	}
	return REASON_IP_OPTIONS;
}

/* IPv6 from the session, before its transport is judged as IPv4's is: MLD
 * reports, which the kernel sends for the session's address on its own
 * (from ::, behind hop-by-hop options), are dropped quietly (no event, no
 * count); a source other
 * than the session's address is spoofed; ICMPv6 passes only as neighbour
 * solicitation and advertisement (hop limit 255: never forwarded) to the
 * gateway or its solicited-node group, which reaching the gateway takes;
 * TCP and UDP go on (TC6_L4) to the same checks as IPv4's, with *why 0;
 * anything else is refused with *why. */
static __always_inline int tc_ipv6(const struct sess *s, void *data, void *end, __u8 *proto,
				   __u8 **l4p, __u8 *why)
{
	struct ipv6hdr *ip6 = data;
	__u8 *l4 = (void *)(ip6 + 1);
	__u8 next;

	*why = REASON_IPV6;
	if ((void *)(ip6 + 1) > end)
		return TC6_REFUSE;
	next = ip6->nexthdr;
	if (next == 0 && (void *)(l4 + 8) <= end) {
		__u8 *m = l4 + (l4[1] + 1) * 8;

		if (l4[0] == NEXTHDR_ICMPV6 && (void *)(m + 1) <= end &&
		    (m[0] == 130 || m[0] == 131 || m[0] == 132 || m[0] == 143))
			return TC6_QUIET;
	}
	if (!s->c->gw_addr6[0] || s->c->mode == EGRESS_MODE_NONE)
		return TC6_REFUSE;
	if (!ip6_is(&ip6->saddr, s->c->sess_addr6)) {
		*why = REASON_SPOOF;
		return TC6_REFUSE;
	}
	*why = ip6_l4(data, end, &next, &l4);
	if (*why)
		return TC6_REFUSE;
	*proto = next;
	*l4p = l4;
	if (next == IPPROTO_UDP || next == IPPROTO_TCP)
		return TC6_L4;
	if (next == NEXTHDR_ICMPV6 && ip6->hop_limit == 255 && (void *)(l4 + 1) <= end &&
	    (l4[0] == 135 || l4[0] == 136) &&
	    (ip6_is(&ip6->daddr, s->c->gw_addr6) ||
	     (ip6->daddr.in6_u.u6_addr32[0] == bpf_htonl(0xff020000) &&
	      !ip6->daddr.in6_u.u6_addr32[1] && ip6->daddr.in6_u.u6_addr32[2] == bpf_htonl(1) &&
	      ip6->daddr.in6_u.u6_addr8[12] == 0xff &&
	      ip6->daddr.in6_u.u6_addr8[13] == ((const __u8 *)s->c->gw_addr6)[13] &&
	      ip6->daddr.in6_u.u6_addr8[14] == ((const __u8 *)s->c->gw_addr6)[14] &&
	      ip6->daddr.in6_u.u6_addr8[15] == ((const __u8 *)s->c->gw_addr6)[15])))
		return TC6_PASS;
	*why = REASON_PROTO;
	return TC6_REFUSE;
}

/* A session's TCP timestamps run on the host's clock (the agent sets
 * tcp_timestamps=2 in its namespace: with an offset hashed from each
 * connection's addresses and ports, as the kernel gives by default, a peer
 * holding the one NAT address's port in TIME_WAIT dropped SYNs of another
 * connection there as too old). Raw, that clock is the host's uptime; so
 * what leaves a session carries it moved by ts_shift, a number of this boot
 * the agent sets at load (the same in every program set of the boot), and
 * what comes back has its echo moved back. Set before load, in .rodata. */
const volatile __u32 ts_shift = 0;

#define TCP_OPTS_MAX 40
#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_TIMESTAMP 8
#define TCPOLEN_TIMESTAMP 10
#define TCPOPT_AO 29

/* Where a segment's options are walked (opt_step): the options, the bytes
 * past them zero; their length; the next option's index; the timestamp
 * option's index plus one (0: none yet); set if the segment is not to be
 * touched. */
struct opt_walk {
	__u8 opt[72];
	__u64 len;
	__u64 i;
	__u64 ts;
	__u64 keep;
};

/* The index i, masked where it reads: the compiler drops a mask it can prove
 * needless, and then reads through a copy the verifier holds no bound of. */
static __always_inline __u64 opt_at(__u64 i)
{
	asm volatile("%[i] &= 63" : [i] "+r"(i));
	return i;
}

/* One option of the walk, under bpf_loop: verified once, however many
 * options a segment has (a walk unrolled by the verifier took it past a
 * million instructions on 6.1). 1 ends the walk. */
static long opt_step(__u64 k, void *arg)
{
	struct opt_walk *w = arg;
	__u64 i = w->i, j;
	__u8 kind, olen;

	if (i >= w->len)
		return 1;
	j = opt_at(i);
	kind = w->opt[j];
	if (kind == TCPOPT_EOL)
		return 1;
	if (kind == TCPOPT_NOP) {
		w->i = i + 1;
		return 0;
	}
	olen = w->opt[j + 1];
	if (olen < 2 || i + olen > w->len || kind == TCPOPT_AO) {
		w->keep = 1;
		return 1;
	}
	if (kind == TCPOPT_TIMESTAMP && olen == TCPOLEN_TIMESTAMP && !w->ts)
		w->ts = i + 1;
	w->i = i + olen;
	return 0;
}

/* Where the timestamp option is in options laid out as Linux lays them out,
 * whole: a segment's (NOP, NOP, timestamp: 12 bytes) and a SYN's or
 * SYN-ACK's (MSS, SACK-permitted or two NOPs, timestamp, NOP, window scale:
 * 20). Every byte of them is accounted for, so no AO option hides among
 * them. The option's index plus one, its value (echo false) or echo in
 * *old; 0 for any other layout, or options past the packet's linear part
 * (walked then). Read in place: most segments need neither the copy nor
 * the walk, which cost more than the move itself. */
static __always_inline __u64 ts_linux(__u8 *o, void *end, __u64 len, __u32 echo, __u32 *old)
{
	__u32 w0, w4, w16;

	if (len == 12 && (void *)(o + 12) <= end) {
		__builtin_memcpy(&w0, o, 4);
		if (w0 != bpf_htonl(0x0101080a))
			return 0;
		__builtin_memcpy(old, echo ? o + 8 : o + 4, 4);
		return 3;
	}
	if (len != 20 || (void *)(o + 20) > end)
		return 0;
	__builtin_memcpy(&w0, o, 4);
	__builtin_memcpy(&w4, o + 4, 4);
	__builtin_memcpy(&w16, o + 16, 4);
	if ((w0 & bpf_htonl(0xffff0000)) != bpf_htonl(0x02040000) ||
	    (w4 != bpf_htonl(0x0402080a) && w4 != bpf_htonl(0x0101080a)) ||
	    (w16 & bpf_htonl(0xffffff00)) != bpf_htonl(0x01030300))
		return 0;
	__builtin_memcpy(old, echo ? o + 12 : o + 8, 4);
	return 7;
}

/* The timestamp option in any other layout, by a walk of a copy of the
 * options (len bytes): its index plus one in the upper 32 bits, its value
 * (echo 0) or echo in the lower; 0 when there is none, or the segment is
 * not to be touched. A global function, verified once on its own. */
__attribute__((noinline)) __u64 errand_ts_walk(struct __sk_buff *skb, __u32 l4_off, __u64 len,
					       __u32 echo)
{
	struct opt_walk w = {};
	__u32 old;
	__u64 j;

	/* A bound below, not !len: 6.1's verifier learns none from != 0. */
	if (len < 4 || len > TCP_OPTS_MAX || bpf_skb_load_bytes(skb, l4_off + 20, w.opt, len))
		return 0;
	w.len = len;
	bpf_loop(TCP_OPTS_MAX, opt_step, &w, 0);
	if (w.keep || !w.ts)
		return 0;
	/* The walk saw ts - 1 + 10 <= len <= 40: at most 30, masked to 31. */
	j = opt_at(w.ts - 1) & 31;
	__builtin_memcpy(&old, &w.opt[j + (echo ? 6 : 2)], 4);
	return (j + 1) << 32 | old;
}

/* Moves the timestamp option of the TCP segment at l4_off, whose header is
 * doff 32-bit words: its value up by ts_shift (echo false: what the session
 * sends) or its echo down by it (echo true: what it receives; an echo of 0
 * says none and stays). A segment without one, with options cut short or
 * malformed, or signed with TCP-AO (RFC 5925: its MAC covers the options,
 * so a moved timestamp would fail the peer's check) is left as it is; a
 * connection's segments all carry AO or none do, so its clock stays one.
 * A global function, verified once on its own. */
__attribute__((noinline)) int errand_ts_move(struct __sk_buff *skb, __u32 l4_off, __u32 doff,
					     __u32 echo)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 *o;
	__u64 len, ts, j;
	__u32 old, new;

	/* doff is 4 bits of the header; masked, the verifier knows len's range. */
	len = (__u64)(doff & 15) * 4;
	if (!ts_shift || len <= 20 || l4_off > 0xffff)
		return 0;
	len -= 20;
	/* l4_off's bound, masked where it is added: the verifier tracks it on
	 * the pointer only so, and the pointer's reach only under 64 KiB. A
	 * header that far in is walked. */
	j = l4_off;
	asm volatile("%[j] &= 0x3fff" : [j] "+r"(j));
	o = data + j + 20;
	ts = j == l4_off ? ts_linux(o, end, len, echo, &old) : 0;
	if (!ts) {
		ts = errand_ts_walk(skb, l4_off, len, echo);
		old = (__u32)ts;
		ts >>= 32;
	}
	if (!ts)
		return 0;
	j = ts - 1 + (echo ? 6 : 2);
	if (echo && !old)
		return 0;
	new = bpf_htonl(echo ? bpf_ntohl(old) - ts_shift : bpf_ntohl(old) + ts_shift);
	if (bpf_skb_store_bytes(skb, l4_off + 20 + j, &new, 4, 0))
		return 0;
	bpf_l4_csum_replace(skb, l4_off + 16, old, new, sizeof(new));
	return 1;
}

/* The connection that spent a once grant is the one whose SYN came first
 * once it was spent: its retransmissions pass, a SYN from another port (a
 * raw socket outside the cgroup, for which no connect spent anything) does
 * not. A full map claims nothing: refused. */
static __always_inline __u8 once_syn_claim(const struct sess *s, __u32 grant, __u16 sport)
{
	void *once = inner(&once_of, s);
	__u32 key = grant | EGRESS_ONCE_SYN;
	__u64 port = sport, *held;

	if (!once)
		return REASON_GRANT_SPENT;
	if (!bpf_map_update_elem(once, &key, &port, BPF_NOEXIST))
		return REASON_NONE;
	held = bpf_map_lookup_elem(once, &key);
	return held && *held == port ? REASON_NONE : REASON_GRANT_SPENT;
}

/* The backstop, on ingress of the host-side veth: what the session sends.
 * No XDP stage: on a veth even an XDP program that only passes frames cuts
 * bulk TCP to a quarter, since GSO segments are split for it, while this tc
 * program costs nothing measurable (BENCHMARKS.md, bench/egress.sh). */
SEC("tc")
int errand_tc_in(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u8 zero[16] = {};
	struct flow_key fk = {};
	struct flow_val fv = {}, *cur;
	struct sess sess, *s = &sess;
	__u32 ifindex = skb->ifindex;
	struct iphdr *ip;
	void *flows;
	__u16 sport, dport;
	__u8 addr[16];
	__u32 flags, grant, tcp_off = 0, tcp_doff = 0;
	bool syn = false, to_dns, to_brk;
	__u8 why = 0, proto = 0, *l4 = NULL;

	/* A veth of no session: nothing passes. */
	if (!sess_of_veth(ifindex, s))
		return TC_ACT_SHOT;
	if ((void *)(eth + 1) > end)
		goto drop_proto;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		int v6;

		/* A routing header first, as IPv4's options: nothing carrying
		 * one passes, the responder's port included. */
		if (ip6_routed(eth + 1, end)) {
			emit(s, zero, 0, 0, REASON_IP_OPTIONS, HOOK_TC);
			goto drop;
		}
		v6 = tc_ipv6(s, eth + 1, end, &proto, &l4, &why);
		if (v6 == TC6_PASS)
			goto pass;
		/* The kernel's own MLD reports: not the command's, not counted
		 * (an idle session's show would read drops it never made). */
		if (v6 == TC6_QUIET)
			return TC_ACT_SHOT;
		if ((void *)(ip6 + 1) > end)
			goto drop_proto;
		__builtin_memcpy(addr, &ip6->daddr, 16);
		if (v6 == TC6_REFUSE) {
			emit(s, why == REASON_IPV6 ? zero : addr, 0,
			     why == REASON_PROTO ? proto : 0, why, HOOK_TC);
			goto drop;
		}
		/* TCP or UDP: the ports at offsets 0 and 2 in both. The bound
		 * is checked where it is read: 6.1's verifier does not carry a
		 * check made under one test of proto to a read under another. */
		if ((void *)(l4 + 8) > end)
			goto drop_proto;
		sport = (__u16)(l4[0] << 8 | l4[1]);
		dport = (__u16)(l4[2] << 8 | l4[3]);
		if (proto == IPPROTO_TCP) {
			struct tcphdr *th = (void *)l4;

			if ((void *)(th + 1) > end)
				goto drop_proto;
			syn = th->syn && !th->ack;
			tcp_off = (__u32)((void *)th - data);
			tcp_doff = th->doff;
		}
		to_dns = ip6_is(&ip6->daddr, s->c->gw_addr6) && dport == s->c->dns_port;
		to_brk = false; /* the broker listens on the gateway's IPv4 address */
		/* Without an IPv6 route out (no NAT66), IPv6 reaches the
		 * responder alone, whatever root in the session routes. */
		if (!to_dns && !s->c->route6) {
			emit(s, zero, 0, 0, REASON_IPV6, HOOK_TC);
			goto drop;
		}
		goto transport;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		goto drop_proto;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl < 5)
		goto drop_proto;
	map_v4(addr, ip->daddr);
	/* Options (source routes above all) make a router forward a packet
	 * past the address it names, the gateway's included: no packet of a
	 * session carries any, and this comes before anything passes. */
	if (ip->ihl != 5) {
		emit(s, addr, 0, ip->protocol, REASON_IP_OPTIONS, HOOK_TC);
		goto drop;
	}
	if (ip->saddr != s->c->sess_addr4) {
		emit(s, addr, 0, ip->protocol, REASON_SPOOF, HOOK_TC);
		goto drop;
	}
	if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
		emit(s, addr, 0, ip->protocol, REASON_FRAGMENT, HOOK_TC);
		goto drop;
	}
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *th = (void *)ip + ip->ihl * 4;

		if ((void *)(th + 1) > end)
			goto drop_proto;
		sport = bpf_ntohs(th->source);
		dport = bpf_ntohs(th->dest);
		syn = th->syn && !th->ack;
		tcp_off = (__u32)((void *)th - data);
		tcp_doff = th->doff;
	} else if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *uh = (void *)ip + ip->ihl * 4;

		if ((void *)(uh + 1) > end)
			goto drop_proto;
		sport = bpf_ntohs(uh->source);
		dport = bpf_ntohs(uh->dest);
	} else {
		emit(s, addr, 0, ip->protocol, REASON_PROTO, HOOK_TC);
		goto drop;
	}
	proto = ip->protocol;
	to_dns = ip->daddr == s->c->gw_addr4 && dport == s->c->dns_port;
	to_brk = to_broker(s, ip->daddr, dport, ip->protocol);

transport:
	/* The responder, over UDP or TCP; the broker, over TCP. */
	if (to_dns && s->c->mode != EGRESS_MODE_NONE)
		goto pass;
	if (to_brk)
		goto pass;
	if (proto == IPPROTO_UDP) {
		emit(s, addr, dport, IPPROTO_UDP, REASON_UDP, HOOK_TC);
		goto drop;
	}

	__builtin_memcpy(fk.daddr, addr, 16);
	fk.sport = sport;
	fk.dport = dport;
	fk.proto = IPPROTO_TCP;
	if (syn) {
		/* A SYN is always a new connection: judged afresh, never by an old flow. */
		why = verdict(s, addr, dport, &flags, &grant);
		/* A secret host's connections reach it only through the broker
		 * (the hooks send them to its relay port): straight to the host, a
		 * process outside the cgroup would pass its gating by. */
		if (!why && relay_to_broker(s, flags, IPPROTO_TCP))
			why = REASON_NOT_ALLOWED;
		/* A once grant's SYN passes only after its connect spent it, and
		 * then only that connection's. */
		if (!why)
			why = policy_once_syn(s, flags, grant);
		if (!why && (flags & ENTRY_F_ONCE))
			why = once_syn_claim(s, grant, sport);
		if (why) {
			emit(s, addr, dport, IPPROTO_TCP, why, HOOK_TC);
			goto drop;
		}
		fv.last_ns = flow_now();
		fv.grant = grant;
		flows = inner(&flows_of, s);
		if (!flows)
			goto drop;
		bpf_map_update_elem(flows, &fk, &fv, BPF_ANY);
		goto pass;
	}
	flows = inner(&flows_of, s);
	cur = flows ? bpf_map_lookup_elem(flows, &fk) : NULL;
	if (cur) {
		__u64 now = flow_now();

		if (!flow_live(s, cur, now)) {
			count(s, CNT_FLOW_ENDED);
			count(s, CNT_TC_DROP);
			return TC_ACT_SHOT;
		}
		if (now - cur->last_ns > FLOW_TOUCH_NS)
			cur->last_ns = now;
		goto pass;
	}
	/* No flow: its SYN was never let out, or the session's own newer flows
	 * pushed it out of the table (an LRU of EGRESS_FLOWS_MAX). It is judged
	 * as its SYN was, by the policy as it stands now, and passes (as a flow
	 * again) only if that would admit a new connection to it; a once
	 * grant's connection is not admitted twice. Dropped without an event:
	 * the retransmissions of a refused flow would flood the ring. */
	why = verdict(s, addr, dport, &flags, &grant);
	if (!why && !(flags & ENTRY_F_ONCE) && !relay_to_broker(s, flags, IPPROTO_TCP) && flows) {
		fv.last_ns = flow_now();
		fv.grant = grant;
		bpf_map_update_elem(flows, &fk, &fv, BPF_ANY);
		goto pass;
	}
	count(s, CNT_TC_DROP);
	return TC_ACT_SHOT;
pass:
	if (tcp_off)
		errand_ts_move(skb, tcp_off, tcp_doff, 0);
	count(s, CNT_TC_PASS);
	return TC_ACT_OK;
drop_proto:
	emit(s, zero, 0, 0, REASON_PROTO, HOOK_TC);
drop:
	count(s, CNT_TC_DROP);
	return TC_ACT_SHOT;
}

/* What reaches the session, on egress of the host-side veth: segments of a
 * flow that ended are dropped, so a revoked grant's connection passes no
 * more bytes toward the session either (the sending side's ACKs stop at
 * errand_tc_in, but a peer would otherwise keep sending into its window);
 * a segment of a flow the table does not hold is judged by its source as
 * errand_tc_in judges one by its destination; IPv6 fragments, routing
 * headers and chains past the walk are dropped. Everything else passes:
 * what the session may receive is the answer to what errand_tc_in let out. */
SEC("tc")
int errand_tc_out(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct flow_key fk = {};
	struct flow_val *cur = NULL;
	struct sess sess, *s = &sess;
	__u32 ifindex = skb->ifindex, flags, grant;
	struct tcphdr *th;
	struct iphdr *ip;
	void *flows;

	if ((void *)(eth + 1) > end ||
	    (eth->h_proto != bpf_htons(ETH_P_IP) && eth->h_proto != bpf_htons(ETH_P_IPV6)))
		return TC_ACT_OK;
	if (!sess_of_veth(ifindex, s))
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		__u8 proto = 0, *l4 = NULL;

		/* The chain is walked as on the way in. A fragment, a routing
		 * header or a chain too long for the walk does not reach the
		 * session (the pieces of an ended flow's segment would pass
		 * unjudged and be put together inside), as none leaves it. */
		if (ip6_l4(ip6, end, &proto, &l4))
			goto drop;
		if (proto != IPPROTO_TCP)
			return TC_ACT_OK;
		th = (void *)l4;
		if ((void *)(th + 1) > end || (void *)(ip6 + 1) > end)
			return TC_ACT_OK;
		__builtin_memcpy(fk.daddr, &ip6->saddr, 16);
	} else {
		ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_TCP || ip->ihl < 5 ||
		    (ip->frag_off & bpf_htons(IP_OFFSET)))
			return TC_ACT_OK;
		th = (void *)ip + ip->ihl * 4;
		if ((void *)(th + 1) > end)
			return TC_ACT_OK;
		map_v4(fk.daddr, ip->saddr);
	}
	fk.sport = bpf_ntohs(th->dest);
	fk.dport = bpf_ntohs(th->source);
	fk.proto = IPPROTO_TCP;
	flows = inner(&flows_of, s);
	if (flows)
		cur = bpf_map_lookup_elem(flows, &fk);
	if (cur && !flow_live(s, cur, flow_now())) {
		count(s, CNT_FLOW_ENDED);
		goto drop;
	}
	/* No flow (the table forgot it: an LRU the session's own connections
	 * push through): judged as errand_tc_in judges the session's side of
	 * it, so an ended flow pushed out of the table passes no more toward
	 * the session either. The gateway's (DNS, the broker) are errand's. */
	if (!cur && !is_gateway(s, fk.daddr, eth->h_proto == bpf_htons(ETH_P_IPV6)) &&
	    (verdict(s, fk.daddr, fk.dport, &flags, &grant) || (flags & ENTRY_F_ONCE) ||
	     relay_to_broker(s, flags, IPPROTO_TCP)))
		goto drop;
	errand_ts_move(skb, (__u32)((void *)th - data), th->doff, 1);
	return TC_ACT_OK;
drop:
	count(s, CNT_TC_DROP);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
