/* Guarantee: a launcher started ahead gets the command line the agent hands
 * it exactly (every argument, empty ones too), and each descriptor on the
 * number the command line names, even where that number is its own socket's
 * or another handed descriptor's; an agent that closes the socket without a
 * session is told apart from a broken message. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/await.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

/* What a write to fd reaches: the pipe whose read end is rd. */
static bool reaches(int fd, int rd, const char *word)
{
	char buf[32] = {0};

	if (write(fd, word, strlen(word)) != (ssize_t)strlen(word))
		return false;
	return read(rd, buf, sizeof(buf) - 1) == (ssize_t)strlen(word) && !strcmp(buf, word);
}

static void test_args_and_fds(void)
{
	static const char *const args[] = {"errand-launch", "--env", "", "A=b c", "--", "sh", "-c",
					   "echo \"$0\"",   NULL};
	int sv[2], a[2], b[2], fds[2], target[2], argc = 0, nice = 0, rc;
	char **argv = NULL;
	bool same = true;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) || pipe2(a, O_CLOEXEC) ||
	    pipe2(b, O_CLOEXEC)) {
		CHECK_TRUE(false, "sockets and pipes for the test");
		return;
	}
	/* a's write end goes on the receiving socket's own number, b's on a's
	 * write end's number */
	fds[0] = a[1];
	target[0] = sv[1];
	fds[1] = b[1];
	target[1] = a[1];
	rc = await_send(sv[0], (const char *const *)args, fds, target, 2, 7);
	CHECK_INT(rc, 0, "the agent sends a command line with two descriptors");
	rc = await_recv(sv[1], &argc, &argv, &nice);
	CHECK_INT(rc, 0, "the launcher receives it");
	CHECK_INT(argc, (long long)ARRAY_SIZE(args) - 1, "... every argument");
	for (int i = 0; argv && i < argc && args[i]; i++)
		same = same && !strcmp(argv[i], args[i]);
	CHECK_TRUE(same && argv && !argv[argc],
		   "... each as it was sent (the empty one too), NULL after");
	CHECK_INT(nice, 7, "... and the priority");
	CHECK_TRUE(
		reaches(sv[1], a[0], "to-a"),
		"a descriptor named by the socket's own number is on it (the socket moved away)");
	CHECK_TRUE(reaches(a[1], b[0], "to-b"),
		   "one named by another handed descriptor's number is on it");
	free(argv);
	close(sv[0]);
	close(sv[1]);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

static void test_no_session(void)
{
	int sv[2], argc, nice;
	char **argv;
	struct {
		uint32_t magic, n, len;
	} junk = {1, 0, 0};

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	close(sv[0]);
	CHECK_INT(await_recv(sv[1], &argc, &argv, &nice), -ENODATA,
		  "a socket closed without a session says so (the launcher leaves quietly)");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	CHECK_INT(write(sv[0], &junk, sizeof(junk)), (long long)sizeof(junk),
		  "a broken message is sent");
	close(sv[0]);
	CHECK_TRUE(await_recv(sv[1], &argc, &argv, &nice) < 0, "... and refused");
	CHECK_INT(fcntl(sv[1], F_GETFD), -1, "the socket is closed either way");
}

int main(void)
{
	test_args_and_fds();
	test_no_session();
	return test_exit();
}
