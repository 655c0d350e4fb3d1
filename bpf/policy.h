/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The egress policy's decisions, written once and compiled twice: into the BPF
 * programs (bpf/egress.bpf.c) and into userspace (lib/addr.c, which the DNS
 * responder and the loader use), so the kernel and the agent judge an address
 * by the same code. Which v6 forms carry an IPv4 address and where, how an
 * address is found forbidden, the verdict on a target and the spending of a
 * once grant live here; only the lookups differ, and each includer defines
 * them over its own storage (the session's maps in BPF, lib/addr.c's range
 * table in userspace).
 *
 * Before including: #define POLICY_CTX as the includer's context type (a
 * pointer to it is handed to every lookup), and define POLICY_WITH_VERDICT to
 * have the verdict and the once grant too. Then define, after the include:
 *   bool policy_v4_listed(const POLICY_CTX *c, __u32 v4)
 *	v4 (network order) is in a forbidden range and in no treat-as-public one
 *   bool policy_v6_listed(const POLICY_CTX *c, const __u8 a[16])
 *	the same for a native IPv6 address, by its own ranges alone
 * and with POLICY_WITH_VERDICT:
 *   __u32 policy_mode(const POLICY_CTX *c)		enum egress_mode
 *   bool policy_self(const POLICY_CTX *c, const __u8 a[16])	an agent's own address
 *   const struct allow_val *policy_entry(const POLICY_CTX *c, const __u8 a[16], __u16 port)
 *   bool policy_port_open(const POLICY_CTX *c, __u16 port)	open mode's ports
 *   __u64 policy_now(void)					CLOCK_BOOTTIME
 *   int policy_once_claim(const POLICY_CTX *c, __u32 grant, __u64 token)
 *	marks the grant spent by token; 0 when this call did, else nonzero
 *   bool policy_once_spent(const POLICY_CTX *c, __u32 grant) */
#ifndef ERRAND_BPF_POLICY_H
#define ERRAND_BPF_POLICY_H

#ifndef POLICY_CTX
#error "define POLICY_CTX (the lookups' context type) before including policy.h"
#endif

#ifdef __bpf__
#define POLICY_FN static __always_inline
#define policy_htonl(x) bpf_htonl(x)
#else
#include <arpa/inet.h>
#include <stdbool.h>
#include <linux/types.h>
#define POLICY_FN static inline
#define policy_htonl(x) htonl(x)
#endif

#include "egress.h"

POLICY_FN bool policy_v4_listed(const POLICY_CTX *c, __u32 v4);
POLICY_FN bool policy_v6_listed(const POLICY_CTX *c, const __u8 a[16]);

/* Word compares, not a byte loop: every branch in a loop multiplies the
 * verifier's work. */
POLICY_FN bool policy_is_v4_mapped(const __u8 a[16])
{
	__u32 w0, w1, w2;

	__builtin_memcpy(&w0, a, 4);
	__builtin_memcpy(&w1, a + 4, 4);
	__builtin_memcpy(&w2, a + 8, 4);
	return w0 == 0 && w1 == 0 && w2 == policy_htonl(0xffff);
}

/* The IPv4 addresses a native IPv6 address carries (network order), at most
 * two: one of NAT64 (64:ff9b::/32, the last 32 bits; 64:ff9b:1::/48, bits 48
 * to 88 but the u octet), 6to4 (2002:AABB:CCDD::/48),
 * Teredo (2001::/32, the client address inverted in the last 32 bits),
 * IPv4-compatible (::a.b.c.d) and SIIT (::ffff:0:a.b.c.d); and ISATAP under any
 * /64 (interface id 0000:5efe or 0200:5efe and their group-bit twins, then the
 * address). Returns how many were written to out. ::ffff:a.b.c.d is no carrier
 * but IPv4 itself (policy_is_v4_mapped). */
POLICY_FN int policy_v4_carried(const __u8 a[16], __u32 out[2])
{
	__u32 w0, w1, w2, v4;
	int n = 0;

	__builtin_memcpy(&w0, a, 4);
	__builtin_memcpy(&w1, a + 4, 4);
	__builtin_memcpy(&w2, a + 8, 4);
	__builtin_memcpy(&v4, a + 12, 4);
	if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 &&
	    a[5] == 1) {
		/* the local-use 64:ff9b:1::/48: RFC 6052's /48 layout, the
		 * address around the u octet */
		__u8 b[4] = {a[6], a[7], a[9], a[10]};

		__builtin_memcpy(&out[n++], b, 4);
	} else if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b) {
		out[n++] = v4;
	} else if (a[0] == 0x20 && a[1] == 0x02) {
		__builtin_memcpy(&out[n++], a + 2, 4);
	} else if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		out[n++] = ~v4;
	} else if (w0 == 0 && w1 == 0 && (w2 == 0 || w2 == policy_htonl(0xffff0000))) {
		out[n++] = v4;
	}
	if ((a[8] & 0xfc) == 0 && a[9] == 0 && a[10] == 0x5e && a[11] == 0xfe)
		out[n++] = v4;
	return n;
}

