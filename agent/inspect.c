/* Sessions as errandctl shows them, and the changes it makes to them. See
 * inspect.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/enforce.h"
#include "agent/events.h"
#include "agent/inspect.h"
#include "broker/receipts.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/util.h"

static int record_path(const struct errand_config *cfg, const char *id, const char *name, char *out,
		       size_t len)
{
	return name ? path_fmt(out, len, "%s/sessions/%s/%s", cfg->state_dir, id, name)
		    : path_fmt(out, len, "%s/sessions/%s", cfg->state_dir, id);
}

static json_t *record_json(const struct errand_config *cfg, const char *id, const char *name)
{
	char path[PATH_MAX];

	if (record_path(cfg, id, name, path, sizeof(path)))
		return NULL;
	return json_load_file(path, 0, NULL);
}

bool inspect_alive(const struct state_session *row)
{
	uint64_t start;

	return row->status == STATE_RUNNING && row->launcher_pid > 0 &&
	       state_pid_start(row->launcher_pid, &start) == 0 && start == row->launcher_start;
}

bool inspect_owner_alive(const struct state_session *row, pid_t *pid)
{
	json_t *p = row->policy ? json_loads(row->policy, 0, NULL) : NULL;
	uint64_t want = (uint64_t)json_integer_value(json_object_get(p, "ownerStart")), start;
	bool alive;

	*pid = (pid_t)json_integer_value(json_object_get(p, "ownerPid"));
	alive = *pid > 0 && state_pid_start(*pid, &start) == 0 && start == want;
	json_decref(p);
	return alive;
}

static int count_cb(const struct state_denied *d, void *arg)
{
	(void)d;
	(*(json_int_t *)arg)++;
	return 0;
}

/* The names a session may reach: its policy's rules and its live grants. */
static json_t *allowed_names(const struct errand_config *cfg, const char *id, json_t *policy)
{
	json_t *out = json_array(), *it;
	struct grant_set gs;
	char path[PATH_MAX], buf[HOST_NAME_MAX_LEN + 16];
	int64_t now = time(NULL);
	size_t i;

	json_array_foreach(json_object_get(policy, "allow"), i, it) json_array_append(out, it);
	if (record_path(cfg, id, NULL, path, sizeof(path)) == 0 && grants_load(path, &gs) == 0)
		for (i = 0; i < gs.n; i++)
			if (grant_live(&gs.v[i], now))
				json_array_append_new(out,
						      json_string(host_rule_str(&gs.v[i].rule, buf,
										sizeof(buf))));
	return out;
}

static json_t *owner_of(const struct state_session *row)
{
	json_t *p = row->policy ? json_loads(row->policy, 0, NULL) : NULL;
	json_t *o = json_incref(json_object_get(p, "owner"));

	json_decref(p);
	return o ? o : json_string("unknown");
}

struct list_ctx {
	struct state *st;
	const struct errand_config *cfg;
	json_t *out;
};

static int session_cb(const struct state_session *row, void *arg)
{
	struct list_ctx *c = arg;
	json_t *policy, *cmd;
	json_int_t refusals = 0;

	if (!inspect_alive(row))
		return 0;
	policy = record_json(c->cfg, row->id, "policy.json");
	cmd = json_loads(row->command, 0, NULL);
	state_denied_list(c->st, row->id, count_cb, &refusals);
	json_array_append_new(c->out, json_pack("{s:s,s:o,s:I,s:s,s:o,s:I,s:o,s:i}", "id", row->id,
						"command", cmd ? cmd : json_array(), "uptime",
						(json_int_t)(time(NULL) - row->created), "mode",
						row->mode ? row->mode : "unknown", "allowed",
						allowed_names(c->cfg, row->id, policy), "refusals",
						refusals, "owner", owner_of(row), "pid",
						(int)row->launcher_pid));
	json_decref(policy);
	return 0;
}

