/* Privilege separation of the DNS responder. Every session's DNS packets are
 * parsed, answered and resolved upstream by a worker process (agent/dns.c)
 * that runs as the errand-dns account, with no capabilities, no_new_privs, a
 * seccomp allow-list of its own and no descriptors but its sockets and a
 * SOCK_SEQPACKET channel to the agent. The agent (root) keeps every kernel
 * object and accepts only the fixed binary messages below from the worker,
 * checking each request against the session's own policy before it programs
 * anything: a worker that is fully compromised opens nothing the policy does
 * not. */
#ifndef ERRAND_DNSPRIV_H
#define ERRAND_DNSPRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agent/dnsmsg.h"
#include "agent/grant.h"
#include "lib/addr.h"
#include "lib/config.h"

/* The account the worker runs as; created by make accounts. */
#define DNS_WORKER_ACCOUNT "errand-dns"
#define DNSP_ADDRS_MAX 64
#define DNSP_SELF_MAX 512
/* Upstream: queries a session may make a second, and how long one waits. */
#define DNS_UPSTREAM_RATE 50
#define DNS_UPSTREAM_TIMEOUT_MS 5000

/* Every message starts with its type; its size must be exactly its struct's. */
enum dnsp_type {
	/* worker to agent */
	DNSP_PROGRAM = 1, /* struct dnsp_program: open these addresses, answer if ok */
	DNSP_EVENT,	  /* struct dnsp_event: a denied name */
	DNSP_LOG,	  /* struct dnsp_log */
	DNSP_NAME,	  /* struct dnsp_name: count a new name, before it goes upstream */
	/* worker to agent, on its TCP channel */
	DNSP_TCP_ASK = 8, /* struct dnsp_tcp_ask: a TCP connection to this resolver */
	/* agent to worker */
	DNSP_REPLY = 16, /* struct dnsp_reply: the outcome of a DNSP_PROGRAM */
	DNSP_GRANTS,	 /* struct dnsp_grants: the session's grants now */
	DNSP_SELF,	 /* struct dnsp_self: the host's own addresses now */
};

/* "Program session S (the channel's): name N, addresses A, TTL T." */
struct dnsp_program {
	uint32_t type;
	uint16_t qtype;		     /* A or AAAA: every address of its family */
	uint16_t n;		     /* 1..DNSP_ADDRS_MAX, and at most dns.maxAddresses */
	uint32_t ttl;		     /* the upstream's; the agent clamps it */
	uint32_t flags;		     /* none exist: must be 0 (a worker cannot ask for a pin) */
	char name[DNS_NAME_MAX + 1]; /* normalised, NUL-terminated */
	struct addr addrs[DNSP_ADDRS_MAX];
};

struct dnsp_reply {
	uint32_t type;
	int32_t status; /* 0: programmed (counted), answer; else -errno: answer SERVFAIL */
	uint32_t ttl;	/* the TTL to answer with; 0 for a DNSP_NAME */
};

/* "Session S (the channel's) spends name N": sent once for each name the
 * worker has not counted yet, and answered (a DNSP_REPLY) before the name is
 * asked upstream, since the query is what a session could carry data in. */
struct dnsp_name {
	uint32_t type;
	char name[DNS_NAME_MAX + 1]; /* normalised, NUL-terminated */
	uint8_t pad[2];
};
_Static_assert(sizeof(struct dnsp_name) == 4 + DNS_NAME_MAX + 1 + 2, "dnsp_name is packed");

enum dnsp_reason {
	DNSP_R_NOT_ALLOWED,
	DNSP_R_TYPE,
	DNSP_R_CAP,
	DNSP_R_FORBIDDEN,
	DNSP_R_UPSTREAM,
	DNSP_R_MAX,
};

struct dnsp_event {
	uint32_t type;
	uint16_t qtype;
	uint16_t reason; /* enum dnsp_reason */
	char name[DNS_NAME_MAX + 1];
};

enum dnsp_log_what {
	DNSP_LOG_RATE,	   /* a: queries over the upstream rate since the last; b: in all */
	DNSP_LOG_UPSTREAM, /* name: an upstream query failed with c-ares status a */
	DNSP_LOG_MAX,
};

struct dnsp_log {
	uint32_t type;
	uint32_t what; /* enum dnsp_log_what */
	uint64_t a, b;
	char name[DNS_NAME_MAX + 1];
};

