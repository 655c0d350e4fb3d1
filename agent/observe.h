/* The live event stream of a session: the embedded agent serves every event,
 * unthrottled, as JSON lines on <run>/sessions/<id>.events, and
 * `errandctl observe` reads the streams of every running session. */
#ifndef ERRAND_OBSERVE_H
#define ERRAND_OBSERVE_H

#include <poll.h>
#include <stdbool.h>

#define OBSERVE_MAX_CLIENTS 16
#define OBSERVE_MAX_CLIENTS_STR "16"

struct observe_server;

/* Listens on path (a Unix stream socket, mode 0600). NULL with errno set. */
struct observe_server *observe_server_new(const char *path);
/* Closes clients and the socket, removes path. NULL-safe. */
void observe_server_free(struct observe_server *s);
/* Adds its fds to fds[*n..max). */
void observe_server_pollfds(struct observe_server *s, struct pollfd *fds, int *n, int max);
/* Accepts new clients, drops ones that hung up. */
void observe_server_process(struct observe_server *s, const struct pollfd *fds, int n);
/* Sends one JSON line to every client; a client that cannot keep up is dropped. */
void observe_broadcast(struct observe_server *s, const char *json_line);

/* errandctl observe: prints the events of session (NULL: all) under run_dir
 * until interrupted. Returns an exit status. */
int observe_main(const char *run_dir, const char *session, bool json);

#endif