json_t *inspect_sessions(struct state *st, const struct errand_config *cfg)
{
	struct list_ctx c = {st, cfg, json_array()};

	if (c.out)
		state_session_list(st, session_cb, &c);
	return c.out;
}

static void entry_cb(const struct addr *a, uint16_t port, uint64_t expires_ns, uint32_t flags,
		     uint32_t grant, void *arg)
{
	json_t *o;
	char buf[ADDR_STRLEN];
	uint64_t now = boottime_ns();

	o = json_pack("{s:s,s:i,s:b,s:b,s:b}", "addr", addr_str(a, buf), "port", port, "pinned",
		      (flags & ENTRY_F_PINNED) != 0, "once", (flags & ENTRY_F_ONCE) != 0, "broker",
		      (flags & ENTRY_F_RELAY) != 0);
	/* seconds left; null for an entry without end, negative once expired */
	json_object_set_new(
		o, "expiresIn",
		expires_ns ? json_integer(expires_ns > now
						  ? (json_int_t)((expires_ns - now) / 1000000000ull)
						  : -1)
			   : json_null());
	if (grant)
		json_object_set_new(o, "grant", json_integer(grant));
	json_array_append_new(arg, o);
}

static void prog_cb(const char *hook, uint32_t prog_id, bool attached, void *arg)
{
	json_array_append_new(arg, json_pack("{s:s,s:I,s:b}", "hook", hook, "progId",
					     (json_int_t)prog_id, "attached", attached));
}

static const char *const counter_names[CNT_MAX] = {
	[CNT_ALLOWED] = "allowed",
	[CNT_REFUSED] = "refused",
	[CNT_DNS_REDIRECT] = "dnsRedirected",
	[CNT_TC_PASS] = "tcPassed",
	[CNT_TC_DROP] = "tcDropped",
	[CNT_EVENTS_LOST] = "eventsLost",
	[CNT_EVENTS_SUPPRESSED] = "eventsSuppressed",
	[CNT_FLOW_ENDED] = "flowEnded",
};

json_t *inspect_show(struct state *st, const struct errand_config *cfg, const char *id, char *err,
		     size_t errlen)
{
	struct state_session *row = state_session_get(st, id);
	json_t *out, *entries = json_array(), *progs = json_array(), *counters = json_object();
	json_t *policy, *cmd;
	uint64_t cnt[CNT_MAX];
	struct grant_set gs;
	char path[PATH_MAX];

	if (!row || !inspect_alive(row)) {
		snprintf(err, errlen, "no running session %s; errandctl sessions lists them", id);
		state_session_free(row);
		json_decref(entries);
		json_decref(progs);
		json_decref(counters);
		return NULL;
	}
	policy = record_json(cfg, id, "policy.json");
	cmd = json_loads(row->command, 0, NULL);
	if (row->bpf) {
		enforce_walk(row->bpf, entry_cb, entries);
		/* the veth is in the agent's namespace, where errandctl runs */
		if (row->cgroup)
			enforce_programs(row->bpf, row->cgroup,
					 row->host_if ? (int)if_nametoindex(row->host_if) : -1,
					 prog_cb, progs);
		if (enforce_counters(row->bpf, cnt) == 0)
			for (size_t i = 0; i < CNT_MAX; i++)
				if (counter_names[i])
					json_object_set_new(counters, counter_names[i],
							    json_integer((json_int_t)cnt[i]));
	}
	if (record_path(cfg, id, NULL, path, sizeof(path)) || grants_load(path, &gs))
		gs.n = 0;
	out = json_pack("{s:s,s:o,s:I,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", id, "command",
			cmd ? cmd : json_array(), "uptime", (json_int_t)(time(NULL) - row->created),
			"mode", row->mode ? row->mode : "unknown", "policy",
			policy ? json_incref(policy) : json_object(), "grants",
			grants_json(&gs, time(NULL)), "allowMap", entries, "programs", progs,
			"counters", counters, "gaps",
			json_incref(json_object_get(policy, "gaps")) ?: json_array(), "owner",
			owner_of(row));
	json_decref(policy);
	state_session_free(row);
	return out;
}

