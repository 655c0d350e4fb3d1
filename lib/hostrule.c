/* Host rules: "name[:port]" and "*.domain[:port]" parsed into normalised form
 * and matched against names, plus the RFC 3492 punycode encoder that suggests
 * the ASCII form of a name written in Unicode. */
#include <arpa/inet.h>
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <wctype.h>

#include "lib/hostrule.h"

#define QUOTE_MAX 64	    /* bytes of the user's input quoted in a message */
#define NAME_INPUT_MAX 1024 /* longer input is refused before any work on it */
#define LABEL_MAX 63

/* Decodes one UTF-8 sequence; returns its length, or 0 when it is not valid
 * (overlong forms, surrogates and values past U+10FFFF included). */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
	size_t n, i;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		c = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/* The user's input made safe for a one-line message: control characters
 * (C0, DEL, C1) and broken UTF-8 become '?', since they could end the line or
 * drive the terminal; long input is cut at a character boundary. */
static const char *quote(const char *s, size_t len, char *buf, size_t buflen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, o = 0, n;
	uint32_t cp;

	while (i < len && o + 5 < buflen) {
		if (i >= QUOTE_MAX) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		n = utf8_decode(u + i, len - i, &cp);
		if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
			buf[o++] = '?';
			i += n ? n : 1;
			continue;
		}
		memcpy(buf + o, s + i, n);
		o += n;
		i += n;
	}
	buf[o] = '\0';
	return buf;
}

#define QBUF (QUOTE_MAX * 4 + 8)

/* RFC 3492 section 5 parameters for IDNA. */
enum {
	PC_BASE = 36,
	PC_TMIN = 1,
	PC_TMAX = 26,
	PC_SKEW = 38,
	PC_DAMP = 700,
	PC_INITIAL_BIAS = 72,
	PC_INITIAL_N = 128,
};

static char pc_digit(uint32_t d)
{
	return (char)(d < 26 ? 'a' + d : '0' + (d - 26));
}

static uint32_t pc_adapt(uint32_t delta, uint32_t numpoints, bool first)
{
	uint32_t k = 0;

	delta = first ? delta / PC_DAMP : delta / 2;
	delta += delta / numpoints;
	while (delta > ((PC_BASE - PC_TMIN) * PC_TMAX) / 2) {
		delta /= PC_BASE - PC_TMIN;
		k += PC_BASE;
	}
	return k + (PC_BASE - PC_TMIN + 1) * delta / (delta + PC_SKEW);
}

/* RFC 3492 section 6.3, written from its pseudocode. Writes the encoding of
 * in[0..n) (without "xn--") and a NUL into out; returns its length, or
 * -ENAMETOOLONG when out is too small, -EOVERFLOW on arithmetic overflow. */
static int punycode_encode(const uint32_t *in, size_t n, char *out, size_t outlen)
{
	uint32_t code = PC_INITIAL_N, delta = 0, bias = PC_INITIAL_BIAS, h, b, m;
	size_t o = 0, j;

	for (j = 0; j < n; j++) {
		if (in[j] < 0x80) {
			if (o + 1 >= outlen)
				return -ENAMETOOLONG;
			out[o++] = (char)in[j];
		}
	}
	h = b = (uint32_t)o;
	if (b > 0) {
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = '-';
	}
	while (h < n) {
		m = UINT32_MAX;
		for (j = 0; j < n; j++)
			if (in[j] >= code && in[j] < m)
				m = in[j];
		if ((m - code) > (UINT32_MAX - delta) / (h + 1))
			return -EOVERFLOW;
		delta += (m - code) * (h + 1);
		code = m;
		for (j = 0; j < n; j++) {
			if (in[j] < code && ++delta == 0)
				return -EOVERFLOW;
			if (in[j] != code)
				continue;
			uint32_t q = delta;

			for (uint32_t k = PC_BASE;; k += PC_BASE) {
				uint32_t t = k <= bias		   ? PC_TMIN
					     : k >= bias + PC_TMAX ? PC_TMAX
								   : k - bias;

				if (q < t)
					break;
				if (o + 1 >= outlen)
					return -ENAMETOOLONG;
				out[o++] = pc_digit(t + (q - t) % (PC_BASE - t));
				q = (q - t) / (PC_BASE - t);
			}
			if (o + 1 >= outlen)
				return -ENAMETOOLONG;
			out[o++] = pc_digit(q);
			bias = pc_adapt(delta, h + 1, h == b);
			delta = 0;
			h++;
		}
		delta++;
		code++;
	}
	out[o] = '\0';
	return (int)o;
}

