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

#include "agent/dnspriv.h"
#include "agent/doctor.h"
#include "agent/enforce.h"
#include "agent/grant.h"
#include "agent/inspect.h"
#include "agent/observe.h"
#include "agent/client.h"
#include "agent/stdio.h"
#include "agent/request.h"
#include "agent/session.h"
#include "lib/config.h"
#include "lib/escape.h"
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
		fprintf(f, "  %-46s %s\n", c[i].usage, c[i].summary);
	fprintf(f, "\nerrandctl COMMAND --help shows a command's options.\n");
}

/* Bad input: one line that names what to change, exit 125. */
/* One line, whatever the input it quotes holds: escaped as the agent's
 * refusals are. */
__attribute__((format(printf, 1, 2), noreturn)) static void refuse(const char *fmt, ...)
{
	char line[2048], shown[ESC_LEN(1024)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "errandctl: %s\n", esc_text(line, shown, sizeof(shown)));
	exit(EXIT_ERRAND);
}

/* The run request carries its strings as JSON, which holds UTF-8 only: any
 * other is refused, never dropped from the command line. */
static json_t *req_string(const char *what, const char *v)
{
	char shown[ESC_LEN(128)];
	json_t *j = json_string(v);

	if (!j)
		refuse("run: %s '%s' is not valid UTF-8, and errand carries the command line as "
		       "UTF-8 text; pass it in UTF-8 (encode binary data, as base64 for example)",
		       what, esc_text(v, shown, sizeof(shown)));
	return j;
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

struct run_opts {
	const char *config_path;
	const char *project;
	const char *image;
	json_t *egress, *pins, *env, *secrets; /* strings, as the run request carries them */
	bool json;
};

static void run_usage(FILE *f)
{
	fprintf(f, "usage: errandctl run [--config FILE] [--egress none|open|HOST[:PORT]]...\n"
		   "                     [--pin NAME=IP[:PORT]]... [--secret "
		   "ENV[=SECRET]@HOST[,HOST...]]...\n"
		   "                     [--project DIR] [--image DIR]\n"
		   "                     [--env NAME=VALUE]... [--json] -- CMD [ARG...]\n");
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
			json_array_append_new(o->egress, req_string("--egress", v));
		} else if ((v = opt_value(argc, argv, &i, "--pin"))) {
			json_array_append_new(o->pins, req_string("--pin", v));
		} else if ((v = opt_value(argc, argv, &i, "--secret"))) {
			json_array_append_new(o->secrets, req_string("--secret", v));
		} else if ((v = opt_value(argc, argv, &i, "--project"))) {
			o->project = v;
		} else if ((v = opt_value(argc, argv, &i, "--image"))) {
			o->image = v;
		} else if ((v = opt_value(argc, argv, &i, "--env"))) {
			if (request_env_check(v, err, sizeof(err)))
				refuse("%s", err);
			json_array_append_new(o->env, req_string("--env", v));
		} else if (argv[i][0] == '-') {
			refuse("run: unknown option %s; see errandctl run --help", argv[i]);
		} else {
			refuse("run: put -- before the command (errandctl run [OPTIONS] -- %s ...)",
			       argv[i]);
		}
	}
	refuse("run: no command given; write errandctl run [OPTIONS] -- CMD [ARG...]");
}

/* The request errandctl run sends: its flags as strings, checked here the
 * way the agent will check them (applied to cfg, the configuration loaded
 * once), so bad input is refused before anything is made, whichever agent
 * runs the session. */
static json_t *run_request(int argc, char **argv, struct run_opts *o, int cmd,
			   struct errand_config *cfg)
{
	char err[CONFIG_ERRLEN], project[PATH_MAX], image[PATH_MAX];
	json_t *req = json_object(), *args = json_array();

