/* The control protocol (see control.h): frames are checked header first, so
 * a hostile client costs the agent 8 bytes before it is dropped, and every
 * payload is held against a table of the members its type allows. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/control.h"
#include "lib/log.h"
#include "lib/util.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13; older libc headers lack the name */
#endif

#define KIB 1024u
#define MIB (1024u * 1024u)
#define LINE_MAX_LEN 1024 /* an error or a message: one line, this long at most */
#define HOST_MAX_LEN 261  /* a 253-byte name, '*.' aside, ':' and a port */
#define LISTEN_BACKLOG 64

enum member_kind {
	M_BOOL,
	M_INT,	   /* between min and max */
	M_OBJECT,  /* any object: the agent's own answers, checked by their readers */
	M_OBJECTS, /* an array of objects */
	M_ID,	   /* a session id */
	M_HOST,	   /* a host rule, checked for its grammar by lib/hostrule.c later */
	M_LINE,	   /* one line of text */
	M_STRING,  /* any string without NUL, such as a version */
	M_PATH,	   /* absolute: the agent's working directory is not the client's */
	M_ARGV,	   /* a non-empty array of strings, the first non-empty */
	M_STRINGS, /* an array of non-empty strings */
	M_ASSIGNS, /* an array of NAME=VALUE strings with a non-empty NAME */
};

struct member {
	const char *name;
	enum member_kind kind;
	bool required;
	json_int_t min, max; /* M_INT only */
};

struct type_info {
	uint16_t type;
	const char *name;
	uint32_t max; /* payload bytes */
	const struct member *members;
	/* rules across members, after each member has been checked */
	int (*check)(const json_t *payload, char *err, size_t errlen);
};

/* Each list ends with {0}. */
static const struct member run_members[] = {
	{"argv", M_ARGV, true, 0, 0},
	{"env", M_ASSIGNS, false, 0, 0},
	{"egress", M_STRINGS, false, 0, 0},
	{"pins", M_ASSIGNS, false, 0, 0},
	{"secrets", M_STRINGS, false, 0, 0},
	{"project", M_PATH, false, 0, 0},
	{"image", M_PATH, false, 0, 0},
	{"json", M_BOOL, false, 0, 0},
	{"config", M_STRING, false, 0, 0}, /* errandctl's front: agent/ctlfront.c */
	{0},
};
static const struct member none_members[] = {{0}};
static const struct member id_members[] = {{"id", M_ID, true, 0, 0}, {0}};
static const struct member opt_id_members[] = {{"id", M_ID, false, 0, 0}, {0}};
static const struct member grant_members[] = {
	{"id", M_ID, true, 0, 0},
	{"host", M_HOST, true, 0, 0},
	{"kind", M_STRING, true, 0, 0},
	{"seconds", M_INT, false, 1, 100LL * 365 * 86400},
	{0},
};
static const struct member revoke_members[] = {
	{"id", M_ID, true, 0, 0},
	{"host", M_HOST, true, 0, 0},
	{0},
};
static const struct member ok_members[] = {{"message", M_LINE, false, 0, 0}, {0}};
static const struct member error_members[] = {
	{"error", M_LINE, true, 0, 0},
	{"request", M_BOOL, false, 0, 0},
	{0},
};
static const struct member started_members[] = {
	{"session", M_ID, true, 0, 0},
	{"relayed", M_BOOL, false, 0, 0},
	{0},
};
static const struct member exit_members[] = {
	{"session", M_ID, true, 0, 0},
	{"status", M_INT, true, 0, 255},
	{0},
};
static const struct member line_members[] = {{"line", M_LINE, true, 0, 0}, {0}};
static const struct member sessions_reply_members[] = {{"sessions", M_OBJECTS, true, 0, 0}, {0}};
static const struct member show_reply_members[] = {{"session", M_OBJECT, true, 0, 0}, {0}};
static const struct member denied_reply_members[] = {{"denied", M_OBJECTS, true, 0, 0}, {0}};
static const struct member receipts_reply_members[] = {{"receipts", M_OBJECTS, true, 0, 0}, {0}};
static const struct member version_reply_members[] = {
	{"version", M_STRING, true, 0, 0},
	{"protocol", M_INT, true, 1, 65535},
	{0},
};