struct dnsp_grants {
	uint32_t type;
	uint32_t n;
	struct grant v[GRANT_MAX];
};

struct dnsp_self {
	uint32_t type;
	uint32_t n;
	struct addr v[DNSP_SELF_MAX];
};

/* One port a name may be reached on, and what opened it: a host rule of the
 * policy (grant 0) or a grant, whose entries carry its id and end with it. */
struct dnsp_port {
	uint16_t port;
	uint32_t grant;
	uint32_t flags; /* ENTRY_F_ONCE at most */
	int64_t until;	/* unix seconds; 0: no end of its own */
};

/* The ports the session's host rules admitting name give it, then its live
 * grants' (at unix time now); 0 when none admits it. *wild is the first
 * wildcard rule that admits it, when no exact rule does, else -1. Shared by
 * the worker (which name exists) and the agent (what it programs). */
size_t dnsp_name_ports(const struct errand_config *cfg, const struct grant_set *grants, int64_t now,
		       const char *name, struct dnsp_port *ports, size_t max, int *wild);

/* The names a session has been allowed to resolve, under dns.maxNames and
 * dns.maxWildcardNames: a hash lookup and counters, constant time. The
 * caller owns what dnsp_names_new returns. */
struct dnsp_names;
struct dnsp_names *dnsp_names_new(const struct errand_config *cfg);
void dnsp_names_free(struct dnsp_names *t);
/* 0 when name is admitted (again, or newly under the caps, where wild is the
 * index of the wildcard rule it counts under, or -1); -EDQUOT over a cap;
 * -errno when a new name could not be written to the table's file, and
 * then it is not admitted either. */
int dnsp_names_admit(struct dnsp_names *t, const char *name, int wild);
bool dnsp_names_seen(const struct dnsp_names *t, const char *name);
/* Whether a new name counted under wild (-1: no wildcard) fits the caps. */
bool dnsp_names_room(const struct dnsp_names *t, int wild);
/* Makes fd (a regular file, read and written at its offsets) the table's
 * record: admits the names it holds, then appends each new one, so the
 * caps of a session outlive its agent. The file holds one line a name,
 * "WILD NAME\n"; a line cut short (a write the agent did not finish, whose
 * name it never answered) is ignored and written over. The table owns fd
 * from here on, on failure too. 0 or -errno. */
int dnsp_names_record(struct dnsp_names *t, int fd);

/* What the agent checks a worker's request against: the session's own. */
struct dnsp_policy {
	const struct errand_config *cfg; /* host rules, pins, caps, treatAsPublic */
	const struct grant_set *grants;	 /* NULL: none */
	const struct addr *self;	 /* the host's own addresses */
	size_t n_self;
	struct dnsp_names *names; /* the agent's own count, not the worker's */
};

/* One allow entry to program. */
struct dnsp_entry {
	struct addr addr;
	uint16_t port;
	uint64_t expires_ns;
	uint32_t flags;
	uint32_t grant;
};

/* The agent's check of a DNSP_NAME: msg (len bytes, from the worker) must
 * be a well-formed struct dnsp_name whose name the session's rules or live
 * grants admit; it is counted under the session's caps (and recorded).
 * 0, or -EBADMSG, -EPERM, -EDQUOT, or -errno (it could not be recorded). */
int dnsp_check_name(struct dnsp_policy *p, const void *msg, size_t len, int64_t unix_now);

/* The agent's checker: msg (len bytes, from the worker) must be a
 * well-formed struct dnsp_program whose name the session's rules or live
 * grants admit, under its caps, each address of the asked family, not
 * forbidden and not the host's own. Fills out (up to max) with what to
 * program, never a pinned entry, and *ttl with the TTL to answer with.
 * 0, or -EBADMSG (malformed), -EPERM (name not allowed), -EACCES (an address
 * forbidden or the host's), -EDQUOT (over a cap), -E2BIG (out too small). */
int dnsp_check(struct dnsp_policy *p, const void *msg, size_t len, uint64_t now_ns,
	       int64_t unix_now, struct dnsp_entry *out, size_t max, size_t *n_out, uint32_t *ttl);

/* The worker's descriptors: below DNSP_FD_POOL its channel, the session's
 * sockets and its TCP; from it, UDP sockets connected to its upstream
 * resolvers before its filter (DNSP_POOL_PER_SERVER each, DNSP_POOL_MAX in
 * all); from DNSP_FD_HANDOUT up to its RLIMIT_NOFILE, c-ares's copies of
 * them. */