/* What a session named need not be UTF-8, which jansson refuses: such a
 * string is carried escaped, never dropped with its whole record. */
static const char *json_safe(const char *s, char *buf, size_t len)
{
	json_t *t = s ? json_string(s) : NULL;

	if (!s || t) {
		json_decref(t);
		return s;
	}
	return esc_text(s, buf, len);
}

static int denied_cb(const struct state_denied *d, void *arg)
{
	json_t *o = json_pack("{s:s,s:I}", "session", d->session, "at", (json_int_t)d->at);
	char name[ESC_LEN(256)];

	if (d->name)
		json_object_set_new(o, "name", json_string(json_safe(d->name, name, sizeof(name))));
	if (d->addr)
		json_object_set_new(o, "addr", json_string(d->addr));
	if (d->port)
		json_object_set_new(o, "port", json_integer(d->port));
	if (d->proto)
		json_object_set_new(o, "proto", json_string(d->proto));
	if (d->reason)
		json_object_set_new(o, "reason", json_string(d->reason));
	json_array_append_new(arg, o);
	return 0;
}

json_t *inspect_denied(struct state *st, const char *id)
{
	json_t *out = json_array();

	if (out)
		state_denied_list(st, id, denied_cb, out);
	return out;
}

static int receipt_cb(void *arg, const struct receipt *r)
{
	static char method[ESC_LEN(64)], path[ESC_LEN(4096)];
	/* a row of an older broker's has no stamp: its end less its duration */
	int64_t started =
		r->started_at_us ? r->started_at_us / 1000 : r->ended_at_ms - r->duration_ms;

	json_array_append_new(
		arg, json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:i,s:I,s:I,s:I,s:s,s:I}",
			       "startedAt", (json_int_t)started, "endedAt",
			       (json_int_t)r->ended_at_ms, "session", r->session, "provider",
			       r->provider, "credentialVar", r->credential_var, "host", r->host,
			       "method", json_safe(r->method, method, sizeof(method)), "path",
			       json_safe(r->path, path, sizeof(path)), "queryLength",
			       (json_int_t)r->query_len, "status", r->status, "durationMs",
			       (json_int_t)r->duration_ms, "bytesUp", (json_int_t)r->bytes_up,
			       "bytesDown", (json_int_t)r->bytes_down, "outcome",
			       receipt_outcome_name(r->outcome), "unrecorded",
			       (json_int_t)r->unrecorded));
	return 0;
}

json_t *inspect_receipts(const struct errand_config *cfg, const char *id)
{
	json_t *out = json_array();
	char path[PATH_MAX];
	struct receipts *r;

	if (!out || path_fmt(path, sizeof(path), "%s/" RECEIPTS_DB_NAME, cfg->state_dir))
		return out;
	r = receipts_open(path, false);
	if (r)
		receipts_list(r, id, receipt_cb, out);
	receipts_close(r);
	return out;
}

/* A running session's egressPorts, from its record. */
static int session_ports(struct state *st, const struct errand_config *cfg, const char *id,
			 uint16_t *ports, size_t *n, char *err, size_t errlen)
{
	struct state_session *row = state_session_get(st, id);
	bool alive = row && inspect_alive(row);
	json_t *policy, *it;
	size_t i;

	state_session_free(row);
	if (!alive) {
		snprintf(err, errlen, "no running session %s; errandctl sessions lists them", id);
		return -ENOENT;
	}
	policy = record_json(cfg, id, "policy.json");
	*n = 0;
	json_array_foreach(json_object_get(policy, "egressPorts"), i, it) if (*n < CONFIG_MAX_PORTS)
		ports[(*n)++] = (uint16_t)json_integer_value(it);
	if (!policy) {
		snprintf(err, errlen, "session %s has no readable policy.json in %s/sessions/%s",
			 id, cfg->state_dir, id);
		return -EIO;
	}
	if (!strcmp(json_string_value(json_object_get(policy, "mode")) ?: "", "none")) {
		snprintf(err, errlen,
			 "session %s has no network (--egress none); nothing can be granted", id);
		json_decref(policy);
		return -EINVAL;
	}
	json_decref(policy);
	return 0;
}

