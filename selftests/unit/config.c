/* Guarantee: errand's configuration file means what it says or is refused: a
 * key a letter or two off a known one is refused with the known one named,
 * wrong types and values are refused in one line naming the fix, defaults
 * stand where nothing is written. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

static char dir[] = "/tmp/errand-unit-config.XXXXXX";
static char warnings[4096]; /* what the last load wrote to stderr */

static const char *write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		printf("# cannot write %s\n", path);
		exit(1);
	}
	return path;
}

/* Loads text as a config file, keeping what was logged in warnings. */
static int load(const char *text, struct errand_config *cfg, char *err, size_t errlen)
{
	const char *path = write_file("config.json", text);
	int saved = dup(STDERR_FILENO), fd, rc;
	char log_path[256];
	ssize_t n;

	snprintf(log_path, sizeof(log_path), "%s/stderr", dir);
	fd = open(log_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	err[0] = '\0';
	rc = config_load(path, true, cfg, err, errlen);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, warnings, sizeof(warnings) - 1, 0);
	warnings[n > 0 ? n : 0] = '\0';
	close(fd);
	return rc;
}

static void expected_ids(uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam("errand-session");
	struct group *gr = getgrnam("errand-session");

	*uid = pw ? pw->pw_uid : 65534;
	*gid = gr ? gr->gr_gid : pw ? pw->pw_gid : 65534;
}

static void check_defaults(const struct errand_config *cfg, const char *how)
{
	char buf[ADDR_STRLEN];
	uid_t uid;
	gid_t gid;

	expected_ids(&uid, &gid);
	CHECK_INT(cfg->network, NETWORK_RESTRICTED, "%s: network restricted", how);
	CHECK_INT(cfg->egress_mode, EGRESS_RESTRICTED, "%s: egress mode restricted", how);
	CHECK_FALSE(cfg->egress_given, "%s: no egress block", how);
	CHECK_INT(cfg->n_allow, 0, "%s: no host rules", how);
	CHECK_INT(cfg->n_pins, 0, "%s: no pins", how);
	CHECK_INT(cfg->n_public, 0, "%s: no public ranges", how);
	CHECK_INT(cfg->n_egress_ports, 1, "%s: one egress port", how);
	CHECK_INT(cfg->egress_ports[0], 443, "%s: egress port 443", how);
	CHECK_STR(addr_str(&cfg->pool.a, buf), "10.213.0.0", "%s: pool address", how);
	CHECK_INT(cfg->pool.prefixlen, 96 + 16, "%s: pool is a /16", how);
	CHECK_STR(addr_str(&cfg->pool6.a, buf), "fd65:7272:616e::", "%s: IPv6 pool address", how);
	CHECK_INT(cfg->pool6.prefixlen, 48, "%s: IPv6 pool is a /48", how);
	CHECK_TRUE(cfg->require_full, "%s: full enforcement required", how);
	CHECK_INT(cfg->uid, uid, "%s: uid of errand-session, else 65534", how);
	CHECK_INT(cfg->gid, gid, "%s: gid of errand-session, else 65534", how);
	CHECK_TRUE(cfg->dns_upstream == NULL, "%s: no upstream resolvers", how);
	CHECK_STR(cfg->state_dir, "/var/lib/errand", "%s: paths.state", how);
	CHECK_STR(cfg->run_dir, "/run/errand", "%s: paths.run", how);
	CHECK_STR(cfg->bpf_dir, "/sys/fs/bpf/errand", "%s: paths.bpf", how);
	CHECK_STR(cfg->cgroup_name, "errand", "%s: paths.cgroup", how);
	CHECK_INT(cfg->limits.file_size, 1LL << 30, "%s: limits.fileSize 1g", how);
	CHECK_INT(cfg->limits.tmp, 512LL << 20, "%s: limits.tmp 512m", how);
	CHECK_INT(cfg->limits.shm, 64LL << 20, "%s: limits.shm 64m", how);
	CHECK_INT(cfg->limits.pids, 4096, "%s: limits.pids 4096", how);
	CHECK_INT(cfg->limits.memory, 0, "%s: no memory limit", how);
	CHECK_INT(cfg->limits.cpu_milli, 0, "%s: no cpu limit", how);
	CHECK_INT(cfg->limits.disk, 0, "%s: no disk budget", how);
	CHECK_INT(cfg->policy_read.n + cfg->policy_write.n + cfg->policy_exec.n, 0,
		  "%s: no policyExtra grants", how);
	CHECK_INT(cfg->env.n + cfg->path_extra.n + cfg->blocked_syscalls.n, 0,
		  "%s: no sandbox.env, pathExtra or blockedSyscalls", how);
	CHECK_TRUE(cfg->image == NULL, "%s: no image", how);
}

static void test_defaults(void)
{
	struct errand_config cfg;
	char err[CONFIG_ERRLEN] = "", path[300];

	config_defaults(&cfg);
	check_defaults(&cfg, "config_defaults");
	CHECK_TRUE(cfg.path == NULL, "config_defaults: no path");
	config_free(&cfg);
	config_free(&cfg);
	CHECK_TRUE(cfg.allow == NULL, "config_free twice is harmless");

	snprintf(path, sizeof(path), "%s/missing/config.json", dir);
	CHECK_INT(config_load(path, false, &cfg, err, sizeof(err)), 0,
		  "a missing file at the default path is not an error (%s)", err);
	check_defaults(&cfg, "missing default file");
	CHECK_TRUE(cfg.path == NULL, "missing default file: no path");
	config_free(&cfg);

	CHECK_INT(config_load(path, true, &cfg, err, sizeof(err)), -ENOENT,
		  "a missing file named explicitly is an error");
	CHECK_CONTAINS(err, path, "the error names the file");
	CHECK_CONTAINS(err, "--config", "the error names the fix");

	CHECK_INT(load("{}", &cfg, err, sizeof(err)), 0, "an empty object loads");
	check_defaults(&cfg, "empty object");
	CHECK_CONTAINS(cfg.path, "config.json", "the path is kept");
	config_free(&cfg);

	CHECK_INT(load("{\"sandbox\": {\"uid\": null, \"egress\": null}, \"dns\": null}", &cfg, err,
		       sizeof(err)),
		  0, "null values load");
	check_defaults(&cfg, "null values");
	config_free(&cfg);

	CHECK_INT(config_load(dir, true, &cfg, err, sizeof(err)), -EINVAL,
		  "a directory is refused");
	CHECK_CONTAINS(err, "not a regular file", "directory refusal says why");
}

