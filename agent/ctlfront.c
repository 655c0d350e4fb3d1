/* errandctl's front: the binary a user runs as errandctl. It hands the
 * plainest `errandctl run` (the command, --config, --egress, --pin,
 * --secret, --env, --json) to a running errand-agent itself and waits for
 * its exit status; any other command line, and any run it cannot hand over
 * exactly as errandctl-full would, it execs errandctl-full with, unchanged.
 *
 * Why a second program: glibc's start alone, static or not, asks the CPU
 * for its features and caches with some seventy CPUID instructions, and on
 * a virtual machine each one traps to the hypervisor: 0.7 ms of every exec
 * here, a tenth of a session's start. So this file links no libc at all:
 * its own system calls, no allocation, no locale, and nothing it cannot
 * refuse by handing over.
 *
 * The agent checks a run against its own configuration. errandctl-full
 * checks it first against the one the caller named; this front sends that
 * configuration's text instead, and the agent refuses a run whose text is
 * not its own, so every refusal comes from errandctl-full, word for word.
 * Whatever the agent refuses before the session starts, the front hands to
 * errandctl-full, which asks again and says why (see agent/client.c, whose
 * wait for the exit status this repeats). */
#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/signalfd.h>
#include <poll.h>
#include <time.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "agent/control.h"
#include "lib/config.h"

#define EXIT_ERRAND 125
#define FULL_NAME "errandctl-full"
#define REQ_MAX (1u << 20) /* the agent's limit on a run request */
#define CONFIG_MAX (256u << 10)
#define PATH_LEN 4096
#define START_TIMEOUT_S 600 /* as agent/client.c */
#define EXIT_WAIT_MS 3000
#define SIG_BIT(s) (1ull << ((s)-1))

/* System calls. */

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	r = x0;
#else
#error "errandctl's front knows the system calls of x86_64 and aarch64 only"
#endif
	return r;
}

#define STR_(x) #x
#define STR(x) STR_(x)
#define SYS(n, a, b, c) sys6(__NR_##n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define SYS4(n, a, b, c, d) sys6(__NR_##n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define SYS5(n, a, b, c, d, e)                                                                     \
	sys6(__NR_##n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

static long xread(int fd, void *buf, size_t len)
{
	long n;

	do
		n = SYS(read, fd, buf, len);
	while (n == -4 /* EINTR */);
	return n;
}

static void xwrite_all(int fd, const char *s, size_t len)
{
	while (len) {
		long n = SYS(write, fd, s, len);

		if (n == -4)
			continue;
		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}

static __attribute__((noreturn)) void xexit(int status)
{
	for (;;)
		SYS(exit_group, status, 0, 0);
}

/* What the compiler may call for a struct copy or a zeroed array. */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);

void *memcpy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
}

void *memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;

	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}

static size_t slen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

/* Whether c is in s. */
static bool has_char(const char *s, char c)
{
	for (; *s; s++)
		if (*s == c)
			return true;
	return false;
}

static bool seq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static bool sprefix(const char *s, const char *prefix)
{
	while (*prefix)
		if (*s++ != *prefix++)
			return false;
	return true;
}

/* A text being built, never past its end: full marks it too long. */
struct buf {
	char *p;
	size_t len, cap;
	bool full;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n >= b->cap) {
		b->full = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, slen(s));
}

/* Messages, as errandctl-full words them: a, then b and c when given. */
static __attribute__((noreturn)) void say_exit(const char *a, const char *b, const char *c,
					       int status)
{
	char line[4400]; /* an error line of 1024 bytes, each shown as \xNN */
	struct buf m = {line, 0, sizeof(line), false};

	puts_(&m, "errandctl: ");
	puts_(&m, a);
	if (b)
		puts_(&m, b);
	if (c)
		puts_(&m, c);
	puts_(&m, "\n");
	xwrite_all(2, m.p, m.len);
	xexit(status);
}

/* As errandctl-full says it (agent_connect). */
static const char stuck[] = " has taken no connection for " STR(
	CONTROL_CONNECT_S) " s: the agent is stuck; see its log, or restart it";
