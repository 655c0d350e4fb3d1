/* How the agent tells errand-broker which sessions exist: a SOCK_SEQPACKET
 * Unix socket (<paths.run>/broker.sock) taking one text message a packet,
 * "register SESSION ADDR PROVIDER=STANDIN...", "unregister SESSION" or
 * "key PROVIDER HEX" (the provider's key, which the agent reads as root from
 * credentialFile, so the broker's account needs no access to any secret
 * file), each answered "ok" or "error REASON". The broker sends "reread
 * PROVIDER" on the connection that last handed it a key when the provider
 * refused it (401); the agent answers with a fresh "key". Also the stand-ins
 * the agent mints for a session and the environment that hands them to it.
 * No TLS, no io_uring: the agent links this file. */
#ifndef ERRAND_BROKER_REGISTRY_H
#define ERRAND_BROKER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/addr.h"
#include "lib/config.h"

#define BROKER_SOCKET_NAME "broker.sock" /* in paths.run */
#define BROKER_DEFAULT_PORT 4780	 /* the broker's TCP port on every session gateway */
#define BROKER_INTERCEPT_PORT 4781	 /* its listener for a session's intercepted hosts */
#define BROKER_STANDIN_PREFIX "errand-session-"
#define BROKER_STANDIN_LEN (sizeof(BROKER_STANDIN_PREFIX) - 1 + 64)
#define BROKER_SESSION_MAX 64	  /* bytes of a session id */
#define BROKER_PROVIDER_MAX 64	  /* bytes of a provider name */
#define BROKER_PROVIDERS_MAX 32	  /* stand-ins in one registration */
#define BROKER_KEY_MAX 4095	  /* bytes of a provider's key */
#define BROKER_PLACEHOLDER_MAX 96 /* bytes of a secret's placeholder */
#define BROKER_HOST_MAX 300	  /* bytes of a host rule */
/* bytes of one message: a secret's value in hex with its placeholder and a
 * host is the longest */
#define BROKER_MSG_MAX (2 * BROKER_KEY_MAX + BROKER_PLACEHOLDER_MAX + BROKER_HOST_MAX + 16)

struct broker_standin {
	char provider[BROKER_PROVIDER_MAX + 1];
	char value[BROKER_STANDIN_LEN + 1]; /* errand-session- and 64 hex digits */
};

enum broker_msg_type {
	BROKER_MSG_REGISTER = 1,
	BROKER_MSG_UNREGISTER = 2,
	BROKER_MSG_KEY = 3,    /* agent to broker: a provider's key */
	BROKER_MSG_REREAD = 4, /* broker to agent: read that provider's key again */
	BROKER_MSG_SECRET = 5, /* agent to broker: a secret's value for one of its hosts */
};

struct broker_msg {
	enum broker_msg_type type;
	char session[BROKER_SESSION_MAX + 1];
	struct addr src; /* register: the session's address, the source of its calls */
	struct broker_standin standins[BROKER_PROVIDERS_MAX];
	size_t n_standins;
	char provider[BROKER_PROVIDER_MAX + 1]; /* key, reread */
	char key[BROKER_KEY_MAX + 1];		/* key, secret: the value, NUL-terminated */
	size_t key_len;
	char placeholder[BROKER_PLACEHOLDER_MAX + 1]; /* secret */
	char host[BROKER_HOST_MAX + 1];		      /* secret: a host rule */
};

/* Connects to a broker's registry socket (<paths.run>/broker.sock for a
 * shared broker, <paths.run>/sessions/<id>.broker for a session's own).
 * Returns a descriptor the caller owns, or -errno. */
int broker_connect(const char *sock_path);

/* Tells the broker that session (its id) calls from src holding standins[0..n),
 * or that it has stopped: from the answer on, none of its stand-ins is
 * honoured, and its open connections are closed. 0, or -errno: -EINVAL for a
 * bad id, address or stand-in, -EEXIST for an address another session holds,
 * -ENOENT for a session the broker does not know, -EPROTO for a broken answer. */
