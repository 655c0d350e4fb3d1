/* Guarantee: host rules admit exactly the names they say ("*.example.com" one
 * label below, never the apex), refuse what could widen them (IP literals,
 * "*.com", misplaced '*'), and every refusal names its fix in one line. */
#include <errno.h>
#include <string.h>

#include "lib/hostrule.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

static void test_valid(void)
{
	static const struct {
		const char *in, *name;
		bool wildcard;
		int port;
	} cases[] = {
		{"api.example.com", "api.example.com", false, 443},
		{"API.Example.COM.", "api.example.com", false, 443},
		{"api.example.com:8443", "api.example.com", false, 8443},
		{"api.example.com.:1", "api.example.com", false, 1},
		{"api.example.com:65535", "api.example.com", false, 65535},
		{"*.example.com", "example.com", true, 443},
		{"*.Example.com:8443", "example.com", true, 8443},
		{"*.co.example", "co.example", true, 443},
		{"localhost", "localhost", false, 443},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", false, 443},
		{"a-b.example", "a-b.example", false, 443},
		{"1password.com", "1password.com", false, 443},
		{"host.example4", "host.example4", false, 443},
	};
	char err[256], buf[300];
	struct host_rule r;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		err[0] = '\0';
		if (!CHECK_INT(host_rule_parse(cases[i].in, &r, err, sizeof(err)), 0,
			       "host_rule_parse \"%s\" (%s)", cases[i].in, err))
			continue;
		CHECK_STR(r.name, cases[i].name, "name of %s", cases[i].in);
		CHECK_INT(r.wildcard, cases[i].wildcard, "wildcard of %s", cases[i].in);
		CHECK_INT(r.port, cases[i].port, "port of %s", cases[i].in);
	}

	/* the limits themselves: a 63-byte label, a 253-byte name */
	char name[300];

	memset(name, 'a', 63);
	strcpy(name + 63, ".example");
	CHECK_INT(host_rule_parse(name, &r, err, sizeof(err)), 0, "a 63-character label is fine");
	memset(name, 'a', 253);
	for (int i = 63; i < 253; i += 64)
		name[i] = '.';
	name[253] = '\0';
	CHECK_INT(host_rule_parse(name, &r, err, sizeof(err)), 0, "a 253-character name is fine");

	host_rule_parse("api.example.com", &r, err, sizeof(err));
	CHECK_STR(host_rule_str(&r, buf, sizeof(buf)), "api.example.com:443", "host_rule_str");
	host_rule_parse("*.example.com:8443", &r, err, sizeof(err));
	CHECK_STR(host_rule_str(&r, buf, sizeof(buf)), "*.example.com:8443",
		  "host_rule_str of a wildcard");
}

