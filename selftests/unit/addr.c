/* Guarantee: an address in a forbidden range (private, loopback, link-local,
 * metadata, documentation, or a v6 form carrying one) is refused unless the
 * operator declared its range public, and addresses parse and print exactly. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>

#include "lib/addr.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

static bool forbidden(const char *s, const struct cidr *pub, size_t n)
{
	struct addr a;

	if (addr_parse(s, &a)) {
		printf("# cannot parse %s\n", s);
		return false;
	}
	return addr_forbidden(&a, pub, n);
}

static void test_parse(void)
{
	static const struct {
		const char *in, *out;
	} round[] = {
		{"198.18.0.1", "198.18.0.1"},
		{"0.0.0.0", "0.0.0.0"},
		{"255.255.255.255", "255.255.255.255"},
		{"2001:db8::1", "2001:db8::1"},
		{"2001:DB8:0:0:0:0:0:1", "2001:db8::1"},
		{"::", "::"},
		{"::1", "::1"},
		{"1::", "1::"},
		{"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"}, /* one zero group stays */
		{"2001:0:0:1:0:0:0:1", "2001:0:0:1::1"},	  /* the longer run */
		{"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},	  /* the first of equal runs */
		{"::ffff:10.1.2.3", "10.1.2.3"},		  /* v4-mapped is IPv4 */
		{"::2:3", "::2:3"},				  /* not dotted */
		{"64:ff9b::808:808", "64:ff9b::808:808"},
		{"fe80::1", "fe80::1"},
	};
	static const char *const bad[] = {
		"",	      "1.2.3",	      "127.1",	       "1.2.3.256",
		"0x7f.0.0.1", "fe80::1%eth0", "2001:db8::/32", "[::1]",
		"1.2.3.4:80", "example.com",  " 1.2.3.4"};
	char buf[ADDR_STRLEN];
	struct addr a;

	for (size_t i = 0; i < ARRAY_SIZE(round); i++) {
		if (CHECK_INT(addr_parse(round[i].in, &a), 0, "addr_parse %s", round[i].in))
			CHECK_STR(addr_str(&a, buf), round[i].out, "addr_str of %s", round[i].in);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_INT(addr_parse(bad[i], &a), -EINVAL, "addr_parse refuses \"%s\"", bad[i]);

	addr_parse("10.1.2.3", &a);
	CHECK_TRUE(addr_is_v4(&a), "10.1.2.3 is v4");
	CHECK_INT(a.b[10], 0xff, "10.1.2.3 stored v4-mapped");
	CHECK_INT(addr_v4(&a), htonl(0x0a010203), "addr_v4 of 10.1.2.3 in network order");
	addr_from_v4(&a, htonl(0xc6120001));
	CHECK_STR(addr_str(&a, buf), "198.18.0.1", "addr_from_v4 round trip");
	addr_parse("2001:db8::1", &a);
	CHECK_FALSE(addr_is_v4(&a), "2001:db8::1 is not v4");
	addr_parse("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", &a);
	CHECK_STR(addr_str(&a, buf), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "longest text");
}

static void test_port(void)
{
	static const struct {
		const char *in, *addr;
		int rc, port;
	} cases[] = {
		{"198.18.0.1", "198.18.0.1", 0, 0},
		{"198.18.0.1:443", "198.18.0.1", 0, 443},
		{"198.18.0.1:65535", "198.18.0.1", 0, 65535},
		{"2001:db8::1", "2001:db8::1", 0, 0},
		{"[2001:db8::1]", "2001:db8::1", 0, 0},
		{"[2001:db8::1]:8443", "2001:db8::1", 0, 8443},
		{"198.18.0.1:0", NULL, -ERANGE, 0},
		{"198.18.0.1:65536", NULL, -ERANGE, 0},
		{"[2001:db8::1]:0", NULL, -ERANGE, 0},
		{"198.18.0.1:", NULL, -EINVAL, 0},
		{"198.18.0.1:https", NULL, -EINVAL, 0},
		{"198.18.0.1:-1", NULL, -EINVAL, 0},
		{"[198.18.0.1]:443", NULL, -EINVAL, 0}, /* brackets are for IPv6 */
		{"[2001:db8::1", NULL, -EINVAL, 0},
		{"[2001:db8::1]x", NULL, -EINVAL, 0},
		{"host:443", NULL, -EINVAL, 0},
	};
	char buf[ADDR_STRLEN];
	uint16_t port = 7;
	struct addr a;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int rc = addr_port_parse(cases[i].in, &a, &port);

		if (!CHECK_INT(rc, cases[i].rc, "addr_port_parse \"%s\"", cases[i].in) || rc)
			continue;
		CHECK_STR(addr_str(&a, buf), cases[i].addr, "address of %s", cases[i].in);
		CHECK_INT(port, cases[i].port, "port of %s", cases[i].in);
	}
	port = 7;
	addr_port_parse("1.2.3.4:0", &a, &port);
	CHECK_INT(port, 7, "a failed parse leaves the port alone");
}

