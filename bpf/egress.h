/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Types shared by the egress BPF programs and errand's userspace: map keys and
 * values, the refusal event record, reason codes and flag bits. Only fixed-size
 * integer types, padding written out, every size asserted. */
#ifndef ERRAND_BPF_EGRESS_H
#define ERRAND_BPF_EGRESS_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* Pinned map names below /sys/fs/bpf/errand/<session>/ (15 characters at most):
 * the session's own inner maps. The programs and the outer maps they are
 * found through are pinned once under /sys/fs/bpf/errand/prog/<object hash>/. */
#define EGRESS_MAP_CONFIG "config"
#define EGRESS_MAP_ALLOW "allow"
#define EGRESS_MAP_FLOWS "flows"
#define EGRESS_MAP_FORBID4 "forbid4"
#define EGRESS_MAP_FORBID6 "forbid6"
#define EGRESS_MAP_PUBLIC4 "public4"
#define EGRESS_MAP_PUBLIC6 "public6"
#define EGRESS_MAP_SELF "self_addrs"
#define EGRESS_MAP_EVENTS "events"
#define EGRESS_MAP_COUNTERS "counters"
#define EGRESS_MAP_PORTS "open_ports"
#define EGRESS_MAP_GRANTS "grants_live"

/* Entries of one session's allow map, an LPM trie of full-length keys:
 * memory for the entries it holds (about 80 bytes each), none for a bucket
 * array (a hash's took 64 KiB at 4096, whether used or not). The agent
 * counts what it writes and stops at this; the trie holds one more, so
 * that 6.1, whose full trie refuses even an update in place, can still
 * refresh an entry of a full map. */
#define EGRESS_ALLOW_MAX 4096
/* The connections one session's table holds at once: an LRU, preallocated
 * (14 KiB at 128; 104 KiB at 1024, 0.85 MiB at 8192). An LRU, because
 * nothing else reliably ends a flow: a socket's release comes before its
 * last segments (FIN, TIME_WAIT's ACKs) and after a reset no longer names
 * its port, so a table that only deletes would fill with dead flows; an
 * LRU forgets the oldest instead. Past it the least recently used flow is
 * forgotten, and its next segment is judged as a new connection would be
 * (errand_tc_in): it passes while the policy admits its destination, so
 * only a flow whose admission has lapsed since (a DNS answer expired, a
 * once grant) is cut, and only the session that holds more connections
 * feels it. */
#define EGRESS_FLOWS_MAX 128
/* A flow no segment has used for this long is gone: the next one is dropped
 * as a flow's without a SYN. Longer than TCP's default keepalive time (2 h),
 * so a connection kept alive by default keepalives never ages out; UDP never
 * makes flows (only DNS passes, to the responder). */
#define EGRESS_FLOW_IDLE_S (3 * 3600)
#define EGRESS_FORBID_MAX 256
#define EGRESS_SELF_MAX 256
#define EGRESS_PORTS_MAX 64
/* A session's grants at once (the agent's GRANT_MAX, which it enforces):
 * grants_live holds the set's grants, once_used the spent once grants of
 * the set; the agent deletes a grant's entries from both when it drops it. */
#define EGRESS_GRANTS_MAX 64
/* once_used's key for a spent once grant's first SYN (the grant's id with
 * this bit), its value that SYN's source port: only that connection's SYNs
 * pass the backstop after it, a retransmission, never another's. The map
 * holds both keys of every grant. */
#define EGRESS_ONCE_SYN (1u << 31)
#define EGRESS_ONCE_MAX (2 * EGRESS_GRANTS_MAX)
/* A session's own ring buffer: a full bucket of refusals (EGRESS_EVENT_BURST
 * records of 48 bytes with their header) fits with room to spare; the agent
 * drains it every turn of its loop. */
#define EGRESS_EVENTS_BYTES (16 * 1024)
/* Sessions one program set serves at once (entries of each outer map). */
#define EGRESS_SESSIONS_MAX 4096

/* Refusal events are rate-limited in the kernel, per session: a bucket of
 * EGRESS_EVENT_BURST events refilled at EGRESS_EVENT_RATE a second. A
 * session refusing in a tight loop (millions a second) costs the agent at
 * most that much; what the bucket holds back is counted
 * (CNT_EVENTS_SUPPRESSED), and every refusal is still refused. The numbers
 * are far above what a session that is not attacking makes (a handful of
 * refusals a second), far below what one agent serving many sessions can
 * print, store and stream. */
#define EGRESS_EVENT_RATE 100
#define EGRESS_EVENT_BURST 200

