/* errand-launch, the process the agent runs to start a session: its parsed
 * command line and the steps its files provide to launch.c, which runs them
 * in order: limits.c (cgroup limits), ns.c (cgroup, namespaces, ids),
 * mounts.c (the session's root), init.c (PID 1), reap.c, and in the command
 * process exec.c with landlock.c, rlimit.c and seccomp.c. */
#ifndef ERRAND_LAUNCH_H
#define ERRAND_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <string.h>

#define LAUNCH_EXIT_FAIL 125	 /* the launcher itself failed */
#define LAUNCH_EXIT_NOEXEC 126	 /* the command was found but cannot run */
#define LAUNCH_EXIT_NOTFOUND 127 /* no such command */

/* Where the project and state directories appear inside a session with
 * --image; without one they keep their host paths. */
#define LAUNCH_IMAGE_PROJECT "/workspace"
#define LAUNCH_IMAGE_STATE "/state"

/* Defaults, the same as the configuration's (lib/config.c). */
#define LAUNCH_DEFAULT_FSIZE (1ULL << 30)
#define LAUNCH_DEFAULT_TMP (512ULL << 20)
#define LAUNCH_DEFAULT_SHM (64ULL << 20)

struct launch_list {
	char **v; /* pointers into argv */
	size_t n;
};

/* Where a session finds the roots it trusts with its broker's CA among them
 * (--ca-bundle): a fixed path, so the variables that name it never change. */
#define LAUNCH_CA_DIR "/run/errand"
#define LAUNCH_CA_BUNDLE LAUNCH_CA_DIR "/ca-bundle.pem"

struct launch_args {
	const char *session;	 /* --session ID, also the session's hostname */
	const char *cgroup;	 /* --cgroup DIR, a cgroup v2 directory */
	const char *netns;	 /* --netns PATH, a bind-mounted nsfs file */
	uid_t uid;		 /* --uid, the host uid the session's uid 0 maps to; never 0 */
	gid_t gid;		 /* --gid, likewise */
	const char *resolv;	 /* --resolv FILE; NULL keeps the root's /etc/resolv.conf */
	const char *ca_bundle;	 /* --ca-bundle FILE, bound on LAUNCH_CA_BUNDLE; NULL: none */
	const char *status_file; /* --status-file FILE: the exit status, written at the end */
	int status_fd;		 /* --status-fd FD: a pipe for the status (init.c); -1: none */
	const char *cwd;	 /* --cwd DIR, inside the session; NULL: the project, else / */
	struct launch_list env;	 /* each --env NAME=VALUE, in order */
	const char *term;	 /* the caller's TERM; NULL when unset */
	char **cmd;		 /* CMD ARG..., NULL-terminated, inside argv */

	const char *project; /* --project DIR, writable; default the caller's directory */
	const char *state;   /* --state DIR, writable and HOME; made 0700 for uid if missing */
	const char *image;   /* --image DIR, the session's root; NULL: the host's system dirs */
	struct launch_list policy_read;	 /* --policy-read PATH: read */
	struct launch_list policy_write; /* --policy-write PATH: read and write */
	struct launch_list policy_exec;	 /* --policy-exec PATH: execute */
	struct launch_list path_extra;	 /* --path-extra DIR: ahead of the system's PATH */
	struct launch_list block;	 /* --block-syscall NAME: ENOSYS besides errand's own */
	uint64_t fsize;			 /* --fsize BYTES: RLIMIT_FSIZE */
	uint64_t tmp_size;		 /* --tmp-size BYTES: the tmpfs on /tmp */
	uint64_t shm_size;		 /* --shm-size BYTES: the tmpfs on /dev/shm */
	uint64_t memory;		 /* --memory BYTES: memory.max; 0 none */
	uint64_t cpu_milli;		 /* --cpu-milli N: thousandths of a CPU (cpu.max); 0 none */
	uint64_t pids;			 /* --pids N: pids.max; 0 none */
	int landlock_min; /* --landlock-min N: refuse below ABI N; 0 runs without Landlock */
	/* --rule-allow VERB:PATH: an allow rule's directory (the fixed part of
	 * its pattern), bound and granted with the verb's Landlock rights */
	struct launch_list rule_allow;
	struct launch_list mask; /* --mask PATH: hidden wherever a grant reaches it */
	/* --hide DIR: errand's own (its state, run and secrets directories),
	 * an empty directory wherever a grant reaches it but for the session's
	 * own project and state inside */
	struct launch_list hide;
	struct launch_list hold; /* --hold-fd FD: sockets held while the session runs, and
				  * never passed to it (the session's DNS sockets) */
	/* --say LINE: what errand says of the session (its gaps, weakened
	 * guarantees), written escaped to the command's stderr by the process
	 * about to exec it, so the command's own lines come after */
	struct launch_list say;

