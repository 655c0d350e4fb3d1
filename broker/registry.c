/* The agent's side of errand-broker's registry (and the message format both
 * sides read), the stand-ins a session is given, and the environment that
 * carries them and the broker's routes into the session. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "broker/registry.h"
#include "broker/scrub.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

int broker_connect(const char *sock_path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	cleanup_close int fd = -1;

	if (path_fmt(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)))
		return -errno;
	return steal_fd(&fd);
}

static bool session_id_ok(const char *s)
{
	return name_token_ok(s, BROKER_SESSION_MAX);
}

static bool provider_ok(const char *s, size_t n)
{
	if (!n || n > BROKER_PROVIDER_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return false;
	return true;
}

bool broker_standin_valid(const char *s)
{
	size_t p = sizeof(BROKER_STANDIN_PREFIX) - 1;

	if (strncmp(s, BROKER_STANDIN_PREFIX, p) || strlen(s) != BROKER_STANDIN_LEN)
		return false;
	return strspn(s + p, "0123456789abcdef") == BROKER_STANDIN_LEN - p;
}

/* One request, one answer: "ok" or "error REASON". */
static int exchange(int fd, const char *msg, size_t len)
{
	char reply[256];
	ssize_t n;

	n = send(fd, msg, len, MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EPROTO;
	n = recv(fd, reply, sizeof(reply) - 1, 0);
	if (n < 0)
		return -errno;
	reply[n] = '\0';
	if (!strcmp(reply, "ok"))
		return 0;
	if (!strncmp(reply, "error exists", 12))
		return -EEXIST;
	if (!strncmp(reply, "error unknown", 13))
		return -ENOENT;
	if (!strncmp(reply, "error invalid", 13))
		return -EINVAL;
	return -EPROTO;
}

int broker_register(int fd, const char *session, const struct addr *src,
		    const struct broker_standin *standins, size_t n)
{
	char msg[BROKER_MSG_MAX], a[ADDR_STRLEN];
	size_t len;
	int w;

	if (!session_id_ok(session) || n > BROKER_PROVIDERS_MAX)
		return -EINVAL;
	w = snprintf(msg, sizeof(msg), "register %s %s", session, addr_str(src, a));
	len = (size_t)w;
	for (size_t i = 0; i < n; i++) {
		if (!provider_ok(standins[i].provider, strlen(standins[i].provider)) ||
		    !broker_standin_valid(standins[i].value))
			return -EINVAL;
		w = snprintf(msg + len, sizeof(msg) - len, " %s=%s", standins[i].provider,
			     standins[i].value);
		if (w < 0 || (size_t)w >= sizeof(msg) - len)
			return -EMSGSIZE;
		len += (size_t)w;
	}
	return exchange(fd, msg, len);
}

int broker_unregister(int fd, const char *session)
{
	char msg[BROKER_MSG_MAX];
	int w;

	if (!session_id_ok(session))
		return -EINVAL;
	w = snprintf(msg, sizeof(msg), "unregister %s", session);
	return exchange(fd, msg, (size_t)w);
}

int broker_key_read(const char *path, char *buf, size_t cap, unsigned int *mode)
{
	/* no O_NOFOLLOW: the path is root's configuration, and a key kept
	 * behind a symlink (rotated by switching it) is common; what it names
	 * must still be a regular file */
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	char tmp[BROKER_KEY_MAX + 2];
	struct scrub *sc;
	size_t len = 0;
	struct stat st;
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	while (len < sizeof(tmp) - 1 && (n = read(fd, tmp + len, sizeof(tmp) - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		len += (size_t)n;
	}
	tmp[len] = '\0';
	len = strcspn(tmp, "\r\n");
	if (len > BROKER_KEY_MAX) {
		rc = -EFBIG;
		goto out;
	}
	while (len && (tmp[len - 1] == ' ' || tmp[len - 1] == '\t'))
		len--;
	tmp[len] = '\0';
	if (!len) {
		rc = -ENODATA;
		goto out;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)tmp[i] < 0x20 || tmp[i] == 0x7f || tmp[i] == '[' ||
		    tmp[i] == ']') {
			rc = -EBADMSG;
			goto out;
		}
	if (len >= cap) {
		rc = -ENOBUFS;
		goto out;
	}
	/* a key the broker could not find in an answer (scrub_new: one that
	 * "[redacted]" holds, or with a %XX decoded a bracket or what it
	 * holds) is refused here, at the session's start, not by a 502 at
	 * each call */
	sc = scrub_new((const uint8_t *)tmp, len);
	if (!sc && errno == EINVAL) {
		rc = -EILSEQ;
		goto out;
	}
	scrub_free(sc);
	memcpy(buf, tmp, len + 1);
	if (mode)
		*mode = st.st_mode & 07777;
	rc = (int)len;
out:
	explicit_bzero(tmp, sizeof(tmp));
	return rc;
}

const char *broker_key_strerror(int rc)
{
	switch (rc) {
	case -EISDIR:
	case -EINVAL:
		return "it is not a regular file";
	case -ENODATA:
		return "it is empty";
	case -EBADMSG:
		return "its first line holds a control character, [ or ], which no key holds";
	case -EFBIG:
		return "its first line is longer than 4095 bytes";
	case -EILSEQ:
		return "the broker could not find it in an answer to redact it: "
		       "\"[redacted]\" holds it, or with a %XX in it decoded it holds "
		       "a bracket or what \"[redacted]\" holds";
	default:
		return strerror(-rc);
	}
}

void broker_key_refusal(const char *provider, const char *file, int rc, char *buf, size_t len)
{
	/* read, but no key errand can use: its text is what to change */
	if (rc == -EBADMSG || rc == -EILSEQ || rc == -EFBIG)
		snprintf(buf, len,
			 "agent.providers.%s: credentialFile %s holds no key errand can use (%s); "
			 "put the provider's real key there, or remove the provider",
			 provider, file, broker_key_strerror(rc));
	else
		snprintf(buf, len,
			 "agent.providers.%s: credentialFile %s cannot be read (%s); write the key "
			 "there (root, 0600), or remove the provider",
			 provider, file, broker_key_strerror(rc));
}

int broker_key_hand(int fd, const char *provider, const char *key, size_t len, bool wait)
{
	static const char hex[] = "0123456789abcdef";
	char msg[BROKER_MSG_MAX];
	size_t at;
	ssize_t n;
	int rc;

	if (!provider_ok(provider, strlen(provider)) || !len || len > BROKER_KEY_MAX)
		return -EINVAL;
	at = (size_t)snprintf(msg, sizeof(msg), "key %s ", provider);
	for (size_t i = 0; i < len; i++) {
		msg[at++] = hex[(unsigned char)key[i] >> 4];
		msg[at++] = hex[(unsigned char)key[i] & 15];
	}
	if (wait) {
		rc = exchange(fd, msg, at);
	} else {
		n = send(fd, msg, at, MSG_NOSIGNAL | MSG_DONTWAIT);
		rc = n < 0 ? -errno : (size_t)n == at ? 0 : -EPROTO;
	}
	explicit_bzero(msg, sizeof(msg));
	return rc;
}

int broker_secret_hand(int fd, const char *placeholder, const char *value, size_t len,
		       const char *host)
{
	static const char hex[] = "0123456789abcdef";
	char *msg = malloc(BROKER_MSG_MAX);
	size_t at;
	int rc;

	if (!msg)
		return -ENOMEM;
	if (!len || len > BROKER_KEY_MAX || strlen(placeholder) > BROKER_PLACEHOLDER_MAX ||
	    strlen(host) > BROKER_HOST_MAX || strpbrk(placeholder, " \r\n") ||
	    strpbrk(host, " \r\n")) {
		free(msg);
		return -EINVAL;
	}
	at = (size_t)snprintf(msg, BROKER_MSG_MAX, "secret %s ", placeholder);
	for (size_t i = 0; i < len; i++) {
		msg[at++] = hex[(unsigned char)value[i] >> 4];
		msg[at++] = hex[(unsigned char)value[i] & 15];
	}
	at += (size_t)snprintf(msg + at, BROKER_MSG_MAX - at, " %s", host);
	rc = exchange(fd, msg, at);
	explicit_bzero(msg, BROKER_MSG_MAX);
	free(msg);
	return rc;
}

/* Reads provider p's key and hands it on fd. 0 or -errno, with err set. */
static int key_hand_one(int fd, const struct config_provider *p, bool wait, char *err,
			size_t errlen)
{
	char key[BROKER_KEY_MAX + 1];
	int rc = broker_key_read(p->credential_file, key, sizeof(key), NULL);

	if (rc < 0) {
		broker_key_refusal(p->name, p->credential_file, rc, err, errlen);
	} else {
		rc = broker_key_hand(fd, p->name, key, (size_t)rc, wait);
		if (rc)
			snprintf(err, errlen,
				 "provider %s: its key cannot be handed to the broker: %s", p->name,
				 strerror(-rc));
	}
	explicit_bzero(key, sizeof(key));
	return rc;
}

int broker_keys_hand(int fd, const struct errand_config *cfg, bool wait, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->n_providers; i++) {
		int rc = key_hand_one(fd, &cfg->providers[i], wait, err, errlen);

		if (rc)
			return rc;
	}
	return 0;
}

int broker_keeper_serve(int fd, const struct errand_config *cfg)
{
	char buf[BROKER_MSG_MAX + 1], err[512];
	struct broker_msg m;
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	buf[n] = '\0';
	/* the broker's answers to the keys handed without waiting */
	if (!strcmp(buf, "ok"))
		return 0;
	if (!strncmp(buf, "error ", 6)) {
		log_warnx("the broker refused a key: %.200s", buf + 6);
		return 0;
	}
	if (broker_msg_parse(buf, (size_t)n, &m) || m.type != BROKER_MSG_REREAD) {
		log_warnx("the broker sent what is not a reread request; its connection is "
			  "dropped");
		return -EPROTO;
	}
	for (size_t i = 0; i < cfg->n_providers; i++) {
		const struct config_provider *p = &cfg->providers[i];

		if (strcmp(p->name, m.provider))
			continue;
		if (key_hand_one(fd, p, false, err, sizeof(err)))
			log_warnx("%s; the broker keeps the key it has", err);
		else
			log_info(
				"provider %s: the provider refused the key; credentialFile %s read "
				"again and handed to the broker",
				p->name, p->credential_file);
		return 0;
	}
	log_warnx("the broker asked for the key of provider %s, which it does not have",
		  m.provider);
	return 0;
}

int broker_reread_ask(int fd, const char *provider)
{
	char msg[BROKER_PROVIDER_MAX + 16];
	int w = snprintf(msg, sizeof(msg), "reread %s", provider);
	ssize_t n;

	if (!provider_ok(provider, strlen(provider)))
		return -EINVAL;
	n = send(fd, msg, (size_t)w, MSG_NOSIGNAL | MSG_DONTWAIT);
	return n < 0 ? -errno : 0;
}

int broker_standin_mint(char out[BROKER_STANDIN_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	size_t p = sizeof(BROKER_STANDIN_PREFIX) - 1;
	uint8_t r[32];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -errno ? -errno : -EIO;
	memcpy(out, BROKER_STANDIN_PREFIX, p);
	for (size_t i = 0; i < sizeof(r); i++) {
		out[p + 2 * i] = hex[r[i] >> 4];
		out[p + 2 * i + 1] = hex[r[i] & 15];
	}
	out[BROKER_STANDIN_LEN] = '\0';
	return 0;
}

int broker_standins_mint(const struct errand_config *cfg, struct broker_standin **out, size_t *n)
{
	cleanup_free struct broker_standin *s = NULL;
	int rc;

	s = calloc(cfg->n_providers + 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->n_providers; i++) {
		if (strlen(cfg->providers[i].name) > BROKER_PROVIDER_MAX)
			return -EINVAL;
		strcpy(s[i].provider, cfg->providers[i].name);
		if ((rc = broker_standin_mint(s[i].value)))
			return rc;
	}
	*n = cfg->n_providers;
	*out = steal_pointer(&s);
	return 0;
}

static int env_name(const struct config_provider *p, const char *suffix, char *buf, size_t len)
{
	const char *base = p->name;
	size_t i;

	if (p->kind && (!strcmp(p->kind, "anthropic") || !strcmp(p->kind, "openai")))
		base = p->kind;
	if (path_fmt(buf, len, "%s_%s", base, suffix))
		return -ENAMETOOLONG;
	for (i = 0; buf[i]; i++) {
		if (buf[i] >= 'a' && buf[i] <= 'z')
			buf[i] = (char)(buf[i] - 32);
		else if (buf[i] == '-')
			buf[i] = '_';
	}
	return 0;
}

int broker_env_key_name(const struct config_provider *p, char *buf, size_t len)
{
	return env_name(p, "API_KEY", buf, len);
}

int broker_env_url_name(const struct config_provider *p, char *buf, size_t len)
{
	return env_name(p, "BASE_URL", buf, len);
}

static const struct broker_standin *standin_for(const char *provider,
						const struct broker_standin *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s[i].provider, provider))
			return &s[i];
	return NULL;
}

