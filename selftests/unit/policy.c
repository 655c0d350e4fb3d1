/* Guarantee: bpf/policy.h, the policy the BPF programs run, judges addresses as lib/addr.c's
 * classification does and as the forbidden ranges say: compiled here for userspace with lookups
 * made as the loader fills the BPF programs' LPM tries from lib/addr.c's table (IPv4 ranges in
 * the 4-byte trie, every other in the 16-byte one), every v6 form that carries an IPv4 address
 * (NAT64, 6to4, Teredo, IPv4-compatible, SIIT, ISATAP) of a private, metadata or public address,
 * with and without treat-as-public ranges, gets the expected answer from both; the verdict
 * takes its reasons in order (no network, DoT, own address, pin, forbidden, expired, open
 * mode's ports, not allowed) and a once grant admits exactly one connection. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "egress.h"
#include "lib/addr.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

/* The lookups' world: the tries as the loader fills them, and a session. */
struct world {
	struct cidr v4[64], v6[64], pub4[8], pub6[8];
	size_t n4, n6, npub4, npub6;
	/* the session, for the verdict */
	__u32 mode;
	struct addr self;
	struct allow_key entry_key;
	struct allow_val entry;
	bool has_entry;
	__u16 open_port;
	__u64 now;
	__u32 once_grant;
	__u64 once_token; /* 0: not spent */
};

#define POLICY_CTX struct world
#define POLICY_WITH_VERDICT
#include "policy.h"

/* An LPM trie answers a lookup of a full-length key when any of its
 * prefixes covers it. */
static bool trie_has(const struct cidr *c, size_t n, const struct addr *a)
{
	for (size_t i = 0; i < n; i++)
		if (cidr_contains(&c[i], a))
			return true;
	return false;
}

/* As agent/enforce.c's fill_ranges splits ranges between the two tries. */
static void trie_fill(struct cidr *v4, size_t *n4, struct cidr *v6, size_t *n6,
		      const struct cidr *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (addr_is_v4(&c[i].a) && c[i].prefixlen >= 96)
			v4[(*n4)++] = c[i];
		else
			v6[(*n6)++] = c[i];
	}
}

/* bpf/egress.bpf.c's v4_forbidden: the 4-byte tries, keyed by the IPv4 address. */
static bool policy_v4_listed(const struct world *w, __u32 v4)
{
	struct addr a;

	addr_from_v4(&a, v4);
	return trie_has(w->v4, w->n4, &a) && !trie_has(w->pub4, w->npub4, &a);
}

/* ... and the 16-byte tries, where a v4-mapped key never matches a v4 range. */
static bool policy_v6_listed(const struct world *w, const __u8 b[16])
{
	struct addr a;

	memcpy(a.b, b, 16);
	return trie_has(w->v6, w->n6, &a) && !trie_has(w->pub6, w->npub6, &a);
}

static __u32 policy_mode(const struct world *w)
{
	return w->mode;
}

static bool policy_self(const struct world *w, const __u8 a[16])
{
	return !memcmp(w->self.b, a, 16);
}

static const struct allow_val *policy_entry(const struct world *w, const __u8 a[16], __u16 port)
{
	return w->has_entry && !memcmp(w->entry_key.addr, a, 16) && w->entry_key.port == port
		       ? &w->entry
		       : NULL;
}

static bool policy_port_open(const struct world *w, __u16 port)
{
	return w->open_port == port;
}

static struct world *clock_of;

static __u64 policy_now(void)
{
	return clock_of->now;
}

/* A map update with BPF_NOEXIST, as the hooks make it. */
static int policy_once_claim(const struct world *cw, __u32 grant, __u64 token)
{
	struct world *w = (struct world *)cw;

	if (w->once_grant == grant && w->once_token)
		return -1;
	w->once_grant = grant;
	w->once_token = token;
	return 0;
}

static bool policy_once_spent(const struct world *w, __u32 grant)
{
	return w->once_grant == grant && w->once_token;
}

static void world_init(struct world *w, const char *const *public_ranges, size_t n)
{
	const struct cidr *f;
	struct cidr pub[8];
	size_t nf;

	memset(w, 0, sizeof(*w));
	f = forbidden_ranges(&nf);
	trie_fill(w->v4, &w->n4, w->v6, &w->n6, f, nf);
	for (size_t i = 0; i < n; i++)
		cidr_parse(public_ranges[i], &pub[i]);
	trie_fill(w->pub4, &w->npub4, w->pub6, &w->npub6, pub, n);
}

struct want {
	const char *addr;
	bool forbidden;
	const char *why;
};

/* Each address judged by the header (through the tries) and by addr_forbidden
 * (through the table), both against what the ranges say it is. */
