/* errand's configuration file: jansson reads it, every object is checked
 * against the keys errand knows (a near miss is refused, anything else warned
 * about), and what the agent acts on is checked and kept in errand_config. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/util.h"

#define SESSION_ACCOUNT "errand-session"
#define NOBODY_ID 65534
#define DEFAULT_POOL "10.213.0.0/16"
/* errand's own ULA /48: each session's /126 is the pool's prefix with the
 * session's IPv4 address as its last 32 bits (agent/netlink.c). */
#define DEFAULT_POOL6 "fd65:7272:616e::/48"
#define WHERE_MAX 256
#define SAFE_MAX 200

struct ctx {
	const char *path;
	char *err;
	size_t errlen;
};

/* Text from the file made safe for one line: control characters (C0, DEL
 * and C1, which jansson hands over as valid UTF-8) become '?'. */
static const char *safe(const char *s, char *buf, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	for (; *u && o + 4 < len; u++) {
		if (*u < 0x20 || *u == 0x7f) {
			buf[o++] = '?';
		} else if (*u == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f) {
			buf[o++] = '?';
			u++;
		} else {
			buf[o++] = (char)*u;
		}
	}
	if (*u)
		o += (size_t)snprintf(buf + o, len - o, "...");
	buf[o] = '\0';
	return buf;
}

__attribute__((format(printf, 2, 3))) static int cfg_error(struct ctx *c, const char *fmt, ...)
{
	char msg[CONFIG_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "config %s: %s", c->path, msg);
	return -EINVAL;
}

static const char *kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "a number";
	case JSON_REAL:
		return "a number with a fraction or exponent";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		break;
	}
	return "null";
}

/* how: what to write instead, for the message. */
static int want(struct ctx *c, const json_t *v, json_type t, const char *where, const char *how)
{
	if (json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v)))
		return 0;
	return cfg_error(c, "%s is %s; write %s", where, kind(v), how);
}

/* A key's value, or NULL when it is absent or null: then the default stands. */
static json_t *get(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

static void join(char *out, const char *where, const char *key)
{
	char k[SAFE_MAX];

	snprintf(out, WHERE_MAX, "%s%s%s", where, *where ? "." : "", safe(key, k, sizeof(k)));
}

static char lower(char ch)
{
	return ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
}

int config_key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	cleanup_free int *rows = calloc(3 * (lb + 1), sizeof(int));
	int *prev2, *prev, *cur, d;

	/* optimal string alignment: insertions, deletions, substitutions and
	 * swaps of two neighbours, each costing one */
	if (!rows)
		return INT_MAX;
	prev2 = rows;
	prev = rows + lb + 1;
	cur = rows + 2 * (lb + 1);
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int cost = lower(a[i - 1]) != lower(b[j - 1]);

			d = prev[j] + 1;
			if (cur[j - 1] + 1 < d)
				d = cur[j - 1] + 1;
			if (prev[j - 1] + cost < d)
				d = prev[j - 1] + cost;
			if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
			    lower(a[i - 2]) == lower(b[j - 1]) && prev2[j - 2] + 1 < d)
				d = prev2[j - 2] + 1;
			cur[j] = d;
		}
		int *t = prev2;

		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

/* A misspelling to refuse rather than ignore: a key that reads as a known
 * sibling is almost surely that key, and ignoring it would quietly drop a
 * restriction. Two edits on a key of four letters or fewer is half the
 * word, so short keys get one. */
static const char *near_miss(const char *key, const char *const *known)
{
	const char *best = NULL;
	int best_d = INT_MAX;

	for (; *known; known++) {
		int d = config_key_distance(key, *known);
		int limit = strlen(*known) <= 4 ? 1 : 2;

		if (d <= limit && d < best_d) {
			best = *known;
			best_d = d;
		}
	}
	return best;
}

/* A key that begins like a known one and must not be mistaken for an
 * operator's own: the provider keys that, misspelt, leave a route open. */
struct prefix_rule {
	const char *prefix, *key;
};

static int check_keys(struct ctx *c, const json_t *obj, const char *where, const char *const *known,
		      const struct prefix_rule *prefixes)
{
	char full[WHERE_MAX], hint[WHERE_MAX];
	const char *key, *near;
	json_t *v;

	json_object_foreach((json_t *)obj, key, v)
	{
		bool found = false;

		for (const char *const *k = known; *k && !found; k++)
			found = !strcmp(key, *k);
		if (found)
			continue;
		join(full, where, key);
		near = near_miss(key, known);
		for (const struct prefix_rule *p = prefixes; !near && p && p->prefix; p++)
			if (!strncasecmp(key, p->prefix, strlen(p->prefix)))
				near = p->key;
		if (near) {
			join(hint, where, near);
			return cfg_error(c, "unknown key %s; did you mean %s?", full, hint);
		}
		log_warnx("config %s: unknown key %s ignored; errand does not read it", c->path,
			  full);
	}
	return 0;
}

/* An object we descend into: its type, then its keys. */
static int section(struct ctx *c, const json_t *v, const char *where, const char *const *known,
		   const struct prefix_rule *prefixes)
{
	int rc = want(c, v, JSON_OBJECT, where, "an object");

	return rc ? rc : check_keys(c, v, where, known, prefixes);
}