	if (!req || !args)
		refuse("out of memory");
	for (int i = cmd; i < argc; i++)
		json_array_append_new(args, req_string("the command's argument", argv[i]));
	if (!realpath(o->project ? o->project : ".", project))
		refuse("run: project directory %s: %s; name an existing directory with --project",
		       o->project ? o->project : ".", strerror(errno));
	if (o->image && !realpath(o->image, image))
		refuse("run: --image %s: %s; name a root filesystem directory", o->image,
		       strerror(errno));
	json_object_set_new(req, "argv", args);
	json_object_set(req, "egress", o->egress);
	json_object_set(req, "pins", o->pins);
	json_object_set(req, "secrets", o->secrets);
	json_object_set(req, "env", o->env);
	json_object_set_new(req, "project", req_string("--project", project));
	if (o->image)
		json_object_set_new(req, "image", req_string("--image", image));
	if (o->json)
		json_object_set_new(req, "json", json_true());
	if (request_apply(cfg, req, err, sizeof(err)))
		refuse("%s", err);
	return req;
}

static int cmd_run(int argc, char **argv, const char *config_path)
{
	struct run_opts o = {.config_path = config_path};
	struct session_params sp = {};
	struct stdio_relay relay = {};
	char err[CONFIG_ERRLEN], *text = NULL;
	struct errand_config cfg;
	struct agent_conn *ac;
	json_t *req;
	int cmd, status, rc;

	o.egress = json_array();
	o.pins = json_array();
	o.secrets = json_array();
	o.env = json_array();
	cmd = run_parse(argc, argv, &o);
	if (cmd >= argc)
		refuse("run: no command after --; write errandctl run [OPTIONS] -- CMD [ARG...]");
	config_path = o.config_path ? o.config_path : CONFIG_DEFAULT_PATH;
	if (config_read_text(config_path, o.config_path != NULL, &text, err, sizeof(err)) ||
	    config_load_text(text, config_path, &cfg, err, sizeof(err)))
		refuse("%s", err);
	req = run_request(argc, argv, &o, cmd, &cfg);
	/* The daemon runs the session when it is there; else this process does. */
	ac = agent_connect(cfg.run_dir);
	/* An agent that refuses this user, or is stuck, was named already. */
	if (!ac && agent_connect_said(errno))
		exit(EXIT_ERRAND);
	if (!ac && geteuid() != 0)
		refuse("run: no errand-agent runs, and the embedded agent needs root to "
		       "make the session's cgroup, network and BPF programs; run errandctl "
		       "as root or start errand-agent");
	/* Either agent gets pipes where the caller gave sockets. */
	if ((rc = stdio_relay_start(&relay)))
		refuse("run: stdin, stdout or stderr is a socket, and it cannot be relayed "
		       "through a pipe: %s; give the command a pipe or a file",
		       strerror(-rc));
	if (ac) {
		/* The launcher takes TERM from its own environment, which is the
		 * agent's: the caller's goes along, unless --env named one. */
		const char *term = getenv("TERM");
		bool has_term = false;
		json_t *it;
		size_t i;

		json_array_foreach(o.env, i, it) has_term |=
			!strncmp(json_string_value(it), "TERM=", 5);
		if (term && !has_term)
			json_array_append_new(json_object_get(req, "env"),
					      json_sprintf("TERM=%s", term));
		status = client_run(ac, req, cfg.run_dir);
		agent_close(ac);
	} else {
		sp.config_text = text;
		sp.config_path = config_path;
		sp.request = req;
		sp.st = state_open_dir(cfg.state_dir);
		status = session_run(&sp);
		state_close(sp.st);
	}
	stdio_relay_finish(&relay);
	json_decref(req);
	json_decref(o.egress);
	json_decref(o.pins);
	json_decref(o.secrets);
	json_decref(o.env);
	config_free(&cfg);
	free(text);
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

/* The options every inspection command shares: --config FILE, --json, and
 * its positional arguments (at most max, at least min). */
struct ctl_args {
	const char *config_path;
	bool json;
	const char *pos[3];
	int n_pos;
	struct errand_config cfg;
	struct state *st; /* without an agent: state.db, opened here */
	struct agent_conn *ac;
};

static void ctl_parse(int argc, char **argv, const char *config_path, const char *usage, int min,
		      int max, struct ctl_args *a)
{
	char err[CONFIG_ERRLEN];

	memset(a, 0, sizeof(*a));
	a->config_path = config_path;
	for (int i = 1; i < argc; i++) {
		const char *v;

		if (!strcmp(argv[i], "--json")) {
			a->json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: errandctl %s\n", usage);
			exit(0);
		} else if ((v = opt_value(argc, argv, &i, "--config"))) {
			a->config_path = v;
		} else if (argv[i][0] == '-') {
			refuse("%s: unknown option %s; see errandctl %s --help", argv[0], argv[i],
			       argv[0]);
		} else if (a->n_pos < max) {
			a->pos[a->n_pos++] = argv[i];
		} else {
			refuse("%s: too many arguments; write errandctl %s", argv[0], usage);
		}
	}
	if (a->n_pos < min)
		refuse("%s: missing arguments; write errandctl %s", argv[0], usage);
	if (a->n_pos && strcmp(argv[0], "version") && strcmp(argv[0], "reload") &&
	    (strlen(a->pos[0]) != SESSION_ID_LEN ||
	     strspn(a->pos[0], "0123456789abcdef") != SESSION_ID_LEN))
		refuse("%s: %s is not a session id (8 hex digits, as errandctl sessions prints "
		       "them)",
		       argv[0], a->pos[0]);
	if (config_load(a->config_path ? a->config_path : CONFIG_DEFAULT_PATH,
			a->config_path != NULL, &a->cfg, err, sizeof(err)))
		refuse("%s", err);
}

/* The agent when one runs; else this process reads state.db itself. */
static void ctl_connect(struct ctl_args *a, bool need_root)
{
	a->ac = agent_connect(a->cfg.run_dir);
	if (a->ac)
		return;
	if (agent_connect_said(errno))
		exit(EXIT_ERRAND);
	if (need_root && geteuid() != 0)
		refuse("no errand-agent runs, and reading errand's state needs root; run errandctl "
		       "as root");
	a->st = state_open_dir(a->cfg.state_dir);
	if (!a->st)
		refuse("cannot open state.db under %s", a->cfg.state_dir);
}

static void ctl_done(struct ctl_args *a)
{
	agent_close(a->ac);
	state_close(a->st);
	config_free(&a->cfg);
}

/* One request to the agent; the answer's member, or the agent's error
 * refused in one line. */
static json_t *ctl_call(struct ctl_args *a, uint16_t type, json_t *payload, uint16_t want,
			const char *member)
{
	struct control_msg m = {};
	char err[512];
	json_t *out;

	if (agent_call(a->ac, type, payload, &m, err, sizeof(err)))
		refuse("%s", err);
	json_decref(payload);
	if (m.type == CONTROL_ERROR)
		refuse("%s", esc_text(json_string_value(json_object_get(m.payload, "error")),
				      (char[ESC_LEN(1024)]){0}, ESC_LEN(1024)));
	if (m.type != want)
		refuse("errand-agent answered %s with %s", control_type_name(type),
		       control_type_name(m.type));
	out = member ? json_incref(json_object_get(m.payload, member)) : json_incref(m.payload);
	control_msg_free(&m);
	return out;
}

static void print_json(const json_t *j)
{
	/* ASCII: what sessions named reaches no terminal raw, escaped or not */
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);

	if (text)
		printf("%s\n", text);
	free(text);
}