/* Session modes (sess_cfg.mode). */
enum egress_mode {
	EGRESS_MODE_NONE = 0,	    /* no network: every connect and send refused */
	EGRESS_MODE_RESTRICTED = 1, /* only allow-map entries, DNS to the responder */
	EGRESS_MODE_OPEN = 2,	    /* any public address on an allowed port */
};

/* Why something was refused. Stable numbers: they appear in logs and JSON. */
enum egress_reason {
	REASON_NONE = 0,
	REASON_NO_NETWORK = 1,	 /* session has --egress none */
	REASON_NOT_ALLOWED = 2,	 /* no allow-map entry for (address, port) */
	REASON_EXPIRED = 3,	 /* entry present but its expiry has passed */
	REASON_FORBIDDEN = 4,	 /* address in a forbidden range */
	REASON_SELF = 5,	 /* one of the agent namespace's own addresses */
	REASON_UDP = 6,		 /* UDP to anything but DNS */
	REASON_PORT = 7,	 /* open mode: port not in egressPorts */
	REASON_SPOOF = 8,	 /* packet source is not the session's address */
	REASON_PROTO = 9,	 /* neither TCP nor UDP (ICMP, raw IP, other) */
	REASON_FRAGMENT = 10,	 /* IP fragment */
	REASON_NO_FLOW = 11,	 /* TCP segment of a flow no hook admitted */
	REASON_SOCKET = 12,	 /* socket type refused at creation (raw, ICMP) */
	REASON_IPV6 = 13,	 /* IPv6 packet on a v4-only session link */
	REASON_DOT = 14,	 /* DNS over TLS (port 853) */
	REASON_GRANT_SPENT = 15, /* a once grant another connection used */
	REASON_OWN = 16,	 /* the session's own address, or 0.0.0.0 / :: */
	REASON_IP_OPTIONS = 17,	 /* IPv4 options or an IPv6 routing header */
	REASON_MAX,
	/* Not a refusal: a connection used a once grant (the agent retires it). */
	EVENT_GRANT_USED = 64,
};

/* A session's settings, the one entry of its config map, written before any
 * hook of it is attached. ev_tat_ns is the programs' own: the session's
 * refusal-event bucket as the time it is full again (GCRA). Addresses in
 * network order. */
struct sess_cfg {
	__u64 cgid;	  /* the session's cgroup: its key in every outer map */
	__u64 set_hash;	  /* the program set that serves it (prog/<hash>) */
	__u64 ev_tat_ns;  /* written by the programs */
	__u32 mode;	  /* enum egress_mode */
	__u32 sess_addr4; /* the session side of the veth */
	__u32 gw_addr4;	  /* the gateway, where the responder listens */
	__u32 ifindex;	  /* host side of the veth; 0: no network */
	__u16 dns_port;
	__u16 broker_port; /* the session's broker on its gateway; 0: none */
	__u16 relay_port;  /* its listener for intercepted hosts (ENTRY_F_RELAY); 0: none */
	__u16 route6;	   /* 1: an IPv6 default route via gw_addr6 and NAT66 */
	/* The pair's IPv6 addresses (sandbox.addressPool6), which carry the
	 * session's DNS to a native IPv6 address (sendmsg6 cannot send to a
	 * v4-mapped one) and, with route6, its IPv6; all zero: none. */
	__u32 gw_addr6[4];
	__u32 sess_addr6[4];
};
_Static_assert(sizeof(struct sess_cfg) == 80, "sess_cfg size");

/* Where a refusal happened. */
enum egress_hook {
	HOOK_CONNECT4 = 1,
	HOOK_CONNECT6 = 2,
	HOOK_SENDMSG4 = 3,
	HOOK_SENDMSG6 = 4,
	HOOK_TC = 5,
	HOOK_SOCK_CREATE = 6,
};

#define ENTRY_F_PINNED (1u << 0) /* the operator vouched: forbidden ranges do not apply */
#define ENTRY_F_RELAY (1u << 1)	 /* redirect to the broker */
#define ENTRY_F_ONCE (1u << 2)	 /* from a once grant: the first connection spends it */

/* allow map: an (address, port) the session may reach. IPv4 is stored
 * v4-mapped (::ffff:a.b.c.d), so one key form serves both families. */
struct allow_key {
	__u8 addr[16];
	__u16 port; /* host byte order */
	__u16 pad;
};
_Static_assert(sizeof(struct allow_key) == 20, "allow_key size");

