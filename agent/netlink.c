/* The session's veth pair and its addressing, and this namespace's own
 * addresses, over rtnetlink with libnl-route-3. Work inside a session's
 * namespace runs through netns_run, so no thread of the agent ever moves. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "agent/netlink.h"
#include "agent/netns.h"
#include "lib/log.h"
#include "lib/util.h"

static void nl_sock_freep(struct nl_sock **p)
{
	if (*p)
		nl_socket_free(*p);
}

static void nl_cache_freep(struct nl_cache **p)
{
	if (*p)
		nl_cache_free(*p);
}

static void rtnl_link_putp(struct rtnl_link **p)
{
	if (*p)
		rtnl_link_put(*p);
}

static void nl_addr_putp(struct nl_addr **p)
{
	if (*p)
		nl_addr_put(*p);
}

#define cleanup_nl_sock __attribute__((cleanup(nl_sock_freep)))
#define cleanup_nl_cache __attribute__((cleanup(nl_cache_freep)))
#define cleanup_link __attribute__((cleanup(rtnl_link_putp)))
#define cleanup_nl_addr __attribute__((cleanup(nl_addr_putp)))

/* libnl's -NLE_* codes back to -errno, for the callers' one convention. */
static int nlerr(int e)
{
	switch (e < 0 ? -e : e) {
	case 0:
		return 0;
	case NLE_EXIST:
		return -EEXIST;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	case NLE_NODEV:
		return -ENODEV;
	case NLE_PERM:
		return -EPERM;
	case NLE_NOACCESS:
		return -EACCES;
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_INVAL:
	case NLE_MISSING_ATTR:
		return -EINVAL;
	case NLE_BUSY:
		return -EBUSY;
	case NLE_RANGE:
		return -ERANGE;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_INTR:
		return -EINTR;
	case NLE_NOADDR:
		return -EADDRNOTAVAIL;
	case NLE_OPNOTSUPP:
		return -EOPNOTSUPP;
	case NLE_AF_NOSUPPORT:
		return -EAFNOSUPPORT;
	default:
		return -EIO;
	}
}

static int nl_open(struct nl_sock **out)
{
	struct nl_sock *sk = nl_socket_alloc();
	int r;

	if (!sk)
		return -ENOMEM;
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r < 0) {
		nl_socket_free(sk);
		log_warnx("rtnetlink: connect: %s", nl_geterror(r));
		return nlerr(r);
	}
	*out = sk;
	return 0;
}

/* Writes a sysctl of the calling thread's namespace. IPv6 knobs may be
 * missing (ipv6.disable=1): then IPv6 is off already, which is what we want. */
static int write_sysctl(const char *path, const char *val, bool missing_ok)
{
	cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(val);
	ssize_t w;

	if (fd < 0) {
		if (errno == ENOENT && missing_ok)
			return 0;
		log_warn("sysctl %s: open", path);
		return -errno;
	}
	w = write(fd, val, n);
	if (w < 0 || (size_t)w != n) {
		int err = w < 0 ? -errno : -EIO;

		log_warnx("sysctl %s: write %s: %s", path, val, strerror(-err));
		return err;
	}
	return 0;
}

static int disable_ipv6(const char *conf)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", conf);
	return write_sysctl(path, "1", true);
}

/* The host side of a session's veth, whatever this namespace's defaults
 * (conf/all, conf/default): no source routes taken from the session, no
 * redirects taken or sent, and strict reverse-path filtering, so a packet
 * that could not have come from the session's link is dropped. Source
 * routing and redirects are ANDed with conf/all while forwarding, and
 * rp_filter takes the higher of the two: the interface's own value holds. */
static int veth_harden(const char *ifname)
{
	static const char *const knobs[][2] = {
		{"accept_source_route", "0"},
		{"accept_redirects", "0"},
		{"send_redirects", "0"},
		{"rp_filter", "1"},
	};
	char path[128];
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(knobs); i++) {
		snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/%s", ifname, knobs[i][0]);
		r = write_sysctl(path, knobs[i][1], false);
		if (r)
			return r;
	}
	return 0;
}