static int cmd_sessions(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	json_t *list;

	ctl_parse(argc, argv, config_path, "sessions [--json]", 0, 0, &a);
	ctl_connect(&a, true);
	list = a.ac ? ctl_call(&a, CONTROL_SESSIONS, NULL, CONTROL_SESSIONS_REPLY, "sessions")
		    : inspect_sessions(a.st, &a.cfg);
	if (a.json)
		print_json(list);
	else
		inspect_print_sessions(list, stdout);
	json_decref(list);
	ctl_done(&a);
	return 0;
}

static int cmd_show(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	char err[512];
	json_t *show;

	ctl_parse(argc, argv, config_path, "show ID [--json]", 1, 1, &a);
	ctl_connect(&a, true);
	if (a.ac) {
		show = ctl_call(&a, CONTROL_SHOW, json_pack("{s:s}", "id", a.pos[0]),
				CONTROL_SHOW_REPLY, "session");
	} else if (!(show = inspect_show(a.st, &a.cfg, a.pos[0], err, sizeof(err)))) {
		refuse("%s", err);
	}
	if (a.json)
		print_json(show);
	else
		inspect_print_show(show, stdout);
	json_decref(show);
	ctl_done(&a);
	return 0;
}

static void print_done(const struct ctl_args *a, const char *what, const char *id, const char *host)
{
	if (a->json) {
		json_t *o = json_pack("{s:s,s:s}", "result", what, "session", id);

		if (host)
			json_object_set_new(o, "host", json_string(host));
		print_json(o);
		json_decref(o);
	} else {
		printf("%s%s%s (session %s)\n", what, host ? " " : "", host ? host : "", id);
	}
}

