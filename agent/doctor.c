/* errand's start-up report and `errandctl doctor` (see doctor.h): each
 * kernel feature a session's confinement rests on is probed, not assumed,
 * and what is missing is either a gap, stated in one sentence naming what a
 * session can then do, or unavailable, which refuses sessions outright. A
 * weaker boundary is never presented as a stronger one. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <linux/bpf.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <jansson.h>

#include "agent/cgroup.h"
#include "agent/doctor.h"
#include "agent/netlink.h"
#include "agent/rules.h"
#include "lib/idmap.h"
#include "lib/landlock.h"
#include "lib/strv.h"
#include "lib/util.h"
#include "lib/log.h"

#define BPF_FS_MAGIC_NUM 0xcafe4a11
#define BPF_FS_ROOT "/sys/fs/bpf"
#define BTF_VMLINUX "/sys/kernel/btf/vmlinux"
#define SECURITYFS "/sys/kernel/security"
#define LINE 512

enum state { OK, GAP, UNAVAILABLE, INFO };

static const char *const state_names[] = {"ok", "gap", "unavailable", "info"};

enum check {
	C_USERNS,
	C_SECCOMP,
	C_LANDLOCK,
	C_CGROUP2,
	C_LIMITS,
	C_BPF_LOAD,
	C_BPF_ATTACH,
	C_BTF,
	C_BPFFS,
	C_TC,
	C_BPF_LSM,
	C_DISK,
	C_PROJECT,
	C_STATE_DIR,
	C_IPV6,
	C_COUNT
};

/* clang-format off */
static const char *const check_names[] = {
	[C_USERNS] = "userNamespaces", [C_SECCOMP] = "seccomp",
	[C_LANDLOCK] = "landlock",     [C_CGROUP2] = "cgroup2",
	[C_LIMITS] = "cgroupLimits",   [C_BPF_LOAD] = "bpfLoad",
	[C_BPF_ATTACH] = "bpfAttach",  [C_BTF] = "btf",
	[C_BPFFS] = "bpffs",	       [C_TC] = "tcClsact",
	[C_BPF_LSM] = "bpfLsm",	       [C_DISK] = "disk",
	[C_PROJECT] = "projectIdmap",  [C_STATE_DIR] = "stateIdmap",
	[C_IPV6] = "ipv6",
};
/* clang-format on */

static const char *const controllers[] = {"memory", "cpu", "pids"};

struct doctor_report {
	struct {
		enum state state;
		char detail[LINE]; /* what was found, or for a gap what a session can do */
		char fix[LINE];	   /* for unavailable: what to do */
	} c[C_COUNT];
	int landlock_abi;	/* the kernel's, or -errno */
	char cgroup2[PATH_MAX]; /* the mount, "" when none */
	bool delegated[3];	/* per controllers[] */
	struct {
		char path[PATH_MAX];
		char fs[64];
		int err; /* idmap_probe's: 0 when it can be idmapped */
	} idmap[2];	 /* the project and the state directory */
	bool bpf_lsm;	 /* BPF LSM programs load on a cgroup */
};

__attribute__((format(printf, 4, 5))) static void set(struct doctor_report *r, enum check c,
						      enum state s, const char *fmt, ...)
{
	va_list ap;

	r->c[c].state = s;
	va_start(ap, fmt);
	vsnprintf(r->c[c].detail, sizeof(r->c[c].detail), fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 3, 4))) static void set_fix(struct doctor_report *r, enum check c,
							  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->c[c].fix, sizeof(r->c[c].fix), fmt, ap);
	va_end(ap);
}

/* Runs fn in a child (so namespaces, filters and netns it makes die with
 * it): 0, or the positive errno the child exits with. */
static int in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(fn());
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return errno;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return EINTR;
}

static int try_userns(void)
{
	const int flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
			  CLONE_NEWCGROUP;

	return unshare(flags) < 0 ? errno : 0;
}

static int try_seccomp(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r;

	if (!ctx)
		return ENOMEM;
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(bpf), 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return -r;
}

static void probe_userns(struct doctor_report *r)
{
	int e = in_child(try_userns);

	if (!e) {
		set(r, C_USERNS, OK, "user, PID, mount, UTS, IPC and cgroup namespaces");
		return;
	}
	set(r, C_USERNS, UNAVAILABLE, "user namespaces: %s", strerror(e));
	set_fix(r, C_USERNS,
		"this requires CONFIG_USER_NS and user.max_user_namespaces above 0 (sysctl)");
}

static void probe_seccomp(struct doctor_report *r)
{
	int e = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 ? errno : in_child(try_seccomp);

	if (!e) {
		set(r, C_SECCOMP, OK, "filters load");
		return;
	}
	set(r, C_SECCOMP, UNAVAILABLE, "seccomp filters: %s", strerror(e));
	set_fix(r, C_SECCOMP, "this requires CONFIG_SECCOMP_FILTER");
}