static const char unread[] = " has read nothing of a request for " STR(
	CONTROL_CONNECT_S) " s: the agent is stuck; see its log, or restart it";

/* Everything it does not do itself: errandctl-full, next to this binary,
 * with the same command line and environment. */
static char **g_argv, **g_envp;
/* The signal mask errandctl was started with, put back for errandctl-full
 * once run's signals are blocked. */
static uint64_t g_sigmask;
static bool g_sigs_blocked;

static __attribute__((noreturn)) void hand_over(void)
{
	char path[PATH_LEN];
	long n = SYS4(readlinkat, AT_FDCWD, "/proc/self/exe", path, sizeof(path) - 1);
	size_t dir;

	if (n <= 0)
		say_exit("cannot find errandctl-full: /proc/self/exe cannot be read", NULL, NULL,
			 EXIT_ERRAND);
	path[n] = '\0';
	for (dir = (size_t)n; dir && path[dir - 1] != '/'; dir--)
		;
	if (dir + sizeof(FULL_NAME) > sizeof(path))
		say_exit("cannot find errandctl-full: its directory's path is too long", NULL, NULL,
			 EXIT_ERRAND);
	memcpy(path + dir, FULL_NAME, sizeof(FULL_NAME));
	if (g_sigs_blocked)
		SYS4(rt_sigprocmask, 2 /* SIG_SETMASK */, &g_sigmask, NULL, sizeof(g_sigmask));
	SYS(execve, path, g_argv, g_envp);
	say_exit("cannot run ", path,
		 "; errandctl and errandctl-full are installed together: reinstall errand",
		 EXIT_ERRAND);
}

/* JSON: what the run request needs written, and the little of the agent's
 * answers and the configuration it reads. */

/* Valid UTF-8 as jansson takes it (no overlong forms, no surrogates, at
 * most U+10FFFF, no NUL): anything else errandctl-full refuses by name. */
static bool utf8_valid(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s++, need, min, v;

		if (c < 0x80)
			continue;
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, min = 0x80, v = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2, min = 0x800, v = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, min = 0x10000, v = c & 0x07;
		else
			return false;
		while (need--) {
			if ((*s & 0xc0) != 0x80)
				return false;
			v = v << 6 | (*s++ & 0x3f);
		}
		if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
			return false;
	}
	return true;
}

static void put_jstr(struct buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	if (!utf8_valid((const unsigned char *)s))
		hand_over();
	put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};

			put(b, e, 2);
		} else if (c < 0x20) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

			put(b, e, 6);
		} else {
			put(b, (const char *)&c, 1);
		}
	}
	put(b, "\"", 1);
}

static const char *ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Past one JSON value; NULL for anything it cannot step over. */
static const char *skip_value(const char *p, const char *end, int depth)
{
	p = ws(p, end);
	if (p >= end || depth > 64)
		return NULL;
	if (*p == '"') {
		for (p++; p < end && *p != '"'; p++)
			if (*p == '\\' && ++p >= end)
				return NULL;
		return p < end ? p + 1 : NULL;
	}
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';

		p = ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				if (!(p = skip_value(p, end, depth + 1)))
					return NULL;
				p = ws(p, end);
				if (p >= end || *p != ':')
					return NULL;
				p++;
			}
			if (!(p = skip_value(p, end, depth + 1)))
				return NULL;
			p = ws(p, end);
			if (p < end && *p == ',') {
				p++;
				continue;
			}
			return p < end && *p == close ? p + 1 : NULL;
		}
	}
	while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
			   *p == '+' || *p == '.' || *p == 'E'))
		p++;
	return p;
}

/* The value of key in the object at p (its members only, not nested), or
 * NULL. A key written with escapes is not matched. */