int inspect_grant(struct state *st, const struct errand_config *cfg, const char *id,
		  const char *host, enum grant_kind kind, int64_t seconds, char *err, size_t errlen)
{
	uint16_t ports[CONFIG_MAX_PORTS];
	struct host_rule rule;
	struct grant_set gs;
	char path[PATH_MAX];
	size_t n;
	int rc;

	if ((rc = session_ports(st, cfg, id, ports, &n, err, errlen)) ||
	    (rc = grant_host_parse(host, ports, n, &rule, err, errlen)))
		return rc;
	if (record_path(cfg, id, NULL, path, sizeof(path)))
		return -ENAMETOOLONG;
	rc = grants_put(path, &rule, kind, kind == GRANT_UNTIL ? time(NULL) + seconds : 0, &gs);
	if (rc)
		snprintf(err, errlen, "cannot write the grant into %s/" GRANTS_FILE ": %s%s", path,
			 strerror(-rc),
			 rc == -ENOSPC ? "; revoke some of the session's grants first" : "");
	return rc;
}

/* The revoked grants' open connections end before revoke returns, whether or
 * not the session's agent has reread grants.json yet: the backstop passes no
 * flow of a grant missing from the session's grants_live map. A session that
 * no process serves (its agent is down) has its grants' allow entries taken
 * here too, which its owner's reread does otherwise: no new connection is
 * admitted by them until an agent adopts it. */
static void revoke_flows(struct state *st, const char *id, const uint32_t *ids, size_t n)
{
	struct state_session *row = state_session_get(st, id);
	char err[256];
	pid_t owner;
	int rc;

	if (row && row->bpf && (rc = enforce_grants_end(row->bpf, ids, n)) && rc != -ENOENT)
		log_warnx("session %s: cannot end the revoked grants' connections: %s", id,
			  strerror(-rc));
	if (row && row->bpf && !inspect_owner_alive(row, &owner)) {
		struct enforce *e = enforce_open(row->bpf, err, sizeof(err));

		for (size_t i = 0; e && i < n; i++)
			enforce_drop_grant(e, ids[i]);
		enforce_free(e);
	}
	state_session_free(row);
}

int inspect_revoke(struct state *st, const struct errand_config *cfg, const char *id,
		   const char *host, char *err, size_t errlen)
{
	uint16_t ports[CONFIG_MAX_PORTS];
	uint32_t ids[GRANT_MAX];
	struct host_rule rule;
	struct grant_set gs;
	char path[PATH_MAX];
	size_t n, n_ids = 0;
	int rc;

	if ((rc = session_ports(st, cfg, id, ports, &n, err, errlen)))
		return rc;
	if (host_rule_parse(host, &rule, err, errlen))
		return -EINVAL;
	if (record_path(cfg, id, NULL, path, sizeof(path)))
		return -ENAMETOOLONG;
	/* "revoke ID host" names the host: every port granted for it goes */
	rc = grants_revoke(path, &rule, !strchr(host, ':'), &gs, ids, &n_ids);
	if (!rc)
		revoke_flows(st, id, ids, n_ids);
	if (rc == -ENOENT)
		snprintf(err, errlen,
			 "session %s has no grant for %s; errandctl show %s lists them", id, host,
			 id);
	else if (rc)
		snprintf(err, errlen, "cannot write %s/" GRANTS_FILE ": %s", path, strerror(-rc));
	return rc;
}