static void probe_landlock(struct doctor_report *r)
{
	int abi = landlock_abi();

	r->landlock_abi = abi;
	if (abi < 0) {
		set(r, C_LANDLOCK, GAP,
		    "filesystem access is not confined by Landlock (the kernel %s): a session's "
		    "files are held by its mount namespace and uid alone",
		    abi == -ENOSYS ? "was built without CONFIG_SECURITY_LANDLOCK"
				   : "does not enable it: add landlock to the lsm= boot parameter");
		return;
	}
	if (abi < LANDLOCK_ABI_FULL) {
		set(r, C_LANDLOCK, GAP,
		    "Landlock ABI %d does not confine %s (ABI %d and %d do); read-only mounts and "
		    "seccomp still hold them",
		    abi,
		    abi < LANDLOCK_ABI_TRUNCATE ? "truncate() and device ioctls" : "device ioctls",
		    LANDLOCK_ABI_TRUNCATE, LANDLOCK_ABI_IOCTL_DEV);
		return;
	}
	set(r, C_LANDLOCK, OK, "ABI %d (errand uses up to %d)", abi, LANDLOCK_ABI_KNOWN);
}

/* The first line of a small file. */
static int read_text(const char *path, char *buf, size_t len)
{
	int rc = file_read_text(path, buf, len);

	if (!rc)
		buf[strcspn(buf, "\n")] = '\0';
	return rc;
}

static bool has_word(const char *list, const char *word, const char *seps)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || strchr(seps, p[-1])) && (!p[n] || strchr(seps, p[n])))
			return true;
	return false;
}

/* What errand's cgroup can give its sessions: its own cgroup.controllers,
 * or, before it exists, what its parent enables for its children. Under
 * systemd, errand's cgroup is inside the scope systemd delegates to it, and
 * before that scope runs, what systemd has to delegate is the root's. */
static void probe_cgroup(struct doctor_report *r, const struct errand_config *cfg)
{
	char path[PATH_MAX], list[256], missing[64] = "", parent[PATH_MAX];
	size_t n_missing = 0;
	bool systemd, scope;
	char *slash;

	if (cgroup2_mount(r->cgroup2, sizeof(r->cgroup2)) < 0) {
		r->cgroup2[0] = '\0';
		set(r, C_CGROUP2, UNAVAILABLE, "no cgroup2 mount");
		set_fix(r, C_CGROUP2,
			"mount cgroup2 at /sys/fs/cgroup (or /sys/fs/cgroup/unified on a hybrid "
			"host)");
		set(r, C_LIMITS, GAP,
		    "per-session memory, cpu and process limits are not applied: no cgroup2");
		return;
	}
	set(r, C_CGROUP2, OK, "%s", r->cgroup2);
	systemd = cgroup_systemd(r->cgroup2);
	scope = !cgroup_sessions_parent(r->cgroup2, cfg->cgroup_name, false, parent,
					sizeof(parent));
	if (systemd && !scope) {
		if (path_fmt(path, sizeof(path), "%s/cgroup.controllers", r->cgroup2))
			path[0] = '\0';
	} else if (!path_fmt(path, sizeof(path), "%s/%s/cgroup.controllers", r->cgroup2, parent) &&
		   access(path, F_OK) < 0) {
		/* Its parent's: the path up to the name's last part. */
		slash = strrchr(path, '/');
		*slash = '\0';
		slash = strrchr(path, '/');
		snprintf(slash, sizeof(path) - (size_t)(slash - path), "/cgroup.subtree_control");
	}
	if (read_text(path, list, sizeof(list)) < 0)
		list[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(controllers); i++) {
		r->delegated[i] = has_word(list, controllers[i], " ");
		if (!r->delegated[i])
			n_missing++;
	}
	/* "memory", "memory and pids", "memory, cpu and pids" */
	for (size_t i = 0, k = 0; i < ARRAY_SIZE(controllers); i++) {
		if (r->delegated[i])
			continue;
		k++;
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
			 k == 1		  ? ""
			 : k == n_missing ? " and "
					  : ", ",
			 controllers[i]);
	}
	if (!n_missing && systemd) {
		set(r, C_LIMITS, OK, "memory, cpu and pids delegated by systemd to %s%s",
		    CGROUP_SCOPE, scope ? "" : " (started with the first session)");
		return;
	}
	if (!n_missing) {
		set(r, C_LIMITS, OK, "memory, cpu and pids delegated to %s/%s", r->cgroup2,
		    cfg->cgroup_name);
		return;
	}
	/* the fix that works here: where the root has them, they are one write
	 * away (the root cgroup may enable controllers while it holds
	 * processes); where it has not, they are bound to cgroup v1 */
	if (path_fmt(path, sizeof(path), "%s/cgroup.controllers", r->cgroup2) ||
	    read_text(path, list, sizeof(list)) < 0)
		list[0] = '\0';
	set(r, C_LIMITS, GAP,
	    "per-session %s limits are not applied: cgroup2 at %s does not delegate the %s "
	    "controller%s to errand's cgroup %s (%s)",
	    missing, r->cgroup2, missing, n_missing > 1 ? "s" : "", cfg->cgroup_name,
	    systemd ? "systemd has not delegated them: check that systemd-run --scope -p "
		      "Delegate=yes works"
	    : has_word(list, "memory", " ") && has_word(list, "pids", " ")
		    ? "enable them: echo '+memory +cpu +pids' > <cgroup2>/cgroup.subtree_control, "
		      "or run errand-agent under systemd with cgroup v2 unified"
		    : "cgroup v1 holds them: boot with systemd.unified_cgroup_hierarchy=1 "
		      "cgroup_no_v1=all");
}