/* Is a (16 bytes, IPv4 v4-mapped) refused as forbidden? IPv4 by its own
 * ranges; IPv6 by its own, and by every IPv4 address it carries, so a
 * treat-as-public v6 range never opens the private IPv4 address inside it. */
POLICY_FN bool policy_forbidden(const POLICY_CTX *c, const __u8 a[16])
{
	__u32 v4[2];
	int n;

	if (policy_is_v4_mapped(a)) {
		__builtin_memcpy(&v4[0], a + 12, 4);
		return policy_v4_listed(c, v4[0]);
	}
	if (policy_v6_listed(c, a))
		return true;
	n = policy_v4_carried(a, v4);
	if (n > 0 && policy_v4_listed(c, v4[0]))
		return true;
	return n > 1 && policy_v4_listed(c, v4[1]);
}

#ifdef POLICY_WITH_VERDICT
POLICY_FN __u32 policy_mode(const POLICY_CTX *c);
POLICY_FN bool policy_self(const POLICY_CTX *c, const __u8 a[16]);
POLICY_FN const struct allow_val *policy_entry(const POLICY_CTX *c, const __u8 a[16], __u16 port);
POLICY_FN bool policy_port_open(const POLICY_CTX *c, __u16 port);
POLICY_FN __u64 policy_now(void);
POLICY_FN int policy_once_claim(const POLICY_CTX *c, __u32 grant, __u64 token);
POLICY_FN bool policy_once_spent(const POLICY_CTX *c, __u32 grant);

/* The policy on one target, shared by every hook and the backstop: 0 admits
 * (with the entry's flags and grant), anything else is the reason for
 * refusing. addr is v4-mapped for IPv4; port in host order. An operator's pin
 * holds even in a forbidden range; any other entry does not, and expires. */
POLICY_FN __u8 policy_verdict(const POLICY_CTX *c, const __u8 addr[16], __u16 port, __u32 *flags,
			      __u32 *grant)
{
	const struct allow_val *v;

	*flags = 0;
	*grant = 0;
	if (policy_mode(c) == EGRESS_MODE_NONE)
		return REASON_NO_NETWORK;
	if (port == DOT_PORT)
		return REASON_DOT;
	if (policy_self(c, addr))
		return REASON_SELF;
	v = policy_entry(c, addr, port);
	if (v) {
		if (v->flags & ENTRY_F_PINNED) {
			*flags = v->flags;
			return REASON_NONE;
		}
		if (policy_forbidden(c, addr))
			return REASON_FORBIDDEN;
		if (v->expires_ns && v->expires_ns < policy_now())
			return REASON_EXPIRED;
		*flags = v->flags;
		*grant = v->grant;
		return REASON_NONE;
	}
	if (policy_forbidden(c, addr))
		return REASON_FORBIDDEN;
	if (policy_mode(c) == EGRESS_MODE_OPEN)
		return policy_port_open(c, port) ? REASON_NONE : REASON_PORT;
	return REASON_NOT_ALLOWED;
}

/* A once grant admits one connection: the first connect to claim it (token:
 * its socket) wins; every later one is refused, from another socket or from
 * the same one connected again. 0 admits, else REASON_GRANT_SPENT. */
POLICY_FN __u8 policy_once_spend(const POLICY_CTX *c, __u32 grant, __u64 token)
{
	return policy_once_claim(c, grant, token) ? REASON_GRANT_SPENT : REASON_NONE;
}

/* The backstop's half: a once grant's SYN passes only once its connect spent
 * it (a raw socket's SYN never went through a connect). */
POLICY_FN __u8 policy_once_syn(const POLICY_CTX *c, __u32 flags, __u32 grant)
{
	return (flags & ENTRY_F_ONCE) && !policy_once_spent(c, grant) ? REASON_GRANT_SPENT
								      : REASON_NONE;
}
#endif

#endif
