/* A session's BPF enforcement: bpf/egress.bpf.c loaded and verified once per
 * object and pinned under <paths.bpf>/prog/<object hash>/; each session gets
 * maps of its own (settings, allow entries, flows, events...) under its
 * cgroup id in the set's outer maps, the set's programs attached as links to
 * its cgroup and on the host side of its veth, everything of it pinned under
 * <paths.bpf>/<id>/ and checked with BPF_PROG_QUERY before the command runs. */
#ifndef ERRAND_ENFORCE_H
#define ERRAND_ENFORCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/grant.h"
#include "lib/addr.h"
#include "egress.h"

struct enforce_params {
	const char *pin_dir;	 /* <paths.bpf>/<id>; created here */
	const char *cgroup_path; /* the session's cgroup directory */
	uint64_t cgroup_id;
	int host_ifindex; /* host side of the veth; 0 when the session has no network */
	enum egress_mode mode;
	uint32_t sess4, gw4;	    /* network order */
	uint8_t sess6[16], gw6[16]; /* the pair's IPv6 addresses; zero: none */
	bool route6;		    /* IPv6 beyond DNS: a default route via gw6 and NAT66 */
	uint16_t dns_port;
	uint16_t broker_port;  /* the session's broker on gw4; 0: none */
	uint16_t relay_port;   /* its listener for intercepted hosts; 0: none */
	const uint16_t *ports; /* egressPorts, for open mode */
	size_t n_ports;
	const struct cidr *public_ranges; /* treatAsPublic */
	size_t n_public;
	const struct addr *self; /* the agent namespace's own addresses */
	size_t n_self;
	/* An empty cgroup the set's hooks stay attached to while this process
	 * lives (enforce_hooks_release); NULL: none (errandctl's own runs). */
	const char *hooks_cgroup;
};

struct enforce;

/* The amount errand_ts_move moves a session's TCP timestamps by: a hash of
 * the boot's id, the same for every program set of the boot. */
uint32_t enforce_ts_shift(void);

/* Loads and verifies the program set under <bpf_dir>/prog/ unless this
 * process holds it or finds it pinned (an agent does at start, so no session
 * start pays for it). 0 or -errno with one line in err. */
int enforce_preload(const char *bpf_dir, char *err, size_t errlen);
/* libbpf's own lines (the verifier's log among them) only with -v: set once
 * at a program's start, before any thread. Without it libbpf writes its
 * warnings to stderr, a kernel's refusal that errand expects among them. */
void enforce_libbpf_quiet(void);
/* Detaches what hooks_cgroup held and removes that cgroup. */
void enforce_hooks_release(void);
/* Makes the session's maps, pins them and puts them into the program set
 * under the session's key, with nothing attached yet: what a start would
 * otherwise wait for (each insertion into the set waits for an RCU grace
 * period), done ahead for sandbox.pool. Needs p's pin_dir, cgroup_id,
 * and host_ifindex and addresses unless enforce_prepare_veth adds them
 * (host_ifindex 0: the veth may not be there yet). NULL with errno set and
 * one line in err; nothing is left pinned. */
struct enforce *enforce_prepare(const struct enforce_params *p, char *err, size_t errlen);
/* The session's veth (p's host_ifindex and addresses) for a prepared e made
 * without it: its key for tc and its tc filters. 0 or -errno with one line
 * in err; what it added goes with enforce_unpin. */
int enforce_prepare_veth(struct enforce *e, const struct enforce_params *p, char *err,
			 size_t errlen);
/* Makes the session's maps (or takes prepared's, made by enforce_prepare
 * with the same pin_dir, cgroup and veth, unless the program set changed
 * since: then they are removed and made afresh), fills them, attaches,
 * pins and verifies. Returns NULL with errno set and one line in err naming
 * what failed; nothing is left attached or pinned, prepared included. The
 * caller owns the result and frees it with enforce_free(). */
struct enforce *enforce_attach(const struct enforce_params *p, struct enforce *prepared, char *err,
			       size_t errlen);
/* Adds or replaces an allow entry. 0 or -errno. */
int enforce_allow(struct enforce *e, const struct addr *a, uint16_t port, uint64_t expires_ns,
		  uint32_t flags);