static int grant_check(const json_t *payload, char *err, size_t errlen);

/* The maxima: a run carries argv and env, which execve caps near 2 MiB
 * together, so 1 MiB of JSON is room for any sane command; requests naming
 * one session need a few hundred bytes; the agent's lists may be long, and
 * so may what a start says (a line for each rule and grant). */
static const struct type_info types[] = {
	{CONTROL_RUN, "run", 1 * MIB, run_members, NULL},
	{CONTROL_SESSIONS, "sessions", 64, none_members, NULL},
	{CONTROL_SHOW, "show", 256, id_members, NULL},
	{CONTROL_STOP, "stop", 256, id_members, NULL},
	{CONTROL_GRANT, "grant", 1 * KIB, grant_members, grant_check},
	{CONTROL_REVOKE, "revoke", 1 * KIB, revoke_members, NULL},
	{CONTROL_DENIED, "denied", 256, opt_id_members, NULL},
	{CONTROL_RELOAD, "reload", 64, none_members, NULL},
	{CONTROL_VERSION_REQ, "version", 64, none_members, NULL},
	{CONTROL_RECEIPTS, "receipts", 256, opt_id_members, NULL},
	{CONTROL_OK, "ok", 4 * KIB, ok_members, NULL},
	{CONTROL_ERROR, "error", 4 * KIB, error_members, NULL},
	{CONTROL_RUN_STARTED, "run-started", 64 * KIB, started_members, NULL},
	{CONTROL_RUN_EXIT, "run-exit", 256, exit_members, NULL},
	{CONTROL_RUN_LINE, "run-line", 2 * KIB, line_members, NULL},
	{CONTROL_SESSIONS_REPLY, "sessions-reply", 16 * MIB, sessions_reply_members, NULL},
	{CONTROL_SHOW_REPLY, "show-reply", 4 * MIB, show_reply_members, NULL},
	{CONTROL_DENIED_REPLY, "denied-reply", 32 * MIB, denied_reply_members, NULL},
	{CONTROL_VERSION_REPLY, "version-reply", 4 * KIB, version_reply_members, NULL},
	{CONTROL_RECEIPTS_REPLY, "receipts-reply", 32 * MIB, receipts_reply_members, NULL},
};

static const struct type_info *type_find(uint16_t type)
{
	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		if (types[i].type == type)
			return &types[i];
	return NULL;
}

const char *control_type_name(uint16_t type)
{
	const struct type_info *t = type_find(type);

	return t ? t->name : "unknown";
}

uint32_t control_type_max(uint16_t type)
{
	const struct type_info *t = type_find(type);

	return t ? t->max : 0;
}

/* err gets one line whatever the peer sent: control characters become '?'. */
__attribute__((format(printf, 4, 5))) static int errf(char *err, size_t errlen, int rc,
						      const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return rc;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	for (char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return rc;
}

/* A member name from the peer, short enough to quote in one line. */
static const char *quote_name(const char *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s", s);
	if (strlen(s) >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}

/* jansson builds strings with embedded NULs on request; none may pass. */
static const char *string_of(const json_t *v)
{
	const char *s = json_string_value(v);

	return s && strlen(s) == json_string_length(v) ? s : NULL;
}

static bool id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > CONTROL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
	}
	return true;
}

static bool host_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > HOST_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* One line: no C0, DEL or C1 (U+0080..U+009F, which is 0xc2 0x80..0x9f). */
static bool line_valid(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);

	if (n > LINE_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (u[i] < 0x20 || u[i] == 0x7f)
			return false;
		if (u[i] == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f)
			return false;
	}
	return true;
}