int broker_session_env(const struct errand_config *cfg, const char *gateway, uint16_t port,
		       const struct broker_standin *standins, size_t n, char ***env, size_t *n_env)
{
	char **v = NULL, name[128], line[512];
	size_t count = 0;

	for (size_t i = 0; i < cfg->n_providers; i++) {
		const struct config_provider *p = &cfg->providers[i];
		const struct broker_standin *s = standin_for(p->name, standins, n);
		int rc;

		if (!s) {
			strv_free(v);
			return -ENOENT;
		}
		rc = broker_env_key_name(p, name, sizeof(name));
		if (!rc)
			rc = path_fmt(line, sizeof(line), "%s=%s", name, s->value);
		if (!rc)
			rc = strv_push(&v, &count, line);
		if (!rc)
			rc = broker_env_url_name(p, name, sizeof(name));
		if (!rc)
			rc = path_fmt(line, sizeof(line), "%s=http://%s:%u/providers/%s", name,
				      gateway, port, p->name);
		if (!rc)
			rc = strv_push(&v, &count, line);
		if (rc) {
			strv_free(v);
			return rc;
		}
	}
	*env = v;
	*n_env = count;
	return 0;
}

/* The next space-separated word of buf[*pos..len) into word (NUL-terminated). */
static bool next_word(const char *buf, size_t len, size_t *pos, char *word, size_t cap)
{
	size_t s = *pos, e;

	if (s < len && buf[s] == ' ')
		s++;
	for (e = s; e < len && buf[e] != ' '; e++)
		if (!buf[e])
			return false;
	if (e == s || e - s >= cap)
		return false;
	memcpy(word, buf + s, e - s);
	word[e - s] = '\0';
	*pos = e;
	return true;
}

