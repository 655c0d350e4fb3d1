/* provider: the broker selftests' stand-in for a model provider and for the
 * agent. "serve" is a TLS server (BoringSSL) that logs every call it gets and
 * answers by its path: an echo of what it received by default, and the
 * awkward answers the broker must handle (redirect, compressed, oversize,
 * a key echoed in a header or across a body's pieces or re-encoded, 401, a
 * stall, an
 * answer ended by the connection's close, with close_notify or without); with
 * --accept FILE, any call whose key is not FILE's first line is 401, as a
 * provider answers a rotated-out key. "register", "unregister", "keeper",
 * "mint" and "env" drive broker/registry.c as the agent does. Exit 0 on success, 1 on failure, 2 on
 * a usage error. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker/registry.h"
#include "lib/addr.h"
#include "lib/config.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/util.h"

#define HEAD_MAX 65536
#define BIG (64ULL << 20)

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;
static const char *accept_path; /* --accept: the one key taken */

static int usage(void)
{
	fprintf(stderr, "usage: provider serve --cert FILE --key FILE [--log FILE] [--accept FILE] "
			"ADDR:PORT\n"
			"       provider register SOCKET SESSION ADDR [PROVIDER=STANDIN]...\n"
			"       provider keeper SOCKET CONFIG\n"
			"       provider unregister SOCKET SESSION\n"
			"       provider mint\n"
			"       provider env CONFIG GATEWAY PORT [PROVIDER=STANDIN]...\n");
	return 2;
}

struct client {
	SSL *ssl;
	int fd;
};

static int put(struct client *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		int n = SSL_write(c->ssl, p, (int)len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

__attribute__((format(printf, 2, 3))) static int putf(struct client *c, const char *fmt, ...)
{
	char buf[HEAD_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return put(c, buf, (size_t)n);
}

/* A request: head text, split into lines in place, and its body length. */
struct req {
	char head[HEAD_MAX];
	size_t head_len;
	char *method, *target;
	char *lines[128];
	size_t n_lines;
	char key[4096]; /* what came in Authorization: Bearer or x-api-key */
	char body_tail[HEAD_MAX];
	size_t body_len;
};

static const char *header(struct req *r, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < r->n_lines; i++)
		if (!strncasecmp(r->lines[i], name, n) && r->lines[i][n] == ':')
			return r->lines[i] + n + 1 + strspn(r->lines[i] + n + 1, " ");
	return NULL;
}

/* Reads one request (head and body, Content-Length or chunked). 0, 1 at a
 * clean end, -1 on failure. */
static int read_req(struct client *c, struct req *r, char *buf, size_t *have)
{
	char *end;
	const char *cl, *te;
	size_t need;

	memset(r, 0, offsetof(struct req, body_tail));
	r->body_len = 0;
	while (!(end = memmem(buf, *have, "\r\n\r\n", 4))) {
		int n;

		if (*have >= HEAD_MAX - 1)
			return -1;
		n = SSL_read(c->ssl, buf + *have, (int)(HEAD_MAX - 1 - *have));
		if (n <= 0)
			return *have ? -1 : 1;
		*have += (size_t)n;
	}
	r->head_len = (size_t)(end - buf) + 4;
	memcpy(r->head, buf, r->head_len - 2);
	r->head[r->head_len - 2] = '\0';
	memmove(buf, buf + r->head_len, *have - r->head_len);
	*have -= r->head_len;
	for (char *line = strtok(r->head, "\r\n"); line; line = strtok(NULL, "\r\n"))
		if (r->n_lines < ARRAY_SIZE(r->lines))
			r->lines[r->n_lines++] = line;
	if (!r->n_lines)
		return -1;
	r->method = r->lines[0];
	r->target = strchr(r->lines[0], ' ');
	if (!r->target)
		return -1;
	*r->target++ = '\0';
	*strchrnul(r->target, ' ') = '\0';
	memmove(r->lines, r->lines + 1, --r->n_lines * sizeof(char *));
	if ((cl = header(r, "Authorization")) && !strncasecmp(cl, "Bearer ", 7))
		snprintf(r->key, sizeof(r->key), "%s", cl + 7);
	else if ((cl = header(r, "x-api-key")))
		snprintf(r->key, sizeof(r->key), "%s", cl);
	cl = header(r, "Content-Length");
	te = header(r, "Transfer-Encoding");
	if (te) {
		/* chunked: read to the last chunk; the size lines are counted out */
		for (;;) {
			char *eol;
			size_t sz;
			int n;

			while (!(eol = memmem(buf, *have, "\r\n", 2))) {
				n = SSL_read(c->ssl, buf + *have, (int)(HEAD_MAX - 1 - *have));
				if (n <= 0)
					return -1;
				*have += (size_t)n;
			}
			sz = strtoul(buf, NULL, 16);
			need = (size_t)(eol - buf) + 2 + sz + 2;
			while (*have < need) {
				n = SSL_read(c->ssl, buf + *have, (int)(HEAD_MAX - 1 - *have));
				if (n <= 0)
					return -1;
				*have += (size_t)n;
			}
			r->body_len += sz;
			memmove(buf, buf + need, *have - need);
			*have -= need;
			if (!sz)
				return 0;
		}
	}
	need = cl ? strtoul(cl, NULL, 10) : 0;
	r->body_len = need;
	while (need) {
		size_t take = *have < need ? *have : need;
		int n;

		memmove(buf, buf + take, *have - take);
		*have -= take;
		need -= take;
		if (!need)
			break;
		n = SSL_read(c->ssl, buf, HEAD_MAX - 1);
		if (n <= 0)
			return -1;
		*have = (size_t)n;
	}
	return 0;
}

static void log_req(struct req *r)
{
	pthread_mutex_lock(&log_lock);
	if (log_file) {
		fprintf(log_file, "request %s %s\n", r->method, r->target);
		for (size_t i = 0; i < r->n_lines; i++)
			fprintf(log_file, "header %s\n", r->lines[i]);
		fprintf(log_file, "body %zu\nend\n", r->body_len);
		fflush(log_file);
	}
	pthread_mutex_unlock(&log_lock);
}

static int answer_echo(struct client *c, struct req *r)
{
	char body[HEAD_MAX];
	size_t o = 0;

	o += (size_t)snprintf(body + o, sizeof(body) - o, "method=%s\ntarget=%s\n", r->method,
			      r->target);
	for (size_t i = 0; i < r->n_lines && o < sizeof(body); i++)
		o += (size_t)snprintf(body + o, sizeof(body) - o, "%s\n", r->lines[i]);
	if (o < sizeof(body))
		o += (size_t)snprintf(body + o, sizeof(body) - o, "body-bytes=%zu\n", r->body_len);
	if (o > sizeof(body))
		o = sizeof(body);
	return putf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
		    o) ||
	       put(c, body, o);
}

/* The received key inside a body whose pieces meet at offset at: one chunk
 * up to it, a pause, the rest, so the broker reads them apart. */
static int answer_split(struct client *c, struct req *r, size_t at)
{
	char body[8192];
	int n = snprintf(body, sizeof(body), "before-%s-after", r->key);

	if (at > (size_t)n)
		at = (size_t)n;
	if (putf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))
		return -1;
	if (at && putf(c, "%zx\r\n", at))
		return -1;
	if (at && (put(c, body, at) || put(c, "\r\n", 2)))
		return -1;
	usleep(20000);
	if ((size_t)n > at && (putf(c, "%zx\r\n", (size_t)n - at) ||
			       put(c, body + at, (size_t)n - at) || put(c, "\r\n", 2)))
		return -1;
	return putf(c, "0\r\n\r\n");
}