static bool strings_valid(const json_t *v, enum member_kind kind)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v) || (kind == M_ARGV && !json_array_size(v)))
		return false;
	json_array_foreach(v, i, e)
	{
		const char *s = string_of(e);

		if (!s)
			return false;
		if (kind == M_ARGV && i > 0)
			continue; /* arguments may be empty strings */
		if (!*s)
			return false;
		if (kind == M_ASSIGNS && (*s == '=' || !strchr(s, '=')))
			return false;
	}
	return true;
}

static bool objects_valid(const json_t *v)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return false;
	json_array_foreach(v, i, e)
	{
		if (!json_is_object(e))
			return false;
	}
	return true;
}

/* What each kind expects, for the error line. */
static const char *kind_text(const struct member *m, char *buf, size_t len)
{
	switch (m->kind) {
	case M_BOOL:
		return "true or false";
	case M_INT:
		snprintf(buf, len, "an integer from %lld to %lld", (long long)m->min,
			 (long long)m->max);
		return buf;
	case M_OBJECT:
		return "an object";
	case M_OBJECTS:
		return "an array of objects";
	case M_ID:
		return "a session id (1 to 64 of A-Z a-z 0-9 - _)";
	case M_HOST:
		return "a host (HOST or HOST:PORT, no spaces)";
	case M_LINE:
		return "one line of text";
	case M_STRING:
		return "a string";
	case M_PATH:
		return "an absolute path";
	case M_ARGV:
		return "a non-empty array of strings, the first non-empty";
	case M_STRINGS:
		return "an array of non-empty strings";
	case M_ASSIGNS:
		return "an array of NAME=VALUE strings";
	}
	return "?";
}

static bool member_valid(const struct member *m, const json_t *v)
{
	const char *s;

	switch (m->kind) {
	case M_BOOL:
		return json_is_boolean(v);
	case M_INT:
		return json_is_integer(v) && json_integer_value(v) >= m->min &&
		       json_integer_value(v) <= m->max;
	case M_OBJECT:
		return json_is_object(v);
	case M_OBJECTS:
		return objects_valid(v);
	case M_ARGV:
	case M_STRINGS:
	case M_ASSIGNS:
		return strings_valid(v, m->kind);
	case M_ID:
	case M_HOST:
	case M_LINE:
	case M_STRING:
	case M_PATH:
		break;
	}
	s = string_of(v);
	if (!s)
		return false;
	switch (m->kind) {
	case M_ID:
		return id_valid(s);
	case M_HOST:
		return host_valid(s);
	case M_LINE:
		return line_valid(s);
	case M_PATH:
		return s[0] == '/';
	default:
		return true;
	}
}

static int grant_check(const json_t *payload, char *err, size_t errlen)
{
	const char *kind = json_string_value(json_object_get(payload, "kind"));
	bool until = !strcmp(kind, "until");

	if (!until && strcmp(kind, "once") && strcmp(kind, "always"))
		return errf(err, errlen, -EPROTO,
			    "grant: member kind: expected \"once\", \"until\" or \"always\"");
	if (until != !!json_object_get(payload, "seconds"))
		return errf(err, errlen, -EPROTO,
			    "grant: member seconds: required with kind \"until\", and only then");
	return 0;
}

static int validate(const struct type_info *t, const json_t *payload, char *err, size_t errlen)
{
	char nbuf[40], kbuf[64];
	const char *key;
	json_t *v;

	if (!json_is_object(payload))
		return errf(err, errlen, -EPROTO, "%s: payload is not a JSON object", t->name);
	json_object_foreach((json_t *)payload, key, v)
	{
		const struct member *m;

		for (m = t->members; m->name; m++)
			if (!strcmp(m->name, key))
				break;
		if (!m->name)
			return errf(err, errlen, -EPROTO, "%s: unknown member \"%s\"", t->name,
				    quote_name(key, nbuf, sizeof(nbuf)));
		if (!member_valid(m, v))
			return errf(err, errlen, -EPROTO, "%s: member %s: expected %s", t->name,
				    m->name, kind_text(m, kbuf, sizeof(kbuf)));
	}
	for (const struct member *m = t->members; m->name; m++)
		if (m->required && !json_object_get(payload, m->name))
			return errf(err, errlen, -EPROTO, "%s: member %s missing", t->name,
				    m->name);
	return t->check ? t->check(payload, err, errlen) : 0;
}

