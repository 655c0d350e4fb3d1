/* Intercepted secret hosts. See intercept.h. One thread a connection, as the
 * provider relay: the session's side is a TLS server over the accepted
 * socket, the host's a TLS client dialled by name; both through the
 * connection's own io_uring with deadlines. The ClientHello is BoringSSL's
 * to parse: the broker only reads the SNI it found. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/base64.h>
#include <openssl/bn.h>
#include <openssl/ec_key.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/blog.h"
#include "broker/http.h"
#include "broker/intercept.h"
#include "broker/journal.h"
#include "broker/receipts.h"
#include "broker/ring.h"
#include "broker/route.h"
#include "broker/scrub.h"
#include "broker/sessions.h"
#include "lib/hostrule.h"
#include "lib/util.h"

#define SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"
#define IO_BUF 65536
#define HANDSHAKE_MS 10000
#define IO_MS 30000
#define ANSWER_MS 300000
#define SECRETS_MAX CONFIG_SECRETS_MAX
#define CERTS_MAX 512
#define LEAF_DAYS 7
#define CA_DAYS 3650

struct secret {
	char placeholder[BROKER_PLACEHOLDER_MAX + 1];
	size_t ph_len;
	char *value; /* raw */
	size_t len;
	char *pct; /* percent-encoded, as it goes in a request line */
	size_t pct_len;
	struct host_rule *hosts;
	size_t n_hosts;
};

struct cert {
	char name[HOST_NAME_MAX_LEN + 1];
	X509 *x;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct secret secrets[SECRETS_MAX]; /* under lock; only ever added to */
static size_t n_secrets;
static struct cert certs[CERTS_MAX]; /* under lock: minted, one a name */
static size_t n_certs;
static EVP_PKEY *ca_key, *leaf_key;
static X509 *ca_cert;
static SSL_CTX *server_ctx;
static struct route up_template; /* the upstream TLS context */
static const struct upstream_env *up_env;
static _Atomic int conns_open;

/* ---- the session's CA and its certificates ---------------------------- */

static EVP_PKEY *ec_key_make(void)
{
	EC_KEY *ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
	EVP_PKEY *k = EVP_PKEY_new();

	if (!ec || !k || !EC_KEY_generate_key(ec) || !EVP_PKEY_assign_EC_KEY(k, ec)) {
		EC_KEY_free(ec);
		EVP_PKEY_free(k);
		return NULL;
	}
	return k;
}

static int ext_add(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	int ok;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_nconf_nid(NULL, &ctx, nid, value);
	if (!e)
		return 0;
	ok = X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return ok;
}

/* A certificate for subject cn signed by issuer's key (itself when issuer is
 * NULL), valid from an hour ago for days. */
static X509 *cert_make(const char *cn, EVP_PKEY *pub, X509 *issuer, EVP_PKEY *sign, int days)
{
	X509 *x = X509_new();
	X509_NAME *name = X509_NAME_new();
	uint8_t serial[16];
	BIGNUM *bn = NULL;
	bool ok;

	RAND_bytes(serial, sizeof(serial));
	serial[0] &= 0x7f;
	ok = x && name && (bn = BN_bin2bn(serial, sizeof(serial), NULL)) &&
	     BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) && X509_set_version(x, 2) &&
	     X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
	     X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400) &&
	     X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const uint8_t *)"errand", -1, -1,
					0) &&
	     X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const uint8_t *)cn, -1, -1, 0) &&
	     X509_set_subject_name(x, name) &&
	     X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) &&
	     X509_set_pubkey(x, pub);
	BN_free(bn);
	X509_NAME_free(name);
	if (ok && !issuer)
		ok = ext_add(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
		     ext_add(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
		     ext_add(x, x, NID_subject_key_identifier, "hash");
	if (ok && issuer) {
		char san[HOST_NAME_MAX_LEN + 8];

		snprintf(san, sizeof(san), "DNS:%s", cn);
		ok = ext_add(x, issuer, NID_basic_constraints, "critical,CA:FALSE") &&
		     ext_add(x, issuer, NID_key_usage, "critical,digitalSignature") &&
		     ext_add(x, issuer, NID_ext_key_usage, "serverAuth") &&
		     ext_add(x, issuer, NID_subject_alt_name, san) &&
		     ext_add(x, issuer, NID_authority_key_identifier, "keyid");
	}
	if (!ok || !X509_sign(x, sign, EVP_sha256())) {
		X509_free(x);
		ERR_clear_error();
		return NULL;
	}
	return x;
}

static int pem_write(const char *path, mode_t mode, EVP_PKEY *k, X509 *x)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	FILE *f;
	int ok;

	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -errno;
	}
	ok = k ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, x);
	if (fclose(f) || !ok)
		return -EIO;
	return 0;
}

/* The CA of the session: read where a running broker of it left one (it
 * outlives no session, but an agent may restart it), else made. */
static int ca_ready(const char *dir, char *err, size_t errlen)
{
	char kp[4096], cp[4096];
	FILE *f;
	int rc;

	snprintf(kp, sizeof(kp), "%s/%s", dir, INTERCEPT_CA_KEY);
	snprintf(cp, sizeof(cp), "%s/%s", dir, INTERCEPT_CA_CERT);
	if ((f = fopen(kp, "re"))) {
		ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
		fclose(f);
		if ((f = fopen(cp, "re"))) {
			ca_cert = PEM_read_X509(f, NULL, NULL, NULL);
			fclose(f);
		}
		if (ca_key && ca_cert)
			return 0;
		snprintf(err, errlen, "the session's CA in %s cannot be read; remove %s and %s",
			 dir, kp, cp);
		return -EINVAL;
	}
	ca_key = ec_key_make();
	ca_cert = ca_key ? cert_make("errand session CA", ca_key, NULL, ca_key, CA_DAYS) : NULL;
	if (!ca_cert) {
		snprintf(err, errlen, "the session's CA cannot be made");
		return -ENOMEM;
	}
	if ((rc = pem_write(kp, 0600, ca_key, NULL)) || (rc = pem_write(cp, 0644, NULL, ca_cert)))
		snprintf(err, errlen, "the session's CA cannot be written in %s: %s", dir,
			 strerror(-rc));
	return rc;
}

