/* The control protocol between errandctl and errand-agent on the Unix socket
 * (/run/errand/agent.sock): framing, per-type size limits checked before the
 * payload is read, payload validation, and the socket's server-side guards. */
#ifndef ERRAND_CONTROL_H
#define ERRAND_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>

/*
 * A frame is an 8-byte header in network byte order (big endian), then the
 * payload:
 *
 *	u16 version	CONTROL_VERSION; any other is refused
 *	u16 type	enum control_type; an unknown type is refused
 *	u32 length	payload bytes; at most the type's maximum, checked
 *			before a byte of the payload is read
 *
 * The payload is one JSON object (UTF-8, no NUL, no duplicate keys, nothing
 * after it) holding exactly the members its type allows, with their types:
 * an unknown member is refused rather than ignored, so an option a newer
 * errandctl sends is never silently dropped by an older agent.
 *
 * Requests (errandctl to agent) and their answers:
 *	run	 {argv: [str]+, env?: [str], egress?: [str], pins?: [str],
 *		  secrets?: [str], project?: str, image?: str, json?: bool,
 *		  config?: str}
 *		 -> run-started {session: id, relayed?: bool}, later run-exit
 *		 {session: id, status: 0..255}, and between them any number
 *		 of run-line {line: "one line"}: a refusal of the session's
 *		 for the caller's stderr, as embedded errandctl prints it
 *		 (printable ASCII, at most 2 KiB); relayed: the session's output
 *		 goes through the agent's relay (agent/outscrub.h), and run-exit
 *		 comes once all of it has reached the caller. config: the text
 *		 of the configuration the client named, sent by a client that
 *		 did not check the run against it (errandctl's front,
 *		 agent/ctlfront.c); a text not the agent's own is refused
 *	sessions {}			-> sessions-reply {sessions: [object]}
 *	show	 {id}			-> show-reply {session: object}
 *	stop	 {id}			-> ok
 *	grant	 {id, host, kind: "once"|"until"|"always", seconds?: int}
 *		 (seconds > 0 exactly when kind is "until") -> ok
 *	revoke	 {id, host}		-> ok
 *	denied	 {id?}			-> denied-reply {denied: [object]}
 *	reload	 {}			-> ok
 *	version	 {}			-> version-reply {version: str, protocol: int}
 *	receipts {id?}			-> receipts-reply {receipts: [object]}
 * Any request may be answered with error {error: "one line", request?:
 * bool} instead; request: the run request itself is refused under the
 * configuration (errandctl's own checks refuse it in the same words). ok
 * may carry {message?: "one line"}. A session id is 1..64 of [A-Za-z0-9_-].
 */
#define CONTROL_VERSION 1
#define CONTROL_HEADER_LEN 8
#define CONTROL_SOCKET_PATH "/run/errand/agent.sock"
#define CONTROL_GROUP "errand"
#define CONTROL_ID_MAX 64
/* How long a client's connect waits for an agent whose queue of
 * connections is full: one that has taken none for so long is stuck, not
 * busy (the queue holds LISTEN_BACKLOG). */
#define CONTROL_CONNECT_S 10
/* Both errandctl binaries' refusal when no descriptor is left for the
 * session's pidfd. */
#define CONTROL_NO_FD                                                                              \
	"no file descriptor is left to follow the session with (ulimit -n); raise the limit"
/* No socket group: the socket is root's alone (0600). */
#define CONTROL_NO_GROUP ((gid_t)-1)

/* Answers have the high bit set, so a peer can tell a request from one. */
#define CONTROL_REPLY 0x8000
enum control_type {
	CONTROL_RUN = 1,
	CONTROL_SESSIONS = 2,
	CONTROL_SHOW = 3,
	CONTROL_STOP = 4,
	CONTROL_GRANT = 5,
	CONTROL_REVOKE = 6,
	CONTROL_DENIED = 7,
	CONTROL_RELOAD = 8,
	CONTROL_VERSION_REQ = 9,
	CONTROL_RECEIPTS = 10,

	CONTROL_OK = CONTROL_REPLY | 1,
	CONTROL_ERROR = CONTROL_REPLY | 2,
	CONTROL_RUN_STARTED = CONTROL_REPLY | 3,
	CONTROL_RUN_EXIT = CONTROL_REPLY | 4,
	CONTROL_SESSIONS_REPLY = CONTROL_REPLY | 5,
	CONTROL_SHOW_REPLY = CONTROL_REPLY | 6,
	CONTROL_DENIED_REPLY = CONTROL_REPLY | 7,
	CONTROL_VERSION_REPLY = CONTROL_REPLY | 8,
	CONTROL_RECEIPTS_REPLY = CONTROL_REPLY | 9,
	CONTROL_RUN_LINE = CONTROL_REPLY | 10,
};