static const char full[] =
	"{\n"
	"  \"sandbox\": {\n"
	"    \"network\": \"restricted\",\n"
	"    \"egress\": {\n"
	"      \"allow\": [\"api.example.com\", \"*.Example.org:8443\"],\n"
	"      \"mode\": \"open\",\n"
	"      \"pins\": {\"Pinned.example.\": \"198.18.0.10\",\n"
	"               \"v6.example\": \"[2001:db8::10]:8443\"},\n"
	"      \"treatAsPublic\": [\"198.18.0.0/15\", \"2001:db8::/32\"],\n"
	"      \"readOnly\": true,\n"
	"      \"writeAllowed\": [\"api.example.com\"],\n"
	"      \"allowInternal\": false\n"
	"    },\n"
	"    \"egressPorts\": [443, 8443, 443],\n"
	"    \"addressPool\": \"10.99.0.0/20\",\n"
	"    \"addressPool6\": \"fd12:3456:789a::/64\",\n"
	"    \"requireFullEnforcement\": false,\n"
	"    \"uid\": 1234,\n"
	"    \"gid\": 5678,\n"
	"    \"policyExtra\": {\"read\": [\"/opt/data\"], \"write\": [\"/srv/out\"],\n"
	"                    \"execute\": [\"/opt/bin\"]},\n"
	"    \"env\": {\"LANG\": \"C.UTF-8\"},\n"
	"    \"pathExtra\": [\"/opt/toolchains/bin\"],\n"
	"    \"limits\": {\"memory\": \"4G\", \"cpu\": 2, \"pids\": 512, \"fileSize\": \"1G\",\n"
	"               \"tmp\": \"1G\", \"shm\": \"64M\", \"disk\": \"10G\"},\n"
	"    \"blockedSyscalls\": [\"ptrace\", \"bpf\"],\n"
	"    \"image\": \"/srv/image\"\n"
	"  },\n"
	"  \"agent\": {\"providers\": {\"anthropic\": {\n"
	"    \"baseUrl\": \"https://api.anthropic.com\", \"credentialFile\": \"/etc/errand/key\",\n"
	"    \"placement\": \"x-api-key\", \"capabilities\": [{\"method\": \"POST\", \"path\": "
	"\"/v1/messages\"}],\n"
	"    \"strictCapabilities\": true, \"kind\": \"anthropic\",\n"
	"    \"trustedCa\": \"/etc/ca.pem\"}}},\n"
	"  \"dns\": {\"upstream\": [\"198.18.0.53\", \"[2001:db8::53]:5353\"], \"ttlFloor\": 30,\n"
	"          \"ttlCap\": 3600, \"grace\": 5},\n"
	"  \"secrets\": [{\"env\": \"GH_TOKEN\", \"secret\": \"gh\", \"hosts\": "
	"[\"api.github.com\"]}],\n"
	"  \"tls\": {\"trustedCa\": \"/etc/errand/ca.pem\"},\n"
	"  \"paths\": {\"state\": \"/tmp/s\", \"run\": \"/tmp/r\", \"bpf\": \"/sys/fs/bpf/t\",\n"
	"            \"cgroup\": \"system.slice/errand-test\",\n"
	"            \"secrets\": \"/etc/errand/secrets\"}\n"
	"}\n";