/* "key PROVIDER HEX" or "reread PROVIDER", from buf[pos..len). */
static int key_msg_parse(const char *buf, size_t len, size_t pos, struct broker_msg *out)
{
	size_t s, e;

	if (!next_word(buf, len, &pos, out->provider, sizeof(out->provider)) ||
	    !provider_ok(out->provider, strlen(out->provider)))
		return -EINVAL;
	if (out->type == BROKER_MSG_REREAD)
		return pos == len ? 0 : -EINVAL;
	if (pos >= len || buf[pos] != ' ')
		return -EINVAL;
	s = pos + 1;
	e = len;
	if (e == s || (e - s) % 2 || (e - s) / 2 > BROKER_KEY_MAX)
		return -EINVAL;
	for (size_t i = s; i < e; i += 2) {
		int hi = hex_value((unsigned char)buf[i]),
		    lo = hex_value((unsigned char)buf[i + 1]);
		unsigned char c;

		if (hi < 0 || lo < 0)
			goto bad;
		c = (unsigned char)(hi << 4 | lo);
		/* what broker_key_read would never have read */
		if (c < 0x20 || c == 0x7f || c == '[' || c == ']')
			goto bad;
		out->key[out->key_len++] = (char)c;
	}
	out->key[out->key_len] = '\0';
	return 0;
bad:
	explicit_bzero(out->key, sizeof(out->key));
	out->key_len = 0;
	return -EINVAL;
}

