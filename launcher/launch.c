/* errand-launch: main and argument parsing, then the outer launcher's steps
 * as root in the host's namespaces: set the cgroup's limits, join the cgroup
 * and netns, make the state directory, clone the session's PID 1, map its
 * ids, and wait for it, passing its status on. */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "launcher/launch.h"
#include "lib/await.h"
#include "lib/escape.h"
#include "lib/landlock.h"
#include "lib/log.h"
#include "lib/util.h"

enum opt {
	OPT_SESSION,
	OPT_CGROUP,
	OPT_NETNS,
	OPT_UID,
	OPT_GID,
	OPT_RESOLV,
	OPT_CA_BUNDLE,
	OPT_ENV,
	OPT_CWD,
	OPT_PROJECT,
	OPT_STATE,
	OPT_IMAGE,
	OPT_POLICY_READ,
	OPT_POLICY_WRITE,
	OPT_POLICY_EXEC,
	OPT_PATH_EXTRA,
	OPT_BLOCK,
	OPT_FSIZE,
	OPT_TMP_SIZE,
	OPT_SHM_SIZE,
	OPT_MEMORY,
	OPT_CPU,
	OPT_PIDS,
	OPT_LANDLOCK_MIN,
	OPT_STATUS_FILE,
	OPT_REQUESTER,
	OPT_PROJECT_IDMAP,
	OPT_HOLD_FD,
	OPT_PROJECT_USERNS,
	OPT_RULE_ALLOW,
	OPT_MASK,
	OPT_HIDE,
	OPT_STATUS_FD,
	OPT_SAY,
};

enum opt_kind {
	ONCE,	  /* a string, at most once */
	REQUIRED, /* a string, exactly once */
	ABS,	  /* an absolute path, at most once */
	MULTI,	  /* a string, any number of times */
	MULTI_ABS,
	NUMBER, /* digits, at most once */
};

static const struct {
	const char *name;
	const char *meta;
	const char *what; /* for "is missing; pass ..." */
	enum opt_kind kind;
} opts[] = {
	[OPT_SESSION] = {"--session", "ID", "the session's id", REQUIRED},
	[OPT_CGROUP] = {"--cgroup", "DIR", "the session's cgroup v2 directory", REQUIRED},
	[OPT_NETNS] = {"--netns", "PATH", "the session's network namespace file", REQUIRED},
	[OPT_UID] = {"--uid", "UID", "the host uid the session runs as", REQUIRED},
	[OPT_GID] = {"--gid", "GID", "the host gid the session runs as", REQUIRED},
	[OPT_RESOLV] = {"--resolv", "FILE", "the file to bind on /etc/resolv.conf", ABS},
	[OPT_CA_BUNDLE] = {"--ca-bundle", "FILE", "the roots to bind on " LAUNCH_CA_BUNDLE, ABS},
	[OPT_ENV] = {"--env", "NAME=VALUE", "a variable for the command", MULTI},
	[OPT_CWD] = {"--cwd", "DIR", "the command's working directory", ABS},
	[OPT_PROJECT] = {"--project", "DIR", "the project directory, writable", ABS},
	[OPT_STATE] = {"--state", "DIR", "the session's state directory, writable", ABS},
	[OPT_IMAGE] = {"--image", "DIR", "a root directory for the session", ABS},
	[OPT_POLICY_READ] = {"--policy-read", "PATH", "a path the session may read", MULTI_ABS},
	[OPT_POLICY_WRITE] = {"--policy-write", "PATH", "a path the session may write", MULTI_ABS},
	[OPT_POLICY_EXEC] = {"--policy-exec", "PATH", "a path the session may execute", MULTI_ABS},
	[OPT_PATH_EXTRA] = {"--path-extra", "DIR", "a directory ahead of /usr/bin in PATH",
			    MULTI_ABS},
	[OPT_BLOCK] = {"--block-syscall", "NAME", "a system call to refuse with ENOSYS", MULTI},
	[OPT_FSIZE] = {"--fsize", "BYTES", "the largest file the session may write", NUMBER},
	[OPT_TMP_SIZE] = {"--tmp-size", "BYTES", "the size of /tmp", NUMBER},
	[OPT_SHM_SIZE] = {"--shm-size", "BYTES", "the size of /dev/shm", NUMBER},
	[OPT_MEMORY] = {"--memory", "BYTES", "the session's memory.max", NUMBER},
	[OPT_CPU] = {"--cpu-milli", "N", "the session's CPUs, in thousandths", NUMBER},
	[OPT_PIDS] = {"--pids", "N", "the session's pids.max", NUMBER},
	[OPT_LANDLOCK_MIN] = {"--landlock-min", "N", "the lowest Landlock ABI to run with", NUMBER},
	[OPT_STATUS_FILE] = {"--status-file", "FILE", "where to write the exit status", ABS},
	[OPT_REQUESTER] = {"--requester", "UID", "the uid that asked for the session", NUMBER},
	[OPT_PROJECT_IDMAP] = {"--project-idmap", "MODE", "required or optional", ONCE},
	[OPT_HOLD_FD] = {"--hold-fd", "FD", "a socket to hold while the session runs", MULTI},
	[OPT_PROJECT_USERNS] = {"--project-userns", "FD:UID:GID",
				"a user namespace mapping the project's owner UID:GID to the "
				"session's uid and gid",
				ONCE},
	[OPT_RULE_ALLOW] = {"--rule-allow", "VERB:PATH", "an allow rule's verb and directory",
			    MULTI},
	[OPT_MASK] = {"--mask", "PATH", "a host path the session never reaches", MULTI_ABS},
	[OPT_HIDE] = {"--hide", "DIR",
		      "a directory of errand's own, empty wherever a grant reaches it", MULTI_ABS},
	[OPT_STATUS_FD] = {"--status-fd", "FD",
			   "a pipe for the exit status once the session's processes have ended",
			   NUMBER},
	[OPT_SAY] = {"--say", "LINE", "a line the command's stderr gets before the command runs",
		     MULTI},
};

