/* Provider routes at run time: the TLS context each one dials with and its
 * cached key. The key is read as the broker's own account, from a file the
 * sessions cannot reach. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	pthread_mutex_destroy(&r->lock);
}

/* The file's first line, trailing whitespace gone. */
static int key_read(const char *path, char *buf, size_t cap)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		len += (size_t)n;
	}
	buf[len] = '\0';
	len = strcspn(buf, "\r\n");
	while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	buf[len] = '\0';
	if (!len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f || buf[i] == '[' ||
		    buf[i] == ']')
			return -EINVAL;
	return (int)len;
}

int route_key(struct route *r, char *buf, size_t cap)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	if (!r->key) {
		char tmp[ROUTE_KEY_MAX];

		rc = key_read(r->p->credential_file, tmp, sizeof(tmp));
		if (rc > 0) {
			r->key = strdup(tmp);
			r->key_len = (size_t)rc;
			rc = r->key ? 0 : -ENOMEM;
		}
		explicit_bzero(tmp, sizeof(tmp));
	}
	if (!rc && r->key_len >= cap)
		rc = -ENOBUFS;
	if (!rc) {
		memcpy(buf, r->key, r->key_len + 1);
		rc = (int)r->key_len;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void route_key_drop(struct route *r)
{
	pthread_mutex_lock(&r->lock);
	if (r->key) {
		explicit_bzero(r->key, r->key_len);
		free(r->key);
		r->key = NULL;
		r->key_len = 0;
	}
	pthread_mutex_unlock(&r->lock);
}