/* The target echoed as frameworks re-encode what they echo: its %XX in
 * lower-case hex (X-Lower and the body's lower=), and the query's k= decoded
 * and every byte of it encoded again (X-All and all=). */
static int answer_recode(struct client *c, struct req *r)
{
	static const char hex[] = "0123456789abcdef";
	char lower[4096], all[3 * 4096 + 1];
	const char *k = strstr(r->target, "?k=");
	size_t o = 0;

	snprintf(lower, sizeof(lower), "%s", r->target);
	for (char *p = strchr(lower, '%'); p && p[1] && p[2]; p = strchr(p + 3, '%'))
		p[1] = (char)tolower((unsigned char)p[1]),
		p[2] = (char)tolower((unsigned char)p[2]);
	for (k = k ? k + 3 : ""; *k && *k != '&' && o + 3 < sizeof(all); k++) {
		unsigned b = (unsigned char)*k;

		if (*k == '%' && isxdigit((unsigned char)k[1]) && isxdigit((unsigned char)k[2])) {
			sscanf(k + 1, "%2x", &b);
			k += 2;
		}
		all[o++] = '%';
		all[o++] = hex[b >> 4];
		all[o++] = hex[b & 15];
	}
	all[o] = '\0';
	return putf(c,
		    "HTTP/1.1 200 OK\r\nX-Lower: %s\r\nX-All: %s\r\nContent-Length: %zu\r\n\r\n"
		    "lower=%s\nall=%s\n",
		    lower, all, strlen(lower) + strlen(all) + 12, lower, all);
}

/* A line, a pause of two seconds, another line: what a relay has of an
 * answer must reach its client during the pause. */