#define HOSTNAME_MAX 64 /* the kernel's limit for sethostname() */

static const char usage[] =
	"errand-launch --session ID --cgroup DIR --netns PATH --uid UID --gid GID "
	"[--resolv FILE] [--ca-bundle FILE] [--env NAME=VALUE]... [--cwd DIR] [--project DIR] "
	"[--state DIR] "
	"[--image DIR] [--policy-read PATH]... [--policy-write PATH]... [--policy-exec PATH]... "
	"[--path-extra DIR]... [--block-syscall NAME]... [--fsize BYTES] [--tmp-size BYTES] "
	"[--shm-size BYTES] [--memory BYTES] [--cpu-milli N] [--pids N] [--landlock-min N] "
	"[--status-file FILE] [--requester UID] [--project-idmap required|optional] "
	"[--hold-fd FD]... [--project-userns FD:UID:GID] [--rule-allow VERB:PATH]... "
	"[--mask PATH]... [--hide DIR]... [--status-fd FD] -- CMD [ARG...]";

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

static int parse_number(const char *opt, const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end || errno || v > (UINT64_MAX >> 2)) {
		log_warnx("%s '%s' is not a number; pass digits only, such as 1073741824", opt, s);
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
		log_warnx("--env '%.*s': the name is not [A-Za-z_][A-Za-z0-9_]*; rename the "
			  "variable",
			  (int)(eq - s), s);
		return -EINVAL;
	}
	/* The values are never printed: one may be a credential. */
	if ((eq - s == 4 && !strncmp(s, "PATH", 4)) || (eq - s == 4 && !strncmp(s, "HOME", 4))) {
		log_warnx("--env %.4s is refused: errand places it (PATH: pass --path-extra DIR; "
			  "HOME is the state directory)",
			  s);
		return -EINVAL;
	}
	return 0;
}

/* A descriptor handed over for the launcher (and PID 1) alone: close-on-exec,
 * so the command never holds it. */
static int keep_from_exec(int fd, const char *opt, const char *s)
{
	int r;

	if (fcntl(fd, F_SETFD, FD_CLOEXEC) == 0)
		return 0;
	r = -errno;
	log_warn("%s %s", opt, s);
	return r;
}

/* A socket the agent hands over to be held (the session's DNS sockets, so
 * they stay bound while no agent runs): open, a socket, and never inherited
 * by the command (closed in the session's PID 1, close-on-exec here). */
