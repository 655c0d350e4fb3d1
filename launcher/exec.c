/* The command process: default signals, the working directory, Landlock,
 * rlimits, an environment built from scratch, only stdin, stdout and stderr,
 * seccomp, then exec, with the statuses a shell gives (127 not found, 126
 * found but not runnable). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <linux/capability.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

#define SYSTEM_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char *const base_env[] = {
	"LANG=C.UTF-8",
	"USER=errand",
};

/* Replaces the variable of the same name, or appends. */
static void env_put(char **env, size_t *n, char *entry)
{
	size_t len = strcspn(entry, "=") + 1;

	for (size_t i = 0; i < *n; i++) {
		if (!strncmp(env[i], entry, len)) {
			env[i] = entry;
			return;
		}
	}
	env[(*n)++] = entry;
}

/* PATH is --path-extra's directories ahead of the system's, so a toolchain
 * named on purpose is found before the host's copy; HOME is the state
 * directory (thrown away with the session), else /tmp. Then each --env. */
static char **build_env(const struct launch_args *a)
{
	size_t n = 0, len = sizeof("PATH=" SYSTEM_PATH);
	char **env, *path, *home, *term;

	for (size_t i = 0; i < a->path_extra.n; i++)
		len += strlen(a->path_extra.v[i]) + 1;
	/* PATH, HOME, TERM, the base, each --env, the terminating NULL. */
	env = calloc(3 + ARRAY_SIZE(base_env) + a->env.n + 1, sizeof(*env));
	path = malloc(len);
	if (!env || !path || asprintf(&term, "TERM=%s", a->term ? a->term : "dumb") < 0 ||
	    asprintf(&home, "HOME=%s", a->state_in ? a->state_in : "/tmp") < 0) {
		/* _exit, not fatal()'s exit: this process shares PID 1's memory. */
		log_warn("cannot build the command's environment");
		_exit(LAUNCH_EXIT_FAIL);
	}
	strcpy(path, "PATH=");
	for (size_t i = 0; i < a->path_extra.n; i++) {
		strcat(path, a->path_extra.v[i]);
		strcat(path, ":");
	}
	strcat(path, SYSTEM_PATH);
	env[n++] = path;
	env[n++] = home;
	env[n++] = term;
	for (size_t i = 0; i < ARRAY_SIZE(base_env); i++)
		env[n++] = (char *)base_env[i];
	for (size_t i = 0; i < a->env.n; i++)
		env_put(env, &n, a->env.v[i]);
	env[n] = NULL;
	return env;
}

/* --cwd, else the project, else /: the caller's directory is not in the
 * session's root. */
static void enter_cwd(const struct launch_args *a)
{
	const char *dir = a->cwd ? a->cwd : a->project_in;

	if (chdir(dir) == 0)
		return;
	if (a->cwd) {
		log_warn("cannot change to --cwd %s in the session", a->cwd);
		_exit(LAUNCH_EXIT_FAIL);
	}
	if (chdir("/") < 0) {
		log_warn("cannot change to /");
		_exit(LAUNCH_EXIT_FAIL);
	}
}

/* Marks rather than closes, so the exec's own failure can still be told. */
static void cloexec_all(void)
{
	long max;

	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	max = sysconf(_SC_OPEN_MAX);
	for (long fd = 3; fd < max; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* The command is root of its own user namespace, and through the idmapped
 * project (ns.c) its capabilities reach files the project's owner owns on
 * disk: CAP_SETFCAP would let it write file capabilities that hold on the
 * host (for a root-owned project, caps of host root), CAP_FSETID keep a
 * setuid bit through a write. Dropped from the bounding set, which is all
 * an exec as uid 0 keeps. */
static int drop_file_caps(void)
{
	const int caps[] = {CAP_SETFCAP, CAP_FSETID};

	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		if (prctl(PR_CAPBSET_DROP, caps[i], 0, 0, 0) < 0) {
			log_warn("cannot drop capability %d from the session's bounding set",
				 caps[i]);
			return -errno;
		}
	}
	return 0;
}

/* In the order the session is confined: Landlock while paths can still be
 * opened, the rlimits, the environment, then seccomp, the last thing before
 * exec, so that nothing errand itself does runs under the filter. */
void exec_command(const struct launch_args *a)
{
	char **env;
	int abi;

	reap_reset_signals();
	enter_cwd(a);
	abi = landlock_apply(a);
	if (abi < 0)
		_exit(LAUNCH_EXIT_FAIL);
	log_debug("Landlock ABI %d", abi);
	if (rlimit_apply(a) < 0)
		_exit(LAUNCH_EXIT_FAIL);
	if (drop_file_caps() < 0)
		_exit(LAUNCH_EXIT_FAIL);
	env = build_env(a);
	fflush(stderr);
	cloexec_all();
	if (seccomp_apply(a) < 0)
		_exit(LAUNCH_EXIT_FAIL);

	/* execvpe() searches the PATH of environ, not of its envp: give it the
	 * command's own. */
	environ = env;
	execvpe(a->cmd[0], a->cmd, env);
	if (errno == ENOENT) {
		log_warnx("%s: command not found", a->cmd[0]);
		_exit(LAUNCH_EXIT_NOTFOUND);
	}
	log_warn("%s: cannot execute", a->cmd[0]);
	_exit(LAUNCH_EXIT_NOEXEC);
}