/* The allow map's key: an LPM trie's, every entry and lookup full-length
 * (ALLOW_PREFIXLEN), so a lookup finds only its exact key. A session
 * pinned before the trie has a hash keyed by struct allow_key alone. */
struct allow_lkey {
	__u32 prefixlen;
	struct allow_key k;
};
_Static_assert(sizeof(struct allow_lkey) == 24, "allow_lkey size");
#define ALLOW_PREFIXLEN (8 * sizeof(struct allow_key))

struct allow_val {
	__u64 expires_ns; /* CLOCK_BOOTTIME; 0 = never (pins) */
	__u32 flags;	  /* ENTRY_F_* */
	__u32 grant;	  /* the grant that opened it (errandctl grant); 0: the policy */
};
_Static_assert(sizeof(struct allow_val) == 16, "allow_val size");

/* flows map: a TCP connection the backstop saw admitted, so it outlives its
 * allow entry (a DNS answer's expiry never cuts it), but not the grant that
 * admitted it, nor EGRESS_FLOW_IDLE_S of silence. Addresses v4-mapped like
 * allow_key. */
struct flow_key {
	__u8 daddr[16];
	__u16 sport; /* host byte order */
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};
_Static_assert(sizeof(struct flow_key) == 24, "flow_key size");

struct flow_val {
	__u64 last_ns; /* CLOCK_MONOTONIC_COARSE of its last segment from the session */
	__u32 grant;   /* the grant whose entry admitted it (errandctl grant); 0: the policy */
	__u32 pad;
};
_Static_assert(sizeof(struct flow_val) == 16, "flow_val size");

/* grants_live map: grant id -> CLOCK_BOOTTIME when it ends (0: never). The
 * agent adds a grant before any entry of it can exist and deletes it on
 * revoke; a flow of a grant that is absent or past its end passes no more
 * segments, in either direction. */

/* LPM keys for the forbidden and treat-as-public ranges. */
struct lpm4_key {
	__u32 prefixlen;
	__u8 addr[4];
};
_Static_assert(sizeof(struct lpm4_key) == 8, "lpm4_key size");

struct lpm6_key {
	__u32 prefixlen;
	__u8 addr[16];
};
_Static_assert(sizeof(struct lpm6_key) == 20, "lpm6_key size");

/* self_addrs map: the agent namespace's own addresses, v4-mapped; an LPM
 * trie keyed by struct lpm6_key of prefixlen 128 (a session pinned before:
 * a hash keyed by struct self_key). */
struct self_key {
	__u8 addr[16];
};
_Static_assert(sizeof(struct self_key) == 16, "self_key size");

/* One refusal, as the ring buffer carries it. */
struct egress_event {
	__u64 ts_ns;	 /* CLOCK_BOOTTIME */
	__u64 cgroup_id; /* the session's cgroup */
	__u8 addr[16];	 /* destination, v4-mapped for IPv4 */
	__u16 port;	 /* host byte order */
	__u8 proto;	 /* IPPROTO_* */
	__u8 reason;	 /* enum egress_reason */
	__u8 hook;	 /* enum egress_hook */
	__u8 proto_hi;	 /* IPPROTO_* above 255 (MPTCP is 262): its high byte */
	__u8 pad[2];
};
_Static_assert(sizeof(struct egress_event) == 40, "egress_event size");

/* counters map (per-CPU array) indices. */
enum egress_counter {
	CNT_ALLOWED = 0,
	CNT_REFUSED = 1,
	CNT_DNS_REDIRECT = 2,
	CNT_TC_PASS = 3,
	CNT_TC_DROP = 4,
	CNT_EVENTS_LOST = 5,
	CNT_EVENTS_SUPPRESSED = 6, /* refusals past the event bucket: counted, not sent */
	CNT_FLOW_ENDED = 7, /* segments of a flow its grant's end or idleness ended, dropped */
	CNT_MAX = 8
};

/* veth_sess's value, one per CPU (a per-CPU hash keyed by the host side's
 * ifindex): all the tc programs need of a session in the one lookup that
 * finds it. cfg is a copy of the session's config (cfg.cgid, its key),
 * written with it, the same on every CPU; its ev_tat_ns is not used (the
 * event bucket is the config map's). cnt are the tc programs' counts, this
 * CPU's: a session's counters are its counters map's plus these. */
struct veth_sess_val {
	struct sess_cfg cfg;
	__u64 cnt[CNT_MAX];
};
_Static_assert(sizeof(struct veth_sess_val) == 144, "veth_sess_val size");

#define DNS_PORT 53
#define DOT_PORT 853

#endif
