/* Guarantee: the launcher is given every confinement the configuration asks
 * for: the project and state directories, each policyExtra grant, pathExtra,
 * sandbox.env, blockedSyscalls, the image, the sizes and limits, and the
 * Landlock ABI full enforcement needs, and errand's own directories to hide;
 * what does not fit is refused whole.
 * The project is written as its owner only for its owner or root: the uid
 * that asked (the agent's, never a client's claim) reaches the launcher, and
 * a project another uid owns is refused.
 * Each thread starting a session gets its own options, never another's.
 * A session's state directory is removed without following what it left in
 * it, however deep. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/confine.h"
#include "agent/control.h"
#include "agent/request.h"
#include "lib/landlock.h"
#include "selftests/unit/test.h"

#define MAX 128

/* confine_launch_args, its rules' strings kept until the next call */
static int launch_args(const struct errand_config *cfg, const char *project, const char *state,
		       const char **args, size_t *n, size_t max)
{
	static char *store;

	free(store);
	return confine_launch_args(cfg, project, state, args, n, max, &store);
}

/* The value after opt in args, the nth time it appears (0 first), or NULL. */
static const char *value(const char **args, size_t n, const char *opt, int nth)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (!strcmp(args[i], opt) && nth-- == 0)
			return args[i + 1];
	return NULL;
}

static int count(const char **args, size_t n, const char *opt)
{
	int c = 0;

	for (size_t i = 0; i < n; i++)
		c += !strcmp(args[i], opt);
	return c;
}

static void test_defaults(void)
{
	struct errand_config cfg;
	const char *args[MAX] = {"errand-launch"};
	size_t n = 1;

	config_defaults(&cfg);
	CHECK_INT(launch_args(&cfg, "/work/p", "/var/lib/errand/sessions/x/work", args, &n, MAX), 0,
		  "defaults: the options fit");
	CHECK_STR(args[0], "errand-launch", "defaults: what was there stays");
	CHECK_STR(value(args, n, "--project", 0), "/work/p", "defaults: --project");
	CHECK_STR(value(args, n, "--state", 0), "/var/lib/errand/sessions/x/work",
		  "defaults: --state");
	CHECK_STR(value(args, n, "--fsize", 0), "1073741824", "defaults: --fsize 1g");
	CHECK_STR(value(args, n, "--tmp-size", 0), "536870912", "defaults: --tmp-size 512m");
	CHECK_STR(value(args, n, "--shm-size", 0), "67108864", "defaults: --shm-size 64m");
	CHECK_STR(value(args, n, "--pids", 0), "4096", "defaults: --pids 4096");
	CHECK_TRUE(!value(args, n, "--memory", 0), "defaults: no --memory");
	CHECK_TRUE(!value(args, n, "--cpu-milli", 0), "defaults: no --cpu-milli");
	CHECK_TRUE(!value(args, n, "--image", 0), "defaults: no --image");
	CHECK_STR(value(args, n, "--landlock-min", 0), "5",
		  "defaults: full enforcement needs Landlock ABI %d", LANDLOCK_ABI_FULL);
	CHECK_INT(count(args, n, "--hide"), 4,
		  "defaults: errand's own directories hidden (state, run, pins, secrets)");
	CHECK_STR(value(args, n, "--hide", 0), "/var/lib/errand", "defaults: --hide the state");
	CHECK_STR(value(args, n, "--hide", 1), "/run/errand", "defaults: --hide the run directory");
	CHECK_STR(value(args, n, "--hide", 3), "/etc/errand/secrets",
		  "defaults: --hide the secrets");
	CHECK_INT(n % 2, 1, "defaults: options come in pairs");
	config_free(&cfg);
}