/* Programs an entry from a DNS answer: like enforce_allow, but a pinned entry
 * for the same address and port is left as it is, flags may not hold
 * ENTRY_F_PINNED (-EINVAL), and a full map is first cleared of expired
 * entries. 0 or -errno. */
int enforce_allow_answer(struct enforce *e, const struct addr *a, uint16_t port,
			 uint64_t expires_ns, uint32_t flags, uint32_t grant);
/* Refuses one more of the agent namespace's own addresses (one it gained
 * while the session runs), in every hook and the backstop. 0 or -errno. */
int enforce_self_add(struct enforce *e, const struct addr *a);
/* Reopens a live session's enforcement from its pins (a restarted agent
 * adopting it): every cgroup link must be there. NULL with errno set and
 * one line in err. */
struct enforce *enforce_open(const char *pin_dir, char *err, size_t errlen);
/* The grant an allow entry came from (0: the policy). 0 or -ENOENT. */
int enforce_entry_grant(struct enforce *e, const struct addr *a, uint16_t port, uint32_t *grant);
/* Deletes every entry a grant opened, and ends its open connections (the
 * backstop passes no more of their segments). The count of entries deleted. */
int enforce_drop_grant(struct enforce *e, uint32_t grant);
/* Drops every grant the kernel holds (allow entries, grants_live, once
 * marks) that gs no longer keeps: what a revoke or a replace made while no
 * agent served the session left behind. The number dropped. */
int enforce_grants_prune(struct enforce *e, const struct grant_set *gs);
/* Makes the grants of gs live for the backstop's flows, each until its end:
 * called before the DNS responder can program an entry of any of them. A
 * duration grant's flows end by themselves when it does. 0 or -errno. */
int enforce_grants_set(struct enforce *e, const struct grant_set *gs);
/* Ends the connections of the grants ids of the session pinned at pin_dir,
 * as errandctl revoke does before it returns. 0 or -errno. */
int enforce_grants_end(const char *pin_dir, const uint32_t *ids, size_t n);
/* Read-only views for errandctl show, from the pins alone. */
typedef void (*enforce_entry_fn)(const struct addr *a, uint16_t port, uint64_t expires_ns,
				 uint32_t flags, uint32_t grant, void *arg);
typedef void (*enforce_prog_fn)(const char *hook, uint32_t prog_id, bool attached, void *arg);
/* Each allow entry; count or -errno. */
int enforce_walk(const char *pin_dir, enforce_entry_fn fn, void *arg);
/* The counters summed over CPUs. 0 or -errno. */
int enforce_counters(const char *pin_dir, uint64_t out[CNT_MAX]);
/* Each cgroup hook: its program and whether the cgroup runs it; then, when
 * ifindex is not negative, the tc backstop and the flow guard on that veth
 * (0: the session's veth was not found). */
int enforce_programs(const char *pin_dir, const char *cgroup_path, int ifindex, enforce_prog_fn fn,
		     void *arg);
/* Deletes entries whose expiry has passed (pins never expire). Count or -errno. */
int enforce_expire(struct enforce *e, uint64_t now_ns);
/* Events handed out in one drain: what one loop turn does for one session. */
#define ENFORCE_EVENTS_BUDGET 256
/* The ring buffer of refusals: an fd to poll, and a call that hands up to
 * ENFORCE_EVENTS_BUDGET pending events to fn. Returns the number handled or
 * -errno; enforce_events_backlog() then says whether more wait. */
int enforce_events_fd(struct enforce *e);
int enforce_events_drain(struct enforce *e, void (*fn)(const struct egress_event *ev, void *arg),
			 void *arg);
bool enforce_events_backlog(const struct enforce *e);
/* Refusal events the kernel's bucket held back (counted, never sent): the
 * total, and how many since the last call. 0 or -errno. */
int enforce_events_suppressed(struct enforce *e, const char *pin_dir, uint64_t *total,
			      uint64_t *fresh);
/* Closes what the process holds; pinned links keep enforcing. NULL-safe. */
void enforce_free(struct enforce *e);
/* Takes the session out of its program set's maps, unpins everything under
 * pin_dir and removes it, which detaches the cgroup programs. A missing
 * directory is 0. Given <paths.bpf>/prog (a sweep walking <paths.bpf>), it
 * removes the program sets no session uses but this build's own instead: 0
 * when it removed any, -EAGAIN when none. */
int enforce_unpin(const char *pin_dir);

#endif