static const struct bpf_insn ret1[] = {
	{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
	{.code = BPF_JMP | BPF_EXIT},
};
static const struct bpf_insn ret0[] = {
	{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	{.code = BPF_JMP | BPF_EXIT},
};

/* mkdir -p; the first directory it made, if any, into made. */
static int mkdir_p(const char *path, char *made, size_t len)
{
	char buf[PATH_MAX];

	made[0] = '\0';
	if (path_fmt(buf, sizeof(buf), "%s", path))
		return -ENAMETOOLONG;
	for (char *p = buf + 1;; p++) {
		char c = *p;

		if (c && c != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) == 0 && !made[0])
			snprintf(made, len, "%s", buf);
		else if (errno != EEXIST && !made[0])
			return -errno;
		if (!c)
			return 0;
		*p = c;
	}
}

/* Removes dir and its parents up to made, the first one mkdir_p made. */
static void rmdir_up(char *dir, const char *made)
{
	size_t stop = strlen(made);
	char *slash;

	if (!made[0])
		return;
	while (rmdir(dir) == 0 && strlen(dir) > stop && (slash = strrchr(dir, '/')))
		*slash = '\0';
}

/* A program that allows every connect, attached for a moment to a cgroup of
 * doctor's own beside errand's (<name>-doctor.<pid>: not below it, where a
 * starting session's sweep would take it for a leftover), then removed. */
static void probe_bpf(struct doctor_report *r, const struct errand_config *cfg)
{
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_CGROUP_INET4_CONNECT);
	char dir[PATH_MAX], made[PATH_MAX] = "", shown[PATH_MAX];
	int prog, cg = -1, link, e = 0;

	prog = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "errand_doctor", "GPL", ret1,
			     ARRAY_SIZE(ret1), &opts);
	if (prog < 0) {
		set(r, C_BPF_LOAD, UNAVAILABLE, "BPF program load: %s", strerror(-prog));
		set_fix(r, C_BPF_LOAD,
			"this requires CONFIG_BPF_SYSCALL and CONFIG_CGROUP_BPF, and root");
		set(r, C_BPF_ATTACH, UNAVAILABLE, "BPF cgroup attach: no program to attach");
		set_fix(r, C_BPF_ATTACH, "see bpfLoad");
		return;
	}
	set(r, C_BPF_LOAD, OK, "cgroup sock_addr programs load");
	if (!r->cgroup2[0]) {
		close(prog);
		set(r, C_BPF_ATTACH, UNAVAILABLE, "BPF cgroup attach: no cgroup2 mount");
		set_fix(r, C_BPF_ATTACH, "see cgroup2");
		return;
	}
	if (path_fmt(dir, sizeof(dir), "%s/%s-doctor.%d", r->cgroup2, cfg->cgroup_name,
		     (int)getpid()))
		e = ENAMETOOLONG;
	else if (mkdir_p(dir, made, sizeof(made)) < 0 ||
		 (cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		e = errno;
	else if ((link = bpf_link_create(prog, cg, BPF_CGROUP_INET4_CONNECT, NULL)) < 0)
		e = -link;
	else
		close(link);
	if (cg >= 0)
		close(cg);
	snprintf(shown, sizeof(shown), "%s", dir);
	rmdir_up(dir, made);
	close(prog);
	if (!e) {
		set(r, C_BPF_ATTACH, OK, "cgroup links attach");
		return;
	}
	set(r, C_BPF_ATTACH, UNAVAILABLE, "BPF cgroup attach to %s: %s", shown, strerror(e));
	set_fix(r, C_BPF_ATTACH, "this requires CONFIG_CGROUP_BPF and root");
}

/* clsact on lo of a network namespace of the child's own, which goes with it. */
static int try_tc(void)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = 1, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, tc, .handle = 1, .priority = 1);
	int prog, r;

	if (unshare(CLONE_NEWNET) < 0)
		return errno;
	prog = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "errand_doctor", "GPL", ret0,
			     ARRAY_SIZE(ret0), NULL);
	if (prog < 0)
		return -prog;
	r = bpf_tc_hook_create(&hook);
	if (r < 0 && r != -EEXIST)
		return -r;
	tc.prog_fd = prog;
	r = bpf_tc_attach(&hook, &tc);
	return r < 0 ? -r : 0;
}