static void test_full(void)
{
	struct errand_config cfg;
	char err[CONFIG_ERRLEN], buf[300];

	if (!CHECK_INT(load(full, &cfg, err, sizeof(err)), 0, "a full file loads (%s)", err))
		return;
	CHECK_STR(warnings, "", "a full file draws no warnings");
	CHECK_INT(cfg.network, NETWORK_RESTRICTED, "sandbox.network");
	CHECK_TRUE(cfg.egress_given, "egress_given");
	CHECK_INT(cfg.egress_mode, EGRESS_OPEN, "sandbox.egress.mode");
	if (CHECK_INT(cfg.n_allow, 2, "two host rules")) {
		CHECK_STR(host_rule_str(&cfg.allow[0], buf, sizeof(buf)), "api.example.com:443",
			  "first rule");
		CHECK_STR(host_rule_str(&cfg.allow[1], buf, sizeof(buf)), "*.example.org:8443",
			  "second rule");
	}
	if (CHECK_INT(cfg.n_pins, 2, "two pins")) {
		CHECK_STR(cfg.pins[0].name, "pinned.example", "pin name normalised");
		CHECK_STR(addr_str(&cfg.pins[0].addr, buf), "198.18.0.10", "pin address");
		CHECK_INT(cfg.pins[0].port, 0, "pin without a port");
		CHECK_STR(addr_str(&cfg.pins[1].addr, buf), "2001:db8::10", "v6 pin address");
		CHECK_INT(cfg.pins[1].port, 8443, "v6 pin port");
	}
	if (CHECK_INT(cfg.n_public, 2, "two public ranges")) {
		CHECK_INT(cfg.public_ranges[0].prefixlen, 96 + 15, "198.18.0.0/15 prefix");
		CHECK_INT(cfg.public_ranges[1].prefixlen, 32, "2001:db8::/32 prefix");
	}
	CHECK_INT(cfg.n_egress_ports, 2, "egress ports deduplicated");
	CHECK_INT(cfg.egress_ports[1], 8443, "second egress port");
	CHECK_STR(addr_str(&cfg.pool.a, buf), "10.99.0.0", "pool address");
	CHECK_INT(cfg.pool.prefixlen, 96 + 20, "pool prefix");
	CHECK_STR(addr_str(&cfg.pool6.a, buf), "fd12:3456:789a::", "IPv6 pool address");
	CHECK_INT(cfg.pool6.prefixlen, 64, "IPv6 pool prefix");
	CHECK_FALSE(cfg.require_full, "requireFullEnforcement false");
	CHECK_INT(cfg.uid, 1234, "uid");
	CHECK_INT(cfg.gid, 5678, "gid");
	if (CHECK_TRUE(cfg.dns_upstream != NULL, "dns.upstream kept")) {
		CHECK_STR(cfg.dns_upstream[0], "198.18.0.53", "first resolver");
		CHECK_STR(cfg.dns_upstream[1], "[2001:db8::53]:5353", "second resolver");
		CHECK_TRUE(cfg.dns_upstream[2] == NULL, "resolvers NULL-terminated");
	}
	CHECK_STR(cfg.state_dir, "/tmp/s", "paths.state");
	CHECK_STR(cfg.run_dir, "/tmp/r", "paths.run");
	CHECK_STR(cfg.bpf_dir, "/sys/fs/bpf/t", "paths.bpf");
	CHECK_STR(cfg.cgroup_name, "system.slice/errand-test", "paths.cgroup");
	if (CHECK_INT(cfg.policy_read.n, 1, "policyExtra.read"))
		CHECK_STR(cfg.policy_read.v[0], "/opt/data", "policyExtra.read[0]");
	if (CHECK_INT(cfg.policy_write.n, 1, "policyExtra.write"))
		CHECK_STR(cfg.policy_write.v[0], "/srv/out", "policyExtra.write[0]");
	if (CHECK_INT(cfg.policy_exec.n, 1, "policyExtra.execute")) {
		CHECK_STR(cfg.policy_exec.v[0], "/opt/bin", "policyExtra.execute[0]");
		CHECK_TRUE(cfg.policy_exec.v[1] == NULL, "policyExtra lists are NULL-terminated");
	}
	if (CHECK_INT(cfg.env.n, 1, "sandbox.env"))
		CHECK_STR(cfg.env.v[0], "LANG=C.UTF-8", "sandbox.env as NAME=VALUE");
	if (CHECK_INT(cfg.path_extra.n, 1, "sandbox.pathExtra"))
		CHECK_STR(cfg.path_extra.v[0], "/opt/toolchains/bin", "sandbox.pathExtra[0]");
	CHECK_INT(cfg.limits.memory, 4LL << 30, "limits.memory 4G");
	CHECK_INT(cfg.limits.cpu_milli, 2000, "limits.cpu 2");
	CHECK_INT(cfg.limits.pids, 512, "limits.pids");
	CHECK_INT(cfg.limits.file_size, 1LL << 30, "limits.fileSize 1G");
	CHECK_INT(cfg.limits.tmp, 1LL << 30, "limits.tmp 1G");
	CHECK_INT(cfg.limits.shm, 64LL << 20, "limits.shm 64M");
	CHECK_INT(cfg.limits.disk, 10LL << 30, "limits.disk 10G");
	if (CHECK_INT(cfg.blocked_syscalls.n, 2, "sandbox.blockedSyscalls")) {
		CHECK_STR(cfg.blocked_syscalls.v[0], "ptrace", "blockedSyscalls[0]");
		CHECK_STR(cfg.blocked_syscalls.v[1], "bpf", "blockedSyscalls[1]");
	}
	CHECK_STR(cfg.image, "/srv/image", "sandbox.image");

	struct host_rule r = {.name = "extra.example", .port = 443};
	struct pin p = {.name = "extra.example"};

	CHECK_INT(config_add_rule(&cfg, &r), 0, "config_add_rule");
	CHECK_STR(cfg.allow[2].name, "extra.example", "added rule is last");
	CHECK_INT(config_add_pin(&cfg, &p), 0, "config_add_pin");
	CHECK_INT(cfg.n_pins, 3, "added pin counted");
	config_free(&cfg);

	/* a failed load leaves the caller's config as it was */
	memset(&cfg, 0x5a, sizeof(cfg));
	load("{\"sandbox\": {\"egressPorts\": [0]}}", &cfg, err, sizeof(err));
	CHECK_INT(((unsigned char *)&cfg)[0], 0x5a, "a failed load writes nothing");
}

/* Loads text and expects a refusal whose message contains every fragment. */
static void refused(const char *what, const char *text, const char *frag1, const char *frag2)
{
	struct errand_config cfg = {0};
	char err[CONFIG_ERRLEN];

	if (!CHECK_INT(load(text, &cfg, err, sizeof(err)), -EINVAL, "%s is refused", what)) {
		config_free(&cfg);
		return;
	}
	CHECK_CONTAINS(err, frag1, "%s: message", what);
	if (frag2)
		CHECK_CONTAINS(err, frag2, "%s: message", what);
	CHECK_TRUE(!strchr(err, '\n'), "%s: message is one line", what);
}

static void test_near_miss(void)
{
	refused("sandbox.egres", "{\"sandbox\": {\"egres\": {}}}",
		"unknown key sandbox.egres; did you mean sandbox.egress?", NULL);
	refused("sandbox.Egress", "{\"sandbox\": {\"Egress\": {}}}",
		"unknown key sandbox.Egress; did you mean sandbox.egress?", NULL);
	refused("sandbox.egressPort", "{\"sandbox\": {\"egressPort\": [443]}}",
		"did you mean sandbox.egressPorts?", NULL);
	refused("sandbox.egress.treatAsPublik",
		"{\"sandbox\": {\"egress\": {\"treatAsPublik\": []}}}",
		"did you mean sandbox.egress.treatAsPublic?", NULL);
	refused("a provider's placment",
		"{\"agent\": {\"providers\": {\"openai\": {\"placment\": \"bearer\"}}}}",
		"unknown key agent.providers.openai.placment; did you mean "
		"agent.providers.openai.placement?",
		NULL);
	refused("a provider's strictness",
		"{\"agent\": {\"providers\": {\"openai\": {\"strictness\": true}}}}",
		"did you mean agent.providers.openai.strictCapabilities?", NULL);
	refused("a provider's capability",
		"{\"agent\": {\"providers\": {\"openai\": {\"capability\": []}}}}",
		"did you mean agent.providers.openai.capabilities?", NULL);
	refused("a top-level Sandbox", "{\"Sandbox\": {}}", "did you mean sandbox?", NULL);
	refused("paths.sate", "{\"paths\": {\"sate\": \"/x\"}}", "did you mean paths.state?", NULL);
	refused("a swap, sandbox.egerss", "{\"sandbox\": {\"egerss\": {}}}",
		"did you mean sandbox.egress?", NULL);
	refused("sandbox.limits.memroy", "{\"sandbox\": {\"limits\": {\"memroy\": 1}}}",
		"did you mean sandbox.limits.memory?", NULL);
	refused("sandbox.uids", "{\"sandbox\": {\"uids\": 1}}", "did you mean sandbox.uid?", NULL);
	refused("dns.upstreams", "{\"dns\": {\"upstreams\": []}}", "did you mean dns.upstream?",
		NULL);
	refused("a top-level sandbox2", "{\"sandbox2\": {}}", "did you mean sandbox?", NULL);
	refused("a key with a newline", "{\"sandbox\": {\"egres\\ns\": {}}}", "did you mean", NULL);
}