	/* --requester UID: who asked for the session; default the caller. */
	uid_t requester;
	/* --project-idmap optional: a project that cannot be idmapped is bound
	 * with the session's own permissions (the agent stated the gap);
	 * required (the default) refuses it. */
	bool idmap_optional;

	/* Made by the outer launcher: a detached copy of the project, idmapped so
	 * the session writes it as its owner, for PID 1 to move into its root;
	 * -1 before. */
	int project_fd;
	/* --project-userns FD:UID:GID; -1 when not given. */
	int userns_fd;
	uid_t userns_uid;
	gid_t userns_gid;

	/* Derived: where the project and state are inside the session. */
	const char *project_in;
	const char *state_in;
};

/* Whether path is dir or below it (every path is below "/"). */
static inline bool path_beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strcmp(dir, "/") || (!strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0'));
}

/* limits.c: memory, cpu and pids limits written to the session's cgroup
 * before the launcher joins it, where those controllers are delegated (the
 * agent states any that are not as a gap). 0 or -errno. */
int limits_apply(const struct launch_args *a);

/* ns.c: the session's cgroup, namespaces, ids and mounts. Each function says
 * what failed on stderr itself and returns 0 or -errno. */
int ns_join_cgroup(const char *dir);
int ns_enter_netns(const char *path);
/* Makes --state DIR (and missing parents, 0755) as the session's uid, 0700,
 * unless it exists. As host root, before the clone. */
int ns_prepare_state(const struct launch_args *a);
/* As host root, before the clone: copies the project into a detached tree,
 * checks that the requester owns it (or is root), and idmaps it so that the
 * project's owner uid and gid on disk are the session's uid and gid (see
 * lib/idmap.h); a->project_fd holds it. A filesystem that cannot be
 * idmapped refuses the session unless --project-idmap optional. */
int ns_prepare_project(struct launch_args *a);
/* Forks into new user, PID, mount, UTS and IPC namespaces: the child's pid,
 * 0 in the child (PID 1 there), or -errno. */
pid_t ns_clone_session(void);
/* From the parent: setgroups "deny", gid_map "0 gid 1", uid_map "0 uid 1". */
int ns_write_id_maps(pid_t pid, uid_t uid, gid_t gid);
/* In the child once mapped: uid and gid 0 inside, the mapped ids outside. */
int ns_become_root(void);
/* In the child: hostname, then the session's root (mounts_prepare, then
 * mounts_finish). */
int ns_setup_session(const struct launch_args *a);
/* The same for a PID 1 made ahead, whose mounts_prepare(NULL) is done. */
int ns_finish_session(const struct launch_args *a);

/* mounts.c: a new root on a tmpfs holding the system directories (or the
 * image's) read-only, the project, state and policy paths, a fresh /proc, a
 * minimal /dev, sized tmpfs on /tmp and /dev/shm, --resolv; pivot_root into
 * it, the host's root detached. 0 or -errno, having said why.
 * mounts_prepare: what no option but --image shapes (the staging root, the
 * system directories or the image's entries, /proc, /dev's nodes), which a
 * PID 1 made ahead does before its session is known. */
int mounts_prepare(const char *image);
/* mounts_finish: the rest, from the session's options; last the pivot. */
int mounts_finish(const struct launch_args *a);
/* The agent binds each session's network namespace file in one directory,
 * a mount of its own: most of a busy host's mounts (a thousand sessions, a
 * thousand mounts), which every session's root copied and its pivot then
 * detached one by one on the start's path (5 ms of a start at 1000
 * sessions). Moves the calling process into a private copy of its mount
 * namespace without that directory (netns's), for the clone of a PID 1
 * made ahead; returns a descriptor of the namespace it left, to go back to
 * with setns, or -errno (then it is where it was). PID 1 cannot shed it
 * itself: in its user namespace the mounts it inherited are locked. */
int mounts_shed_netns_dir(const char *netns);

/* mountinfo.c: whether the mounts along some paths differ between the
 * calling process's view and pid's below `under` (its path of the caller's
 * root, "/oldroot" for a PID 1 made ahead): those whose mount point
 * along(point, arg) wants, but any at or below skip (NULL: none). Anything
 * unreadable differs. */
