/* Provider routes at run time: the TLS context each one dials with and its
 * key, as the agent handed it over the registry: the broker's account reads
 * no secret file. */
#include <errno.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "broker/registry.h"
#include "broker/route.h"
#include "broker/blog.h"
#include "lib/util.h"

#define SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"

int route_init(struct route *r, const struct config_provider *p, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->p = p;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->changed, NULL);
	if (broker_env_key_name(p, r->key_var, sizeof(r->key_var)))
		return -ENAMETOOLONG;
	if (!p->tls)
		return 0;
	r->tls = SSL_CTX_new(TLS_method());
	if (!r->tls)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(r->tls, TLS1_2_VERSION);
	SSL_CTX_set_verify(r->tls, SSL_VERIFY_PEER, NULL);
	/* a provider is verified, never trusted on sight: no fallback exists */
	if (!SSL_CTX_load_verify_locations(r->tls, SYSTEM_ROOTS, NULL))
		blog_warnx("provider %s: the system roots %s cannot be read; only trustedCa is "
			   "trusted (install ca-certificates)",
			   p->name, SYSTEM_ROOTS);
	ERR_clear_error();
	if (p->trusted_ca && !SSL_CTX_load_verify_locations(r->tls, p->trusted_ca, NULL)) {
		snprintf(
			err, errlen,
			"provider %s: trustedCa %s is not a readable PEM certificate; fix the file "
			"or remove the key",
			p->name, p->trusted_ca);
		ERR_clear_error();
		return -EINVAL;
	}
	return 0;
}

void route_free(struct route *r)
{
	if (!r)
		return;
	route_key_drop(r);
	SSL_CTX_free(r->tls);
	r->tls = NULL;
	pthread_cond_destroy(&r->changed);
	pthread_mutex_destroy(&r->lock);
}

int route_key(struct route *r, char *buf, size_t cap)
{
	int rc;

	pthread_mutex_lock(&r->lock);
	if (!r->key) {
		rc = -ENOKEY;
	} else if (r->key_len >= cap) {
		rc = -ENOBUFS;
	} else {
		memcpy(buf, r->key, r->key_len + 1);
		rc = (int)r->key_len;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static void key_wipe(struct route *r)
{
	if (r->key) {
		explicit_bzero(r->key, r->key_len);
		free(r->key);
		r->key = NULL;
		r->key_len = 0;
	}
}

int route_key_set(struct route *r, const char *key, size_t len)
{
	char *k = malloc(len + 1);

	if (!k)
		return -ENOMEM;
	memcpy(k, key, len);
	k[len] = '\0';
	pthread_mutex_lock(&r->lock);
	key_wipe(r);
	r->key = k;
	r->key_len = len;
	r->generation++;
	pthread_cond_broadcast(&r->changed);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void route_key_drop(struct route *r)
{
	pthread_mutex_lock(&r->lock);
	key_wipe(r);
	pthread_mutex_unlock(&r->lock);
}

static pthread_mutex_t keeper_lock = PTHREAD_MUTEX_INITIALIZER;
static int keeper = -1; /* under keeper_lock */

void route_keeper_set(int fd)
{
	pthread_mutex_lock(&keeper_lock);
	keeper = fd;
	pthread_mutex_unlock(&keeper_lock);
}

void route_keeper_forget(int fd)
{
	pthread_mutex_lock(&keeper_lock);
	if (keeper == fd)
		keeper = -1;
	pthread_mutex_unlock(&keeper_lock);
}

void route_key_reread(struct route *r, int wait_ms)
{
	unsigned long gen;
	struct timespec until;
	int rc = -ENOTCONN;

	pthread_mutex_lock(&r->lock);
	gen = r->generation;
	pthread_mutex_unlock(&r->lock);
	/* asked under keeper_lock: the registry loop cannot close the
	 * descriptor (and a new one take its number) meanwhile */
	pthread_mutex_lock(&keeper_lock);
	if (keeper >= 0)
		rc = broker_reread_ask(keeper, r->p->name);
	pthread_mutex_unlock(&keeper_lock);
	if (rc) {
		blog_warnx("provider %s: the provider refused the key and no agent can be asked "
			   "to read credentialFile again (%s); the broker keeps the key it has",
			   r->p->name, strerror(-rc));
		return;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += wait_ms / 1000;
	until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->lock);
	while (r->generation == gen)
		if (pthread_cond_timedwait(&r->changed, &r->lock, &until))
			break;
	rc = r->generation != gen;
	pthread_mutex_unlock(&r->lock);
	if (rc)
		blog_info("provider %s: the provider refused the key; the agent read "
			  "credentialFile again",
			  r->p->name);
	else
		blog_warnx("provider %s: the provider refused the key and the agent handed no "
			   "other within %d ms; the broker keeps the key it has",
			   r->p->name, wait_ms);
}