static void probe_kernel_bpf(struct doctor_report *r)
{
	struct statfs st;
	int e;

	if (access(BTF_VMLINUX, R_OK) == 0) {
		set(r, C_BTF, OK, "%s", BTF_VMLINUX);
	} else {
		set(r, C_BTF, UNAVAILABLE, "%s: %s", BTF_VMLINUX, strerror(errno));
		set_fix(r, C_BTF, "this requires CONFIG_DEBUG_INFO_BTF=y");
	}
	if (statfs(BPF_FS_ROOT, &st) == 0 && st.f_type == BPF_FS_MAGIC_NUM) {
		set(r, C_BPFFS, OK, "mounted at %s", BPF_FS_ROOT);
	} else {
		FILE *f = fopen("/proc/filesystems", "re");
		char line[128];
		bool found = false;

		while (f && fgets(line, sizeof(line), f))
			found |= has_word(line, "bpf", "\t\n ");
		if (f)
			fclose(f);
		if (found) {
			set(r, C_BPFFS, OK, "not mounted; errand mounts it at %s", BPF_FS_ROOT);
		} else {
			set(r, C_BPFFS, UNAVAILABLE, "no bpf filesystem");
			set_fix(r, C_BPFFS, "this requires CONFIG_BPF_SYSCALL");
		}
	}
	e = in_child(try_tc);
	if (!e) {
		set(r, C_TC, OK, "clsact with a BPF classifier");
		return;
	}
	set(r, C_TC, UNAVAILABLE, "tc clsact with a BPF classifier: %s", strerror(e));
	set_fix(r, C_TC, "this requires CONFIG_NET_SCH_INGRESS and CONFIG_NET_CLS_BPF");
}

/* BPF LSM enforces sandbox.rules' deny, lazyAllow and Connect rules: with
 * none of those, its absence weakens nothing and is information. Listed is
 * not enough: the probe loads a BPF_LSM_CGROUP program, which a locked-down
 * kernel refuses. */
static void probe_bpf_lsm(struct doctor_report *r, const struct errand_config *cfg)
{
	char lsm[512], why[256];
	bool needed = rules_any_lsm(cfg);

	if (read_text(SECURITYFS "/lsm", lsm, sizeof(lsm)) < 0 &&
	    mount("securityfs", SECURITYFS, "securityfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
		    0 &&
	    errno != EBUSY) {
		set(r, C_BPF_LSM, needed ? GAP : INFO,
		    "unknown: cannot mount securityfs at %s to read the LSM list: %s "
		    "(sandbox.rules' "
		    "deny, lazyAllow and Connect rules need BPF LSM)",
		    SECURITYFS, strerror(errno));
		return;
	}
	read_text(SECURITYFS "/lsm", lsm, sizeof(lsm));
	r->bpf_lsm = rules_lsm_probe(why, sizeof(why)) == 0;
	if (r->bpf_lsm)
		set(r, C_BPF_LSM, needed ? OK : INFO,
		    "present in the active LSM list, and BPF LSM programs run on a session's "
		    "cgroup%s",
		    needed ? "; sandbox.rules' deny, lazyAllow and Connect rules are enforced"
			   : " (no rule needs them)");
	else if (needed)
		set(r, C_BPF_LSM, GAP,
		    "%s: sandbox.rules' deny, lazyAllow and Connect rules are not enforced: %s",
		    has_word(lsm, "bpf", ",") ? "present" : "absent", why);
	else
		set(r, C_BPF_LSM, INFO, "%s: %s (no rule needs it)",
		    has_word(lsm, "bpf", ",") ? "present" : "absent", why);
}

/* The nearest existing directory at or above path (the state directory
 * may not be made yet). */
static void existing_dir(const char *path, char *buf, size_t len)
{
	struct stat st;
	char *slash;

	if (path_fmt(buf, len, "%s", path))
		snprintf(buf, len, "/");
	while (stat(buf, &st) < 0 && (slash = strrchr(buf, '/'))) {
		if (slash == buf) {
			buf[1] = '\0';
			break;
		}
		*slash = '\0';
	}
}

/* Whether a mount can be idmapped is the mount's (its filesystem type and
 * the kernel), not the directory's: each session would otherwise pay two
 * probes (a child for its user namespace and a cloned tree, some 3 ms each).
 * Kept by mount id and the session account until the next doctor_refresh. */
#define IDMAP_CACHE_MAX 32
static pthread_mutex_t idmap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint64_t mnt_id;
	uid_t uid;
	gid_t gid;
	int err;
} idmap_cache[IDMAP_CACHE_MAX];
static size_t n_idmap_cache;

static int idmap_probe_cached(const char *path, const struct errand_config *cfg)
{
	struct statx stx;
	size_t i;
	int err;

	if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
		return idmap_probe(path, cfg->uid, cfg->gid);
	pthread_mutex_lock(&idmap_lock);
	for (i = 0; i < n_idmap_cache; i++) {
		if (idmap_cache[i].mnt_id == stx.stx_mnt_id && idmap_cache[i].uid == cfg->uid &&
		    idmap_cache[i].gid == cfg->gid) {
			err = idmap_cache[i].err;
			pthread_mutex_unlock(&idmap_lock);
			return err;
		}
	}
	pthread_mutex_unlock(&idmap_lock);
	err = idmap_probe(path, cfg->uid, cfg->gid);
	pthread_mutex_lock(&idmap_lock);
	if (n_idmap_cache < IDMAP_CACHE_MAX) {
		idmap_cache[n_idmap_cache].mnt_id = stx.stx_mnt_id;
		idmap_cache[n_idmap_cache].uid = cfg->uid;
		idmap_cache[n_idmap_cache].gid = cfg->gid;
		idmap_cache[n_idmap_cache++].err = err;
	}
	pthread_mutex_unlock(&idmap_lock);
	return err;
}