struct control_msg {
	uint16_t version;
	uint16_t type;
	json_t *payload; /* owned; control_msg_free drops it */
};

/* Reads one frame from fd, blocking (a timeout is the caller's, through
 * SO_RCVTIMEO: it surfaces as -EAGAIN). 0 and *out filled; -EPROTO for a
 * malformed frame (bad version, unknown type, bad JSON or members),
 * -EMSGSIZE when the header claims more than the type allows (nothing of
 * the payload has been read), -ECONNRESET on EOF, other -errno from read.
 * On error err holds one line saying why and *out is untouched. */
int control_read(int fd, struct control_msg *out, char *err, size_t errlen);
/* A frame's header alone: 0 with *type and *length (at most the type's
 * maximum), else as control_read. For a reader that gathers the payload
 * itself without blocking. */
int control_header(const uint8_t hdr[CONTROL_HEADER_LEN], uint16_t *type, uint32_t *length,
		   char *err, size_t errlen);
/* Descriptors passed along a frame (SCM_RIGHTS): the command's stdin,
 * stdout and stderr with run; the launcher's pidfd with run-started. */
#define CONTROL_FDS_MAX 3
/* control_write, with nfds descriptors riding on the frame. */
int control_write_fds(int fd, uint16_t type, const json_t *payload, const int *fds, int nfds);
/* One recvmsg: bytes read (0 at EOF) or -errno; descriptors that came along
 * are appended to fds[*nfds..CONTROL_FDS_MAX) (close-on-exec), extra ones
 * closed; -EPROTO when some were cut off. */
ssize_t control_recv(int fd, void *buf, size_t len, int *fds, int *nfds, int flags);
/* control_read, keeping the descriptors that came with the frame. */
int control_read_fds(int fd, struct control_msg *out, int *fds, int *nfds, char *err,
		     size_t errlen);
/* Checks payload against type (NULL is {}), then writes the frame in full.
 * -EINVAL when the payload is not what type allows, -EMSGSIZE when too
 * long, -EPIPE when the peer has gone (no SIGPIPE), other -errno. */
int control_write(int fd, uint16_t type, const json_t *payload);
/* The frame control_write would send, in a malloc'd buffer the caller
 * frees. 0, -EINVAL, -EMSGSIZE or -ENOMEM. */
int control_frame(uint16_t type, const json_t *payload, uint8_t **buf, size_t *len);
/* Parses exactly one whole frame in buf[0..len) with every check
 * control_read makes; same returns, except a short buffer is -EPROTO. */
int control_parse(const uint8_t *buf, size_t len, struct control_msg *out, char *err,
		  size_t errlen);
/* Checks a payload against a type's members, as parse and write do. */
int control_validate(uint16_t type, const json_t *payload, char *err, size_t errlen);
/* Releases msg's payload; NULL-safe, msg may be freed twice. */
void control_msg_free(struct control_msg *msg);
/* "run", "sessions-reply", ...; "unknown" for a type that isn't one. */
const char *control_type_name(uint16_t type);
/* The largest payload a type may carry; 0 for an unknown type. */
uint32_t control_type_max(uint16_t type);
static inline bool control_type_is_request(uint16_t type)
{
	return !(type & CONTROL_REPLY);
}

/* The errand group's gid, or CONTROL_NO_GROUP when there is none. */
gid_t control_group(void);
/* Binds and listens on path (an old socket there is replaced unless an
 * agent answers on it: -EADDRINUSE); created under umask 0177 so it is
 * never reachable by others, then 0660 root:group, or 0600 root:root for
 * CONTROL_NO_GROUP. The directory must be root's and not writable by
 * others. The listening fd (CLOEXEC, blocking) or -errno. */
int control_listen(const char *path, gid_t group);
/* The peer's credentials as the kernel took them at connect (SO_PEERCRED,
 * SO_PEERGROUPS): 0 when it is root or in group (primary or supplementary),
 * -EACCES when not (one log line names its uid and pid), other -errno. */
int control_peer_allowed(int fd, gid_t group);

#endif