static const char *member(const char *p, const char *end, const char *key)
{
	size_t klen = slen(key);

	p = ws(p, end);
	if (p >= end || *p != '{')
		return NULL;
	p = ws(p + 1, end);
	while (p < end && *p == '"') {
		const char *k = p + 1, *v;

		if (!(p = skip_value(p, end, 1)))
			return NULL;
		v = ws(p, end);
		if (v >= end || *v != ':')
			return NULL;
		v = ws(v + 1, end);
		if ((size_t)(p - 1 - k) == klen && sprefix(k, key))
			return v;
		if (!(p = skip_value(v, end, 1)))
			return NULL;
		p = ws(p, end);
		if (p < end && *p == ',')
			p = ws(p + 1, end);
	}
	return NULL;
}

/* A string value without escapes into out; false for anything else. */
static bool string_value(const char *v, const char *end, char *out, size_t len)
{
	size_t n = 0;

	if (!v || v >= end || *v != '"')
		return false;
	for (v++; v < end && *v != '"'; v++) {
		if (*v == '\\' || n + 1 >= len)
			return false;
		out[n++] = *v;
	}
	out[n] = '\0';
	return v < end;
}

/* The command line. */

struct run_line {
	const char *config;
	const char *list[4][64]; /* egress, pins, secrets, env */
	size_t n[4];
	bool json;
	int cmd; /* the command's index in argv */
};

enum { L_EGRESS, L_PINS, L_SECRETS, L_ENV };
static const char *const list_names[] = {"egress", "pins", "secrets", "env"};

/* "--name VALUE" or "--name=VALUE", as errandctl-full reads them. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t len = slen(name);

	if (sprefix(argv[*i], name) && argv[*i][len] == '=')
		return argv[*i] + len + 1;
	if (!seq(argv[*i], name))
		return NULL;
	if (*i + 1 >= argc)
		hand_over();
	return argv[++*i];
}

/* What the agent checks of the request's shape before it reads it
 * (agent/control.c): a value it refuses there errandctl-full refuses in
 * words of its own. --pin and --env are NAME=VALUE with a NAME, --egress
 * and --secret not empty. */
static bool shapes_valid(const struct run_line *rl)
{
	for (size_t k = 0; k < 4; k++) {
		for (size_t i = 0; i < rl->n[k]; i++) {
			const char *v = rl->list[k][i];

			if (!v[0])
				return false;
			if ((k == L_PINS || k == L_ENV) && (v[0] == '=' || !has_char(v, '=')))
				return false;
		}
	}
	return true;
}

/* errandctl [--config FILE] run [OPTIONS] -- CMD [ARG...], or hand_over. */
static void parse(int argc, char **argv, struct run_line *rl)
{
	static const char *const list_opts[] = {"--egress", "--pin", "--secret", "--env"};
	const char *v;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++)
		if (!(v = opt_value(argc, argv, &i, "--config")))
			hand_over();
		else
			rl->config = v;
	if (i >= argc || !seq(argv[i], "run"))
		hand_over();
	for (i++; i < argc; i++) {
		size_t k;

		if (seq(argv[i], "--")) {
			rl->cmd = i + 1;
			if (rl->cmd >= argc || !argv[rl->cmd][0] || !shapes_valid(rl))
				hand_over();
			return;
		}
		if (seq(argv[i], "--json")) {
			rl->json = true;
			continue;
		}
		if ((v = opt_value(argc, argv, &i, "--config"))) {
			rl->config = v;
			continue;
		}
		for (k = 0; k < 4; k++)
			if ((v = opt_value(argc, argv, &i, list_opts[k])))
				break;
		if (k == 4 || rl->n[k] >= 64)
			hand_over();
		rl->list[k][rl->n[k]++] = v;
	}
	hand_over();
}

static bool is_socket(int fd)
{
	struct stat st;

	return SYS(fstat, fd, &st, 0) == 0 && S_ISSOCK(st.st_mode);
}