int control_validate(uint16_t type, const json_t *payload, char *err, size_t errlen)
{
	const struct type_info *t = type_find(type);

	if (!t)
		return errf(err, errlen, -EPROTO, "unknown message type %u", type);
	return validate(t, payload, err, errlen);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Everything that can be judged from the header alone, before the payload
 * is read: the version, the type and the length against the type's max. */
static int header_check(const uint8_t *hdr, const struct type_info **t, uint32_t *length, char *err,
			size_t errlen)
{
	uint16_t version = get16(hdr), type = get16(hdr + 2);
	uint32_t len = get32(hdr + 4);

	if (version != CONTROL_VERSION)
		return errf(err, errlen, -EPROTO, "protocol version %u, this agent speaks %u",
			    version, CONTROL_VERSION);
	*t = type_find(type);
	if (!*t)
		return errf(err, errlen, -EPROTO, "unknown message type %u", type);
	if (len > (*t)->max)
		return errf(err, errlen, -EMSGSIZE, "%s: payload of %u bytes, at most %u allowed",
			    (*t)->name, len, (*t)->max);
	if (len < 2)
		return errf(err, errlen, -EPROTO, "%s: payload of %u bytes cannot be an object",
			    (*t)->name, len);
	*length = len;
	return 0;
}

static int payload_parse(const struct type_info *t, const uint8_t *buf, size_t len,
			 struct control_msg *out, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *payload;
	int rc;

	/* no NULs (jansson's default), nothing after the object */
	payload = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!payload)
		return errf(err, errlen, -EPROTO, "%s: payload is not JSON: %s at byte %d", t->name,
			    jerr.text, jerr.position);
	rc = validate(t, payload, err, errlen);
	if (rc) {
		json_decref(payload);
		return rc;
	}
	out->version = CONTROL_VERSION;
	out->type = t->type;
	out->payload = payload;
	return 0;
}

int control_parse(const uint8_t *buf, size_t len, struct control_msg *out, char *err, size_t errlen)
{
	const struct type_info *t;
	uint32_t length;
	int rc;

	if (len < CONTROL_HEADER_LEN)
		return errf(err, errlen, -EPROTO, "frame of %zu bytes, shorter than a header", len);
	rc = header_check(buf, &t, &length, err, errlen);
	if (rc)
		return rc;
	if (len - CONTROL_HEADER_LEN != length)
		return errf(err, errlen, -EPROTO, "%s: header says %u payload bytes, frame has %zu",
			    t->name, length, len - CONTROL_HEADER_LEN);
	return payload_parse(t, buf + CONTROL_HEADER_LEN, length, out, err, errlen);
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (uint8_t *)buf + got, len - got);

		if (n > 0)
			got += (size_t)n;
		else if (n == 0)
			return -ECONNRESET;
		else if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* The payload a checked header announced, read and parsed. */
static int read_payload(int fd, const uint8_t *hdr, struct control_msg *out, char *err,
			size_t errlen)
{
	cleanup_free uint8_t *payload = NULL;
	const struct type_info *t;
	uint32_t length;
	int rc;

	rc = header_check(hdr, &t, &length, err, errlen);
	if (rc)
		return rc;
	payload = malloc(length ? length : 1);
	if (!payload)
		return errf(err, errlen, -ENOMEM, "%s: no memory for %u bytes", t->name, length);
	rc = read_full(fd, payload, length);
	if (rc)
		return errf(err, errlen, rc, "%s: reading %u payload bytes: %s", t->name, length,
			    strerror(-rc));
	return payload_parse(t, payload, length, out, err, errlen);
}

int control_read(int fd, struct control_msg *out, char *err, size_t errlen)
{
	uint8_t hdr[CONTROL_HEADER_LEN];
	int rc;

	rc = read_full(fd, hdr, sizeof(hdr));
	if (rc)
		return errf(err, errlen, rc, "reading a header: %s", strerror(-rc));
	return read_payload(fd, hdr, out, err, errlen);
}

