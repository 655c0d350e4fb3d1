/* The DNS responder of one session: on the session's gateway, UDP and TCP
 * port 53, it decides which names exist, resolves allowed ones upstream with
 * c-ares, drops forbidden addresses, programs the session's allow map and
 * only then answers. The packets are parsed and answered by an unprivileged
 * worker process (agent/dns.c); the calls below are the agent's side of it
 * (agent/dnspriv.c), which checks and programs what the worker asks for. */
#ifndef ERRAND_DNS_H
#define ERRAND_DNS_H

#include <poll.h>
#include <stdint.h>

#include "agent/enforce.h"
#include "agent/events.h"
#include "agent/grant.h"
#include "lib/config.h"

struct dns_responder;

/* In a session's record directory: the names it has spent (dnspriv.h). */
#define DNS_NAMES_FILE "dns-names"

/* Emits a denied-name event (the caller logs and streams it). */
typedef void (*dns_event_fn)(const struct event_rec *ev, void *arg);

/* The responder's listening sockets: UDP and TCP on the gateway's IPv4
 * address, and on its IPv6 one where the session has one. */
enum { DNS_SOCK_UDP4, DNS_SOCK_TCP4, DNS_SOCK_UDP6, DNS_SOCK_TCP6, DNS_SOCKS };

/* Binds port 53, UDP and TCP, on gw4 (network order) and on gw6 (16 bytes;
 * NULL: none), except where socks[k] (-1: none) is such a socket already (a
 * restarted agent's, taken back from the session's launcher; the responder
 * owns them from here on, on failure too), and sets up the upstream resolver
 * from cfg (dns.upstream, else the host's resolv.conf). Its UDP sockets are
 * bound to dev (the session's link on the agent's side; NULL: none), so
 * that what is sent on them reaches the session alone. self lists the agent
 * namespace's own addresses, never given out; it and cfg must outlive the
 * responder. The names the session spends under dns.maxNames and
 * dns.maxWildcardNames are kept in record_dir's DNS_NAMES_FILE (NULL: in
 * memory alone) and read back from it: an agent that adopts the session
 * counts on from where the last one left off. NULL with errno set and one
 * line in err. The caller owns the result. */
struct dns_responder *dns_responder_new(const struct errand_config *cfg, struct enforce *enf,
					uint32_t gw4, const uint8_t *gw6, int socks[DNS_SOCKS],
					const struct addr *self, size_t n_self, const char *session,
					const char *dev, const char *record_dir, dns_event_fn fn,
					void *arg, char *err, size_t errlen);
/* The responder's listening sockets (-1: none), for the launcher to hold a
 * copy of: while they stay bound, no other socket on the host gets the
 * session's DNS, whether an agent runs or not. Still the responder's. */
void dns_responder_fds(const struct dns_responder *r, int socks[DNS_SOCKS]);
void dns_responder_free(struct dns_responder *r);
/* The session's grants: names they admit are answered like the policy's,
 * their entries carrying the grant's id. grants must outlive the responder
 * (or be replaced); the next query sees a change. */
void dns_responder_set_grants(struct dns_responder *r, const struct grant_set *grants);
/* The agent namespace's own addresses changed: self (which must outlive the
 * responder, or be replaced) is never given out from the next answer on, and
 * the cache is emptied of answers that may hold one. */
void dns_responder_set_self(struct dns_responder *r, const struct addr *self, size_t n_self);
/* Adds the fds to poll (the worker's channel) to fds[*n..max) and lowers
 * *timeout_ms to when the responder next needs to run (a worker to restart). */
void dns_responder_pollfds(struct dns_responder *r, struct pollfd *fds, int *n, int max,
			   int *timeout_ms);
/* Handles whatever is ready among fds (the worker's requests), and restarts
 * a worker that ended. Never fails: a bad request is refused, a worker that
 * misbehaves is replaced, and the responder goes on. */
void dns_responder_process(struct dns_responder *r, const struct pollfd *fds, int n);

#endif
