/* sandbox.rules on this host: how each rule is enforced (the Landlock floor
 * for allow rules, the launcher's masks for errand's own closures, BPF LSM
 * programs on the session's cgroup for deny, lazyAllow and Connect rules),
 * and the per-session BPF object (bpf/rules.bpf.c) that enforces the last. */
#ifndef ERRAND_RULES_H
#define ERRAND_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/config.h"
#include "bpf/rules.h"

/* The rule's PATH with "~/" made the session's HOME (home). 0 or
 * -ENAMETOOLONG. */
int rules_expand(const struct config_rule *r, const char *home, char *out, size_t len);
/* The directory before the pattern's first wildcard segment (the pattern
 * itself when it has none): what Landlock can grant and the launcher bind. */
void rules_fixed_dir(const char *pattern, char *out, size_t len);
/* Whether the rule needs BPF LSM (deny and lazyAllow of the file, and
 * Connect denies; errand's own closures are the launcher's masks). */
bool rules_needs_lsm(const struct config_rule *r);
/* Whether any rule of cfg does. */
bool rules_any_lsm(const struct errand_config *cfg);
/* One line on how the rule is enforced, given whether BPF LSM programs load
 * on this host. */
void rules_describe(const struct config_rule *r, bool lsm_ok, char *buf, size_t len);
/* Whether this kernel runs BPF LSM programs on a cgroup: bpf in the active
 * LSM list and a BPF_LSM_CGROUP program loads. 0, or -errno with why. */
int rules_lsm_probe(char *why, size_t len);

struct rules;
/* Compiles cfg's rules (home for "~/"), loads bpf/rules.bpf.c, fills its
 * maps and attaches its programs to the cgroup, pinning the links under
 * pin_dir/rules. NULL with errno and one line in err. */
struct rules *rules_attach(const struct errand_config *cfg, const char *home,
			   const char *cgroup_path, const char *pin_dir, char *err, size_t errlen);
/* A session's rules before its command runs: attached when a rule needs BPF
 * LSM, or when it runs here (errand's own closures then hold in the kernel
 * too); its events watched from epoll_fd (the egress ring's). A rule that
 * needs BPF LSM where it does not load refuses the session under
 * requireFullEnforcement (-EPERM), else is stated as a gap; one line logged
 * either way. *out NULL when nothing was attached. 0 or -errno. */
int rules_start(const struct errand_config *cfg, const char *id, const char *record_dir,
		const char *cgroup_path, const char *pin_dir, int epoll_fd, struct rules **out);
/* The pinned ring of refusals, under pin_dir. */
#define RULES_EVENTS_PIN "rules_events"
/* Reads the events of a session adopted from its pins (a restarted agent);
 * the links enforce from their pins. NULL with errno (ENOENT: the session
 * has no rules object). */
struct rules *rules_open(const struct errand_config *cfg, const char *pin_dir, int epoll_fd);
/* The ring buffer's epoll fd. */
int rules_events_fd(struct rules *r);
/* Hands each pending refusal to fn as one JSON line and one text line
 * naming the rule and the path. Count or -errno. */
int rules_events_drain(struct rules *r, const char *session,
		       void (*fn)(const char *json, const char *text, const char *target,
				  void *arg),
		       void *arg);
/* Closes what the process holds; the pinned links keep enforcing. */
void rules_free(struct rules *r);

#endif
