/* Forwarding and NAT for the sessions, with libnftables, in the namespace
 * the agent runs in: one table per address pool, "ip errand-pool-<net>-<len>",
 * which errand owns and replaces whole, so nothing else on the host is
 * touched and a packet meets the same few rules whether one session runs or
 * a thousand (a table a session made every forwarded packet walk all of
 * them, and every change list them all). Tables "ip errand-<id>" of older
 * errands are swept. */
#ifndef ERRAND_NAT_H
#define ERRAND_NAT_H

#include <stdint.h>

#define NAT_TABLE_PREFIX "errand-"
#define NAT_POOL_PREFIX "errand-pool-"
#define NAT_POOL6_PREFIX "errand-pool6-"
/* the host sides of the sessions' veths: eh<id> */
#define VETH_HOST_PREFIX "eh"
#define VETH_HOST_GLOB VETH_HOST_PREFIX "*"

struct cidr;

/* Makes sure table ip errand-pool-... serves pool (an IPv4 range) in this
 * process: a postrouting nat chain masquerading the pool's sources out of any
 * link but the sessions' veths, and a forward chain accepting from them and
 * established traffic back to them. Made (or replaced) once a process and a
 * pool; it stays, since sessions outlive the agent. 0 or -errno; on error
 * nothing changed. */
int nat_pool(const struct cidr *pool);
/* The same for sandbox.addressPool6 (a unique-local range), as table ip6
 * errand-pool6-...: NAT66, made where the agent's namespace has an IPv6
 * route out. */
int nat_pool6(const struct cidr *pool6);
/* Deletes table ip errand-<id>. Missing is 0. */
int nat_remove(const char *id);
/* Deletes every errand-<id> table whose id keep does not accept (NULL: all),
 * never a pool's. Count or -errno. */
int nat_sweep(int (*keep)(const char *id, void *arg), void *arg);

#endif
