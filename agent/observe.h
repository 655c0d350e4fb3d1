/* The live event stream: every event, unthrottled, as JSON lines. errand-agent
 * serves those of all its sessions on <run>/observe.sock (an observer
 * connected before a session starts has all of its events, however short
 * the session); an embedded errandctl serves its session's on
 * <run>/sessions/<id>.events. `errandctl observe` reads them all. */
#ifndef ERRAND_OBSERVE_H
#define ERRAND_OBSERVE_H

#include <poll.h>
#include <stdbool.h>
#include <sys/types.h>

#define OBSERVE_MAX_CLIENTS 16
#define OBSERVE_MAX_CLIENTS_STR "16"

struct observe_server;

#define OBSERVE_AGENT_SOCKET "observe.sock" /* under paths.run */

/* Listens on path (a Unix stream socket, mode 0600), for root's readers
 * only. NULL with errno set. */
struct observe_server *observe_server_new(const char *path);
/* The listening socket, for a caller that polls it alone
 * (observe_server_process with it accepts, and drops clients that hung up). */
int observe_server_fd(const struct observe_server *s);
/* Makes it the agent's stream of all its sessions: members of group (a gid;
 * CONTROL_NO_GROUP: none) may watch too, as they may ask errand-agent for
 * denied, anyone else is dropped at once whatever the socket file's mode;
 * each reader gets a buffer for every session's bursts. */
void observe_server_agent(struct observe_server *s, gid_t group);
/* What a reader of the agent's stream is sent first: hello(arg) returns one
 * JSON line, malloc'd ({"event":"running","sessions":[IDS]}, the sessions
 * whose "ended" it would otherwise wait for), or NULL to send none. */
void observe_server_hello(struct observe_server *s, char *(*hello)(void *arg), void *arg);
/* Closes clients and the socket, removes path. NULL-safe. */
void observe_server_free(struct observe_server *s);
/* Adds its fds to fds[*n..max). */
void observe_server_pollfds(struct observe_server *s, struct pollfd *fds, int *n, int max);
/* Accepts new clients, drops ones that hung up. */
void observe_server_process(struct observe_server *s, const struct pollfd *fds, int n);
/* Sends one JSON line to every client; a client that cannot keep up is dropped. */
void observe_broadcast(struct observe_server *s, const char *json_line);

/* errandctl observe: prints the events of session (NULL: all) under run_dir
 * until interrupted, or, for one session, until it ends (0). 125 with one
 * line when no session of that id is running, or this user may read no
 * stream. */
int observe_main(const char *run_dir, const char *session, bool json);

#endif