static void test_full(void)
{
	struct errand_config cfg;
	const char *args[MAX];
	char *read[] = {"/opt/a", "/opt/b", NULL}, *write[] = {"/srv/out", NULL};
	char *exec[] = {"/opt/a/bin", NULL}, *env[] = {"CARGO_HOME=/c", "A=b=c", NULL};
	char *path[] = {"/opt/a/bin", NULL}, *sys[] = {"uname", NULL};
	size_t n = 0, before;

	config_defaults(&cfg);
	cfg.policy_read = (struct config_strv){read, 2};
	cfg.policy_write = (struct config_strv){write, 1};
	cfg.policy_exec = (struct config_strv){exec, 1};
	cfg.env = (struct config_strv){env, 2};
	cfg.path_extra = (struct config_strv){path, 1};
	cfg.blocked_syscalls = (struct config_strv){sys, 1};
	cfg.limits.memory = 1ULL << 30;
	cfg.limits.cpu_milli = 1500;
	cfg.require_full = false;
	cfg.image = "/srv/image";
	CHECK_INT(launch_args(&cfg, NULL, NULL, args, &n, MAX), 0, "full: the options fit");
	CHECK_TRUE(!value(args, n, "--project", 0) && !value(args, n, "--state", 0),
		   "full: no --project or --state when none is given");
	CHECK_INT(count(args, n, "--policy-read"), 2, "full: one --policy-read a path");
	CHECK_STR(value(args, n, "--policy-read", 1), "/opt/b", "full: in order");
	CHECK_STR(value(args, n, "--policy-write", 0), "/srv/out", "full: --policy-write");
	CHECK_STR(value(args, n, "--policy-exec", 0), "/opt/a/bin", "full: --policy-exec");
	CHECK_STR(value(args, n, "--path-extra", 0), "/opt/a/bin", "full: --path-extra");
	CHECK_STR(value(args, n, "--env", 1), "A=b=c", "full: --env NAME=VALUE for sandbox.env");
	CHECK_STR(value(args, n, "--block-syscall", 0), "uname", "full: --block-syscall");
	CHECK_STR(value(args, n, "--image", 0), "/srv/image", "full: --image");
	CHECK_STR(value(args, n, "--memory", 0), "1073741824", "full: --memory");
	CHECK_STR(value(args, n, "--cpu-milli", 0), "1500", "full: --cpu-milli");
	CHECK_STR(value(args, n, "--landlock-min", 0), "0",
		  "full: without requireFullEnforcement, Landlock as far as the kernel has it");

	before = n = 3;
	CHECK_INT(launch_args(&cfg, "/p", "/s", args, &n, 10), -E2BIG, "too little room: -E2BIG");
	CHECK_INT(n, before, "... and *n unchanged");
}

static void put(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, "x", 1) != 1) {
		printf("# cannot write %s\n", path);
		exit(1);
	}
	close(fd);
}

static void link_to(const char *target, const char *path)
{
	if (symlink(target, path) < 0) {
		printf("# cannot link %s\n", path);
		exit(1);
	}
}

static void test_remove_tree(void)
{
	char base[] = "/tmp/errand-unit-confine.XXXXXX", p[4096], deep[4096];
	struct stat st;

	if (!mkdtemp(base)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(p, sizeof(p), "%s/victim", base);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/victim/keep", base);
	put(p);
	snprintf(p, sizeof(p), "%s/state", base);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/state/a", base);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/state/a/file", base);
	put(p);
	snprintf(p, sizeof(p), "%s/state/a/dirlink", base);
	snprintf(deep, sizeof(deep), "%s/victim", base);
	link_to(deep, p);
	snprintf(p, sizeof(p), "%s/state/filelink", base);
	snprintf(deep, sizeof(deep), "%s/victim/keep", base);
	link_to(deep, p);
	/* 400 levels: deeper than PATH_MAX allows to name from the top. */
	snprintf(p, sizeof(p), "%s/state", base);
	if (chdir(p) == 0)
		for (int i = 0; i < 400; i++)
			if (mkdir("dddddddddddddddd", 0700) < 0 || chdir("dddddddddddddddd") < 0)
				break;
	put("bottom");
	if (chdir("/") < 0)
		exit(1);

	snprintf(p, sizeof(p), "%s/state", base);
	CHECK_INT(confine_remove_tree(p), 0, "confine_remove_tree: the state tree goes");
	CHECK_TRUE(lstat(p, &st) < 0 && errno == ENOENT, "... all of it, 400 levels deep too");
	snprintf(p, sizeof(p), "%s/victim/keep", base);
	CHECK_TRUE(stat(p, &st) == 0, "... and what its links pointed at is untouched");
	CHECK_INT(confine_remove_tree("/nonexistent/errand"), 0, "a missing tree is 0");

	/* A link in place of the tree itself: the link goes, not its target. */
	snprintf(p, sizeof(p), "%s/statelink", base);
	snprintf(deep, sizeof(deep), "%s/victim", base);
	link_to(deep, p);
	CHECK_INT(confine_remove_tree(p), 0, "a link where the tree was: removed");
	snprintf(p, sizeof(p), "%s/victim/keep", base);
	CHECK_TRUE(stat(p, &st) == 0, "... its target untouched");
	unlink(p);
	snprintf(p, sizeof(p), "%s/victim", base);
	rmdir(p);
	rmdir(base);
}

