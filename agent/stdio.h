/* errandctl's stdio relay: a session never holds a socket of its caller's.
 * Each of stdin, stdout and stderr that is a socket (of any family: a unix
 * datagram socket reaches the caller's abstract namespace, a UDP one the
 * network) is replaced by a pipe, and a relay process of errandctl copies
 * between the two; the session, whichever agent runs it, gets the pipe. */
#ifndef ERRAND_STDIO_H
#define ERRAND_STDIO_H

#include <stdbool.h>
#include <sys/types.h>

struct stdio_relay {
	pid_t pid; /* 0: no stdio is a socket, nothing relays */
};

/* True when fd is open and a socket. */
bool stdio_is_socket(int fd);
/* Puts a relayed pipe in place of each of fds 0..2 that is a socket.
 * 0, or -errno with the fds as they were. */
int stdio_relay_start(struct stdio_relay *r);
/* Once the session has ended: closes this process's stdio and waits until
 * the relay has written out everything the session wrote. */
void stdio_relay_finish(struct stdio_relay *r);

#endif