int inspect_stop(struct state *st, const char *id, char *err, size_t errlen)
{
	struct state_session *row = state_session_get(st, id);
	char path[PATH_MAX];
	int fd, rc = 0;

	if (!row || !inspect_alive(row) || !row->cgroup) {
		snprintf(err, errlen, "no running session %s; errandctl sessions lists them", id);
		state_session_free(row);
		return -ENOENT;
	}
	fd = path_fmt(path, sizeof(path), "%s/cgroup.kill", row->cgroup)
		     ? -1
		     : open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		rc = -errno;
		snprintf(err, errlen, "cannot stop session %s through %s: %s", id, path,
			 strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	state_session_free(row);
	return rc;
}

static void print_strings(const json_t *arr, const char *sep, FILE *f)
{
	const json_t *it;
	size_t i;

	json_array_foreach(arr, i, it)
	{
		fputs(i ? sep : "", f);
		esc_fputs(json_string_value(it), f);
	}
}

static const char *uptime_str(const json_t *o, char *buf, size_t len)
{
	json_int_t s = json_integer_value(json_object_get(o, "uptime"));

	if (s >= 3600)
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT "h%02" JSON_INTEGER_FORMAT "m", s / 3600,
			 s / 60 % 60);
	else
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT "m%02" JSON_INTEGER_FORMAT "s", s / 60,
			 s % 60);
	return buf;
}

/* A member's string for a table: escaped, since what the agent or state.db
 * hands on may hold what a session named. */
static const char *str(const json_t *o, const char *key, char *buf, size_t len)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? esc_text(v, buf, len) : NULL;
}

#define S(o, key) str(o, key, (char[ESC_LEN(256)]){0}, ESC_LEN(256))

void inspect_print_sessions(const json_t *sessions, FILE *f)
{
	const json_t *s;
	size_t i;

	fprintf(f, "%-8s  %-8s  %-10s  %8s  %-30s  %s\n", "ID", "UPTIME", "MODE", "REFUSALS",
		"ALLOWED", "COMMAND");
	json_array_foreach(sessions, i, s)
	{
		char up[32];

		fprintf(f, "%-8s  %-8s  %-10s  %8" JSON_INTEGER_FORMAT "  ", S(s, "id"),
			uptime_str(s, up, sizeof(up)), S(s, "mode"),
			json_integer_value(json_object_get(s, "refusals")));
		if (json_array_size(json_object_get(s, "allowed")))
			print_strings(json_object_get(s, "allowed"), ",", f);
		else
			fputc('-', f);
		fputs("  ", f);
		print_strings(json_object_get(s, "command"), " ", f);
		fputc('\n', f);
	}
}

