/* errand's configuration: one JSON file (doc/design.md "Contracts"), read with
 * jansson into struct errand_config. Keys later features enforce are
 * accepted and kept; a key a letter or two off a known one is refused with
 * the known one suggested; other unknown keys are warned about and ignored. */
#ifndef ERRAND_CONFIG_H
#define ERRAND_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/addr.h"
#include "lib/hostrule.h"

#define CONFIG_DEFAULT_PATH "/etc/errand/config.json"
#define CONFIG_MAX_PORTS 16
#define CONFIG_ERRLEN 512
/* sandbox.pool's bound: each prepared network holds a namespace, a veth
 * pair and an address of the pool while it waits. */
#define POOL_MAX 64
#define POOL_DEFAULT 2
#define CONFIG_MAX_BYTES (1 << 20)

enum config_network {
	NETWORK_RESTRICTED = 0, /* "restricted", the default */
	NETWORK_NONE = 1,	/* "none": no network at all */
};

enum config_egress_mode {
	EGRESS_RESTRICTED = 0, /* "restricted": only named hosts */
	EGRESS_OPEN = 1,       /* "open": any public host on egressPorts */
};

struct pin {
	char name[HOST_NAME_MAX_LEN + 1]; /* normalised */
	struct addr addr;
	uint16_t port; /* 0: whatever ports the host rules naming it give */
};

/* sandbox.limits. Sizes in bytes; 0 is "no limit" where a default is not given. */
struct config_limits {
	uint64_t memory;    /* memory: memory.max of the session's cgroup; 0: none */
	uint32_t cpu_milli; /* cpu: CPUs (1.5 = 1500) as cpu.max; 0: none */
	uint32_t pids;	    /* pids: pids.max, default 4096 */
	uint64_t file_size; /* fileSize: RLIMIT_FSIZE, default 1g */
	uint64_t tmp;	    /* tmp: size of the tmpfs on /tmp, default 512m */
	uint64_t shm;	    /* shm: size of the tmpfs on /dev/shm, default 64m */
	uint64_t disk;	    /* disk: a budget for the growth of project and state; 0: none */
};

/* agent.providers.<name>: a provider route of errand-broker. */
enum provider_placement {
	PLACEMENT_BEARER = 1,	 /* "bearer": Authorization: Bearer KEY */
	PLACEMENT_X_API_KEY = 2, /* "x-api-key": x-api-key: KEY */
};

#define PROVIDER_METHOD_MAX 16

struct provider_capability {
	char method[PROVIDER_METHOD_MAX]; /* upper case, or "*" */
	char *path;			  /* "/v1/messages", with * and ** segments, or "*" */
};

struct config_provider {
	char *name;	       /* the key under agent.providers */
	char *kind;	       /* kind: "anthropic", "openai", another, or NULL */
	char *base_url;	       /* baseUrl as written */
	bool tls;	       /* https; false only for http to a loopback literal */
	char *host;	       /* from baseUrl: a name, or an address without brackets */
	bool host_literal;     /* host is an address written as one */
	uint16_t port;	       /* from baseUrl, or 443 / 80 */
	char *base_path;       /* from baseUrl, without a trailing "/"; "" for none */
	char *credential_file; /* credentialFile: absolute path of the real key */
	char *trusted_ca;      /* trustedCa: a PEM file trusted beside the system roots, or NULL */
	enum provider_placement placement;
	struct provider_capability *caps; /* capabilities; NULL with all_calls or no list */
	size_t n_caps;
	bool has_caps;	     /* a capabilities list (or "*") was written */
	bool all_calls;	     /* capabilities: "*" */
	bool strict;	     /* strictCapabilities */
	bool allow_internal; /* sandbox.egress.allowInternal: dial a literal internal address */
};

/* secrets[] and --secret: a variable the session holds a placeholder in, the
 * name of the file in paths.secrets whose content the value is, and the hosts
 * the value may be sent to (each also allowed, on 443 unless given). */
#define CONFIG_SECRETS_MAX 16	    /* secrets a session */
#define CONFIG_SECRET_HOSTS_MAX 256 /* hosts of all its secrets together */
#define CONFIG_SECRET_NAME_MAX 64   /* bytes of a store name */
#define CONFIG_SECRET_ENV_MAX 128   /* bytes of a variable name */

struct config_secret {
	char env[CONFIG_SECRET_ENV_MAX + 1];
	char name[CONFIG_SECRET_NAME_MAX + 1]; /* a file in paths.secrets; default env */
	struct host_rule *hosts;
	size_t n_hosts;
};

/* A list of strings from the file, NULL-terminated; v is NULL when empty. */
struct config_strv {
	char **v;
	size_t n;
};

/* sandbox.rules: cowboy's sheepdog rules. The verbs in the order a rule's
 * text names them; RULE_VERBS counts them. */