static void test_cidr(void)
{
	static const struct {
		const char *in;
		int prefixlen;
	} good[] = {
		{"10.0.0.0/8", 104}, {"0.0.0.0/0", 96},	   {"198.18.0.0/15", 111},
		{"1.2.3.4", 128},    {"1.2.3.4/32", 128},  {"fc00::/7", 7},
		{"::/0", 0},	     {"2001:db8::1", 128}, {"::ffff:10.0.0.0/104", 104},
	};
	static const char *const bad[] = {"10.1.2.3/8", "10.0.0.0/33", "fc00::/129", "10.0.0.0/",
					  "10.0.0.0/x", "/8",	       "fc01::/7",   "10.0.0.0/-1"};
	struct cidr c;
	struct addr a;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		if (CHECK_INT(cidr_parse(good[i].in, &c), 0, "cidr_parse %s", good[i].in))
			CHECK_INT(c.prefixlen, good[i].prefixlen, "prefixlen of %s", good[i].in);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_INT(cidr_parse(bad[i], &c), -EINVAL, "cidr_parse refuses %s", bad[i]);

	cidr_parse("198.18.0.0/15", &c);
	addr_parse("198.19.255.255", &a);
	CHECK_TRUE(cidr_contains(&c, &a), "198.18.0.0/15 contains 198.19.255.255");
	addr_parse("198.20.0.0", &a);
	CHECK_FALSE(cidr_contains(&c, &a), "198.18.0.0/15 does not contain 198.20.0.0");
	cidr_parse("fe80::/10", &c);
	addr_parse("febf::1", &a);
	CHECK_TRUE(cidr_contains(&c, &a), "fe80::/10 contains febf::1");
	addr_parse("fec0::1", &a);
	CHECK_FALSE(cidr_contains(&c, &a), "fe80::/10 does not contain fec0::1");
}

static void test_table(void)
{
	size_t n, v4 = 0;
	const struct cidr *t = forbidden_ranges(&n);
	bool v6_seen = false, ordered = true, clean = true;

	CHECK_TRUE(n > 0 && n <= 256, "forbidden_ranges fits the BPF tries (%zu entries)", n);
	for (size_t i = 0; i < n; i++) {
		bool is4 = addr_is_v4(&t[i].a) && t[i].prefixlen >= 96;
		struct cidr c = t[i];

		if (is4) {
			v4++;
			ordered &= !v6_seen;
			/* the mapped prefix itself would forbid all of IPv4 */
			CHECK_TRUE(t[i].prefixlen > 96, "v4 entry %zu is narrower than 0.0.0.0/0",
				   i);
		} else {
			v6_seen = true;
		}
		for (unsigned b = c.prefixlen; b < 128; b++)
			clean &= !(c.a.b[b / 8] & (0x80 >> (b % 8)));
	}
	CHECK_INT(v4, 19, "19 IPv4 entries");
	CHECK_TRUE(ordered, "IPv4 entries come before IPv6 ones");
	CHECK_TRUE(clean, "no entry has bits set past its prefix");
}