bool session_link_addr(const struct addr *a, const struct cidr *pool, const struct cidr *pool6)
{
	struct addr v4 = {};

	if (addr_is_v4(a))
		return cidr_contains(pool, a);
	if (!cidr_contains(pool6, a))
		return false;
	v4.b[10] = v4.b[11] = 0xff;
	memcpy(v4.b + 12, a->b + 12, 4);
	return cidr_contains(pool, &v4);
}

void session_link_v6(struct session_link *l, const struct cidr *pool6)
{
	uint8_t prefix[12] = {0};

	/* Bits past the pool's prefix (at most /96) are zero, then the IPv4. */
	for (unsigned i = 0; i < pool6->prefixlen && i < 96; i++)
		prefix[i / 8] |= pool6->a.b[i / 8] & (uint8_t)(0x80 >> (i % 8));
	memcpy(l->gw6, prefix, 12);
	memcpy(l->gw6 + 12, &l->gw4, 4);
	memcpy(l->sess6, prefix, 12);
	memcpy(l->sess6 + 12, &l->sess4, 4);
	l->v6 = true;
}

/* Asked at every session's start and by the host's probe; the answer is
 * kept a second: with a thousand sessions the connect's choice of a source
 * address walks every veth's addresses (a millisecond, twice a start), and a
 * route that comes or goes still counts within the second. */
#define V6_ROUTE_KEPT_NS 1000000000ULL
static pthread_mutex_t v6_route_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t v6_route_at; /* CLOCK_MONOTONIC ns; 0: never asked */
static int v6_route_was;

static int v6_route_ask(void)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
	cleanup_close int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	sa.sin6_addr.s6_addr[0] = 0x20; /* 2000::1, the start of global unicast */
	sa.sin6_addr.s6_addr[15] = 1;
	return connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

int netlink_v6_route_out(void)
{
	struct timespec ts;
	uint64_t now;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	pthread_mutex_lock(&v6_route_lock);
	if (v6_route_at && now - v6_route_at < V6_ROUTE_KEPT_NS) {
		r = v6_route_was;
	} else {
		r = v6_route_was = v6_route_ask();
		v6_route_at = now;
	}
	pthread_mutex_unlock(&v6_route_lock);
	return r;
}

/* net.ipv6.conf.all.forwarding=1 turns every link into a router's, and a
 * router's link with accept_ra=1 stops taking router advertisements (its
 * default route would then expire): such links get accept_ra=2, which takes
 * them while forwarding, before forwarding is turned on. */
static int v6_forwarding_on(void)
{
	char path[PATH_MAX], val[8] = "";
	struct dirent *de;
	DIR *d;

	{
		cleanup_close int fd =
			open("/proc/sys/net/ipv6/conf/all/forwarding", O_RDONLY | O_CLOEXEC);

		if (fd >= 0 && read(fd, val, sizeof(val) - 1) > 0 && val[0] == '1')
			return 0;
	}
	d = opendir("/proc/sys/net/ipv6/conf");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		cleanup_close int fd = -1;
		char cur[8] = "";

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "all"))
			continue;
		snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/accept_ra", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && read(fd, cur, sizeof(cur) - 1) > 0 && cur[0] == '1' &&
		    (cur[1] == '\n' || !cur[1]))
			write_sysctl(path, "2", true);
	}
	closedir(d);
	return write_sysctl("/proc/sys/net/ipv6/conf/all/forwarding", "1", false);
}

/* IPv6 on one link of the calling thread's namespace, for its ULA address
 * alone: no link-local address, no router advertisements or solicitations,
 * no duplicate address detection. */