static void test_unknown(void)
{
	struct errand_config cfg;
	char err[CONFIG_ERRLEN];

	CHECK_INT(
		load("{\"sandbox\": {\"frobnicate\": 1, \"egress\": {\"comment\": \"x\"}},"
		     " \"myTeam\": {}, \"agent\": {\"providers\": {\"p\": {\"platform\": 1,"
		     " \"capacity\": 2, \"baseUrl\": \"https://p.example\","
		     " \"credentialFile\": \"/etc/errand/p.key\", \"placement\": \"bearer\"}}},"
		     " \"secrets\": [{\"env\": \"T\", \"hosts\": [\"a.example\"], \"egres\": 1}], "
		     "\"zzTop\": {}}",
		     &cfg, err, sizeof(err)),
		0, "far-off unknown keys load (%s)", err);
	CHECK_CONTAINS(warnings, "unknown key sandbox.frobnicate ignored",
		       "sandbox.frobnicate is warned about");
	CHECK_CONTAINS(warnings, "unknown key sandbox.egress.comment ignored",
		       "sandbox.egress.comment is warned about");
	CHECK_CONTAINS(warnings, "unknown key myTeam ignored", "myTeam is warned about");
	CHECK_CONTAINS(warnings, "unknown key zzTop ignored", "zzTop is warned about");
	CHECK_CONTAINS(warnings, "agent.providers.p.platform ignored",
		       "a provider's platform only begins like placement: warned");
	CHECK_CONTAINS(warnings, "agent.providers.p.capacity ignored",
		       "a provider's capacity only begins like capabilities: warned");
	CHECK_CONTAINS(warnings, "secrets[0].egres ignored", "a secret's far-off key: warned");
	CHECK_TRUE(cfg.egress_given, "the egress block still counts");
	config_free(&cfg);
}