static int answer_trickle(struct client *c)
{
	if (putf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n"))
		return -1;
	sleep(2);
	return putf(c, "7\r\nsecond\n\r\n0\r\n\r\n");
}

static int answer_stream(struct client *c, uint64_t total)
{
	static char block[65536];

	memset(block, 'a', sizeof(block));
	if (putf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))
		return -1;
	while (total) {
		size_t n = total < sizeof(block) ? (size_t)total : sizeof(block);

		if (putf(c, "%zx\r\n", n) || put(c, block, n) || put(c, "\r\n", 2))
			return -1;
		total -= n;
	}
	return putf(c, "0\r\n\r\n");
}

/* Whether the call's key is --accept's file's first line (read each time:
 * the test rotates it). */
static bool key_accepted(const struct req *r)
{
	char want[8192] = "";
	FILE *f = fopen(accept_path, "re");

	if (!f)
		return false;
	if (!fgets(want, sizeof(want), f))
		want[0] = '\0';
	fclose(f);
	want[strcspn(want, "\r\n")] = '\0';
	return want[0] && !strcmp(want, r->key);
}

static int answer(struct client *c, struct req *r)
{
	const char *t = r->target, *q = strchr(t, '?');
	size_t at;

	if (accept_path && !key_accepted(r))
		return putf(c,
			    "HTTP/1.1 401 Unauthorized\r\nContent-Length: 10\r\n\r\nwrong key\n");

	if (strstr(t, "/redirect"))
		return putf(c, "HTTP/1.1 302 Found\r\nLocation: https://elsewhere.test/next\r\n"
			       "Content-Length: 5\r\n\r\nmoved");
	if (strstr(t, "/gzip-empty"))
		return putf(
			c,
			"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n");
	if (strstr(t, "/gzip"))
		return putf(c,
			    "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n"
			    "\x1f\x8b\x08\x01");
	if (strstr(t, "/huge-declared")) {
		if (putf(c, "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n\r\n", BIG + 1))
			return -1;
		sleep(5);
		return -1;
	}
	if (strstr(t, "/exact-stream"))
		return answer_stream(c, BIG);
	if (strstr(t, "/huge-stream"))
		return answer_stream(c, BIG + 1);
	/* an answer no parser takes, after the request was read and acted on */
	if (strstr(t, "/bad-head")) {
		putf(c, "HTTP/1.1 2x0 Nope\r\n\r\n");
		return -1;
	}
	/* a header named after what was sent, as an echo of parameters does */
	if (strstr(t, "/key-name"))
		return putf(c, "HTTP/1.1 200 OK\r\nX-K-%s: 1\r\nContent-Length: 2\r\n\r\nok",
			    r->key);
	if (strstr(t, "/key-header"))
		return putf(c, "HTTP/1.1 200 OK\r\nX-Echo: key=%s;\r\nContent-Length: 2\r\n\r\nok",
			    r->key);
	if (strstr(t, "/trickle"))
		return answer_trickle(c);
	if (strstr(t, "/recode"))
		return answer_recode(c, r);
	if (strstr(t, "/split") && q && sscanf(q, "?at=%zu", &at) == 1)
		return answer_split(c, r, at);
	if (strstr(t, "/unauthorized"))
		return putf(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\n\r\nno\n");
	/* An answer that ends with the connection, closed by TLS's close_notify
	 * or cut without it (a truncation any host on the path could make). */
	if (strstr(t, "/eof-clean") || strstr(t, "/eof-cut")) {
		if (putf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it\n"))
			return -1;
		if (strstr(t, "/eof-clean"))
			SSL_shutdown(c->ssl);
		return -1;
	}
	if (strstr(t, "/stall")) {
		sleep(30);
		return -1;
	}
	return answer_echo(c, r);
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	static __thread char buf[HEAD_MAX];
	struct req *r = malloc(sizeof(*r));
	size_t have = 0;

	if (r && SSL_accept(c->ssl) == 1)
		while (read_req(c, r, buf, &have) == 0) {
			log_req(r);
			if (answer(c, r))
				break;
		}
	free(r);
	SSL_free(c->ssl);
	close(c->fd);
	free(c);
	return NULL;
}

static int cmd_serve(int argc, char **argv)
{
	const char *cert = NULL, *key = NULL, *logpath = NULL, *spec = NULL;
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct addr a;
	uint16_t port;
	SSL_CTX *ctx;
	int fd, one = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cert") && i + 1 < argc)
			cert = argv[++i];
		else if (!strcmp(argv[i], "--key") && i + 1 < argc)
			key = argv[++i];
		else if (!strcmp(argv[i], "--log") && i + 1 < argc)
			logpath = argv[++i];
		else if (!strcmp(argv[i], "--accept") && i + 1 < argc)
			accept_path = argv[++i];
		else
			spec = argv[i];
	}
	if (!cert || !key || !spec || addr_port_parse(spec, &a, &port) || !port || !addr_is_v4(&a))
		return usage();
	ctx = SSL_CTX_new(TLS_method());
	if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		fprintf(stderr, "provider serve: cannot load %s and %s\n", cert, key);
		return 1;
	}
	if (logpath && !(log_file = fopen(logpath, "a"))) {
		fprintf(stderr, "provider serve: %s: %s\n", logpath, strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = addr_v4(&a);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 128)) {
		fprintf(stderr, "provider serve: %s: %s\n", spec, strerror(errno));
		return 1;
	}
	printf("ready %s\n", spec);
	fflush(stdout);
	for (;;) {
		struct client *c;
		pthread_t t;
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0)
			continue;
		c = calloc(1, sizeof(*c));
		if (!c || !(c->ssl = SSL_new(ctx))) {
			free(c);
			close(cfd);
			continue;
		}
		c->fd = cfd;
		/* head and body go in two writes: no 40 ms wait for the ACK between */
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		SSL_set_fd(c->ssl, cfd);
		if (pthread_create(&t, NULL, client_main, c)) {
			SSL_free(c->ssl);
			close(cfd);
			free(c);
			continue;
		}
		pthread_detach(t);
	}
}