/* "secret PLACEHOLDER HEX HOST", from buf[pos..len): a value any byte but
 * CR, LF and NUL (what the agent's store refuses). */
static int secret_msg_parse(const char *buf, size_t len, size_t pos, struct broker_msg *out)
{
	char hexv[2 * BROKER_KEY_MAX + 1];

	if (!next_word(buf, len, &pos, out->placeholder, sizeof(out->placeholder)) ||
	    !next_word(buf, len, &pos, hexv, sizeof(hexv)) ||
	    !next_word(buf, len, &pos, out->host, sizeof(out->host)) || pos != len)
		return -EINVAL;
	if (!hexv[0] || strlen(hexv) % 2)
		return -EINVAL;
	for (size_t i = 0; hexv[i]; i += 2) {
		int hi = hex_value((unsigned char)hexv[i]),
		    lo = hex_value((unsigned char)hexv[i + 1]);
		unsigned char c = hi < 0 || lo < 0 ? 0 : (unsigned char)(hi << 4 | lo);

		if (hi < 0 || lo < 0 || c == '\0' || c == '\r' || c == '\n') {
			explicit_bzero(hexv, sizeof(hexv));
			explicit_bzero(out->key, sizeof(out->key));
			out->key_len = 0;
			return -EINVAL;
		}
		out->key[out->key_len++] = (char)c;
	}
	explicit_bzero(hexv, sizeof(hexv));
	out->key[out->key_len] = '\0';
	return 0;
}

