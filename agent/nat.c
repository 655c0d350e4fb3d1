/* A session's masquerade and forwarding rules as one nftables table of its
 * own, "ip errand-<id>", written and deleted whole with libnftables, each
 * change one transaction. See nat.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nftables/libnftables.h>

#include "agent/nat.h"
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

/* Runs cmds as one transaction. With out set, *out gets nft's output
 * (malloc'd). 0 or -errno; nft's error text is logged under what. */
static int nft_run(const char *what, const char *cmds, char **out)
{
	struct nft_ctx *ctx;
	int r;

	ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return -ENOMEM;
	if (nft_ctx_buffer_error(ctx) < 0 || (out && nft_ctx_buffer_output(ctx) < 0)) {
		nft_ctx_free(ctx);
		return -ENOMEM;
	}
	r = nft_run_cmd_from_buffer(ctx, cmds);
	if (r != 0) {
		const char *err = nft_ctx_get_error_buffer(ctx);
		int len = err ? (int)strlen(err) : 0;

		while (len > 0 && isspace((unsigned char)err[len - 1]))
			len--; /* log_warnx ends the line itself */
		r = errno_from_text(err);
		log_warnx("nft %s: %.*s", what, len ? len : 6, len ? err : "failed");
	} else if (out) {
		const char *o = nft_ctx_get_output_buffer(ctx);

		*out = strdup(o ? o : "");
		if (!*out)
			r = -ENOMEM;
	}
	nft_ctx_free(ctx);
	return r;
}

/* Table <family> errand-<id>: masquerade of saddr out of any link but
 * host_if, forwarding from host_if and established traffic back to it. */
static int nat_table_add(const char *family, const char *id, const char *saddr, const char *host_if)
{
	cleanup_free char *cmds = NULL;
	char what[128];
	int n;

	snprintf(what, sizeof(what), "table %s " NAT_TABLE_PREFIX "%s", family, id);
	/* "add" then "delete" first: a table left by an earlier agent is
	 * replaced rather than merged into, and the whole batch commits or
	 * none of it does. */
	n = asprintf(&cmds,
		     "add table %4$s " NAT_TABLE_PREFIX "%1$s\n"
		     "delete table %4$s " NAT_TABLE_PREFIX "%1$s\n"
		     "add table %4$s " NAT_TABLE_PREFIX "%1$s\n"
		     "add chain %4$s " NAT_TABLE_PREFIX "%1$s postrouting "
		     "{ type nat hook postrouting priority srcnat; policy accept; }\n"
		     "add rule %4$s " NAT_TABLE_PREFIX "%1$s postrouting "
		     "%4$s saddr %2$s oifname != \"%3$s\" masquerade\n"
		     "add chain %4$s " NAT_TABLE_PREFIX "%1$s forward "
		     "{ type filter hook forward priority filter; policy accept; }\n"
		     "add rule %4$s " NAT_TABLE_PREFIX "%1$s forward iifname \"%3$s\" accept\n"
		     "add rule %4$s " NAT_TABLE_PREFIX "%1$s forward "
		     "oifname \"%3$s\" ct state established,related accept\n",
		     id, saddr, host_if, family);
	if (n < 0) {
		cmds = NULL;
		return -ENOMEM;
	}
	return nft_run(what, cmds, NULL);
}

int nat_add(const char *id, uint32_t sess4, const char *host_if)
{
	char a[INET_ADDRSTRLEN];

	if (!valid_word(id, ID_MAX) || !valid_word(host_if, IFNAMSIZ - 1) || sess4 == 0)
		return -EINVAL;
	inet_ntop(AF_INET, &sess4, a, sizeof(a));
	return nat_table_add("ip", id, a, host_if);
}

int nat_add6(const char *id, const uint8_t sess6[16], const char *host_if)
{
	char a[INET6_ADDRSTRLEN];

	if (!valid_word(id, ID_MAX) || !valid_word(host_if, IFNAMSIZ - 1) || !sess6)
		return -EINVAL;
	inet_ntop(AF_INET6, sess6, a, sizeof(a));
	return nat_table_add("ip6", id, a, host_if);
}

static int nat_table_remove(const char *family, const char *id)
{
	char cmds[2 * (ID_MAX + 64)], what[128];

	if (!valid_word(id, ID_MAX))
		return -EINVAL;
	snprintf(what, sizeof(what), "table %s " NAT_TABLE_PREFIX "%s", family, id);
	/* Adding first makes the delete succeed whether or not the table is
	 * there, in one transaction, so a missing table is no error. */
	snprintf(cmds, sizeof(cmds),
		 "add table %2$s " NAT_TABLE_PREFIX "%1$s\n"
		 "delete table %2$s " NAT_TABLE_PREFIX "%1$s\n",
		 id, family);
	return nft_run(what, cmds, NULL);
}

int nat_remove(const char *id)
{
	return nat_table_remove("ip", id);
}

int nat_remove6(const char *id)
{
	return nat_table_remove("ip6", id);
}

static int nat_sweep_family(const char *family, int (*keep)(const char *id, void *arg), void *arg)
{
	cleanup_free char *out = NULL;
	char head[32], list[32], *line, *save = NULL;
	int count = 0, err = 0, r;

	snprintf(head, sizeof(head), "table %s " NAT_TABLE_PREFIX, family);
	snprintf(list, sizeof(list), "list tables %s\n", family);
	r = nft_run(list, list, &out);
	if (r < 0)
		return r;
	/* One "table FAMILY NAME" a line. */
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *id;

		if (strncmp(line, head, strlen(head)) != 0)
			continue;
		id = line + strlen(head);
		if (!valid_word(id, ID_MAX)) {
			log_warnx("nft table %s: not a name errand makes, left alone", line);
			continue;
		}
		if (keep && keep(id, arg))
			continue;
		r = nat_table_remove(family, id);
		if (r < 0 && !err)
			err = r;
		else if (r == 0)
			count++;
	}
	return err ? err : count;
}

int nat_sweep(int (*keep)(const char *id, void *arg), void *arg)
{
	int r4 = nat_sweep_family("ip", keep, arg);
	int r6 = nat_sweep_family("ip6", keep, arg);

	if (r4 < 0)
		return r4;
	return r6 < 0 ? r4 : r4 + r6;
}
