/* errandctl: the command line. A table of commands generates the help; each
 * command parses its own options, refuses bad input in one line with exit
 * 125 before anything is created, and runs the session through the embedded
 * agent (the same code the daemon runs). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/doctor.h"
#include "agent/observe.h"
#include "agent/session.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/util.h"

#define EXIT_ERRAND 125
#define ERRAND_VERSION "0.1.0"

struct command {
	const char *name;
	const char *usage;
	const char *summary;
	int (*run)(int argc, char **argv, const char *config_path);
};

static const struct command *commands_table(size_t *n);

static void usage_all(FILE *f)
{
	size_t n;
	const struct command *c = commands_table(&n);

	fprintf(f, "usage: errandctl [--config FILE] [-v] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-8s %s\n", c[i].name, c[i].summary);
	fprintf(f, "\nerrandctl COMMAND --help shows a command's options.\n");
}

/* Bad input: one line that names what to change, exit 125. */
__attribute__((format(printf, 1, 2), noreturn)) static void refuse(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "errandctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_ERRAND);
}

/* "--name VALUE" or "--name=VALUE": returns the value and advances *i. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t len = strlen(name);

	if (!strncmp(argv[*i], name, len) && argv[*i][len] == '=')
		return argv[*i] + len + 1;
	if (strcmp(argv[*i], name))
		return NULL;
	if (*i + 1 >= argc)
		refuse("%s needs a value", name);
	return argv[++*i];
}

static bool env_name_ok(const char *s, size_t len)
{
	if (!len || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

struct run_opts {
	const char *config_path;
	const char *project;
	const char *image;
	bool json;
	bool mode_none, mode_open;
	struct host_rule *rules;
	size_t n_rules;
	struct pin *pins;
	size_t n_pins;
	char **env;
	size_t n_env;
};

static void run_usage(FILE *f)
{
	fprintf(f, "usage: errandctl run [--config FILE] [--egress none|open|HOST[:PORT]]...\n"
		   "                     [--pin NAME=IP[:PORT]]... [--project DIR] [--image DIR]\n"
		   "                     [--env NAME=VALUE]... [--json] -- CMD [ARG...]\n");
}

static void *grow(void *p, size_t n, size_t size)
{
	void *q = reallocarray(p, n + 1, size);

	if (!q)
		refuse("out of memory");
	return q;
}

static void run_egress(struct run_opts *o, const char *v)
{
	char err[256];

	if (!strcmp(v, "none")) {
		o->mode_none = true;
	} else if (!strcmp(v, "open")) {
		o->mode_open = true;
	} else {
		o->rules = grow(o->rules, o->n_rules, sizeof(*o->rules));
		if (host_rule_parse(v, &o->rules[o->n_rules], err, sizeof(err)))
			refuse("--egress %s: %s", v, err);
		o->n_rules++;
	}
	if (o->mode_none && (o->mode_open || o->n_rules))
		refuse("--egress none removes the network; it cannot be combined with other --egress");
}

static int run_parse(int argc, char **argv, struct run_opts *o)
{
	char err[256];
	int i;

	for (i = 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "--"))
			return i + 1;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			run_usage(stdout);
			exit(0);
		} else if (!strcmp(argv[i], "--json")) {
			o->json = true;
		} else if ((v = opt_value(argc, argv, &i, "--config"))) {
			o->config_path = v;
		} else if ((v = opt_value(argc, argv, &i, "--egress"))) {
			run_egress(o, v);
		} else if ((v = opt_value(argc, argv, &i, "--pin"))) {
			o->pins = grow(o->pins, o->n_pins, sizeof(*o->pins));
			if (pin_parse(v, &o->pins[o->n_pins], err, sizeof(err)))
				refuse("--pin %s: %s", v, err);
			o->n_pins++;
		} else if ((v = opt_value(argc, argv, &i, "--project"))) {
			o->project = v;
		} else if ((v = opt_value(argc, argv, &i, "--image"))) {
			o->image = v;
		} else if ((v = opt_value(argc, argv, &i, "--env"))) {
			const char *eq = strchr(v, '=');

			if (!eq || !env_name_ok(v, (size_t)(eq - v)))
				refuse("--env %s: write NAME=VALUE with a NAME of letters, digits "
				       "and _",
				       v);
			if (!strncmp(v, "PATH=", 5) || !strncmp(v, "HOME=", 5))
				refuse("--env %.4s: errand places PATH and HOME itself; use "
				       "sandbox.pathExtra for PATH",
				       v);
			o->env = grow(o->env, o->n_env + 1, sizeof(*o->env));
			o->env[o->n_env++] = (char *)v;
			o->env[o->n_env] = NULL;
		} else if (argv[i][0] == '-') {
			refuse("run: unknown option %s; see errandctl run --help", argv[i]);
		} else {
			refuse("run: put -- before the command (errandctl run [OPTIONS] -- %s ...)",
			       argv[i]);
		}
	}
	refuse("run: no command given; write errandctl run [OPTIONS] -- CMD [ARG...]");
}

static int cmd_run(int argc, char **argv, const char *config_path)
{
	struct run_opts o = { .config_path = config_path };
	struct errand_config cfg;
	struct session_spec spec = {};
	struct doctor_report *rep;
	char err[CONFIG_ERRLEN], project[PATH_MAX], image[PATH_MAX];
	int cmd, status;

	cmd = run_parse(argc, argv, &o);
	if (cmd >= argc)
		refuse("run: no command after --; write errandctl run [OPTIONS] -- CMD [ARG...]");
	if (config_load(o.config_path ? o.config_path : CONFIG_DEFAULT_PATH, o.config_path != NULL,
			&cfg, err, sizeof(err)))
		refuse("%s", err);
	if (o.mode_none)
		cfg.network = NETWORK_NONE;
	if (o.mode_open)
		cfg.egress_mode = EGRESS_OPEN;
	else if (o.n_rules)
		cfg.egress_mode = EGRESS_RESTRICTED;
	for (size_t i = 0; i < o.n_rules; i++)
		if (config_add_rule(&cfg, &o.rules[i]))
			refuse("out of memory");
	for (size_t i = 0; i < o.n_pins; i++)
		if (config_add_pin(&cfg, &o.pins[i]))
			refuse("out of memory");
	if (!realpath(o.project ? o.project : ".", project))
		refuse("run: project directory %s: %s; name an existing directory with --project",
		       o.project ? o.project : ".", strerror(errno));
	if (o.image) {
		if (!realpath(o.image, image))
			refuse("run: --image %s: %s; name a root filesystem directory", o.image,
			       strerror(errno));
		free(cfg.image);
		cfg.image = strdup(image);
		if (!cfg.image)
			refuse("out of memory");
	}
	if (geteuid() != 0)
		refuse("run: the embedded agent needs root to make the session's cgroup, network "
		       "and BPF programs; run errandctl as root");
	/* What this host cannot enforce refuses the session, or is stated. */
	rep = doctor_probe(&cfg);
	if (!rep)
		refuse("run: cannot probe this host's enforcement: %s", strerror(errno));
	if (doctor_gate(rep, &cfg)) {
		doctor_report_free(rep);
		config_free(&cfg);
		return EXIT_ERRAND;
	}
	doctor_report_free(rep);
	spec.cfg = &cfg;
	spec.project = project;
	spec.argv = argv + cmd;
	spec.env = o.env;
	spec.json = o.json;
	status = session_run(&spec);
	config_free(&cfg);
	free(o.rules);
	free(o.pins);
	free(o.env);
	return status;
}