static void test_forbidden(void)
{
	static const char *const refused[] = {
		"10.1.2.3",
		"169.254.169.254",
		"127.0.0.1",
		"::1",
		"fe80::1",
		"fc00::1",
		"2001:db8::1",
		"0.0.0.0",
		"100.64.0.1",
		"172.16.0.1",
		"172.31.255.255",
		"192.168.1.1",
		"192.0.0.8",
		"192.0.2.1",
		"192.88.99.1",
		"198.51.100.1",
		"203.0.113.1",
		"224.0.0.1",
		"239.255.255.250",
		"240.0.0.1",
		"255.255.255.255",
		"168.63.129.16",
		"100.100.100.200",
		"::",
		"fd00:ec2::254",
		"ff02::1",
		"fec0::1",
		"100::1",
		"100:0:0:1::1",
		"2001:2::1",
		"3fff::1",
		"5f00::1",
		"64:ff9b:1::1",
		"198.18.0.5",
		"::ffff:10.0.0.1",
		"::ffff:127.0.0.1",
		/* the v6 forms carrying 10.0.0.1 */
		"64:ff9b::a00:1",
		"2002:0a00:0001::",
		"2001:0:4136:e378:8000:63bf:f5ff:fffe",
	};
	static const char *const allowed[] = {
		"8.8.8.8",    "1.1.1.1",     "2606:4700::1",  "2a00:1450:4001::1", "198.20.0.1",
		"172.32.0.1", "100.128.0.1", "168.63.129.17", "::ffff:8.8.8.8",
	};
	struct cidr pub[3];
	char buf[ADDR_STRLEN];
	struct addr a;

	for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
		CHECK_TRUE(forbidden(refused[i], NULL, 0), "%s is forbidden", refused[i]);
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		CHECK_FALSE(forbidden(allowed[i], NULL, 0), "%s is allowed", allowed[i]);

	/* The Teredo address above: client 10.0.0.1, stored inverted. */
	addr_parse("2001:0:4136:e378:8000:63bf:f5ff:fffe", &a);
	CHECK_INT(addr_v4(&a) ^ 0xffffffffu, htonl(0x0a000001), "Teredo client is 10.0.0.1");

	/* test worlds: 198.18.0.0/15 declared public */
	cidr_parse("198.18.0.0/15", &pub[0]);
	CHECK_FALSE(forbidden("198.18.0.5", pub, 1), "198.18.0.5 allowed once 198.18/15 is public");
	CHECK_TRUE(forbidden("10.0.0.1", pub, 1), "10.0.0.1 still forbidden with 198.18/15 public");

	/* Decision: the NAT64, 6to4 and Teredo prefixes are forbidden ranges
	 * themselves, so 64:ff9b::808:808 (8.8.8.8) stays forbidden. Declaring
	 * the v6 prefix public lets the carried address be judged, and never
	 * opens a private one inside it. */
	CHECK_TRUE(forbidden("64:ff9b::808:808", NULL, 0), "NAT64 of 8.8.8.8 forbidden by default");
	cidr_parse("64:ff9b::/96", &pub[1]);
	CHECK_FALSE(forbidden("64:ff9b::808:808", &pub[1], 1),
		    "NAT64 of 8.8.8.8 allowed with 64:ff9b::/96 public");
	CHECK_TRUE(forbidden("64:ff9b::a00:1", &pub[1], 1),
		   "NAT64 of 10.0.0.1 forbidden even with 64:ff9b::/96 public");
	CHECK_TRUE(forbidden("64:ff9b::c612:5", &pub[1], 1),
		   "NAT64 of 198.18.0.5 forbidden with only the v6 prefix public");
	CHECK_FALSE(forbidden("64:ff9b::c612:5", pub, 2),
		    "NAT64 of 198.18.0.5 allowed with both ranges public");
	cidr_parse("2002::/16", &pub[2]);
	CHECK_TRUE(forbidden("2002:0a00:0001::", &pub[2], 1),
		   "6to4 of 10.0.0.1 forbidden even with 2002::/16 public");
	CHECK_FALSE(forbidden("2002:0808:0808::", &pub[2], 1),
		    "6to4 of 8.8.8.8 allowed with 2002::/16 public");
	cidr_parse("2001::/23", &pub[2]);
	CHECK_TRUE(forbidden("2001:0:4136:e378:8000:63bf:f5ff:fffe", &pub[2], 1),
		   "Teredo of 10.0.0.1 forbidden even with 2001::/23 public");
	CHECK_FALSE(forbidden("2001:0:4136:e378:8000:63bf:f7f7:f7f7", &pub[2], 1),
		    "Teredo of 8.8.8.8 allowed with 2001::/23 public");

	/* A v6 range spanning the mapped prefix is not an IPv4 range: the BPF
	 * programs look IPv4 up in their 4-byte tries only. */
	cidr_parse("::/0", &pub[0]);
	CHECK_TRUE(forbidden("10.0.0.1", pub, 1), "::/0 public does not make 10.0.0.1 public");
	CHECK_FALSE(forbidden("fc00::1", pub, 1), "::/0 public makes fc00::1 public");
	addr_parse("::ffff:10.0.0.1", &a);
	CHECK_STR(addr_str(&a, buf), "10.0.0.1", "a mapped address prints as IPv4");
}

