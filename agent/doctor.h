/* What this host can enforce, as errand's start-up report and `errandctl
 * doctor` say it: each kernel feature probed and classified as present, a
 * gap (stated; refused while sandbox.requireFullEnforcement is true) or
 * unavailable (sessions refused), and what the configuration grants beyond
 * the floor. */
#ifndef ERRAND_DOCTOR_H
#define ERRAND_DOCTOR_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "lib/config.h"

struct doctor_report;

/* Probes this host (forks short-lived children, loads and attaches a
 * trivial BPF program to a cgroup it makes and removes, mounts securityfs at
 * /sys/kernel/security if nothing is there). Returns a report the caller
 * frees with doctor_report_free(), or NULL with errno set. */
struct doctor_report *doctor_probe(const struct errand_config *cfg);
/* The host's part of the probe (kernel features, cgroup, BPF) is cached:
 * probed by the first doctor_probe, and again by each doctor_refresh (the
 * daemon's, at start and on reload). Thread-safe. 0 or -errno. */
int doctor_refresh(const struct errand_config *cfg);
void doctor_report_free(struct doctor_report *r);
/* Prints the report to f: lines for a person, or one JSON object. */
void doctor_print(const struct doctor_report *r, const struct errand_config *cfg, bool json,
		  FILE *f);
/* The gate at session start. 0 when sessions may start: each gap, if
 * allowed, said as "errand: gap: ..." on say, with the grants beyond the
 * floor, the rules and the weakened guarantees. -EPERM when refused, each
 * reason one line on say: "errandctl: refused: <gap>; set
 * sandbox.requireFullEnforcement to false to run anyway" or "errandctl:
 * unavailable: <what>; <what to do>"; the first reason also in err, for the
 * client. say is the caller's stderr, or what the agent relays to it. */
int doctor_gate(const struct doctor_report *r, const struct errand_config *cfg, FILE *say,
		char *err, size_t errlen);

/* The gaps as a JSON array of lines (a session's record keeps them). */
json_t *doctor_gaps(const struct doctor_report *r);

#endif