static int cmd_stop(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	char err[512];

	ctl_parse(argc, argv, config_path, "stop ID [--json]", 1, 1, &a);
	ctl_connect(&a, true);
	if (a.ac)
		json_decref(ctl_call(&a, CONTROL_STOP, json_pack("{s:s}", "id", a.pos[0]),
				     CONTROL_OK, NULL));
	else if (inspect_stop(a.st, a.pos[0], err, sizeof(err)))
		refuse("%s", err);
	print_done(&a, "stopped", a.pos[0], NULL);
	ctl_done(&a);
	return 0;
}

static int cmd_grant(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	enum grant_kind kind = GRANT_ONCE;
	int64_t secs = 0;
	char err[512];

	ctl_parse(argc, argv, config_path, "grant ID HOST [once|DURATION|always] [--json]", 2, 3,
		  &a);
	if (a.n_pos == 3 && grant_kind_parse(a.pos[2], &kind, &secs, err, sizeof(err)))
		refuse("grant: %s", err);
	ctl_connect(&a, true);
	if (a.ac) {
		json_t *p = json_pack("{s:s,s:s,s:s}", "id", a.pos[0], "host", a.pos[1], "kind",
				      grant_kind_name(kind));

		if (kind == GRANT_UNTIL)
			json_object_set_new(p, "seconds", json_integer(secs));
		json_decref(ctl_call(&a, CONTROL_GRANT, p, CONTROL_OK, NULL));
	} else if (inspect_grant(a.st, &a.cfg, a.pos[0], a.pos[1], kind, secs, err, sizeof(err))) {
		refuse("grant: %s", err);
	}
	print_done(&a, "granted", a.pos[0], a.pos[1]);
	ctl_done(&a);
	return 0;
}

static int cmd_revoke(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	char err[512];

	ctl_parse(argc, argv, config_path, "revoke ID HOST [--json]", 2, 2, &a);
	ctl_connect(&a, true);
	if (a.ac)
		json_decref(ctl_call(&a, CONTROL_REVOKE,
				     json_pack("{s:s,s:s}", "id", a.pos[0], "host", a.pos[1]),
				     CONTROL_OK, NULL));
	else if (inspect_revoke(a.st, &a.cfg, a.pos[0], a.pos[1], err, sizeof(err)))
		refuse("revoke: %s", err);
	print_done(&a, "revoked", a.pos[0], a.pos[1]);
	ctl_done(&a);
	return 0;
}

static int cmd_denied(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	json_t *list;

	ctl_parse(argc, argv, config_path, "denied [ID] [--json]", 0, 1, &a);
	ctl_connect(&a, true);
	if (a.ac) {
		json_t *p = a.n_pos ? json_pack("{s:s}", "id", a.pos[0]) : json_object();

		list = ctl_call(&a, CONTROL_DENIED, p, CONTROL_DENIED_REPLY, "denied");
	} else {
		list = inspect_denied(a.st, a.n_pos ? a.pos[0] : NULL);
	}
	if (a.json)
		print_json(list);
	else
		inspect_print_denied(list, stdout);
	json_decref(list);
	ctl_done(&a);
	return 0;
}

static int cmd_receipts(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	json_t *list;

	ctl_parse(argc, argv, config_path, "receipts [ID] [--json]", 0, 1, &a);
	ctl_connect(&a, true);
	if (a.ac) {
		json_t *p = a.n_pos ? json_pack("{s:s}", "id", a.pos[0]) : json_object();

		list = ctl_call(&a, CONTROL_RECEIPTS, p, CONTROL_RECEIPTS_REPLY, "receipts");
	} else {
		list = inspect_receipts(&a.cfg, a.n_pos ? a.pos[0] : NULL);
	}
	if (a.json)
		print_json(list);
	else
		inspect_print_receipts(list, stdout);
	json_decref(list);
	ctl_done(&a);
	return 0;
}