static int link_v6_on(const char *ifname)
{
	static const char *const knobs[][2] = {
		{"accept_ra", "0"},	{"addr_gen_mode", "1"},
		{"dad_transmits", "0"}, {"router_solicitations", "0"},
		{"disable_ipv6", "0"},
	};
	char path[128];

	for (size_t i = 0; i < ARRAY_SIZE(knobs); i++) {
		int r;

		snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/%s", ifname, knobs[i][0]);
		r = write_sysctl(path, knobs[i][1], false);
		if (r < 0)
			return r;
	}
	return 0;
}

static int addr6_add(struct nl_sock *sk, int ifindex, const uint8_t a6[16], int prefixlen)
{
	cleanup_nl_addr struct nl_addr *local = nl_addr_build(AF_INET6, a6, 16);
	struct rtnl_addr *ra;
	int r;

	if (!local)
		return -ENOMEM;
	nl_addr_set_prefixlen(local, prefixlen);
	ra = rtnl_addr_alloc();
	if (!ra)
		return -ENOMEM;
	rtnl_addr_set_ifindex(ra, ifindex);
	rtnl_addr_set_family(ra, AF_INET6);
	rtnl_addr_set_flags(ra, IFA_F_NODAD);
	r = rtnl_addr_set_local(ra, local);
	if (r == 0) {
		rtnl_addr_set_prefixlen(ra, prefixlen);
		r = rtnl_addr_add(sk, ra, 0);
	}
	rtnl_addr_put(ra);
	if (r < 0) {
		char buf[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET6, a6, buf, sizeof(buf));
		log_warnx("link #%d: add address %s/%d: %s", ifindex, buf, prefixlen,
			  nl_geterror(r));
	}
	return nlerr(r);
}

static bool valid_ifname(const char *s)
{
	size_t n = strnlen(s, IFNAMSIZ);

	return n > 0 && n < IFNAMSIZ && !strchr(s, '/') && !strchr(s, ' ') && strcmp(s, ".") != 0 &&
	       strcmp(s, "..") != 0;
}

/* Renames (when rename is set) and brings up the link called name. */
static int link_up(struct nl_sock *sk, const char *name, const char *rename, int *ifindex)
{
	cleanup_link struct rtnl_link *cur = NULL;
	cleanup_link struct rtnl_link *chg = NULL;
	int r;

	r = rtnl_link_get_kernel(sk, 0, name, &cur);
	if (r < 0) {
		log_warnx("link %s: look up: %s", name, nl_geterror(r));
		return nlerr(r);
	}
	chg = rtnl_link_alloc();
	if (!chg)
		return -ENOMEM;
	/* One request: the kernel renames before it changes the flags. */
	if (rename)
		rtnl_link_set_name(chg, rename);
	rtnl_link_set_flags(chg, IFF_UP);
	r = rtnl_link_change(sk, cur, chg, 0);
	if (r < 0) {
		if (rename)
			log_warnx("link %s: rename to %s and set up: %s", name, rename,
				  nl_geterror(r));
		else
			log_warnx("link %s: set up: %s", name, nl_geterror(r));
		return nlerr(r);
	}
	if (ifindex)
		*ifindex = rtnl_link_get_ifindex(cur);
	return 0;
}

static int addr4_add(struct nl_sock *sk, int ifindex, uint32_t a4, int prefixlen)
{
	cleanup_nl_addr struct nl_addr *local = nl_addr_build(AF_INET, &a4, sizeof(a4));
	struct rtnl_addr *ra;
	int r;

	if (!local)
		return -ENOMEM;
	nl_addr_set_prefixlen(local, prefixlen);
	ra = rtnl_addr_alloc();
	if (!ra)
		return -ENOMEM;
	rtnl_addr_set_ifindex(ra, ifindex);
	rtnl_addr_set_family(ra, AF_INET);
	r = rtnl_addr_set_local(ra, local);
	if (r == 0) {
		rtnl_addr_set_prefixlen(ra, prefixlen);
		r = rtnl_addr_add(sk, ra, 0);
	}
	rtnl_addr_put(ra);
	if (r < 0) {
		char buf[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &a4, buf, sizeof(buf));
		log_warnx("link #%d: add address %s/%d: %s", ifindex, buf, prefixlen,
			  nl_geterror(r));
	}
	return nlerr(r);
}