static void test_types(void)
{
	refused("a JSON array", "[1]", "one JSON object", NULL);
	refused("sandbox as a string", "{\"sandbox\": \"x\"}",
		"sandbox is a string; write an object", NULL);
	refused("network 42", "{\"sandbox\": {\"network\": 42}}",
		"sandbox.network is a number; write \"restricted\" or \"none\"", NULL);
	refused("network open", "{\"sandbox\": {\"network\": \"open\"}}",
		"sandbox.network: \"open\" is not a mode; write \"restricted\" or \"none\"", NULL);
	refused("egress as a list", "{\"sandbox\": {\"egress\": []}}",
		"sandbox.egress is an array; write an object", NULL);
	refused("allow as a string", "{\"sandbox\": {\"egress\": {\"allow\": \"a.example\"}}}",
		"sandbox.egress.allow is a string; write a list", NULL);
	refused("allow holding a number", "{\"sandbox\": {\"egress\": {\"allow\": [42]}}}",
		"sandbox.egress.allow[0] is a number", NULL);
	refused("allow holding *.com",
		"{\"sandbox\": {\"egress\": {\"allow\": [\"ok.example\", "
		"\"*.com\"]}}}",
		"sandbox.egress.allow[1]: '*.com' is a wildcard", "like *.example.com");
	refused("allow holding an address",
		"{\"sandbox\": {\"egress\": {\"allow\": [\"10.0.0.1\"]}}}",
		"sandbox.egress.allow[0]", "--pin NAME=IP");
	refused("mode closed", "{\"sandbox\": {\"egress\": {\"mode\": \"closed\"}}}",
		"sandbox.egress.mode: \"closed\" is not a mode; write \"restricted\" or \"open\"",
		NULL);
	refused("pins as a list", "{\"sandbox\": {\"egress\": {\"pins\": [\"a=1.2.3.4\"]}}}",
		"sandbox.egress.pins is an array; write an object", NULL);
	refused("a pin to a number", "{\"sandbox\": {\"egress\": {\"pins\": {\"a.example\": 1}}}}",
		"sandbox.egress.pins.a.example is a number", NULL);
	refused("a pin to a name",
		"{\"sandbox\": {\"egress\": {\"pins\": {\"a.example\": "
		"\"b.example\"}}}}",
		"\"b.example\" is not an address", "[2001:db8::1]:53");
	refused("a pin to port 0",
		"{\"sandbox\": {\"egress\": {\"pins\": {\"a.example\": "
		"\"1.2.3.4:0\"}}}}",
		"is not a port; use 1-65535", NULL);
	refused("a pin for a wildcard",
		"{\"sandbox\": {\"egress\": {\"pins\": {\"*.a.example\": "
		"\"1.2.3.4\"}}}}",
		"sandbox.egress.pins: name \"*.a.example\"", "name one host");
	refused("treatAsPublic as a string",
		"{\"sandbox\": {\"egress\": {\"treatAsPublic\": \"198.18.0.0/15\"}}}",
		"sandbox.egress.treatAsPublic is a string; write a list", NULL);
	refused("treatAsPublic with host bits",
		"{\"sandbox\": {\"egress\": {\"treatAsPublic\": [\"198.18.1.0/15\"]}}}",
		"sandbox.egress.treatAsPublic[0]: \"198.18.1.0/15\" has bits set past its prefix; "
		"write 198.18.0.0/15",
		NULL);
	refused("an IPv4-mapped treatAsPublic with host bits",
		"{\"sandbox\": {\"egress\": {\"treatAsPublic\": [\"::ffff:198.18.1.0/111\"]}}}",
		"\"::ffff:198.18.1.0/111\" has bits set past its prefix; write 198.18.0.0/15",
		NULL);
	refused("treatAsPublic with a name",
		"{\"sandbox\": {\"egress\": {\"treatAsPublic\": [\"example.com\"]}}}",
		"is not an address range; write one like 198.18.0.0/15", NULL);
	refused("an address pool that is not private",
		"{\"sandbox\": {\"addressPool\": \"44.0.0.0/16\"}}",
		"sandbox.addressPool: 44.0.0.0/16 is not in a range refused to sessions; use a "
		"private one like "
		"10.213.0.0/16",
		NULL);
	refused("treatAsPublic over the address pool",
		"{\"sandbox\": {\"addressPool\": \"10.213.0.0/16\", \"egress\": "
		"{\"treatAsPublic\": [\"10.0.0.0/8\"]}}}",
		"sandbox.egress.treatAsPublic: 10.0.0.0/8 overlaps sandbox.addressPool "
		"10.213.0.0/16, the sessions' own addresses; narrow one of them",
		NULL);
	refused("readOnly as a string", "{\"sandbox\": {\"egress\": {\"readOnly\": \"yes\"}}}",
		"sandbox.egress.readOnly is a string; write true, false or a list of host rules",
		NULL);
	refused("readOnly naming an IP literal",
		"{\"sandbox\": {\"egress\": {\"readOnly\": [\"10.0.0.1\"]}}}",
		"sandbox.egress.readOnly[0]", NULL);
	refused("allowInternal as a number", "{\"sandbox\": {\"egress\": {\"allowInternal\": 1}}}",
		"sandbox.egress.allowInternal is a number; write true or false", NULL);
	refused("writeAllowed holding *",
		"{\"sandbox\": {\"egress\": {\"writeAllowed\": [\"*\"]}}}",
		"sandbox.egress.writeAllowed[0]", "egress mode open");
	refused("egressPorts as a string", "{\"sandbox\": {\"egressPorts\": \"443\"}}",
		"sandbox.egressPorts is a string; write a list of ports", NULL);
	refused("egressPorts holding a fraction", "{\"sandbox\": {\"egressPorts\": [443.5]}}",
		"sandbox.egressPorts[0] is a number with a fraction or exponent; write a port "
		"number 1-65535",
		NULL);
	refused("port 0", "{\"sandbox\": {\"egressPorts\": [0]}}",
		"sandbox.egressPorts: 0 is not a port; use 1-65535", NULL);
	refused("port 65536", "{\"sandbox\": {\"egressPorts\": [443, 65536]}}",
		"sandbox.egressPorts: 65536 is not a port; use 1-65535", NULL);
	refused("17 ports",
		"{\"sandbox\": {\"egressPorts\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}",
		"sandbox.egressPorts: 17 ports; name at most 16", NULL);
	refused("addressPool as a number", "{\"sandbox\": {\"addressPool\": 10}}",
		"sandbox.addressPool is a number; write an IPv4 range", NULL);
	refused("addressPool /30", "{\"sandbox\": {\"addressPool\": \"10.213.0.0/30\"}}",
		"use a prefix of 8 to 28 bits", NULL);
	refused("addressPool /7", "{\"sandbox\": {\"addressPool\": \"10.0.0.0/7\"}}",
		"a /7 pool is out of range; use a prefix of 8 to 28 bits", NULL);
	refused("addressPool /4", "{\"sandbox\": {\"addressPool\": \"0.0.0.0/4\"}}",
		"use a prefix of 8 to 28 bits", NULL);
	refused("addressPool in IPv6", "{\"sandbox\": {\"addressPool\": \"2001:db8::/64\"}}",
		"is not an IPv4 range; write one like 10.213.0.0/16", NULL);
	refused("addressPool with host bits", "{\"sandbox\": {\"addressPool\": \"10.213.1.0/16\"}}",
		"write 10.213.0.0/16", NULL);
	refused("addressPool6 in IPv4", "{\"sandbox\": {\"addressPool6\": \"10.0.0.0/8\"}}",
		"sandbox.addressPool6: \"10.0.0.0/8\" is not an IPv6 range; write one like "
		"fd65:7272:616e::/48",
		NULL);
	refused("addressPool6 public", "{\"sandbox\": {\"addressPool6\": \"2001:db8::/48\"}}",
		"is not a unique-local range of /8 to /96; use one in fc00::/7", NULL);
	refused("addressPool6 /100", "{\"sandbox\": {\"addressPool6\": \"fd00::/100\"}}",
		"is not a unique-local range of /8 to /96", NULL);
	refused("addressPool6 with host bits", "{\"sandbox\": {\"addressPool6\": \"fd00::1/64\"}}",
		"write fd00::/64", NULL);
	refused("requireFullEnforcement as a string",
		"{\"sandbox\": {\"requireFullEnforcement\": \"no\"}}",
		"sandbox.requireFullEnforcement is a string; write true or false", NULL);
	refused("uid as a string", "{\"sandbox\": {\"uid\": \"1000\"}}",
		"sandbox.uid is a string; write a whole number", NULL);
	refused("uid 0", "{\"sandbox\": {\"uid\": 0}}", "sandbox.uid: 0 is root", "like 65534");
	refused("gid -1", "{\"sandbox\": {\"gid\": -1}}", "sandbox.gid: -1 is not an id", NULL);
	refused("uid 2^32", "{\"sandbox\": {\"uid\": 4294967296}}", "use 1-4294967294", NULL);
	refused("policyExtra as a list", "{\"sandbox\": {\"policyExtra\": []}}",
		"sandbox.policyExtra is an array; write an object", NULL);
	refused("policyExtra.read as a string",
		"{\"sandbox\": {\"policyExtra\": {\"read\": \"/opt\"}}}",
		"sandbox.policyExtra.read is a string; write a list", NULL);
	refused("image as a number", "{\"sandbox\": {\"image\": 1}}",
		"sandbox.image is a number; write a directory", NULL);
	refused("a provider as a string", "{\"agent\": {\"providers\": {\"p\": \"x\"}}}",
		"agent.providers.p is a string; write an object", NULL);
	refused("dns.upstream as a string", "{\"dns\": {\"upstream\": \"1.1.1.1\"}}",
		"dns.upstream is a string; write a list", NULL);
	refused("dns.upstream empty", "{\"dns\": {\"upstream\": []}}", "list a resolver address",
		NULL);
	refused("dns.upstream with a name", "{\"dns\": {\"upstream\": [\"dns.google\"]}}",
		"dns.upstream[0]: \"dns.google\" is not an address", NULL);
	refused("dns.upstream with port 0", "{\"dns\": {\"upstream\": [\"1.1.1.1:0\"]}}",
		"dns.upstream[0]: the port in \"1.1.1.1:0\" is not a port", NULL);
	refused("paths.state as a number", "{\"paths\": {\"state\": 1}}",
		"paths.state is a number; write an absolute path", NULL);
	refused("paths.run relative", "{\"paths\": {\"run\": \"run/errand\"}}",
		"paths.run: \"run/errand\" is not an absolute path; start it with /", NULL);
	refused("paths.secrets relative", "{\"paths\": {\"secrets\": \"s\"}}",
		"paths.secrets: \"s\" is not an absolute path", NULL);
	refused("paths.cgroup absolute", "{\"paths\": {\"cgroup\": \"/errand\"}}",
		"write a relative name", NULL);
	refused("paths.cgroup climbing", "{\"paths\": {\"cgroup\": \"errand/../..\"}}",
		"has an empty, . or .. part", NULL);
	refused("secrets as an object", "{\"secrets\": {}}", "secrets is an object; write a list",
		NULL);
	refused("a secret's key a letter off", "{\"secrets\": [{\"env\": \"T\", \"host\": []}]}",
		"secrets[0].host", NULL);
	refused("tls as a string", "{\"tls\": \"x\"}", "tls is a string; write an object", NULL);
}