int control_frame(uint16_t type, const json_t *payload, uint8_t **buf, size_t *len)
{
	const struct type_info *t = type_find(type);
	cleanup_free char *text = NULL;
	json_t *empty = NULL;
	uint8_t *frame;
	size_t n;

	if (!t)
		return -EINVAL;
	if (!payload)
		payload = empty = json_object();
	if (!payload)
		return -ENOMEM;
	if (validate(t, payload, NULL, 0)) {
		json_decref(empty);
		return -EINVAL;
	}
	text = json_dumps(payload, JSON_COMPACT);
	json_decref(empty);
	if (!text)
		return -ENOMEM;
	n = strlen(text);
	if (n > t->max)
		return -EMSGSIZE;
	frame = malloc(CONTROL_HEADER_LEN + n);
	if (!frame)
		return -ENOMEM;
	frame[0] = CONTROL_VERSION >> 8;
	frame[1] = CONTROL_VERSION & 0xff;
	frame[2] = (uint8_t)(type >> 8);
	frame[3] = (uint8_t)type;
	frame[4] = (uint8_t)(n >> 24);
	frame[5] = (uint8_t)(n >> 16);
	frame[6] = (uint8_t)(n >> 8);
	frame[7] = (uint8_t)n;
	memcpy(frame + CONTROL_HEADER_LEN, text, n);
	*buf = frame;
	*len = CONTROL_HEADER_LEN + n;
	return 0;
}