/* The session writes its project as the project's owner through an
 * idmapped mount (launcher/ns.c): probed on a copy of the very directory,
 * since whether a filesystem type allows it depends on the kernel (tmpfs
 * from 6.3; ext4, xfs and btrfs from 5.12; ramfs, most network and FUSE
 * filesystems never). */
static void probe_idmap(struct doctor_report *r, const struct errand_config *cfg)
{
	char cwd[PATH_MAX];
	struct stat st;
	int e;

	if (!cfg->project && !getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), ".");
	snprintf(r->idmap[0].path, sizeof(r->idmap[0].path), "%s", cfg->project ?: cwd);
	existing_dir(cfg->state_dir ?: "/var/lib/errand", r->idmap[1].path,
		     sizeof(r->idmap[1].path));
	for (int i = 0; i < 2; i++) {
		idmap_fs_name(r->idmap[i].path, r->idmap[i].fs, sizeof(r->idmap[i].fs));
		r->idmap[i].err = idmap_probe_cached(r->idmap[i].path, cfg);
	}
	e = r->idmap[0].err;
	if (stat(r->idmap[0].path, &st) == 0 && st.st_uid == cfg->uid)
		set(r, C_PROJECT, OK,
		    "the project %s (%s) is the session account's own (uid %u): written as it is",
		    r->idmap[0].path, r->idmap[0].fs, (unsigned int)cfg->uid);
	else if (!e)
		set(r, C_PROJECT, OK,
		    "the project %s (%s) is written as its owner, uid %u, through an idmapped "
		    "mount; the session stays uid %u",
		    r->idmap[0].path, r->idmap[0].fs, (unsigned int)st.st_uid,
		    (unsigned int)cfg->uid);
	else if (idmap_unsupported(e))
		set(r, C_PROJECT, GAP,
		    "the project %s is on %s, which cannot be idmapped (%s): the session could "
		    "not write it as its owner, only as uid %u's own permissions allow; move the "
		    "project to a filesystem that can (ext4, xfs, btrfs, tmpfs from Linux 6.3)",
		    r->idmap[0].path, r->idmap[0].fs, strerror(-e), (unsigned int)cfg->uid);
	else
		set(r, C_PROJECT, GAP,
		    "cannot tell whether the project %s (%s) can be idmapped: %s; the session "
		    "would not write it as its owner",
		    r->idmap[0].path, r->idmap[0].fs, strerror(-e));
	/* Made by errand for each session, owned by the session's own uid: it
	 * never needs an idmap, so what its filesystem allows is only told. */
	set(r, C_STATE_DIR, INFO,
	    "the state directory %s (%s) is made for each session and owned by its account, so "
	    "it needs no idmap (%s could %sbe idmapped)",
	    r->idmap[1].path, r->idmap[1].fs, r->idmap[1].fs, r->idmap[1].err ? "not " : "");
}

/* The host's part of the report (kernel features, cgroup, BPF), probed at
 * most once per doctor_refresh: the daemon refreshes it at start and on
 * reload, off its loop; sessions take a copy and probe only their paths. */
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct doctor_report *host_cache;

static struct doctor_report *probe_host(const struct errand_config *cfg)
{
	struct doctor_report *r = calloc(1, sizeof(*r));
	libbpf_print_fn_t prev;

	if (!r)
		return NULL;
	/* libbpf's own lines would only repeat what the report says. */
	prev = libbpf_set_print(NULL);
	probe_userns(r);
	probe_seccomp(r);
	probe_landlock(r);
	probe_cgroup(r, cfg);
	probe_bpf(r, cfg);
	probe_kernel_bpf(r);
	probe_bpf_lsm(r, cfg);
	libbpf_set_print(prev);
	return r;
}

/* Under the lock: two probes at once would make and remove the same probe
 * objects, and each could take the other's for a gap. */
int doctor_refresh(const struct errand_config *cfg)
{
	struct doctor_report *r;
	int rc = 0;

	pthread_mutex_lock(&idmap_lock);
	n_idmap_cache = 0;
	pthread_mutex_unlock(&idmap_lock);
	pthread_mutex_lock(&host_lock);
	r = probe_host(cfg);
	if (r) {
		free(host_cache);
		host_cache = r;
	} else {
		rc = -errno;
	}
	pthread_mutex_unlock(&host_lock);
	return rc;
}