/* The keys the launcher's confinement is made from (agent/confine.c). */
static void test_confinement(void)
{
	struct errand_config cfg;
	char err[CONFIG_ERRLEN];
	uint64_t n = 0;

	refused("a relative policyExtra.read path",
		"{\"sandbox\": {\"policyExtra\": {\"read\": [\"/opt\", \"opt/data\"]}}}",
		"sandbox.policyExtra.read[1]: \"opt/data\" is not an absolute path",
		"no working directory");
	refused("a relative policyExtra.write path",
		"{\"sandbox\": {\"policyExtra\": {\"write\": [\"./out\"]}}}",
		"sandbox.policyExtra.write[0]: \"./out\" is not an absolute path", NULL);
	refused("a relative policyExtra.execute path",
		"{\"sandbox\": {\"policyExtra\": {\"execute\": [\"bin\"]}}}",
		"sandbox.policyExtra.execute[0]: \"bin\" is not an absolute path", NULL);
	refused("policyExtra.write /", "{\"sandbox\": {\"policyExtra\": {\"write\": [\"/\"]}}}",
		"would grant the whole filesystem", NULL);
	refused("a policyExtra path with ..",
		"{\"sandbox\": {\"policyExtra\": {\"read\": [\"/opt/../etc\"]}}}",
		"has an empty, . or .. part", NULL);
	refused("a policyExtra path with //",
		"{\"sandbox\": {\"policyExtra\": {\"read\": [\"/opt//x\"]}}}",
		"has an empty, . or .. part", NULL);
	refused("a policyExtra path holding a number",
		"{\"sandbox\": {\"policyExtra\": {\"read\": [1]}}}",
		"sandbox.policyExtra.read[0] is a number; write an absolute path", NULL);
	refused("a relative pathExtra", "{\"sandbox\": {\"pathExtra\": [\"bin\"]}}",
		"sandbox.pathExtra[0]: \"bin\" is not an absolute path", NULL);
	refused("a pathExtra with ':'", "{\"sandbox\": {\"pathExtra\": [\"/a:/b\"]}}",
		"contains ':'", NULL);
	refused("a relative image", "{\"sandbox\": {\"image\": \"img\"}}",
		"sandbox.image: \"img\" is not an absolute path", NULL);
	refused("PATH in sandbox.env", "{\"sandbox\": {\"env\": {\"PATH\": \"/secret-value\"}}}",
		"sandbox.env.PATH is refused", "sandbox.pathExtra");
	memset(&cfg, 0, sizeof(cfg));
	load("{\"sandbox\": {\"env\": {\"HOME\": \"secret-value\"}}}", &cfg, err, sizeof(err));
	CHECK_TRUE(!strstr(err, "secret-value") && !strstr(warnings, "secret-value"),
		   "a refused sandbox.env value is never printed");
	refused("HOME in sandbox.env", "{\"sandbox\": {\"env\": {\"HOME\": \"/h\"}}}",
		"sandbox.env.HOME is refused", "state directory");
	refused("ERRAND_SESSION in sandbox.env",
		"{\"sandbox\": {\"env\": {\"ERRAND_SESSION\": \"x\"}}}",
		"sandbox.env.ERRAND_SESSION is refused", "errand's own");
	refused("a bad sandbox.env name", "{\"sandbox\": {\"env\": {\"1A\": \"x\"}}}",
		"sandbox.env.1A: the name is not", NULL);
	refused("a sandbox.env number", "{\"sandbox\": {\"env\": {\"A\": 1}}}",
		"sandbox.env.A is a number; write a string value", NULL);
	refused("sandbox.env as a list", "{\"sandbox\": {\"env\": []}}",
		"sandbox.env is an array; write an object", NULL);
	refused("an unknown syscall",
		"{\"sandbox\": {\"blockedSyscalls\": [\"ptrace\", \"ptrac\"]}}",
		"sandbox.blockedSyscalls[1]: \"ptrac\" is not a system call", NULL);
	refused("blockedSyscalls holding a number", "{\"sandbox\": {\"blockedSyscalls\": [101]}}",
		"sandbox.blockedSyscalls[0] is a number", NULL);
	refused("a size with a bad unit", "{\"sandbox\": {\"limits\": {\"memory\": \"4q\"}}}",
		"sandbox.limits.memory: \"4q\" is not a size", NULL);
	refused("a size of 0", "{\"sandbox\": {\"limits\": {\"fileSize\": 0}}}",
		"sandbox.limits.fileSize is not above 0", NULL);
	refused("a negative size", "{\"sandbox\": {\"limits\": {\"tmp\": \"-1m\"}}}",
		"sandbox.limits.tmp: \"-1m\" is not a size", NULL);
	refused("a size as a list", "{\"sandbox\": {\"limits\": {\"shm\": []}}}",
		"sandbox.limits.shm is an array", NULL);
	refused("cpu 0", "{\"sandbox\": {\"limits\": {\"cpu\": 0}}}",
		"sandbox.limits.cpu is out of range", NULL);
	refused("cpu as a string", "{\"sandbox\": {\"limits\": {\"cpu\": \"2\"}}}",
		"sandbox.limits.cpu is a string", NULL);
	refused("pids 0", "{\"sandbox\": {\"limits\": {\"pids\": 0}}}",
		"sandbox.limits.pids: 0 is out of range", NULL);

	CHECK_INT(load("{\"sandbox\": {\"limits\": {\"cpu\": 0.5, \"memory\": 1048576}}}", &cfg,
		       err, sizeof(err)),
		  0, "a fractional cpu and a size in bytes load (%s)", err);
	CHECK_INT(cfg.limits.cpu_milli, 500, "cpu 0.5 is 500 thousandths");
	CHECK_INT(cfg.limits.memory, 1048576, "memory in bytes");
	config_free(&cfg);

	CHECK_INT(config_parse_size("512m", &n), 0, "config_parse_size 512m");
	CHECK_INT(n, 512LL << 20, "512m is 512 MiB");
	CHECK_INT(config_parse_size("1GiB", &n), 0, "config_parse_size 1GiB");
	CHECK_INT(n, 1LL << 30, "1GiB is 1 GiB");
	CHECK_INT(config_parse_size("4096", &n), 0, "config_parse_size 4096");
	CHECK_INT(n, 4096, "4096 is bytes");
	CHECK_INT(config_parse_size("2kb", &n), 0, "config_parse_size 2kb");
	CHECK_INT(n, 2048, "2kb is 2048");
	CHECK_INT(config_parse_size("", &n), -EINVAL, "an empty size is refused");
	CHECK_INT(config_parse_size("m", &n), -EINVAL, "a unit alone is refused");
	CHECK_INT(config_parse_size("1 m", &n), -EINVAL, "a space is refused");
	CHECK_INT(config_parse_size("99999999999t", &n), -EINVAL, "an overflow is refused");
	CHECK_TRUE(config_env_reserved("PATH") != NULL, "PATH is reserved");
	CHECK_TRUE(config_env_reserved("ERRAND_X") != NULL, "ERRAND_X is reserved");
	CHECK_TRUE(config_env_reserved("LANG") == NULL, "LANG is not");
}

