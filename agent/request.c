/* Run requests applied to the configuration. See request.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "agent/request.h"
#include "lib/escape.h"

static bool env_name_ok(const char *s, size_t len)
{
	if (!len || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* The most --egress, and of --pin, one run may carry: the agent's memory
 * and its matching of pins to rules are bounded by it. */
#define REQUEST_LIST_MAX 1024

int request_env_check(const char *kv, char *err, size_t errlen)
{
	const char *eq = strchr(kv, '=');
	char name[ESC_LEN(64)], raw[65];
	const char *why;

	/* the name alone, escaped: a value is never shown */
	snprintf(raw, sizeof(raw), "%.*s", eq ? (int)(eq - kv) : 64, kv);
	esc_text(raw, name, sizeof(name));
	if (!eq || !env_name_ok(kv, (size_t)(eq - kv))) {
		snprintf(err, errlen,
			 "--env %s: write NAME=VALUE with a NAME of letters, digits and _", name);
		return -EINVAL;
	}
	if ((why = config_env_reserved(raw))) {
		snprintf(err, errlen, "--env %s: %s", name, why);
		return -EINVAL;
	}
	return 0;
}

static int apply_egress(struct errand_config *cfg, const json_t *list, char *err, size_t errlen)
{
	bool none = false, open = false, rules = false;
	const json_t *it;
	size_t i;

	if (json_array_size(list) > REQUEST_LIST_MAX) {
		snprintf(err, errlen,
			 "%zu --egress in one run, more than errand takes (%d); put the hosts in "
			 "sandbox.egress.allow, or use wildcards",
			 json_array_size(list), REQUEST_LIST_MAX);
		return -E2BIG;
	}
	json_array_foreach(list, i, it)
	{
		const char *v = json_string_value(it);
		char why[256], shown[ESC_LEN(256)];
		struct host_rule r;

		if (!v) {
			snprintf(err, errlen, "--egress takes strings");
			return -EINVAL;
		}
		/* "NONE" is none, not a host of that name */
		if (!strcasecmp(v, "none")) {
			none = true;
		} else if (!strcasecmp(v, "open")) {
			open = true;
		} else {
			if (host_rule_parse(v, &r, why, sizeof(why))) {
				snprintf(err, errlen, "--egress %s: %s",
					 esc_text(v, shown, sizeof(shown)), why);
				return -EINVAL;
			}
			if (config_add_rule(cfg, &r)) {
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			rules = true;
		}
	}
	if (none && (open || rules)) {
		snprintf(err, errlen,
			 "--egress none removes the network; it cannot be combined with other "
			 "--egress");
		return -EINVAL;
	}
	if ((open || rules) && cfg->network == NETWORK_NONE) {
		snprintf(err, errlen,
			 "sandbox.network is \"none\" in the configuration: the session has no "
			 "network for --egress; drop --egress, or name another configuration");
		return -EINVAL;
	}
	if (none)
		cfg->network = NETWORK_NONE;
	if (open)
		cfg->egress_mode = EGRESS_OPEN;
	else if (rules)
		cfg->egress_mode = EGRESS_RESTRICTED;
	return 0;
}

/* --secret, after the file's secrets; then the merged list is checked and
 * its hosts allowed. A variable --env also sets is refused: one of the two
 * would be lost. */
static int apply_secrets(struct errand_config *cfg, const json_t *req, char *err, size_t errlen)
{
	const json_t *it, *e;
	size_t i, j;
	int rc;

	json_array_foreach(json_object_get(req, "secrets"), i, it)
	{
		struct config_secret sec;

		if (!json_is_string(it)) {
			snprintf(err, errlen, "--secret takes ENV[=SECRET]@HOST[,HOST...] strings");
			return -EINVAL;
		}
		if ((rc = config_secret_parse(json_string_value(it), &sec, err, errlen)))
			return rc;
		if (config_add_secret(cfg, &sec)) {
			config_secret_free(&sec);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	for (i = 0; i < cfg->n_secrets; i++) {
		size_t n = strlen(cfg->secrets[i].env);

		json_array_foreach(json_object_get(req, "env"), j, e)
		{
			const char *kv = json_string_value(e);

			if (kv && !strncmp(kv, cfg->secrets[i].env, n) && kv[n] == '=') {
				snprintf(err, errlen,
					 "--env %s and secret %s both set the variable; drop one",
					 cfg->secrets[i].env, cfg->secrets[i].env);
				return -EINVAL;
			}
		}
	}
	return config_secrets_apply(cfg, err, errlen);
}

static int is_dir(const char *path, const char *what, char *err, size_t errlen)
{
	struct stat st;

	if (path[0] != '/' || stat(path, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s %s is not an absolute path to a directory; name one",
			 what, path);
		return -EINVAL;
	}
	return 0;
}

int request_apply(struct errand_config *cfg, const json_t *req, char *err, size_t errlen)
{
	const json_t *argv = json_object_get(req, "argv"), *list, *it;
	const char *project = json_string_value(json_object_get(req, "project"));
	const char *image = json_string_value(json_object_get(req, "image"));
	size_t i;
	int rc;

	if (!json_is_array(argv) || !json_array_size(argv)) {
		snprintf(err, errlen,
			 "no command given; write errandctl run [OPTIONS] -- CMD [ARG...]");
		return -EINVAL;
	}
	json_array_foreach(argv, i, it)
	{
		if (!json_is_string(it)) {
			snprintf(err, errlen, "the command's arguments must be strings");
			return -EINVAL;
		}
	}
	if ((list = json_object_get(req, "egress")) && (rc = apply_egress(cfg, list, err, errlen)))
		return rc;
	if ((rc = apply_secrets(cfg, req, err, errlen)))
		return rc;
	if (json_array_size(json_object_get(req, "pins")) > REQUEST_LIST_MAX) {
		snprintf(err, errlen,
			 "%zu --pin in one run, more than errand takes (%d); put them in "
			 "sandbox.egress.pins",
			 json_array_size(json_object_get(req, "pins")), REQUEST_LIST_MAX);
		return -E2BIG;
	}
	json_array_foreach(json_object_get(req, "pins"), i, it)
	{
		struct pin p;
		char why[256] = "not a string", shown[ESC_LEN(256)] = "";

		if (!json_is_string(it) || pin_parse(json_string_value(it), &p, why, sizeof(why))) {
			if (json_is_string(it))
				esc_text(json_string_value(it), shown, sizeof(shown));
			snprintf(err, errlen, "--pin %s: %s", shown, why);
			return -EINVAL;
		}
		if (config_add_pin(cfg, &p)) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	json_array_foreach(json_object_get(req, "env"), i, it)
	{
		if (!json_is_string(it)) {
			snprintf(err, errlen, "--env takes NAME=VALUE strings");
			return -EINVAL;
		}
		if ((rc = request_env_check(json_string_value(it), err, errlen)))
			return rc;
	}
	if (!project) {
		snprintf(err, errlen, "no project directory; pass --project DIR");
		return -EINVAL;
	}
	if ((rc = is_dir(project, "project directory", err, errlen)))
		return rc;
	free(cfg->project);
	cfg->project = strdup(project);
	if (!cfg->project) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Set by the agent from the peer's credentials, never by the client
	 * (control.c refuses the member from one). The session writes its
	 * project as the owner, so only the owner or root may name it; the
	 * launcher checks again on what it mounts, past any renaming. */
	if ((it = json_object_get(req, "requester")) && json_is_integer(it)) {
		struct stat st;

		cfg->has_requester = true;
		cfg->requester = (uid_t)json_integer_value(it);
		if (cfg->requester != 0 && stat(project, &st) == 0 && st.st_uid != cfg->requester) {
			snprintf(err, errlen,
				 "the project %s belongs to uid %u, not to you (uid %u); a session "
				 "writes its project as the owner, so pass a project of your own",
				 project, (unsigned int)st.st_uid, (unsigned int)cfg->requester);
			return -EPERM;
		}
	}
	if (image) {
		if ((rc = is_dir(image, "--image", err, errlen)))
			return rc;
		free(cfg->image);
		cfg->image = strdup(image);
		if (!cfg->image) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}
