/* Escaping session-controlled text for logs, tables and commands to paste;
 * see escape.h. */
#include <string.h>

#include "lib/escape.h"

static bool printable(unsigned char c)
{
	return c >= 0x20 && c < 0x7f;
}

/* The escaped form of one byte into out (at most 4 bytes, no NUL); in bash's
 * $'...', a backslash is one too. */
static size_t esc_byte(unsigned char c, bool shell, char out[4])
{
	static const char hex[] = "0123456789abcdef";

	if (printable(c) && !(shell && c == '\\')) {
		out[0] = (char)c;
		return 1;
	}
	if (c == '\\') {
		out[0] = out[1] = '\\';
		return 2;
	}
	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[c >> 4];
	out[3] = hex[c & 15];
	return 4;
}

bool esc_clean(const char *s)
{
	for (; *s; s++)
		if (!printable((unsigned char)*s))
			return false;
	return true;
}

const char *esc_textn(const char *s, size_t n, char *buf, size_t len)
{
	size_t o = 0;

	if (!len)
		return buf;
	for (size_t i = 0; i < n; i++) {
		char e[4];
		size_t k = esc_byte((unsigned char)s[i], false, e);

		if (o + k >= len)
			break;
		memcpy(buf + o, e, k);
		o += k;
	}
	buf[o] = '\0';
	return buf;
}

const char *esc_text(const char *s, char *buf, size_t len)
{
	return esc_textn(s ? s : "", s ? strlen(s) : 0, buf, len);
}

/* Characters no shell gives a meaning of its own anywhere in a word. */
static bool shell_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("._-:/@%+=,", c);
}

struct out {
	char *buf;
	size_t len, o;
	bool cut;
};

static void put(struct out *w, const char *s, size_t n)
{
	if (w->cut || w->o + n >= w->len) {
		w->cut = true;
		return;
	}
	memcpy(w->buf + w->o, s, n);
	w->o += n;
}

const char *esc_shell(const char *s, char *buf, size_t len)
{
	struct out w = {buf, len, 0, len == 0};
	bool plain = *s != '\0', ascii = true;

	for (const char *p = s; *p; p++) {
		plain &= shell_plain((unsigned char)*p);
		ascii &= printable((unsigned char)*p);
	}
	/* zsh reads a leading '=' as the path of a command */
	if (s[0] == '=')
		plain = false;
	if (plain) {
		put(&w, s, strlen(s));
	} else if (ascii) {
		put(&w, "'", 1);
		for (const char *p = s; *p; p++)
			put(&w, *p == '\'' ? "'\\''" : p, *p == '\'' ? 4 : 1);
		put(&w, "'", 1);
	} else {
		put(&w, "$'", 2);
		for (const char *p = s; *p; p++) {
			char e[4];

			if (*p == '\'')
				put(&w, "\\'", 2);
			else
				put(&w, e, esc_byte((unsigned char)*p, true, e));
		}
		put(&w, "'", 1);
	}
	if (w.cut)
		w.o = 0;
	if (len)
		buf[w.o] = '\0';
	return buf;
}

void esc_fputs(const char *s, FILE *f)
{
	for (; s && *s; s++) {
		char e[4];

		fwrite(e, 1, esc_byte((unsigned char)*s, false, e), f);
	}
}

void esc_mountinfo_undo(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}
