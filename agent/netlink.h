/* Links, addresses and routes with libnl-3 (libnl-route-3): the session's
 * veth pair, its addressing, and the list of this namespace's own addresses. */
#ifndef ERRAND_NETLINK_H
#define ERRAND_NETLINK_H

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
};

/* Creates the veth pair in the caller's namespace, moves sess_if into the
 * namespace at netns_path and renames it eth0 there; addresses both sides;
 * brings up lo, eth0 and host_if; adds the default route via gw4 in the
 * session namespace; disables IPv6 in the session namespace (sessions are
 * IPv4 only for now); sets net.ipv4.ip_forward=1 in the caller's namespace.
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

#endif