struct doctor_report *doctor_probe(const struct errand_config *cfg)
{
	struct doctor_report *r = malloc(sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_lock(&host_lock);
	if (!host_cache)
		host_cache = probe_host(cfg);
	if (host_cache)
		*r = *host_cache;
	pthread_mutex_unlock(&host_lock);
	if (!host_cache) {
		free(r);
		return NULL;
	}
	probe_idmap(r, cfg);
	if (cfg->limits.disk)
		set(r, C_DISK, OK,
		    "disk use measured, not enforced by a filesystem: a session whose project and "
		    "state directories grow past %llu bytes is stopped",
		    (unsigned long long)cfg->limits.disk);
	else
		set(r, C_DISK, INFO,
		    "disk use is not limited (no sized filesystem under the project or state)");
	if (cfg->network == NETWORK_NONE && r->c[C_TC].state == UNAVAILABLE)
		r->c[C_TC].state = INFO; /* no network, nothing to hold back */
	/* Asked afresh, as each session start asks: a route may come or go. */
	if (netlink_v6_route_out())
		set(r, C_IPV6, OK,
		    "sessions are dual-stack: this namespace has an IPv6 route out (NAT66 from "
		    "sandbox.addressPool6)");
	else
		set(r, C_IPV6, INFO,
		    "no IPv6 route out of this namespace: sessions get IPv6 for their DNS alone, "
		    "no "
		    "IPv6 route (AAAA answers are still filtered)");
	return r;
}

void doctor_report_free(struct doctor_report *r)
{
	free(r);
}

/* 1073741824 as "1g", 3000 as "3000". */
static const char *size_str(uint64_t n, char *buf, size_t len)
{
	static const char units[] = "kmgt";
	int u = -1;

	while (n && !(n & 1023) && u < 3) {
		n >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, n);
	else
		snprintf(buf, len, "%" PRIu64 "%c", n, units[u]);
	return buf;
}

static void print_list(FILE *f, const char *label, const struct config_strv *l, bool names_only)
{
	if (!l->n)
		return;
	fprintf(f, "  %s:", label);
	for (size_t i = 0; i < l->n; i++) {
		const char *s = l->v[i];

		if (names_only)
			fprintf(f, "%s %.*s", i ? "," : "", (int)strcspn(s, "="), s);
		else
			fprintf(f, "%s %s", i ? "," : "", s);
	}
	fputc('\n', f);
}

static size_t count(const struct doctor_report *r, enum state s)
{
	size_t n = 0;

	for (size_t i = 0; i < C_COUNT; i++)
		n += r->c[i].state == s;
	return n;
}

static json_t *strv_json(const struct config_strv *l, bool names_only)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->n; i++)
		json_array_append_new(a, names_only ? json_stringn(l->v[i], strcspn(l->v[i], "="))
						    : json_string(l->v[i]));
	return a;
}

/* Every rule, errand's own too, and how this host enforces it. */
static json_t *rules_json(const struct errand_config *cfg, bool lsm_ok)
{
	json_t *a = json_array();
	char how[512];

	for (size_t i = 0; a && i < cfg->rules.n; i++) {
		const struct config_rule *ru = &cfg->rules.v[i];

		rules_describe(ru, lsm_ok, how, sizeof(how));
		json_array_append_new(a, json_pack("{s:s,s:s,s:b,s:s}", "rule", ru->text, "kind",
						   config_rule_kind_name(ru->kind), "builtin",
						   ru->builtin, "enforced", how));
	}
	return a;
}

/* builtins: errand's own closures too (doctor), or the operator's rules only
 * (the start, which names the closures in one line). */
static void print_rules(FILE *f, const char *prefix, const struct errand_config *cfg, bool builtins,
			bool lsm_ok)
{
	char how[512];

	for (size_t i = 0; i < cfg->rules.n; i++) {
		const struct config_rule *ru = &cfg->rules.v[i];

		if (ru->builtin && ru->kind == RULE_DENY && !builtins)
			continue;
		rules_describe(ru, lsm_ok, how, sizeof(how));
		fprintf(f, "%s%s %s\n", prefix, config_rule_kind_name(ru->kind), how);
	}
}

static void closed_line(const struct errand_config *cfg, FILE *say)
{
	const char *sep = "";

	fprintf(say, "errand: closed to the session (hidden by the launcher):");
	for (size_t i = 0; i < cfg->rules.n; i++) {
		const struct config_rule *ru = &cfg->rules.v[i];

		if (ru->builtin && ru->kind == RULE_DENY) {
			fprintf(say, "%s %s", sep, ru->path);
			sep = ",";
		}
	}
	fputc('\n', say);
}