static int set_string(char **dst, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static int oom(struct ctx *c)
{
	snprintf(c->err, c->errlen, "config %s: out of memory", c->path);
	return -ENOMEM;
}

/* "IP", "IP:PORT" or "[IPv6]:PORT" for a pin or an upstream resolver. */
static int addr_value(struct ctx *c, const char *where, const char *s, struct addr *a,
		      uint16_t *port)
{
	char q[SAFE_MAX];
	int rc = addr_port_parse(s, a, port);

	if (rc == -ERANGE)
		return cfg_error(c, "%s: the port in \"%s\" is not a port; use 1-65535", where,
				 safe(s, q, sizeof(q)));
	if (rc)
		return cfg_error(c,
				 "%s: \"%s\" is not an address; write IP or IP:PORT, an IPv6 "
				 "address with a port in brackets ([2001:db8::1]:53)",
				 where, safe(s, q, sizeof(q)));
	return 0;
}

/* cidr_parse refuses "10.1.2.3/8" outright; here we can say what was meant. */
static int cidr_value(struct ctx *c, const char *where, const char *s, struct cidr *out)
{
	char q[SAFE_MAX], host[INET6_ADDRSTRLEN], text[ADDR_STRLEN];
	const char *slash = strchr(s, '/');
	struct cidr m;
	struct addr a;
	unsigned long plen;
	char *end;

	if (!cidr_parse(s, out))
		return 0;
	if (slash && (size_t)(slash - s) < sizeof(host)) {
		memcpy(host, s, (size_t)(slash - s));
		host[slash - s] = '\0';
		plen = strtoul(slash + 1, &end, 10);
		if (!addr_parse(host, &a) && !*end && slash[1] >= '0' && slash[1] <= '9' &&
		    plen <= (strchr(host, ':') ? 128 : 32)) {
			m.a = a;
			m.prefixlen = (uint8_t)(plen + (strchr(host, ':') ? 0 : 96));
			for (unsigned i = m.prefixlen; i < 128; i++)
				m.a.b[i / 8] &= (uint8_t) ~(0x80 >> (i % 8));
			/* an IPv4-mapped range is written as the IPv4 one it is */
			if (strchr(host, ':') && addr_is_v4(&m.a))
				plen -= 96;
			return cfg_error(c, "%s: \"%s\" has bits set past its prefix; write %s/%lu",
					 where, safe(s, q, sizeof(q)), addr_str(&m.a, text), plen);
		}
	}
	return cfg_error(c,
			 "%s: \"%s\" is not an address range; write one like 198.18.0.0/15 or "
			 "2001:db8::/32",
			 where, safe(s, q, sizeof(q)));
}

static int parse_rules(struct ctx *c, const json_t *arr, const char *where,
		       struct errand_config *cfg)
{
	char w[WHERE_MAX], e[CONFIG_ERRLEN];
	size_t i;
	json_t *v;
	int rc;

	if ((rc = want(c, arr, JSON_ARRAY, where,
		       "a list of host rules, like [\"api.example.com\"]")))
		return rc;
	json_array_foreach(arr, i, v)
	{
		struct host_rule r;

		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if ((rc = want(c, v, JSON_STRING, w, "a host rule, like \"api.example.com:443\"")))
			return rc;
		if (host_rule_parse(json_string_value(v), &r, e, sizeof(e)))
			return cfg_error(c, "%s: %s", w, e);
		if (cfg && config_add_rule(cfg, &r))
			return oom(c);
	}
	return 0;
}

/* A list of host rules kept apart from the allowed hosts (method gating). */
static int parse_rules_into(struct ctx *c, const json_t *arr, const char *where,
			    struct host_rule **v, size_t *n)
{
	char w[WHERE_MAX], e[CONFIG_ERRLEN];
	const json_t *it;
	size_t i;
	int rc;

	if ((rc = parse_rules(c, arr, where, NULL)))
		return rc;
	json_array_foreach(arr, i, it)
	{
		struct host_rule r, *grown;

		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if (host_rule_parse(json_string_value(it), &r, e, sizeof(e)))
			return cfg_error(c, "%s: %s", w, e);
		grown = reallocarray(*v, *n + 1, sizeof(*grown));
		if (!grown)
			return oom(c);
		grown[(*n)++] = r;
		*v = grown;
	}
	return 0;
}

static int parse_pins(struct ctx *c, const json_t *obj, struct errand_config *cfg)
{
	const char *where = "sandbox.egress.pins";
	char w[WHERE_MAX], e[CONFIG_ERRLEN], q[SAFE_MAX];
	const char *name;
	json_t *v;
	int rc;

	if ((rc = want(c, obj, JSON_OBJECT, where,
		       "an object of names and addresses, like {\"api.example.com\": "
		       "\"198.18.0.10\"}")))
		return rc;
	json_object_foreach((json_t *)obj, name, v)
	{
		struct pin p = {0};

		join(w, where, name);
		if (host_name_normalize(name, p.name, e, sizeof(e)))
			return cfg_error(c, "%s: name \"%s\": %s", where, safe(name, q, sizeof(q)),
					 e);
		if ((rc = want(c, v, JSON_STRING, w, "an address, \"IP\" or \"IP:PORT\"")))
			return rc;
		if ((rc = addr_value(c, w, json_string_value(v), &p.addr, &p.port)))
			return rc;
		if (config_add_pin(cfg, &p))
			return oom(c);
	}
	return 0;
}

static int parse_public(struct ctx *c, const json_t *arr, struct errand_config *cfg)
{
	const char *where = "sandbox.egress.treatAsPublic";
	char w[WHERE_MAX];
	struct cidr *grown;
	size_t i;
	json_t *v;
	int rc;

	if ((rc = want(c, arr, JSON_ARRAY, where, "a list of ranges, like [\"198.18.0.0/15\"]")))
		return rc;
	grown = reallocarray(cfg->public_ranges, cfg->n_public + json_array_size(arr) + 1,
			     sizeof(*grown));
	if (!grown)
		return oom(c);
	cfg->public_ranges = grown;
	json_array_foreach(arr, i, v)
	{
		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if ((rc = want(c, v, JSON_STRING, w, "a range, like \"198.18.0.0/15\"")))
			return rc;
		if ((rc = cidr_value(c, w, json_string_value(v), &grown[cfg->n_public])))
			return rc;
		cfg->n_public++;
	}
	return 0;
}

static int parse_mode(struct ctx *c, const json_t *v, const char *where, const char *a,
		      const char *b, int *out)
{
	char q[SAFE_MAX];
	char how[64];
	int rc;

	snprintf(how, sizeof(how), "\"%s\" or \"%s\"", a, b);
	if ((rc = want(c, v, JSON_STRING, where, how)))
		return rc;
	if (!strcmp(json_string_value(v), a))
		*out = 0;
	else if (!strcmp(json_string_value(v), b))
		*out = 1;
	else
		return cfg_error(c, "%s: \"%s\" is not a mode; write %s", where,
				 safe(json_string_value(v), q, sizeof(q)), how);
	return 0;
}

static int parse_egress(struct ctx *c, const json_t *eg, struct errand_config *cfg)
{
	static const char *const known[] = {"allow",	     "mode",	 "pins",
					    "treatAsPublic", "readOnly", "writeAllowed",
					    "allowInternal", NULL};
	json_t *v;
	int rc, mode;

	if ((rc = section(c, eg, "sandbox.egress", known, NULL)))
		return rc;
	cfg->egress_given = true;
	if ((v = get(eg, "allow")) && (rc = parse_rules(c, v, "sandbox.egress.allow", cfg)))
		return rc;
	if ((v = get(eg, "mode"))) {
		if ((rc = parse_mode(c, v, "sandbox.egress.mode", "restricted", "open", &mode)))
			return rc;
		cfg->egress_mode = mode ? EGRESS_OPEN : EGRESS_RESTRICTED;
	}
	if ((v = get(eg, "pins")) && (rc = parse_pins(c, v, cfg)))
		return rc;
	if ((v = get(eg, "treatAsPublic")) && (rc = parse_public(c, v, cfg)))
		return rc;
	/* method gating: true gates every allowed host, a list those hosts
	 * (allowed too); writeAllowed names the hosts that may still write */
	if ((v = get(eg, "readOnly")) && json_is_boolean(v)) {
		cfg->read_only_all = json_is_true(v);
	} else if (v) {
		if (!json_is_array(v))
			return cfg_error(
				c,
				"sandbox.egress.readOnly is %s; write true, false or a list "
				"of host rules, like [\"api.github.com\"]",
				kind(v));
		if ((rc = parse_rules_into(c, v, "sandbox.egress.readOnly", &cfg->read_only,
					   &cfg->n_read_only)) ||
		    (rc = parse_rules(c, v, "sandbox.egress.readOnly", cfg)))
			return rc;
	}
	if ((v = get(eg, "writeAllowed")) &&
	    (rc = parse_rules_into(c, v, "sandbox.egress.writeAllowed", &cfg->write_allowed,
				   &cfg->n_write_allowed)))
		return rc;
	if ((v = get(eg, "allowInternal")) &&
	    (rc = want(c, v, JSON_TRUE, "sandbox.egress.allowInternal", "true or false")))
		return rc;
	return 0;
}

static int parse_ports(struct ctx *c, const json_t *arr, struct errand_config *cfg)
{
	const char *where = "sandbox.egressPorts";
	char w[WHERE_MAX];
	size_t i, n = 0;
	json_t *v;
	int rc;

	if ((rc = want(c, arr, JSON_ARRAY, where, "a list of ports, like [443, 8443]")))
		return rc;
	if (json_array_size(arr) > CONFIG_MAX_PORTS)
		return cfg_error(c, "%s: %zu ports; name at most %d", where, json_array_size(arr),
				 CONFIG_MAX_PORTS);
	json_array_foreach(arr, i, v)
	{
		json_int_t port;
		bool dup = false;

		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if ((rc = want(c, v, JSON_INTEGER, w, "a port number 1-65535")))
			return rc;
		port = json_integer_value(v);
		if (port < 1 || port > 65535)
			return cfg_error(c, "%s: %lld is not a port; use 1-65535", where,
					 (long long)port);
		for (size_t j = 0; j < n; j++)
			dup |= cfg->egress_ports[j] == port;
		if (!dup)
			cfg->egress_ports[n++] = (uint16_t)port;
	}
	cfg->n_egress_ports = n;
	return 0;
}

static int parse_pool(struct ctx *c, const json_t *v, struct errand_config *cfg)
{
	const char *where = "sandbox.addressPool";
	char q[SAFE_MAX];
	struct cidr pool;
	int rc;

	if ((rc = want(c, v, JSON_STRING, where, "an IPv4 range, like \"" DEFAULT_POOL "\"")))
		return rc;
	if ((rc = cidr_value(c, where, json_string_value(v), &pool)))
		return rc;
	if (!addr_is_v4(&pool.a) || pool.prefixlen < 96)
		return cfg_error(c, "%s: \"%s\" is not an IPv4 range; write one like " DEFAULT_POOL,
				 where, safe(json_string_value(v), q, sizeof(q)));
	if (pool.prefixlen < 96 + 8 || pool.prefixlen > 96 + 28)
		return cfg_error(c,
				 "%s: a /%d pool is out of range; use a prefix of 8 to 28 bits, "
				 "like " DEFAULT_POOL,
				 where, pool.prefixlen - 96);
	cfg->pool = pool;
	return 0;
}

static int parse_pool6(struct ctx *c, const json_t *v, struct errand_config *cfg)
{
	const char *where = "sandbox.addressPool6";
	char q[SAFE_MAX];
	struct cidr pool;
	int rc;

	if ((rc = want(c, v, JSON_STRING, where, "an IPv6 range, like \"" DEFAULT_POOL6 "\"")))
		return rc;
	if ((rc = cidr_value(c, where, json_string_value(v), &pool)))
		return rc;
	if (addr_is_v4(&pool.a) || strchr(json_string_value(v), ':') == NULL)
		return cfg_error(c,
				 "%s: \"%s\" is not an IPv6 range; write one like " DEFAULT_POOL6,
				 where, safe(json_string_value(v), q, sizeof(q)));
	/* The session's IPv4 address fills the last 32 bits: a longer prefix
	 * would overlap it. A unique-local range, so that no session address
	 * is anyone's public one (NAT66 carries it out). */
	if (pool.prefixlen < 8 || pool.prefixlen > 96 || (pool.a.b[0] & 0xfe) != 0xfc)
		return cfg_error(c,
				 "%s: \"%s\" is not a unique-local range of /8 to /96; use one "
				 "in fc00::/7, like " DEFAULT_POOL6,
				 where, safe(json_string_value(v), q, sizeof(q)));
	cfg->pool6 = pool;
	return 0;
}

static int parse_id(struct ctx *c, const json_t *v, const char *where, uint32_t *out)
{
	json_int_t id;
	int rc;

	if ((rc = want(c, v, JSON_INTEGER, where, "a whole number, like 1000")))
		return rc;
	id = json_integer_value(v);
	if (id == 0)
		return cfg_error(c,
				 "%s: 0 is root, and sessions never run as root; name an "
				 "unprivileged account's id, like %d",
				 where, NOBODY_ID);
	/* (uid_t)-1 means "no change" to setresuid: never an account */
	if (id < 0 || id >= (json_int_t)UINT32_MAX)
		return cfg_error(c, "%s: %lld is not an id; use 1-%u", where, (long long)id,
				 UINT32_MAX - 1);
	*out = (uint32_t)id;
	return 0;
}

/* A whole number in [min, max] at obj.key, if present. */
static int parse_uint(struct ctx *c, const json_t *obj, const char *section_name, const char *key,
		      uint32_t min, uint32_t max, uint32_t *out)
{
	char w[WHERE_MAX];
	json_int_t n;
	json_t *v;
	int rc;

	v = get(obj, key);
	if (!v)
		return 0;
	join(w, section_name, key);
	if ((rc = want(c, v, JSON_INTEGER, w, "a whole number")))
		return rc;
	n = json_integer_value(v);
	if (n < (json_int_t)min || n > (json_int_t)max)
		return cfg_error(c, "%s: %lld is out of range; use %u-%u", w, (long long)n, min,
				 max);
	*out = (uint32_t)n;
	return 0;
}

static void strv_free(struct config_strv *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Appends an owned copy; the list stays NULL-terminated. */
static int strv_add(struct config_strv *l, const char *s)
{
	char **grown = reallocarray(l->v, l->n + 2, sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	l->v = grown;
	l->v[l->n] = strdup(s);
	if (!l->v[l->n])
		return -ENOMEM;
	l->v[++l->n] = NULL;
	return 0;
}

/* A path a session is given: absolute (after the launcher's pivot there is
 * no working directory to resolve a relative one against), plain (no empty,
 * . or .. part, so the report names what is granted), not / itself, and
 * free of ':' so that it can stand in PATH. */
static int check_abs_path(struct ctx *c, const char *where, const char *s)
{
	char q[SAFE_MAX];

	if (s[0] != '/')
		return cfg_error(c,
				 "%s: \"%s\" is not an absolute path; write it from /, since a "
				 "session has no working directory to resolve it against",
				 where, safe(s, q, sizeof(q)));
	if (!s[1])
		return cfg_error(c, "%s: \"/\" would grant the whole filesystem; name directories",
				 where);
	for (const char *p = s + 1;; p++) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return cfg_error(c,
					 "%s: \"%s\" has an empty, . or .. part; write the plain "
					 "path, like \"/opt/toolchains\"",
					 where, safe(s, q, sizeof(q)));
		p += n;
		if (!*p)
			break;
	}
	if (strchr(s, ':'))
		return cfg_error(c, "%s: \"%s\" contains ':', which PATH cannot carry; rename it",
				 where, safe(s, q, sizeof(q)));
	if (strlen(s) >= PATH_MAX / 2)
		return cfg_error(c, "%s is too long; name a path of fewer than %d bytes", where,
				 PATH_MAX / 2);
	return 0;
}

/* A grant under what every session has of its own: its /proc (its own
 * processes; the host's would show every process on the host, other
 * sessions' among them, and their roots through /proc/PID/root) and its /dev
 * (a few nodes; the host's, bound nodev, would leave even /dev/null
 * unusable). NULL when path is elsewhere. */
static const char *grant_floor(const char *path)
{
	static const char *const own[] = {"/proc", "/dev"};

	for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
		size_t n = strlen(own[i]);

		if (!strncmp(path, own[i], n) && (path[n] == '/' || path[n] == '\0'))
			return own[i];
	}
	return NULL;
}

/* A list of absolute paths, appended to out; grants (grant) not under the
 * session's own. */
static int parse_paths(struct ctx *c, const json_t *arr, const char *where, bool grant,
		       struct config_strv *out)
{
	char w[WHERE_MAX], q[SAFE_MAX];
	const char *floor;
	size_t i;
	json_t *v;
	int rc;

	if (!arr)
		return 0;
	if ((rc = want(c, arr, JSON_ARRAY, where,
		       "a list of absolute paths, like [\"/opt/data\"]")))
		return rc;
	json_array_foreach(arr, i, v)
	{
		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if ((rc = want(c, v, JSON_STRING, w, "an absolute path, like \"/opt/data\"")) ||
		    (rc = check_abs_path(c, w, json_string_value(v))))
			return rc;
		if (grant && (floor = grant_floor(json_string_value(v))))
			return cfg_error(
				c,
				"%s: \"%s\" is under %s, which each session has of its own; "
				"errand never binds the host's there: remove it",
				w, safe(json_string_value(v), q, sizeof(q)), floor);
		if (strv_add(out, json_string_value(v)))
			return oom(c);
	}
	return 0;
}

const char *config_env_reserved(const char *name)
{
	if (!strcmp(name, "PATH"))
		return "errand sets PATH itself; put directories in sandbox.pathExtra";
	if (!strcmp(name, "HOME"))
		return "errand sets HOME to the session's state directory";
	if (!strncmp(name, "ERRAND_", 7))
		return "names beginning with ERRAND_ are errand's own";
	return NULL;
}

static bool env_name_ok(const char *s)
{
	if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
		return false;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

/* sandbox.env: names are checked and may be printed; values never are. */
static int parse_env(struct ctx *c, const json_t *obj, struct errand_config *cfg)
{
	const char *where = "sandbox.env", *name, *why;
	char w[WHERE_MAX];
	json_t *v;
	int rc;

	if ((rc = want(c, obj, JSON_OBJECT, where,
		       "an object of names and values, like {\"LANG\": \"C.UTF-8\"}")))
		return rc;
	json_object_foreach((json_t *)obj, name, v)
	{
		cleanup_free char *entry = NULL;

		join(w, where, name);
		if (!env_name_ok(name))
			return cfg_error(c,
					 "%s: the name is not [A-Za-z_][A-Za-z0-9_]*; rename the "
					 "variable",
					 w);
		if ((why = config_env_reserved(name)))
			return cfg_error(c, "%s is refused: %s; remove it", w, why);
		if (!json_is_string(v))
			return cfg_error(c, "%s is %s; write a string value", w, kind(v));
		if (strlen(json_string_value(v)) != json_string_length(v))
			return cfg_error(c, "%s holds a NUL character, which no variable can carry",
					 w);
		if (asprintf(&entry, "%s=%s", name, json_string_value(v)) < 0) {
			entry = NULL;
			return oom(c);
		}
		if (strv_add(&cfg->env, entry))
			return oom(c);
	}
	return 0;
}

static int parse_syscalls(struct ctx *c, const json_t *arr, struct errand_config *cfg)
{
	const char *where = "sandbox.blockedSyscalls";
	char w[WHERE_MAX], q[SAFE_MAX];
	size_t i;
	json_t *v;
	int rc;

	if ((rc = want(c, arr, JSON_ARRAY, where, "a list of syscall names, like [\"ptrace\"]")))
		return rc;
	json_array_foreach(arr, i, v)
	{
		const char *name;

		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if ((rc = want(c, v, JSON_STRING, w, "a syscall name, like \"ptrace\"")))
			return rc;
		name = json_string_value(v);
		/* The launcher's filter resolves names with the same libseccomp. */
		if (seccomp_syscall_resolve_name(name) == __NR_SCMP_ERROR)
			return cfg_error(c,
					 "%s: \"%s\" is not a system call libseccomp knows on "
					 "this architecture; check the name (man 2 syscalls)",
					 w, safe(name, q, sizeof(q)));
		if (strv_add(&cfg->blocked_syscalls, name))
			return oom(c);
	}
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	unsigned long long n;
	unsigned int shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (lower(*end)) {
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	case 't':
		shift = 40;
		break;
	case '\0':
		break;
	default:
		return -EINVAL;
	}
	if (shift) {
		end++;
		if (lower(*end) == 'i')
			end++;
		if (lower(*end) == 'b')
			end++;
	}
	if (*end || n > (UINT64_MAX >> 2) >> shift)
		return -EINVAL;
	*out = (uint64_t)n << shift;
	return 0;
}

/* A size at sandbox.limits.key: a number of bytes or a string like "512m". */
static int parse_size_key(struct ctx *c, const json_t *obj, const char *key, uint64_t *out)
{
	char w[WHERE_MAX], q[SAFE_MAX];
	json_t *v = get(obj, key);
	uint64_t n;

	if (!v)
		return 0;
	join(w, "sandbox.limits", key);
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v) && !config_parse_size(json_string_value(v), &n) && n > 0) {
		*out = n;
		return 0;
	}
	if (json_is_string(v))
		return cfg_error(c, "%s: \"%s\" is not a size; write one like \"512m\" or \"1g\"",
				 w, safe(json_string_value(v), q, sizeof(q)));
	return cfg_error(c, "%s is %s; write a size above 0, like \"512m\" or \"1g\"", w,
			 json_is_integer(v) ? "not above 0" : kind(v));
}

