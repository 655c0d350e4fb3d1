/* Grants in a session's record directory, and the suggestions that name
 * them. See grant.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/grant.h"
#include "lib/util.h"

#define NS_PER_S 1000000000ull
/* The next version of grants.json, written whole before it replaces it. */
#define GRANTS_TMP "." GRANTS_FILE ".tmp"

static const char *const kind_names[] = {
	[GRANT_ONCE] = "once",
	[GRANT_UNTIL] = "until",
	[GRANT_ALWAYS] = "always",
};

const char *grant_kind_name(enum grant_kind k)
{
	return k <= GRANT_ALWAYS ? kind_names[k] : "unknown";
}

int grant_kind_parse(const char *s, enum grant_kind *kind, int64_t *seconds, char *err,
		     size_t errlen)
{
	static const struct {
		char unit;
		int64_t mult;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
	int64_t mult = 1;
	char *end;
	long long v;

	*seconds = 0;
	if (!strcmp(s, "once") || !strcmp(s, "always")) {
		*kind = s[0] == 'o' ? GRANT_ONCE : GRANT_ALWAYS;
		return 0;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	for (size_t i = 0; *end && i < ARRAY_SIZE(units); i++)
		if (*end == units[i].unit && !end[1])
			mult = units[i].mult, end++;
	/* at most a year: a longer grant is "always" */
	/* digits from the first character: strtoll takes " 10m" and "+10m" */
	if (errno || s[0] < '0' || s[0] > '9' || *end || v <= 0 || v > 366LL * 86400 / mult) {
		if (err)
			snprintf(err, errlen,
				 "'%s' is not once, always or a duration; write once, always, or "
				 "a duration like 90s, 10m, 2h, 1d",
				 s);
		return -EINVAL;
	}
	*kind = GRANT_UNTIL;
	*seconds = v * mult;
	return 0;
}

int grant_host_parse(const char *host, const uint16_t *ports, size_t n_ports, struct host_rule *out,
		     char *err, size_t errlen)
{
	char list[128];
	size_t len = 0;

	if (strchr(host, '/')) {
		snprintf(err, errlen,
			 "'%s': a grant names a host, never a path or URL; write the host name, "
			 "like api.example.com",
			 host);
		return -EINVAL;
	}
	if (host_rule_parse(host, out, err, errlen))
		return -EINVAL;
	for (size_t i = 0; i < n_ports; i++)
		if (ports[i] == out->port)
			return 0;
	list[0] = '\0';
	for (size_t i = 0; i < n_ports && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", i ? "," : "",
					ports[i]);
	snprintf(err, errlen,
		 "'%s': port %u is not in sandbox.egressPorts [%s]; a grant never opens another "
		 "port: grant one of those, or add the port to sandbox.egressPorts",
		 host, out->port, list);
	return -EINVAL;
}

bool grant_live(const struct grant *g, int64_t now)
{
	switch (g->kind) {
	case GRANT_ONCE:
		return !g->used;
	case GRANT_UNTIL:
		return now < g->until;
	case GRANT_ALWAYS:
		return true;
	}
	return false;
}

static int grants_parse(json_t *root, struct grant_set *gs)
{
	json_t *arr = json_object_get(root, "grants"), *it;
	size_t i;

	memset(gs, 0, sizeof(*gs));
	gs->next_id = (uint32_t)json_integer_value(json_object_get(root, "nextId"));
	if (!json_is_array(arr) || gs->next_id == 0)
		return -EINVAL;
	json_array_foreach(arr, i, it)
	{
		struct grant *g = &gs->v[gs->n];
		const char *host = json_string_value(json_object_get(it, "host"));
		const char *kind = json_string_value(json_object_get(it, "kind"));
		int64_t secs;

		if (gs->n >= GRANT_MAX || !host || !kind ||
		    host_rule_parse(host, &g->rule, NULL, 0))
			return -EINVAL;
		if (!strcmp(kind, "until"))
			g->kind = GRANT_UNTIL;
		else if (grant_kind_parse(kind, &g->kind, &secs, NULL, 0))
			return -EINVAL;
		g->id = (uint32_t)json_integer_value(json_object_get(it, "id"));
		g->until = json_integer_value(json_object_get(it, "until"));
		g->used = json_is_true(json_object_get(it, "used"));
		if (!g->id || g->id >= gs->next_id)
			return -EINVAL;
		gs->n++;
	}
	return 0;
}

static int grants_read_fd(int fd, struct grant_set *gs)
{
	json_error_t jerr;
	json_t *root;
	int rc;

	memset(gs, 0, sizeof(*gs));
	gs->next_id = 1;
	if (lseek(fd, 0, SEEK_END) == 0)
		return 0;
	lseek(fd, 0, SEEK_SET);
	root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return -EINVAL;
	rc = grants_parse(root, gs);
	json_decref(root);
	return rc;
}

/* No lock: a write replaces the file whole (rename), so a reader has one
 * version or the next, never one being written. */
int grants_load(const char *record_dir, struct grant_set *gs)
{
	char path[PATH_MAX];
	cleanup_close int fd = -1;

	memset(gs, 0, sizeof(*gs));
	gs->next_id = 1;
	if (path_fmt(path, sizeof(path), "%s/" GRANTS_FILE, record_dir))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	return grants_read_fd(fd, gs);
}

json_t *grants_json(const struct grant_set *gs, int64_t now)
{
	json_t *arr = json_array();
	char buf[HOST_NAME_MAX_LEN + 16];

	for (size_t i = 0; arr && i < gs->n; i++) {
		const struct grant *g = &gs->v[i];
		json_t *o = json_pack("{s:s,s:s,s:I,s:b}", "host",
				      host_rule_str(&g->rule, buf, sizeof(buf)), "kind",
				      grant_kind_name(g->kind), "id", (json_int_t)g->id, "live",
				      grant_live(g, now));

		if (g->kind == GRANT_UNTIL)
			json_object_set_new(o, "until", json_integer(g->until));
		if (g->kind == GRANT_ONCE)
			json_object_set_new(o, "used", json_boolean(g->used));
		json_array_append_new(arr, o);
	}
	return arr;
}

/* Writes the set into a file of its own and renames it over grants.json: a
 * crash, or a reader (the session's agent rereads at once), never finds the
 * file empty or half written, as it did between a truncate and its write.
 * The caller holds the directory's lock, so the temporary name is no other
 * writer's: one a crashed writer left is removed first. old_fd is the file
 * replaced (-1: none), whose owner the new one keeps. */
static int grants_write_at(int dfd, int old_fd, const struct grant_set *gs)
{
	json_t *root = json_object(), *arr = json_array();
	char buf[HOST_NAME_MAX_LEN + 16];
	cleanup_free char *text = NULL;
	cleanup_close int fd = -1;
	struct stat old, cur;
	size_t len, off = 0;
	ssize_t n;
	int rc = 0;

	for (size_t i = 0; i < gs->n; i++) {
		const struct grant *g = &gs->v[i];

		json_array_append_new(arr,
				      json_pack("{s:I,s:s,s:s,s:I,s:b}", "id", (json_int_t)g->id,
						"host", host_rule_str(&g->rule, buf, sizeof(buf)),
						"kind", grant_kind_name(g->kind), "until",
						(json_int_t)g->until, "used", g->used));
	}
	json_object_set_new(root, "nextId", json_integer(gs->next_id));
	json_object_set_new(root, "grants", arr);
	text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	if (unlinkat(dfd, GRANTS_TMP, 0) && errno != ENOENT)
		return -errno;
	fd = openat(dfd, GRANTS_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (old_fd >= 0 && (fstat(old_fd, &old) || fstat(fd, &cur) ||
			    ((old.st_uid != cur.st_uid || old.st_gid != cur.st_gid) &&
			     fchown(fd, old.st_uid, old.st_gid))))
		rc = -errno;
	while (!rc && off < len) {
		n = write(fd, text + off, len - off);
		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	if (!rc && close(steal_fd(&fd)))
		rc = -errno;
	if (!rc && renameat(dfd, GRANTS_TMP, dfd, GRANTS_FILE))
		rc = -errno;
	if (rc) {
		unlinkat(dfd, GRANTS_TMP, 0);
		return rc;
	}
	/* The rename made durable. The new grants are in force already (the
	 * agent rereads on the rename): a failure here is no failed write. */
	fsync(dfd);
	return 0;
}

typedef int (*grants_edit_fn)(struct grant_set *gs, void *arg);

/* Writers lock the record directory, not grants.json: each write replaces
 * the file, so a lock on it would be on a file the next writer no longer
 * opens, and two edits at once could each lose the other's grant. */
static int grants_edit(const char *record_dir, grants_edit_fn fn, void *arg, struct grant_set *gs)
{
	cleanup_close int dfd = open(record_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cleanup_close int fd = -1;
	int rc;

	if (dfd < 0)
		return -errno;
	if (flock(dfd, LOCK_EX))
		return -errno;
	fd = openat(dfd, GRANTS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	if (fd < 0) {
		memset(gs, 0, sizeof(*gs));
		gs->next_id = 1;
	} else if ((rc = grants_read_fd(fd, gs))) {
		return rc;
	}
	if ((rc = fn(gs, arg)))
		return rc;
	return grants_write_at(dfd, fd, gs);
}

struct put_arg {
	const struct host_rule *rule;
	enum grant_kind kind;
	int64_t until;
};

static bool same_rule(const struct host_rule *a, const struct host_rule *b, bool any_port)
{
	return a->wildcard == b->wildcard && !strcmp(a->name, b->name) &&
	       (any_port || a->port == b->port);
}

static int put_fn(struct grant_set *gs, void *arg)
{
	const struct put_arg *p = arg;
	struct grant *g = NULL;

	for (size_t i = 0; i < gs->n; i++)
		if (same_rule(&gs->v[i].rule, p->rule, false))
			g = &gs->v[i];
	if (!g) {
		if (gs->n >= GRANT_MAX)
			return -ENOSPC;
		g = &gs->v[gs->n++];
	}
	/* A new id even for a replaced grant: entries of the old one must not
	 * count as the new one's (a once grant would be spent already). */
	g->id = gs->next_id++;
	g->rule = *p->rule;
	g->kind = p->kind;
	g->until = p->until;
	g->used = false;
	return 0;
}

int grants_put(const char *record_dir, const struct host_rule *rule, enum grant_kind kind,
	       int64_t until, struct grant_set *gs)
{
	struct put_arg a = {rule, kind, until};

	return grants_edit(record_dir, put_fn, &a, gs);
}

struct revoke_arg {
	const struct host_rule *rule;
	bool any_port;
	uint32_t *ids;
	size_t *n_ids;
};

static int revoke_fn(struct grant_set *gs, void *arg)
{
	struct revoke_arg *r = arg;
	size_t k = 0;

	*r->n_ids = 0;
	for (size_t i = 0; i < gs->n; i++) {
		if (same_rule(&gs->v[i].rule, r->rule, r->any_port)) {
			r->ids[(*r->n_ids)++] = gs->v[i].id;
			continue;
		}
		gs->v[k++] = gs->v[i];
	}
	gs->n = k;
	return *r->n_ids ? 0 : -ENOENT;
}

int grants_revoke(const char *record_dir, const struct host_rule *rule, bool any_port,
		  struct grant_set *gs, uint32_t *ids, size_t *n_ids)
{
	struct revoke_arg a = {rule, any_port, ids, n_ids};

	return grants_edit(record_dir, revoke_fn, &a, gs);
}

static int used_fn(struct grant_set *gs, void *arg)
{
	uint32_t id = *(uint32_t *)arg;

	for (size_t i = 0; i < gs->n; i++) {
		if (gs->v[i].id == id && gs->v[i].kind == GRANT_ONCE) {
			gs->v[i].used = true;
			return 0;
		}
	}
	return -ENOENT;
}

int grants_mark_used(const char *record_dir, uint32_t id, struct grant_set *gs)
{
	return grants_edit(record_dir, used_fn, &id, gs);
}

bool suggest_pass(struct suggest_limiter *l, const char *host, uint64_t now_ns)
{
	const uint64_t window = SUGGEST_INTERVAL_S * NS_PER_S;
	size_t live = 0, free_slot = ARRAY_SIZE(l->recent);

	for (size_t i = 0; i < ARRAY_SIZE(l->recent); i++) {
		bool recent = l->recent[i].at_ns && now_ns - l->recent[i].at_ns < window;

		if (recent && !strcmp(l->recent[i].host, host))
			return false;
		if (recent)
			live++;
		else if (free_slot == ARRAY_SIZE(l->recent))
			free_slot = i;
	}
	if (live >= SUGGEST_HOSTS_PER_INTERVAL || free_slot == ARRAY_SIZE(l->recent))
		return false;
	snprintf(l->recent[free_slot].host, sizeof(l->recent[free_slot].host), "%s", host);
	l->recent[free_slot].at_ns = now_ns;
	return true;
}