void inspect_print_show(const json_t *show, FILE *f)
{
	const json_t *policy = json_object_get(show, "policy"), *it, *v;
	const char *key;
	char up[32];
	size_t i;

	fprintf(f, "session   %s\n", S(show, "id"));
	fprintf(f, "command   ");
	print_strings(json_object_get(show, "command"), " ", f);
	fprintf(f, "\nmode      %s\nuptime    %s\nowner     %s\n", S(show, "mode"),
		uptime_str(show, up, sizeof(up)), S(show, "owner"));
	fprintf(f, "allow     ");
	print_strings(json_object_get(policy, "allow"), ", ", f);
	fprintf(f, "\naddress   %s via %s\n", S(policy, "address") ?: "-",
		S(policy, "gateway") ?: "-");
	if (S(policy, "address6"))
		fprintf(f, "address6  %s via %s%s\n", S(policy, "address6"),
			S(policy, "gateway6") ?: "-",
			json_is_true(json_object_get(policy, "route6"))
				? ""
				: " (DNS only: no IPv6 route out)");
	fprintf(f, "grants\n");
	json_array_foreach(json_object_get(show, "grants"), i, it)
		fprintf(f, "  %-40s %-6s %s\n", S(it, "host"), S(it, "kind"),
			json_is_true(json_object_get(it, "live")) ? "live" : "spent");
	fprintf(f, "allow map\n");
	json_array_foreach(json_object_get(show, "allowMap"), i, it)
	{
		const json_t *exp = json_object_get(it, "expiresIn");

		fprintf(f, "  %-40s %5" JSON_INTEGER_FORMAT "  ", S(it, "addr"),
			json_integer_value(json_object_get(it, "port")));
		if (json_is_null(exp))
			fprintf(f, "no expiry");
		else if (json_integer_value(exp) < 0)
			fprintf(f, "expired");
		else
			fprintf(f, "expires in %" JSON_INTEGER_FORMAT "s", json_integer_value(exp));
		fprintf(f, "%s%s\n", json_is_true(json_object_get(it, "pinned")) ? ", pinned" : "",
			json_is_true(json_object_get(it, "once")) ? ", once" : "");
	}
	fprintf(f, "programs\n");
	json_array_foreach(json_object_get(show, "programs"), i, it) fprintf(
		f, "  %-14s prog %-6" JSON_INTEGER_FORMAT " %s\n", S(it, "hook"),
		json_integer_value(json_object_get(it, "progId")),
		json_is_true(json_object_get(it, "attached")) ? "attached" : "NOT ATTACHED");
	fprintf(f, "counters\n");
	json_object_foreach((json_t *)json_object_get(show, "counters"), key, v)
		fprintf(f, "  %-16s %" JSON_INTEGER_FORMAT "\n", key, json_integer_value(v));
	fprintf(f, "gaps\n");
	json_array_foreach(json_object_get(show, "gaps"), i, it)
	{
		fputs("  ", f);
		esc_fputs(json_string_value(it), f);
		fputc('\n', f);
	}
	if (!json_array_size(json_object_get(show, "gaps")))
		fprintf(f, "  none\n");
}

void inspect_print_denied(const json_t *denied, FILE *f)
{
	const json_t *d;
	size_t i;

	fprintf(f, "%-20s  %-8s  %-5s  %-40s  %s\n", "AT", "SESSION", "PROTO", "TARGET", "REASON");
	json_array_foreach(denied, i, d)
	{
		time_t at = (time_t)json_integer_value(json_object_get(d, "at"));
		const char *name = S(d, "name");
		char when[32], target[ESC_LEN(256) + 32];
		struct tm tm;

		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&at, &tm));
		if (name)
			snprintf(target, sizeof(target), "%s", name);
		else
			snprintf(target, sizeof(target), "%s:%" JSON_INTEGER_FORMAT,
				 S(d, "addr") ?: "?",
				 json_integer_value(json_object_get(d, "port")));
		fprintf(f, "%-20s  %-8s  %-5s  %-40s  %s\n", when, S(d, "session"),
			S(d, "proto") ?: "-", target, S(d, "reason") ?: "-");
	}
}

void inspect_print_receipts(const json_t *receipts, FILE *f)
{
	const json_t *r;
	size_t i;

	fprintf(f, "%-24s  %-8s  %-10s  %-7s  %-40s  %6s  %8s  %s\n", "STARTED", "SESSION",
		"PROVIDER", "METHOD", "PATH", "STATUS", "MS", "OUTCOME");
	json_array_foreach(receipts, i, r)
	{
		json_int_t ms = json_integer_value(json_object_get(r, "startedAt"));
		time_t at = (time_t)(ms / 1000);
		char when[32], path[ESC_LEN(4096)];
		struct tm tm;

		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime_r(&at, &tm));
		fprintf(f,
			"%s.%03dZ  %-8s  %-10s  %-7s  %-40s  %6" JSON_INTEGER_FORMAT
			"  %8" JSON_INTEGER_FORMAT "  %s\n",
			when, (int)(ms % 1000), S(r, "session"), S(r, "provider"), S(r, "method"),
			str(r, "path", path, sizeof(path)),
			json_integer_value(json_object_get(r, "status")),
			json_integer_value(json_object_get(r, "durationMs")), S(r, "outcome"));
	}
}