/* The default route of family (AF_INET or AF_INET6) via gw (4 or 16 bytes). */
static int route_default(struct nl_sock *sk, int ifindex, int family, const void *gwaddr)
{
	uint8_t any[16] = {0};
	size_t len = family == AF_INET6 ? 16 : 4;
	cleanup_nl_addr struct nl_addr *dst = nl_addr_build(family, any, len);
	cleanup_nl_addr struct nl_addr *gw = nl_addr_build(family, gwaddr, len);
	struct rtnl_nexthop *nh;
	struct rtnl_route *rt;
	int r;

	if (!dst || !gw)
		return -ENOMEM;
	nl_addr_set_prefixlen(dst, 0);
	rt = rtnl_route_alloc();
	if (!rt)
		return -ENOMEM;
	nh = rtnl_route_nh_alloc();
	if (!nh) {
		rtnl_route_put(rt);
		return -ENOMEM;
	}
	rtnl_route_nh_set_ifindex(nh, ifindex);
	rtnl_route_nh_set_gateway(nh, gw);
	rtnl_route_add_nexthop(rt, nh); /* rt owns nh from here */
	rtnl_route_set_family(rt, (uint8_t)family);
	rtnl_route_set_table(rt, RT_TABLE_MAIN);
	rtnl_route_set_scope(rt, RT_SCOPE_UNIVERSE);
	rtnl_route_set_protocol(rt, RTPROT_STATIC);
	rtnl_route_set_type(rt, RTN_UNICAST);
	r = rtnl_route_set_dst(rt, dst);
	if (r == 0)
		r = rtnl_route_add(sk, rt, NLM_F_EXCL);
	rtnl_route_put(rt);
	if (r < 0) {
		char buf[INET6_ADDRSTRLEN];

		inet_ntop(family, gwaddr, buf, sizeof(buf));
		log_warnx("link #%d: add default route via %s: %s", ifindex, buf, nl_geterror(r));
	}
	return nlerr(r);
}

/* Runs in a thread inside the session's namespace (netns_run). */
static int session_side(void *arg)
{
	const struct session_link *l = arg;
	cleanup_nl_sock struct nl_sock *sk = NULL;
	int ifindex, r;

	r = nl_open(&sk);
	if (r < 0)
		return r;
	/* Before any link comes up, so none of them ever speaks IPv6. */
	r = disable_ipv6("all");
	if (r == 0)
		r = disable_ipv6("default");
	if (r == 0)
		r = l->v6 ? link_v6_on(l->sess_if) : disable_ipv6(l->sess_if);
	/* TCP timestamps on the host's one clock, without the random offset
	 * the kernel otherwise derives from each connection's addresses (and,
	 * since 6.x, ports). Every session leaves through the same NAT address,
	 * and NAT gives a port a peer may still hold in TIME_WAIT to another
	 * session's connection, or another port's of the same session: a peer
	 * takes its SYN only with a newer timestamp than the last it saw there
	 * (PAWS), so with offsets of their own about half were dropped and the
	 * connect waited a second to retry. One clock is what a single host
	 * behind the NAT would show. Raw it is the host's uptime: the backstop
	 * moves it on the wire (errand_ts_move in bpf/egress.bpf.c). */
	if (r == 0)
		r = write_sysctl("/proc/sys/net/ipv4/tcp_timestamps", "2", false);
	if (r < 0)
		return r;
	r = link_up(sk, "lo", NULL, NULL);
	if (r < 0)
		return r;
	r = link_up(sk, l->sess_if, "eth0", &ifindex);
	if (r < 0)
		return r;
	r = addr4_add(sk, ifindex, l->sess4, l->prefixlen);
	if (r == 0 && l->v6)
		r = addr6_add(sk, ifindex, l->sess6, SESSION_V6_PREFIXLEN);
	if (r < 0)
		return r;
	r = route_default(sk, ifindex, AF_INET, &l->gw4);
	if (r == 0 && l->v6 && l->route6)
		r = route_default(sk, ifindex, AF_INET6, l->gw6);
	return r;
}