#define DNSP_FD_POOL 160
#define DNSP_POOL_MAX 64
#define DNSP_POOL_PER_SERVER 2
#define DNSP_FD_HANDOUT (DNSP_FD_POOL + DNSP_POOL_MAX)
#define DNSP_FD_LIMIT 256

/* The worker's TCP channel to the agent (a SOCK_SEQPACKET pair), beside
 * its channel (fd 3). */
#define DNSP_FD_TCP 4

/* "Connect me to the resolver at sa (len bytes)", on the TCP channel; the
 * agent answers with a struct dnsp_tcp_answer, and the connection's socket
 * (SCM_RIGHTS) when err is 0 (connected) or EINPROGRESS (connecting). */
struct dnsp_tcp_ask {
	uint32_t type;
	uint32_t len;
	uint32_t seq; /* the answer's, so that one come too late is told apart */
	uint32_t pad;
	struct sockaddr_storage sa;
};
struct dnsp_tcp_answer {
	int32_t err;
	uint32_t seq;
};

/* The worker's seccomp allow-list, loaded into the calling process (and its
 * threads): no new socket and no connect at all, and from DNSP_FD_POOL on no
 * sendmsg and no send with an address. 0 or -errno. */
int dnsp_seccomp_load(void);
/* The worker's whole confinement, once it is errand-dns with no_new_privs:
 * opens its pool of UDP sockets connected to the upstream resolvers of ares
 * (an ares_channel) and has c-ares use them, its TCP asked of the agent on
 * tcp (DNSP_FD_TCP in the worker), then loads its Landlock rules and its
 * seccomp filter. 0 or -errno. */
int dnsp_worker_confine(void *ares, int tcp);
/* The worker's TCP, by Landlock (ABI 4, Linux 6.7): no connect and no bind
 * of its own, as its seccomp filter has it too. Needs no_new_privs. 0 or
 * -errno; 0 on a kernel without Landlock's network rules. */
int dnsp_landlock_load(void);

/* The upstream resolvers of ares (an ares_channel), as TCP reaches them
 * (c-ares's TCP port, 53 by default): up to max in out. Their number. */
size_t dnsp_tcp_servers(void *ares, struct sockaddr_storage *out, size_t max);
/* The agent's side of a worker's TCP channel: takes one ask and answers it,
 * with a non-blocking connection made here when the address and port asked
 * are one of servers[0..n), else ECONNREFUSED and nothing. 0, -EAGAIN when
 * no ask waits, or -errno when the channel is broken or the ask malformed
 * (the worker is to be ended). */
int dnsp_tcp_serve(int chan, const struct sockaddr_storage *servers, size_t n);

/* The worker is the running binary exec'd again (errand-agent's, or the
 * embedded errandctl's) with argv {"errand-dns", DNSP_WORKER_ARG, FD}: FD
 * holds its start, fd 3 is its channel. Both mains ask dnsp_worker_argv
 * first. */
#define DNSP_WORKER_ARG "--errand-dns-worker-of-the-agent"
/* Opens the running binary (/proc/self/exe, O_PATH) for the workers' exec;
 * main calls it early, so a file upgraded on disk meanwhile is never a
 * worker of this process. 0 or -errno. */
int dnsp_exe_open(void);
bool dnsp_worker_argv(int argc, char **argv);
/* The worker after its exec: reads its start, sets up c-ares, becomes
 * errand-dns without capabilities, loads its filter and serves. Its exit
 * status; the caller _exits with it (no atexit handler runs under the
 * filter). */
int dnsp_worker_exec_main(char **argv);

/* The worker's main loop (agent/dns.c), in the exec'd worker once it is
 * confined: chan is its channel to the agent, listen its DNS sockets, ch a
 * c-ares channel it set up before its filter. Returns when the agent goes away. */
struct dns_worker_args {
	const struct errand_config *cfg;
	const char *session;
	int chan;
	int listen[4];
	void *ares; /* ares_channel */
	const struct grant_set *grants;
	const struct addr *self;
	size_t n_self;
	struct dnsp_names *names; /* the names spent so far, as the agent counts them; owned */
};
int dns_worker_main(const struct dns_worker_args *a);

#endif