/* Unicode lower case through the C.UTF-8 locale, which glibc always has;
 * without it the suggestion keeps the case it was given. */
static locale_t utf8_locale;

static void utf8_locale_open(void)
{
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static uint32_t unicode_lower(uint32_t cp)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (cp < 0x80)
		return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
	pthread_once(&once, utf8_locale_open);
	return utf8_locale ? (uint32_t)towlower_l((wint_t)cp, utf8_locale) : cp;
}

/* The ASCII form of a name with non-ASCII labels: each such label becomes
 * "xn--" and its punycode. Assumes NFC input, which is what keyboards give. */
static int punycode_name(const char *s, size_t len, char *out, size_t outlen, char *err,
			 size_t errlen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, o = 0;

	while (i <= len) {
		uint32_t cps[HOST_NAME_MAX_LEN + 1];
		char enc[LABEL_MAX + 2];
		size_t n = 0, start = i;
		bool ascii = true;
		int rc;

		while (i < len && s[i] != '.') {
			uint32_t cp;
			size_t k = utf8_decode(u + i, len - i, &cp);

			if (n == HOST_NAME_MAX_LEN)
				goto too_long;
			ascii &= cp < 0x80;
			cps[n++] = unicode_lower(cp);
			i += k; /* the caller checked the UTF-8 */
		}
		if (ascii) {
			if (n > LABEL_MAX)
				goto too_long;
			for (size_t k = 0; k < n; k++)
				enc[k] = (char)cps[k];
			enc[n] = '\0';
		} else {
			/* a label of LABEL_MAX characters at most, "xn--" among them */
			memcpy(enc, "xn--", 4);
			rc = punycode_encode(cps, n, enc + 4, LABEL_MAX - 4 + 1);
			if (rc < 0)
				goto too_long;
		}
		if (o + strlen(enc) + 2 > outlen)
			goto too_long;
		o += (size_t)snprintf(out + o, outlen - o, "%s%s", start ? "." : "", enc);
		i++;
	}
	if (o > HOST_NAME_MAX_LEN)
		goto too_long;
	return 0;
too_long:
	snprintf(err, errlen,
		 "the name is too long once written in punycode (xn--); a label is at most %d "
		 "characters and a name %d",
		 LABEL_MAX, HOST_NAME_MAX_LEN);
	return -EINVAL;
}

/* Would a resolver or libc read this as an address? inet_aton takes the
 * old forms too ("127.1", "0x7f000001"), which getaddrinfo honours. */
static bool is_ip_literal(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];
	struct in_addr a4;

	return inet_pton(AF_INET6, s, buf) == 1 || inet_pton(AF_INET, s, buf) == 1 ||
	       inet_aton(s, &a4) != 0;
}

static int ip_error(const char *s, size_t len, char *err, size_t errlen)
{
	char q[QBUF];

	snprintf(err, errlen,
		 "'%s' is an IP address and host rules name hosts; use --pin NAME=IP for an "
		 "address",
		 quote(s, len, q, sizeof(q)));
	return -EINVAL;
}

/* Normalises s[0..len) into out. pre and post frame the punycode suggestion
 * so that it reads as the whole rule the user wrote ("*." and ":8443"). */