/* The configuration's text and its paths.run (or errand's default). */
static void config_read(const char *path, struct buf *text, char *run_dir, size_t len)
{
	const char *paths, *end;
	long fd = SYS4(openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0), n;
	struct stat st;

	/* Not a regular file (a pipe, a terminal, a FIFO no one writes):
	 * errandctl-full says why it takes none. */
	if (fd < 0 || SYS(fstat, fd, &st, 0) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size >= (long)text->cap - 1)
		hand_over();
	while ((n = xread((int)fd, text->p + text->len, text->cap - 1 - text->len)) > 0)
		text->len += (size_t)n;
	SYS(close, fd, 0, 0);
	if (n < 0 || text->len >= text->cap - 1)
		hand_over();
	text->p[text->len] = '\0';
	end = text->p + text->len;
	if (slen(text->p) != text->len || !skip_value(text->p, end, 0))
		hand_over();
	paths = member(text->p, end, "paths");
	if (paths && member(paths, end, "run")) {
		if (!string_value(member(paths, end, "run"), end, run_dir, len))
			hand_over();
	} else {
		memcpy(run_dir, "/run/errand", sizeof("/run/errand"));
	}
}

static void request(struct buf *b, int argc, char **argv, const struct run_line *rl,
		    const struct buf *config)
{
	char cwd[PATH_LEN];
	const char *term = NULL;
	bool has_term = false;
	long n = SYS(getcwd, cwd, sizeof(cwd), 0);

	if (n <= 0 || cwd[0] != '/')
		hand_over();
	for (char **e = g_envp; *e && !term; e++) /* the first, as getenv */
		if (sprefix(*e, "TERM="))
			term = *e;
	for (size_t i = 0; i < rl->n[L_ENV]; i++)
		has_term |= sprefix(rl->list[L_ENV][i], "TERM=");
	puts_(b, "{\"argv\":[");
	for (int i = rl->cmd; i < argc; i++) {
		if (i > rl->cmd)
			puts_(b, ",");
		put_jstr(b, argv[i]);
	}
	puts_(b, "]");
	for (size_t k = 0; k < 4; k++) {
		puts_(b, ",\"");
		puts_(b, list_names[k]);
		puts_(b, "\":[");
		for (size_t i = 0; i < rl->n[k]; i++) {
			if (i)
				puts_(b, ",");
			put_jstr(b, rl->list[k][i]);
		}
		/* The agent's TERM is not the caller's (as errandctl-full). */
		if (k == L_ENV && term && !has_term && utf8_valid((const unsigned char *)term)) {
			if (rl->n[k])
				puts_(b, ",");
			put_jstr(b, term);
		}
		puts_(b, "]");
	}
	puts_(b, ",\"project\":");
	put_jstr(b, cwd);
	if (rl->json)
		puts_(b, ",\"json\":true");
	puts_(b, ",\"config\":");
	put_jstr(b, config->p);
	puts_(b, "}");
	if (b->full)
		hand_over();
}

/* The control protocol (agent/control.h): an 8-byte header, then JSON. */

static void header(unsigned char *h, uint16_t type, uint32_t len)
{
	h[0] = CONTROL_VERSION >> 8;
	h[1] = CONTROL_VERSION & 0xff;
	h[2] = (unsigned char)(type >> 8);
	h[3] = (unsigned char)type;
	h[4] = (unsigned char)(len >> 24);
	h[5] = (unsigned char)(len >> 16);
	h[6] = (unsigned char)(len >> 8);
	h[7] = (unsigned char)len;
}

/* The run request with the command's stdin, stdout and stderr. 0 or
 * -errno. */