static void test_requester(void)
{
	char dir[] = "/tmp/errt-unit-confine-XXXXXX", err[512] = "";
	struct errand_config cfg;
	const char *args[MAX];
	json_t *req;
	size_t n = 0;

	CHECK_TRUE(mkdtemp(dir) != NULL, "requester: a project directory");
	CHECK_INT(chown(dir, 4242, 4242), 0, "requester: owned by uid 4242");
	req = json_pack("{s:[s],s:s,s:i}", "argv", "true", "project", dir, "requester", 4243);
	config_defaults(&cfg);
	CHECK_INT(request_apply(&cfg, req, err, sizeof(err)), -EPERM,
		  "requester: uid 4243 may not have uid 4242's project written as its owner");
	CHECK_CONTAINS(err, "belongs to uid 4242, not to you (uid 4243)", "requester: it says why");
	config_free(&cfg);

	json_object_set_new(req, "requester", json_integer(4242));
	config_defaults(&cfg);
	CHECK_INT(request_apply(&cfg, req, err, sizeof(err)), 0, "requester: the owner may");
	CHECK_INT(launch_args(&cfg, cfg.project, NULL, args, &n, MAX), 0,
		  "requester: the options fit");
	CHECK_STR(value(args, n, "--requester", 0), "4242",
		  "requester: the launcher checks it again");
	CHECK_STR(value(args, n, "--project-idmap", 0), "required",
		  "requester: full enforcement requires the idmap");
	config_free(&cfg);

	json_object_set_new(req, "requester", json_integer(0));
	config_defaults(&cfg);
	cfg.require_full = false;
	CHECK_INT(request_apply(&cfg, req, err, sizeof(err)), 0, "requester: root may");
	n = 0;
	CHECK_INT(launch_args(&cfg, cfg.project, NULL, args, &n, MAX), 0,
		  "requester: root's options fit");
	CHECK_STR(value(args, n, "--project-idmap", 0), "optional",
		  "requester: without full enforcement the idmap is optional");
	config_free(&cfg);

	/* A client cannot claim to be someone: the member is not in run's. */
	CHECK_TRUE(control_validate(CONTROL_RUN, req, err, sizeof(err)) < 0,
		   "requester: a client sending it is refused");
	json_object_del(req, "requester");
	CHECK_INT(control_validate(CONTROL_RUN, req, err, sizeof(err)), 0,
		  "requester: the same request without it passes (control)");
	config_defaults(&cfg);
	CHECK_INT(request_apply(&cfg, req, err, sizeof(err)), 0,
		  "requester: without one (errandctl's own agent, as root) it runs");
	n = 0;
	CHECK_INT(launch_args(&cfg, cfg.project, NULL, args, &n, MAX), 0,
		  "requester: options without one fit");
	CHECK_TRUE(!value(args, n, "--requester", 0), "requester: none is passed on");
	config_free(&cfg);
	json_decref(req);
	rmdir(dir);
}

/* Sessions start in several threads at once: each thread's options are its
 * own, never another's being written (a static buffer shared by the
 * threads handed a launcher an empty --mask). */
struct racer {
	const char *home;
	const char *expect[MAX];
	size_t n_expect;
	int bad;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct errand_config cfg;

	config_defaults(&cfg);
	config_rules_defaults(&cfg);
	for (int i = 0; i < 20000 && !r->bad; i++) {
		const char *args[MAX];
		char *store = NULL;
		size_t n = 0;

		if (confine_launch_args(&cfg, "/p", r->home, args, &n, MAX, &store) ||
		    n != r->n_expect)
			r->bad++;
		for (size_t k = 0; !r->bad && k < n; k++)
			if (strcmp(args[k], r->expect[k]))
				r->bad++;
		free(store);
	}
	config_free(&cfg);
	return NULL;
}

static void test_threads(void)
{
	static char copies[2][MAX][PATH_MAX + 32];
	struct racer r[2] = {{.home = "/state/a/work"}, {.home = "/state/bbbbbbbbbbbbbbbb/work"}};
	struct errand_config cfg;
	pthread_t t[2];

	config_defaults(&cfg);
	config_rules_defaults(&cfg);
	for (int i = 0; i < 2; i++) {
		const char *args[MAX];
		size_t n = 0;

		launch_args(&cfg, "/p", r[i].home, args, &n, MAX);
		for (size_t k = 0; k < n; k++) {
			snprintf(copies[i][k], sizeof(copies[i][k]), "%s", args[k]);
			r[i].expect[k] = copies[i][k];
		}
		r[i].n_expect = n;
	}
	config_free(&cfg);
	CHECK_TRUE(r[0].n_expect && value(r[0].expect, r[0].n_expect, "--mask", 0),
		   "threads: the defaults' options have a --mask (control)");
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, race, &r[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_INT(r[0].bad + r[1].bad, 0,
		  "threads: two threads building options at once each get exactly their own");
}

int main(void)
{
	test_threads();
	test_requester();
	test_defaults();
	test_full();
	test_remove_tree();
	return test_exit();
}