static void judge(const struct world *w, const char *const *pub_txt, size_t npub,
		  const struct want *t, size_t n, const char *label)
{
	struct cidr pub[8];

	for (size_t i = 0; i < npub; i++)
		cidr_parse(pub_txt[i], &pub[i]);
	for (size_t i = 0; i < n; i++) {
		struct addr a;

		if (!CHECK_INT(addr_parse(t[i].addr, &a), 0, "parse %s", t[i].addr))
			continue;
		CHECK_INT(policy_forbidden(w, a.b), t[i].forbidden, "%s: policy.h on %s (%s)",
			  label, t[i].addr, t[i].why);
		CHECK_INT(addr_forbidden(&a, pub, npub), t[i].forbidden,
			  "%s: lib/addr.c on %s (%s)", label, t[i].addr, t[i].why);
	}
}

static void forbidden_forms(void)
{
	static const struct want plain[] = {
		{"10.0.0.1", true, "private"},
		{"169.254.169.254", true, "metadata"},
		{"198.18.1.10", true, "benchmarking"},
		{"8.8.8.8", false, "public"},
		{"::ffff:10.0.0.1", true, "v4-mapped private: IPv4 itself"},
		{"::ffff:8.8.8.8", false, "v4-mapped public"},
		{"64:ff9b::a00:1", true, "NAT64 of 10.0.0.1"},
		{"64:ff9b::808:808", true, "NAT64 of a public address: its /96 is forbidden"},
		{"2002:a00:1::1", true, "6to4 of 10.0.0.1"},
		{"2001:0:1:2:3:4:f5ff:fefe", true, "Teredo of 10.0.1.1 (inverted)"},
		{"::10.0.0.1", true, "IPv4-compatible"},
		{"::ffff:0:a9fe:a9fe", true, "SIIT of the metadata address"},
		{"2a00:1450::5efe:a00:1", true, "ISATAP of 10.0.0.1 under a public /64"},
		{"2a00:1450::200:5efe:a9fe:a9fe", true, "ISATAP (u bit) of the metadata address"},
		{"2a00:1450::5efe:808:808", false, "ISATAP of a public address, public /64"},
		{"2a00:1450::1", false, "public IPv6"},
		{"fd00:ec2::254", true, "AWS metadata over IPv6"},
		{"fe80::1", true, "link-local"},
		{"::1", true, "loopback"},
		{"::", true, "unspecified"},
	};
	/* The test worlds' treat-as-public: 198.18.0.0/15, and v6 forms of it
	 * declared public, which must not open a private IPv4 inside them. */
	static const char *const pub[] = {"198.18.0.0/15", "64:ff9b::/96", "2002::/16",
					  "2001::/32",	   "::/96",	   "64:ff9b:1::/48"};
	static const struct want with_pub[] = {
		{"198.18.1.10", false, "benchmarking, declared public"},
		{"10.0.0.1", true, "private stays forbidden"},
		{"64:ff9b::c612:10a", false, "NAT64 of a public-declared address, public /96"},
		{"64:ff9b::a00:1", true, "NAT64 of 10.0.0.1 under a public /96"},
		{"64:ff9b:1:a00:1:100::", true,
		 "local-use NAT64 (/48) of 10.0.1.1 under a public /48"},
		{"64:ff9b:1:c612:1:a00::", false,
		 "local-use NAT64 (/48) of 198.18.1.10 under a public /48"},
		{"2002:a00:1::1", true, "6to4 of 10.0.0.1 under a public 2002::/16"},
		{"2002:c612:10a::1", false, "6to4 of 198.18.1.10 under a public 2002::/16"},
		{"2001:0:1:2:3:4:f5ff:fefe", true, "Teredo of 10.0.1.1 under a public 2001::/32"},
		{"::10.0.0.1", true, "IPv4-compatible 10.0.0.1 under a public ::/96"},
		{"::198.18.1.10", false, "IPv4-compatible 198.18.1.10 under a public ::/96"},
		{"2002:808:808:0:0:5efe:a00:1", true,
		 "6to4 of a public address carrying ISATAP of 10.0.0.1"},
	};
	struct world w;

	world_init(&w, NULL, 0);
	judge(&w, NULL, 0, plain, ARRAY_SIZE(plain), "no public ranges");
	world_init(&w, pub, ARRAY_SIZE(pub));
	judge(&w, pub, ARRAY_SIZE(pub), with_pub, ARRAY_SIZE(with_pub), "treat-as-public");
}

/* Every range of the table, at its first and last address, and one past its
 * end: the header through the tries and lib/addr.c through the table agree. */
