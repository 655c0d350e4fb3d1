/* The secret store and placeholders. See secrets.h. A value is read only to
 * be checked here, and wiped: it is never logged, written or put into a
 * session's environment. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/secrets.h"
#include "broker/scrub.h"
#include "lib/strv.h"

/* A value every placeholder may hold: part of its prefix, or a few hex
 * digits, which 64 random ones hold often. The broker turns a value back
 * into its placeholder in every answer, and cannot where the placeholder
 * holds the value. */
static bool in_placeholder(const char *v, size_t len)
{
	bool hex = len < 8;

	/* in any case: the broker finds a value whatever its letters' case */
	for (size_t i = 0; i < len && hex; i++)
		hex = (v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f') ||
		      (v[i] >= 'A' && v[i] <= 'F');
	return hex || strcasestr(SECRET_PLACEHOLDER_PREFIX, v);
}

/* A value that holds "%XX" is looked for with those decoded too (broker/
 * scrub.c); a variant a placeholder may hold, or with a bracket, could not
 * be, and the broker refuses the value: said here at start instead. */
static bool variant_unscrubbable(const char *v, size_t len)
{
	char w[SECRET_VALUE_MAX + 1];
	size_t n;
	bool bad = false;

	for (unsigned k = 1; !bad && (n = scrub_variant((const uint8_t *)v, len, k, (uint8_t *)w));
	     k++) {
		w[n] = '\0';
		bad = in_placeholder(w, n) || memchr(w, '[', n) || memchr(w, ']', n);
	}
	explicit_bzero(w, sizeof(w));
	return bad;
}

int secret_read(const char *dir, const char *name, char *buf, size_t cap)
{
	int dfd, fd, rc;
	struct stat st;
	ssize_t n;
	size_t len;

	if (!name[0] || name[0] == '.' || strchr(name, '/') || cap < 2)
		return -EINVAL;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	/* no link may point the agent's read elsewhere */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	rc = fd < 0 ? (errno == ELOOP ? -EINVAL : -errno) : 0;
	close(dfd);
	if (rc)
		return rc;
	if (fstat(fd, &st)) {
		rc = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
	} else if (st.st_uid != 0 || (st.st_mode & 077)) {
		rc = -EPERM;
	} else if (st.st_size > (off_t)SECRET_VALUE_MAX + 1 || (size_t)st.st_size > cap - 1) {
		rc = -EFBIG;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	n = read(fd, buf, cap - 1);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc)
		return rc;
	len = (size_t)n;
	if (len && buf[len - 1] == '\n')
		len--;
	buf[len] = '\0';
	if (len > SECRET_VALUE_MAX)
		rc = -EFBIG;
	else if (!len)
		rc = -ENODATA;
	else if (memchr(buf, '\r', len) || memchr(buf, '\n', len) || memchr(buf, '\0', len))
		rc = -EBADMSG;
	else if (in_placeholder(buf, len))
		rc = -EDOM;
	else if (variant_unscrubbable(buf, len))
		rc = -EILSEQ;
	if (rc)
		explicit_bzero(buf, cap);
	return rc ? rc : (int)len;
}

const char *secret_strerror(int rc)
{
	switch (rc) {
	case -ENOENT:
		return "no such file";
	case -EACCES:
		return "permission denied";
	case -EINVAL:
		return "not a regular file";
	case -EPERM:
		return "not root's alone: chown root and chmod 0600 it";
	case -ENODATA:
		return "it is empty";
	case -EBADMSG:
		return "it holds a CR, LF or NUL, which a header cannot carry";
	case -EFBIG:
		return "over 4095 bytes";
	case -EILSEQ:
		return "with a %XX in it decoded, it holds a bracket, or what errand's "
		       "placeholders "
		       "may hold, so the broker could not find it decoded in an answer";
	case -EDOM:
		return "errand's placeholders (errand-secret- and 64 hex digits) may hold it, so "
		       "no "
		       "answer could be told from it: a real credential is longer";
	default:
		return strerror(-rc);
	}
}

int secrets_check(const struct errand_config *cfg, char *err, size_t errlen)
{
	char *buf;
	int rc = 0;

	if (!cfg->n_secrets)
		return 0;
	buf = malloc(SECRET_VALUE_MAX + 2);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < cfg->n_secrets && !rc; i++) {
		const struct config_secret *sec = &cfg->secrets[i];

		rc = secret_read(cfg->secrets_dir, sec->name, buf, SECRET_VALUE_MAX + 2);
		if (rc < 0)
			snprintf(err, errlen,
				 "secret %s: %s/%s cannot be used (%s); write the value there "
				 "(root, 0600, one line), or drop the secret",
				 sec->env, cfg->secrets_dir, sec->name, secret_strerror(rc));
		rc = rc < 0 ? rc : 0;
	}
	explicit_bzero(buf, SECRET_VALUE_MAX + 2);
	free(buf);
	return rc;
}

