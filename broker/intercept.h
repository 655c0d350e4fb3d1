/* errand-broker's intercepted hosts: a session's connections to its secret
 * hosts, which the kernel sends to the broker's intercept listener. The
 * broker terminates TLS with a certificate for the SNI minted from the
 * session's own CA, checks that every request's Host is the SNI, puts each
 * secret's value where the session wrote its placeholder (only toward that
 * secret's hosts), calls the host by name over verified TLS, and turns the
 * values in the answer back into placeholders. */
#ifndef ERRAND_BROKER_INTERCEPT_H
#define ERRAND_BROKER_INTERCEPT_H

#include <stddef.h>

#include "broker/registry.h"
#include "broker/upstream.h"
#include "lib/config.h"

#define INTERCEPT_CONN_MAX 256		   /* connections at once; the next is refused */
#define INTERCEPT_IDLE_MS (10 * 60 * 1000) /* a connection idle this long is closed */
#define INTERCEPT_CA_KEY "ca.key"	   /* in the CA directory, 0600 */
#define INTERCEPT_CA_CERT "ca.pem"

/* Readies interception, as root before the broker drops its privileges: the
 * session's CA from ca_dir (made there when absent: the key 0600, the
 * certificate 0644), the key certificates are minted for, and the upstream
 * TLS context (system roots plus tls.trustedCa). 0, or -errno with one line
 * in err. */
int intercept_init(const struct errand_config *cfg, const struct upstream_env *env,
		   const char *ca_dir, char *err, size_t errlen);
/* A secret's value for one more of its hosts (a registry "secret" message).
 * Writes the answer into reply. 0 or -errno. */
int intercept_secret_add(const struct broker_msg *m, char *reply, size_t len);
/* Serves one intercepted connection as a fiber of its own, which owns fd. */
void intercept_start(int fd);

#endif