static int parse_standins(int argc, char **argv, struct broker_standin *s, size_t *n)
{
	*n = 0;
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq || *n == BROKER_PROVIDERS_MAX ||
		    (size_t)(eq - argv[i]) > BROKER_PROVIDER_MAX ||
		    strlen(eq + 1) > BROKER_STANDIN_LEN)
			return -1;
		memcpy(s[*n].provider, argv[i], (size_t)(eq - argv[i]));
		s[*n].provider[eq - argv[i]] = '\0';
		strcpy(s[*n].value, eq + 1);
		(*n)++;
	}
	return 0;
}

static int result(int rc)
{
	if (!rc) {
		printf("ok\n");
		return 0;
	}
	printf("%s\n", strerrorname_np(-rc) ? strerrorname_np(-rc) : strerror(-rc));
	return 1;
}

static int cmd_register(int argc, char **argv)
{
	struct broker_standin s[BROKER_PROVIDERS_MAX];
	cleanup_close int fd = -1;
	struct addr a;
	size_t n;

	if (argc < 4 || addr_parse(argv[3], &a) || parse_standins(argc - 4, argv + 4, s, &n))
		return usage();
	fd = broker_connect(argv[1]);
	if (fd < 0)
		return result(fd);
	return result(broker_register(fd, argv[2], &a, s, n));
}

static int cmd_unregister(int argc, char **argv)
{
	cleanup_close int fd = -1;

	if (argc != 3)
		return usage();
	fd = broker_connect(argv[1]);
	if (fd < 0)
		return result(fd);
	return result(broker_unregister(fd, argv[2]));
}

/* The agent's part toward a broker started by hand: hands every provider's
 * key of CONFIG, says "ready", then answers the broker's rereads until it
 * goes away. */
static int cmd_keeper(int argc, char **argv)
{
	static struct errand_config cfg;
	char err[CONFIG_ERRLEN];
	cleanup_close int fd = -1;
	int rc;

	if (argc != 3)
		return usage();
	if (config_load(argv[2], true, &cfg, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	fd = broker_connect(argv[1]);
	if (fd < 0)
		return result(fd);
	if ((rc = broker_keys_hand(fd, &cfg, true, err, sizeof(err)))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return 1;
		if (broker_keeper_serve(fd, &cfg) < 0)
			return 0;
	}
}

static int cmd_mint(void)
{
	char s[BROKER_STANDIN_LEN + 1];
	int rc = broker_standin_mint(s);

	if (rc)
		return result(rc);
	printf("%s\n", s);
	return 0;
}

static int cmd_env(int argc, char **argv)
{
	struct broker_standin s[BROKER_PROVIDERS_MAX];
	struct errand_config cfg;
	char err[CONFIG_ERRLEN];
	char **env = NULL;
	size_t n, n_env;
	int rc;

	if (argc < 4 || parse_standins(argc - 4, argv + 4, s, &n))
		return usage();
	if (config_load(argv[1], true, &cfg, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	rc = broker_session_env(&cfg, argv[2], (uint16_t)atoi(argv[3]), s, n, &env, &n_env);
	for (size_t i = 0; !rc && i < n_env; i++)
		printf("%s\n", env[i]);
	strv_free(env);
	config_free(&cfg);
	return rc ? result(rc) : 0;
}

int main(int argc, char **argv)
{
	log_init("provider", false);
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "serve"))
		return cmd_serve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "register"))
		return cmd_register(argc - 1, argv + 1);
	if (!strcmp(argv[1], "unregister"))
		return cmd_unregister(argc - 1, argv + 1);
	if (!strcmp(argv[1], "keeper"))
		return cmd_keeper(argc - 1, argv + 1);
	if (!strcmp(argv[1], "mint"))
		return cmd_mint();
	if (!strcmp(argv[1], "env"))
		return cmd_env(argc - 1, argv + 1);
	return usage();
}
