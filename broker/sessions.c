/* The broker's session table. The agent registers a session with its source
 * address and stand-ins before the session runs, and unregisters it when it
 * stops: from then on its stand-ins are honoured nowhere, and every
 * connection it had open is shut, upstream side included. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "broker/sessions.h"
#include "broker/blog.h"

#define DENIED_INTERVAL_S 60

struct session {
	char id[BROKER_SESSION_MAX + 1];
	struct addr src;
	struct broker_standin standins[BROKER_PROVIDERS_MAX];
	size_t n_standins;
	time_t denied_at; /* when a denied call was last recorded; 0: never */
	uint64_t denied_unrecorded;
	struct session *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct session *sessions;
static struct session_link *links;

static struct session **find_id(const char *id)
{
	struct session **s = &sessions;

	while (*s && strcmp((*s)->id, id))
		s = &(*s)->next;
	return s;
}

static struct session *find_src(const struct addr *src)
{
	struct session *s = sessions;

	while (s && memcmp(&s->src, src, sizeof(*src)))
		s = s->next;
	return s;
}

/* Shuts every connection from src: a pending read on either side ends, and
 * its thread finds the session gone. */
static void links_shut(const struct addr *src)
{
	for (struct session_link *l = links; l; l = l->next) {
		if (memcmp(&l->peer, src, sizeof(*src)))
			continue;
		shutdown(l->client_fd, SHUT_RDWR);
		if (l->upstream_fd >= 0)
			shutdown(l->upstream_fd, SHUT_RDWR);
	}
}

static int do_register(const struct broker_msg *m, char *reply, size_t len)
{
	struct session *s, *other;
	char a[ADDR_STRLEN];

	other = find_src(&m->src);
	if (other && strcmp(other->id, m->session)) {
		snprintf(reply, len, "error exists: %s holds that address", other->id);
		return -EEXIST;
	}
	s = *find_id(m->session);
	if (s && memcmp(&s->src, &m->src, sizeof(m->src))) {
		snprintf(reply, len, "error exists: session %s is registered from another address",
			 m->session);
		return -EEXIST;
	}
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s) {
			snprintf(reply, len, "error out of memory");
			return -ENOMEM;
		}
		snprintf(s->id, sizeof(s->id), "%s", m->session);
		s->src = m->src;
		s->next = sessions;
		sessions = s;
	}
	memcpy(s->standins, m->standins, sizeof(m->standins));
	s->n_standins = m->n_standins;
	blog_info("session=%s registered from %s with %zu provider%s", s->id, addr_str(&s->src, a),
		  s->n_standins, s->n_standins == 1 ? "" : "s");
	snprintf(reply, len, "ok");
	return 0;
}

static int do_unregister(const struct broker_msg *m, char *reply, size_t len)
{
	struct session **p = find_id(m->session), *s = *p;

	if (!s) {
		snprintf(reply, len, "error unknown session %s", m->session);
		return -ENOENT;
	}
	*p = s->next;
	links_shut(&s->src);
	blog_info("session=%s stopped: its stand-ins are no longer honoured", s->id);
	explicit_bzero(s->standins, sizeof(s->standins));
	free(s);
	snprintf(reply, len, "ok");
	return 0;
}

int sessions_handle(const struct broker_msg *m, char *reply, size_t len)
{
	int rc;

	pthread_mutex_lock(&lock);
	rc = m->type == BROKER_MSG_REGISTER ? do_register(m, reply, len)
					    : do_unregister(m, reply, len);
	pthread_mutex_unlock(&lock);
	return rc;
}

bool sessions_lookup(const struct addr *src, const char *provider, char id[BROKER_SESSION_MAX + 1],
		     char standin[BROKER_STANDIN_LEN + 1])
{
	struct session *s;

	pthread_mutex_lock(&lock);
	s = find_src(src);
	standin[0] = '\0';
	if (s) {
		strcpy(id, s->id);
		for (size_t i = 0; provider && i < s->n_standins; i++)
			if (!strcmp(s->standins[i].provider, provider))
				strcpy(standin, s->standins[i].value);
	}
	pthread_mutex_unlock(&lock);
	return s != NULL;
}

bool sessions_denied_due(const char *id, uint64_t *unrecorded)
{
	time_t now = time(NULL);
	struct session *s;
	bool due = false;

	pthread_mutex_lock(&lock);
	s = *find_id(id);
	if (s) {
		if (!s->denied_at || now - s->denied_at >= DENIED_INTERVAL_S) {
			due = true;
			*unrecorded = s->denied_unrecorded;
			s->denied_unrecorded = 0;
			s->denied_at = now;
		} else {
			s->denied_unrecorded++;
		}
	}
	pthread_mutex_unlock(&lock);
	return due;
}

void sessions_link_add(struct session_link *l)
{
	pthread_mutex_lock(&lock);
	l->prev = NULL;
	l->next = links;
	if (links)
		links->prev = l;
	links = l;
	pthread_mutex_unlock(&lock);
}

void sessions_link_del(struct session_link *l)
{
	pthread_mutex_lock(&lock);
	if (l->prev)
		l->prev->next = l->next;
	else
		links = l->next;
	if (l->next)
		l->next->prev = l->prev;
	pthread_mutex_unlock(&lock);
}

void sessions_link_upstream(struct session_link *l, int fd)
{
	pthread_mutex_lock(&lock);
	l->upstream_fd = fd;
	pthread_mutex_unlock(&lock);
}
