/* A provider route as errand-broker serves it: its definition from the
 * configuration, its TLS context (system roots plus trustedCa), and the real
 * key, read from credentialFile when first needed and again after the
 * provider refused it. */
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
	char *key; /* under lock; NULL until read, and after a 401 */
	size_t key_len;
};

/* Readies r for p: the TLS context with its roots. 0, or -errno with one line
 * in err naming the file to fix. */
int route_init(struct route *r, const struct config_provider *p, char *err, size_t errlen);
void route_free(struct route *r); /* NULL-safe; wipes the key */

/* Copies the key into buf (cap bytes), reading credentialFile if it is not
 * cached. Returns its length, or -errno (-EACCES, -ENOENT, -EINVAL for an
 * empty key or one holding "[", "]" or a control character). */
int route_key(struct route *r, char *buf, size_t cap);
/* The provider refused the key: forget it, the next call reads the file. */
void route_key_drop(struct route *r);

#endif