static long send_run(int fd, const struct buf *req)
{
	unsigned char h[CONTROL_HEADER_LEN];
	int fds[3] = {0, 1, 2};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct iovec iov[2] = {{h, sizeof(h)}, {req->p, req->len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	struct cmsghdr *cm;
	size_t sent = 0, total = sizeof(h) + req->len;
	long n;

	header(h, CONTROL_RUN, (uint32_t)req->len);
	memset(&u, 0, sizeof(u));
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	do
		n = SYS(sendmsg, fd, &mh, MSG_NOSIGNAL);
	while (n == -4);
	if (n <= 0)
		return n < 0 ? n : -32;
	for (sent = (size_t)n; sent < total; sent += (size_t)n) {
		const char *from =
			sent < sizeof(h) ? (const char *)h + sent : req->p + sent - sizeof(h);
		size_t len = sent < sizeof(h) ? sizeof(h) - sent : total - sent;

		do
			n = sys6(__NR_sendto, fd, (long)from, (long)len, MSG_NOSIGNAL, 0, 0);
		while (n == -4);
		if (n <= 0)
			return n < 0 ? n : -32;
	}
	return 0;
}

struct msg {
	uint16_t type;
	char p[4096]; /* the answers run gets are short: run-started, run-exit, error */
	size_t len;
	int fds[2];
	int nfds;
};

/* One answer, with the descriptors that came with it. 0 or -errno. */
static long recv_msg(int fd, struct msg *m)
{
	unsigned char h[CONTROL_HEADER_LEN];
	size_t got = 0, len;
	union {
		char buf[CMSG_SPACE(sizeof(int) * CONTROL_FDS_MAX)];
		struct cmsghdr align;
	} u;

	m->nfds = 0;
	while (got < sizeof(h)) {
		struct iovec iov = {h + got, sizeof(h) - got};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		long n;

		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		n = SYS(recvmsg, fd, &mh, MSG_CMSG_CLOEXEC);
		if (n == -4)
			continue;
		if (n <= 0)
			return n < 0 ? n : -104;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = NULL) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int f;

				memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (m->nfds < 2)
					m->fds[m->nfds++] = f;
				else
					SYS(close, f, 0, 0);
			}
		}
		got += (size_t)n;
	}
	if ((h[0] << 8 | h[1]) != CONTROL_VERSION)
		return -71; /* EPROTO */
	m->type = (uint16_t)(h[2] << 8 | h[3]);
	len = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
	if (len >= sizeof(m->p))
		return -90; /* EMSGSIZE */
	for (m->len = 0; m->len < len;) {
		long n = xread(fd, m->p + m->len, len - m->len);

		if (n <= 0)
			return n < 0 ? n : -104;
		m->len += (size_t)n;
	}
	m->p[m->len] = '\0';
	return 0;
}

static long int_value(const char *v, const char *end)
{
	long x = 0;

	if (!v || v >= end || *v < '0' || *v > '9')
		return -1;
	for (; v < end && *v >= '0' && *v <= '9' && x < 100000; v++)
		x = x * 10 + (*v - '0');
	return x;
}

/* The exit status: the agent's run-exit, else the launcher's status file,
 * as agent/client.c waits for them. */

static int exit_file_status(const char *run_dir, const char *id)
{
	char path[PATH_LEN], text[16];
	struct buf b = {path, 0, sizeof(path), false};
	long fd, n;

	puts_(&b, run_dir);
	puts_(&b, "/sessions/");
	puts_(&b, id);
	puts_(&b, ".exit");
	if (b.full || (fd = SYS4(openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0)) < 0)
		return -1;
	n = xread((int)fd, text, sizeof(text) - 1);
	SYS(close, fd, 0, 0);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	return (int)int_value(text, text + n);
}

/* One byte as esc_text() shows it (lib/escape.h): printable ASCII as it
 * is, any other as \xNN. */
static void put_shown(struct buf *b, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};

	if (c >= 0x20 && c < 0x7f)
		put(b, (const char *)&c, 1);
	else
		put(b, e, 4);
}

/* The bytes of the JSON string at v, each shown as esc_text() shows it.
 * The agent's lines hold printable ASCII alone (an error's control
 * characters are made spaces, an event's names are made safe), so jansson
 * escapes only '"' and '\\' in them. */
static void put_string_shown(struct buf *b, const char *v, const char *end)
{
	for (v++; v < end && *v != '"'; v++) {
		if (*v == '\\' && v + 1 < end)
			v++;
		put_shown(b, (unsigned char)*v);
	}
}

/* The next answer while the session runs: run-exit's status; RUN_LINE_SAID
 * for a run-line, which goes to stderr as errandctl-full prints it (a
 * refusal of the session's); -1 for anything else, or none. */