int control_write(int fd, uint16_t type, const json_t *payload)
{
	cleanup_free uint8_t *frame = NULL;
	size_t len, off = 0;
	bool is_socket = true;
	int rc;

	rc = control_frame(type, payload, &frame, &len);
	if (rc)
		return rc;
	while (off < len) {
		ssize_t n;

		/* MSG_NOSIGNAL: a client that hung up must not kill the agent */
		if (is_socket)
			n = send(fd, frame + off, len - off, MSG_NOSIGNAL);
		else
			n = write(fd, frame + off, len - off);
		if (n >= 0) {
			off += (size_t)n;
		} else if (errno == ENOTSOCK && is_socket) {
			is_socket = false;
		} else if (errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

void control_msg_free(struct control_msg *msg)
{
	if (!msg)
		return;
	json_decref(msg->payload);
	msg->payload = NULL;
}

gid_t control_group(void)
{
	struct group *gr = getgrnam(CONTROL_GROUP);

	return gr ? gr->gr_gid : CONTROL_NO_GROUP;
}

/* What is at path may be an earlier agent's socket: replaced when nothing
 * answers on it, never when an agent does, and never when it is not a
 * socket (that is someone else's file). */
static int remove_stale(const struct sockaddr_un *sa)
{
	cleanup_close int probe = -1;
	struct stat st;

	if (lstat(sa->sun_path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (probe < 0)
		return -errno;
	if (!connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) || errno == EAGAIN)
		return -EADDRINUSE;
	if (errno != ECONNREFUSED)
		return -errno;
	if (unlink(sa->sun_path) && errno != ENOENT)
		return -errno;
	return 0;
}

int control_listen(const char *path, gid_t group)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	cleanup_close int fd = -1;
	struct stat st;
	int rc;

	if (path_fmt(sa.sun_path, sizeof(sa.sun_path), "%s", path))
		return -ENAMETOOLONG;
	rc = remove_stale(&sa);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* 0600 from birth: nobody but root can connect before the group is set.
	 * The socket's own mode, which bind gives its file: the umask is the
	 * whole process's, and changing it raced the start threads' files. */
	if (fchmod(fd, 0600) || bind(fd, (const struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	/* the owner before the mode, so 0660 never meets the wrong group */
	if (lstat(path, &st))
		rc = -errno;
	else if (!S_ISSOCK(st.st_mode))
		rc = -EEXIST; /* replaced under us: the directory is not ours alone */
	else if (lchown(path, 0, group == CONTROL_NO_GROUP ? 0 : group) ||
		 fchmodat(AT_FDCWD, path, group == CONTROL_NO_GROUP ? 0600 : 0660,
			  AT_SYMLINK_NOFOLLOW) ||
		 listen(fd, LISTEN_BACKLOG))
		rc = -errno;
	if (rc) {
		if (rc != -EEXIST)
			unlink(path);
		return rc;
	}
	return steal_fd(&fd);
}

int control_peer_allowed(int fd, gid_t group)
{
	cleanup_free gid_t *groups = NULL;
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	if (cr.uid == 0)
		return 0;
	if (group != CONTROL_NO_GROUP) {
		if (cr.gid == group)
			return 0;
		/* SO_PEERGROUPS, not /proc/<pid>/status: the groups the peer
		 * had at connect, which a reused pid cannot change */
		len = 0;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, NULL, &len) && errno != ERANGE)
			return -errno;
		if (len) {
			groups = malloc(len);
			if (!groups)
				return -ENOMEM;
			if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len))
				return -errno;
		}
		for (size_t i = 0; i < len / sizeof(gid_t); i++)
			if (groups[i] == group)
				return 0;
	}
	if (group == CONTROL_NO_GROUP)
		log_warnx("control: refused peer uid %u pid %d: only root may use the socket",
			  cr.uid, cr.pid);
	else
		log_warnx("control: refused peer uid %u pid %d: neither root nor in the control "
			  "group (gid %u)",
			  cr.uid, cr.pid, group);
	return -EACCES;
}

int control_header(const uint8_t hdr[CONTROL_HEADER_LEN], uint16_t *type, uint32_t *length,
		   char *err, size_t errlen)
{
	const struct type_info *t;
	int rc = header_check(hdr, &t, length, err, errlen);

	if (!rc)
		*type = t->type;
	return rc;
}

/* Descriptors ride with the first byte of a frame: sendmsg with SCM_RIGHTS,
 * then the rest as control_write would send it. */
int control_write_fds(int fd, uint16_t type, const json_t *payload, const int *fds, int nfds)
{
	cleanup_free uint8_t *frame = NULL;
	union {
		char buf[CMSG_SPACE(sizeof(int) * CONTROL_FDS_MAX)];
		struct cmsghdr align;
	} u = {};
	struct iovec iov;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;
	size_t len, off;
	ssize_t n;
	int rc;

	if (nfds < 1 || nfds > CONTROL_FDS_MAX)
		return -EINVAL;
	rc = control_frame(type, payload, &frame, &len);
	if (rc)
		return rc;
	iov.iov_base = frame;
	iov.iov_len = len;
	mh.msg_control = u.buf;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n < 0 ? -errno : -EPIPE;
	for (off = (size_t)n; off < len; off += (size_t)n) {
		n = send(fd, frame + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

ssize_t control_recv(int fd, void *buf, size_t len, int *fds, int *nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * CONTROL_FDS_MAX)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n;

	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;

			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			/* more than the frame may carry: never kept */
			if (*nfds < CONTROL_FDS_MAX)
				fds[(*nfds)++] = got;
			else
				close(got);
		}
	}
	/* cut short: a descriptor may have been lost; the frame is refused */
	if (mh.msg_flags & MSG_CTRUNC)
		return -EPROTO;
	return n;
}

int control_read_fds(int fd, struct control_msg *out, int *fds, int *nfds, char *err, size_t errlen)
{
	uint8_t hdr[CONTROL_HEADER_LEN];
	size_t got = 0;

	*nfds = 0;
	while (got < sizeof(hdr)) {
		ssize_t n = control_recv(fd, hdr + got, sizeof(hdr) - got, fds, nfds, 0);

		if (n < 0)
			return errf(err, errlen, (int)n, "reading a header: %s", strerror((int)-n));
		if (n == 0)
			return errf(err, errlen, -ECONNRESET, "reading a header: the peer closed");
		got += (size_t)n;
	}
	return read_payload(fd, hdr, out, err, errlen);
}
