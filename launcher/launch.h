/* errand-launch, the process the agent runs to start a session: its parsed
 * command line and the steps its files provide (ns.c, init.c, reap.c,
 * exec.c) to launch.c, which runs them in order. */
#ifndef ERRAND_LAUNCH_H
#define ERRAND_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#define LAUNCH_EXIT_FAIL 125	 /* the launcher itself failed */
#define LAUNCH_EXIT_NOEXEC 126	 /* the command was found but cannot run */
#define LAUNCH_EXIT_NOTFOUND 127 /* no such command */

struct launch_args {
	const char *session; /* --session ID, also the session's hostname */
	const char *cgroup;  /* --cgroup DIR, a cgroup v2 directory */
	const char *netns;   /* --netns PATH, a bind-mounted nsfs file */
	uid_t uid;	     /* --uid, the host uid the session's uid 0 maps to; never 0 */
	gid_t gid;	     /* --gid, likewise */
	const char *resolv;  /* --resolv FILE; NULL keeps /etc/resolv.conf */
	const char *cwd;     /* --cwd DIR; NULL stays where the caller was, else / */
	char **env;	     /* each --env NAME=VALUE, in order */
	size_t n_env;
	const char *term; /* the caller's TERM; NULL when unset */
	char **cmd;	  /* CMD ARG..., NULL-terminated, inside argv */
};

/* ns.c: the session's cgroup, namespaces, ids and mounts. Each function says
 * what failed on stderr itself and returns 0 or -errno. */
int ns_join_cgroup(const char *dir);
int ns_enter_netns(const char *path);
/* Forks into new user, PID, mount, UTS and IPC namespaces: the child's pid,
 * 0 in the child (PID 1 there), or -errno. */
pid_t ns_clone_session(void);
/* From the parent: setgroups "deny", gid_map "0 gid 1", uid_map "0 uid 1". */
int ns_write_id_maps(pid_t pid, uid_t uid, gid_t gid);
/* In the child once mapped: uid and gid 0 inside, the mapped ids outside. */
int ns_become_root(void);
/* In the child: hostname, private mounts, a fresh /proc, --resolv. */
int ns_setup_session(const struct launch_args *a);

/* init.c: the session's PID 1. Never returns. */
void session_init(const struct launch_args *a, int sync_fd) __attribute__((noreturn));

/* reap.c: signals and children for the outer launcher and PID 1. */
/* Blocks SIGCHLD and the forwarded signals (reap_wait takes them) and puts
 * their dispositions back to the default. 0 or -errno. */
int reap_block_signals(void);
/* Every disposition to the default and nothing blocked, for the command. */
void reap_reset_signals(void);
/* Forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to target and reaps every
 * child until target ends. Its exit status, 128+N if signal N killed it, or
 * -errno. */
int reap_wait(pid_t target);

/* exec.c: the command process. Never returns: execs, or exits 125/126/127. */
void exec_command(const struct launch_args *a) __attribute__((noreturn));

#endif
