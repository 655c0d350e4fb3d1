/* The agent's session table in SQLite (state.db under paths.state): what runs,
 * where its kernel objects are, how it ended; the connections it was
 * refused. What a restarted agent re-adopts from. (A session's grants live in
 * grants.json in its record directory: agent/grant.h.) */
#ifndef ERRAND_STATE_H
#define ERRAND_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define STATE_DB_NAME "state.db"
#define STATE_SCHEMA_VERSION 2
#define STATE_DENIED_KEEP 1000 /* refusals kept per session, the newest */
/* Refusals listed for every session at once (errandctl denied): the newest,
 * so the answer stays a few megabytes whatever the sessions of a week were. */
#define STATE_DENIED_ALL_MAX 10000
#define STATE_BUSY_MS 5000

/* One connection; not to be shared between threads (open one per thread
 * or process: SQLite's WAL serializes their writes). */
struct state;

enum state_status {
	STATE_RUNNING,
	STATE_EXITED,
};

/* A session's row. NULL strings are SQL NULLs (a session without network
 * has no netns, host_if, address or gateway). */
struct state_session {
	const char *id;
	int64_t created;     /* unix seconds; 0 on add means now */
	const char *command; /* JSON array: argv */
	const char *mode;    /* "restricted", "open", "none" */
	const char *policy;  /* JSON object */
	const char *cgroup, *netns, *bpf, *host_if, *address, *gateway;
	pid_t launcher_pid;
	/* the launcher's start time in clock ticks (field 22 of /proc/<pid>/stat):
	 * with the pid, tells the launcher from a later process given its pid */
	uint64_t launcher_start;
	enum state_status status; /* add always stores STATE_RUNNING */
	int exit_status;	  /* -1 while running */
	int64_t ended;		  /* unix seconds; 0 while running */
};

struct state_denied {
	const char *session;
	int64_t at;				  /* unix seconds; 0 on add means now */
	const char *name, *addr, *proto, *reason; /* any may be NULL */
	uint16_t port;
};

/* Callbacks see rows whose strings live until they return. A callback's
 * nonzero return stops the walk and is returned. It may call state
 * functions, except the walk it is in. */
typedef int (*state_session_cb)(const struct state_session *s, void *arg);
typedef int (*state_denied_cb)(const struct state_denied *d, void *arg);

/* Opens (creating 0600, WAL, migrating to STATE_SCHEMA_VERSION) the
 * database at path. The caller owns the result: state_close. NULL with errno
 * set, and one log line naming path, on failure: -ENOTSUP when it was
 * written by a newer errand. */
struct state *state_open(const char *path);
/* In a child forked after the open, frees the memory alone. */
void state_close(struct state *st);
/* state_open of state_dir/state.db, making state_dir (0711) when missing. */
struct state *state_open_dir(const char *state_dir);

/* Every function returns 0 or -errno: -EBUSY when another connection held
 * the database past STATE_BUSY_MS, -EEXIST for a duplicate key, -ENOENT
 * for a session that is not there, -EINVAL for values out of
 * range, -ECHILD in a child forked after the open (which must open its own),
 * -EIO for anything else SQLite said (logged with the file). */
int state_session_add(struct state *st, const struct state_session *s);
/* The session's row in one allocation the caller frees with
 * state_session_free; NULL with errno ENOENT when there is none. */
struct state_session *state_session_get(struct state *st, const char *id);
void state_session_free(struct state_session *s);
/* Every session, oldest first. */
int state_session_list(struct state *st, state_session_cb cb, void *arg);
/* Marks the session exited now; -EALREADY when it already was (the first
 * exit status stands). */
int state_session_end(struct state *st, const char *id, int exit_status);
/* Deletes the session and its refusals. */
int state_session_remove(struct state *st, const char *id);

/* Records a refusal, dropping the session's oldest beyond STATE_DENIED_KEEP,
 * batched: rows wait (copied) until state_denied_flush(), which writes them
 * in one transaction, dropping alone the row of a session no longer there;
 * a full queue flushes first. The agent flushes once a loop turn, so a
 * burst of refusals costs one commit. */
#define STATE_DENIED_QUEUE 64
int state_denied_queue(struct state *st, const struct state_denied *d);
int state_denied_flush(struct state *st);
/* Refusals of one session (or of all, session NULL), oldest first. */
int state_denied_list(struct state *st, const char *session, state_denied_cb cb, void *arg);

/* The start time of pid in clock ticks since boot, from /proc/<pid>/stat:
 * 0 and *start, or -ENOENT when no such process. */
int state_pid_start(pid_t pid, uint64_t *start);

#endif