static int name_normalize(const char *s, size_t len, const char *pre, const char *post,
			  char out[HOST_NAME_MAX_LEN + 1], char *err, size_t errlen)
{
	char name[NAME_INPUT_MAX + 1], q[QBUF];
	bool unicode = false, digits = true;
	size_t i, label = 0, given = len;

	if (len == 0 || (len == 1 && s[0] == '.')) {
		snprintf(err, errlen, "empty host name; name a host, like api.example.com");
		return -EINVAL;
	}
	if (len > NAME_INPUT_MAX) {
		snprintf(err, errlen,
			 "a host name of %zu bytes; a host name is at most %d characters", len,
			 HOST_NAME_MAX_LEN);
		return -EINVAL;
	}
	memcpy(name, s, len);
	name[len] = '\0';
	if (name[len - 1] == '.')
		name[--len] = '\0'; /* the root's dot, "example.com." */
	if (name[0] == '[' && name[len - 1] == ']') {
		char inner[NAME_INPUT_MAX + 1];

		memcpy(inner, name + 1, len - 2);
		inner[len - 2] = '\0';
		if (is_ip_literal(inner))
			return ip_error(s, given, err, errlen);
	}
	if (is_ip_literal(name))
		return ip_error(s, given, err, errlen);

	/* Characters first: the suggestion of an ASCII form only helps once
	 * everything else in the name is right. */
	for (i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)name[i];
		uint32_t cp;
		size_t n;

		if (c == '.' || c == '\0') {
			if (i == label) {
				snprintf(err, errlen,
					 "'%s' has an empty label; remove the extra dot",
					 quote(s, given, q, sizeof(q)));
				return -EINVAL;
			}
			label = i + 1;
			continue;
		}
		if (c >= 0x80) {
			n = utf8_decode((const unsigned char *)name + i, len - i, &cp);
			if (n == 0) {
				snprintf(err, errlen,
					 "'%s' is not valid UTF-8; write the name in ASCII, "
					 "international names in punycode (xn--)",
					 quote(s, given, q, sizeof(q)));
				return -EINVAL;
			}
			unicode = true;
			i += n - 1;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			name[i] = (char)(c + 32);
		c = (unsigned char)name[i];
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')
			continue;
		if (c == '*')
			snprintf(err, errlen,
				 "'*' stands only as the whole first label of a host rule, as in "
				 "*.example.com");
		else if (c > 0x20 && c < 0x7f)
			snprintf(err, errlen,
				 "'%c' is not allowed in a host name; use letters, digits, '-' and "
				 "'.'",
				 c);
		else
			snprintf(err, errlen,
				 "character 0x%02x is not allowed in a host name; use letters, "
				 "digits, '-' and '.'",
				 c);
		return -EINVAL;
	}
	if (unicode) {
		char ascii[2 * NAME_INPUT_MAX];
		int rc = punycode_name(name, len, ascii, sizeof(ascii), err, errlen);

		if (rc)
			return rc;
		snprintf(err, errlen, "'%s%s%s' is not ASCII; use %s%s%s", pre,
			 quote(s, given, q, sizeof(q)), post, pre, ascii, post);
		return -EINVAL;
	}

	if (len > HOST_NAME_MAX_LEN) {
		snprintf(err, errlen, "the name is %zu characters; a host name is at most %d", len,
			 HOST_NAME_MAX_LEN);
		return -EINVAL;
	}
	for (i = 0, label = 0; i <= len; i++) {
		size_t llen = i - label;

		if (name[i] != '.' && name[i] != '\0') {
			digits &= name[i] >= '0' && name[i] <= '9';
			continue;
		}
		if (llen > LABEL_MAX) {
			snprintf(err, errlen, "label '%s' is %zu characters; a label is at most %d",
				 quote(name + label, llen, q, sizeof(q)), llen, LABEL_MAX);
			return -EINVAL;
		}
		if (name[label] == '-' || name[i - 1] == '-') {
			snprintf(err, errlen,
				 "label '%s' %s with '-'; a label starts and ends with a letter or "
				 "digit",
				 quote(name + label, llen, q, sizeof(q)),
				 name[label] == '-' ? "starts" : "ends");
			return -EINVAL;
		}
		if (name[i] == '\0' && digits) {
			/* no top-level domain is all digits; libc would read an address */
			snprintf(err, errlen,
				 "'%s' ends in an all-digit label and reads as an IP address; use "
				 "--pin NAME=IP for an address",
				 quote(s, given, q, sizeof(q)));
			return -EINVAL;
		}
		label = i + 1;
		digits = true;
	}
	memcpy(out, name, len + 1);
	return 0;
}

int host_name_normalize(const char *s, char out[HOST_NAME_MAX_LEN + 1], char *err, size_t errlen)
{
	char name[HOST_NAME_MAX_LEN + 1];
	int rc;

	if (!s) {
		snprintf(err, errlen, "empty host name; name a host, like api.example.com");
		return -EINVAL;
	}
	if (s[0] == '*') {
		snprintf(err, errlen, "a wildcard names many hosts; name one host here");
		return -EINVAL;
	}
	rc = name_normalize(s, strlen(s), "", "", name, err, errlen);
	if (rc)
		return rc;
	memcpy(out, name, strlen(name) + 1);
	return 0;
}