static void test_syntax(void)
{
	refused("a syntax error", "{\n  \"sandbox\": {\n    \"network\": \"none\",\n  }\n}\n",
		"config.json:4:", "fix the JSON there");
	refused("a duplicate key", "{\"sandbox\": {\"egress\": {}, \"egress\": {}}}", "duplicate",
		"config.json:1:");
	refused("an empty file", "", "config.json:", NULL);
}

static void test_pin_parse(void)
{
	static const struct {
		const char *in, *name, *addr;
		int port;
	} good[] = {
		{"api.example.com=198.18.0.10", "api.example.com", "198.18.0.10", 0},
		{"API.example.com.=198.18.0.10:8443", "api.example.com", "198.18.0.10", 8443},
		{"v6.example=2001:db8::1", "v6.example", "2001:db8::1", 0},
		{"v6.example=[2001:db8::1]:443", "v6.example", "2001:db8::1", 443},
	};
	static const struct {
		const char *in, *fix;
	} bad[] = {
		{"api.example.com", "write NAME=IP or NAME=IP:PORT"},
		{"=198.18.0.10", "pin name: empty host name"},
		{"*.example.com=198.18.0.10", "name one host"},
		{"198.18.0.1=198.18.0.10", "is an IP address"},
		{"api.example.com=api2.example.com", "is not an address"},
		{"api.example.com=198.18.0.10:0", "use 1-65535"},
		{"api.example.com=198.18.0.10:65536", "use 1-65535"},
		{"api.example.com=2001:db8::1:99999", "is not an address"},
		{"bücher.example=198.18.0.10", "use xn--bcher-kva.example"},
	};
	struct pin p = {.name = "untouched"};
	char err[CONFIG_ERRLEN], buf[ADDR_STRLEN];

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (!CHECK_INT(pin_parse(good[i].in, &p, err, sizeof(err)), 0, "pin_parse %s",
			       good[i].in))
			continue;
		CHECK_STR(p.name, good[i].name, "pin name of %s", good[i].in);
		CHECK_STR(addr_str(&p.addr, buf), good[i].addr, "pin address of %s", good[i].in);
		CHECK_INT(p.port, good[i].port, "pin port of %s", good[i].in);
	}
	strcpy(p.name, "untouched");
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		if (CHECK_INT(pin_parse(bad[i].in, &p, err, sizeof(err)), -EINVAL,
			      "pin_parse refuses %s", bad[i].in))
			CHECK_CONTAINS(err, bad[i].fix, "refusal of %s names the fix", bad[i].in);
	}
	CHECK_STR(p.name, "untouched", "a refused pin leaves its output alone");
}

static void test_distance(void)
{
	CHECK_INT(config_key_distance("egress", "egress"), 0, "distance egress/egress");
	CHECK_INT(config_key_distance("Egress", "egress"), 0, "distance ignores case");
	CHECK_INT(config_key_distance("egres", "egress"), 1, "distance egres/egress");
	CHECK_INT(config_key_distance("egerss", "egress"), 1, "a swap costs one");
	CHECK_INT(config_key_distance("placment", "placement"), 1, "distance placment");
	CHECK_INT(config_key_distance("treatAsPublik", "treatAsPublic"), 1,
		  "distance treatAsPublik");
	CHECK_INT(config_key_distance("", "abc"), 3, "distance from empty");
	CHECK_INT(config_key_distance("kitten", "sitting"), 3, "distance kitten/sitting");
	CHECK_INT(config_key_distance("ca", "abc"), 3, "optimal string alignment ca/abc");
}

/* sandbox.rules: every verb parses into its kind, errand's own closures are
 * appended, and what cannot be enforced as written is refused at load. */
static const struct config_rule *find_rule(const struct errand_config *cfg, const char *text,
					   bool builtin)
{
	for (size_t i = 0; i < cfg->rules.n; i++)
		if (!strcmp(cfg->rules.v[i].text, text) && cfg->rules.v[i].builtin == builtin)
			return &cfg->rules.v[i];
	return NULL;
}