static void print_json(const struct doctor_report *r, const struct errand_config *cfg, FILE *f)
{
	json_t *root = json_object(), *checks = json_object(), *gaps = json_array();
	json_t *unavail = json_array(), *limits, *grants;
	char *text;

	for (size_t i = 0; i < C_COUNT; i++) {
		json_t *c = json_pack("{s:s,s:s}", "state", state_names[r->c[i].state], "detail",
				      r->c[i].detail);

		if (r->c[i].state == UNAVAILABLE)
			json_object_set_new(c, "fix", json_string(r->c[i].fix));
		json_object_set_new(checks, check_names[i], c);
		if (r->c[i].state == GAP)
			json_array_append_new(gaps, json_string(r->c[i].detail));
		if (r->c[i].state == UNAVAILABLE)
			json_array_append_new(unavail,
					      json_sprintf("%s; %s", r->c[i].detail, r->c[i].fix));
	}
	limits = json_pack(
		"{s:I,s:I,s:I,s:I,s:I,s:f,s:I}", "fileSize", (json_int_t)cfg->limits.file_size,
		"tmp", (json_int_t)cfg->limits.tmp, "shm", (json_int_t)cfg->limits.shm, "memory",
		(json_int_t)cfg->limits.memory, "pids", (json_int_t)cfg->limits.pids, "cpu",
		cfg->limits.cpu_milli / 1000.0, "disk", (json_int_t)cfg->limits.disk);
	grants = json_pack("{s:o,s:o,s:o}", "read", strv_json(&cfg->policy_read, false), "write",
			   strv_json(&cfg->policy_write, false), "execute",
			   strv_json(&cfg->policy_exec, false));
	json_object_set_new(root, "checks", checks);
	json_object_set_new(root, "landlockAbi",
			    json_integer(r->landlock_abi > 0 ? r->landlock_abi : 0));
	json_object_set_new(root, "landlockAbiKnown", json_integer(LANDLOCK_ABI_KNOWN));
	json_object_set_new(root, "cgroup2", r->cgroup2[0] ? json_string(r->cgroup2) : json_null());
	json_object_set_new(root, "delegated",
			    json_pack("{s:b,s:b,s:b}", "memory", r->delegated[0], "cpu",
				      r->delegated[1], "pids", r->delegated[2]));
	json_object_set_new(root, "uid", json_integer(cfg->uid));
	json_object_set_new(root, "gid", json_integer(cfg->gid));
	json_object_set_new(root, "limits", limits);
	json_object_set_new(root, "policyExtra", grants);
	json_object_set_new(root, "env", strv_json(&cfg->env, true));
	json_object_set_new(root, "pathExtra", strv_json(&cfg->path_extra, false));
	json_object_set_new(root, "blockedSyscalls", strv_json(&cfg->blocked_syscalls, false));
	json_object_set_new(root, "image", cfg->image ? json_string(cfg->image) : json_null());
	json_object_set_new(root, "rules", rules_json(cfg, r->bpf_lsm));
	for (int i = 0; i < 2; i++)
		json_object_set_new(root, i ? "stateFilesystem" : "projectFilesystem",
				    json_pack("{s:s,s:s,s:b}", "path", r->idmap[i].path, "type",
					      r->idmap[i].fs, "idmap", !r->idmap[i].err));
	json_object_set_new(root, "gaps", gaps);
	json_object_set_new(root, "unavailable", unavail);
	json_object_set_new(root, "requireFullEnforcement", json_boolean(cfg->require_full));
	json_object_set_new(
		root, "sessions",
		json_string(count(r, UNAVAILABLE) || (count(r, GAP) && cfg->require_full)
				    ? "refused"
				    : "allowed"));
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (text)
		fprintf(f, "%s\n", text);
	free(text);
}

void doctor_print(const struct doctor_report *r, const struct errand_config *cfg, bool json,
		  FILE *f)
{
	char a[24], b[24], c[24];
	size_t gaps = count(r, GAP), unavail = count(r, UNAVAILABLE);

	if (json) {
		print_json(r, cfg, f);
		return;
	}
	fprintf(f, "errand: what this host enforces for sessions\n");
	fprintf(f, "  sessions run as uid %u, gid %u, root only inside their own user namespace\n",
		(unsigned int)cfg->uid, (unsigned int)cfg->gid);
	for (size_t i = 0; i < C_COUNT; i++)
		if (r->c[i].state == OK || r->c[i].state == INFO)
			fprintf(f, "  %s: %s\n", check_names[i], r->c[i].detail);
	fprintf(f, "  seccomp refuses bpf, ptrace, the mount family, io_uring, clone3, unshare, "
		   "setns and more with ENOSYS, socket families but unix, inet and inet6, TIOCSTI "
		   "and TIOCLINUX, and the x32 and i386 entry points\n");
	fprintf(f, "  no single file may exceed %s, enforced as an rlimit\n",
		size_str(cfg->limits.file_size, a, sizeof(a)));
	fprintf(f, "  /tmp is a %s tmpfs and /dev/shm a %s one\n",
		size_str(cfg->limits.tmp, b, sizeof(b)), size_str(cfg->limits.shm, c, sizeof(c)));
	fprintf(f, "  cgroup limits asked for: memory %s, cpu %s, pids %" PRIu32 "\n",
		cfg->limits.memory ? size_str(cfg->limits.memory, a, sizeof(a)) : "none",
		cfg->limits.cpu_milli
			? (snprintf(b, sizeof(b), "%.2f", cfg->limits.cpu_milli / 1000.0), b)
			: "none",
		cfg->limits.pids);
	print_list(f, "granted to read (sandbox.policyExtra.read)", &cfg->policy_read, false);
	print_list(f, "granted to execute (sandbox.policyExtra.execute)", &cfg->policy_exec, false);
	print_list(f, "granted WRITABLE outside the project (sandbox.policyExtra.write)",
		   &cfg->policy_write, false);
	print_list(f, "sandbox.env sets (values not shown)", &cfg->env, true);
	print_list(f, "sandbox.pathExtra, ahead of /usr/bin", &cfg->path_extra, false);
	print_list(f, "sandbox.blockedSyscalls, ENOSYS too", &cfg->blocked_syscalls, false);
	if (cfg->image)
		fprintf(f, "  sessions run in the image %s\n", cfg->image);
	fprintf(f, "  sandbox.rules, errand's own included, and how each is enforced:\n");
	print_rules(f, "    - ", cfg, true, r->bpf_lsm);
	if (unavail) {
		fprintf(f, "  %zu requirement(s) unavailable, so sessions are refused:\n", unavail);
		for (size_t i = 0; i < C_COUNT; i++)
			if (r->c[i].state == UNAVAILABLE)
				fprintf(f, "    - %s; %s\n", r->c[i].detail, r->c[i].fix);
	}
	if (gaps) {
		fprintf(f, "  %zu guarantee(s) cannot be enforced on this host:\n", gaps);
		for (size_t i = 0; i < C_COUNT; i++)
			if (r->c[i].state == GAP)
				fprintf(f, "    - %s\n", r->c[i].detail);
	}
	if (unavail)
		fprintf(f, "  sessions: refused\n");
	else if (gaps && cfg->require_full)
		fprintf(f, "  sessions: refused (sandbox.requireFullEnforcement is true; set it to "
			   "false to run with the gaps above)\n");
	else if (gaps)
		fprintf(f, "  sessions: allowed, with the gaps above "
			   "(sandbox.requireFullEnforcement is false)\n");
	else
		fprintf(f, "  sessions: allowed, fully enforced\n");
}

