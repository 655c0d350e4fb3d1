/* The command process: an environment built from scratch, the working
 * directory, only stdin, stdout and stderr, default signals, then exec, with
 * the statuses a shell gives (127 not found, 126 found but not runnable). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "lib/log.h"
#include "lib/util.h"

static const char *const base_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/tmp",
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

static char **build_env(const struct launch_args *a)
{
	size_t n = 0;
	char **env;
	char *term;

	/* The base, TERM, each --env, the terminating NULL. */
	env = calloc(ARRAY_SIZE(base_env) + 1 + a->n_env + 1, sizeof(*env));
	if (!env || asprintf(&term, "TERM=%s", a->term ? a->term : "dumb") < 0)
		fatal("cannot build the command's environment");
	for (size_t i = 0; i < ARRAY_SIZE(base_env); i++)
		env[n++] = (char *)base_env[i];
	env[n++] = term;
	for (size_t i = 0; i < a->n_env; i++)
		env_put(env, &n, a->env[i]);
	env[n] = NULL;
	return env;
}

static void enter_cwd(const char *cwd)
{
	if (cwd) {
		if (chdir(cwd) < 0)
			fatal("cannot change to --cwd %s as the session's uid", cwd);
		return;
	}
	/* The caller's directory may be one the session's uid cannot search. */
	if (access(".", X_OK) < 0 && chdir("/") < 0)
		fatal("cannot change to /");
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

void exec_command(const struct launch_args *a)
{
	char **env = build_env(a);

	reap_reset_signals();
	enter_cwd(a->cwd);
	cloexec_all();

	/* execvpe() searches the PATH of environ, not of its envp: give it the
	 * command's own, so an --env PATH is the one searched. */
	environ = env;
	execvpe(a->cmd[0], a->cmd, env);
	if (errno == ENOENT) {
		log_warnx("%s: command not found", a->cmd[0]);
		_exit(LAUNCH_EXIT_NOTFOUND);
	}
	log_warn("%s: cannot execute", a->cmd[0]);
	_exit(LAUNCH_EXIT_NOEXEC);
}
