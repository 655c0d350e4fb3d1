/* A session's BPF enforcement: one copy of bpf/egress.bpf.c loaded with the
 * session's settings, its maps filled, its programs attached to the session's
 * cgroup and the host side of its veth, everything pinned under
 * <paths.bpf>/<id>/ and checked with BPF_PROG_QUERY before the command runs. */
#ifndef ERRAND_ENFORCE_H
#define ERRAND_ENFORCE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/addr.h"
#include "egress.h"

struct enforce_params {
	const char *pin_dir;	 /* <paths.bpf>/<id>; created here */
	const char *cgroup_path; /* the session's cgroup directory */
	uint64_t cgroup_id;
	int host_ifindex; /* host side of the veth; 0 when the session has no network */
	enum egress_mode mode;
	uint32_t sess4, gw4; /* network order */
	uint16_t dns_port;
	const uint16_t *ports; /* egressPorts, for open mode */
	size_t n_ports;
	const struct cidr *public_ranges; /* treatAsPublic */
	size_t n_public;
	const struct addr *self; /* the agent namespace's own addresses */
	size_t n_self;
};

struct enforce;

/* Loads, fills, attaches, pins and verifies. Returns NULL with errno set and
 * one line in err naming what failed; nothing is left attached or pinned. The
 * caller owns the result and frees it with enforce_free(). */
struct enforce *enforce_attach(const struct enforce_params *p, char *err, size_t errlen);
/* Adds or replaces an allow entry. 0 or -errno. */
int enforce_allow(struct enforce *e, const struct addr *a, uint16_t port, uint64_t expires_ns,
		  uint32_t flags);
/* Programs an entry from a DNS answer: like enforce_allow, but a pinned entry
 * for the same address and port is left as it is, and a full map is first
 * cleared of expired entries. 0 or -errno. */
int enforce_allow_answer(struct enforce *e, const struct addr *a, uint16_t port,
			 uint64_t expires_ns);
/* Deletes entries whose expiry has passed (pins never expire). Count or -errno. */
int enforce_expire(struct enforce *e, uint64_t now_ns);
/* The ring buffer of refusals: an fd to poll, and a call that hands each
 * pending event to fn. Returns the number handled or -errno. */
int enforce_events_fd(struct enforce *e);
int enforce_events_drain(struct enforce *e, void (*fn)(const struct egress_event *ev, void *arg),
			 void *arg);
/* Closes what the process holds; pinned links keep enforcing. NULL-safe. */
void enforce_free(struct enforce *e);
/* Unpins everything under pin_dir and removes it, which detaches the cgroup
 * programs. A missing directory is 0. */
int enforce_unpin(const char *pin_dir);

#endif
