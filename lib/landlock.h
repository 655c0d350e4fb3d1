/* Landlock's ABI as errand knows it, for the launcher (which applies the
 * rules) and doctor (which reports the version): Debian 12's headers stop at
 * ABI 2, so what later ABIs added is defined here, each guarded. */
#ifndef ERRAND_LANDLOCK_H
#define ERRAND_LANDLOCK_H

#include <errno.h>
#include <linux/landlock.h>
#include <linux/types.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The highest ABI errand knows what to do with; a newer kernel is used at
 * this version. */
#define LANDLOCK_ABI_KNOWN 7
/* Below this a guarantee is missing and reported as a gap: truncate (3) and
 * device ioctls (5) are confined only from these on. Scopes (6) add nothing
 * a session's own network and PID namespaces do not already give. */
#define LANDLOCK_ABI_TRUNCATE 3
#define LANDLOCK_ABI_IOCTL_DEV 5
#define LANDLOCK_ABI_FULL LANDLOCK_ABI_IOCTL_DEV

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define LANDLOCK_RULE_NET_PORT 2
struct landlock_net_port_attr {
	__u64 allowed_access;
	__u64 port;
};
#endif
#define LANDLOCK_ABI_NET 4

/* The ruleset attribute as ABI 6 has it; the kernel takes a prefix of it, so
 * older kernels are given only the size they know. */
struct errand_landlock_ruleset_attr {
	__u64 handled_access_fs;
	__u64 handled_access_net; /* ABI 4; sessions' networking is BPF's, the DNS worker's TCP
				   * Landlock's */
	__u64 scoped;		  /* ABI 6 */
};

/* The kernel's Landlock ABI version (1 and up), or -ENOSYS (not built in) or
 * -EOPNOTSUPP (built in, not enabled at boot: add landlock to lsm=). */
static inline int landlock_abi(void)
{
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? -errno : (int)v;
}

#endif
