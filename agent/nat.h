/* Forwarding and NAT for a session, with libnftables, in the namespace the
 * agent runs in: one table per session, "ip errand-<id>", which errand owns
 * and deletes whole, so nothing else on the host is touched. */
#ifndef ERRAND_NAT_H
#define ERRAND_NAT_H

#include <stdint.h>

#define NAT_TABLE_PREFIX "errand-"

/* Adds table ip errand-<id>: a postrouting nat chain masquerading the
 * session's source address sess4 (network order) out of any link but
 * host_if, and a forward chain accepting from host_if and established
 * traffic back to it. 0 or -errno; on error the table is not left behind. */
int nat_add(const char *id, uint32_t sess4, const char *host_if);
/* The same for IPv6 as table ip6 errand-<id>: NAT66, masquerading the
 * session's IPv6 source sess6 (16 bytes). 0 or -errno. */
int nat_add6(const char *id, const uint8_t sess6[16], const char *host_if);
/* Deletes table ip errand-<id>. Missing is 0. */
int nat_remove(const char *id);
/* Deletes table ip6 errand-<id>. Missing is 0. */
int nat_remove6(const char *id);
/* Deletes every errand-<id> table (ip and ip6) whose id keep does not
 * accept (NULL: all). Count or -errno. */
int nat_sweep(int (*keep)(const char *id, void *arg), void *arg);

#endif
