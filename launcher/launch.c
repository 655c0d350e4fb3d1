/* errand-launch: main and argument parsing, then the outer launcher's steps
 * as root in the host's namespaces: join the cgroup and netns, clone the
 * session's PID 1, map its ids, and wait for it, passing its status on. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

enum opt { OPT_SESSION, OPT_CGROUP, OPT_NETNS, OPT_UID, OPT_GID, OPT_RESOLV, OPT_ENV, OPT_CWD };

static const struct {
	const char *name;
	const char *meta;
	const char *what; /* for "is missing; pass ..." */
} opts[] = {
	[OPT_SESSION] = {"--session", "ID", "the session's id"},
	[OPT_CGROUP] = {"--cgroup", "DIR", "the session's cgroup v2 directory"},
	[OPT_NETNS] = {"--netns", "PATH", "the session's network namespace file"},
	[OPT_UID] = {"--uid", "UID", "the host uid the session runs as"},
	[OPT_GID] = {"--gid", "GID", "the host gid the session runs as"},
	[OPT_RESOLV] = {"--resolv", "FILE", "the file to bind on /etc/resolv.conf"},
	[OPT_ENV] = {"--env", "NAME=VALUE", "a variable for the command"},
	[OPT_CWD] = {"--cwd", "DIR", "the command's working directory"},
};

#define HOSTNAME_MAX 64 /* the kernel's limit for sethostname() */

static const char usage[] =
	"errand-launch --session ID --cgroup DIR --netns PATH --uid UID "
	"--gid GID [--resolv FILE] [--env NAME=VALUE]... [--cwd DIR] -- CMD [ARG...]";

static int find_opt(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
			return i;
	return -1;
}

/* The id becomes the hostname and appears in messages: keep it plain. */
static int check_session(const char *s)
{
	size_t len = strlen(s);
	bool ok = len > 0 && len <= HOSTNAME_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = isalnum((unsigned char)s[i]) || strchr("._-", s[i]);
	if (!ok) {
		log_warnx("--session '%s' cannot be a hostname; use 1 to %d of [A-Za-z0-9._-]", s,
			  HOSTNAME_MAX);
		return -EINVAL;
	}
	return 0;
}