static void test_rules(void)
{
	struct errand_config cfg;
	const struct config_rule *r;
	char err[CONFIG_ERRLEN];
	int rc;

	rc = load("{\"sandbox\": {\"rules\": {"
		  "\"allow\": [\"Read(~/data/**)\", \"Edit(/srv/w/*.txt)\", \"Create(/srv/w/**)\", "
		  "\"Delete(/srv/w/**)\", \"Exec(/opt/tool/bin/**)\", "
		  "\"Connect(unix:/run/docker.sock)\"], "
		  "\"deny\": [\"Read(~/.ssh/**)\", \"Exec(/usr/bin/curl)\", "
		  "\"Connect(unix:/run/app.sock)\"], "
		  "\"lazyAllow\": [\"Edit(~/.ssh/new/**)\"]}}}",
		  &cfg, err, sizeof(err));
	CHECK_INT(rc, 0, "rules of every verb load: %s", err);
	r = find_rule(&cfg, "Read(~/.ssh/**)", false);
	CHECK_TRUE(r && r->kind == RULE_DENY && r->verb == RULE_READ &&
			   !strcmp(r->path, "~/.ssh/**"),
		   "a deny Read rule keeps its ~/ path");
	r = find_rule(&cfg, "Connect(unix:/run/app.sock)", false);
	CHECK_TRUE(r && r->verb == RULE_CONNECT && !strcmp(r->path, "/run/app.sock"),
		   "a Connect rule's path is the socket's, without unix:");
	r = find_rule(&cfg, "Edit(~/.ssh/new/**)", false);
	CHECK_TRUE(r && r->kind == RULE_LAZY, "lazyAllow is its own kind");
	CHECK_TRUE(find_rule(&cfg, "Exec(/opt/tool/bin/**)", false) != NULL, "Exec parses");
	CHECK_TRUE(find_rule(&cfg, "Delete(/srv/w/**)", false) != NULL, "Delete parses");
	CHECK_TRUE(find_rule(&cfg, "Create(/srv/w/**)", false) != NULL, "Create parses");
	/* docker.sock is granted: no closure of errand's for it, the others stay */
	CHECK_TRUE(!find_rule(&cfg, "Connect(unix:/run/docker.sock)", true),
		   "a Connect allow of a host authority lifts errand's closure of it");
	CHECK_TRUE(find_rule(&cfg, "Connect(unix:/nix/var/nix/daemon-socket/socket)", true) != NULL,
		   "the Nix daemon's socket is closed by errand");
	CHECK_TRUE(find_rule(&cfg, "Connect(unix:/run/dbus/system_bus_socket)", true) != NULL,
		   "the D-Bus system bus is closed by errand");
	CHECK_TRUE(find_rule(&cfg, "Connect(unix:/run/errand/agent.sock)", true) != NULL,
		   "errand's own control socket is closed");
	r = find_rule(&cfg, "Read(/var/log/journal/**)", true);
	CHECK_TRUE(r && r->kind == RULE_DENY, "the journal is closed by default");
	config_free(&cfg);

	rc = load("{\"sandbox\": {\"allowJournal\": true}}", &cfg, err, sizeof(err));
	CHECK_INT(rc, 0, "allowJournal loads: %s", err);
	r = find_rule(&cfg, "Read(/run/log/journal/**)", true);
	CHECK_TRUE(r && r->kind == RULE_ALLOW, "allowJournal adds the journal's Read allow");
	config_free(&cfg);

	refused("a verb one letter off", "{\"sandbox\": {\"rules\": {\"deny\": [\"Raed(/x)\"]}}}",
		"unknown verb Raed in \"Raed(/x)\"; did you mean Read?", NULL);
	refused("a verb in lower case", "{\"sandbox\": {\"rules\": {\"deny\": [\"exec(/x)\"]}}}",
		"did you mean Exec?", NULL);
	refused("an unknown verb", "{\"sandbox\": {\"rules\": {\"allow\": [\"Fetch(/x)\"]}}}",
		"unknown verb Fetch in \"Fetch(/x)\"; write one of Read, Edit, Create, Delete, "
		"Exec, Connect",
		NULL);
	refused("a relative path", "{\"sandbox\": {\"rules\": {\"deny\": [\"Read(.ssh/**)\"]}}}",
		"sandbox.rules.deny[0]: \"Read(.ssh/**)\" names a relative path; write it from / "
		"or "
		"from ~/",
		NULL);
	refused("an unparseable rule", "{\"sandbox\": {\"rules\": {\"deny\": [\"Read /x\"]}}}",
		"\"Read /x\" is not a rule; write Verb(PATH)", NULL);
	refused("an unclosed rule", "{\"sandbox\": {\"rules\": {\"deny\": [\"Read(/x\"]}}}",
		"is not a rule", NULL);
	refused("a .. part", "{\"sandbox\": {\"rules\": {\"deny\": [\"Read(/x/../y)\"]}}}",
		"has an empty, . or .. part", NULL);
	refused("'**' inside a segment",
		"{\"sandbox\": {\"rules\": {\"deny\": [\"Read(/x/a**)\"]}}}",
		"'**' must be a whole path segment", NULL);
	refused("a Connect without unix:",
		"{\"sandbox\": {\"rules\": {\"deny\": [\"Connect(/run/x.sock)\"]}}}",
		"Connect takes a unix socket's path", NULL);
	refused("a Connect with a wildcard",
		"{\"sandbox\": {\"rules\": {\"deny\": [\"Connect(unix:/run/*.sock)\"]}}}",
		"a Connect rule names one socket", NULL);
	refused("Bash, with its reason",
		"{\"sandbox\": {\"rules\": {\"allow\": [\"Bash(git status)\"]}}}",
		"is refused: a command prefix can only be matched on the arguments in the "
		"process's memory",
		NULL);
	refused("a rules key a letter off", "{\"sandbox\": {\"rules\": {\"lazyalow\": []}}}",
		"did you mean sandbox.rules.lazyAllow?", NULL);
	refused("allowJournal as a string", "{\"sandbox\": {\"allowJournal\": \"yes\"}}",
		"sandbox.allowJournal is a string; write true or false", NULL);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_defaults();
	test_full();
	test_near_miss();
	test_unknown();
	test_types();
	test_confinement();
	test_syntax();
	test_pin_parse();
	test_distance();
	test_rules();
	unlink(write_file("config.json", ""));
	snprintf(warnings, sizeof(warnings), "%s/stderr", dir);
	unlink(warnings);
	rmdir(dir);
	return test_exit();
}