enum config_rule_verb {
	RULE_READ,
	RULE_EDIT,
	RULE_CREATE,
	RULE_DELETE,
	RULE_EXEC,
	RULE_CONNECT,
	RULE_VERBS
};
/* Precedence, highest first: lazyAllow, deny, allow (default-deny is the
 * Landlock floor). */
enum config_rule_kind { RULE_LAZY, RULE_DENY, RULE_ALLOW };
/* At most this many rules a session, errand's own defaults included. */
#define CONFIG_RULES_MAX 80
/* A pattern's length limit (the BPF matcher's buffer, NUL included). */
#define CONFIG_RULE_PATH_MAX 128

struct config_rule {
	enum config_rule_kind kind;
	enum config_rule_verb verb;
	bool builtin; /* errand's own (host authorities, the journal), not the file's */
	char *text;   /* as written, like "Read(/srv/data/x)" */
	char *path;   /* the PATH inside, "~/" kept; for Connect without "unix:" */
};

struct config_rules {
	struct config_rule *v;
	size_t n;
};

struct errand_config {
	enum config_network network;	     /* sandbox.network */
	enum config_egress_mode egress_mode; /* sandbox.egress.mode */
	bool egress_given;		     /* a sandbox.egress block was written */
	struct host_rule *allow;	     /* sandbox.egress.allow */
	size_t n_allow;
	struct pin *pins; /* sandbox.egress.pins: {"name": "IP[:PORT]"} */
	size_t n_pins;
	struct cidr *public_ranges; /* sandbox.egress.treatAsPublic */
	size_t n_public;
	uint16_t egress_ports[CONFIG_MAX_PORTS]; /* sandbox.egressPorts, default [443] */
	size_t n_egress_ports;
	struct cidr pool;	/* sandbox.addressPool, default 10.213.0.0/16 (IPv4) */
	struct cidr pool6;	/* sandbox.addressPool6, default fd65:7272:616e::/48 */
	bool require_full;	/* sandbox.requireFullEnforcement, default true */
	uint32_t pool_size;	/* sandbox.pool: prepared networks the agent keeps, default 2 */
	uid_t uid;		/* sandbox.uid; default: errand-session, else 65534 */
	gid_t gid;		/* sandbox.gid */
	char **dns_upstream;	/* dns.upstream: addresses, NULL-terminated; may be NULL */
	uint32_t dns_ttl_floor; /* dns.ttlFloor, seconds, default 5 */
	uint32_t dns_ttl_cap;	/* dns.ttlCap, default 300 */
	uint32_t dns_grace;	/* dns.grace: an entry outlives its answer by this, default 5 */
	uint32_t dns_max_addrs; /* dns.maxAddresses a name, default 16 */
	uint32_t dns_max_names; /* dns.maxNames a session, default 256 */
	uint32_t dns_max_wildcard_names; /* dns.maxWildcardNames under one wildcard, default 64 */
	char *state_dir;		 /* paths.state, default /var/lib/errand */
	char *run_dir;			 /* paths.run, default /run/errand */
	char *bpf_dir;			 /* paths.bpf, default /sys/fs/bpf/errand */
	char *cgroup_name;    /* paths.cgroup, default "errand": below the cgroup2 mount */
	char *secrets_dir;    /* paths.secrets, default /etc/errand/secrets */
	char *tls_trusted_ca; /* tls.trustedCa: a PEM file trusted beside the system roots */
	bool read_only_all;   /* sandbox.egress.readOnly: true: every allowed host is gated */
	struct host_rule *read_only; /* sandbox.egress.readOnly as a list: these hosts gated */
	size_t n_read_only;
	struct host_rule *write_allowed; /* sandbox.egress.writeAllowed */
	size_t n_write_allowed;
	struct config_secret *secrets; /* secrets, then --secret */
	size_t n_secrets;
	char *path; /* the file it came from; NULL for defaults */
	/* The launcher's confinement (agent/confine.c passes these on). */
	struct config_strv policy_read;	     /* sandbox.policyExtra.read: absolute paths */
	struct config_strv policy_write;     /* sandbox.policyExtra.write */
	struct config_strv policy_exec;	     /* sandbox.policyExtra.execute */
	struct config_strv env;		     /* sandbox.env as "NAME=VALUE", in the file's order */
	struct config_strv path_extra;	     /* sandbox.pathExtra: directories ahead of /usr/bin */
	struct config_strv blocked_syscalls; /* sandbox.blockedSyscalls: names libseccomp knows */
	struct config_limits limits;	     /* sandbox.limits */
	char *image;			     /* sandbox.image: a root directory; NULL: the host's */
	struct config_rules rules;	     /* sandbox.rules.{lazyAllow,deny,allow} */
	bool allow_journal;		     /* sandbox.allowJournal */
	struct config_provider *providers;   /* agent.providers, in the file's order */
	size_t n_providers;
	/* From a run request, not the file (agent/request.c). */
	char *project;	    /* the project directory; NULL: the current directory */
	bool has_requester; /* requester is set: a client of the agent asked */
	uid_t requester;    /* that client's uid, from the kernel (SO_PEERCRED) */
};