static int parse_limits(struct ctx *c, const json_t *obj, struct config_limits *l)
{
	static const char *const known[] = {"memory", "cpu", "pids", "fileSize",
					    "tmp",    "shm", "disk", NULL};
	json_t *v;
	int rc;

	if ((rc = section(c, obj, "sandbox.limits", known, NULL)) ||
	    (rc = parse_size_key(c, obj, "memory", &l->memory)) ||
	    (rc = parse_size_key(c, obj, "fileSize", &l->file_size)) ||
	    (rc = parse_size_key(c, obj, "tmp", &l->tmp)) ||
	    (rc = parse_size_key(c, obj, "shm", &l->shm)) ||
	    (rc = parse_size_key(c, obj, "disk", &l->disk)) ||
	    (rc = parse_uint(c, obj, "sandbox.limits", "pids", 1, 4194304, &l->pids)))
		return rc;
	if ((v = get(obj, "cpu"))) {
		double cpus = json_is_number(v) ? json_number_value(v) : 0;

		if (!json_is_number(v) || cpus < 0.01 || cpus > 4096)
			return cfg_error(c,
					 "sandbox.limits.cpu is %s; write a number of CPUs from "
					 "0.01 to 4096, like 2 or 0.5",
					 json_is_number(v) ? "out of range" : kind(v));
		l->cpu_milli = (uint32_t)(cpus * 1000 + 0.5);
	}
	return 0;
}

/* sandbox.rules: cowboy's rule syntax, Verb(ARGUMENT). */
static const char *const rule_verbs[] = {
	[RULE_READ] = "Read",	  [RULE_EDIT] = "Edit", [RULE_CREATE] = "Create",
	[RULE_DELETE] = "Delete", [RULE_EXEC] = "Exec", [RULE_CONNECT] = "Connect",
};

const char *const config_host_authorities[] = {
	"/run/docker.sock",
	"/var/run/docker.sock",
	"/nix/var/nix/daemon-socket/socket",
	"/run/containerd/containerd.sock",
	"/run/dbus/system_bus_socket",
	"/var/run/dbus/system_bus_socket",
	NULL,
};

const char *config_rule_verb_name(enum config_rule_verb v)
{
	return v < RULE_VERBS ? rule_verbs[v] : "?";
}

const char *config_rule_kind_name(enum config_rule_kind k)
{
	return k == RULE_LAZY ? "lazyAllow" : k == RULE_DENY ? "deny" : "allow";
}

/* A rule's PATH: absolute or under ~/, plain segments, '*' within a
 * segment and '**' as a whole segment; Connect names one socket. */
static int rule_path_check(const char *where, const char *text, const char *path, bool connect,
			   char *err, size_t errlen)
{
	const char *p = path;

	if (!strncmp(p, "~/", 2))
		p += 1;
	if (p[0] != '/') {
		snprintf(err, errlen,
			 "%s: \"%s\" names a relative path; write it from / or from ~/ (the "
			 "session's HOME), like \"Read(/srv/data/**)\"",
			 where, text);
		return -EINVAL;
	}
	if (strlen(path) >= CONFIG_RULE_PATH_MAX - 16) {
		snprintf(err, errlen, "%s: the path is longer than %d bytes; name a shorter one",
			 where, CONFIG_RULE_PATH_MAX - 17);
		return -EINVAL;
	}
	if (!p[1] && !connect) {
		snprintf(err, errlen, "%s: \"%s\" names / itself; write \"/**\" for everything",
			 where, text);
		return -EINVAL;
	}
	for (p++;; p++) {
		size_t n = strcspn(p, "/");
		const char *star = memchr(p, '*', n);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(err, errlen,
				 "%s: \"%s\" has an empty, . or .. part; write the plain path",
				 where, text);
			return -EINVAL;
		}
		if (star && connect) {
			snprintf(err, errlen,
				 "%s: \"%s\": a Connect rule names one socket; write its path "
				 "without '*'",
				 where, text);
			return -EINVAL;
		}
		/* "**" stands alone in its segment; "***" or "a**" mean nothing more */
		if (star && strstr(p, "**") && strstr(p, "**") < p + n &&
		    !(n == 2 && p[0] == '*')) {
			snprintf(err, errlen,
				 "%s: \"%s\": '**' must be a whole path segment, like "
				 "\"/srv/**/*.log\"; '*' alone matches within one segment",
				 where, text);
			return -EINVAL;
		}
		p += n;
		if (!*p)
			break;
	}
	return 0;
}

int config_rule_parse(const char *where, const char *text, enum config_rule_kind kind,
		      struct config_rule *out, char *err, size_t errlen)
{
	const char *open = strchr(text, '('), *arg;
	size_t vlen, alen = strlen(text);
	const char *floor;
	char verb[32], *path;
	int v, r;

