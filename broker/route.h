/* A provider route as errand-broker serves it: its definition from the
 * configuration, its TLS context (system roots plus trustedCa), and the real
 * key, which the agent reads from credentialFile as root and hands over the
 * registry, and reads again when the provider refused it. The broker never
 * opens a credential file. */
#ifndef ERRAND_BROKER_ROUTE_H
#define ERRAND_BROKER_ROUTE_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/config.h"

#define ROUTE_KEY_MAX 4096
#define ROUTE_VAR_MAX 128

struct route {
	const struct config_provider *p; /* in the broker's errand_config */
	SSL_CTX *tls;			 /* NULL for plain http to loopback */
	char key_var[ROUTE_VAR_MAX];	 /* the variable the stand-in is given in */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a key was handed */
	char *key;		/* under lock; NULL until the agent hands it */
	size_t key_len;
	unsigned long generation; /* under lock: keys handed so far */
};

/* Readies r for p: the TLS context with its roots. 0, or -errno with one line
 * in err naming the file to fix. */
int route_init(struct route *r, const struct config_provider *p, char *err, size_t errlen);
void route_free(struct route *r); /* NULL-safe; wipes the key */

/* Copies the key into buf (cap bytes). Its length, or -ENOKEY while the
 * agent has handed none, -ENOBUFS. */
int route_key(struct route *r, char *buf, size_t cap);
/* The agent handed the key (a copy is kept). 0 or -ENOMEM. */
int route_key_set(struct route *r, const char *key, size_t len);
/* Forgets the key, wiped. */
void route_key_drop(struct route *r);
/* The provider refused the key: asks the agent to read credentialFile again
 * and waits up to wait_ms for a fresh key, so the session's next call has
 * it. Without an agent to ask, the key the broker has is kept. */
void route_key_reread(struct route *r, int wait_ms);
/* The registry connection that last handed a key, which rereads are asked
 * on; forgotten when it closes. */
void route_keeper_set(int fd);
void route_keeper_forget(int fd);

#endif