static int parse_id(const char *opt, const char *s, unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	/* strtoul takes signs and spaces; an id is digits only. (uid_t)-1 means "no id". */
	if (!isdigit((unsigned char)s[0]) || *end) {
		log_warnx("%s '%s' is not a numeric id; pass a number such as 65534", opt, s);
		return -EINVAL;
	}
	if (errno || v >= UINT32_MAX) {
		log_warnx("%s %s is out of range; pass an id below 4294967295", opt, s);
		return -EINVAL;
	}
	if (v == 0) {
		log_warnx("%s 0 is host root, which sessions never run as; pass another id", opt);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int check_env(const char *s)
{
	const char *eq = strchr(s, '=');
	bool ok = eq && eq > s && !isdigit((unsigned char)s[0]);

	if (!eq) {
		log_warnx("--env '%s' has no '='; pass --env NAME=VALUE", s);
		return -EINVAL;
	}
	for (const char *c = s; ok && c < eq; c++)
		ok = *c == '_' || isalnum((unsigned char)*c);
	if (!ok) {
		log_warnx("--env '%s': the name is not [A-Za-z_][A-Za-z0-9_]*; rename the variable",
			  s);
		return -EINVAL;
	}
	return 0;
}

/* One line naming the first thing wrong, then -EINVAL; nothing is created
 * before the whole command line has been checked. */
static int parse_args(int argc, char **argv, struct launch_args *a)
{
	const char *val[ARRAY_SIZE(opts)] = {NULL};
	bool dashdash = false;
	int i, r;

	memset(a, 0, sizeof(*a));
	a->env = calloc(argc, sizeof(*a->env));
	if (!a->env) {
		log_warn("cannot parse the command line");
		return -ENOMEM;
	}

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq, *v;
		size_t len;
		int o;

		if (!strcmp(arg, "--")) {
			dashdash = true;
			i++;
			break;
		}
		if (arg[0] != '-') {
			log_warnx("unexpected argument '%s'; put -- before the command", arg);
			return -EINVAL;
		}
		eq = strchr(arg, '=');
		len = eq ? (size_t)(eq - arg) : strlen(arg);
		o = find_opt(arg, len);
		if (o < 0) {
			log_warnx("unknown option '%.*s'; usage: %s", (int)len, arg, usage);
			return -EINVAL;
		}
		if (eq)
			v = eq + 1;
		else if (i + 1 < argc)
			v = argv[++i];
		else {
			log_warnx("%s needs a value; pass %s %s", opts[o].name, opts[o].name,
				  opts[o].meta);
			return -EINVAL;
		}
		if (o == OPT_ENV) {
			a->env[a->n_env++] = (char *)v;
			continue;
		}
		if (val[o]) {
			log_warnx("%s is given twice; pass it once", opts[o].name);
			return -EINVAL;
		}
		val[o] = v;
	}
	if (!dashdash) {
		log_warnx("no command; end the options with --, then give the command");
		return -EINVAL;
	}
	if (i >= argc) {
		log_warnx("no command after --; give the command to run after it");
		return -EINVAL;
	}
	a->cmd = argv + i;

	for (size_t o = 0; o < ARRAY_SIZE(opts); o++) {
		if (o == OPT_ENV)
			continue;
		if (val[o] && !val[o][0]) {
			log_warnx("%s is empty; pass %s %s, %s", opts[o].name, opts[o].name,
				  opts[o].meta, opts[o].what);
			return -EINVAL;
		}
		if (!val[o] && o != OPT_RESOLV && o != OPT_CWD) {
			log_warnx("%s is missing; pass %s %s, %s", opts[o].name, opts[o].name,
				  opts[o].meta, opts[o].what);
			return -EINVAL;
		}
	}
	a->session = val[OPT_SESSION];
	a->cgroup = val[OPT_CGROUP];
	a->netns = val[OPT_NETNS];
	a->resolv = val[OPT_RESOLV];
	a->cwd = val[OPT_CWD];
	r = check_session(a->session);
	if (r < 0)
		return r;
	r = parse_id("--uid", val[OPT_UID], &a->uid);
	if (r < 0)
		return r;
	r = parse_id("--gid", val[OPT_GID], &a->gid);
	if (r < 0)
		return r;
	for (size_t k = 0; k < a->n_env; k++) {
		r = check_env(a->env[k]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A failed launch must not leave a half-made session behind. */
static int abandon(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return LAUNCH_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	struct launch_args a;
	cleanup_free char **env = NULL;
	int sync[2], r;
	pid_t pid;

	log_init("errand-launch", false);
	r = parse_args(argc, argv, &a);
	env = a.env;
	if (r < 0)
		return LAUNCH_EXIT_FAIL;
	a.term = getenv("TERM");

	/* Before any child exists, so no signal meant for it is lost. */
	if (reap_block_signals() < 0)
		fatal("cannot block signals for forwarding");
	if (ns_join_cgroup(a.cgroup) < 0)
		return LAUNCH_EXIT_FAIL;
	/* As root in the host's user namespace, so the session gets the network
	 * namespace but no capability over it. */
	if (ns_enter_netns(a.netns) < 0)
		return LAUNCH_EXIT_FAIL;
	/* Supplementary groups are host gids the user namespace carries along
	 * unmapped; the session must not keep root's. */
	if (setgroups(0, NULL) < 0)
		fatal("cannot drop the supplementary groups");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fatal("cannot set no_new_privs");
	if (pipe2(sync, O_CLOEXEC) < 0)
		fatal("cannot make a pipe to start the session");

	pid = ns_clone_session();
	if (pid < 0)
		return LAUNCH_EXIT_FAIL;
	if (pid == 0) {
		close(sync[1]);
		session_init(&a, sync[0]);
	}
	close(sync[0]);

	if (ns_write_id_maps(pid, a.uid, a.gid) < 0)
		return abandon(pid);
	/* sync[1] stays open until this process ends: PID 1 polls it to learn
	 * whether it still has a launcher to report to. */
	if (write(sync[1], "1", 1) != 1) {
		log_warn("cannot tell session process %d to go on", (int)pid);
		return abandon(pid);
	}

	r = reap_wait(pid);
	if (r < 0) {
		errno = -r;
		log_warn("cannot wait for session process %d", (int)pid);
		return abandon(pid);
	}
	return r;
}