/* Deletes the link with this index, or by name when the index is 0. */
static int link_delete(struct nl_sock *sk, int ifindex, const char *name)
{
	cleanup_link struct rtnl_link *link = rtnl_link_alloc();
	int r;

	if (!link)
		return -ENOMEM;
	if (ifindex > 0)
		rtnl_link_set_ifindex(link, ifindex);
	else
		rtnl_link_set_name(link, name);
	r = rtnl_link_delete(sk, link);
	if (r == -NLE_NODEV || r == -NLE_OBJ_NOTFOUND)
		return 0;
	return nlerr(r);
}

int veth_setup(struct session_link *l, const char *netns_path)
{
	cleanup_nl_sock struct nl_sock *sk = NULL;
	cleanup_close int nsfd = -1;
	struct rtnl_link *veth, *peer;
	uint32_t mask;
	int ifindex, r;

	if (!l || !valid_ifname(l->host_if) || !valid_ifname(l->sess_if) ||
	    strcmp(l->host_if, l->sess_if) == 0 || l->prefixlen < 1 || l->prefixlen > 31 ||
	    l->gw4 == l->sess4)
		return -EINVAL;
	/* The gateway must be on the link, or the default route is refused. */
	mask = htonl(~0u << (32 - l->prefixlen));
	if ((l->gw4 & mask) != (l->sess4 & mask))
		return -EINVAL;

	nsfd = netns_open(netns_path);
	if (nsfd < 0) {
		log_warnx("netns %s: open: %s", netns_path, strerror(-nsfd));
		return nsfd;
	}
	r = nl_open(&sk);
	if (r < 0)
		return r;

	/* The peer is born inside the session's namespace, so it is never
	 * visible, even briefly, among the host's links. One queue each way
	 * on both ends, said at birth: a veth is made with a queue per CPU
	 * and then cut to one in use, and each cut waits for an expedited
	 * RCU grace period while it holds the RTNL lock, which every other
	 * start and teardown on the host then waits behind. */
	veth = rtnl_link_veth_alloc();
	if (!veth)
		return -ENOMEM;
	rtnl_link_set_name(veth, l->host_if);
	rtnl_link_set_num_tx_queues(veth, 1);
	rtnl_link_set_num_rx_queues(veth, 1);
	peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(peer, l->sess_if);
	rtnl_link_set_num_tx_queues(peer, 1);
	rtnl_link_set_num_rx_queues(peer, 1);
	rtnl_link_set_ns_fd(peer, nsfd);
	rtnl_link_put(peer);
	r = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_veth_release(veth);
	if (r < 0) {
		log_warnx("veth %s/%s: create: %s", l->host_if, l->sess_if, nl_geterror(r));
		return nlerr(r);
	}

	/* From here on, deleting host_if undoes everything: the peer, the
	 * addresses and the route all go with the pair. */
	ifindex = (int)if_nametoindex(l->host_if);
	if (ifindex == 0) {
		r = -errno;
		log_warn("veth %s: look up after create", l->host_if);
	} else {
		r = l->v6 ? link_v6_on(l->host_if) : disable_ipv6(l->host_if);
	}
	if (r == 0)
		r = veth_harden(l->host_if);
	if (r == 0)
		r = addr4_add(sk, ifindex, l->gw4, l->prefixlen);
	if (r == 0 && l->v6)
		r = addr6_add(sk, ifindex, l->gw6, SESSION_V6_PREFIXLEN);
	if (r == 0)
		r = link_up(sk, l->host_if, NULL, NULL);
	if (r == 0) {
		r = netns_run(netns_path, session_side, l);
		if (r < 0)
			log_warnx("veth %s: set up the session side in %s: %s", l->host_if,
				  netns_path, strerror(-r));
	}
	if (r == 0)
		r = write_sysctl("/proc/sys/net/ipv4/ip_forward", "1", false);
	if (r == 0 && l->v6 && l->route6)
		r = v6_forwarding_on();
	if (r < 0) {
		int d = link_delete(sk, ifindex, l->host_if);

		if (d < 0)
			log_warnx("veth %s: delete after failed setup: %s; delete it by hand",
				  l->host_if, strerror(-d));
		return r;
	}
	l->host_ifindex = ifindex;
	return 0;
}

