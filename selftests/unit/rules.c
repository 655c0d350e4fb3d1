/* Guarantee: a rule's pattern maps to Landlock by its fixed directory (the
 * part before the first wildcard segment, the pattern itself without one),
 * "~/" is the session's HOME, and each rule is said to be enforced where it
 * is: allow by Landlock, errand's own closures by the launcher, deny and
 * lazyAllow by BPF LSM or named NOT ENFORCED where that does not run. */
#include <stdlib.h>
#include <string.h>

#include "agent/rules.h"
#include "selftests/unit/test.h"

static void fixed(const char *pattern, const char *want)
{
	char out[256];

	rules_fixed_dir(pattern, out, sizeof(out));
	CHECK_STR(out, want, "the fixed directory of %s", pattern);
}

static struct config_rule rule(const char *text, enum config_rule_kind kind)
{
	struct config_rule r;
	char err[256];

	if (config_rule_parse("test", text, kind, &r, err, sizeof(err)))
		test_report(false, err, "%s parses", text);
	return r;
}

int main(void)
{
	struct config_rule r;
	char out[512];

	fixed("/srv/data/**", "/srv/data");
	fixed("/srv/data/*.csv", "/srv/data");
	fixed("/home/*/.ssh/**", "/home");
	fixed("/srv/file", "/srv/file");
	fixed("/*", "/");
	fixed("/srv/a*b/c", "/srv");

	r = rule("Read(~/.ssh/**)", RULE_DENY);
	CHECK_INT(rules_expand(&r, "/var/lib/errand/s/work", out, sizeof(out)), 0, "~/ expands");
	CHECK_STR(out, "/var/lib/errand/s/work/.ssh/**", "~/ is HOME");
	CHECK_TRUE(rules_needs_lsm(&r), "a deny rule needs BPF LSM");
	rules_describe(&r, false, out, sizeof(out));
	CHECK_CONTAINS(out, "NOT ENFORCED", "where BPF LSM does not run, it is named not enforced");
	CHECK_CONTAINS(out, "lsm= boot parameter", "... with the boot parameter");
	rules_describe(&r, true, out, sizeof(out));
	CHECK_CONTAINS(out, "BPF LSM on the session's cgroup", "where it runs, it is BPF LSM's");
	CHECK_CONTAINS(out, "(file_open;", "... naming the hook that refuses a read");
	free(r.text);
	free(r.path);

	r = rule("Exec(/usr/bin/curl)", RULE_DENY);
	rules_describe(&r, true, out, sizeof(out));
	CHECK_CONTAINS(out, "file_open of the exec", "an Exec deny names the exec's open");
	free(r.text);
	free(r.path);

	r = rule("Delete(/srv/keep/**)", RULE_DENY);
	rules_describe(&r, true, out, sizeof(out));
	CHECK_CONTAINS(out, "path_unlink, path_rmdir", "a Delete deny names the removal hooks");
	free(r.text);
	free(r.path);

	r = rule("Read(/srv/data/*.csv)", RULE_ALLOW);
	CHECK_TRUE(!rules_needs_lsm(&r), "an allow rule is Landlock's");
	rules_describe(&r, false, out, sizeof(out));
	CHECK_CONTAINS(out,
		       "Landlock grants /srv/data (the pattern's fixed directory, wider than "
		       "the pattern)",
		       "a wildcard allow names the directory Landlock grants");
	free(r.text);
	free(r.path);

	r = rule("Connect(unix:/run/docker.sock)", RULE_DENY);
	r.builtin = true;
	CHECK_TRUE(!rules_needs_lsm(&r), "errand's own closures need no BPF LSM");
	rules_describe(&r, false, out, sizeof(out));
	CHECK_CONTAINS(out, "closed by the launcher", "... they are the launcher's");
	free(r.text);
	free(r.path);

	r = rule("Connect(unix:/run/app.sock)", RULE_DENY);
	CHECK_TRUE(rules_needs_lsm(&r), "an operator's Connect deny is BPF LSM's");
	free(r.text);
	free(r.path);
	return test_exit();
}