int broker_msg_parse(const char *buf, size_t len, struct broker_msg *out)
{
	char word[BROKER_PROVIDER_MAX + BROKER_STANDIN_LEN + 2];
	size_t pos = 0;

	memset(out, 0, sizeof(*out));
	if (len > BROKER_MSG_MAX || !next_word(buf, len, &pos, word, sizeof(word)))
		return -EINVAL;
	if (!strcmp(word, "register"))
		out->type = BROKER_MSG_REGISTER;
	else if (!strcmp(word, "unregister"))
		out->type = BROKER_MSG_UNREGISTER;
	else if (!strcmp(word, "key"))
		out->type = BROKER_MSG_KEY;
	else if (!strcmp(word, "reread"))
		out->type = BROKER_MSG_REREAD;
	else if (!strcmp(word, "secret"))
		out->type = BROKER_MSG_SECRET;
	else
		return -EINVAL;
	if (out->type == BROKER_MSG_SECRET)
		return secret_msg_parse(buf, len, pos, out);
	if (out->type == BROKER_MSG_KEY || out->type == BROKER_MSG_REREAD)
		return key_msg_parse(buf, len, pos, out);
	if (!next_word(buf, len, &pos, out->session, sizeof(out->session)) ||
	    !session_id_ok(out->session))
		return -EINVAL;
	if (out->type == BROKER_MSG_UNREGISTER)
		return pos == len ? 0 : -EINVAL;
	if (!next_word(buf, len, &pos, word, ADDR_STRLEN) || addr_parse(word, &out->src))
		return -EINVAL;
	while (pos < len) {
		struct broker_standin *s = &out->standins[out->n_standins];
		char *eq;

		if (out->n_standins == BROKER_PROVIDERS_MAX ||
		    !next_word(buf, len, &pos, word, sizeof(word)))
			return -EINVAL;
		eq = strchr(word, '=');
		if (!eq || !provider_ok(word, (size_t)(eq - word)) || !broker_standin_valid(eq + 1))
			return -EINVAL;
		memcpy(s->provider, word, (size_t)(eq - word));
		strcpy(s->value, eq + 1);
		for (size_t i = 0; i < out->n_standins; i++)
			if (!strcmp(out->standins[i].provider, s->provider))
				return -EINVAL;
		out->n_standins++;
	}
	return 0;
}