#define RUN_LINE_SAID (-2)
static int run_answer(int fd)
{
	struct msg m;
	const char *end, *v;
	char line[2200];
	struct buf b = {line, 0, sizeof(line), false};

	if (recv_msg(fd, &m))
		return -1;
	for (int i = 0; i < m.nfds; i++)
		SYS(close, m.fds[i], 0, 0);
	end = m.p + m.len;
	if (m.type == CONTROL_RUN_EXIT)
		return (int)int_value(member(m.p, end, "status"), end);
	if (m.type != CONTROL_RUN_LINE)
		return -1;
	v = member(m.p, end, "line");
	if (v && v < end && *v == '"') {
		put_string_shown(&b, v, end);
		put(&b, "\n", 1);
		xwrite_all(2, b.p, b.len);
	}
	return RUN_LINE_SAID;
}

static int wait_status(int sock, bool connected, const char *run_dir, const char *id)
{
	int status;

	for (int waited = 0; waited < EXIT_WAIT_MS; waited += 50) {
		struct pollfd p = {.fd = sock, .events = POLLIN};
		struct timespec tick = {0, 50 * 1000 * 1000};

		if (connected && sys6(__NR_ppoll, (long)&p, 1, (long)&tick, 0, 0, 0) > 0) {
			if ((status = run_answer(sock)) >= 0)
				return status;
			connected = status == RUN_LINE_SAID;
			continue;
		}
		if (connected)
			continue;
		if ((status = exit_file_status(run_dir, id)) >= 0)
			return status;
		SYS(nanosleep, &tick, 0, 0);
	}
	if ((status = exit_file_status(run_dir, id)) >= 0)
		return status;
	say_exit("session ", id, " ended without an exit status", EXIT_ERRAND);
}

/* An error answer to run. The request itself refused (errandctl's own
 * checks would have): errandctl-full checks it, and says why in its words,
 * nothing having started. Any other refusal is said as errandctl-full says
 * the agent's: its line, each byte shown as esc_text() shows it. */
static __attribute__((noreturn)) void refused(const char *p, const char *end)
{
	const char *v = member(p, end, "request"), *e = member(p, end, "error");
	char line[4200];
	struct buf b = {line, 0, sizeof(line), false};

	if (v && sprefix(v, "true"))
		hand_over();
	if (!e || e >= end || *e != '"')
		say_exit("errand-agent refused the run without saying why", NULL, NULL,
			 EXIT_ERRAND);
	line[0] = '\0';
	put_string_shown(&b, e, end);
	say_exit(line, NULL, NULL, EXIT_ERRAND);
}

/* The signals run passes on to the command: blocked, and read from a
 * signalfd, from before the request goes (one that comes while the session
 * starts reaches its command once it runs, rather than ending errandctl and
 * leaving the command unattended). SIGPIPE blocked too, not taken: a
 * reader of stderr that went away is an error on the write, not errandctl's
 * end (CMD's status is still given). The signalfd, or -1 (none free:
 * EMFILE): they act as they would have. */
static const uint64_t run_signals = SIG_BIT(1) | SIG_BIT(2) | SIG_BIT(3) | SIG_BIT(15);

static int signals_take(void)
{
	const uint64_t blocked = run_signals | SIG_BIT(13);
	long sfd;

	SYS4(rt_sigprocmask, 0 /* SIG_BLOCK */, &blocked, &g_sigmask, sizeof(blocked));
	g_sigs_blocked = true;
	sfd = SYS4(signalfd4, -1, &run_signals, sizeof(run_signals), O_CLOEXEC | O_NONBLOCK);
	if (sfd < 0)
		SYS4(rt_sigprocmask, 1 /* SIG_UNBLOCK */, &run_signals, NULL, sizeof(run_signals));
	return (int)sfd;
}

/* Ends errandctl by sig, as it would have ended with none blocked; or, where
 * it is ignored, says so and exits 125. */