static void table_agrees(void)
{
	const struct cidr *f;
	struct world w;
	size_t n;
	int disagree = 0;

	world_init(&w, NULL, 0);
	f = forbidden_ranges(&n);
	for (size_t i = 0; i < n; i++) {
		struct addr probe[3];

		probe[0] = probe[1] = f[i].a;
		for (unsigned bit = f[i].prefixlen; bit < 128; bit++)
			probe[1].b[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
		probe[2] = probe[1];
		for (int j = 15; j >= 0 && ++probe[2].b[j] == 0; j--)
			;
		for (int k = 0; k < 3; k++) {
			char s[ADDR_STRLEN];

			if (policy_forbidden(&w, probe[k].b) !=
			    addr_forbidden(&probe[k], NULL, 0)) {
				printf("# disagree on %s\n", addr_str(&probe[k], s));
				disagree++;
			}
			if (k < 2 && !addr_forbidden(&probe[k], NULL, 0)) {
				printf("# %s of range %zu not forbidden\n", addr_str(&probe[k], s),
				       i);
				disagree++;
			}
		}
	}
	CHECK_INT(disagree, 0,
		  "every range's ends and the address past it: one answer (%zu ranges)", n);
}

static void verdict_order(void)
{
	struct world w;
	struct addr pub, priv;
	__u32 flags, grant;

	world_init(&w, NULL, 0);
	clock_of = &w;
	w.now = 1000;
	addr_parse("8.8.8.8", &pub);
	addr_parse("10.0.0.1", &priv);
	w.mode = EGRESS_MODE_NONE;
	CHECK_INT(policy_verdict(&w, pub.b, 443, &flags, &grant), REASON_NO_NETWORK, "no network");
	w.mode = EGRESS_MODE_RESTRICTED;
	CHECK_INT(policy_verdict(&w, pub.b, 443, &flags, &grant), REASON_NOT_ALLOWED,
		  "restricted, no entry: not allowed");
	CHECK_INT(policy_verdict(&w, priv.b, 443, &flags, &grant), REASON_FORBIDDEN,
		  "restricted, no entry, private: forbidden first");
	w.has_entry = true;
	memcpy(w.entry_key.addr, pub.b, 16);
	w.entry_key.port = 853;
	CHECK_INT(policy_verdict(&w, pub.b, 853, &flags, &grant), REASON_DOT,
		  "DoT even with an entry");
	w.entry_key.port = 443;
	w.entry = (struct allow_val){.expires_ns = 2000, .flags = ENTRY_F_ONCE, .grant = 9};
	CHECK_INT(policy_verdict(&w, pub.b, 443, &flags, &grant), REASON_NONE, "an entry admits");
	CHECK_INT(flags, ENTRY_F_ONCE, "... with its flags");
	CHECK_INT(grant, 9, "... and its grant");
	w.now = 3000;
	CHECK_INT(policy_verdict(&w, pub.b, 443, &flags, &grant), REASON_EXPIRED,
		  "an entry past its expiry");
	w.self = pub;
	CHECK_INT(policy_verdict(&w, pub.b, 443, &flags, &grant), REASON_SELF,
		  "the agent's own address, even with an entry");
	memset(&w.self, 0, sizeof(w.self));
	memcpy(w.entry_key.addr, priv.b, 16);
	w.entry = (struct allow_val){.expires_ns = 0, .flags = 0};
	CHECK_INT(policy_verdict(&w, priv.b, 443, &flags, &grant), REASON_FORBIDDEN,
		  "an entry for a private address: forbidden");
	w.entry.flags = ENTRY_F_PINNED;
	w.entry.expires_ns = 1;
	CHECK_INT(policy_verdict(&w, priv.b, 443, &flags, &grant), REASON_NONE,
		  "a pin: admitted in a forbidden range, whatever its expiry");
	w.has_entry = false;
	w.mode = EGRESS_MODE_OPEN;
	w.open_port = 443;
	CHECK_INT(policy_verdict(&w, pub.b, 443, &flags, &grant), REASON_NONE,
		  "open mode, a public address on an open port");
	CHECK_INT(policy_verdict(&w, pub.b, 8443, &flags, &grant), REASON_PORT,
		  "open mode, another port");
	CHECK_INT(policy_verdict(&w, priv.b, 443, &flags, &grant), REASON_FORBIDDEN,
		  "open mode, a private address");

	CHECK_INT(policy_once_syn(&w, ENTRY_F_ONCE, 9), REASON_GRANT_SPENT,
		  "a once grant's SYN before any connect spent it");
	CHECK_INT(policy_once_syn(&w, 0, 9), REASON_NONE, "a SYN of no once grant");
	CHECK_INT(policy_once_spend(&w, 9, 111), REASON_NONE, "the first connect spends it");
	CHECK_INT(policy_once_spend(&w, 9, 111), REASON_GRANT_SPENT,
		  "the same socket connecting again is refused");
	CHECK_INT(policy_once_spend(&w, 9, 222), REASON_GRANT_SPENT, "another socket is refused");
	CHECK_INT(policy_once_syn(&w, ENTRY_F_ONCE, 9), REASON_NONE,
		  "the SYN of the connect that spent it passes");
}

int main(void)
{
	forbidden_forms();
	table_agrees();
	verdict_order();
	return test_exit();
}