/* The certificate for name, minted once. A reference the caller frees. */
static X509 *cert_for(const char *name)
{
	X509 *x = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_certs && !x; i++)
		if (!strcmp(certs[i].name, name))
			x = certs[i].x;
	if (!x) {
		x = cert_make(name, leaf_key, ca_cert, ca_key, LEAF_DAYS);
		if (x && n_certs < CERTS_MAX) {
			snprintf(certs[n_certs].name, sizeof(certs[n_certs].name), "%s", name);
			certs[n_certs++].x = x;
		} else if (x) {
			/* past the cache: this one is the caller's alone */
			pthread_mutex_unlock(&lock);
			return x;
		}
	}
	if (x)
		X509_up_ref(x);
	pthread_mutex_unlock(&lock);
	return x;
}

/* ---- which hosts are intercepted, and which secret goes where --------- */

/* Whether rule r names host: the exact name, or one label below a wildcard. */
static bool rule_names(const struct host_rule *r, const char *host)
{
	return host_rule_match(r, host);
}

/* The port to dial host on: the most specific rule naming it (the exact name
 * before a wildcard). 0: no secret names it. */
static uint16_t intercepted_port(const char *host)
{
	uint16_t exact = 0, wild = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_secrets; i++)
		for (size_t j = 0; j < secrets[i].n_hosts; j++) {
			const struct host_rule *r = &secrets[i].hosts[j];

			if (!rule_names(r, host))
				continue;
			if (!r->wildcard && !exact)
				exact = r->port;
			else if (r->wildcard && !wild)
				wild = r->port;
		}
	pthread_mutex_unlock(&lock);
	if (!exact && !wild && up_env) {
		/* a gated host (sandbox.egress.readOnly), intercepted without a secret */
		const struct errand_config *cfg = up_env->cfg;
		const struct host_rule *v = cfg->read_only_all ? cfg->allow : cfg->read_only;
		size_t n = cfg->read_only_all ? cfg->n_allow : cfg->n_read_only;

		for (size_t i = 0; i < n; i++) {
			if (!rule_names(&v[i], host))
				continue;
			if (!v[i].wildcard && !exact)
				exact = v[i].port;
			else if (v[i].wildcard && !wild)
				wild = v[i].port;
		}
	}
	return exact ? exact : wild;
}

/* What a read-only host accepts (cowboy's egress control): every other
 * method, WebDAV's and unknown ones included, is a write. */
static bool method_reads(const char *m)
{
	return !strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS") ||
	       !strcmp(m, "TRACE");
}

/* Whether secret s's value may go to host:port. Under lock. */
static bool secret_to(const struct secret *s, const char *host, uint16_t port)
{
	for (size_t j = 0; j < s->n_hosts; j++)
		if (rule_names(&s->hosts[j], host) && s->hosts[j].port == port)
			return true;
	return false;
}

static char *pct_encode(const char *v, size_t len, size_t *out_len)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = malloc(3 * len + 1);
	size_t n = 0;

	if (!o)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			o[n++] = (char)c;
		} else {
			o[n++] = '%';
			o[n++] = hex[c >> 4];
			o[n++] = hex[c & 15];
		}
	}
	o[n] = '\0';
	*out_len = n;
	return o;
}

int intercept_secret_add(const struct broker_msg *m, char *reply, size_t len)
{
	struct host_rule r, *grown;
	struct secret *s = NULL;
	char why[256];
	int rc = 0;

	if (host_rule_parse(m->host, &r, why, sizeof(why))) {
		snprintf(reply, len, "error invalid host");
		return -EINVAL;
	}
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_secrets && !s; i++)
		if (!strcmp(secrets[i].placeholder, m->placeholder))
			s = &secrets[i];
	if (s && (s->len != m->key_len || memcmp(s->value, m->key, s->len))) {
		snprintf(reply, len, "error another value for this placeholder");
		rc = -EEXIST;
		goto out;
	}
	if (!s && n_secrets == SECRETS_MAX) {
		snprintf(reply, len, "error too many secrets");
		rc = -E2BIG;
		goto out;
	}
	if (!s) {
		s = &secrets[n_secrets];
		memset(s, 0, sizeof(*s));
		snprintf(s->placeholder, sizeof(s->placeholder), "%s", m->placeholder);
		s->ph_len = strlen(s->placeholder);
		s->value = malloc(m->key_len + 1);
		s->pct = pct_encode(m->key, m->key_len, &s->pct_len);
		if (!s->value || !s->pct) {
			free(s->value);
			free(s->pct);
			snprintf(reply, len, "error out of memory");
			rc = -ENOMEM;
			goto out;
		}
		memcpy(s->value, m->key, m->key_len + 1);
		s->len = m->key_len;
		n_secrets++;
	}
	if (s->n_hosts >= CONFIG_SECRET_HOSTS_MAX) {
		snprintf(reply, len, "error too many hosts");
		rc = -E2BIG;
		goto out;
	}
	grown = reallocarray(s->hosts, s->n_hosts + 1, sizeof(*grown));
	if (!grown) {
		snprintf(reply, len, "error out of memory");
		rc = -ENOMEM;
		goto out;
	}
	grown[s->n_hosts++] = r;
	s->hosts = grown;
	snprintf(reply, len, "ok");