int host_rule_parse(const char *s, struct host_rule *out, char *err, size_t errlen)
{
	struct host_rule r = {.port = HOST_DEFAULT_PORT};
	const char *name, *end, *colon, *star;
	char post[8] = "", q[QBUF];
	size_t len;
	int rc;

	if (!s || !*s) {
		snprintf(err, errlen,
			 "empty host rule; write a name like api.example.com or "
			 "api.example.com:8443");
		return -EINVAL;
	}
	len = strlen(s);
	if (s[0] == '[') {
		/* "[2001:db8::1]:443": an address however it is wrapped */
		const char *close = strchr(s, ']');
		char inner[INET6_ADDRSTRLEN];
		size_t n = close ? (size_t)(close - s - 1) : 0;

		if (close && n < sizeof(inner)) {
			memcpy(inner, s + 1, n);
			inner[n] = '\0';
			if (is_ip_literal(inner))
				return ip_error(s, len, err, errlen);
		}
		snprintf(err, errlen,
			 "'%s': brackets are for IPv6 addresses; a host rule is "
			 "NAME or NAME:PORT",
			 quote(s, len, q, sizeof(q)));
		return -EINVAL;
	}
	if (is_ip_literal(s))
		return ip_error(s, len, err, errlen);

	end = s + len;
	colon = strrchr(s, ':');
	if (colon) {
		const char *p = colon + 1;
		unsigned long port = 0;

		if (memchr(s, ':', (size_t)(colon - s))) {
			snprintf(err, errlen, "'%s' has more than one ':'; write NAME or NAME:PORT",
				 quote(s, len, q, sizeof(q)));
			return -EINVAL;
		}
		if (!*p || strspn(p, "0123456789") != strlen(p)) {
			snprintf(err, errlen,
				 "'%s' is not a port; write a number 1-65535 after the ':', like "
				 "api.example.com:8443",
				 quote(p, strlen(p), q, sizeof(q)));
			return -EINVAL;
		}
		for (; *p && port <= 65535; p++)
			port = port * 10 + (unsigned long)(*p - '0');
		if (port == 0 || port > 65535) {
			snprintf(err, errlen, "port %s is not a port; use 1-65535",
				 quote(colon + 1, strlen(colon + 1), q, sizeof(q)));
			return -EINVAL;
		}
		r.port = (uint16_t)port;
		snprintf(post, sizeof(post), ":%lu", port);
		end = colon;
	}
	name = s;
	len = (size_t)(end - s);
	if (len == 1 && s[0] == '*') {
		snprintf(err, errlen,
			 "'*' alone would admit every host; use egress mode open for "
			 "that, or name a domain, like *.example.com");
		return -EINVAL;
	}
	if (len >= 2 && s[0] == '*' && s[1] == '.') {
		r.wildcard = true;
		name = s + 2;
		len -= 2;
	}
	star = memchr(name, '*', len);
	if (star && r.wildcard) {
		/* "*.*.x.com": suggest the one wildcard that is allowed */
		while (len >= 2 && name[0] == '*' && name[1] == '.') {
			name += 2;
			len -= 2;
		}
		if (len && !memchr(name, '*', len))
			snprintf(err, errlen,
				 "'*' matches exactly one label and stands only first; write *.%s "
				 "or name the hosts deeper down",
				 quote(name, len, q, sizeof(q)));
		else
			snprintf(err, errlen,
				 "'*' matches exactly one label and stands only first, as in "
				 "*.example.com");
		return -EINVAL;
	}
	if (star) {
		if (star == s)
			snprintf(err, errlen, "'*' must be a whole label, as in *.example.com");
		else
			snprintf(err, errlen,
				 "'*' may only be the first label, as in *.example.com");
		return -EINVAL;
	}
	rc = name_normalize(name, len, r.wildcard ? "*." : "", post, r.name, err, errlen);
	if (rc)
		return rc;
	if (r.wildcard && !strchr(r.name, '.')) {
		snprintf(err, errlen,
			 "'*.%s' is a wildcard over a whole top-level domain; name a domain below "
			 "it, like *.example.%s",
			 r.name, r.name);
		return -EINVAL;
	}
	if (r.wildcard && strlen(r.name) + 2 > HOST_NAME_MAX_LEN) {
		snprintf(err, errlen,
			 "no name below '%s' fits in %d characters; name a shorter "
			 "domain",
			 r.name, HOST_NAME_MAX_LEN);
		return -EINVAL;
	}
	*out = r;
	return 0;
}

bool host_rule_match(const struct host_rule *r, const char *name)
{
	size_t n = strlen(name), rl = strlen(r->name);
	const char *suffix;

	/* Tolerant of case and the root's dot: DNS questions arrive in mixed
	 * case (0x20 randomisation) and sometimes fully qualified. */
	if (n && name[n - 1] == '.')
		n--;
	if (!r->wildcard)
		return n == rl && !strncasecmp(name, r->name, n);
	if (n < rl + 2)
		return false;
	suffix = name + n - rl;
	if (suffix[-1] != '.' || strncasecmp(suffix, r->name, rl))
		return false;
	/* exactly one label in front: never the apex, never two deep */
	return !memchr(name, '.', (size_t)(suffix - 1 - name));
}

const char *host_rule_str(const struct host_rule *r, char *buf, size_t len)
{
	if (len)
		snprintf(buf, len, "%s%s:%u", r->wildcard ? "*." : "", r->name, r->port);
	return buf;
}
