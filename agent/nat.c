/* A session's masquerade and forwarding rules as one nftables table of its
 * own, "ip errand-<id>", written and deleted whole with libnftables, each
 * change one transaction. See nat.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nftables/libnftables.h>

#include "agent/nat.h"
#include "lib/addr.h"
#include "lib/log.h"
#include "lib/util.h"

/* ids and interface names go into nft's language unquoted or in quotes;
 * a small alphabet keeps both safe from injection. */
static bool valid_word(const char *s, size_t max)
{
	size_t n = 0;

	for (; s && s[n]; n++)
		if (!isalnum((unsigned char)s[n]) && s[n] != '_' && s[n] != '-' && s[n] != '.')
			return false;
	return n > 0 && n <= max;
}

#define ID_MAX 64

/* libnftables reports only text; find the errno in it for our callers. */
static int errno_from_text(const char *text)
{
	static const int known[] = {EPERM,  EACCES,  ENOENT,	 EEXIST,       EBUSY,
				    ENOMEM, ENOBUFS, EOPNOTSUPP, EAFNOSUPPORT, EINVAL};

	for (size_t i = 0; text && i < ARRAY_SIZE(known); i++)
		if (strstr(text, strerror(known[i])))
			return -known[i];
	return -EIO;
}

/* libnftables, with the five libraries it brings, is loaded when NAT is
 * first written, not at every exec of this binary: errandctl and each
 * session's DNS worker (this binary exec'd again) never write any, and
 * linking it cost each exec half a millisecond of relocations. */
#define NFT_LIBRARY "libnftables.so.1"
static struct {
	__typeof__(nft_ctx_new) *ctx_new;
	__typeof__(nft_ctx_free) *ctx_free;
	__typeof__(nft_ctx_buffer_output) *buffer_output;
	__typeof__(nft_ctx_buffer_error) *buffer_error;
	__typeof__(nft_ctx_get_output_buffer) *get_output;
	__typeof__(nft_ctx_get_error_buffer) *get_error;
	__typeof__(nft_run_cmd_from_buffer) *run;
} nft;
static pthread_once_t nft_once = PTHREAD_ONCE_INIT;
static char nft_err[256];

static void nft_load(void)
{
	void *h = dlopen(NFT_LIBRARY, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(nft_err, sizeof(nft_err), "%s", dlerror());
		return;
	}
	/* POSIX's way from a dlsym pointer to a function pointer */
	*(void **)&nft.ctx_free = dlsym(h, "nft_ctx_free");
	*(void **)&nft.buffer_output = dlsym(h, "nft_ctx_buffer_output");
	*(void **)&nft.buffer_error = dlsym(h, "nft_ctx_buffer_error");
	*(void **)&nft.get_output = dlsym(h, "nft_ctx_get_output_buffer");
	*(void **)&nft.get_error = dlsym(h, "nft_ctx_get_error_buffer");
	*(void **)&nft.run = dlsym(h, "nft_run_cmd_from_buffer");
	if (nft.ctx_free && nft.buffer_output && nft.buffer_error && nft.get_output &&
	    nft.get_error && nft.run)
		*(void **)&nft.ctx_new = dlsym(h, "nft_ctx_new");
	if (!nft.ctx_new)
		snprintf(nft_err, sizeof(nft_err), "%s lacks a function errand calls", NFT_LIBRARY);
}

/* 0, or -ELIBACC with why logged: what each batch checks first. */
static int nft_loaded(const char *what)
{
	pthread_once(&nft_once, nft_load);
	if (nft.ctx_new)
		return 0;
	log_warnx("nft %s: cannot load %s (%s); install Debian's package libnftables1 "
		  "(make deps)",
		  what, NFT_LIBRARY, nft_err);
	return -ELIBACC;
}

/* Runs cmds as one transaction. With out set, *out gets nft's output
 * (malloc'd). 0 or -errno; nft's error text is logged under what. */
static int nft_run_here(const char *what, const char *cmds, char **out)
{
	struct nft_ctx *ctx;
	int r;

	if ((r = nft_loaded(what)))
		return r;
	ctx = nft.ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return -ENOMEM;
	if (nft.buffer_error(ctx) < 0 || (out && nft.buffer_output(ctx) < 0)) {
		nft.ctx_free(ctx);
		return -ENOMEM;
	}
	r = nft.run(ctx, cmds);
	if (r != 0) {
		const char *err = nft.get_error(ctx);
		int len = err ? (int)strlen(err) : 0;

		while (len > 0 && isspace((unsigned char)err[len - 1]))
			len--; /* log_warnx ends the line itself */
		r = errno_from_text(err);
		log_warnx("nft %s: %.*s", what, len ? len : 6, len ? err : "failed");
	} else if (out) {
		const char *o = nft.get_output(ctx);

		*out = strdup(o ? o : "");
		if (!*out)
			r = -ENOMEM;
	}
	nft.ctx_free(ctx);
	return r;
}

/* libnftables waits on its netlink socket with select(), whose fd_set
 * holds descriptors below 1024 only (past that glibc's fortified FD_SET
 * aborts the process), and an agent serving a thousand sessions holds more.
 * So each batch runs in a child with nothing open but stdio and the pipe
 * that carries back its result (a status line, then the output). */
