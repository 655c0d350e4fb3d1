/* Links, addresses and routes with libnl-3 (libnl-route-3): the session's
 * veth pair, its addressing, and the list of this namespace's own addresses. */
#ifndef ERRAND_NETLINK_H
#define ERRAND_NETLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/addr.h"

struct session_link {
	char host_if[16];  /* host side, in the caller's namespace */
	char sess_if[16];  /* session side, inside the session namespace, named eth0 there */
	uint32_t gw4;	   /* host side address, network order (the gateway) */
	uint32_t sess4;	   /* session side address, network order */
	uint8_t prefixlen; /* of the link's subnet, e.g. 30 */
	int host_ifindex;  /* filled by veth_setup */
	/* IPv6 (session_link_v6): the gateway's and the session's addresses
	 * from sandbox.addressPool6. They carry the session's DNS to a native
	 * IPv6 address; with route6 also a default route via gw6 (the agent's
	 * namespace has an IPv6 route out, and NAT66 carries the session out). */
	bool v6;
	bool route6;
	uint8_t gw6[16], sess6[16];
};

/* A session's IPv6 link addresses, derived from its IPv4 ones: the prefix
 * of pool6 (sandbox.addressPool6, at most /96) with the IPv4 address as its
 * last 32 bits, so the session's /30 is a /126 and unique as the /30 is;
 * sets v6 (not route6). */
#define SESSION_V6_PREFIXLEN 126
void session_link_v6(struct session_link *l, const struct cidr *pool6);
/* Has the caller's namespace a route for global IPv6 unicast (2000::/3)?
 * Asked of the kernel with an unbound UDP socket's connect, which sends
 * nothing; the answer is kept a second (a process asks of one namespace).
 * 1 yes, 0 no. */
int netlink_v6_route_out(void);
/* Is a one of the sessions' link addresses (IPv4 in pool, or its IPv6 form
 * in pool6 above)? Those are refused to every session by their ranges (the
 * configuration sees to it), so they need not be followed one by one as
 * this host's own: a thousand sessions would make it thousands. */
bool session_link_addr(const struct addr *a, const struct cidr *pool, const struct cidr *pool6);

/* Creates the veth pair in the caller's namespace, moves sess_if into the
 * namespace at netns_path and renames it eth0 there; addresses both sides;
 * brings up lo, eth0 and host_if; adds the default route via gw4 in the
 * session namespace; disables IPv6 in the session namespace (sessions are
 * IPv4 only) but for gw6 and sess6 on the pair where l->v6 is set (no
 * link-local address, no router advertisements, no DAD), with a default
 * route via gw6 where route6 is set; sets net.ipv4.ip_forward=1 in the
 * caller's namespace, and with route6 net.ipv6.conf.all.forwarding=1 (links
 * that took router advertisements get accept_ra=2 first, so they go on
 * taking them).
 * On error nothing it made is left behind. 0 or -errno. */
int veth_setup(struct session_link *l, const char *netns_path);
/* Deletes the host side (its peer goes with it). Missing is 0. */
int veth_remove(const char *host_if);
/* Deletes every link in the caller's namespace whose name starts with prefix
 * and whose remainder is not accepted by keep (NULL: all). Count or -errno. */
int veth_sweep(const char *prefix, int (*keep)(const char *id, void *arg), void *arg);
/* The caller's namespace's own addresses, every family, every link (lo
 * included). *out is malloc'd, the caller frees it. Count or -errno. */
int netlink_self_addrs(struct addr **out);
/* Is this IPv4 address (network order) on any link of the caller's namespace? */
int netlink_addr4_in_use(uint32_t addr4);
/* Is this IPv6 address on any link of the caller's namespace? */
int netlink_addr6_in_use(const uint8_t addr6[16]);

/* A watch on the caller's namespace's addresses (rtnetlink IPv4 and IPv6
 * address notifications): poll its fd, then drain it. new: NULL with errno
 * set; the caller owns it and frees it with netlink_addr_watch_free. */
struct netlink_watch;
struct netlink_watch *netlink_addr_watch_new(void);
int netlink_addr_watch_fd(const struct netlink_watch *w);
/* Reads what came: *got (n of them, valid until the next drain) are the
 * addresses added since; 1 when messages were lost and the caller must list
 * the addresses again, else 0. */
int netlink_addr_watch_drain(struct netlink_watch *w, const struct addr **got, size_t *n);
void netlink_addr_watch_free(struct netlink_watch *w);

#endif