static void gate_list(FILE *say, const char *label, const struct config_strv *l, bool names_only)
{
	if (!l->n)
		return;
	fprintf(say, "errand: %s:", label);
	for (size_t i = 0; i < l->n; i++)
		fprintf(say, "%s %.*s", i ? "," : "",
			names_only ? (int)strcspn(l->v[i], "=") : (int)strlen(l->v[i]), l->v[i]);
	fputc('\n', say);
}

int doctor_gate(const struct doctor_report *r, const struct errand_config *cfg, FILE *say,
		char *err, size_t errlen)
{
	bool refused = false;

	for (size_t i = 0; i < C_COUNT; i++) {
		if (r->c[i].state == UNAVAILABLE) {
			fprintf(say, "errandctl: unavailable: %s; %s\n", r->c[i].detail,
				r->c[i].fix);
			if (!refused)
				snprintf(err, errlen, "unavailable: %s; %s", r->c[i].detail,
					 r->c[i].fix);
			refused = true;
		}
	}
	for (size_t i = 0; i < C_COUNT; i++) {
		if (r->c[i].state != GAP)
			continue;
		if (cfg->require_full) {
			fprintf(say,
				"errandctl: refused: %s; set sandbox.requireFullEnforcement to "
				"false "
				"to run anyway\n",
				r->c[i].detail);
			if (!refused)
				snprintf(err, errlen,
					 "refused: %s; set sandbox.requireFullEnforcement to false "
					 "to run anyway (errandctl doctor names every gap)",
					 r->c[i].detail);
			refused = true;
		} else if (!refused) {
			fprintf(say, "errand: gap: %s\n", r->c[i].detail);
		}
	}
	if (refused)
		return -EPERM;
	gate_list(say, "granted to read (sandbox.policyExtra.read)", &cfg->policy_read, false);
	gate_list(say, "granted to execute (sandbox.policyExtra.execute)", &cfg->policy_exec,
		  false);
	gate_list(say, "granted WRITABLE outside the project (sandbox.policyExtra.write)",
		  &cfg->policy_write, false);
	gate_list(say, "sandbox.env sets (values not shown)", &cfg->env, true);
	print_rules(say, "errand: rule: ", cfg, false, r->bpf_lsm);
	/* The same at every start unless a Connect allow lifts one (named as
	 * weakened below): said with -v; doctor always lists them. */
	if (log_verbose())
		closed_line(cfg, say);
	for (size_t i = 0; i < cfg->rules.n; i++) {
		const struct config_rule *ru = &cfg->rules.v[i];
		char own[PATH_MAX];
		bool authority = false;

		if (ru->kind == RULE_DENY || ru->verb != RULE_CONNECT)
			continue;
		for (const char *const *a = config_host_authorities; *a; a++)
			authority |= !strcmp(ru->path, *a);
		if (cfg->run_dir && !path_fmt(own, sizeof(own), "%s/agent.sock", cfg->run_dir))
			authority |= !strcmp(ru->path, own);
		if (authority)
			fprintf(say,
				"errand: weakened: %s opens a host authority's socket to the "
				"session\n",
				ru->text);
	}
	return 0;
}

json_t *doctor_gaps(const struct doctor_report *r)
{
	json_t *gaps = json_array();

	for (size_t i = 0; gaps && i < C_COUNT; i++)
		if (r->c[i].state == GAP)
			json_array_append_new(gaps, json_string(r->c[i].detail));
	return gaps;
}