static __attribute__((noreturn)) void die_by(int sig)
{
	uint64_t bit = SIG_BIT(sig);

	SYS(kill, SYS(getpid, 0, 0, 0), sig, 0);
	SYS4(rt_sigprocmask, 1 /* SIG_UNBLOCK */, &bit, NULL, sizeof(bit));
	say_exit("errand-agent did not start the session before errandctl was signalled", NULL,
		 NULL, EXIT_ERRAND);
}

/* Waits for the agent's answer to run, the signals that come meanwhile
 * (SIG_BIT each) kept in *pending for the command. Once one has come,
 * errandctl waits CONTROL_CONNECT_S more at most (a start under way ends
 * in milliseconds, a queued one may not), then ends by that signal. */
static void answer_wait(int sock, int sfd, uint64_t *pending)
{
	struct timespec left = {START_TIMEOUT_S, 0};
	int first = 0;

	for (;;) {
		struct pollfd p[2] = {{.fd = sock, .events = POLLIN},
				      {.fd = sfd, .events = POLLIN}};
		long r = sys6(__NR_ppoll, (long)p, 2, (long)&left, 0, 0, 0);
		struct signalfd_siginfo si;

		if (r == -4 /* EINTR */)
			continue;
		if (r == 0 && first)
			die_by(first);
		if (r == 0)
			say_exit("errand-agent did not start the session: no answer within 600 s",
				 NULL, NULL, EXIT_ERRAND);
		if (r < 0 || p[0].revents)
			return; /* recv_msg reads it, or times out */
		if (xread(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		*pending |= SIG_BIT(si.ssi_signo);
		if (!first) {
			first = (int)si.ssi_signo;
			if (left.tv_sec >= CONTROL_CONNECT_S)
				left = (struct timespec){CONTROL_CONNECT_S, 0};
		}
	}
}

static int run(int sock, int sfd, const char *run_dir)
{
	struct timeval none = {0, 0};
	struct msg m;
	char id[CONTROL_ID_MAX + 1];
	const char *end;
	int pidfd;
	bool connected = true, relayed, gone = false;
	uint64_t pending = 0;
	long rc;

	if (sfd >= 0)
		answer_wait(sock, sfd, &pending);
	rc = recv_msg(sock, &m);
	if (rc == -11 /* EAGAIN: the read timed out */)
		say_exit("errand-agent did not start the session: no answer within 600 s", NULL,
			 NULL, EXIT_ERRAND);
	if (rc == -104 /* ECONNRESET: the socket's end */)
		say_exit(
			"errand-agent did not start the session: reading a header: the peer closed",
			NULL, NULL, EXIT_ERRAND);
	if (rc)
		say_exit("errand-agent did not start the session: its answer cannot be read", NULL,
			 NULL, EXIT_ERRAND);
	for (int i = 0; m.type != CONTROL_RUN_STARTED && i < m.nfds; i++)
		SYS(close, m.fds[i], 0, 0);
	end = m.p + m.len;
	if (m.type == CONTROL_ERROR)
		refused(m.p, end);
	if (m.type != CONTROL_RUN_STARTED || m.nfds != 1 ||
	    !string_value(member(m.p, end, "session"), end, id, sizeof(id)))
		say_exit("errand-agent answered run with something else than run-started", NULL,
			 NULL, EXIT_ERRAND);
	pidfd = m.fds[0];
	/* The launcher passes them on to the command. */
	for (int sig = 1; sig <= 64; sig++)
		if (pending & SIG_BIT(sig))
			SYS4(pidfd_send_signal, pidfd, sig, 0, 0);
	relayed = member(m.p, end, "relayed") && sprefix(member(m.p, end, "relayed"), "true");
	/* The session may run for days: no read timeout from here on. */
	SYS5(setsockopt, sock, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	for (;;) {
		struct pollfd p[3] = {
			{.fd = gone ? -1 : pidfd, .events = POLLIN},
			{.fd = connected ? sock : -1, .events = POLLIN},
			{.fd = sfd, .events = POLLIN},
		};
		int status;

		long r = sys6(__NR_ppoll, (long)p, 3, 0, 0, 0, 0);

		if (r == -4 /* EINTR */)
			continue;
		if (r < 0)
			break;
		if (p[2].revents & POLLIN) {
			struct signalfd_siginfo si;

			/* The launcher passes it on to the command. */
			if (xread(sfd, &si, sizeof(si)) == sizeof(si))
				SYS4(pidfd_send_signal, pidfd, si.ssi_signo, 0, 0);
		}
		if (p[1].revents) {
			if ((status = run_answer(sock)) >= 0)
				return status;
			/* The agent went away: the launcher's pidfd says when. */
			connected = status == RUN_LINE_SAID;
		}
		if (p[0].revents)
			gone = true;
		if (gone && !(relayed && connected))
			break;
	}
	return wait_status(sock, connected, run_dir, id);
}

int front_main(long *sp);

int front_main(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);
	static char config_text[CONFIG_MAX], req_text[REQ_MAX];
	struct buf config = {config_text, 0, sizeof(config_text), false};
	struct buf req = {req_text, 0, sizeof(req_text), false};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval start = {START_TIMEOUT_S, 0}, wait = {CONTROL_CONNECT_S, 0},
		       no_wait = {0, 0};
	struct run_line rl = {0};
	struct buf sock_path = {sa.sun_path, 0, sizeof(sa.sun_path), false};
	char run_dir[PATH_LEN];
	long sock, err = 0;
	int sfd;

	g_argv = argv;
	g_envp = argv + argc + 1;
	parse(argc, argv, &rl);
	/* A socket would carry the session past every hook: errandctl-full
	 * relays it through a pipe. */
	for (int fd = 0; fd < 3; fd++)
		if (is_socket(fd))
			hand_over();
	config_read(rl.config ? rl.config : CONFIG_DEFAULT_PATH, &config, run_dir, sizeof(run_dir));
	request(&req, argc, argv, &rl, &config);
	puts_(&sock_path, run_dir);
	puts_(&sock_path, "/agent.sock");
	sock = SYS(socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock >= 0)
		SYS5(setsockopt, sock, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
	/* No agent there, or one that refuses this user: errandctl-full runs
	 * the session itself, or says so. One whose queue stayed full is
	 * stuck: no session starts beside it. */
	if (sock_path.full || sock < 0 || (err = SYS(connect, sock, &sa, sizeof(sa))) < 0) {
		if (err == -EAGAIN)
			say_exit("errand-agent's socket ", sa.sun_path, stuck, EXIT_ERRAND);
		hand_over();
	}
	/* The answer brings the session's pidfd: with no descriptor free to
	 * take it, a session would start that this process cannot follow. */
	if ((err = SYS(fcntl, sock, F_DUPFD_CLOEXEC, 0)) < 0)
		say_exit(CONTROL_NO_FD, NULL, NULL, EXIT_ERRAND);
	SYS(close, err, 0, 0);
	/* The request carries the configuration's text: it may be more than
	 * the socket holds, and an agent that took the connection but reads
	 * none of it is stuck as surely as one that took none. */
	SYS5(setsockopt, sock, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
	SYS5(setsockopt, sock, SOL_SOCKET, SO_RCVTIMEO, &start, sizeof(start));
	sfd = signals_take();
	if ((err = send_run((int)sock, &req)) == -EAGAIN)
		say_exit("errand-agent's socket ", sa.sun_path, unread, EXIT_ERRAND);
	if (err)
		hand_over(); /* the agent went away before it read it all: nothing started */
	SYS5(setsockopt, sock, SOL_SOCKET, SO_SNDTIMEO, &no_wait, sizeof(no_wait));
	xexit(run((int)sock, sfd, run_dir));
}

/* The entry: the kernel's stack (argc, argv, envp) to front_main, aligned. */
#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n"
	"xor %rbp,%rbp\nmov %rsp,%rdi\nand $-16,%rsp\ncall front_main\nhlt\n");
#elif defined(__aarch64__)
__asm__(".text\n.global _start\n_start:\n"
	"mov x29,#0\nmov x30,#0\nmov x0,sp\nand sp,x0,#-16\nbl front_main\n");
#endif