static void test_invalid(void)
{
	char long_label[80], long_name[300];
	const struct {
		const char *in, *fix;
	} cases[] = {
		{"", "api.example.com"},
		{"*", "egress mode open"},
		{"*:443", "egress mode open"},
		{"*.com", "name a domain below it, like *.example.com"},
		{"*.COM.", "like *.example.com"},
		{"*.*.x.com", "write *.x.com"},
		{"a.*.com", "only be the first label"},
		{"*foo.example.com", "whole label"},
		{"foo*.example.com", "only be the first label"},
		{"10.0.0.1", "use --pin NAME=IP for an address"},
		{"10.0.0.1:443", "use --pin NAME=IP"},
		{"10.0.0.1.", "use --pin NAME=IP"},
		{"2001:db8::1", "use --pin NAME=IP"},
		{"[2001:db8::1]", "use --pin NAME=IP"},
		{"[2001:db8::1]:443", "use --pin NAME=IP"},
		{"[10.0.0.1]", "use --pin NAME=IP"},
		{"::ffff:10.0.0.1", "use --pin NAME=IP"},
		{"127.1", "use --pin NAME=IP"},
		{"0x7f000001", "use --pin NAME=IP"},
		{"example.123", "use --pin NAME=IP"},
		{"*.10.0.0.1", "use --pin NAME=IP"},
		{"[example.com]", "NAME or NAME:PORT"},
		{"a..example.com", "remove the extra dot"},
		{".example.com", "remove the extra dot"},
		{"example.com..", "remove the extra dot"},
		{".", "api.example.com"},
		{long_label, "at most 63"},
		{long_name, "at most 253"},
		{"exa_mple.com", "use letters, digits, '-' and '.'"},
		{"exa mple.com", "use letters, digits"},
		{"-a.example.com", "starts and ends with a letter or digit"},
		{"a-.example.com", "starts and ends with a letter or digit"},
		{"example.com:0", "use 1-65535"},
		{"example.com:65536", "use 1-65535"},
		{"example.com:99999999999999999999", "use 1-65535"},
		{"example.com:https", "write a number 1-65535"},
		{"example.com:", "1-65535"},
		{"example.com:-1", "1-65535"},
		{"a:b:443", "write NAME or NAME:PORT"},
		{"bücher.example", "use xn--bcher-kva.example"},
		{"BÜCHER.example", "use xn--bcher-kva.example"},
		{"*.bücher.example:8443", "use *.xn--bcher-kva.example:8443"},
		{"www.bücher.example.", "use www.xn--bcher-kva.example"},
		{"b\xfc"
		 "cher.example",
		 "punycode (xn--)"},			     /* Latin-1, not UTF-8 */
		{"\xed\xa0\x80.example", "punycode (xn--)"}, /* a UTF-8 surrogate */
		{"\xc0\xaf.example", "punycode (xn--)"},     /* an overlong '/' */
		/* RFC 3492 7.1 (H), Korean: 71 characters even in punycode */
		{"세계의모든사람들이한국어를이해한다면얼마나좋을까.example", "at most 63"},
		{"b\xc3\xbc_cher.example", "'_' is not allowed"},
		/* 56 letters and a u-umlaut: 64 characters in punycode */
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xbc.example",
		 "at most 63"},
		/* one letter fewer: 63, suggested */
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xbc.example",
		 "use xn--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-"},
	};
	struct host_rule r = {.name = "untouched"};
	char err[256];

	memset(long_label, 'a', 64);
	strcpy(long_label + 64, ".example");
	memset(long_name, 'a', 254);
	for (int i = 63; i < 254; i += 64)
		long_name[i] = '.';
	long_name[254] = '\0';

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		err[0] = '\0';
		if (CHECK_INT(host_rule_parse(cases[i].in, &r, err, sizeof(err)), -EINVAL,
			      "host_rule_parse refuses \"%.40s\"", cases[i].in)) {
			CHECK_CONTAINS(err, cases[i].fix, "refusal of \"%.40s\" names the fix",
				       cases[i].in);
			CHECK_TRUE(!strchr(err, '\n'), "refusal of \"%.40s\" is one line",
				   cases[i].in);
		}
	}
	CHECK_STR(r.name, "untouched", "a refused rule leaves its output alone");

	host_rule_parse("a\nb\x1b[31m.example", &r, err, sizeof(err));
	CHECK_TRUE(!strchr(err, '\n') && !strchr(err, '\x1b'),
		   "control characters from the input never reach the message");
}

/* RFC 3492 section 7.1, through the suggestion of host_name_normalize. The
 * RFC's upper-case letters mark case flags; a host name is lower case. */