int broker_register(int fd, const char *session, const struct addr *src,
		    const struct broker_standin *standins, size_t n);
int broker_unregister(int fd, const char *session);

/* Writes a fresh stand-in, "errand-session-" and 64 hex digits from
 * getrandom(), NUL-terminated. 0 or -errno. */
int broker_standin_mint(char out[BROKER_STANDIN_LEN + 1]);
/* One fresh stand-in for every provider of cfg, in its order, into *out (the
 * caller frees it). 0 or -errno. */
int broker_standins_mint(const struct errand_config *cfg, struct broker_standin **out, size_t *n);
/* Whether s is a stand-in's form: the prefix and 64 lower-case hex digits. */
bool broker_standin_valid(const char *s);

/* The variable names a provider's stand-in and base URL go in: by kind
 * (anthropic: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; openai: OPENAI_...),
 * else the name upper case, "-" as "_": NAME_API_KEY, NAME_BASE_URL.
 * 0 or -ENAMETOOLONG. */
int broker_env_key_name(const struct config_provider *p, char *buf, size_t len);
int broker_env_url_name(const struct config_provider *p, char *buf, size_t len);

/* The environment a session gets for its providers, "NAME=VALUE" strings in
 * a NULL-terminated list the caller frees with strv_free (lib/strv.h): each
 * provider's stand-in, and its base URL http://GATEWAY:PORT/providers/NAME.
 * 0, -ENOENT when a provider has no stand-in in standins, or -ENOMEM. */
int broker_session_env(const struct errand_config *cfg, const char *gateway, uint16_t port,
		       const struct broker_standin *standins, size_t n, char ***env, size_t *n_env);

/* Reads a provider's key from path as the caller (the agent: root), the
 * file's first line without trailing blanks, into buf (cap bytes, NUL-
 * terminated), and its permission bits into *mode. Its length, or -errno:
 * -ENOENT, -EACCES, -EISDIR/-EINVAL (not a regular file), -ENODATA (empty),
 * -EBADMSG (a control character, "[" or "]", which no key holds), -EFBIG
 * (over BROKER_KEY_MAX). */
int broker_key_read(const char *path, char *buf, size_t cap, unsigned int *mode);
/* What broker_key_read's rc means, for a message. */
const char *broker_key_strerror(int rc);
/* The line refusing provider's credentialFile file, whose broker_key_read
 * said rc: what is wrong with it and what to change. */
void broker_key_refusal(const char *provider, const char *file, int rc, char *buf, size_t len);
/* Hands provider's key to the broker on fd: the message only (the broker's
 * "ok" comes later), or, with wait, its answer too. 0 or -errno (-ENOENT: the
 * broker has no such provider). */
int broker_key_hand(int fd, const char *provider, const char *key, size_t len, bool wait);
/* Reads every provider's credentialFile of cfg and hands each key on fd (as
 * broker_key_hand). 0, or -errno with one line in err naming the file. */
int broker_keys_hand(int fd, const struct errand_config *cfg, bool wait, char *err, size_t errlen);
/* The agent's side of a held registry connection: reads one message from fd
 * and answers a "reread" with the provider's key read afresh (a file that
 * cannot be read now is logged, and the broker keeps the key it has). 0, or
 * -errno when the connection is gone. */
int broker_keeper_serve(int fd, const struct errand_config *cfg);
/* "secret PLACEHOLDER HEX HOST": hands the value a session's placeholder
 * stands for toward one host rule (a message a host; the broker adds each to
 * the placeholder's). Waits for the answer. 0 or -errno. */
int broker_secret_hand(int fd, const char *placeholder, const char *value, size_t len,
		       const char *host);
/* The broker's side: asks the agent on fd to read provider's key again. */
int broker_reread_ask(int fd, const char *provider);

/* Reads one message, buf[0..len) (not NUL-terminated). 0 or -EINVAL. */
int broker_msg_parse(const char *buf, size_t len, struct broker_msg *out);

#endif
