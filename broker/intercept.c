/* Intercepted secret hosts. See intercept.h. One fiber a connection, as the
 * provider relay: the session's side is a TLS server over the accepted
 * socket, the host's a TLS client dialled by name; both through the ring
 * calls with deadlines. The ClientHello is BoringSSL's to parse: the broker
 * only reads the SNI it found. */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/stat.h>
#include <unistd.h>

#include "broker/blog.h"
#include "broker/conn.h"
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
#define HANDSHAKE_MS 10000
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
	if (!exact && up_env) {
		/* a gated host (sandbox.egress.readOnly), intercepted without a
		 * secret; its exact name comes before a secret's wildcard too */
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
	/* A host name's characters only: a wildcard rule matches any first
	 * label, and the name goes into the receipt and the certificate cache. */
	if (sni[strspn(sni, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._")])
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

/* Basic credentials of the request under way, as the host got them (the
 * value inside) and as the session wrote them (its placeholder inside): an
 * answer that echoes them gets the session's back. */
#define BASIC_MAX 4
struct basic {
	char *sent, *orig;
	size_t sent_len, orig_len;
};

struct iconn {
	struct conn io; /* the session's side a TLS server, the host's a TLS client */
	char session[BROKER_SESSION_MAX + 1];
	char sni[HOST_NAME_MAX_LEN + 1];
	uint16_t port;
	struct config_provider prov;
	struct route route;
	struct basic basic[BASIC_MAX];
	size_t n_basic;
};

static void basic_clear(struct iconn *c)
{
	for (size_t i = 0; i < c->n_basic; i++) {
		OPENSSL_cleanse(c->basic[i].sent, c->basic[i].sent_len);
		free(c->basic[i].sent);
		free(c->basic[i].orig);
	}
	c->n_basic = 0;
}

/* A growing buffer of bytes. */
struct buf {
	char *p;
	size_t len, cap;
};

/* Room for n bytes more after b->len, and a NUL. */
static int buf_room(struct buf *b, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	return 0;
}

static int buf_put(struct buf *b, const void *d, size_t n)
{
	if (buf_room(b, n))
		return -ENOMEM;
	if (n)
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

/* What matches at a place in a text: the bytes that replace it and how many
 * it replaces, 0 when nothing matches there. */
typedef size_t (*match_fn)(const void *ctx, const char *at, size_t left, const char **rep,
			   size_t *rep_len);

/* in[0..n) appended to out, each match replaced; the runs between matches
 * are copied whole. */
static int replace_each(const char *in, size_t n, match_fn match, const void *ctx, struct buf *out)
{
	size_t i = 0, run = 0;

	while (i < n) {
		const char *rep;
		size_t rep_len, used = match(ctx, in + i, n - i, &rep, &rep_len);

		if (!used) {
			i++;
			continue;
		}
		if (buf_put(out, in + run, i - run) || buf_put(out, rep, rep_len))
			return -ENOMEM;
		i += used;
		run = i;
	}
	return buf_put(out, in + run, n - run) ? -ENOMEM : 0;
}

struct swap_to {
	const char *host;
	uint16_t port;
	bool pct;
};

static size_t placeholder_at(const void *ctx, const char *at, size_t left, const char **rep,
			     size_t *rep_len)
{
	const struct swap_to *to = ctx;

	for (size_t k = 0; k < n_secrets; k++) {
		const struct secret *s = &secrets[k];

		if (left >= s->ph_len && !memcmp(at, s->placeholder, s->ph_len) &&
		    secret_to(s, to->host, to->port)) {
			*rep = to->pct ? s->pct : s->value;
			*rep_len = to->pct ? s->pct_len : s->len;
			return s->ph_len;
		}
	}
	return 0;
}

/* in[0..n) with every placeholder of a secret bound for host:port replaced by
 * its value (percent-encoded when pct), appended to out. Under lock. */
static int swap_in(const char *in, size_t n, const char *host, uint16_t port, bool pct,
		   struct buf *out)
{
	struct swap_to to = {.host = host, .port = port, .pct = pct};

	return replace_each(in, n, placeholder_at, &to, out);
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

static int basic_keep(struct iconn *c, const char *sent, const char *orig, size_t orig_len)
{
	struct basic *b;

	if (c->n_basic == BASIC_MAX)
		return -E2BIG; /* more than a request has: refused, never sent unscrubbed */
	b = &c->basic[c->n_basic];
	b->sent_len = strlen(sent);
	b->orig_len = orig_len;
	b->sent = strdup(sent);
	b->orig = strndup(orig, orig_len);
	if (!b->sent || !b->orig) {
		free(b->sent);
		free(b->orig);
		return -ENOMEM;
	}
	c->n_basic++;
	return 0;
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
			/* A value inside: an echo of what the host got must not
			 * carry it back, Base64 or not. */
			if (!rc &&
			    (swapped.len != plain.len || memcmp(swapped.p, plain.p, plain.len)))
				rc = basic_keep(c, enc, b64, b64_len);
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
	const struct http_parser *req = c->io.req;
	struct buf h = {0};
	char line[HOST_NAME_MAX_LEN + 64];
	int rc;

	basic_clear(c);
	pthread_mutex_lock(&lock);
	rc = buf_put(&h, http_method(req), strlen(http_method(req))) ?: buf_put(&h, " ", 1)
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
	for (size_t i = 0; !rc && i < http_header_count(req); i++) {
		const struct http_header *hd = http_header_at(req, i);

		/* Expect: the body follows at once; a 100 the host sends is skipped.
		 * A method override would make a read-only host's GET a write. */
		if (http_hop_by_hop(hd->name) || http_header_is_override(hd->name) ||
		    !strcasecmp(hd->name, "Host") || !strcasecmp(hd->name, "Accept-Encoding") ||
		    !strcasecmp(hd->name, "Expect"))
			continue;
		rc = header_in(c, hd, &h);
	}
	pthread_mutex_unlock(&lock);
	if (!rc)
		rc = conn_put(&c->io.up_out, h.p, h.len);
	buf_wipe(&h);
	return rc ? rc : conn_request_head_end(&c->io);
}

/* The answer's body, scrubbed by a chain of one scrubber a value (each finds
 * it raw and percent-encoded any way) and one a Basic credential the broker
 * encoded, framed as chunks. */
struct chain {
	struct conn_out *out;
	bool chunked; /* an HTTP/1.0 session reads the body to the connection's end */
	struct scrub **sc;
	size_t n, level;
	uint64_t *bytes;
};

static int chain_sink(void *ctx, const uint8_t *data, size_t len)
{
	struct chain *x = ctx, next = *x;

	if (x->level == x->n) {
		*x->bytes += len;
		return conn_chunk(x->out, x->chunked, data, len);
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

/* Part of an answer's head appended to h through the body's chain of
 * scrubbers, one after another, so that a head and a body agree: every value
 * (in any encoding) turned back into its placeholder, and each Basic
 * credential the broker encoded into the session's own. */
static int put_scrubbed(const struct chain *x, const char *p, size_t len, struct buf *h)
{
	struct buf t[2] = {{0}, {0}};
	const char *cur = p;
	int rc = 0;

	for (size_t i = 0; i < x->n && !rc; i++) {
		struct buf *b = &t[i % 2];
		size_t cap = len + 64, out;

		/* one scan, unless the value's replacements outgrow the guess */
		b->len = 0;
		if ((rc = buf_room(b, cap)))
			break;
		out = scrub_buffer(x->sc[i], (const uint8_t *)cur, len, (uint8_t *)b->p, cap);
		if (out == SIZE_MAX) {
			rc = -ENOMEM;
			break;
		}
		if (out > cap)
			explicit_bzero(b->p, cap); /* realloc may leave it behind */
		if (out > cap && !(rc = buf_room(b, out)) &&
		    scrub_buffer(x->sc[i], (const uint8_t *)cur, len, (uint8_t *)b->p, out) != out)
			rc = -ENOMEM;
		len = out;
		cur = b->p;
	}
	if (!rc)
		rc = buf_put(h, cur, len);
	buf_wipe(&t[0]);
	buf_wipe(&t[1]);
	return rc;
}

/* The host's answer as the session gets it: every value turned back into
 * its placeholder, in the head and the body, the body chunked anew (its
 * length changes). */
static int relay_answer(struct iconn *c, bool close_after, uint64_t *down)
{
	const struct http_parser *r = c->io.resp;
	struct scrub *sc[SECRETS_MAX + BASIC_MAX];
	struct chain x = {.out = &c->io.out, .sc = sc, .bytes = down};
	bool body = http_answer_has_body(r);
	struct buf h = {0};
	char line[HTTP_LINE_MAX + 64];
	int rc = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_secrets && !rc; i++) {
		const struct secret *s = &secrets[i];

		sc[x.n] = scrub_new_as((const uint8_t *)s->value, s->len,
				       (const uint8_t *)s->placeholder, s->ph_len);
		rc = sc[x.n] ? 0 : -EINVAL;
		x.n += !rc;
	}
	for (size_t i = 0; i < c->n_basic && !rc; i++) {
		sc[x.n] = scrub_new_as((const uint8_t *)c->basic[i].sent, c->basic[i].sent_len,
				       (const uint8_t *)c->basic[i].orig, c->basic[i].orig_len);
		rc = sc[x.n] ? 0 : -EINVAL;
		x.n += !rc;
	}
	snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", http_status(r), http_reason(r));
	if (!rc)
		rc = put_scrubbed(&x, line, strlen(line), &h);
	for (size_t i = 0; !rc && i < http_header_count(r); i++) {
		const struct http_header *hd = http_header_at(r, i);

		if (http_answer_field_dropped(r, hd->name, body))
			continue;
		/* the name too: a host may name a header after what it was sent
		 * (an echo of the query's parameters) */
		rc = put_scrubbed(&x, hd->name, hd->name_len, &h) ?: buf_put(&h, ": ", 2);
		if (!rc)
			rc = put_scrubbed(&x, hd->value, hd->value_len, &h);
		if (!rc)
			rc = buf_put(&h, "\r\n", 2);
	}
	pthread_mutex_unlock(&lock);
	if (!rc)
		rc = conn_put(&c->io.out, h.p, h.len);
	buf_wipe(&h);
	if (!rc)
		rc = conn_answer_head_end(&c->io, body, &x.chunked, &close_after);
	if (!rc && body)
		rc = conn_answer_body(&c->io, answer_body, NULL, &x);
	if (!rc && body)
		rc = chain_finish(&x) ?: x.chunked ? conn_put(&c->io.out, "0\r\n\r\n", 5) : 0;
	for (size_t i = 0; i < x.n; i++)
		scrub_free(sc[i]);
	return rc ? rc : conn_flush(&c->io.out);
}

/* One request, as its receipt tells it. */
struct ireq {
	const char *method;
	const char *target; /* the path (its query never kept), or "/" */
	int64_t start;
	int64_t started; /* journal_stamp() */
	uint64_t up, down;
};

static void receipt_add(struct iconn *c, const struct ireq *q, int status, enum receipt_outcome o)
{
	char path[RECEIPT_PATH_MAX + 1];
	struct receipt r = {
		.started_at_us = q->started,
		.ended_at_ms = 0,
		.session = c->session,
		.provider = "intercept",
		.credential_var = "",
		.host = c->sni,
		.method = q->method,
		.path = path,
		.status = status,
		.duration_ms = now_ms() - q->start,
		.bytes_up = q->up,
		.bytes_down = q->down,
		.outcome = o,
	};
	const char *query = strchr(q->target, '?');

	/* as a provider route's: a denied call at most once a minute a session,
	 * with the count of those left out, so a loop cannot flood receipts.db */
	if (o == RECEIPT_DENIED && !sessions_denied_due(c->session, &r.unrecorded))
		return;
	r.ended_at_ms = wall_ms();
	/* the query is never kept, and a path may hold a placeholder */
	receipt_path(q->target, path);
	r.query_len = query ? strlen(query + 1) : 0;
	journal_add(&r);
}

/* The broker's own answer to a request it does not relay, and its receipt
 * with status; the connection closes after it. Returns false, what
 * serve_request returns then. */
__attribute__((format(printf, 5, 6))) static bool refuse(struct iconn *c, const struct ireq *q,
							 int status, enum receipt_outcome o,
							 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	conn_vanswerf(&c->io, status, true, fmt, ap);
	va_end(ap);
	receipt_add(c, q, status, o);
	return false;
}

/* One request. Returns whether the connection goes on. */
static bool serve_request(struct iconn *c)
{
	const struct http_header *host, *upg;
	const char *target;
	struct ireq q = {0};
	bool keep, head, reused, any = false;
	char why[512];
	int rc, st;

	rc = conn_read_head(&c->io, INTERCEPT_IDLE_MS);
	q.start = now_ms();
	q.started = journal_stamp();
	if (rc < 0) {
		if (http_error_status(c->io.req))
			conn_answerf(&c->io, http_error_status(c->io.req), true,
				     "errand-broker: the request is malformed\n");
		return false;
	}
	q.method = http_method(c->io.req);
	target = http_target(c->io.req);
	keep = http_request_keeps(c->io.req);
	head = !strcmp(q.method, "HEAD");
	q.target = target;
	/* absolute-form: its authority must be the SNI too, then origin-form */
	if (!strncasecmp(target, "https://", 8) || !strncasecmp(target, "http://", 7)) {
		const char *a = strstr(target, "://") + 3;
		size_t alen = strcspn(a, "/?#");

		if (!authority_is_sni(c, a, alen)) {
			q.target = "/";
			return refuse(c, &q, 421, RECEIPT_REFUSED,
				      "errand-broker: the request names another host than the TLS "
				      "server name %s\n",
				      c->sni);
		}
		q.target = a[alen] ? a + alen : "/";
	}
	if (q.target[0] != '/' && strcmp(q.target, "*")) {
		conn_answerf(&c->io, 400, true,
			     "errand-broker: the request target is not a path\n");
		return false;
	}
	host = http_header_find(c->io.req, "Host");
	if (!host || !authority_is_sni(c, host->value, host->value_len))
		return refuse(
			c, &q, 421, RECEIPT_REFUSED,
			"errand-broker: Host must be the TLS server name %s (no domain fronting)\n",
			c->sni);
	if (config_gated_host(up_env->cfg, c->sni, c->port) && !method_reads(q.method) &&
	    !config_write_allowed(up_env->cfg, c->sni, c->port)) {
		char m[32];

		/* the method as the session wrote it may be anything: shown escaped */
		snprintf(m, sizeof(m), "%s", receipt_method(q.method));
		blog_info("session=%s intercept %s: %s refused (read-only host)", c->session,
			  c->sni, m);
		return refuse(
			c, &q, 403, RECEIPT_DENIED,
			"errand-broker: %s is read-only (sandbox.egress.readOnly): GET, HEAD, "
			"OPTIONS and TRACE only; add it to sandbox.egress.writeAllowed to let "
			"the session write to it\n",
			c->sni);
	}
	upg = http_header_find(c->io.req, "Upgrade");
	if (upg || !strcmp(q.method, "CONNECT") || !strcmp(q.method, "PRI"))
		return refuse(c, &q, 501, RECEIPT_REFUSED,
			      "errand-broker: protocol upgrades (WebSocket, h2c) and tunnels are "
			      "not relayed to %s, an intercepted host\n",
			      c->sni);
	reused = c->io.up_route != NULL;
again:
	st = conn_up_open(&c->io, up_env, &c->route, why, sizeof(why));
	if (st) {
		blog_warnx("session=%s intercept %s: %s", c->session, c->sni, why);
		return refuse(c, &q, st, st == 403 ? RECEIPT_REFUSED : RECEIPT_UNREACHABLE,
			      "errand-broker: %s\n", why);
	}
	rc = send_head(c, q.target);
	if (!rc)
		rc = conn_send_body(&c->io, &q.up, NULL); /* the body's bytes, as a provider's */
	if (!rc)
		rc = conn_read_answer_head(&c->io, head, &any);
	if (rc && reused && !any && (rc == -ECONNRESET || rc == -EPIPE) && !q.up &&
	    http_framing(c->io.req) == HTTP_BODY_NONE && !http_error_status(c->io.req)) {
		/* a kept connection the host had closed: once more, fresh; never
		 * after a byte of an answer, a timeout or a malformed answer,
		 * where the host may have acted on the request already */
		conn_up_drop(&c->io);
		reused = false;
		goto again;
	}
	if (rc) {
		/* the receipt says what the session was answered, and why */
		int status = http_error_status(c->io.req);

		conn_up_drop(&c->io);
		if (status) {
			conn_answerf(&c->io, status, true,
				     "errand-broker: the request's body is malformed\n");
			receipt_add(c, &q, status, RECEIPT_REFUSED);
			return false;
		}
		status = rc == -ETIMEDOUT ? 504 : 502;
		blog_warnx("session=%s intercept %s: the host's answer failed (%s)", c->session,
			   c->sni, strerror(-rc));
		conn_answerf(&c->io, status, true, "errand-broker: upstream unreachable (%s: %s)\n",
			     c->sni, rc == -ETIMEDOUT ? "no answer in time" : "the answer failed");
		receipt_add(c, &q, status, RECEIPT_UNREACHABLE);
		return false;
	}
	st = http_status(c->io.resp);
	if (st == 101)
		return refuse(c, &q, 502, RECEIPT_REFUSED,
			      "errand-broker: %s switched protocols, which is not relayed\n",
			      c->sni);
	if (http_answer_encoded(c->io.resp)) {
		blog_warnx("session=%s intercept %s: refused a compressed answer", c->session,
			   c->sni);
		return refuse(c, &q, 502, RECEIPT_REFUSED,
			      "errand-broker: %s answered compressed; the broker asked for "
			      "identity and relays nothing it cannot scrub\n",
			      c->sni);
	}
	/* an HTTP/1.0 session reads a body to the end of the connection */
	if (!http_answer_keeps(c->io.resp) || http_version_minor(c->io.req) == 0)
		keep = false;
	rc = relay_answer(c, !keep, &q.down);
	/* The host's connection carries the next request only when nothing past
	 * this answer is left in it: the next would read that as its own. */
	if (c->io.up_off != c->io.up_len)
		conn_up_drop(&c->io);
	receipt_add(c, &q, st, rc ? RECEIPT_INTERRUPTED : RECEIPT_COMPLETED);
	blog_info("session=%s intercept %s %s -> %d (%llu bytes up, %llu down)", c->session, c->sni,
		  receipt_method(q.method), st, (unsigned long long)q.up,
		  (unsigned long long)q.down);
	return !rc && keep && !c->io.out.failed;
}

static void iconn_free(struct iconn *c)
{
	basic_clear(c);
	conns_open--;
	conn_fini(&c->io);
	free(c);
}

static void iconn_main(void *arg)
{
	struct iconn *c = arg;
	const char *sni;
	char standin[BROKER_STANDIN_LEN + 1];
	int rc;

	if (!sessions_lookup(&c->io.link.peer, "", c->session, standin)) {
		char a[ADDR_STRLEN];

		blog_info("intercept: a connection from %s, which holds no session; closed",
			  addr_str(&c->io.link.peer, a));
		goto out;
	}
	rc = upstream_accept(&c->io.cl, server_ctx, c->io.cl.fd, HANDSHAKE_MS);
	if (rc) {
		blog_debug("session=%s intercept: the TLS handshake failed (%s); a server name "
			   "that is no secret's host is not served",
			   c->session, strerror(-rc));
		goto out;
	}
	sni = SSL_get_servername(c->io.cl.ssl, TLSEXT_NAMETYPE_host_name);
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
	iconn_free(c);
}

void intercept_start(int fd)
{
	struct iconn *c;
	int rc;

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
	if ((rc = conn_start(&c->io, fd, iconn_main, c))) {
		blog_warnx("an intercepted connection cannot be served: %s", strerror(-rc));
		conns_open--;
		free(c);
	}
}
