/* Secrets a session holds only a placeholder for: the agent's store
 * (paths.secrets, one root-owned 0600 file a secret), read as root and never
 * handed to the session, and the placeholders that stand in for the values. */
#ifndef ERRAND_AGENT_SECRETS_H
#define ERRAND_AGENT_SECRETS_H

#include <stddef.h>

#include "lib/config.h"

#define SECRET_VALUE_MAX 4095 /* bytes of a value */
#define SECRET_PLACEHOLDER_PREFIX "errand-secret-"
#define SECRET_PLACEHOLDER_LEN (sizeof(SECRET_PLACEHOLDER_PREFIX) - 1 + 64)
#define SECRETS_RECORD "placeholders.json" /* in the session's record directory */

/* Reads secret name from dir as the caller (the agent: root) into buf (cap
 * bytes, NUL-terminated): the file's content with one trailing newline
 * dropped. Its length, or -errno: -ENOENT, -EACCES, -EINVAL (not a regular
 * file, or a name that leaves dir), -EPERM (not owned by root, or open to
 * its group or others), -ENODATA (empty), -EBADMSG (CR, LF or NUL inside),
 * -EFBIG (over SECRET_VALUE_MAX), -EDOM (a value a placeholder may hold:
 * part of its prefix, or fewer than 8 hex digits), -EILSEQ (one that, with
 * a "%XX" in it decoded, a placeholder may hold or holds a bracket). */
int secret_read(const char *dir, const char *name, char *buf, size_t cap);
/* What secret_read's rc means, for a message naming the file. */
const char *secret_strerror(int rc);
/* Reads every secret of cfg and forgets it: a value that cannot be used
 * refuses the session at start, one line in err naming the file and the fix.
 * 0 or -errno. */
int secrets_check(const struct errand_config *cfg, char *err, size_t errlen);
/* The session's placeholders, one a secret in cfg's order, as "ENV=VALUE"
 * strings in a NULL-terminated list the caller frees (strv_free): read from
 * the record directory when the session has them (a restarted agent), else
 * minted for this session and variable (64 hex digits from getrandom) and
 * written there, 0600, before the session exists. 0 or -errno. */
int secrets_placeholders(const struct errand_config *cfg, const char *record_dir, char ***env);

/* The roots a session with secrets trusts, written to path (0644): the
 * system's (an image's own, when image is not NULL) and its broker's CA
 * (<ca_dir>/ca.pem). 0 or -errno. */
int secrets_ca_bundle(const char *ca_dir, const char *image, const char *path);
/* Appends to the environment *env the variables every common TLS client
 * reads its roots from, each naming the bundle inside the session
 * (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO,
 * CARGO_HTTP_CAINFO, DENO_CERT, NODE_EXTRA_CA_CERTS). 0 or -ENOMEM. */
int secrets_ca_env(char ***env);

#endif