static int check_hold(const char *s)
{
	uint64_t fd;
	struct stat st;
	int r = parse_number("--hold-fd", s, &fd);

	if (r < 0)
		return r;
	if (fd < 3 || fd > INT_MAX || fstat((int)fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		log_warnx("--hold-fd %s is not an open socket; pass a socket's descriptor", s);
		return -EBADF;
	}
	return keep_from_exec((int)fd, "--hold-fd", s);
}

/* The pipe errandctl waits on for the status (the agent makes it and passes
 * its read end along with the launcher's pidfd): PID 1 writes the command's
 * status there once every process of the session has ended, ahead of its
 * own end and this launcher's. Close-on-exec here; only PID 1 keeps it. */
static int check_status_fd(uint64_t fd, const char *s)
{
	struct stat st;
	int fl, r;

	if (fd < 3 || fd > INT_MAX || fstat((int)fd, &st) < 0 || !S_ISFIFO(st.st_mode) ||
	    (fl = fcntl((int)fd, F_GETFL)) < 0 || (fl & O_ACCMODE) != O_WRONLY) {
		log_warnx("--status-fd %s is not a pipe open for writing; pass one, or leave it "
			  "out",
			  s);
		return -EBADF;
	}
	if ((r = keep_from_exec((int)fd, "--status-fd", s)) < 0)
		return r;
	return (int)fd;
}

/* The agent lends the user namespace the project's idmap needs (making one
 * is a child process created and reaped, about a millisecond of a start):
 * FD:UID:GID, a user namespace that maps UID:GID, the owner the agent saw,
 * to the session's account. ns_prepare_project takes it only when the
 * project it copies has that owner; close-on-exec here, and closed once
 * the project is mounted. */
static int check_userns(const char *s, struct launch_args *a)
{
	unsigned long long fd, uid, gid;
	int end = 0, r;

	if (sscanf(s, "%llu:%llu:%llu%n", &fd, &uid, &gid, &end) != 3 || s[end] || fd < 3 ||
	    fd > INT_MAX || uid >= UINT32_MAX || gid >= UINT32_MAX ||
	    ioctl((int)fd, NS_GET_NSTYPE) != CLONE_NEWUSER) {
		log_warnx("--project-userns %s is not FD:UID:GID with FD an open user namespace; "
			  "pass one, or leave it out",
			  s);
		return -EBADF;
	}
	if ((r = keep_from_exec((int)fd, "--project-userns", s)) < 0)
		return r;
	a->userns_fd = (int)fd;
	a->userns_uid = (uid_t)uid;
	a->userns_gid = (gid_t)gid;
	return 0;
}

static struct launch_list *list_of(struct launch_args *a, int o)
{
	switch (o) {
	case OPT_ENV:
		return &a->env;
	case OPT_POLICY_READ:
		return &a->policy_read;
	case OPT_POLICY_WRITE:
		return &a->policy_write;
	case OPT_POLICY_EXEC:
		return &a->policy_exec;
	case OPT_PATH_EXTRA:
		return &a->path_extra;
	case OPT_BLOCK:
		return &a->block;
	case OPT_HOLD_FD:
		return &a->hold;
	case OPT_RULE_ALLOW:
		return &a->rule_allow;
	case OPT_MASK:
		return &a->mask;
	case OPT_HIDE:
		return &a->hide;
	case OPT_SAY:
		return &a->say;
	}
	return NULL;
}

static int check_abs(const char *opt, const char *v)
{
	if (v[0] == '/')
		return 0;
	log_warnx("%s '%s' is not an absolute path; pass a path from /", opt, v);
	return -EINVAL;
}

/* One line naming the first thing wrong, then -EINVAL; nothing is created
 * before the whole command line has been checked. */
static int parse_args(int argc, char **argv, struct launch_args *a)
{
	const char *val[ARRAY_SIZE(opts)] = {NULL};
	struct launch_list *lists[] = {&a->env,		&a->policy_read, &a->policy_write,
				       &a->policy_exec, &a->path_extra,	 &a->block,
				       &a->hold,	&a->rule_allow,	 &a->mask,
				       &a->hide,	&a->say};
	uint64_t num[ARRAY_SIZE(opts)] = {0};
	bool dashdash = false;
	char **block;
	int i, r;

	memset(a, 0, sizeof(*a));
	/* The lists' storage lives as long as the process. */
	block = calloc(ARRAY_SIZE(lists) * (size_t)argc, sizeof(*block));
	if (!block) {
		log_warn("cannot parse the command line");
		return -ENOMEM;
	}
	for (size_t k = 0; k < ARRAY_SIZE(lists); k++)
		lists[k]->v = block + k * (size_t)argc;

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
		if (!v[0]) {
			log_warnx("%s is empty; pass %s %s, %s", opts[o].name, opts[o].name,
				  opts[o].meta, opts[o].what);
			return -EINVAL;
		}
		if ((opts[o].kind == ABS || opts[o].kind == MULTI_ABS) &&
		    (r = check_abs(opts[o].name, v)))
			return r;
		if (o == OPT_RULE_ALLOW && launch_rule_verb(v) < 0) {
			log_warnx("--rule-allow '%s' is not VERB:PATH; pass Read, Edit, Create, "
				  "Delete, Exec or Connect, a colon and an absolute path",
				  v);
			return -EINVAL;
		}
		if (opts[o].kind == MULTI || opts[o].kind == MULTI_ABS) {
			struct launch_list *l = list_of(a, o);

			l->v[l->n++] = (char *)v;
			continue;
		}
		if (val[o]) {
			log_warnx("%s is given twice; pass it once", opts[o].name);
			return -EINVAL;
		}
		if (opts[o].kind == NUMBER && (r = parse_number(opts[o].name, v, &num[o])))
			return r;
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
		if (!val[o] && opts[o].kind == REQUIRED) {
			log_warnx("%s is missing; pass %s %s, %s", opts[o].name, opts[o].name,
				  opts[o].meta, opts[o].what);
			return -EINVAL;
		}
	}
	a->session = val[OPT_SESSION];
	a->cgroup = val[OPT_CGROUP];
	a->netns = val[OPT_NETNS];
	a->resolv = val[OPT_RESOLV];
	a->ca_bundle = val[OPT_CA_BUNDLE];
	a->status_file = val[OPT_STATUS_FILE];
	a->cwd = val[OPT_CWD];
	a->project = val[OPT_PROJECT];
	a->state = val[OPT_STATE];
	a->image = val[OPT_IMAGE];
	a->fsize = val[OPT_FSIZE] ? num[OPT_FSIZE] : LAUNCH_DEFAULT_FSIZE;
	a->tmp_size = val[OPT_TMP_SIZE] ? num[OPT_TMP_SIZE] : LAUNCH_DEFAULT_TMP;
	a->shm_size = val[OPT_SHM_SIZE] ? num[OPT_SHM_SIZE] : LAUNCH_DEFAULT_SHM;
	a->memory = num[OPT_MEMORY];
	a->cpu_milli = num[OPT_CPU];
	a->pids = num[OPT_PIDS];
	a->landlock_min = val[OPT_LANDLOCK_MIN] ? (int)num[OPT_LANDLOCK_MIN] : 1;
	if (val[OPT_LANDLOCK_MIN] && num[OPT_LANDLOCK_MIN] > 64) {
		log_warnx("--landlock-min %s is not a Landlock ABI; pass 0 to %d",
			  val[OPT_LANDLOCK_MIN], LANDLOCK_ABI_KNOWN);
		return -EINVAL;
	}
	if (!a->fsize || !a->tmp_size || !a->shm_size) {
		log_warnx("--fsize, --tmp-size and --shm-size must be above 0");
		return -EINVAL;
	}
	/* Without --requester, whoever runs the launcher (root) asked. */
	a->requester = val[OPT_REQUESTER] ? (uid_t)num[OPT_REQUESTER] : getuid();
	if (val[OPT_REQUESTER] && num[OPT_REQUESTER] >= UINT32_MAX) {
		log_warnx("--requester %s is out of range; pass a uid below 4294967295",
			  val[OPT_REQUESTER]);
		return -EINVAL;
	}
	if (val[OPT_PROJECT_IDMAP] && strcmp(val[OPT_PROJECT_IDMAP], "required") &&
	    strcmp(val[OPT_PROJECT_IDMAP], "optional")) {
		log_warnx("--project-idmap '%s' is neither required nor optional; pass one of them",
			  val[OPT_PROJECT_IDMAP]);
		return -EINVAL;
	}
	a->idmap_optional = val[OPT_PROJECT_IDMAP] && !strcmp(val[OPT_PROJECT_IDMAP], "optional");
	a->project_fd = -1;
	a->userns_fd = -1;
	a->status_fd = -1;
	if (val[OPT_STATUS_FD] &&
	    (a->status_fd = check_status_fd(num[OPT_STATUS_FD], val[OPT_STATUS_FD])) < 0)
		return a->status_fd;
	if (val[OPT_PROJECT_USERNS] && (r = check_userns(val[OPT_PROJECT_USERNS], a)) < 0)
		return r;
	r = check_session(a->session);
	if (r < 0)
		return r;
	r = parse_id("--uid", val[OPT_UID], &a->uid);
	if (r < 0)
		return r;
	r = parse_id("--gid", val[OPT_GID], &a->gid);
	if (r < 0)
		return r;
	for (size_t k = 0; k < a->env.n; k++) {
		r = check_env(a->env.v[k]);
		if (r < 0)
			return r;
	}
	for (size_t k = 0; k < a->hold.n; k++) {
		r = check_hold(a->hold.v[k]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A host path as the host's root resolves it (links followed), so that
 * the session's root, where links may lead elsewhere or nowhere, binds
 * what was meant. One that does not resolve stays as given. */
static void canonical(const char **p)
{
	char *c;

	if (!*p || (*p)[0] != '/')
		return;
	c = realpath(*p, NULL);
	if (c)
		*p = c; /* lives as long as the process */
}

static void canonical_list(struct launch_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		canonical((const char **)&l->v[i]);
}

/* Where the session writes: its project, its state and its writable
 * grants. A link in one of them may be the session's own, made to lead a
 * later session's grant elsewhere. */
struct writable {
	const char **v;
	size_t n;
};

static bool in_writable(const struct writable *w, const char *dir)
{
	for (size_t i = 0; i < w->n; i++) {
		size_t n = strlen(w->v[i]);

		if (!strcmp(w->v[i], "/") ||
		    (!strncmp(dir, w->v[i], n) && (dir[n] == '/' || dir[n] == '\0')))
			return true;
	}
	return false;
}

/* path resolved as realpath does, a part at a time, into out (PATH_MAX):
 * 0, or -EPERM with link (PATH_MAX) naming the first link met in a
 * directory the session can write, which is never followed. A part that
 * does not exist ends the walk; the rest is kept as written. */
static int resolve_grant(const char *path, const struct writable *w, char *out, char *link)
{
	char rest[PATH_MAX], target[PATH_MAX], cand[PATH_MAX];
	size_t len = 0;
	int links = 0;

	if (path_fmt(rest, sizeof(rest), "%s", path))
		return -ENAMETOOLONG;
	out[0] = '\0';
	for (char *p = rest; *p;) {
		size_t n = strcspn(p, "/");
		struct stat st;
		ssize_t t;
		int lr;

		if (n == 0 || (n == 1 && p[0] == '.')) {
			p += n + (p[n] == '/');
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			char *slash = strrchr(out, '/');

			len = slash ? (size_t)(slash - out) : 0;
			out[len] = '\0';
			p += n + (p[n] == '/');
			continue;
		}
		if (len + 1 + n >= PATH_MAX)
			return -ENAMETOOLONG;
		memcpy(cand, out, len);
		cand[len] = '/';
		memcpy(cand + len + 1, p, n);
		cand[len + 1 + n] = '\0';
		lr = lstat(cand, &st);
		if (lr < 0 || !S_ISLNK(st.st_mode)) {
			memcpy(out, cand, len + 1 + n + 1);
			len += 1 + n;
			p += n + (p[n] == '/');
			/* a part that is not there: the rest as written */
			if (lr < 0 && *p) {
				if (path_fmt(out + len, PATH_MAX - len, "/%s", p))
					return -ENAMETOOLONG;
				return 0;
			}
			continue;
		}
		if (in_writable(w, len ? out : "/")) {
			snprintf(link, PATH_MAX, "%s", cand);
			return -EPERM;
		}
		t = readlink(cand, target, sizeof(target) - 1);
		if (t < 0 || ++links > 40)
			return t < 0 ? -errno : -ELOOP;
		target[t] = '\0';
		p += n + (p[n] == '/');
		if (path_fmt(cand, sizeof(cand), "%s%s%s", target, *p ? "/" : "", p))
			return -ENAMETOOLONG;
		memcpy(rest, cand, strlen(cand) + 1);
		p = rest;
		if (target[0] == '/')
			len = 0, out[0] = '\0';
	}
	if (!len)
		snprintf(out, PATH_MAX, "/");
	return 0;
}

/* Each grant of l (a rule's VERB:PATH when rule) resolved by resolve_grant;
 * one that leads through a link the session may have made is said and
 * dropped: additive only, it grants nothing. */
static int resolve_grants(struct launch_list *l, const struct writable *w, bool rule)
{
	char out[PATH_MAX], link[PATH_MAX];
	size_t kept = 0;

	for (size_t i = 0; i < l->n; i++) {
		const char *path = rule ? launch_rule_path(l->v[i]) : l->v[i];
		int prefix = rule ? (int)(path - l->v[i]) : 0;
		char *v;
		int r = resolve_grant(path, w, out, link);

		if (r == -EPERM) {
			log_warnx("%s leads through the link %s, in a directory sessions write; "
				  "errand does not follow it and grants nothing there: grant what "
				  "it leads to by its own path",
				  path, link);
			continue;
		}
		if (r < 0 || !strcmp(out, path)) {
			l->v[kept++] = l->v[i];
			continue;
		}
		if (asprintf(&v, "%.*s%s", prefix, l->v[i], out) < 0)
			return -ENOMEM;
		l->v[kept++] = v; /* lives as long as the process */
	}
	l->n = kept;
	return 0;
}

/* The host paths a session is granted, resolved against the places it
 * writes (resolve_grant). */
static int resolve_host_grants(struct launch_args *a)
{
	const char **v;
	struct writable w = {0};
	char *real;
	int r;

	v = calloc(2 + a->policy_write.n + a->rule_allow.n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	w.v = v;
	w.v[w.n++] = a->project;
	if (a->state)
		w.v[w.n++] = (real = realpath(a->state, NULL)) ? real : a->state;
	for (size_t i = 0; i < a->policy_write.n; i++)
		if ((real = realpath(a->policy_write.v[i], NULL)))
			w.v[w.n++] = real;
	for (size_t i = 0; i < a->rule_allow.n; i++)
		if (launch_rule_writes(launch_rule_verb(a->rule_allow.v[i])) &&
		    (real = realpath(launch_rule_path(a->rule_allow.v[i]), NULL)))
			w.v[w.n++] = real;
	/* w's strings live as long as the process, as the grants' do */
	r = resolve_grants(&a->policy_read, &w, false);
	if (!r)
		r = resolve_grants(&a->policy_write, &w, false);
	if (!r)
		r = resolve_grants(&a->policy_exec, &w, false);
	if (!r)
		r = resolve_grants(&a->rule_allow, &w, true);
	free(v);
	return r;
}

/* Whether fn holds for a granted host path: a policy path's or an allow
 * rule's. */
static bool any_grant(const struct launch_args *a, bool (*fn)(const char *path, const void *arg),
		      const void *arg)
{
	const struct launch_list *l[] = {&a->policy_read, &a->policy_write, &a->policy_exec,
					 &a->rule_allow};

	for (size_t k = 0; k < ARRAY_SIZE(l); k++)
		for (size_t i = 0; i < l[k]->n; i++)
			if (fn(l[k] == &a->rule_allow ? launch_rule_path(l[k]->v[i]) : l[k]->v[i],
			       arg))
				return true;
	return false;
}

/* A grant of / or of /run binds the host's /run whole. */
static bool shows_host_run(const char *path, const void *arg)
{
	(void)arg;
	return !strcmp(path, "/") || !strcmp(path, "/run");
}

/* The project defaults to the directory the launcher was started in, as
 * errandctl's own; never /, which would make every file writable. */
static int resolve_paths(struct launch_args *a)
{
	static char cwd[PATH_MAX];
	struct stat st;

	if (!a->project) {
		if (!getcwd(cwd, sizeof(cwd))) {
			log_warn(
				"cannot read the current directory for the project; pass --project "
				"DIR");
			return -errno;
		}
		a->project = cwd;
	}
	canonical(&a->project);
	canonical(&a->image);
	canonical(&a->resolv);
	canonical(&a->ca_bundle);
	canonical_list(&a->hide);
	/* With an image, the policy paths are the image's, resolved inside it. */
	if (!a->image && resolve_host_grants(a) < 0) {
		log_warnx("cannot resolve the session's grants: out of memory");
		return -ENOMEM;
	}
	/* The CA bundle's mount point, made on the host (errand's own name)
	 * where a grant shows the host's /run: the session's root has no room
	 * to make it there. */
	if (a->ca_bundle && !a->image && any_grant(a, shows_host_run, NULL) &&
	    mkdir(LAUNCH_CA_DIR, 0755) < 0 && errno != EEXIST)
		log_debug("cannot make %s: %s", LAUNCH_CA_DIR, strerror(errno));
	if (stat(a->project, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_warnx("--project %s is not a directory; pass the project's directory",
			  a->project);
		return -ENOTDIR;
	}
	if (!strcmp(a->project, "/")) {
		log_warnx("--project / would make the whole filesystem writable; pass the "
			  "project's own directory");
		return -EINVAL;
	}
	if (a->state && !strcmp(a->state, "/")) {
		log_warnx("--state / would make the whole filesystem writable; pass the "
			  "session's own directory");
		return -EINVAL;
	}
	a->project_in = a->image ? LAUNCH_IMAGE_PROJECT : a->project;
	return 0;
}

/* Once the state directory exists; resolved, it is never / either (a
 * link to it, or //, passed the check before). */
static int resolve_state(struct launch_args *a)
{
	if (!a->state)
		return 0;
	canonical(&a->state);
	if (!strcmp(a->state, "/")) {
		log_warnx("--state resolves to / and would make the whole filesystem writable; "
			  "pass the session's own directory");
		return -EINVAL;
	}
	a->state_in = a->image ? LAUNCH_IMAGE_STATE : a->state;
	return 0;
}

/* The exit status for whoever waits on the session without being this
 * process's parent (errandctl run while the agent restarts, a re-adopting
 * agent): written whole, then renamed into place. */
static void write_status(const char *path, int status)
{
	char tmp[PATH_MAX], text[16];
	int fd, len;

	if (!path || snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return;
	len = snprintf(text, sizeof(text), "%d\n", status);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || write(fd, text, (size_t)len) != len || close(fd) || rename(tmp, path))
		log_warn("cannot write the exit status to %s", path);
}

/* A failed launch must not leave a half-made session behind. */
static int abandon(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return LAUNCH_EXIT_FAIL;
}

/* A PID 1 made ahead by a launcher that waits (errand-launch --await FD
 * --netns PATH --uid UID --gid GID): cloned into the session's namespaces,
 * its ids mapped and the system part of its root mounted (mounts_prepare)
 * before the session is known; the start then hands it its command line.
 * A start it does not fit (an image, another network or account) ends it
 * and clones its own, as a launcher exec'd at the start does. */
struct ahead {
	pid_t pid;  /* 0: none */
	int sock;   /* ours; PID 1 takes its command line on the other end */
	int mounts; /* the host's mountinfo, open since before PID 1's copy of its
		     * mounts, to poll for a change; -1: none */
	const char *netns;
	uid_t uid;
	gid_t gid;
};

static int ahead_args(int argc, char **argv, struct ahead *h)
{
	if (argc != 9 || strcmp(argv[3], "--netns") || strcmp(argv[5], "--uid") ||
	    strcmp(argv[7], "--gid") || argv[4][0] != '/' || parse_id("--uid", argv[6], &h->uid) ||
	    parse_id("--gid", argv[8], &h->gid)) {
		log_warnx("--await FD takes --netns PATH --uid UID --gid GID after it, or nothing");
		return -EINVAL;
	}
	h->netns = argv[4];
	return 0;
}

/* As the start would before its clone (signals blocked, the network
 * entered, no supplementary groups, no_new_privs), then the clone; no
 * PID 1 made is no error, the start makes one. */
static void ahead_start(struct ahead *h, int await_fd)
{
	int sv[2], mnt;
	pid_t pid;

	if (reap_block_signals() < 0 || ns_enter_netns(h->netns) < 0 || setgroups(0, NULL) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	h->mounts = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	mnt = mounts_shed_netns_dir(h->netns);
	pid = ns_clone_session();
	if (pid == 0) {
		close(sv[0]);
		close(await_fd);
		session_init_ahead(sv[1]);
	}
	/* Back where the agent is (a start that cannot use this PID 1 clones
	 * its own from there): the copy goes with the last process in it. */
	if (mnt >= 0 && setns(mnt, CLONE_NEWNS) < 0) {
		log_warn("cannot return to the agent's mount namespace");
		_exit(LAUNCH_EXIT_FAIL);
	}
	if (mnt >= 0)
		close(mnt);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return;
	}
	if (ns_write_id_maps(pid, h->uid, h->gid) < 0 || write(sv[0], "1", 1) != 1) {
		abandon(pid);
		close(sv[0]);
		return;
	}
	h->pid = pid;
	h->sock = sv[0];
}

static void ahead_end(struct ahead *h)
{
	if (h->mounts >= 0)
		close(h->mounts);
	h->mounts = -1;
	if (!h->pid)
		return;
	abandon(h->pid);
	close(h->sock);
	h->pid = 0;
}

/* A grant of /, which PID 1 is never checked against whole: a fresh PID 1
 * takes it. */
static bool grants_root(const char *path, const void *arg)
{
	(void)arg;
	return !strcmp(path, "/");
}

/* A mount point (arg) on a granted path, above it or below it. */
static bool along_grant(const char *path, const void *arg)
{
	return path_beneath(arg, path) || path_beneath(path, arg);
}

static bool along_grants(const char *point, const void *arg)
{
	return any_grant(arg, along_grant, point);
}

/* Whether PID 1, made ahead with a copy of the host's mounts, sees the
 * granted paths otherwise than the host does: a volume mounted since on one
 * of them or on a directory below one, or one unmounted there, would leave
 * PID 1 binding what was. When the host's mount namespace has not changed
 * since the copy (its mountinfo, open since before, polls no change), they
 * are alike; else the mounts on, above and below each granted path are
 * compared, but those of the directory of network namespace files, which
 * PID 1's copy shed (mounts_shed_netns_dir). */
static bool ahead_view_stale(const struct ahead *h, const struct launch_args *a)
{
	struct pollfd p = {.fd = h->mounts, .events = POLLPRI};
	char dir[PATH_MAX];
	const char *slash = strrchr(h->netns, '/');

	if (any_grant(a, grants_root, NULL))
		return true;
	if (h->mounts >= 0 && poll(&p, 1, 0) == 0)
		return false;
	if (path_fmt(dir, sizeof(dir), "%.*s", (int)(slash - h->netns), h->netns))
		return true;
	/* PID 1's root is its staging tmpfs, the host's below at /oldroot
	 * (mounts.c) */
	return mountinfo_differs(h->pid, "/oldroot", dir[0] ? dir : NULL, along_grants, a);
}

static bool ahead_fits(const struct ahead *h, const struct launch_args *a)
{
	return h->pid && !a->image && !strcmp(a->netns, h->netns) && a->uid == h->uid &&
	       a->gid == h->gid && !ahead_view_stale(h, a);
}

/* PID 1's command line: the start's, with the paths as resolve_paths made
 * them (PID 1 has left the host's root already and cannot resolve them),
 * the project named when it was the working directory, and without the
 * descriptors PID 1 is not given (--hold-fd, --project-userns). */
static char **ahead_argv(int argc, char **argv, const struct launch_args *a)
{
	const struct launch_list *lists[] = {&a->policy_read, &a->policy_write, &a->policy_exec,
					     &a->rule_allow, &a->hide};
	const int list_opt[] = {OPT_POLICY_READ, OPT_POLICY_WRITE, OPT_POLICY_EXEC, OPT_RULE_ALLOW,
				OPT_HIDE};
	size_t n = 0, listed = 0;
	bool project = false;
	char **v;
	int i;

	for (size_t k = 0; k < ARRAY_SIZE(lists); k++)
		listed += lists[k]->n;
	/* each --opt=value becomes two words */
	v = calloc(2 * (size_t)argc + 2 * listed + 3, sizeof(*v));
	if (!v)
		return NULL;
	v[n++] = argv[0];
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		const char *arg = argv[i], *eq = strchr(arg, '='), *val;
		size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
		int o = find_opt(arg, len);
		bool list = false;

		val = eq ? eq + 1 : argv[++i];
		for (size_t k = 0; k < ARRAY_SIZE(lists); k++)
			list |= o == list_opt[k];
		/* the lists as resolved, after the rest: a grant dropped there is
		 * dropped for PID 1 */
		if (list || o == OPT_HOLD_FD || o == OPT_PROJECT_USERNS)
			continue;
		if (o == OPT_PROJECT)
			val = a->project, project = true;
		else if (o == OPT_STATE)
			val = a->state;
		else if (o == OPT_RESOLV)
			val = a->resolv;
		else if (o == OPT_CA_BUNDLE)
			val = a->ca_bundle;
		v[n++] = (char *)opts[o].name;
		v[n++] = (char *)val;
	}
	if (!project) {
		v[n++] = (char *)opts[OPT_PROJECT].name;
		v[n++] = (char *)a->project;
	}
	for (size_t k = 0; k < ARRAY_SIZE(lists); k++)
		for (size_t j = 0; j < lists[k]->n; j++) {
			v[n++] = (char *)opts[list_opt[k]].name;
			v[n++] = lists[k]->v[j];
		}
	for (; i < argc; i++)
		v[n++] = argv[i];
	v[n] = NULL;
	return v;
}

/* Hands PID 1 its command line, the caller's stdio, the status pipe and
 * the project's tree; the header's number (a priority, for the agent's
 * hand-over) carries the tree's descriptor. */
static int ahead_hand(const struct ahead *h, int argc, char **argv, const struct launch_args *a)
{
	int fds[5] = {0, 1, 2}, n = 3, r;
	char **v = ahead_argv(argc, argv, a);

	if (!v)
		return -ENOMEM;
	if (a->status_fd >= 0)
		fds[n++] = a->status_fd;
	fds[n++] = a->project_fd;
	r = await_send(h->sock, (const char *const *)v, fds, fds, (size_t)n, a->project_fd);
	free(v);
	if (r < 0) {
		errno = -r;
		log_warn("cannot hand the session to its PID 1");
	}
	return r;
}

int launch_args_pid1(int argc, char **argv, struct launch_args *a)
{
	int r = parse_args(argc, argv, a);

	if (r < 0)
		return r;
	a->term = getenv("TERM");
	a->project_in = a->project;
	a->state_in = a->state;
	return 0;
}

/* What the start states (--say) goes to the command's stderr first, as
 * the session is taken, so a step that fails after it (the namespaces, the
 * mounts, Landlock) leaves them said before its own line. Escaped into a
 * buffer and written at once: stderr is unbuffered, and a byte a write made
 * a start's few lines four hundred system calls. */
static void say_all(const struct launch_args *a)
{
	char *text = NULL;
	size_t len = 0, off = 0;
	FILE *m;

	if (!a->say.n || !(m = open_memstream(&text, &len)))
		return;
	for (size_t i = 0; i < a->say.n; i++) {
		esc_fputs(a->say.v[i], m);
		fputc('\n', m);
	}
	if (fclose(m) == 0) {
		while (off < len) {
			ssize_t w = write(STDERR_FILENO, text + off, len - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	free(text);
}

/* Whether PID 1 said its root is built (it ended instead: no). */
static bool root_built(int sock)
{
	char c;
	ssize_t n;

	do
		n = read(sock, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1;
}

static void masks_made_again(void *watch)
{
	maskwatch_read(watch);
}

int main(int argc, char **argv)
{
	struct ahead ahead = {.sock = -1, .mounts = -1};
	struct maskwatch *watch = NULL;
	struct launch_args a;
	int sync[2], built, r;
	pid_t pid;

	log_init("errand-launch", false);
	if (reap_default_signals() < 0)
		fatal("cannot put the signals' dispositions back to their defaults");
	/* Started ahead with a prepared network (errand-launch --await FD): its
	 * exec is off the session's start, which hands it the command line it
	 * would have been started with. Without a session it leaves quietly. */
	if (argc >= 3 && !strcmp(argv[1], "--await")) {
		int fd = atoi(argv[2]), nice;

		if (argc > 3 && ahead_args(argc, argv, &ahead) < 0)
			return LAUNCH_EXIT_FAIL;
		/* The PID 1 made ahead builds the filter it loads itself:
		 * libseccomp leaves thousands of freed pieces in the heap, and
		 * the first malloc after a clone walked them all, copying each
		 * page it touched. Without one, a clone at the start takes the
		 * launcher's. */
		if (ahead.netns)
			ahead_start(&ahead, fd);
		if (!ahead.pid)
			seccomp_prepare();
		r = await_recv(fd, &argc, &argv, &nice);
		if (r < 0)
			ahead_end(&ahead);
		if (r == -ENODATA)
			return 0;
		if (r < 0) {
			errno = -r;
			log_warn("cannot take the session the agent handed over");
			return LAUNCH_EXIT_FAIL;
		}
		/* started by the pool's job, at its lower priority, and so
		 * was the PID 1 it made */
		if (setpriority(PRIO_PROCESS, 0, nice) < 0 ||
		    (ahead.pid && setpriority(PRIO_PROCESS, (id_t)ahead.pid, nice) < 0))
			fatal("cannot set the session's priority");
	}
	r = parse_args(argc, argv, &a);
	if (r < 0 || resolve_paths(&a) < 0) {
		ahead_end(&ahead);
		return LAUNCH_EXIT_FAIL;
	}
	a.term = getenv("TERM");
	if (!ahead_fits(&ahead, &a))
		ahead_end(&ahead);
	if (ahead.mounts >= 0)
		close(steal_fd(&ahead.mounts));
	say_all(&a);

	/* Before any child exists, so no signal meant for it is lost. */
	if (reap_block_signals() < 0)
		fatal("cannot block signals for forwarding");
	if (limits_apply(&a) < 0 || ns_join_cgroup(a.cgroup) < 0)
		goto fail;
	/* As root in the host's user namespace, so the session gets the network
	 * namespace but no capability over it. */
	if (!ahead.pid && ns_enter_netns(a.netns) < 0)
		goto fail;
	if (ns_prepare_state(&a) < 0 || resolve_state(&a) < 0)
		goto fail;
	if (ns_prepare_project(&a) < 0)
		goto fail;
	if (a.userns_fd >= 0)
		close(a.userns_fd); /* not the project's owner's: not taken */
	/* Supplementary groups are host gids the user namespace carries along
	 * unmapped; the session must not keep root's. (Done already when a
	 * PID 1 was made ahead: ahead_start.) */
	if (!ahead.pid && setgroups(0, NULL) < 0)
		fatal("cannot drop the supplementary groups");
	if (!ahead.pid && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fatal("cannot set no_new_privs");

	/* Watched from before PID 1 builds the root, so nothing made again
	 * after its masks() goes unseen */
	if (maskwatch_new(&a, &watch) < 0)
		log_warnx("the session starts with its masked paths covered once: a daemon "
			  "that makes its socket again shows through the grants");

	if (ahead.pid) {
		pid = ahead.pid;
		if (ahead_hand(&ahead, argc, argv, &a) < 0)
			return abandon(pid);
		/* ahead.sock stays open until this process ends, as sync[1] */
		built = ahead.sock;
	} else {
		/* a socket: PID 1 says on it when the root is built */
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0)
			fatal("cannot make a socket pair to start the session");
		pid = ns_clone_session();
		if (pid < 0)
			return LAUNCH_EXIT_FAIL;
		if (pid == 0) {
			close(sync[1]);
			/* The held sockets are the launcher's alone, never the session's. */
			for (size_t k = 0; k < a.hold.n; k++)
				close(atoi(a.hold.v[k]));
			session_init(&a, sync[0]);
		}
		close(sync[0]);
		if (ns_write_id_maps(pid, a.uid, a.gid) < 0)
			return abandon(pid);
		/* sync[1] stays open until this process ends: PID 1 polls it to
		 * learn whether it still has a launcher to report to. */
		if (write(sync[1], "1", 1) != 1) {
			log_warn("cannot tell session process %d to go on", (int)pid);
			return abandon(pid);
		}
		built = sync[1];
	}
	/* PID 1 has its own copy of the project's tree to mount, and the
	 * status pipe is PID 1's alone: it ends with no status said when PID 1
	 * does. */
	close(a.project_fd);
	if (a.status_fd >= 0)
		close(a.status_fd);

	if (watch && root_built(built))
		maskwatch_start(watch, pid);
	if (watch)
		r = reap_wait_watching(pid, maskwatch_fd(watch), maskwatch_timeout_ms(watch),
				       masks_made_again, watch);
	else
		r = reap_wait(pid);
	maskwatch_free(watch);
	if (r < 0) {
		errno = -r;
		log_warn("cannot wait for session process %d", (int)pid);
		return abandon(pid);
	}
	write_status(a.status_file, r);
	return r;
fail:
	ahead_end(&ahead);
	return LAUNCH_EXIT_FAIL;
}
