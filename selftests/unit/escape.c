/* Guarantee: what a session controls is shown only escaped: esc_text leaves
 * printable ASCII and writes every other byte (controls, ESC, DEL, C1, UTF-8)
 * as \xNN, and esc_shell gives a word that bash and sh read back as exactly
 * the string, whatever it holds ($(...), backticks, ';', quotes, ESC). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

static const char *const hostile[] = {
	"x;id>/tmp/p;.example",
	"$(id).example",
	"`id`.example",
	"a'b\"c\\d",
	"\x1b[2J\x1b]0;owned\x07",
	"line\nerrand: session=forged refused",
	"\x9b"
	"31m\x85\x7f\xff\xc2\x9b",
	"-n",
	"=ls",
	"~root",
	"a b\tc",
	"*.example",
	"x|y&z<w>v!h#c{b}[a]",
};

static void test_text(void)
{
	char buf[ESC_LEN(64)];

	CHECK_STR(esc_text("api.example.com", buf, sizeof(buf)), "api.example.com",
		  "a plain name stays as it is");
	CHECK_STR(esc_text("a\x1b[31mb", buf, sizeof(buf)), "a\\x1b[31mb", "ESC is \\x1b");
	CHECK_STR(esc_text("a\nb\r\x7f", buf, sizeof(buf)), "a\\x0ab\\x0d\\x7f",
		  "newline, CR and DEL are escaped");
	CHECK_STR(esc_text("\xc2\x9b\x80\xff", buf, sizeof(buf)), "\\xc2\\x9b\\x80\\xff",
		  "C1 and UTF-8 bytes are escaped");
	CHECK_STR(esc_text("a\\x1b", buf, sizeof(buf)), "a\\x1b",
		  "a backslash stays: what is escaped goes through again as it is");
	CHECK_STR(esc_text(esc_text("a\x1b\\b", (char[32]){0}, 32), buf, sizeof(buf)), "a\\x1b\\b",
		  "escaping twice is escaping once");
	CHECK_STR(esc_textn("a\0b", 3, buf, sizeof(buf)), "a\\x00b", "NUL is escaped");
	CHECK_STR(esc_text("ab\x1b", buf, 6), "ab", "a cut never splits an escape");
	CHECK_TRUE(esc_clean("api.example.com"), "esc_clean: a plain name");
	CHECK_FALSE(esc_clean("a\x1b"), "esc_clean: ESC");
	for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
		bool raw = false;

		esc_text(hostile[i], buf, sizeof(buf));
		for (const char *p = buf; *p; p++)
			raw |= (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f;
		CHECK_FALSE(raw, "esc_text of hostile string %zu holds no raw control byte", i);
	}
}

/* What shell reads back from the word: the string itself, nothing run. */
static void shell_roundtrip(const char *shell, const char *s)
{
	char word[ESC_LEN(64) + 8], cmd[sizeof(word) + 64], out[256] = "";
	int fds[2];
	size_t n = 0;
	ssize_t r;
	pid_t pid;

	esc_shell(s, word, sizeof(word));
	snprintf(cmd, sizeof(cmd), "printf '%%s' %s", word);
	if (pipe(fds))
		return;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execl(shell, shell, "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while (n < sizeof(out) - 1 && (r = read(fds[0], out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(fds[0]);
	waitpid(pid, NULL, 0);
	CHECK_TRUE(n == strlen(s) && !memcmp(out, s, n),
		   "%s reads esc_shell's word %s back as it was", shell,
		   esc_text(word, (char[ESC_LEN(128)]){0}, ESC_LEN(128)));
}

static void test_shell(void)
{
	char word[64];

	CHECK_STR(esc_shell("api.example.com:8443", word, sizeof(word)), "api.example.com:8443",
		  "a host name is its own word");
	CHECK_STR(esc_shell("x;id>/tmp/p;.example", word, sizeof(word)), "'x;id>/tmp/p;.example'",
		  "';' and '>' are quoted");
	CHECK_STR(esc_shell("a\x1b", word, sizeof(word)), "$'a\\x1b'", "ESC is $'\\x1b'");
	CHECK_STR(esc_shell("aaaaaaaa;", word, 8), "", "a word cut is cut whole");
	for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
		shell_roundtrip("/bin/bash", hostile[i]);
		if (esc_clean(hostile[i]))
			shell_roundtrip("/bin/sh", hostile[i]);
	}
}

int main(void)
{
	test_text();
	test_shell();
	return test_exit();
}
