/* A session from start to teardown, as the daemon and the embedded agent run
 * it: cgroup, network namespace, veth and NAT, BPF enforcement verified, the
 * record written, then the launcher; afterwards everything removed again.
 * The launcher is the session's supervisor: a session outlives the agent
 * that started it, and a restarted agent adopts it (session_adopt). */
#ifndef ERRAND_SESSION_H
#define ERRAND_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "agent/state.h"
#include "lib/config.h"

#define SESSION_ID_LEN 8

struct session;

struct session_params {
	const char *config_text; /* the agent's configuration as last read; NULL: defaults */
	const char *config_path; /* where it came from, for messages */
	const json_t *request;	 /* the run request (agent/request.h) */
	const int *stdio;	 /* the command's stdin, stdout, stderr; NULL: this process's */
	const sigset_t *sigmask; /* the launcher's signal mask; NULL: none blocked */
	bool embedded;		 /* errandctl's own agent: events to its stderr */
	/* Where the start's statements go, a line each (gaps, grants, rules,
	 * weakened guarantees, or why it was refused): the caller's stderr, or
	 * what the agent relays to its client. NULL: this process's stderr. */
	FILE *say;
	/* say's buffer (open_memstream's), or NULL: read once the start has
	 * said everything and handed to the launcher, whose command's stderr
	 * gets the lines before the command's own. Whoever relays say to the
	 * caller then leaves them out of a start that succeeded. */
	char *const *say_buf;
	struct state *st; /* state.db, where the session is recorded; may be NULL */
	/* A network prepared ahead (session_net_prepare), of the kind asked
	 * for (none: a session without network, --egress none), from the
	 * thread that starts it; the session takes it whole or tears it down.
	 * NULL (or a NULL answer): it makes its own. */
	struct session *(*take_net)(void *arg, bool none);
	void *take_arg;
	/* Set true when the run request itself is refused under the
	 * configuration, as errandctl checks it before it asks (request.h),
	 * before anything of the session is made. May be NULL. */
	bool *request_refused;
};

/* Makes the session and starts its command. NULL with one line in err
 * naming what failed and what to change, set where it failed (nothing is left
 * behind). Touches no object of another session and, with p->st NULL,
 * nothing the daemon's loop uses: the daemon runs it in a job thread. */
struct session *session_start(const struct session_params *p, char *err, size_t errlen);
/* sandbox.pool: a session's network made ahead of its start under the
 * configuration config_text, a fresh id holding its lock, its cgroup, its
 * network namespace, veth pair, addresses and NAT, and its maps in the
 * program set (nothing attached). With none, for a session without network:
 * the namespace has lo alone, no veth, no address, no NAT. A start takes it
 * whole (session_params.take_net); it is never used twice. NULL with one
 * line in err, nothing left behind. */
struct session *session_net_prepare(const char *config_text, const char *config_path, bool none,
				    char *err, size_t errlen);
/* Tears a prepared network down; NULL is nothing. */
void session_net_discard(struct session *n);
/* Takes over a live session another agent started, from its row in state.db,
 * its record under state_dir and its pins: DNS answers, events and grants
 * are served again. NULL with one line in err (errno ESRCH: its launcher is
 * gone, and what is left of it is the sweep's). */
struct session *session_adopt(const struct state_session *row, const char *state_dir,
			      struct state *st, char *err, size_t errlen);
struct loop;
/* Called on the loop once the command has ended (session_status then has its
 * exit status); the session is still attached. */
typedef void (*session_ended_fn)(struct session *s, void *arg);
/* Registers every descriptor of the session with l, each with its handler,
 * and a hook that serves DNS and events once a turn. 0 or -errno. */
int session_attach(struct session *s, struct loop *l, session_ended_fn fn, void *arg);
/* Takes them off the loop again (before session_end or session_detach, and
 * before the session is handed to another thread). */
void session_unattach(struct session *s);
/* The daemon starts sessions in a job thread without state.db (which the
 * loop uses): it records the session there once the job is done, and its
 * end before the teardown job. */
void session_record_state(struct session *s, struct state *st);
void session_record_end(struct session *s);
/* Sessions started or adopted from now on send their events to obs (the
 * agent's stream, which the caller serves and frees) instead of serving
 * their own on <run>/sessions/<id>.events. Before any session starts. */
struct observe_server;
void session_observe_shared(struct observe_server *obs);
/* The caller of errandctl run, when an agent runs the session: line gets
 * each line embedded errandctl prints on its stderr for the session
 * (refusals, held-back counts, suggestions); exited the command's status
 * from the session's PID 1, once every process of the session has ended
 * and after the lines of all its refusals, ahead of the launcher's end
 * (never for relayed output, nor when PID 1 ends without saying: then
 * session_ended_fn says it). Both run on the loop. Set once the session is
 * attached; NULL stops them. */
struct session_caller {
	void (*line)(const char *line, void *arg);
	void (*exited)(int status, void *arg);
};
void session_caller_set(struct session *s, const struct session_caller *to, void *arg);
/* Kills every process of the session (the launcher reports 137). */
void session_stop(struct session *s);
/* Rereads grants.json: the next DNS answer and connect see it. */
int session_grants_reload(struct session *s);
/* Records the exit, removes every object of the session, frees s. */
void session_end(struct session *s);
/* Frees what this process holds and leaves the session running: its pins
 * keep enforcing, and another agent may adopt it. */
void session_detach(struct session *s);

const char *session_id(const struct session *s);
pid_t session_pid(const struct session *s);
int session_pidfd(const struct session *s);
int session_status(const struct session *s);
/* What errandctl run exits with for a session's status: 125 when it has
 * none (errand could not tell how it ended), else its low byte. */
int session_exit_code(int status);
/* Whether its stdout and stderr go through an output relay (agent/outscrub.h):
 * then it ends, for session_ended_fn, once the relay has written everything. */
bool session_output_relayed(const struct session *s);
/* Whether it took a network prepared ahead (sandbox.pool). */
bool session_net_prepared(const struct session *s);
const char *session_record_dir(const struct session *s);
const struct errand_config *session_config(const struct session *s);

/* The embedded agent: starts the session, serves it until the command ends,
 * passing on the signals errandctl gets, and removes it. Returns the exit
 * status errandctl should give: CMD's own, or 125 when errand could not
 * start it (one line on stderr says why; nothing is left behind). */
int session_run(const struct session_params *p);
/* Removes what ended sessions left: every session object under cfg's paths
 * and in this network namespace whose session holds no lock. Count or
 * -errno. */
int session_sweep(const struct errand_config *cfg);
/* paths.bpf made, and bpffs mounted at /sys/fs/bpf first when nothing is
 * there and paths.bpf is under it. 0 or -errno. */
int session_bpffs_ensure(const char *bpf_dir);

#endif