static int placeholder_mint(char out[SECRET_PLACEHOLDER_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[32];
	size_t p = sizeof(SECRET_PLACEHOLDER_PREFIX) - 1;

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return -EIO;
	memcpy(out, SECRET_PLACEHOLDER_PREFIX, p);
	for (size_t i = 0; i < sizeof(r); i++) {
		out[p++] = hex[r[i] >> 4];
		out[p++] = hex[r[i] & 15];
	}
	out[p] = '\0';
	return 0;
}

static bool placeholder_valid(const char *s)
{
	size_t p = sizeof(SECRET_PLACEHOLDER_PREFIX) - 1;

	return s && strlen(s) == SECRET_PLACEHOLDER_LEN &&
	       !strncmp(s, SECRET_PLACEHOLDER_PREFIX, p) && strspn(s + p, "0123456789abcdef") == 64;
}

int secrets_placeholders(const struct errand_config *cfg, const char *record_dir, char ***env)
{
	char path[4096], ph[SECRET_PLACEHOLDER_LEN + 1], kv[CONFIG_SECRET_ENV_MAX + 2 + sizeof(ph)];
	json_t *rec = NULL, *out = json_object();
	char **v = NULL, *text = NULL;
	bool changed = false;
	size_t n = 0;
	int rc = 0, fd;

	if (!out)
		return -ENOMEM;
	if (snprintf(path, sizeof(path), "%s/%s", record_dir, SECRETS_RECORD) >=
	    (int)sizeof(path)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	rec = json_load_file(path, 0, NULL);
	for (size_t i = 0; i < cfg->n_secrets && !rc; i++) {
		const char *name = cfg->secrets[i].env;
		const char *had = json_string_value(json_object_get(rec, name));

		if (placeholder_valid(had)) {
			snprintf(ph, sizeof(ph), "%s", had);
		} else {
			rc = placeholder_mint(ph);
			changed = true;
		}
		snprintf(kv, sizeof(kv), "%s=%s", name, ph);
		if (!rc &&
		    (json_object_set_new(out, name, json_string(ph)) || strv_push(&v, &n, kv)))
			rc = -ENOMEM;
	}
	if (rc || !changed)
		goto out;
	text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text) {
		rc = -ENOMEM;
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) || fsync(fd))
		rc = -EIO;
	close(fd);
out:
	free(text);
	json_decref(rec);
	json_decref(out);
	if (rc)
		strv_free(v);
	else
		*env = v;
	return rc;
}

#define SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"
#define CA_BUNDLE_IN_SESSION "/run/errand/ca-bundle.pem" /* the launcher's LAUNCH_CA_BUNDLE */

/* Copies the file fd (closed here) to out. */
static int append_fd(int out, int fd)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			close(fd);
			return -EIO;
		}
	close(fd);
	return n < 0 ? -EIO : 0;
}

static int append_file(int out, const char *path, bool must)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return must ? -errno : 0;
	return append_fd(out, fd);
}

/* An image's own store, read as root from a directory a client named: its
 * links resolved inside the image (never to a host file), a regular file
 * anyone may read, 8 MiB at most; anything else is left out. */
static int append_image_roots(int out, const char *image)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int dfd = open(image, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	struct stat st;

	if (dfd < 0)
		return 0;
	fd = (int)syscall(SYS_openat2, dfd, SYSTEM_ROOTS + 1, &how, sizeof(how));
	close(dfd);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !(st.st_mode & 0004) ||
	    st.st_size > (8 << 20)) {
		close(fd);
		return 0;
	}
	return append_fd(out, fd);
}

int secrets_ca_bundle(const char *ca_dir, const char *image, const char *path)
{
	char ca[4096], tmp[4096];
	int fd, rc;

	if (snprintf(ca, sizeof(ca), "%s/ca.pem", ca_dir) >= (int)sizeof(ca) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	fchmod(fd, 0644);
	/* the system's roots where the host has them: the session's other
	 * hosts keep working with the variables set */
	rc = image ? append_image_roots(fd, image) : append_file(fd, SYSTEM_ROOTS, false);
	if (!rc && write(fd, "\n", 1) != 1)
		rc = -EIO;
	if (!rc)
		rc = append_file(fd, ca, true);
	if (close(fd) && !rc)
		rc = -EIO;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int secrets_ca_env(char ***env)
{
	static const char *const vars[] = {
		"SSL_CERT_FILE",     "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",	 "GIT_SSL_CAINFO",
		"CARGO_HTTP_CAINFO", "DENO_CERT",	   "NODE_EXTRA_CA_CERTS"};
	size_t n = 0;
	char kv[128];

	while (*env && (*env)[n])
		n++;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		snprintf(kv, sizeof(kv), "%s=%s", vars[i], CA_BUNDLE_IN_SESSION);
		if (strv_push(env, &n, kv))
			return -ENOMEM;
	}
	return 0;
}