/* Deletes link only if it is a veth: a stray name must never take down
 * one of the host's real interfaces. */
static int veth_delete(struct nl_sock *sk, struct rtnl_link *link)
{
	const char *type = rtnl_link_get_type(link);
	int r;

	if (!type || strcmp(type, "veth") != 0) {
		log_warnx("link %s: not a veth, left alone", rtnl_link_get_name(link));
		return -EINVAL;
	}
	r = link_delete(sk, rtnl_link_get_ifindex(link), rtnl_link_get_name(link));
	if (r < 0)
		log_warnx("veth %s: delete: %s", rtnl_link_get_name(link), strerror(-r));
	return r;
}

int veth_remove(const char *host_if)
{
	cleanup_nl_sock struct nl_sock *sk = NULL;
	cleanup_link struct rtnl_link *link = NULL;
	int r;

	if (!host_if || !valid_ifname(host_if))
		return -EINVAL;
	r = nl_open(&sk);
	if (r < 0)
		return r;
	r = rtnl_link_get_kernel(sk, 0, host_if, &link);
	if (r == -NLE_NODEV || r == -NLE_OBJ_NOTFOUND)
		return 0;
	if (r < 0) {
		log_warnx("veth %s: look up: %s", host_if, nl_geterror(r));
		return nlerr(r);
	}
	return veth_delete(sk, link);
}

int veth_sweep(const char *prefix, int (*keep)(const char *id, void *arg), void *arg)
{
	cleanup_nl_sock struct nl_sock *sk = NULL;
	cleanup_nl_cache struct nl_cache *cache = NULL;
	size_t plen;
	int count = 0, err = 0, r;

	/* An empty prefix would match every veth on the host. */
	if (!prefix || !*prefix)
		return -EINVAL;
	plen = strlen(prefix);
	r = nl_open(&sk);
	if (r < 0)
		return r;
	r = rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache);
	if (r < 0) {
		log_warnx("links: list: %s", nl_geterror(r));
		return nlerr(r);
	}
	for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *link = (struct rtnl_link *)o;
		const char *name = rtnl_link_get_name(link);
		const char *type = rtnl_link_get_type(link);

		if (!name || strncmp(name, prefix, plen) != 0 || !type || strcmp(type, "veth") != 0)
			continue;
		if (keep && keep(name + plen, arg))
			continue;
		r = veth_delete(sk, link);
		if (r < 0 && !err)
			err = r;
		else if (r == 0)
			count++;
	}
	return err ? err : count;
}

/* The address an RTM_NEWADDR message carries (its local one, else its
 * address): its length (4 or 16) with *family and *bytes set, 0 for a
 * message that carries none, -1 for one that cannot be parsed. */
static int newaddr_of(struct nlmsghdr *h, int *family, const void **bytes)
{
	struct nlattr *tb[IFA_MAX + 1];
	struct ifaddrmsg *ifa;
	struct nlattr *at;
	int len;

	if (h->nlmsg_type != RTM_NEWADDR)
		return 0;
	if (nlmsg_parse(h, sizeof(*ifa), tb, IFA_MAX, NULL) < 0)
		return -1;
	ifa = nlmsg_data(h);
	at = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	len = ifa->ifa_family == AF_INET ? 4 : ifa->ifa_family == AF_INET6 ? 16 : 0;
	if (!at || !len || nla_len(at) != len)
		return 0;
	*family = ifa->ifa_family;
	*bytes = nla_data(at);
	return len;
}

