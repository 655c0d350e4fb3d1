/* errandctl's side of the control socket: finding the daemon, one request
 * and its answer, and run, which hands the command's stdin, stdout and
 * stderr to the agent and waits for the session's end even across an agent
 * restart. */
#ifndef ERRAND_CLIENT_H
#define ERRAND_CLIENT_H

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>

#include "agent/control.h"

struct agent_conn;

/* Connects to <run_dir>/agent.sock. NULL with errno ENOENT, ECONNREFUSED,
 * ENOTDIR or ENAMETOOLONG when no agent runs there (none could); with any
 * other (this user may not talk to it, it takes no connection, this process
 * has no descriptor left) after one line on stderr saying so:
 * agent_connect_said. No session starts beside an agent that may run. */
struct agent_conn *agent_connect(const char *run_dir);
static inline bool agent_connect_said(int e)
{
	return e != ENOENT && e != ECONNREFUSED && e != ENOTDIR && e != ENAMETOOLONG;
}
void agent_close(struct agent_conn *ac);
/* Sends one request and reads its answer into reply. 0, or -errno with one
 * line in err (an error answer is 0 with reply->type CONTROL_ERROR). */
int agent_call(struct agent_conn *ac, uint16_t type, const json_t *payload,
	       struct control_msg *reply, char *err, size_t errlen);
/* errandctl run through the agent: the exit status to give. */
int client_run(struct agent_conn *ac, const json_t *request, const char *run_dir);

#endif