static int cmd_observe(int argc, char **argv, const char *config_path)
{
	struct errand_config cfg;
	const char *session = NULL;
	char err[CONFIG_ERRLEN];
	bool json = false;
	int status;

	for (int i = 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: errandctl observe [--config FILE] [SESSION] [--json]\n");
			return 0;
		} else if ((v = opt_value(argc, argv, &i, "--config"))) {
			config_path = v;
		} else if (argv[i][0] == '-') {
			refuse("observe: unknown option %s; see errandctl observe --help", argv[i]);
		} else if (!session) {
			session = argv[i];
		} else {
			refuse("observe: one session at most (%s and %s given)", session, argv[i]);
		}
	}
	if (session && (strlen(session) != 8 || strspn(session, "0123456789abcdef") != 8))
		refuse("observe: %s is not a session id (8 hex digits, as errandctl prints them)",
		       session);
	if (config_load(config_path ? config_path : CONFIG_DEFAULT_PATH, config_path != NULL, &cfg,
			err, sizeof(err)))
		refuse("%s", err);
	status = observe_main(cfg.run_dir, session, json);
	config_free(&cfg);
	return status;
}

static int cmd_doctor(int argc, char **argv, const char *config_path)
{
	struct errand_config cfg;
	struct doctor_report *rep;
	char err[CONFIG_ERRLEN];
	bool json = false;

	for (int i = 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return printf("usage: errandctl doctor [--config FILE] [--json]\n"), 0;
		else if ((v = opt_value(argc, argv, &i, "--config")))
			config_path = v;
		else
			refuse("doctor: unknown option %s; see errandctl doctor --help", argv[i]);
	}
	if (config_load(config_path ? config_path : CONFIG_DEFAULT_PATH, config_path != NULL, &cfg,
			err, sizeof(err)))
		refuse("%s", err);
	if (geteuid() != 0)
		refuse("doctor: probing BPF, cgroups and namespaces needs root; run it as root");
	rep = doctor_probe(&cfg);
	if (!rep)
		refuse("doctor: cannot probe this host: %s", strerror(errno));
	doctor_print(rep, &cfg, json, stdout);
	doctor_report_free(rep);
	config_free(&cfg);
	return 0;
}

static int cmd_version(int argc, char **argv, const char *config_path)
{
	(void)argc;
	(void)argv;
	(void)config_path;
	printf("errandctl %s\n", ERRAND_VERSION);
	return 0;
}

static int cmd_help(int argc, char **argv, const char *config_path)
{
	(void)argc;
	(void)argv;
	(void)config_path;
	usage_all(stdout);
	return 0;
}

static const struct command commands[] = {
	{ "run", "run [OPTIONS] -- CMD [ARG...]", "run CMD in a confined session", cmd_run },
	{ "doctor", "doctor [--json]", "what this host can enforce, and every gap", cmd_doctor },
	{ "observe", "observe [SESSION] [--json]", "print running sessions' events as they happen",
	  cmd_observe },
	{ "version", "version", "print errand's version", cmd_version },
	{ "help", "help", "this list", cmd_help },
};

static const struct command *commands_table(size_t *n)
{
	*n = ARRAY_SIZE(commands);
	return commands;
}

int main(int argc, char **argv)
{
	const char *config_path = NULL;
	bool verbose = false;
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *v;

		if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			verbose = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage_all(stdout);
			return 0;
		} else if ((v = opt_value(argc, argv, &i, "--config"))) {
			config_path = v;
		} else {
			refuse("unknown option %s; see errandctl --help", argv[i]);
		}
	}
	log_init("errand", verbose);
	if (i >= argc) {
		usage_all(stderr);
		return EXIT_ERRAND;
	}
	for (size_t c = 0; c < ARRAY_SIZE(commands); c++)
		if (!strcmp(argv[i], commands[c].name))
			return commands[c].run(argc - i, argv + i, config_path);
	refuse("unknown command %s; see errandctl --help", argv[i]);
}