static int nft_run(const char *what, const char *cmds, char **out)
{
	cleanup_free char *buf = NULL;
	size_t len = 0, cap = 0;
	int p[2], status, rc;
	pid_t pid;

	/* Loaded here, once, not in each child. */
	if ((rc = nft_loaded(what)))
		return rc;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		char *o = NULL;
		FILE *f;

		if (dup2(p[1], 3) < 0)
			_exit(125);
		syscall(SYS_close_range, 4U, ~0U, 0U);
		f = fdopen(3, "w");
		rc = nft_run_here(what, cmds, out ? &o : NULL);
		if (!f)
			_exit(125);
		fprintf(f, "%d\n%s", rc, o ? o : "");
		_exit(fclose(f) ? 125 : 0);
	}
	close(p[1]);
	for (;;) {
		ssize_t n;

		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 8192);

			if (!nb)
				break;
			buf = nb;
		}
		n = read(p[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!buf || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EIO;
	buf[len] = '\0';
	rc = atoi(buf);
	if (rc == 0 && out) {
		const char *nl = strchr(buf, '\n');

		*out = strdup(nl ? nl + 1 : "");
		if (!*out)
			rc = -ENOMEM;
	}
	return rc;
}

/* "errand-pool-10.213.0.0-16", "errand-pool6-fd65:7272:616e::-48": the
 * pool's own table, made once a process. */
static int pool_table(const struct cidr *pool, bool v6, char *name, size_t len)
{
	char a[ADDR_STRLEN];

	if (addr_is_v4(&pool->a) == v6 || (!v6 && pool->prefixlen < 96))
		return -EINVAL;
	snprintf(name, len, "%s%s-%d", v6 ? NAT_POOL6_PREFIX : NAT_POOL_PREFIX,
		 addr_str(&pool->a, a), pool->prefixlen - (v6 ? 0 : 96));
	for (char *c = name; *c; c++)
		if (*c == ':')
			*c = '.'; /* an nft name takes no colon */
	return valid_word(name, ID_MAX + 32) ? 0 : -EINVAL;
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cidr pools_done[8];
static size_t n_pools_done;

static int nat_pool_family(const struct cidr *pool, bool v6)
{
	const char *fam = v6 ? "ip6" : "ip";
	cleanup_free char *cmds = NULL;
	char name[ID_MAX + 64], a[ADDR_STRLEN], what[ID_MAX + 80];
	int n, rc = 0;

	if ((rc = pool_table(pool, v6, name, sizeof(name))))
		return rc;
	pthread_mutex_lock(&pool_lock);
	for (size_t i = 0; i < n_pools_done; i++)
		if (!memcmp(&pools_done[i], pool, sizeof(*pool)))
			goto out;
	snprintf(what, sizeof(what), "table %s %s", fam, name);
	/* "add" then "delete" first: a table left by an earlier errand is
	 * replaced rather than merged into, and the whole batch commits or
	 * none of it does (running sessions keep their NAT throughout). */
	n = asprintf(&cmds,
		     "add table %4$s %1$s\n"
		     "delete table %4$s %1$s\n"
		     "add table %4$s %1$s\n"
		     "add chain %4$s %1$s postrouting "
		     "{ type nat hook postrouting priority srcnat; policy accept; }\n"
		     "add rule %4$s %1$s postrouting "
		     "%4$s saddr %2$s/%3$d oifname != \"" VETH_HOST_GLOB "\" masquerade\n"
		     "add chain %4$s %1$s forward "
		     "{ type filter hook forward priority filter; policy accept; }\n"
		     "add rule %4$s %1$s forward iifname \"" VETH_HOST_GLOB "\" accept\n"
		     "add rule %4$s %1$s forward "
		     "oifname \"" VETH_HOST_GLOB "\" ct state established,related accept\n",
		     name, addr_str(&pool->a, a), pool->prefixlen - (v6 ? 0 : 96), fam);
	if (n < 0) {
		cmds = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = nft_run(what, cmds, NULL);
	if (!rc && n_pools_done < ARRAY_SIZE(pools_done))
		pools_done[n_pools_done++] = *pool;
out:
	pthread_mutex_unlock(&pool_lock);
	return rc;
}

int nat_pool(const struct cidr *pool)
{
	return nat_pool_family(pool, false);
}

int nat_pool6(const struct cidr *pool6)
{
	return nat_pool_family(pool6, true);
}

int nat_remove(const char *id)
{
	char cmds[2 * (ID_MAX + 64)], what[128];

	if (!valid_word(id, ID_MAX))
		return -EINVAL;
	snprintf(what, sizeof(what), "table ip " NAT_TABLE_PREFIX "%s", id);
	/* Adding first makes the delete succeed whether or not the table is
	 * there, in one transaction, so a missing table is no error. */
	snprintf(cmds, sizeof(cmds),
		 "add table ip " NAT_TABLE_PREFIX "%1$s\n"
		 "delete table ip " NAT_TABLE_PREFIX "%1$s\n",
		 id);
	return nft_run(what, cmds, NULL);
}

int nat_sweep(int (*keep)(const char *id, void *arg), void *arg)
{
	static const char head[] = "table ip " NAT_TABLE_PREFIX;
	cleanup_free char *out = NULL;
	char *line, *save = NULL;
	int count = 0, err = 0, r;

	r = nft_run("list tables ip", "list tables ip\n", &out);
	if (r < 0)
		return r;
	/* One "table ip NAME" a line. */
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *id;

		if (strncmp(line, head, strlen(head)) != 0)
			continue;
		id = line + strlen(head);
		/* a pool's table serves every session of the pool, ever */
		if (!strncmp(line, "table ip " NAT_POOL_PREFIX,
			     strlen("table ip " NAT_POOL_PREFIX)))
			continue;
		if (!valid_word(id, ID_MAX)) {
			log_warnx("nft table %s: not a name errand makes, left alone", line);
			continue;
		}
		if (keep && keep(id, arg))
			continue;
		r = nat_remove(id);
		if (r < 0 && !err)
			err = r;
		else if (r == 0)
			count++;
	}
	return err ? err : count;
}