/* IPv4-compatible (::a.b.c.d), SIIT (::ffff:0:a.b.c.d) and ISATAP
 * (...:0000:5efe:a.b.c.d, ...:0200:5efe:a.b.c.d) are judged as the IPv4
 * address they carry; the first two are forbidden ranges themselves, ISATAP
 * lives under any /64 and is as public as the address it carries. */
static void test_v4_forms(void)
{
	static const char *const refused[] = {
		"::a00:1",			 /* IPv4-compatible 10.0.0.1 */
		"::808:808",			 /* IPv4-compatible 8.8.8.8: the form */
		"::a9fe:a9fe",			 /* IPv4-compatible metadata */
		"::ffff:0:a00:1",		 /* SIIT 10.0.0.1 */
		"::ffff:0:808:808",		 /* SIIT 8.8.8.8: the form */
		"2606:4700::5efe:a00:1",	 /* ISATAP 10.0.0.1 in a public /64 */
		"2606:4700::200:5efe:a00:1",	 /* ISATAP, global bit */
		"2606:4700::5efe:a9fe:a9fe",	 /* ISATAP metadata */
		"2606:4700::200:5efe:7f00:1",	 /* ISATAP loopback */
		"2a00:1450:4001:1::5efe:c612:5", /* ISATAP 198.18.0.5 (not public here) */
	};
	static const char *const allowed[] = {
		"2606:4700::5efe:808:808",     /* ISATAP 8.8.8.8 in a public /64 */
		"2606:4700::200:5efe:101:101", /* ISATAP 1.1.1.1 */
		"2606:4700::5eff:a00:1",       /* not ISATAP: 5eff */
		"2606:4700::1:5efe:a00:1",     /* not ISATAP: 0001:5efe */
	};
	struct cidr pub[2];

	for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
		CHECK_TRUE(forbidden(refused[i], NULL, 0), "%s is forbidden", refused[i]);
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		CHECK_FALSE(forbidden(allowed[i], NULL, 0), "%s is allowed", allowed[i]);

	/* A public form opens only a public address inside it. */
	cidr_parse("::/96", &pub[0]);
	CHECK_FALSE(forbidden("::808:808", pub, 1), "IPv4-compatible 8.8.8.8 with ::/96 public");
	CHECK_TRUE(forbidden("::a00:1", pub, 1),
		   "IPv4-compatible 10.0.0.1 forbidden even with ::/96 public");
	CHECK_INT(cidr_parse("::ffff:0:0:0/96", &pub[0]), 0, "the SIIT prefix parses");
	CHECK_FALSE(forbidden("::ffff:0:808:808", pub, 1), "SIIT 8.8.8.8 with its prefix public");
	CHECK_TRUE(forbidden("::ffff:0:a00:1", pub, 1),
		   "SIIT 10.0.0.1 forbidden even with its prefix public");
	CHECK_TRUE(forbidden("::ffff:0:c612:5", pub, 1),
		   "SIIT 198.18.0.5 forbidden with only the v6 prefix public");
	cidr_parse("198.18.0.0/15", &pub[1]);
	CHECK_FALSE(forbidden("::ffff:0:c612:5", pub, 2),
		    "SIIT 198.18.0.5 allowed with both ranges public");
	CHECK_FALSE(forbidden("2a00:1450:4001:1::5efe:c612:5", &pub[1], 1),
		    "ISATAP 198.18.0.5 allowed once 198.18/15 is public");
	cidr_parse("fc00::/7", &pub[0]);
	CHECK_TRUE(forbidden("fd00::5efe:a00:1", pub, 1),
		   "ISATAP 10.0.0.1 forbidden even under a /64 declared public");
}

int main(void)
{
	test_parse();
	test_port();
	test_cidr();
	test_table();
	test_forbidden();
	test_v4_forms();
	return test_exit();
}