static int cmd_reload(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	bool reloaded = false;

	ctl_parse(argc, argv, config_path, "reload [--json]", 0, 0, &a);
	a.ac = agent_connect(a.cfg.run_dir);
	if (!a.ac && agent_connect_said(errno))
		exit(EXIT_ERRAND);
	if (a.ac) {
		json_decref(ctl_call(&a, CONTROL_RELOAD, NULL, CONTROL_OK, NULL));
		reloaded = true;
	}
	if (a.json) {
		json_t *o =
			json_pack("{s:b,s:s}", "reloaded", reloaded, "message",
				  reloaded ? "errand-agent reloaded its configuration"
					   : "no errand-agent runs; each errandctl run reads the "
					     "configuration itself");

		print_json(o);
		json_decref(o);
	} else {
		printf("%s\n", reloaded ? "errand-agent reloaded its configuration"
					: "no errand-agent runs; each errandctl run reads the "
					  "configuration itself");
	}
	ctl_done(&a);
	return 0;
}

static int cmd_version(int argc, char **argv, const char *config_path)
{
	struct ctl_args a;
	json_t *agent = NULL, *o;

	ctl_parse(argc, argv, config_path, "version [--json]", 0, 0, &a);
	a.ac = agent_connect(a.cfg.run_dir);
	if (a.ac)
		agent = ctl_call(&a, CONTROL_VERSION_REQ, NULL, CONTROL_VERSION_REPLY, NULL);
	if (a.json) {
		o = json_pack("{s:s,s:i,s:o}", "errandctl", ERRAND_VERSION, "protocol",
			      CONTROL_VERSION, "agent",
			      agent ? json_incref(json_object_get(agent, "version")) : json_null());
		print_json(o);
		json_decref(o);
	} else {
		printf("errandctl %s\n", ERRAND_VERSION);
		if (agent)
			printf("errand-agent %s (protocol %" JSON_INTEGER_FORMAT ")\n",
			       json_string_value(json_object_get(agent, "version")),
			       json_integer_value(json_object_get(agent, "protocol")));
		else
			printf("errand-agent not running\n");
	}
	json_decref(agent);
	ctl_done(&a);
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
	{"run", "run [OPTIONS] -- CMD [ARG...]", "run CMD in a confined session", cmd_run},
	{"sessions", "sessions [--json]", "the running sessions", cmd_sessions},
	{"show", "show ID [--json]", "a session's policy, allow map, programs, counters and gaps",
	 cmd_show},
	{"stop", "stop ID [--json]", "stop a session: every process of it is killed", cmd_stop},
	{"grant", "grant ID HOST [once|DURATION|always] [--json]",
	 "let a running session reach HOST (once by default)", cmd_grant},
	{"revoke", "revoke ID HOST [--json]", "take a grant back", cmd_revoke},
	{"denied", "denied [ID] [--json]", "what sessions were refused", cmd_denied},
	{"receipts", "receipts [ID] [--json]",
	 "the provider calls sessions made through the broker", cmd_receipts},
	{"observe", "observe [SESSION] [--json]",
	 "print running sessions' events as they happen (one session's: until it ends)",
	 cmd_observe},
	{"doctor", "doctor [--json]", "what this host can enforce, and every gap", cmd_doctor},
	{"reload", "reload [--json]", "make errand-agent reread its configuration", cmd_reload},
	{"version", "version [--json]", "errandctl's and the agent's versions", cmd_version},
	{"help", "help", "this list", cmd_help},
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

	/* The DNS worker: this binary exec'd again (agent/dnspriv.c). */
	if (dnsp_worker_argv(argc, argv))
		_exit(dnsp_worker_exec_main(argv));
	dnsp_exe_open();
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
	enforce_libbpf_quiet();
	if (i >= argc)
		refuse("no command given; write errandctl COMMAND (errandctl --help lists them)");
	for (size_t c = 0; c < ARRAY_SIZE(commands); c++)
		if (!strcmp(argv[i], commands[c].name))
			return commands[c].run(argc - i, argv + i, config_path);
	refuse("unknown command %s; see errandctl --help", argv[i]);
}