static void test_punycode(void)
{
	static const struct {
		const char *id, *label, *ascii;
	} v[] = {
		{"A (Arabic)", "ليهمابتكلموشعربي؟", "egbpdaj6bu4bxfgehfvwxn"},
		{"B (Chinese, simplified)", "他们为什么不说中文", "ihqwcrb4cv8a8dqg056pqjye"},
		{"C (Chinese, traditional)", "他們爲什麽不說中文", "ihqwctvzc91f659drss3x8bo0yb"},
		{"D (Czech)", "Pročprostěnemluvíčesky", "proprostnemluvesky-uyb24dma41a"},
		{"I (Russian)", "почемужеонинеговорятпорусски", "b1abfaaepdrnnbgefbadotcwatmq2g4l"},
		{"L (Japanese)", "3年B組金八先生", "3b-ww4c5e180e575a65lsy2b"},
		{"M (Japanese)", "安室奈美恵-with-SUPER-MONKEYS",
		 "-with-super-monkeys-pc58ag80a8qai00g7n9n"},
		{"O (Japanese)", "ひとつ屋根の下2", "2-u9tlzr9756bt3uc0v"},
		{"R (Japanese)", "そのスピードで", "d9juau41awczczp"},
		{"bücher", "bücher", "bcher-kva"},
	};
	char in[256], want[256], err[512], out[HOST_NAME_MAX_LEN + 1];

	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		snprintf(in, sizeof(in), "%s.example", v[i].label);
		snprintf(want, sizeof(want), "use xn--%s.example", v[i].ascii);
		err[0] = '\0';
		if (CHECK_INT(host_name_normalize(in, out, err, sizeof(err)), -EINVAL,
			      "punycode %s refused as not ASCII", v[i].id))
			CHECK_CONTAINS(err, want, "punycode %s suggested", v[i].id);
	}
}

static void test_normalize(void)
{
	char out[HOST_NAME_MAX_LEN + 1] = "untouched", err[256];

	CHECK_INT(host_name_normalize("Api.Example.COM.", out, err, sizeof(err)), 0,
		  "host_name_normalize a mixed-case name");
	CHECK_STR(out, "api.example.com", "normalised name");
	strcpy(out, "untouched");
	CHECK_INT(host_name_normalize("*.example.com", out, err, sizeof(err)), -EINVAL,
		  "host_name_normalize refuses a wildcard");
	CHECK_CONTAINS(err, "name one host", "wildcard refusal names the fix");
	CHECK_INT(host_name_normalize("api.example.com:443", out, err, sizeof(err)), -EINVAL,
		  "host_name_normalize refuses a port");
	CHECK_INT(host_name_normalize("198.18.0.1", out, err, sizeof(err)), -EINVAL,
		  "host_name_normalize refuses an address");
	CHECK_CONTAINS(err, "--pin NAME=IP", "address refusal names the fix");
	CHECK_STR(out, "untouched", "a refused name leaves its output alone");
}

static void test_match(void)
{
	static const struct {
		const char *rule, *name;
		bool match;
	} cases[] = {
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "API.Example.COM.", true},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", "example.com", false},
		{"*.example.com", ".example.com", false},
		{"*.example.com", "xexample.com", false},
		{"*.example.com", "api.example.com.evil", false},
		{"*.example.com", "api.badexample.com", false},
		{"api.example.com", "api.example.com", true},
		{"api.example.com", "api.example.com.", true},
		{"api.example.com", "API.EXAMPLE.COM", true},
		{"api.example.com", "x.api.example.com", false},
		{"api.example.com", "example.com", false},
		{"api.example.com", "api.example.co", false},
		{"api.example.com:8443", "api.example.com", true},
	};
	char err[256];
	struct host_rule r;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (host_rule_parse(cases[i].rule, &r, err, sizeof(err))) {
			CHECK_TRUE(false, "rule %s parses: %s", cases[i].rule, err);
			continue;
		}
		CHECK_INT(host_rule_match(&r, cases[i].name), cases[i].match, "%s %s %s",
			  cases[i].rule, cases[i].match ? "matches" : "does not match",
			  cases[i].name);
	}
}

int main(void)
{
	test_valid();
	test_invalid();
	test_punycode();
	test_normalize();
	test_match();
	return test_exit();
}