struct raw_addr {
	int family;
	uint8_t b[16];
};

struct raw_addrs {
	struct raw_addr *v;
	size_t n, cap;
	bool oom;
};

static int raw_addr_msg(struct nl_msg *msg, void *arg)
{
	struct raw_addrs *l = arg;
	const void *bytes = NULL;
	int family = 0, len = newaddr_of(nlmsg_hdr(msg), &family, &bytes);

	if (len <= 0)
		return NL_OK;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct raw_addr *v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			l->oom = true;
			return NL_STOP;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].family = family;
	memcpy(l->v[l->n++].b, bytes, (size_t)len);
	return NL_OK;
}

/* One family's addresses of the caller's namespace, appended to l. A dump
 * that addresses changed under (sessions starting) is read again, as
 * libnl's cache did. */
static int list_family(struct raw_addrs *l, int family)
{
	size_t base = l->n;
	int r = -NLE_DUMP_INTR;

	for (int tries = 0; r == -NLE_DUMP_INTR && tries < 16; tries++) {
		cleanup_nl_sock struct nl_sock *sk = NULL;
		struct ifaddrmsg req = {.ifa_family = (unsigned char)family};

		l->n = base;
		if ((r = nl_open(&sk)) < 0)
			return r; /* -errno, said */
		nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, raw_addr_msg, l);
		r = nl_send_simple(sk, RTM_GETADDR, NLM_F_DUMP, &req, sizeof(req));
		if (r >= 0)
			r = nl_recvmsgs_default(sk);
	}
	if (l->oom)
		r = -NLE_NOMEM;
	if (r < 0) {
		log_warnx("addresses: list: %s", nl_geterror(r));
		return nlerr(r);
	}
	return 0;
}

/* Calls fn for each address of the caller's namespace; stops at fn's first
 * nonzero return and passes it on. Read from a dump message by message:
 * libnl's address cache, which this was, made an object of each and merged
 * it into the cache (2.4 ms a listing with a thousand sessions' addresses,
 * twice a start). Each family is asked for on its own: a dump of both
 * (AF_UNSPEC) holds the RTNL lock throughout, so it waited for every veth
 * another session's preparation or teardown was making or removing, where
 * kernels since 6.9 list one family's addresses under RCU alone. */
static int each_addr(int (*fn)(int family, const void *bytes, void *arg), void *arg)
{
	struct raw_addrs l = {0};
	int r = list_family(&l, AF_INET);

	if (!r)
		r = list_family(&l, AF_INET6);
	for (size_t i = 0; i < l.n && !r; i++)
		r = fn(l.v[i].family, l.v[i].b, arg);
	free(l.v);
	return r;
}

struct addr_list {
	struct addr *v;
	size_t n, cap;
};