out:
	pthread_mutex_unlock(&lock);
	return rc;
}

/* ---- TLS toward the session ------------------------------------------- */

static void lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s + 32);
}

/* The certificate for the SNI, or no handshake: a name no secret names is
 * not served, so the session cannot borrow the CA for any other host. */
static int cert_cb(SSL *ssl, void *arg)
{
	const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	char name[HOST_NAME_MAX_LEN + 1];
	X509 *x;
	int ok;

	(void)arg;
	if (!sni || strlen(sni) > HOST_NAME_MAX_LEN)
		return 0;
	snprintf(name, sizeof(name), "%s", sni);
	lower(name);
	if (!intercepted_port(name))
		return 0;
	x = cert_for(name);
	if (!x)
		return 0;
	ok = SSL_use_certificate(ssl, x) && SSL_use_PrivateKey(ssl, leaf_key);
	X509_free(x);
	return ok;
}

/* http/1.1 or nothing: the broker reads and writes HTTP/1.1 alone. */
static int alpn_cb(SSL *ssl, const uint8_t **out, uint8_t *outlen, const uint8_t *in,
		   unsigned inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	for (unsigned i = 0; i < inlen;) {
		unsigned n = in[i];

		if (i + 1 + n > inlen)
			break;
		if (n == 8 && !memcmp(in + i + 1, "http/1.1", 8)) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

int intercept_init(const struct errand_config *cfg, const struct upstream_env *env,
		   const char *ca_dir, char *err, size_t errlen)
{
	int rc;

	up_env = env;
	if ((rc = ca_ready(ca_dir, err, errlen)))
		return rc;
	leaf_key = ec_key_make();
	server_ctx = SSL_CTX_new(TLS_method());
	up_template.tls = SSL_CTX_new(TLS_method());
	if (!leaf_key || !server_ctx || !up_template.tls) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(server_ctx, TLS1_2_VERSION);
	SSL_CTX_set_cert_cb(server_ctx, cert_cb, NULL);
	SSL_CTX_set_alpn_select_cb(server_ctx, alpn_cb, NULL);
	SSL_CTX_set_min_proto_version(up_template.tls, TLS1_2_VERSION);
	SSL_CTX_set_verify(up_template.tls, SSL_VERIFY_PEER, NULL);
	/* the host is verified, never trusted on sight: no fallback exists */
	if (!SSL_CTX_load_verify_locations(up_template.tls, SYSTEM_ROOTS, NULL))
		blog_warnx("the system roots %s cannot be read; only tls.trustedCa is trusted "
			   "(install ca-certificates)",
			   SYSTEM_ROOTS);
	ERR_clear_error();
	if (cfg->tls_trusted_ca &&
	    !SSL_CTX_load_verify_locations(up_template.tls, cfg->tls_trusted_ca, NULL)) {
		snprintf(err, errlen,
			 "tls.trustedCa %s is not a readable PEM certificate; fix the file or "
			 "remove the key",
			 cfg->tls_trusted_ca);
		ERR_clear_error();
		return -EINVAL;
	}
	return 0;
}

/* ---- one connection ---------------------------------------------------- */

struct iconn {
	int fd;
	struct io_uring ring;
	struct upstream cl; /* the session's side: TLS server */
	struct upstream up; /* the host's: TLS client */
	bool up_open;
	struct session_link link;
	char session[BROKER_SESSION_MAX + 1];
	char sni[HOST_NAME_MAX_LEN + 1];
	uint16_t port;
	struct config_provider prov;
	struct route route;
	struct http_parser *req, *resp;
	uint8_t in[IO_BUF];
	size_t in_off, in_len;
	uint8_t up_in[IO_BUF];
	size_t up_off, up_len;
	uint8_t out[IO_BUF]; /* to the session */
	size_t out_len;
	uint8_t upo[IO_BUF]; /* to the host */
	size_t upo_len;
	bool client_failed;
};

/* A growing buffer of bytes. */
struct buf {
	char *p;
	size_t len, cap;
};

static int buf_put(struct buf *b, const void *d, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static void buf_wipe(struct buf *b)
{
	if (b->p)
		OPENSSL_cleanse(b->p, b->cap);
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* in[0..n) with every placeholder of a secret bound for host:port replaced by
 * its value (percent-encoded when pct), appended to out. Under lock. */
static int swap_in(const char *in, size_t n, const char *host, uint16_t port, bool pct,
		   struct buf *out)
{
	size_t i = 0;

	while (i < n) {
		const struct secret *hit = NULL;

		for (size_t k = 0; k < n_secrets && !hit; k++) {
			const struct secret *s = &secrets[k];

			if (n - i >= s->ph_len && !memcmp(in + i, s->placeholder, s->ph_len) &&
			    secret_to(s, host, port))
				hit = s;
		}
		if (hit) {
			if (buf_put(out, pct ? hit->pct : hit->value,
				    pct ? hit->pct_len : hit->len))
				return -ENOMEM;
			i += hit->ph_len;
		} else {
			if (buf_put(out, in + i, 1))
				return -ENOMEM;
			i++;
		}
	}
	return 0;
}

/* in[0..n) with every value (raw and percent-encoded) of every secret turned
 * back into its placeholder, appended to out. Under lock. */
static int swap_out(const char *in, size_t n, struct buf *out)
{
	size_t i = 0;

	while (i < n) {
		const struct secret *hit = NULL;
		size_t len = 0;

		for (size_t k = 0; k < n_secrets && !hit; k++) {
			const struct secret *s = &secrets[k];

			if (n - i >= s->len && !memcmp(in + i, s->value, s->len)) {
				hit = s;
				len = s->len;
			} else if (n - i >= s->pct_len &&
				   !strncasecmp(in + i, s->pct, s->pct_len)) {
				hit = s;
				len = s->pct_len;
			}
		}
		if (hit) {
			if (buf_put(out, hit->placeholder, hit->ph_len))
				return -ENOMEM;
			i += len;
		} else {
			if (buf_put(out, in + i, 1))
				return -ENOMEM;
			i++;
		}
	}
	return 0;
}

static int out_flush(struct iconn *c)
{
	int rc;

	if (!c->out_len || c->client_failed)
		return c->client_failed ? -EPIPE : 0;
	rc = upstream_write(&c->cl, c->out, c->out_len, IO_MS);
	c->out_len = 0;
	if (rc)
		c->client_failed = true;
	return rc;
}

static int out_put(struct iconn *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc;

	while (len) {
		size_t n = sizeof(c->out) - c->out_len;

		if (!n && (rc = out_flush(c)))
			return rc;
		n = sizeof(c->out) - c->out_len;
		if (n > len)
			n = len;
		memcpy(c->out + c->out_len, p, n);
		c->out_len += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int out_str(struct iconn *c, const char *s)
{
	return out_put(c, s, strlen(s));
}

static int up_flush(struct iconn *c)
{
	int rc = 0;

	if (c->upo_len)
		rc = upstream_write(&c->up, c->upo, c->upo_len, IO_MS);
	OPENSSL_cleanse(c->upo, c->upo_len); /* the head held values */
	c->upo_len = 0;
	return rc;
}

static int up_put(struct iconn *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc;

	while (len) {
		size_t n = sizeof(c->upo) - c->upo_len;

		if (!n && (rc = up_flush(c)))
			return rc;
		n = sizeof(c->upo) - c->upo_len;
		if (n > len)
			n = len;
		memcpy(c->upo + c->upo_len, p, n);
		c->upo_len += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int up_str(struct iconn *c, const char *s)
{
	return up_put(c, s, strlen(s));
}

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 421:
		return "Misdirected Request";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 504:
		return "Gateway Timeout";
	}
	return "Error";
}

/* The broker's own answer; the connection closes after it. */
__attribute__((format(printf, 3, 4))) static int answerf(struct iconn *c, int status,
							 const char *fmt, ...)
{
	char body[1024], head[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(body))
		n = (int)strlen(body);
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
		 "Content-Length: %d\r\nConnection: close\r\n\r\n",
		 status, status_text(status), n);
	if (out_str(c, head) || out_put(c, body, (size_t)n))
		return -EPIPE;
	return out_flush(c);
}

static ssize_t client_fill(struct iconn *c, int timeout_ms)
{
	ssize_t n;

	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	if (c->in_len == sizeof(c->in)) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	n = upstream_read(&c->cl, c->in + c->in_len, sizeof(c->in) - c->in_len, timeout_ms);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

/* The next request's head. 0, -ENODATA when the session closed between
 * requests, or another -errno. */
static int read_head(struct iconn *c)
{
	bool first = true;
	size_t used;
	int rc;

	http_parser_reset(c->req, HTTP_REQUEST, false);
	for (;;) {
		if (c->in_off == c->in_len) {
			ssize_t n = client_fill(c, first ? INTERCEPT_IDLE_MS : IO_MS);

			if (n == 0)
				return http_parse_eof(c->req) == -ENODATA ? -ENODATA : -ECONNRESET;
			if (n < 0)
				return (int)n;
		}
		rc = http_parse(c->req, c->in + c->in_off, c->in_len - c->in_off, &used, NULL,
				NULL);
		c->in_off += used;
		first = false;
		if (rc == HTTP_HEAD || rc == HTTP_DONE)
			return 0;
		if (rc < 0)
			return rc;
	}
}

/* Whether a Host (or an absolute-form authority) names the SNI: the name, in
 * any case, with the port dialled or none. */
static bool authority_is_sni(const struct iconn *c, const char *v, size_t len)
{
	size_t n = strlen(c->sni);
	char port[8];

	if (len < n || strncasecmp(v, c->sni, n))
		return false;
	if (len == n)
		return true;
	snprintf(port, sizeof(port), ":%u", c->port);
	return len - n == strlen(port) && !memcmp(v + n, port, len - n);
}

static bool hop_by_hop(const char *name)
{
	static const char *const names[] = {
		"Connection",
		"Keep-Alive",
		"Proxy-Connection",
		"Proxy-Authorization",
		"TE",
		"Trailer",
		"Upgrade",
		"Transfer-Encoding",
		"Content-Length",
		"Proxy-Authenticate",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

/* One header toward the host, placeholders swapped, Basic credentials
 * decoded, swapped and encoded again. Under lock. */
static int header_in(struct iconn *c, const struct http_header *h, struct buf *out)
{
	int rc;

	if ((rc = buf_put(out, h->name, h->name_len)) || (rc = buf_put(out, ": ", 2)))
		return rc;
	if (!strcasecmp(h->name, "Authorization") && h->value_len > 6 &&
	    !strncasecmp(h->value, "Basic ", 6)) {
		const char *b64 = h->value + 6;
		size_t b64_len = h->value_len - 6, dlen = 0, elen;
		struct buf plain = {0}, swapped = {0};
		uint8_t *dec = malloc(b64_len + 1);
		char *enc = NULL;

		while (b64_len && *b64 == ' ')
			b64++, b64_len--;
		rc = -ENOMEM;
		if (dec &&
		    EVP_DecodeBase64(dec, &dlen, b64_len + 1, (const uint8_t *)b64, b64_len) &&
		    !buf_put(&plain, dec, dlen) &&
		    !swap_in(plain.p, plain.len, c->sni, c->port, false, &swapped) &&
		    EVP_EncodedLength(&elen, swapped.len) && (enc = malloc(elen))) {
			EVP_EncodeBlock((uint8_t *)enc, (const uint8_t *)swapped.p, swapped.len);
			rc = buf_put(out, "Basic ", 6) ?: buf_put(out, enc, strlen(enc));
		} else if (dec) {
			/* not Base64: passed on as written, with raw placeholders swapped */
			rc = swap_in(h->value, h->value_len, c->sni, c->port, false, out);
		}
		if (dec)
			OPENSSL_cleanse(dec, b64_len + 1);
		if (enc)
			OPENSSL_cleanse(enc, strlen(enc));
		free(dec);
		free(enc);
		buf_wipe(&plain);
		buf_wipe(&swapped);
		if (rc)
			return rc;
	} else if ((rc = swap_in(h->value, h->value_len, c->sni, c->port, false, out))) {
		return rc;
	}
	return buf_put(out, "\r\n", 2);
}

/* The request's head as the host gets it: origin-form, Host the SNI,
 * placeholders swapped for values toward this host only, identity asked. */
static int send_head(struct iconn *c, const char *path)
{
	struct buf h = {0};
	char line[HOST_NAME_MAX_LEN + 64];
	int rc;

	pthread_mutex_lock(&lock);
	rc = buf_put(&h, http_method(c->req), strlen(http_method(c->req))) ?: buf_put(&h, " ", 1)
									     ?: swap_in(path, strlen(path), c->sni,
											c->port, true, &h);
	if (!rc) {
		snprintf(line, sizeof(line), " HTTP/1.1\r\nHost: %s", c->sni);
		rc = buf_put(&h, line, strlen(line));
	}
	if (!rc && c->port != 443) {
		snprintf(line, sizeof(line), ":%u", c->port);
		rc = buf_put(&h, line, strlen(line));
	}
	if (!rc)
		rc = buf_put(&h, "\r\n", 2);
	for (size_t i = 0; !rc && i < http_header_count(c->req); i++) {
		const struct http_header *hd = http_header_at(c->req, i);

		/* Expect: the body follows at once; a 100 the host sends is skipped */
		if (hop_by_hop(hd->name) || !strcasecmp(hd->name, "Host") ||
		    !strcasecmp(hd->name, "Accept-Encoding") || !strcasecmp(hd->name, "Expect"))
			continue;
		rc = header_in(c, hd, &h);
	}
	pthread_mutex_unlock(&lock);
	if (!rc)
		rc = buf_put(&h, "Accept-Encoding: identity\r\n", 27);
	if (!rc && http_framing(c->req) == HTTP_BODY_LENGTH) {
		snprintf(line, sizeof(line), "Content-Length: %llu\r\n",
			 (unsigned long long)http_content_length(c->req));
		rc = buf_put(&h, line, strlen(line));
	} else if (!rc && http_framing(c->req) == HTTP_BODY_CHUNKED) {
		rc = buf_put(&h, "Transfer-Encoding: chunked\r\n", 28);
	}
	if (!rc)
		rc = buf_put(&h, "\r\n", 2);
	if (!rc)
		rc = up_put(c, h.p, h.len);
	buf_wipe(&h);
	return rc;
}

static int request_body(void *ctx, const uint8_t *data, size_t len)
{
	struct iconn *c = ctx;
	char size[32];
	int rc;

	if (http_framing(c->req) != HTTP_BODY_CHUNKED)
		return up_put(c, data, len);
	snprintf(size, sizeof(size), "%zx\r\n", len);
	if ((rc = up_str(c, size)) || (rc = up_put(c, data, len)))
		return rc;
	return up_str(c, "\r\n");
}

static int send_body(struct iconn *c, uint64_t *bytes)
{
	size_t used, before = c->in_off;
	int rc;

	*bytes = 0;
	for (;;) {
		rc = http_parse(c->req, c->in + c->in_off, c->in_len - c->in_off, &used,
				request_body, c);
		c->in_off += used;
		*bytes += c->in_off - before;
		if (rc == HTTP_DONE)
			break;
		if (rc < 0)
			return rc;
		if ((rc = up_flush(c)))
			return rc;
		ssize_t n = client_fill(c, IO_MS);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
		before = c->in_off;
	}
	if (http_framing(c->req) == HTTP_BODY_CHUNKED && (rc = up_str(c, "0\r\n\r\n")))
		return rc;
	return up_flush(c);
}

static ssize_t up_fill(struct iconn *c, int timeout_ms)
{
	ssize_t n;

	c->up_off = c->up_len = 0;
	n = upstream_read(&c->up, c->up_in, sizeof(c->up_in), timeout_ms);
	if (n > 0)
		c->up_len = (size_t)n;
	return n;
}

static int read_answer_head(struct iconn *c, bool head_request)
{
	size_t used;
	int rc;

	http_parser_reset(c->resp, HTTP_RESPONSE, head_request);
	for (;;) {
		if (c->up_off == c->up_len) {
			ssize_t n = up_fill(c, ANSWER_MS);

			if (n == 0)
				return -ECONNRESET;
			if (n < 0)
				return (int)n;
		}
		rc = http_parse(c->resp, c->up_in + c->up_off, c->up_len - c->up_off, &used, NULL,
				NULL);
		c->up_off += used;
		if (rc < 0)
			return rc;
		if (rc == HTTP_HEAD || rc == HTTP_DONE) {
			int st = http_status(c->resp);

			if (st >= 200 || st == 101)
				return 0;
			http_parser_reset(c->resp, HTTP_RESPONSE, head_request);
		}
	}
}

static bool answer_has_body(const struct http_parser *r)
{
	switch (http_framing(r)) {
	case HTTP_BODY_NONE:
		return false;
	case HTTP_BODY_LENGTH:
		return http_content_length(r) > 0;
	default:
		return true;
	}
}

/* The answer's body, scrubbed by a chain of one scrubber a value (raw and
 * percent-encoded), framed as chunks. */
struct chain {
	struct iconn *c;
	bool chunked; /* an HTTP/1.0 session reads the body to the connection's end */
	struct scrub **sc;
	size_t n, level;
	uint64_t *bytes;
};

static int chunk_out(struct iconn *c, const uint8_t *data, size_t len)
{
	char size[32];
	int rc;

	if (!len)
		return 0;
	snprintf(size, sizeof(size), "%zx\r\n", len);
	if ((rc = out_str(c, size)) || (rc = out_put(c, data, len)))
		return rc;
	return out_put(c, "\r\n", 2);
}

static int chain_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct chain *x = ctx, next = *x;

	if (x->level == x->n) {
		*x->bytes += len;
		return x->chunked ? chunk_out(x->c, data, len) : out_put(x->c, data, len);
	}
	next.level = x->level + 1;
	return scrub_feed(x->sc[x->level], data, len, chain_sink, &next);
}

static int chain_finish(struct chain *x)
{
	for (size_t i = 0; i < x->n; i++) {
		struct chain next = *x;
		int rc;

		next.level = i + 1;
		if ((rc = scrub_finish(x->sc[i], chain_sink, &next)))
			return rc;
	}
	return 0;
}

static int answer_body(void *ctx, const uint8_t *data, size_t len)
{
	struct chain x = *(struct chain *)ctx;

	x.level = 0;
	return chain_sink(&x, data, len);
}

/* The host's answer as the session gets it: every value turned back into
 * its placeholder, in the head and the body, the body chunked anew (its
 * length changes). */
static int relay_answer(struct iconn *c, bool close_after, uint64_t *down)
{
	const struct http_parser *r = c->resp;
	struct scrub *sc[2 * SECRETS_MAX];
	struct chain x = {
		.c = c, .sc = sc, .bytes = down, .chunked = http_version_minor(c->req) == 1};
	bool body = answer_has_body(r);
	struct buf h = {0};
	char line[HTTP_LINE_MAX + 64];
	size_t used;
	int rc = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_secrets && !rc; i++) {
		const struct secret *s = &secrets[i];

		sc[x.n] = scrub_new_as((const uint8_t *)s->value, s->len,
				       (const uint8_t *)s->placeholder, s->ph_len);
		rc = sc[x.n] ? 0 : -EINVAL;
		x.n += !rc;
		if (!rc && (s->pct_len != s->len || memcmp(s->pct, s->value, s->len))) {
			sc[x.n] = scrub_new_as((const uint8_t *)s->pct, s->pct_len,
					       (const uint8_t *)s->placeholder, s->ph_len);
			rc = sc[x.n] ? 0 : -EINVAL;
			x.n += !rc;
		}
	}
	snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", http_status(r), http_reason(r));
	if (!rc)
		rc = swap_out(line, strlen(line), &h);
	for (size_t i = 0; !rc && i < http_header_count(r); i++) {
		const struct http_header *hd = http_header_at(r, i);

		if (hop_by_hop(hd->name) && !(!strcasecmp(hd->name, "Content-Length") && !body &&
					      http_framing(r) == HTTP_BODY_NONE))
			continue;
		rc = buf_put(&h, hd->name, hd->name_len) ?: buf_put(&h, ": ", 2)
								  ?: swap_out(hd->value, hd->value_len, &h)
									     ?: buf_put(&h, "\r\n", 2);
	}
	pthread_mutex_unlock(&lock);
	if (body && !x.chunked)
		close_after = true;
	if (!rc && body && x.chunked)
		rc = buf_put(&h, "Transfer-Encoding: chunked\r\n", 28);
	else if (!rc && !body && http_framing(r) == HTTP_BODY_LENGTH)
		rc = buf_put(&h, "Content-Length: 0\r\n", 19);
	if (!rc && close_after)
		rc = buf_put(&h, "Connection: close\r\n", 19);
	if (!rc)
		rc = buf_put(&h, "\r\n", 2) ?: out_put(c, h.p, h.len);
	buf_wipe(&h);
	while (!rc && body) {
		rc = http_parse(c->resp, c->up_in + c->up_off, c->up_len - c->up_off, &used,
				answer_body, &x);
		c->up_off += used;
		if (rc == HTTP_DONE) {
			rc = 0;
			break;
		}
		if (rc < 0)
			break;
		if ((rc = out_flush(c)))
			break;
		ssize_t n = up_fill(c, ANSWER_MS);

		if (n == 0) {
			rc = http_parse_eof(c->resp) == HTTP_DONE ? 0 : -ECONNRESET;
			break;
		}
		if (n < 0)
			rc = (int)n;
	}
	if (!rc && body)
		rc = chain_finish(&x) ?: x.chunked ? out_put(c, "0\r\n\r\n", 5) : 0;
	for (size_t i = 0; i < x.n; i++)
		scrub_free(sc[i]);
	return rc ? rc : out_flush(c);
}

static void on_upstream_fd(void *ctx, int fd)
{
	struct iconn *c = ctx;

	sessions_link_upstream(&c->link, fd);
}

static void up_drop(struct iconn *c)
{
	if (c->up_open)
		upstream_close(&c->up);
	c->up_open = false;
	sessions_link_upstream(&c->link, -1);
	c->up_off = c->up_len = 0;
}

static bool client_keeps(const struct http_parser *req)
{
	const struct http_header *h = http_header_find(req, "Connection");

	if (h && strcasestr(h->value, "close"))
		return false;
	return http_version_minor(req) == 1 || (h && strcasestr(h->value, "keep-alive"));
}

static void receipt_add(struct iconn *c, const char *method, const char *target, int status,
			int64_t start, uint64_t up, uint64_t down, enum receipt_outcome o)
{
	char path[RECEIPT_PATH_MAX + 1];
	struct receipt r = {
		.ended_at_ms = 0,
		.session = c->session,
		.provider = "intercept",
		.credential_var = "",
		.host = c->sni,
		.method = method,
		.path = path,
		.status = status,
		.duration_ms = now_ms() - start,
		.bytes_up = up,
		.bytes_down = down,
		.outcome = o,
	};
	struct timespec ts;
	const char *q = strchr(target, '?');

	/* as a provider route's: a denied call at most once a minute a session,
	 * with the count of those left out, so a loop cannot flood receipts.db */
	if (o == RECEIPT_DENIED && !sessions_denied_due(c->session, &r.unrecorded))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	r.ended_at_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	/* the query is never kept, and a path may hold a placeholder */
	receipt_path(target, path);
	r.query_len = q ? strlen(q + 1) : 0;
	journal_add(&r);
}

/* One request. Returns whether the connection goes on. */
static bool serve_request(struct iconn *c)
{
	const struct http_header *host, *upg;
	const char *method, *target, *path;
	bool keep, head, reused;
	uint64_t up_bytes = 0, down_bytes = 0;
	int64_t start;
	char why[512];
	int rc, st;

	rc = read_head(c);
	start = now_ms();
	if (rc < 0) {
		if (http_error_status(c->req))
			answerf(c, http_error_status(c->req),
				"errand-broker: the request is malformed\n");
		return false;
	}
	method = http_method(c->req);
	target = http_target(c->req);
	keep = client_keeps(c->req);
	head = !strcmp(method, "HEAD");
	path = target;
	/* absolute-form: its authority must be the SNI too, then origin-form */
	if (!strncasecmp(target, "https://", 8) || !strncasecmp(target, "http://", 7)) {
		const char *a = strstr(target, "://") + 3;
		size_t alen = strcspn(a, "/?#");

		if (!authority_is_sni(c, a, alen)) {
			answerf(c, 421,
				"errand-broker: the request names another host than the TLS "
				"server name %s\n",
				c->sni);
			receipt_add(c, method, "/", 421, start, 0, 0, RECEIPT_REFUSED);
			return false;
		}
		path = a[alen] ? a + alen : "/";
	}
	if (path[0] != '/' && strcmp(path, "*")) {
		answerf(c, 400, "errand-broker: the request target is not a path\n");
		return false;
	}
	host = http_header_find(c->req, "Host");
	if (!host || !authority_is_sni(c, host->value, host->value_len)) {
		answerf(c, 421,
			"errand-broker: Host must be the TLS server name %s (no domain fronting)\n",
			c->sni);
		receipt_add(c, method, path, 421, start, 0, 0, RECEIPT_REFUSED);
		return false;
	}
	if (config_gated_host(up_env->cfg, c->sni, c->port) && !method_reads(method) &&
	    !config_write_allowed(up_env->cfg, c->sni, c->port)) {
		char m[32];

		/* the method as the session wrote it may be anything: shown escaped */
		snprintf(m, sizeof(m), "%s", receipt_method(method));
		blog_info("session=%s intercept %s: %s refused (read-only host)", c->session,
			  c->sni, m);
		answerf(c, 403,
			"errand-broker: %s is read-only (sandbox.egress.readOnly): GET, HEAD, "
			"OPTIONS and TRACE only; add it to sandbox.egress.writeAllowed to let "
			"the session write to it\n",
			c->sni);
		receipt_add(c, method, path, 403, start, 0, 0, RECEIPT_DENIED);
		return false;
	}
	upg = http_header_find(c->req, "Upgrade");
	if (upg || !strcmp(method, "CONNECT") || !strcmp(method, "PRI")) {
		answerf(c, 501,
			"errand-broker: protocol upgrades (WebSocket, h2c) and tunnels are not "
			"relayed "
			"to %s, an intercepted host\n",
			c->sni);
		receipt_add(c, method, path, 501, start, 0, 0, RECEIPT_REFUSED);
		return false;
	}
	reused = c->up_open;
again:
	if (!c->up_open) {
		st = upstream_open(&c->up, up_env, &c->route, &c->ring, on_upstream_fd, c, why,
				   sizeof(why));
		if (st) {
			sessions_link_upstream(&c->link, -1);
			blog_warnx("session=%s intercept %s: %s", c->session, c->sni, why);
			answerf(c, st, "errand-broker: %s\n", why);
			receipt_add(c, method, path, st, start, 0, 0,
				    st == 403 ? RECEIPT_REFUSED : RECEIPT_UNREACHABLE);
			return false;
		}
		c->up_open = true;
	}
	rc = send_head(c, path);
	if (!rc)
		rc = send_body(c, &up_bytes);
	if (!rc)
		rc = read_answer_head(c, head);
	if (rc && reused && !up_bytes && http_framing(c->req) == HTTP_BODY_NONE &&
	    !http_error_status(c->req)) {
		/* a kept connection the host had closed: once more, fresh */
		up_drop(c);
		reused = false;
		goto again;
	}
	if (rc) {
		up_drop(c);
		if (http_error_status(c->req)) {
			answerf(c, http_error_status(c->req),
				"errand-broker: the request's body is malformed\n");
		} else {
			blog_warnx("session=%s intercept %s: the host's answer failed (%s)",
				   c->session, c->sni, strerror(-rc));
			answerf(c, rc == -ETIMEDOUT ? 504 : 502,
				"errand-broker: upstream unreachable (%s: %s)\n", c->sni,
				rc == -ETIMEDOUT ? "no answer in time" : "the answer failed");
		}
		receipt_add(c, method, path, 502, start, up_bytes, 0, RECEIPT_UNREACHABLE);
		return false;
	}
	st = http_status(c->resp);
	if (st == 101) {
		answerf(c, 502, "errand-broker: %s switched protocols, which is not relayed\n",
			c->sni);
		receipt_add(c, method, path, 502, start, up_bytes, 0, RECEIPT_REFUSED);
		return false;
	}
	{
		const struct http_header *ce = http_header_find(c->resp, "Content-Encoding");

		if (answer_has_body(c->resp) && ce && strcasecmp(ce->value, "identity")) {
			blog_warnx("session=%s intercept %s: refused a compressed answer",
				   c->session, c->sni);
			answerf(c, 502,
				"errand-broker: %s answered compressed; the broker asked for "
				"identity and relays nothing it cannot scrub\n",
				c->sni);
			receipt_add(c, method, path, 502, start, up_bytes, 0, RECEIPT_REFUSED);
			return false;
		}
	}
	{
		const struct http_header *conn = http_header_find(c->resp, "Connection");

		if (http_framing(c->resp) == HTTP_BODY_CLOSE || http_version_minor(c->resp) != 1 ||
		    (conn && strcasestr(conn->value, "close")))
			keep = false;
	}
	/* an HTTP/1.0 session reads a body to the end of the connection */
	if (http_version_minor(c->req) == 0)
		keep = false;
	rc = relay_answer(c, !keep, &down_bytes);
	receipt_add(c, method, path, st, start, up_bytes, down_bytes,
		    rc ? RECEIPT_INTERRUPTED : RECEIPT_COMPLETED);
	blog_info("session=%s intercept %s %s -> %d (%llu bytes up, %llu down)", c->session, c->sni,
		  receipt_method(method), st, (unsigned long long)up_bytes,
		  (unsigned long long)down_bytes);
	return !rc && keep && !c->client_failed;
}

static void iconn_free(struct iconn *c)
{
	conns_open--;
	up_drop(c);
	sessions_link_del(&c->link);
	upstream_close(&c->cl); /* closes fd */
	io_uring_queue_exit(&c->ring);
	http_parser_free(c->req);
	http_parser_free(c->resp);
	free(c);
}

static void *iconn_main(void *arg)
{
	struct iconn *c = arg;
	const char *sni;
	char standin[BROKER_STANDIN_LEN + 1];
	int rc;

	if (!sessions_lookup(&c->link.peer, "", c->session, standin)) {
		char a[ADDR_STRLEN];

		blog_info("intercept: a connection from %s, which holds no session; closed",
			  addr_str(&c->link.peer, a));
		goto out;
	}
	rc = upstream_accept(&c->cl, server_ctx, c->fd, &c->ring, HANDSHAKE_MS);
	c->fd = -1; /* c->cl holds it */
	if (rc) {
		blog_debug("session=%s intercept: the TLS handshake failed (%s); a server name "
			   "that is no secret's host is not served",
			   c->session, strerror(-rc));
		goto out;
	}
	sni = SSL_get_servername(c->cl.ssl, TLSEXT_NAMETYPE_host_name);
	snprintf(c->sni, sizeof(c->sni), "%s", sni ? sni : "");
	lower(c->sni);
	c->port = intercepted_port(c->sni);
	c->prov.name = c->sni;
	c->prov.host = c->sni;
	c->prov.port = c->port;
	c->prov.tls = true;
	c->route = up_template;
	c->route.p = &c->prov;
	while (serve_request(c))
		;
out:
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
		c->cl.fd = -1;
	}
	iconn_free(c);
	return NULL;
}

static int peer_addr(int fd, struct addr *out)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	if (ss.ss_family == AF_INET)
		addr_from_v4(out, ((struct sockaddr_in *)&ss)->sin_addr.s_addr);
	else
		memcpy(out->b, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
	return 0;
}

void intercept_start(int fd)
{
	struct iconn *c;
	pthread_attr_t attr;
	pthread_t t;
	int one = 1, rc;

	if (!server_ctx || conns_open >= INTERCEPT_CONN_MAX) {
		if (server_ctx)
			blog_warnx("%d intercepted connections are open; one more is refused",
				   INTERCEPT_CONN_MAX);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	conns_open++;
	c->fd = fd;
	c->cl.fd = -1;
	c->up.fd = -1;
	c->link.client_fd = fd;
	c->link.upstream_fd = -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((rc = peer_addr(fd, &c->link.peer)) || (rc = ring_setup(&c->ring))) {
		blog_warnx("an intercepted connection cannot be served: %s", strerror(-rc));
		conns_open--;
		close(fd);
		free(c);
		return;
	}
	c->req = http_parser_new(HTTP_REQUEST);
	c->resp = http_parser_new(HTTP_RESPONSE);
	sessions_link_add(&c->link);
	if (!c->req || !c->resp) {
		close(c->fd);
		iconn_free(c);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, iconn_main, c);
	pthread_attr_destroy(&attr);
	if (rc) {
		blog_warnx("an intercepted connection cannot be served: %s", strerror(rc));
		close(c->fd);
		iconn_free(c);
	}
}