/* Fills cfg with the defaults. */
void config_defaults(struct errand_config *cfg);
/* Reads path into cfg (defaults first). A missing file at the default path is
 * not an error (defaults stand); a missing file named explicitly is. Returns 0
 * or -errno with one line in err naming the file, the key and what to change. */
int config_load(const char *path, bool explicit_path, struct errand_config *cfg, char *err,
		size_t errlen);
/* The file's text for config_load_text (NULL, and 0, for a missing file at
 * the default path). The agent keeps it, so a session parses the config as
 * it was at the last load or reload, never as it is now. Same errors. */
int config_read_text(const char *path, bool explicit_path, char **text, char *err, size_t errlen);
/* config_load from text already read (NULL: the defaults); path names it in
 * messages. */
int config_load_text(const char *text, const char *path, struct errand_config *cfg, char *err,
		     size_t errlen);
/* Frees what cfg owns; NULL-safe; cfg itself is the caller's. */
void config_free(struct errand_config *cfg);
/* Appends one host rule / pin (for command-line flags). 0 or -ENOMEM. */
int config_add_rule(struct errand_config *cfg, const struct host_rule *r);
int config_add_pin(struct errand_config *cfg, const struct pin *p);
/* Parses "ENV[=SECRET]@HOST[,HOST...]" for --secret into out (its hosts the
 * caller's: config_secret_free). 0, -EINVAL with one line in err, or -ENOMEM. */
int config_secret_parse(const char *s, struct config_secret *out, char *err, size_t errlen);
/* Frees what one secret owns; NULL-safe. */
void config_secret_free(struct config_secret *sec);
/* Appends one secret, taking its hosts. 0 or -ENOMEM (then they stay the caller's). */
int config_add_secret(struct errand_config *cfg, struct config_secret *sec);
/* What the merged secrets ask, checked once the file and the request are one:
 * at most CONFIG_SECRETS_MAX secrets and CONFIG_SECRET_HOSTS_MAX hosts, each
 * variable once and set by nothing else (sandbox.env); then each host is
 * added to the allowed hosts. 0, or -E2BIG / -EINVAL with one line in err. */
int config_secrets_apply(struct errand_config *cfg, char *err, size_t errlen);
/* Whether a secret of cfg names host (normalised) on port: the session's
 * connections there go through its broker. */
bool config_secret_host(const struct errand_config *cfg, const char *host, uint16_t port);
/* Method gating: whether host:port accepts only GET, HEAD, OPTIONS and TRACE
 * (sandbox.egress.readOnly), and whether it may write all the same
 * (sandbox.egress.writeAllowed). */
bool config_gated_host(const struct errand_config *cfg, const char *host, uint16_t port);
bool config_write_allowed(const struct errand_config *cfg, const char *host, uint16_t port);
/* Whether the session's connections to host:port go through its broker: a
 * secret's host or a gated one. */
bool config_intercepted_host(const struct errand_config *cfg, const char *host, uint16_t port);
/* Whether any host is: the session's broker then listens for them. */
bool config_intercepts(const struct errand_config *cfg);
/* Parses "NAME=IP[:PORT]" for --pin. 0 or -EINVAL with one line in err. */
int pin_parse(const char *s, struct pin *out, char *err, size_t errlen);
/* Whether sandbox.env may not set NAME: PATH and HOME (errand places both)
 * and ERRAND_* (errand's own). The reason, for "NAME: <reason>", or NULL. */
const char *config_env_reserved(const char *name);
/* Parses a size ("512m", "1g", "4096"; k, m, g, t are powers of 1024) into
 * bytes. 0 or -EINVAL. */
int config_parse_size(const char *s, uint64_t *out);
/* The verb's name as a rule writes it ("Read"). */
const char *config_rule_verb_name(enum config_rule_verb v);
/* "lazyAllow", "deny" or "allow". */
const char *config_rule_kind_name(enum config_rule_kind k);
/* Parses one rule's text (where names it in the error). 0, or -EINVAL with
 * one line in err naming the fix. */
int config_rule_parse(const char *where, const char *text, enum config_rule_kind kind,
		      struct config_rule *out, char *err, size_t errlen);
/* Appends errand's own rules: the host authorities' sockets closed unless a
 * Connect allow names one, the journal closed unless sandbox.allowJournal
 * (which adds its Read allow). Called by config_load; 0 or -ENOMEM. */
int config_rules_defaults(struct errand_config *cfg);
/* The host daemons' sockets a session never reaches unless a
 * Connect(unix:PATH) allow names one, besides errand's own control socket
 * (<paths.run>/agent.sock). NULL-terminated. */
extern const char *const config_host_authorities[];

/* Edit distance for "did you mean": Damerau-Levenshtein, case-insensitive. */
int config_key_distance(const char *a, const char *b);

#endif