static int collect_addr(int family, const void *bytes, void *arg)
{
	struct addr_list *list = arg;
	struct addr *a;

	if (list->n == list->cap) {
		size_t cap = list->cap ? list->cap * 2 : 8;
		struct addr *v = realloc(list->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		list->v = v;
		list->cap = cap;
	}
	a = &list->v[list->n++];
	memset(a, 0, sizeof(*a));
	if (family == AF_INET) {
		/* ::ffff:a.b.c.d, errand's one form for both families */
		a->b[10] = 0xff;
		a->b[11] = 0xff;
		memcpy(&a->b[12], bytes, 4);
	} else {
		memcpy(a->b, bytes, 16);
	}
	return 0;
}

int netlink_self_addrs(struct addr **out)
{
	struct addr_list list = {0};
	int r;

	r = each_addr(collect_addr, &list);
	if (r < 0) {
		free(list.v);
		return r;
	}
	if (!list.v) {
		list.v = calloc(1, sizeof(*list.v)); /* caller frees *out, even when empty */
		if (!list.v)
			return -ENOMEM;
	}
	*out = list.v;
	return (int)list.n;
}

static int match_addr4(int family, const void *bytes, void *arg)
{
	return family == AF_INET && memcmp(bytes, arg, 4) == 0;
}

int netlink_addr4_in_use(uint32_t addr4)
{
	return each_addr(match_addr4, &addr4);
}

static int match_addr6(int family, const void *bytes, void *arg)
{
	return family == AF_INET6 && memcmp(bytes, arg, 16) == 0;
}

int netlink_addr6_in_use(const uint8_t addr6[16])
{
	return each_addr(match_addr6, (void *)addr6);
}

/* The watch is a plain rtnetlink socket in the address groups. Each new
 * address is taken from its message, so a change costs each session that
 * one address, not a listing of every address here (a thousand sessions
 * make thousands); a lost message (the socket overflowed) asks the caller
 * to list them all again. */
struct netlink_watch {
	struct nl_sock *sk;
	struct addr *got;
	size_t n, cap;
	bool relist;
};

static int watch_collect(struct nl_msg *msg, void *arg)
{
	struct netlink_watch *w = arg;
	const void *bytes = NULL;
	int family = 0, len = newaddr_of(nlmsg_hdr(msg), &family, &bytes);

	if (len < 0)
		w->relist = true;
	if (len <= 0)
		return NL_OK;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 8;
		struct addr *v = realloc(w->got, cap * sizeof(*v));

		if (!v) {
			w->relist = true;
			return NL_OK;
		}
		w->got = v;
		w->cap = cap;
	}
	memset(&w->got[w->n], 0, sizeof(w->got[0]));
	if (len == 4) {
		w->got[w->n].b[10] = w->got[w->n].b[11] = 0xff;
		memcpy(w->got[w->n].b + 12, bytes, 4);
	} else {
		memcpy(w->got[w->n].b, bytes, 16);
	}
	w->n++;
	return NL_OK;
}

struct netlink_watch *netlink_addr_watch_new(void)
{
	struct netlink_watch *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return NULL;
	r = nl_open(&w->sk);
	if (r < 0)
		goto fail;
	nl_socket_disable_seq_check(w->sk);
	r = nl_socket_add_memberships(w->sk, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, 0);
	if (r < 0 || (r = nl_socket_set_nonblocking(w->sk)) < 0) {
		log_warnx("rtnetlink: cannot follow address changes: %s", nl_geterror(r));
		r = nlerr(r);
		goto fail;
	}
	fcntl(nl_socket_get_fd(w->sk), F_SETFD, FD_CLOEXEC);
	return w;
fail:
	netlink_addr_watch_free(w);
	errno = -r;
	return NULL;
}

int netlink_addr_watch_fd(const struct netlink_watch *w)
{
	return nl_socket_get_fd(w->sk);
}

int netlink_addr_watch_drain(struct netlink_watch *w, const struct addr **got, size_t *n)
{
	int r;

	w->n = 0;
	w->relist = false;
	nl_socket_modify_cb(w->sk, NL_CB_VALID, NL_CB_CUSTOM, watch_collect, w);
	for (int i = 0; i < 64; i++) {
		r = nl_recvmsgs_default(w->sk);
		if (r == -NLE_AGAIN)
			break;
		if (r < 0) {
			w->relist = true; /* an overflow lost messages */
			if (r != -NLE_NOMEM && r != -NLE_INTR)
				break;
		}
	}
	*got = w->got;
	*n = w->n;
	return w->relist;
}

void netlink_addr_watch_free(struct netlink_watch *w)
{
	if (!w)
		return;
	if (w->sk)
		nl_socket_free(w->sk);
	free(w->got);
	free(w);
}