bool mountinfo_differs(pid_t pid, const char *under, const char *skip,
		       bool (*along)(const char *point, const void *arg), const void *arg);

/* maskwatch.c: each --mask PATH whose directory a host grant shows,
 * watched in the host while the session lives, and covered again in the
 * session's mount namespace when a daemon makes it anew (its unlink took
 * the cover away). maskwatch_new, in the outer launcher before PID 1 is
 * made: *out NULL when nothing is to be watched; 0 or -errno, having said
 * why. The caller owns *out (maskwatch_free, NULL-safe). */
struct maskwatch;
int maskwatch_new(const struct launch_args *a, struct maskwatch **out);
void maskwatch_free(struct maskwatch *w);
/* The descriptor to poll, or -1 where inotify had no instance left; and how
 * long to wait (-1: for the descriptor alone). maskwatch_read when it is
 * readable or the wait has passed. */
int maskwatch_fd(const struct maskwatch *w);
int maskwatch_timeout_ms(const struct maskwatch *w);
/* Once PID 1 has built the session's root: its namespace taken, and what
 * was made again meanwhile covered. 0 or -errno. */
int maskwatch_start(struct maskwatch *w, pid_t pid1);
void maskwatch_read(struct maskwatch *w);

/* landlock.c: the floor and --policy-* as a Landlock ruleset on the calling
 * process. The ABI used, 0 when the kernel has none and --landlock-min 0
 * allows that, or -errno having said why. */
int landlock_apply(const struct launch_args *a);
/* The verbs of --rule-allow, in sandbox.rules' order. */
enum launch_rule_verb { LRV_READ, LRV_EDIT, LRV_CREATE, LRV_DELETE, LRV_EXEC, LRV_CONNECT };
/* The verb of a --rule-allow VERB:PATH value (PATH absolute), or -EINVAL. */
int launch_rule_verb(const char *v);
/* Its PATH. */
static inline const char *launch_rule_path(const char *v)
{
	return strchr(v, ':') + 1;
}
/* Whether the verb writes (the directory is bound writable). */
static inline bool launch_rule_writes(int verb)
{
	return verb == LRV_EDIT || verb == LRV_CREATE || verb == LRV_DELETE;
}

/* rlimit.c: RLIMIT_FSIZE from --fsize, no core files. 0 or -errno. */
int rlimit_apply(const struct launch_args *a);

/* seccomp.c: the syscall filter, loaded last before exec. 0 or -errno.
 * seccomp_prepare builds errand's own ahead (no --block-syscall), which
 * seccomp_apply then loads as it is when the session blocks nothing more. */
void seccomp_prepare(void);
int seccomp_apply(const struct launch_args *a);

/* init.c: the session's PID 1. Never returns. */
void session_init(const struct launch_args *a, int sync_fd) __attribute__((noreturn));
/* A PID 1 made ahead (launch.c's struct ahead): once its launcher has
 * mapped its ids, the system part of the root, then its command line
 * (launch_args_pid1) from sock. Never returns; ends quietly when its
 * launcher goes without a session. */
void session_init_ahead(int sock) __attribute__((noreturn));

/* launch.c: the command line a PID 1 made ahead is handed, whose paths its
 * launcher resolved. 0 or -EINVAL, having said why. */
int launch_args_pid1(int argc, char **argv, struct launch_args *a);

/* reap.c: signals and children for the outer launcher and PID 1. */
/* Every disposition to the default but SIGPIPE's, ignored; first thing
 * the launcher does, ahead of a start when it waits. 0 or -errno. */
int reap_default_signals(void);
/* Blocks SIGCHLD and the forwarded signals (reap_wait takes them). 0 or
 * -errno. */
int reap_block_signals(void);
/* Every disposition to the default and nothing blocked, for the command:
 * after reap_default_signals, SIGPIPE's and the mask are all that differ. */
void reap_reset_signals(void);
/* Forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to target and reaps every
 * child until target ends. Its exit status, 128+N if signal N killed it, or
 * -errno. */
int reap_wait(pid_t target);
/* The same, calling on_ready(arg) whenever fd is readable meanwhile (fd -1:
 * none), and after each timeout_ms without it (-1: never). */
int reap_wait_watching(pid_t target, int fd, int timeout_ms, void (*on_ready)(void *arg),
		       void *arg);

/* exec.c: the command process. Never returns: execs, or exits 125/126/127. */
void exec_command(const struct launch_args *a) __attribute__((noreturn));

#endif