	memset(out, 0, sizeof(*out));
	if (!open || alen < 3 || text[alen - 1] != ')' || open == text ||
	    (size_t)(open - text) >= sizeof(verb) || strchr(open + 1, '(') ||
	    strchr(open + 1, ')') != text + alen - 1) {
		snprintf(err, errlen,
			 "%s: \"%s\" is not a rule; write Verb(PATH), like \"Read(/srv/data/**)\" "
			 "or \"Connect(unix:/run/app.sock)\"",
			 where, text);
		return -EINVAL;
	}
	vlen = (size_t)(open - text);
	memcpy(verb, text, vlen);
	verb[vlen] = '\0';
	arg = open + 1;
	alen = alen - vlen - 2;
	if (!strcmp(verb, "Bash")) {
		snprintf(err, errlen,
			 "%s: \"%s\" is refused: a command prefix can only be matched on the "
			 "arguments in the process's memory, which it can change after the check; "
			 "write Exec(PATH) for the program instead",
			 where, text);
		return -EINVAL;
	}
	for (v = 0; v < RULE_VERBS; v++)
		if (!strcmp(verb, rule_verbs[v]))
			break;
	if (v == RULE_VERBS) {
		const char *near = NULL;

		for (int k = 0; k < RULE_VERBS && !near; k++)
			if (config_key_distance(verb, rule_verbs[k]) <= 1)
				near = rule_verbs[k];
		if (!near && config_key_distance(verb, "Bash") <= 1)
			near = "Bash";
		if (near)
			snprintf(err, errlen, "%s: unknown verb %s in \"%s\"; did you mean %s?",
				 where, verb, text, near);
		else
			snprintf(err, errlen,
				 "%s: unknown verb %s in \"%s\"; write one of Read, Edit, Create, "
				 "Delete, Exec, Connect",
				 where, verb, text);
		return -EINVAL;
	}
	if (v == RULE_CONNECT) {
		if (alen < 5 || strncmp(arg, "unix:", 5)) {
			snprintf(err, errlen,
				 "%s: \"%s\": Connect takes a unix socket's path, like "
				 "\"Connect(unix:/run/app.sock)\"",
				 where, text);
			return -EINVAL;
		}
		arg += 5;
		alen -= 5;
	}
	path = strndup(arg, alen);
	if (!path) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((r = rule_path_check(where, text, path, v == RULE_CONNECT, err, errlen))) {
		free(path);
		return r;
	}
	/* An allow binds its directory; a deny there only narrows. */
	if (kind == RULE_ALLOW && (floor = grant_floor(path))) {
		snprintf(err, errlen,
			 "%s: \"%s\" is under %s, which each session has of its own; errand never "
			 "binds the host's there: remove it",
			 where, text, floor);
		free(path);
		return -EINVAL;
	}
	out->kind = kind;
	out->verb = (enum config_rule_verb)v;
	out->path = path;
	out->text = strdup(text);
	if (!out->text) {
		free(path);
		out->path = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static void rules_free(struct config_rules *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].text);
		free(l->v[i].path);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int rules_add(struct config_rules *l, const struct config_rule *r)
{
	struct config_rule *grown = reallocarray(l->v, l->n + 1, sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	l->v = grown;
	l->v[l->n++] = *r;
	return 0;
}

static int parse_rule_list(struct ctx *c, const json_t *arr, const char *where,
			   enum config_rule_kind kind, struct errand_config *cfg)
{
	char w[WHERE_MAX], msg[CONFIG_ERRLEN];
	size_t i;
	json_t *v;
	int rc;

	if (!arr)
		return 0;
	if ((rc = want(c, arr, JSON_ARRAY, where, "a list of rules, like [\"Read(~/.ssh/**)\"]")))
		return rc;
	json_array_foreach(arr, i, v)
	{
		struct config_rule r;

		snprintf(w, sizeof(w), "%s[%zu]", where, i);
		if ((rc = want(c, v, JSON_STRING, w, "a rule, like \"Read(/srv/data/**)\"")))
			return rc;
		if ((rc = config_rule_parse(w, json_string_value(v), kind, &r, msg, sizeof(msg))))
			return rc == -ENOMEM ? oom(c) : cfg_error(c, "%s", msg);
		if (rules_add(&cfg->rules, &r)) {
			free(r.text);
			free(r.path);
			return oom(c);
		}
		if (cfg->rules.n > CONFIG_RULES_MAX - 16)
			return cfg_error(c, "sandbox.rules holds more than %d rules; merge some",
					 CONFIG_RULES_MAX - 16);
	}
	return 0;
}

static int parse_rules_section(struct ctx *c, const json_t *v, struct errand_config *cfg)
{
	static const char *const keys[] = {"lazyAllow", "deny", "allow", NULL};
	int rc;

	if ((rc = section(c, v, "sandbox.rules", keys, NULL)))
		return rc;
	if ((rc = parse_rule_list(c, get(v, "lazyAllow"), "sandbox.rules.lazyAllow", RULE_LAZY,
				  cfg)) ||
	    (rc = parse_rule_list(c, get(v, "deny"), "sandbox.rules.deny", RULE_DENY, cfg)) ||
	    (rc = parse_rule_list(c, get(v, "allow"), "sandbox.rules.allow", RULE_ALLOW, cfg)))
		return rc;
	return 0;
}

static int builtin_rule(struct errand_config *cfg, enum config_rule_kind kind, const char *text)
{
	struct config_rule r;
	char err[256];

	if (config_rule_parse("errand", text, kind, &r, err, sizeof(err)))
		return -ENOMEM; /* errand's own texts parse */
	r.builtin = true;
	if (rules_add(&cfg->rules, &r)) {
		free(r.text);
		free(r.path);
		return -ENOMEM;
	}
	return 0;
}

int config_rules_defaults(struct errand_config *cfg)
{
	static const char *const journal[] = {"/var/log/journal/**", "/run/log/journal/**"};
	char text[CONFIG_RULE_PATH_MAX + 16], control[CONFIG_RULE_PATH_MAX];
	const char *own[ARRAY_SIZE(config_host_authorities) + 1];
	size_t n = 0;
	int rc;

	for (const char *const *a = config_host_authorities; *a; a++)
		own[n++] = *a;
	/* errand's own control socket, wherever paths.run puts it */
	if (cfg->run_dir && (size_t)snprintf(control, sizeof(control), "%s/agent.sock",
					     cfg->run_dir) < sizeof(control) - 16)
		own[n++] = control;
	own[n] = NULL;
	for (const char *const *a = own; *a; a++) {
		bool granted = false;

		for (size_t i = 0; i < cfg->rules.n; i++)
			granted |= cfg->rules.v[i].kind != RULE_DENY &&
				   cfg->rules.v[i].verb == RULE_CONNECT &&
				   !strcmp(cfg->rules.v[i].path, *a);
		snprintf(text, sizeof(text), "Connect(unix:%s)", *a);
		if (!granted && (rc = builtin_rule(cfg, RULE_DENY, text)))
			return rc;
	}
	for (size_t i = 0; i < ARRAY_SIZE(journal); i++) {
		snprintf(text, sizeof(text), "Read(%s)", journal[i]);
		if ((rc = builtin_rule(cfg, cfg->allow_journal ? RULE_ALLOW : RULE_DENY, text)))
			return rc;
	}
	return 0;
}

static bool cidr_overlap(const struct cidr *a, const struct cidr *b)
{
	return a->prefixlen <= b->prefixlen ? cidr_contains(a, &b->a) : cidr_contains(b, &a->a);
}

/* Every address of the pool (the sessions' gateways and their own) must be
 * refused to every session by its range: a session never reaches another's
 * gateway, which is this host, and the agent need not follow the thousands
 * of gateway addresses as the host's own. */
static int check_pool(struct ctx *c, const struct errand_config *cfg)
{
	const struct cidr *f = NULL, *forbid;
	char a[ADDR_STRLEN], b[ADDR_STRLEN];
	size_t n;

	forbid = forbidden_ranges(&n);
	for (size_t i = 0; i < n && !f; i++)
		if (forbid[i].prefixlen <= cfg->pool.prefixlen &&
		    cidr_contains(&forbid[i], &cfg->pool.a))
			f = &forbid[i];
	if (!f)
		return cfg_error(c,
				 "sandbox.addressPool: %s/%d is not in a range refused to "
				 "sessions; use a private one like "
				 "10.213.0.0/16",
				 addr_str(&cfg->pool.a, a), cfg->pool.prefixlen - 96);
	for (size_t i = 0; i < cfg->n_public; i++)
		if (cidr_overlap(&cfg->public_ranges[i], &cfg->pool))
			return cfg_error(c,
					 "sandbox.egress.treatAsPublic: %s/%d overlaps "
					 "sandbox.addressPool %s/%d, the sessions' own addresses; "
					 "narrow one of them",
					 addr_str(&cfg->public_ranges[i].a, a),
					 cfg->public_ranges[i].prefixlen -
						 (addr_is_v4(&cfg->public_ranges[i].a) ? 96 : 0),
					 addr_str(&cfg->pool.a, b), cfg->pool.prefixlen - 96);
	for (size_t i = 0; i < cfg->n_public; i++)
		if (cidr_overlap(&cfg->public_ranges[i], &cfg->pool6))
			return cfg_error(c,
					 "sandbox.egress.treatAsPublic: %s/%d overlaps "
					 "sandbox.addressPool6 %s/%d, the sessions' own addresses; "
					 "narrow one of them",
					 addr_str(&cfg->public_ranges[i].a, a),
					 cfg->public_ranges[i].prefixlen -
						 (addr_is_v4(&cfg->public_ranges[i].a) ? 96 : 0),
					 addr_str(&cfg->pool6.a, b), cfg->pool6.prefixlen);
	return 0;
}

static int parse_sandbox(struct ctx *c, const json_t *sb, struct errand_config *cfg)
{
	static const char *const known[] = {"network",
					    "egress",
					    "egressPorts",
					    "addressPool",
					    "addressPool6",
					    "requireFullEnforcement",
					    "uid",
					    "gid",
					    "policyExtra",
					    "env",
					    "pathExtra",
					    "limits",
					    "blockedSyscalls",
					    "image",
					    "rules",
					    "allowJournal",
					    "pool",
					    NULL};
	static const char *const policy_keys[] = {"read", "write", "execute", NULL};
	uint32_t id;
	json_t *v;
	int rc, mode;

	if ((rc = section(c, sb, "sandbox", known, NULL)))
		return rc;
	if ((v = get(sb, "network"))) {
		if ((rc = parse_mode(c, v, "sandbox.network", "restricted", "none", &mode)))
			return rc;
		cfg->network = mode ? NETWORK_NONE : NETWORK_RESTRICTED;
	}
	if ((v = get(sb, "egress")) && (rc = parse_egress(c, v, cfg)))
		return rc;
	if ((v = get(sb, "egressPorts")) && (rc = parse_ports(c, v, cfg)))
		return rc;
	if ((v = get(sb, "addressPool")) && (rc = parse_pool(c, v, cfg)))
		return rc;
	if ((v = get(sb, "addressPool6")) && (rc = parse_pool6(c, v, cfg)))
		return rc;
	if ((v = get(sb, "requireFullEnforcement"))) {
		if ((rc = want(c, v, JSON_TRUE, "sandbox.requireFullEnforcement", "true or false")))
			return rc;
		cfg->require_full = json_is_true(v);
	}
	if ((v = get(sb, "uid"))) {
		if ((rc = parse_id(c, v, "sandbox.uid", &id)))
			return rc;
		cfg->uid = id;
	}
	if ((v = get(sb, "gid"))) {
		if ((rc = parse_id(c, v, "sandbox.gid", &id)))
			return rc;
		cfg->gid = id;
	}
	if ((v = get(sb, "policyExtra"))) {
		if ((rc = section(c, v, "sandbox.policyExtra", policy_keys, NULL)))
			return rc;
		if ((rc = parse_paths(c, get(v, "read"), "sandbox.policyExtra.read", true,
				      &cfg->policy_read)) ||
		    (rc = parse_paths(c, get(v, "write"), "sandbox.policyExtra.write", true,
				      &cfg->policy_write)) ||
		    (rc = parse_paths(c, get(v, "execute"), "sandbox.policyExtra.execute", true,
				      &cfg->policy_exec)))
			return rc;
	}
	if ((v = get(sb, "limits")) && (rc = parse_limits(c, v, &cfg->limits)))
		return rc;
	if ((v = get(sb, "env")) && (rc = parse_env(c, v, cfg)))
		return rc;
	if ((v = get(sb, "pathExtra")) &&
	    (rc = parse_paths(c, v, "sandbox.pathExtra", false, &cfg->path_extra)))
		return rc;
	if ((v = get(sb, "blockedSyscalls")) && (rc = parse_syscalls(c, v, cfg)))
		return rc;
	if ((v = get(sb, "rules")) && (rc = parse_rules_section(c, v, cfg)))
		return rc;
	if ((v = get(sb, "allowJournal"))) {
		if ((rc = want(c, v, JSON_TRUE, "sandbox.allowJournal", "true or false")))
			return rc;
		cfg->allow_journal = json_is_true(v);
	}
	if ((rc = parse_uint(c, sb, "sandbox", "pool", 0, POOL_MAX, &cfg->pool_size)))
		return rc;
	if ((v = get(sb, "image"))) {
		if ((rc = want(c, v, JSON_STRING, "sandbox.image",
			       "a directory, like \"/srv/errand/image\"")) ||
		    (rc = check_abs_path(c, "sandbox.image", json_string_value(v))))
			return rc;
		if (set_string(&cfg->image, json_string_value(v)))
			return oom(c);
	}
	return check_pool(c, cfg);
}

/* where.key and where[i] for the keys of a provider, whose where is itself
 * built: a name too long for the message is cut, the message stays one line. */
static void where_key(char *out, size_t len, const char *where, const char *key)
{
	char k[SAFE_MAX];
	int n = snprintf(out, len, "%s.%s", where, safe(key, k, sizeof(k)));

	if (n < 0 || (size_t)n >= len)
		out[len - 1] = '\0';
}

static void where_index(char *out, size_t len, const char *where, size_t i)
{
	int n = snprintf(out, len, "%s[%zu]", where, i);

	if (n < 0 || (size_t)n >= len)
		out[len - 1] = '\0';
}

/* A provider's name goes into a route and an environment variable's name. */
static bool provider_name_ok(const char *s)
{
	return name_token_ok(s, 64);
}

/* baseUrl: https://HOST[:PORT][/PATH], or http:// to a loopback address
 * written as one, and only with sandbox.egress.allowInternal: the key
 * travels on every call. */
static int provider_url(struct ctx *c, const char *where, const char *url,
			struct config_provider *p)
{
	char q[SAFE_MAX], host[256];
	const char *rest, *end, *hs, *he;
	unsigned long port = 0;
	struct addr a;
	char *pe;

	if (!strncmp(url, "https://", 8)) {
		p->tls = true;
		rest = url + 8;
	} else if (!strncmp(url, "http://", 7)) {
		rest = url + 7;
	} else {
		return cfg_error(c,
				 "%s: \"%s\" is not an https:// URL; write one like "
				 "\"https://api.anthropic.com\"",
				 where, safe(url, q, sizeof(q)));
	}
	end = rest + strcspn(rest, "/?#");
	if (*end == '?' || *end == '#' || strpbrk(end, "?#"))
		return cfg_error(c,
				 "%s: \"%s\" has a query or fragment; write the URL up to its "
				 "path",
				 where, safe(url, q, sizeof(q)));
	hs = rest;
	if (*hs == '[') {
		he = memchr(hs, ']', (size_t)(end - hs));
		if (!he)
			return cfg_error(c, "%s: \"%s\" has an unclosed [; write [IPv6]:PORT",
					 where, safe(url, q, sizeof(q)));
		hs++;
		pe = (char *)he + 1;
	} else {
		he = memchr(hs, ':', (size_t)(end - hs));
		if (!he)
			he = end;
		pe = (char *)he;
	}
	if (memchr(rest, '@', (size_t)(end - rest)) || he == hs ||
	    (size_t)(he - hs) >= sizeof(host))
		return cfg_error(c,
				 "%s: \"%s\" has no plain host; write one like "
				 "\"https://api.example.com/v1\"",
				 where, safe(url, q, sizeof(q)));
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	for (char *h = host; *h; h++)
		*h = lower(*h);
	if (*pe == ':') {
		char *stop;

		port = pe[1] >= '0' && pe[1] <= '9' ? strtoul(pe + 1, &stop, 10) : 0;
		if (!port || stop != end || port > 65535)
			return cfg_error(c, "%s: \"%s\" has no valid port; use 1-65535", where,
					 safe(url, q, sizeof(q)));
	} else if (pe != end) {
		return cfg_error(c,
				 "%s: \"%s\" is not a URL; write one like "
				 "\"https://api.example.com/v1\"",
				 where, safe(url, q, sizeof(q)));
	}
	p->host_literal = !addr_parse(host, &a);
	if (!p->tls) {
		struct cidr lo4, lo6;

		cidr_parse("127.0.0.0/8", &lo4);
		cidr_parse("::1/128", &lo6);
		if (!p->host_literal || !(cidr_contains(&lo4, &a) || cidr_contains(&lo6, &a)) ||
		    !p->allow_internal)
			return cfg_error(c,
					 "%s: \"%s\" is plain http; write https://, since the "
					 "key travels on every call (http:// is taken only to a "
					 "loopback address written as one, with "
					 "sandbox.egress.allowInternal)",
					 where, safe(url, q, sizeof(q)));
	}
	p->port = port ? (uint16_t)port : p->tls ? 443 : 80;
	p->host = strdup(host);
	p->base_path = strndup(end, strlen(end) - (end[0] && end[strlen(end) - 1] == '/'));
	p->base_url = strdup(url);
	return p->host && p->base_path && p->base_url ? 0 : oom(c);
}

static int provider_file(struct ctx *c, const json_t *v, const char *where, char **dst)
{
	int rc;

	if ((rc = want(c, v, JSON_STRING, where, "an absolute path, like \"/etc/errand/key\"")) ||
	    (rc = check_abs_path(c, where, json_string_value(v))))
		return rc;
	return set_string(dst, json_string_value(v)) ? oom(c) : 0;
}

static int provider_capability(struct ctx *c, const json_t *v, const char *where,
			       struct provider_capability *cap)
{
	static const char *const keys[] = {"method", "path", NULL};
	char w[WHERE_MAX], q[SAFE_MAX];
	const char *m, *path;
	json_t *mv, *pv;
	int rc;

	if ((rc = section(c, v, where, keys, NULL)))
		return rc;
	mv = get(v, "method");
	pv = get(v, "path");
	if (!mv || !pv)
		return cfg_error(c,
				 "%s needs a method and a path, like {\"method\": \"POST\", "
				 "\"path\": \"/v1/messages\"}",
				 where);
	where_key(w, sizeof(w), where, "method");
	if ((rc = want(c, mv, JSON_STRING, w, "a method, like \"POST\", or \"*\"")))
		return rc;
	m = json_string_value(mv);
	if (!*m || strlen(m) >= sizeof(cap->method) ||
	    (strcmp(m, "*") && strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(m)))
		return cfg_error(c,
				 "%s: \"%s\" is not a method; write it upper case, like "
				 "\"POST\", or \"*\"",
				 w, safe(m, q, sizeof(q)));
	where_key(w, sizeof(w), where, "path");
	if ((rc = want(c, pv, JSON_STRING, w, "a path, like \"/v1/messages\"")))
		return rc;
	path = json_string_value(pv);
	if (strcmp(path, "*") && (path[0] != '/' || strchr(path, '?')))
		return cfg_error(c,
				 "%s: \"%s\" is not a path; write one like \"/v1/messages\" "
				 "(* one segment, ** any), without a query",
				 w, safe(path, q, sizeof(q)));
	snprintf(cap->method, sizeof(cap->method), "%s", m);
	cap->path = strdup(path);
	return cap->path ? 0 : oom(c);
}

static int provider_capabilities(struct ctx *c, const json_t *v, const char *where,
				 struct config_provider *p)
{
	char w[WHERE_MAX];
	size_t i;
	json_t *e;
	int rc;

	p->has_caps = true;
	if (json_is_string(v) && !strcmp(json_string_value(v), "*")) {
		p->all_calls = true;
		return 0;
	}
	if ((rc = want(c, v, JSON_ARRAY, where,
		       "a list like [{\"method\": \"POST\", \"path\": \"/v1/messages\"}], or "
		       "\"*\" for every call")))
		return rc;
	if (!json_array_size(v))
		return cfg_error(c,
				 "%s is empty, which would allow no call; list the calls, or "
				 "write \"*\" for every call",
				 where);
	p->caps = calloc(json_array_size(v), sizeof(*p->caps));
	if (!p->caps)
		return oom(c);
	json_array_foreach(v, i, e)
	{
		where_index(w, sizeof(w), where, i);
		if ((rc = provider_capability(c, e, w, &p->caps[i])))
			return rc;
		p->n_caps++;
	}
	return 0;
}

static int provider_placement(struct ctx *c, const json_t *v, const char *where,
			      struct config_provider *p)
{
	char q[SAFE_MAX];
	int rc;

	if (!v) {
		/* left out, it follows an explicit kind */
		if (p->kind && !strcmp(p->kind, "anthropic"))
			p->placement = PLACEMENT_X_API_KEY;
		else if (p->kind && !strcmp(p->kind, "openai"))
			p->placement = PLACEMENT_BEARER;
		else
			return cfg_error(c,
					 "%s: no placement and no kind it follows from; write "
					 "\"placement\": \"bearer\" or \"x-api-key\"",
					 where);
		return 0;
	}
	if ((rc = want(c, v, JSON_STRING, where, "\"bearer\" or \"x-api-key\"")))
		return rc;
	if (!strcmp(json_string_value(v), "bearer"))
		p->placement = PLACEMENT_BEARER;
	else if (!strcmp(json_string_value(v), "x-api-key"))
		p->placement = PLACEMENT_X_API_KEY;
	else
		return cfg_error(c,
				 "%s: \"%s\" is not a placement; write \"bearer\" or "
				 "\"x-api-key\"",
				 where, safe(json_string_value(v), q, sizeof(q)));
	return 0;
}

static int parse_provider(struct ctx *c, const char *where, const json_t *pv,
			  struct config_provider *p)
{
	char w[WHERE_MAX], q[SAFE_MAX];
	json_t *v;
	int rc;

	if (!provider_name_ok(p->name))
		return cfg_error(c,
				 "%s: \"%s\" is not a provider name; use letters, digits, - "
				 "and _ (at most 64)",
				 where, safe(p->name, q, sizeof(q)));
	if ((v = get(pv, "kind"))) {
		where_key(w, sizeof(w), where, "kind");
		if ((rc = want(c, v, JSON_STRING, w, "a kind, like \"anthropic\" or \"openai\"")))
			return rc;
		if (set_string(&p->kind, json_string_value(v)))
			return oom(c);
	}
	where_key(w, sizeof(w), where, "baseUrl");
	if (!(v = get(pv, "baseUrl")))
		return cfg_error(c, "%s is missing; write the provider's https:// URL", w);
	if ((rc = want(c, v, JSON_STRING, w, "an https:// URL")) ||
	    (rc = provider_url(c, w, json_string_value(v), p)))
		return rc;
	where_key(w, sizeof(w), where, "credentialFile");
	if (!(v = get(pv, "credentialFile")))
		return cfg_error(c, "%s is missing; name the file holding the provider's key", w);
	if ((rc = provider_file(c, v, w, &p->credential_file)))
		return rc;
	where_key(w, sizeof(w), where, "trustedCa");
	if ((v = get(pv, "trustedCa")) && (rc = provider_file(c, v, w, &p->trusted_ca)))
		return rc;
	where_key(w, sizeof(w), where, "placement");
	if ((rc = provider_placement(c, get(pv, "placement"), w, p)))
		return rc;
	where_key(w, sizeof(w), where, "capabilities");
	if ((v = get(pv, "capabilities")) && (rc = provider_capabilities(c, v, w, p)))
		return rc;
	where_key(w, sizeof(w), where, "strictCapabilities");
	if ((v = get(pv, "strictCapabilities"))) {
		if ((rc = want(c, v, JSON_TRUE, w, "true or false")))
			return rc;
		p->strict = json_is_true(v);
	}
	if (p->strict && !p->has_caps)
		return cfg_error(c,
				 "%s is true without a capabilities list; list the calls the "
				 "key may make, or leave strictCapabilities out",
				 w);
	return 0;
}

static void provider_free(struct config_provider *p)
{
	free(p->name);
	free(p->kind);
	free(p->base_url);
	free(p->host);
	free(p->base_path);
	free(p->credential_file);
	free(p->trusted_ca);
	for (size_t i = 0; i < p->n_caps; i++)
		free(p->caps[i].path);
	free(p->caps);
}

static int parse_agent(struct ctx *c, const json_t *ag, const json_t *root,
		       struct errand_config *cfg)
{
	static const char *const known[] = {"providers", NULL};
	static const char *const provider_keys[] = {
		"baseUrl", "credentialFile", "placement", "capabilities", "strictCapabilities",
		"kind",	   "trustedCa",	     NULL};
	/* errand's reference refuses these beginnings too: a misspelt placement or
	 * capability list would leave the route open */
	static const struct prefix_rule prefixes[] = {{"place", "placement"},
						      {"strict", "strictCapabilities"},
						      {"capab", "capabilities"},
						      {NULL, NULL}};
	char w[WHERE_MAX];
	const char *name;
	json_t *providers, *p, *internal;
	int rc;

	if ((rc = section(c, ag, "agent", known, NULL)))
		return rc;
	providers = get(ag, "providers");
	if (!providers)
		return 0;
	if ((rc = want(c, providers, JSON_OBJECT, "agent.providers",
		       "an object of providers by name, like {\"anthropic\": {...}}")))
		return rc;
	cfg->providers = calloc(json_object_size(providers) + 1, sizeof(*cfg->providers));
	if (!cfg->providers)
		return oom(c);
	/* checked in shape by parse_egress; here only whether it is true */
	internal = json_object_get(json_object_get(json_object_get(root, "sandbox"), "egress"),
				   "allowInternal");
	json_object_foreach(providers, name, p)
	{
		struct config_provider *cp = &cfg->providers[cfg->n_providers];

		join(w, "agent.providers", name);
		if ((rc = section(c, p, w, provider_keys, prefixes)))
			return rc;
		cp->name = strdup(name);
		if (!cp->name)
			return oom(c);
		cp->allow_internal = json_is_true(internal);
		cfg->n_providers++;
		if ((rc = parse_provider(c, w, p, cp)))
			return rc;
	}
	return 0;
}

static int parse_dns(struct ctx *c, const json_t *dns, struct errand_config *cfg)
{
	static const char *const known[] = {"upstream",	    "ttlFloor", "ttlCap",	    "grace",
					    "maxAddresses", "maxNames", "maxWildcardNames", NULL};
	char w[WHERE_MAX];
	struct addr a;
	uint16_t port;
	size_t i, n;
	json_t *up, *v;
	int rc;

	if ((rc = section(c, dns, "dns", known, NULL)) ||
	    (rc = parse_uint(c, dns, "dns", "ttlFloor", 0, 86400, &cfg->dns_ttl_floor)) ||
	    (rc = parse_uint(c, dns, "dns", "ttlCap", 1, 604800, &cfg->dns_ttl_cap)) ||
	    (rc = parse_uint(c, dns, "dns", "grace", 0, 3600, &cfg->dns_grace)) ||
	    (rc = parse_uint(c, dns, "dns", "maxAddresses", 1, 64, &cfg->dns_max_addrs)) ||
	    (rc = parse_uint(c, dns, "dns", "maxNames", 1, 1024, &cfg->dns_max_names)) ||
	    (rc = parse_uint(c, dns, "dns", "maxWildcardNames", 1, 1024,
			     &cfg->dns_max_wildcard_names)))
		return rc;
	if (cfg->dns_ttl_floor > cfg->dns_ttl_cap)
		return cfg_error(c, "dns.ttlFloor %u is above dns.ttlCap %u; lower the floor",
				 cfg->dns_ttl_floor, cfg->dns_ttl_cap);
	up = get(dns, "upstream");
	if (!up)
		return 0;
	if ((rc = want(c, up, JSON_ARRAY, "dns.upstream",
		       "a list of resolver addresses, like [\"198.18.0.53\"]")))
		return rc;
	n = json_array_size(up);
	if (n == 0)
		return cfg_error(c, "dns.upstream is empty; list a resolver address, or remove the "
				    "key to use the host's resolv.conf");
	cfg->dns_upstream = calloc(n + 1, sizeof(char *));
	if (!cfg->dns_upstream)
		return oom(c);
	json_array_foreach(up, i, v)
	{
		snprintf(w, sizeof(w), "dns.upstream[%zu]", i);
		if ((rc = want(c, v, JSON_STRING, w, "an address, like \"198.18.0.53\"")))
			return rc;
		if ((rc = addr_value(c, w, json_string_value(v), &a, &port)))
			return rc;
		cfg->dns_upstream[i] = strdup(json_string_value(v));
		if (!cfg->dns_upstream[i])
			return oom(c);
	}
	return 0;
}

static int parse_path(struct ctx *c, const json_t *paths, const char *key, char **dst)
{
	char w[WHERE_MAX], q[SAFE_MAX];
	const char *s;
	json_t *v;
	int rc;

	v = get(paths, key);
	if (!v)
		return 0;
	join(w, "paths", key);
	if ((rc = want(c, v, JSON_STRING, w, "an absolute path, like \"/var/lib/errand\"")))
		return rc;
	s = json_string_value(v);
	if (s[0] != '/')
		return cfg_error(c, "%s: \"%s\" is not an absolute path; start it with /", w,
				 safe(s, q, sizeof(q)));
	if (strlen(s) >= PATH_MAX / 2)
		return cfg_error(c, "%s is too long; name a path of fewer than %d bytes", w,
				 PATH_MAX / 2);
	return dst && set_string(dst, s) ? oom(c) : 0;
}

/* A cgroup name is a path below the cgroup2 mount and must stay below it. */
static int parse_cgroup(struct ctx *c, const json_t *v, struct errand_config *cfg)
{
	const char *where = "paths.cgroup", *s, *p;
	char q[SAFE_MAX];
	int rc;

	if ((rc = want(c, v, JSON_STRING, where, "a cgroup name, like \"errand\"")))
		return rc;
	s = json_string_value(v);
	if (!*s || s[0] == '/')
		return cfg_error(c,
				 "%s: \"%s\" must name a cgroup below the cgroup2 mount; write a "
				 "relative name, like \"errand\"",
				 where, safe(s, q, sizeof(q)));
	for (p = s; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return cfg_error(c,
					 "%s: \"%s\" has an empty, . or .. part; write a plain "
					 "name, like \"errand\" or \"system.slice/errand\"",
					 where, safe(s, q, sizeof(q)));
	}
	if (strlen(s) >= PATH_MAX / 2)
		return cfg_error(c, "%s is too long; name a shorter cgroup", where);
	return set_string(&cfg->cgroup_name, s) ? oom(c) : 0;
}

/* A store name: a file right in paths.secrets, never a path out of it. */
static bool secret_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n && n <= CONFIG_SECRET_NAME_MAX && s[0] != '.' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* The variable and store name of one secret, checked; why says what to fix. */
static int secret_names(struct config_secret *out, const char *env, size_t env_len,
			const char *name, size_t name_len, const char **why)
{
	char e[CONFIG_SECRET_ENV_MAX + 1];

	if (!env_len || env_len > CONFIG_SECRET_ENV_MAX) {
		*why = "name a variable of 1 to 128 letters, digits and _";
		return -EINVAL;
	}
	memcpy(e, env, env_len);
	e[env_len] = '\0';
	if (!env_name_ok(e)) {
		*why = "the variable's name takes letters, digits and _ only";
		return -EINVAL;
	}
	if ((*why = config_env_reserved(e)))
		return -EINVAL;
	memcpy(out->env, e, env_len + 1);
	if (!name) {
		name = env;
		name_len = env_len;
	}
	if (name_len > CONFIG_SECRET_NAME_MAX) {
		*why = "the secret's name is over 64 bytes";
		return -EINVAL;
	}
	memcpy(out->name, name, name_len);
	out->name[name_len] = '\0';
	if (!secret_name_ok(out->name)) {
		*why = "the secret's name is a file of paths.secrets: letters, digits, _, . and -, "
		       "not starting with .";
		return -EINVAL;
	}
	return 0;
}

static int secret_add_host(struct config_secret *sec, const struct host_rule *r)
{
	struct host_rule *grown;

	for (size_t i = 0; i < sec->n_hosts; i++)
		if (!strcmp(sec->hosts[i].name, r->name) && sec->hosts[i].wildcard == r->wildcard &&
		    sec->hosts[i].port == r->port)
			return 0;
	grown = reallocarray(sec->hosts, sec->n_hosts + 1, sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	grown[sec->n_hosts++] = *r;
	sec->hosts = grown;
	return 0;
}

void config_secret_free(struct config_secret *sec)
{
	if (!sec)
		return;
	free(sec->hosts);
	sec->hosts = NULL;
	sec->n_hosts = 0;
}

int config_secret_parse(const char *s, struct config_secret *out, char *err, size_t errlen)
{
	const char *at = strchr(s, '@'), *eq, *why, *p;
	struct config_secret sec = {};
	char host[HOST_NAME_MAX_LEN + 16], e[256], shown[ESC_LEN(256)];
	int rc;

	esc_text(s, shown, sizeof(shown)); /* what is quoted back */

	if (!at) {
		snprintf(err, errlen,
			 "--secret %s: write ENV[=SECRET]@HOST[,HOST...], like "
			 "GITHUB_TOKEN@api.github.com",
			 shown);
		return -EINVAL;
	}
	eq = memchr(s, '=', (size_t)(at - s));
	if (secret_names(&sec, s, (size_t)((eq ? eq : at) - s), eq ? eq + 1 : NULL,
			 eq ? (size_t)(at - eq - 1) : 0, &why)) {
		snprintf(err, errlen, "--secret %s: %s", shown, why);
		return -EINVAL;
	}
	for (p = at + 1;; p += strcspn(p, ",") + 1) {
		size_t n = strcspn(p, ",");
		struct host_rule r;

		if (!n || n >= sizeof(host)) {
			snprintf(err, errlen, "--secret %s: name each host after @, separated by ,",
				 shown);
			config_secret_free(&sec);
			return -EINVAL;
		}
		memcpy(host, p, n);
		host[n] = '\0';
		if (host_rule_parse(host, &r, e, sizeof(e))) {
			snprintf(err, errlen, "--secret %s: %s", shown, e);
			config_secret_free(&sec);
			return -EINVAL;
		}
		if ((rc = secret_add_host(&sec, &r))) {
			snprintf(err, errlen, "out of memory");
			config_secret_free(&sec);
			return rc;
		}
		if (!p[n])
			break;
	}
	*out = sec;
	return 0;
}

int config_add_secret(struct errand_config *cfg, struct config_secret *sec)
{
	struct config_secret *grown =
		reallocarray(cfg->secrets, cfg->n_secrets + 1, sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	grown[cfg->n_secrets++] = *sec;
	cfg->secrets = grown;
	sec->hosts = NULL;
	sec->n_hosts = 0;
	return 0;
}

/* secrets: [{"env": "GITHUB_TOKEN", "secret": "github", "hosts": ["api.github.com"]}] */
static int parse_secrets(struct ctx *c, const json_t *arr, struct errand_config *cfg)
{
	static const char *const keys[] = {"env", "secret", "hosts", NULL};
	char w[WHERE_MAX], e[CONFIG_ERRLEN];
	const json_t *v, *h;
	size_t i, j;
	int rc;

	if ((rc = want(c, arr, JSON_ARRAY, "secrets",
		       "a list, like [{\"env\": \"GITHUB_TOKEN\", \"hosts\": "
		       "[\"api.github.com\"]}]")))
		return rc;
	json_array_foreach(arr, i, v)
	{
		struct config_secret sec = {};
		const char *env, *name = NULL, *why;
		const json_t *hosts;

		snprintf(w, sizeof(w), "secrets[%zu]", i);
		if ((rc = section(c, v, w, keys, NULL)))
			return rc;
		if (!json_is_string(json_object_get(v, "env")))
			return cfg_error(c,
					 "%s: write \"env\": the variable the session holds "
					 "the placeholder in",
					 w);
		env = json_string_value(json_object_get(v, "env"));
		if (get(v, "secret")) {
			if (!json_is_string(get(v, "secret")))
				return cfg_error(c,
						 "%s.secret: write the name of a file in "
						 "paths.secrets",
						 w);
			name = json_string_value(get(v, "secret"));
		}
		if (secret_names(&sec, env, strlen(env), name, name ? strlen(name) : 0, &why))
			return cfg_error(c, "%s: %s", w, why);
		hosts = get(v, "hosts");
		if (!json_is_array(hosts) || !json_array_size(hosts))
			return cfg_error(c,
					 "%s.hosts: write the hosts the value may go to, like "
					 "[\"api.github.com\"]",
					 w);
		json_array_foreach(hosts, j, h)
		{
			struct host_rule r;

			if (!json_is_string(h) ||
			    host_rule_parse(json_string_value(h), &r, e, sizeof(e))) {
				config_secret_free(&sec);
				return cfg_error(c, "%s.hosts[%zu]: %s", w, j,
						 json_is_string(h) ? e : "write a host rule");
			}
			if (secret_add_host(&sec, &r)) {
				config_secret_free(&sec);
				return oom(c);
			}
		}
		if (config_add_secret(cfg, &sec)) {
			config_secret_free(&sec);
			return oom(c);
		}
	}
	return 0;
}

static int parse_root(struct ctx *c, const json_t *root, struct errand_config *cfg)
{
	static const char *const known[] = {"sandbox", "agent", "dns", "secrets",
					    "tls",     "paths", NULL};
	static const char *const tls_keys[] = {"trustedCa", NULL};
	static const char *const path_keys[] = {"state", "run", "bpf", "cgroup", "secrets", NULL};
	json_t *v;
	int rc;

	if (!json_is_object(root))
		return cfg_error(c,
				 "the file holds %s; errand's configuration is one JSON object, "
				 "like {\"sandbox\": {}}",
				 kind(root));
	if ((rc = check_keys(c, root, "", known, NULL)))
		return rc;
	if ((v = get(root, "sandbox")) && (rc = parse_sandbox(c, v, cfg)))
		return rc;
	if ((v = get(root, "agent")) && (rc = parse_agent(c, v, root, cfg)))
		return rc;
	if ((v = get(root, "dns")) && (rc = parse_dns(c, v, cfg)))
		return rc;
	if ((v = get(root, "secrets")) && (rc = parse_secrets(c, v, cfg)))
		return rc;
	if ((v = get(root, "tls")) &&
	    ((rc = section(c, v, "tls", tls_keys, NULL)) ||
	     ((v = get(v, "trustedCa")) &&
	      (rc = provider_file(c, v, "tls.trustedCa", &cfg->tls_trusted_ca)))))
		return rc;
	if ((v = get(root, "paths"))) {
		if ((rc = section(c, v, "paths", path_keys, NULL)) ||
		    (rc = parse_path(c, v, "state", &cfg->state_dir)) ||
		    (rc = parse_path(c, v, "run", &cfg->run_dir)) ||
		    (rc = parse_path(c, v, "bpf", &cfg->bpf_dir)) ||
		    (rc = parse_path(c, v, "secrets", &cfg->secrets_dir)))
			return rc;
		if ((v = get(v, "cgroup")) && (rc = parse_cgroup(c, v, cfg)))
			return rc;
	}
	return 0;
}

void config_defaults(struct errand_config *cfg)
{
	struct passwd *pw, pwb;
	struct group *gr, grb;
	char pwbuf[4096], grbuf[4096];

	memset(cfg, 0, sizeof(*cfg));
	cfg->network = NETWORK_RESTRICTED;
	cfg->egress_mode = EGRESS_RESTRICTED;
	cfg->egress_ports[0] = HOST_DEFAULT_PORT;
	cfg->n_egress_ports = 1;
	cidr_parse(DEFAULT_POOL, &cfg->pool);
	cidr_parse(DEFAULT_POOL6, &cfg->pool6);
	cfg->require_full = true;
	cfg->pool_size = POOL_DEFAULT;
	cfg->dns_ttl_floor = 5;
	cfg->dns_ttl_cap = 300;
	cfg->dns_grace = 5;
	cfg->dns_max_addrs = 16;
	cfg->dns_max_names = 256;
	cfg->dns_max_wildcard_names = 64;
	cfg->limits.pids = 4096;
	cfg->limits.file_size = 1ULL << 30;
	cfg->limits.tmp = 512ULL << 20;
	cfg->limits.shm = 64ULL << 20;
	/* The _r forms: the agent loads configurations in several threads. */
	if (getpwnam_r(SESSION_ACCOUNT, &pwb, pwbuf, sizeof(pwbuf), &pw))
		pw = NULL;
	cfg->uid = pw ? pw->pw_uid : NOBODY_ID;
	if (getgrnam_r(SESSION_ACCOUNT, &grb, grbuf, sizeof(grbuf), &gr))
		gr = NULL;
	cfg->gid = gr ? gr->gr_gid : pw ? pw->pw_gid : NOBODY_ID;
	/* Owned copies, so that callers may replace any of them with free() and
	 * strdup(); a failed copy stays NULL and config_load reports it. */
	cfg->state_dir = strdup("/var/lib/errand");
	cfg->run_dir = strdup("/run/errand");
	cfg->bpf_dir = strdup("/sys/fs/bpf/errand");
	cfg->cgroup_name = strdup("errand");
	cfg->secrets_dir = strdup("/etc/errand/secrets");
}

int config_read_text(const char *path, bool explicit_path, char **text, char *err, size_t errlen)
{
	struct stat st;
	FILE *fp;
	char *buf;
	size_t n;
	int rc, fd;

	*text = NULL;
	if (!path)
		path = CONFIG_DEFAULT_PATH;
	/* O_NONBLOCK: a FIFO no one writes is refused below, not waited on. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	fp = fd < 0 ? NULL : fdopen(fd, "r");
	if (!fp) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		if (rc == -ENOENT && !explicit_path)
			return 0; /* no file at the default path: the defaults are the config */
		snprintf(err, errlen, "config %s: %s; %s", path, strerror(-rc),
			 rc == -ENOENT	 ? "write the file or name another with --config"
			 : rc == -EACCES ? "make it readable to errand, which runs as root"
					 : "name another file with --config");
		return rc;
	}
	if (fstat(fileno(fp), &st) || !S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX_BYTES) {
		fclose(fp);
		snprintf(err, errlen,
			 "config %s: not a regular file of at most %d bytes; name a JSON file with "
			 "--config",
			 path, CONFIG_MAX_BYTES);
		return -EINVAL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		fclose(fp);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n = fread(buf, 1, (size_t)st.st_size, fp);
	rc = ferror(fp) ? -EIO : 0;
	fclose(fp);
	if (rc) {
		free(buf);
		snprintf(err, errlen, "config %s: cannot read it; name another file with --config",
			 path);
		return rc;
	}
	buf[n] = '\0';
	*text = buf;
	return 0;
}

int config_load_text(const char *text, const char *path, struct errand_config *cfg, char *err,
		     size_t errlen)
{
	struct errand_config c;
	struct ctx ctx = {.err = err, .errlen = errlen};
	json_error_t jerr;
	json_t *root;
	int rc;

	if (!path)
		path = CONFIG_DEFAULT_PATH;
	ctx.path = path;
	config_defaults(&c);
	if (!c.state_dir || !c.run_dir || !c.bpf_dir || !c.cgroup_name) {
		rc = oom(&ctx);
		goto fail;
	}
	if (!text) {
		if (config_rules_defaults(&c)) {
			rc = oom(&ctx);
			goto fail;
		}
		*cfg = c;
		return 0;
	}
	/* duplicates refused: the second of two "allow" lists would silently win */
	root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (jerr.line > 0)
			snprintf(err, errlen, "config %s:%d:%d: %s; fix the JSON there", path,
				 jerr.line, jerr.column, jerr.text);
		else
			snprintf(err, errlen, "config %s: %s; fix the file", path, jerr.text);
		rc = -EINVAL;
		goto fail;
	}
	c.path = strdup(path);
	rc = c.path ? parse_root(&ctx, root, &c) : oom(&ctx);
	json_decref(root);
	if (rc == 0 && config_rules_defaults(&c))
		rc = oom(&ctx);
	if (rc)
		goto fail;
	*cfg = c;
	return 0;
fail:
	config_free(&c);
	return rc;
}

int config_load(const char *path, bool explicit_path, struct errand_config *cfg, char *err,
		size_t errlen)
{
	char *text;
	int rc;

	if (!path)
		path = CONFIG_DEFAULT_PATH;
	rc = config_read_text(path, explicit_path, &text, err, errlen);
	if (rc)
		return rc;
	rc = config_load_text(text, path, cfg, err, errlen);
	free(text);
	return rc;
}

void config_free(struct errand_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->allow);
	free(cfg->pins);
	free(cfg->public_ranges);
	for (char **s = cfg->dns_upstream; s && *s; s++)
		free(*s);
	free(cfg->dns_upstream);
	free(cfg->state_dir);
	free(cfg->run_dir);
	free(cfg->bpf_dir);
	free(cfg->cgroup_name);
	free(cfg->secrets_dir);
	free(cfg->tls_trusted_ca);
	free(cfg->read_only);
	free(cfg->write_allowed);
	for (size_t i = 0; i < cfg->n_secrets; i++)
		config_secret_free(&cfg->secrets[i]);
	free(cfg->secrets);
	free(cfg->path);
	strv_free(&cfg->policy_read);
	strv_free(&cfg->policy_write);
	strv_free(&cfg->policy_exec);
	strv_free(&cfg->env);
	strv_free(&cfg->path_extra);
	strv_free(&cfg->blocked_syscalls);
	free(cfg->image);
	rules_free(&cfg->rules);
	free(cfg->project);
	for (size_t i = 0; i < cfg->n_providers; i++)
		provider_free(&cfg->providers[i]);
	free(cfg->providers);
	/* a second config_free, or one after a failed load, is then harmless */
	memset(cfg, 0, sizeof(*cfg));
}

int config_add_rule(struct errand_config *cfg, const struct host_rule *r)
{
	struct host_rule *grown = reallocarray(cfg->allow, cfg->n_allow + 1, sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	grown[cfg->n_allow++] = *r;
	cfg->allow = grown;
	return 0;
}

int config_add_pin(struct errand_config *cfg, const struct pin *p)
{
	struct pin *grown = reallocarray(cfg->pins, cfg->n_pins + 1, sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	grown[cfg->n_pins++] = *p;
	cfg->pins = grown;
	return 0;
}

int pin_parse(const char *s, struct pin *out, char *err, size_t errlen)
{
	char name[HOST_NAME_MAX_LEN * 4 + 1], e[CONFIG_ERRLEN], q[SAFE_MAX];
	const char *eq = s ? strchr(s, '=') : NULL;
	struct pin p = {0};
	size_t n;
	int rc;

	if (!eq) {
		snprintf(err, errlen,
			 "write NAME=IP or NAME=IP:PORT, like api.example.com=198.18.0.10");
		return -EINVAL;
	}
	n = (size_t)(eq - s);
	if (n >= sizeof(name)) {
		snprintf(err, errlen, "the name is too long; a host name is at most %d characters",
			 HOST_NAME_MAX_LEN);
		return -EINVAL;
	}
	memcpy(name, s, n);
	name[n] = '\0';
	if (host_name_normalize(name, p.name, e, sizeof(e))) {
		snprintf(err, errlen, "pin name: %s", e);
		return -EINVAL;
	}
	rc = addr_port_parse(eq + 1, &p.addr, &p.port);
	if (rc == -ERANGE) {
		snprintf(err, errlen, "the port in \"%s\" is not a port; use 1-65535",
			 safe(eq + 1, q, sizeof(q)));
		return -EINVAL;
	}
	if (rc) {
		snprintf(err, errlen,
			 "\"%s\" is not an address; write NAME=IP or NAME=IP:PORT, an IPv6 address "
			 "with a port in brackets (NAME=[2001:db8::1]:443)",
			 safe(eq + 1, q, sizeof(q)));
		return -EINVAL;
	}
	*out = p;
	return 0;
}

int config_secrets_apply(struct errand_config *cfg, char *err, size_t errlen)
{
	size_t hosts = 0;

	if (!cfg->n_secrets)
		return 0;
	if (cfg->n_secrets > CONFIG_SECRETS_MAX) {
		snprintf(err, errlen,
			 "%zu secrets asked; a session holds at most %d (secrets and --secret "
			 "together); drop some",
			 cfg->n_secrets, CONFIG_SECRETS_MAX);
		return -E2BIG;
	}
	for (size_t i = 0; i < cfg->n_secrets; i++)
		hosts += cfg->secrets[i].n_hosts;
	if (hosts > CONFIG_SECRET_HOSTS_MAX) {
		snprintf(
			err, errlen,
			"the secrets name %zu hosts; a session's secrets name at most %d together; "
			"drop some",
			hosts, CONFIG_SECRET_HOSTS_MAX);
		return -E2BIG;
	}
	if (cfg->network == NETWORK_NONE) {
		snprintf(err, errlen,
			 "--secret %s needs the network, which --egress none removes; drop one",
			 cfg->secrets[0].env);
		return -EINVAL;
	}
	for (size_t i = 0; i < cfg->n_secrets; i++) {
		const char *env = cfg->secrets[i].env;
		size_t n = strlen(env);

		for (size_t j = 0; j < i; j++)
			if (!strcmp(cfg->secrets[j].env, env)) {
				snprintf(err, errlen,
					 "secret %s is named twice; give each variable one secret",
					 env);
				return -EINVAL;
			}
		for (size_t j = 0; j < cfg->env.n; j++)
			if (!strncmp(cfg->env.v[j], env, n) && cfg->env.v[j][n] == '=') {
				snprintf(err, errlen,
					 "sandbox.env sets %s, which secret %s sets to its "
					 "placeholder; remove one",
					 env, env);
				return -EINVAL;
			}
	}
	/* Each host is allowed too: the value goes nowhere the session cannot reach. */
	for (size_t i = 0; i < cfg->n_secrets; i++)
		for (size_t k = 0; k < cfg->secrets[i].n_hosts; k++) {
			const struct host_rule *r = &cfg->secrets[i].hosts[k];
			bool have = false;

			for (size_t j = 0; j < cfg->n_allow && !have; j++)
				have = !strcmp(cfg->allow[j].name, r->name) &&
				       cfg->allow[j].wildcard == r->wildcard &&
				       cfg->allow[j].port == r->port;
			if (!have && config_add_rule(cfg, r)) {
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
		}
	return 0;
}

bool config_secret_host(const struct errand_config *cfg, const char *host, uint16_t port)
{
	for (size_t i = 0; i < cfg->n_secrets; i++)
		for (size_t k = 0; k < cfg->secrets[i].n_hosts; k++)
			if (cfg->secrets[i].hosts[k].port == port &&
			    host_rule_match(&cfg->secrets[i].hosts[k], host))
				return true;
	return false;
}

bool config_gated_host(const struct errand_config *cfg, const char *host, uint16_t port)
{
	const struct host_rule *v = cfg->read_only_all ? cfg->allow : cfg->read_only;
	size_t n = cfg->read_only_all ? cfg->n_allow : cfg->n_read_only;

	for (size_t i = 0; i < n; i++)
		if (v[i].port == port && host_rule_match(&v[i], host))
			return true;
	return false;
}

bool config_write_allowed(const struct errand_config *cfg, const char *host, uint16_t port)
{
	for (size_t i = 0; i < cfg->n_write_allowed; i++)
		if (cfg->write_allowed[i].port == port &&
		    host_rule_match(&cfg->write_allowed[i], host))
			return true;
	return false;
}

bool config_intercepted_host(const struct errand_config *cfg, const char *host, uint16_t port)
{
	return config_secret_host(cfg, host, port) || config_gated_host(cfg, host, port);
}

bool config_intercepts(const struct errand_config *cfg)
{
	return cfg->n_secrets || cfg->read_only_all || cfg->n_read_only;
}
