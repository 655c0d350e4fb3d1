/* Guarantee: the control socket takes only well-formed frames of known types
 * whose length its type allows (checked before a byte of payload is read) and
 * whose members have the right types, and only peers that are root or in the
 * errand group; the socket is born 0600 and ends 0660 root:errand or 0600. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/control.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

#define NOBODY 65534
#define TEST_GID 4242 /* need not exist: the kernel only compares numbers */

static const char *const samples[][2] = {
	{"run", "{\"argv\":[\"sh\",\"-c\",\"\"],\"env\":[\"A=1\"],\"egress\":[\"example.com:443\"],"
		"\"pins\":[\"db=192.0.2.1:5432\"],\"project\":\"/srv/p\",\"json\":true}"},
	{"sessions", "{}"},
	{"show", "{\"id\":\"0a1b2c3d\"}"},
	{"stop", "{\"id\":\"0a1b2c3d\"}"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"api.example.com\",\"kind\":\"once\"}"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"api.example.com:8443\",\"kind\":\"until\","
		  "\"seconds\":600}"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"*.example.com\",\"kind\":\"always\"}"},
	{"revoke", "{\"id\":\"0a1b2c3d\",\"host\":\"api.example.com\"}"},
	{"denied", "{}"},
	{"denied", "{\"id\":\"0a1b2c3d\"}"},
	{"reload", "{}"},
	{"version", "{}"},
	{"ok", "{}"},
	{"ok", "{\"message\":\"granted api.example.com:443 once\"}"},
	{"error", "{\"error\":\"no session 0a1b2c3d; see errandctl sessions\"}"},
	{"error", "{\"error\":\"--pin x: not NAME=IP[:PORT]\",\"request\":true}"},
	{"run", "{\"argv\":[\"true\"],\"project\":\"/srv/p\",\"config\":\"{\\n}\\n\"}"},
	{"run-started", "{\"session\":\"0a1b2c3d\"}"},
	{"run-exit", "{\"session\":\"0a1b2c3d\",\"status\":127}"},
	{"sessions-reply", "{\"sessions\":[{\"id\":\"0a1b2c3d\"},{}]}"},
	{"show-reply", "{\"session\":{\"id\":\"0a1b2c3d\",\"policy\":{}}}"},
	{"denied-reply", "{\"denied\":[]}"},
	{"version-reply", "{\"version\":\"0.1\",\"protocol\":1}"},
};

/* Payloads that must be refused (-EPROTO) for their type. */
static const char *const refused[][3] = {
	{"run", "{\"argv\":\"sh\"}", "argv as a string"},
	{"run", "{\"argv\":[]}", "argv empty"},
	{"run", "{\"argv\":[\"\"]}", "argv[0] empty"},
	{"run", "{\"argv\":[\"sh\",1]}", "argv with a number"},
	{"run", "{\"env\":[\"A=1\"]}", "argv missing"},
	{"run", "{\"argv\":[\"sh\"],\"env\":[\"A\"]}", "env entry without ="},
	{"run", "{\"argv\":[\"sh\"],\"env\":[\"=1\"]}", "env entry without a name"},
	{"run", "{\"argv\":[\"sh\"],\"env\":{\"A\":\"1\"}}", "env as an object"},
	{"run", "{\"argv\":[\"sh\"],\"egress\":[\"\"]}", "egress entry empty"},
	{"run", "{\"argv\":[\"sh\"],\"pins\":\"a=1.2.3.4\"}", "pins as a string"},
	{"run", "{\"argv\":[\"sh\"],\"project\":\"srv/p\"}", "project relative"},
	{"run", "{\"argv\":[\"sh\"],\"project\":7}", "project a number"},
	{"run", "{\"argv\":[\"sh\"],\"json\":\"yes\"}", "json a string"},
	{"run", "{\"argv\":[\"sh\"],\"json\":1}", "json a number"},
	{"run", "{\"argv\":[\"sh\"],\"egres\":[\"x\"]}", "unknown member"},
	{"run", "{\"argv\":[\"sh\\u0000x\"]}", "NUL in a string"},
	{"run", "{\"argv\":[\"sh\"],\"argv\":[\"ls\"]}", "duplicate member"},
	{"run", "[\"sh\"]", "an array, not an object"},
	{"run", "{\"argv\":[\"sh\"]} {}", "two objects"},
	{"run", "{\"argv\":[\"sh\"]}x", "trailing bytes"},
	{"run", "{\"argv\":[\"sh\"]", "truncated JSON"},
	{"run", "{\"argv\":[\"\xff\"]}", "invalid UTF-8"},
	{"sessions", "{\"all\":true}", "sessions with a member"},
	{"show", "{}", "show without id"},
	{"show", "{\"id\":42}", "show id a number"},
	{"show", "{\"id\":\"../../etc\"}", "show id with a path"},
	{"show", "{\"id\":\"\"}", "show id empty"},
	{"stop", "{\"id\":[\"0a1b2c3d\"]}", "stop id an array"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"a.example\",\"kind\":\"forever\"}",
	 "grant kind"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"a.example\",\"kind\":\"until\"}",
	 "grant until without seconds"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"a.example\",\"kind\":\"once\",\"seconds\":5}",
	 "grant once with seconds"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"a.example\",\"kind\":\"until\",\"seconds\":0}",
	 "grant seconds 0"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"a.example\",\"kind\":\"until\",\"seconds\":1.5}",
	 "grant seconds a real"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"a b\",\"kind\":\"once\"}",
	 "grant host with space"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"host\":\"\",\"kind\":\"once\"}", "grant host empty"},
	{"grant", "{\"id\":\"0a1b2c3d\",\"kind\":\"once\"}", "grant without host"},
	{"revoke", "{\"id\":\"0a1b2c3d\",\"host\":true}", "revoke host a bool"},
	{"denied", "{\"id\":null}", "denied id null"},
	{"error", "{\"error\":\"two\\nlines\"}", "error of two lines"},
	{"error", "{\"error\":\"c1 \\u0085 control\"}", "error with a C1 control"},
	{"error", "{}", "error without error"},
	{"error", "{\"error\":\"x\",\"request\":\"yes\"}", "error request a string"},
	{"run", "{\"argv\":[\"sh\"],\"config\":{}}", "run config an object"},
	{"run", "{\"argv\":[\"sh\"],\"config\":\"a\\u0000b\"}", "run config with NUL"},
	{"run-exit", "{\"session\":\"0a1b2c3d\",\"status\":256}", "exit status 256"},
	{"run-exit", "{\"session\":\"0a1b2c3d\",\"status\":-1}", "exit status -1"},
	{"sessions-reply", "{\"sessions\":[1]}", "sessions not objects"},
	{"show-reply", "{\"session\":[]}", "show-reply session an array"},
	{"version-reply", "{\"version\":\"1\"}", "version-reply without protocol"},
};

static uint16_t type_of(const char *name)
{
	for (unsigned int t = 0; t <= 0xffff; t++)
		if (!strcmp(control_type_name((uint16_t)t), name))
			return (uint16_t)t;
	return 0;
}

static void put_header(uint8_t *h, uint16_t version, uint16_t type, uint32_t len)
{
	h[0] = (uint8_t)(version >> 8);
	h[1] = (uint8_t)version;
	h[2] = (uint8_t)(type >> 8);
	h[3] = (uint8_t)type;
	h[4] = (uint8_t)(len >> 24);
	h[5] = (uint8_t)(len >> 16);
	h[6] = (uint8_t)(len >> 8);
	h[7] = (uint8_t)len;
}

/* A frame around a payload given as text, so tests say what is on the wire. */
static size_t frame_of(uint8_t *buf, size_t cap, uint16_t version, uint16_t type, const char *text)
{
	size_t n = strlen(text);

	if (CONTROL_HEADER_LEN + n > cap)
		abort();
	put_header(buf, version, type, (uint32_t)n);
	memcpy(buf + CONTROL_HEADER_LEN, text, n);
	return CONTROL_HEADER_LEN + n;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_timeout(int fd, int secs)
{
	struct timeval tv = {.tv_sec = secs};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void test_round_trips(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(samples); i++) {
		uint16_t type = type_of(samples[i][0]);
		struct control_msg msg = {0};
		json_t *in = json_loads(samples[i][1], 0, NULL);
		char err[256] = "";
		int sv[2], rc;

		if (!in || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			abort();
		set_timeout(sv[1], 2);
		CHECK_INT(control_write(sv[0], type, in), 0, "write %s %s", samples[i][0],
			  samples[i][1]);
		rc = control_read(sv[1], &msg, err, sizeof(err));
		CHECK_INT(rc, 0, "read %s back (%s)", samples[i][0], err);
		if (!rc) {
			CHECK_INT(msg.type, type, "%s: type kept", samples[i][0]);
			CHECK_INT(msg.version, CONTROL_VERSION, "%s: version", samples[i][0]);
			CHECK_TRUE(json_equal(msg.payload, in), "%s: payload equal", samples[i][0]);
		}
		control_msg_free(&msg);
		control_msg_free(&msg); /* twice: NULL-safe */
		json_decref(in);
		close(sv[0]);
		close(sv[1]);
	}
}

static void test_names(void)
{
	CHECK_STR(control_type_name(CONTROL_RUN), "run", "name of run");
	CHECK_STR(control_type_name(CONTROL_ERROR), "error", "name of error");
	CHECK_STR(control_type_name(0), "unknown", "name of type 0");
	CHECK_STR(control_type_name(0x7777), "unknown", "name of type 0x7777");
	CHECK_TRUE(control_type_is_request(CONTROL_GRANT), "grant is a request");
	CHECK_FALSE(control_type_is_request(CONTROL_RUN_EXIT), "run-exit is an answer");
	CHECK_INT(control_type_max(CONTROL_SESSIONS), 64, "sessions max");
	CHECK_INT(control_type_max(0x7777), 0, "unknown type has no max");
}

static void test_headers(void)
{
	uint8_t buf[256];
	struct control_msg msg = {0};
	char err[256] = "";
	size_t n;

	n = frame_of(buf, sizeof(buf), CONTROL_VERSION, CONTROL_SESSIONS, "{}");
	CHECK_INT(control_parse(buf, n, &msg, err, sizeof(err)), 0, "parse sessions {}");
	control_msg_free(&msg);
	n = frame_of(buf, sizeof(buf), 2, CONTROL_SESSIONS, "{}");
	CHECK_INT(control_parse(buf, n, &msg, err, sizeof(err)), -EPROTO, "version 2 refused (%s)",
		  err);
	n = frame_of(buf, sizeof(buf), 0, CONTROL_SESSIONS, "{}");
	CHECK_INT(control_parse(buf, n, &msg, err, sizeof(err)), -EPROTO, "version 0 refused");
	n = frame_of(buf, sizeof(buf), CONTROL_VERSION, 0, "{}");
	CHECK_INT(control_parse(buf, n, &msg, err, sizeof(err)), -EPROTO, "type 0 refused (%s)",
		  err);
	n = frame_of(buf, sizeof(buf), CONTROL_VERSION, 0x1234, "{}");
	CHECK_INT(control_parse(buf, n, &msg, err, sizeof(err)), -EPROTO, "type 0x1234 refused");
	n = frame_of(buf, sizeof(buf), CONTROL_VERSION, CONTROL_SESSIONS, "");
	CHECK_INT(control_parse(buf, n, &msg, err, sizeof(err)), -EPROTO,
		  "empty payload refused (%s)", err);
	n = frame_of(buf, sizeof(buf), CONTROL_VERSION, CONTROL_SESSIONS, "{}");
	CHECK_INT(control_parse(buf, 5, &msg, err, sizeof(err)), -EPROTO, "short header refused");
	CHECK_INT(control_parse(buf, n - 1, &msg, err, sizeof(err)), -EPROTO,
		  "short payload refused (%s)", err);
	buf[n] = ' ';
	CHECK_INT(control_parse(buf, n + 1, &msg, err, sizeof(err)), -EPROTO,
		  "byte past the payload refused");
	put_header(buf, CONTROL_VERSION, CONTROL_SESSIONS, 65);
	memset(buf + 8, ' ', 65);
	CHECK_INT(control_parse(buf, 8 + 65, &msg, err, sizeof(err)), -EMSGSIZE,
		  "sessions of 65 bytes too long (%s)", err);
	put_header(buf, CONTROL_VERSION, CONTROL_RUN, 1u << 30);
	CHECK_INT(control_parse(buf, 8, &msg, err, sizeof(err)), -EMSGSIZE,
		  "run claiming 1 GiB too long");
	CHECK_TRUE(msg.payload == NULL, "nothing written to msg on errors");
	CHECK_CONTAINS(err, "at most", "error says the limit");
}

static void test_refused(void)
{
	uint8_t buf[1024];

	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		uint16_t type = type_of(refused[i][0]);
		struct control_msg msg = {0};
		char err[256] = "";
		size_t n = frame_of(buf, sizeof(buf), CONTROL_VERSION, type, refused[i][1]);
		int rc = control_parse(buf, n, &msg, err, sizeof(err));

		CHECK_INT(rc, -EPROTO, "%s refused: %s (%s)", refused[i][0], refused[i][2], err);
		for (char *p = err; *p; p++)
			if ((unsigned char)*p < 0x20)
				CHECK_TRUE(false, "error line has a control character");
		control_msg_free(&msg);
	}
}

/* The agent reads the header, finds the length too long for its type and
 * returns without reading the payload: with only the header sent, the read
 * would otherwise block (SO_RCVTIMEO and alarm bound the damage), and with
 * payload bytes sent, they are all still in the socket afterwards. */
static void test_oversize(void)
{
	struct control_msg msg = {0};
	uint8_t hdr[8], pay[300], peek[400];
	char err[256] = "";
	int sv[2], rc;
	double t0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	set_timeout(sv[1], 3);
	alarm(10); /* SIGALRM kills the test should everything else fail */
	put_header(hdr, CONTROL_VERSION, CONTROL_RUN, 1u << 30);
	if (write(sv[0], hdr, 8) != 8)
		abort();
	t0 = now();
	rc = control_read(sv[1], &msg, err, sizeof(err));
	CHECK_INT(rc, -EMSGSIZE, "1 GiB run refused after the header (%s)", err);
	CHECK_TRUE(now() - t0 < 1.0, "refused without waiting for the payload (%.3f s)",
		   now() - t0);

	put_header(hdr, CONTROL_VERSION, CONTROL_SHOW, sizeof(pay));
	memset(pay, 'x', sizeof(pay));
	if (write(sv[0], hdr, 8) != 8 || write(sv[0], pay, sizeof(pay)) != sizeof(pay))
		abort();
	t0 = now();
	rc = control_read(sv[1], &msg, err, sizeof(err));
	CHECK_INT(rc, -EMSGSIZE, "show of 300 bytes refused (%s)", err);
	CHECK_INT(recv(sv[1], peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT), (long)sizeof(pay),
		  "no payload byte was read");
	alarm(0);
	close(sv[0]);
	close(sv[1]);
}

static void test_eof(void)
{
	struct control_msg msg = {0};
	uint8_t hdr[8];
	char err[256] = "";
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	close(sv[0]);
	CHECK_INT(control_read(sv[1], &msg, err, sizeof(err)), -ECONNRESET, "EOF before a frame");
	close(sv[1]);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	put_header(hdr, CONTROL_VERSION, CONTROL_SHOW, 20);
	if (write(sv[0], hdr, 3) != 3)
		abort();
	close(sv[0]);
	CHECK_INT(control_read(sv[1], &msg, err, sizeof(err)), -ECONNRESET, "EOF in a header");
	close(sv[1]);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	if (write(sv[0], hdr, 8) != 8 || write(sv[0], "{\"id\"", 5) != 5)
		abort();
	close(sv[0]);
	CHECK_INT(control_read(sv[1], &msg, err, sizeof(err)), -ECONNRESET, "EOF in a payload");
	CHECK_TRUE(msg.payload == NULL, "nothing written to msg on EOF");
	close(sv[1]);

	/* a reply to a client that hung up: an error, not SIGPIPE */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	close(sv[1]);
	CHECK_INT(control_write(sv[0], CONTROL_OK, NULL), -EPIPE, "write to a closed peer: EPIPE");
	close(sv[0]);
}

static void test_write_checks(void)
{
	json_t *bad = json_pack("{s:s}", "argv", "sh");
	json_t *nul = json_pack("{s:[s#]}", "argv", "a\0b", (int)3);
	json_t *big = json_pack("{s:[s]}", "argv", "sh");
	uint8_t peek[16];
	char *huge = malloc(2 * 1024 * 1024);
	int sv[2];

	if (!bad || !nul || !big || !huge || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	memset(huge, 'a', 2 * 1024 * 1024 - 1);
	huge[2 * 1024 * 1024 - 1] = '\0';
	json_array_append_new(json_object_get(big, "argv"), json_string(huge));
	CHECK_INT(control_write(sv[0], CONTROL_RUN, bad), -EINVAL, "write refuses argv a string");
	CHECK_INT(control_write(sv[0], CONTROL_RUN, nul), -EINVAL, "write refuses NUL in a string");
	CHECK_INT(control_write(sv[0], CONTROL_RUN, big), -EMSGSIZE, "write refuses 2 MiB run");
	CHECK_INT(control_write(sv[0], 0x4444, NULL), -EINVAL, "write refuses an unknown type");
	CHECK_INT(recv(sv[1], peek, sizeof(peek), MSG_DONTWAIT), -1, "nothing was written");
	json_decref(bad);
	json_decref(nul);
	json_decref(big);
	free(huge);
	close(sv[0]);
	close(sv[1]);
}

/* Forks a child that takes gid and groups, becomes nobody and connects to
 * sa. Its exit status: 0 when connected, the errno otherwise. */
static int connect_as_nobody(const struct sockaddr_un *sa, socklen_t salen, gid_t gid,
			     const gid_t *groups, size_t n)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		abort();
	if (pid == 0) {
		int fd;

		if (setgroups(n, groups) || setgid(gid) || setuid(NOBODY))
			_exit(125);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0)
			_exit(125);
		_exit(connect(fd, (const struct sockaddr *)sa, salen) ? errno : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 125;
	return WEXITSTATUS(status);
}

/* Connects a child with these credentials to a fresh abstract socket (no
 * file mode in the way) and returns control_peer_allowed's verdict on it. */
static int peer_verdict(gid_t group, gid_t gid, const gid_t *groups, size_t n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t salen;
	int lfd, cfd, rc;

	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "errt-control-%d", getpid());
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1));
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, salen) || listen(lfd, 4))
		abort();
	rc = connect_as_nobody(&sa, salen, gid, groups, n);
	if (rc) {
		close(lfd);
		return 1000 + rc;
	}
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	rc = cfd < 0 ? -errno : control_peer_allowed(cfd, group);
	if (cfd >= 0)
		close(cfd);
	close(lfd);
	return rc;
}

static void test_peers(void)
{
	gid_t g = TEST_GID, other = TEST_GID + 1, two[] = {TEST_GID + 1, TEST_GID};
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	CHECK_INT(control_peer_allowed(sv[0], CONTROL_NO_GROUP), 0, "root peer allowed");
	close(sv[0]);
	close(sv[1]);
	CHECK_INT(peer_verdict(TEST_GID, NOBODY, NULL, 0), -EACCES,
		  "uid 65534 outside the group refused");
	CHECK_INT(peer_verdict(CONTROL_NO_GROUP, NOBODY, NULL, 0), -EACCES,
		  "uid 65534 refused when there is no group");
	CHECK_INT(peer_verdict(CONTROL_NO_GROUP, TEST_GID, &g, 1), -EACCES,
		  "uid 65534 in some group refused when there is no group");
	CHECK_INT(peer_verdict(TEST_GID, TEST_GID, NULL, 0), 0,
		  "uid 65534 with gid errand allowed");
	CHECK_INT(peer_verdict(TEST_GID, NOBODY, two, 2), 0,
		  "uid 65534 with errand as a supplementary group allowed");
	CHECK_INT(peer_verdict(TEST_GID, NOBODY, &other, 1), -EACCES,
		  "uid 65534 in another supplementary group refused");
	CHECK_INT(peer_verdict(0, NOBODY, NULL, 0), -EACCES,
		  "uid 65534 refused for group 0 it is not in");
}

static void test_listen(void)
{
	char dir[] = "/tmp/errt-control.XXXXXX", path[PATH_MAX];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	gid_t g = TEST_GID;
	struct stat st;
	int fd, fd2;

	if (!mkdtemp(dir) || chmod(dir, 0755))
		abort();
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	if (path_fmt(sa.sun_path, sizeof(sa.sun_path), "%s", path))
		abort();

	fd = control_listen(path, CONTROL_NO_GROUP);
	CHECK_TRUE(fd >= 0, "listen without a group (%d)", fd);
	CHECK_INT(stat(path, &st), 0, "socket exists");
	CHECK_INT(st.st_mode & 07777, 0600, "socket mode 0600 without a group");
	CHECK_INT(st.st_uid, 0, "socket owned by root");
	CHECK_INT(st.st_gid, 0, "socket group root");
	CHECK_INT(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "listening fd is CLOEXEC");
	CHECK_INT(connect_as_nobody(&sa, sizeof(sa), TEST_GID, &g, 1), EACCES,
		  "0600 socket: no connect for a non-root peer, even in the group");
	CHECK_INT(control_listen(path, CONTROL_NO_GROUP), -EADDRINUSE,
		  "a second agent refused while the first listens");
	close(fd);

	fd = control_listen(path, TEST_GID);
	CHECK_TRUE(fd >= 0, "listen again over the stale socket, with a group (%d)", fd);
	CHECK_INT(stat(path, &st), 0, "socket exists");
	CHECK_INT(st.st_mode & 07777, 0660, "socket mode 0660 with a group");
	CHECK_INT(st.st_gid, TEST_GID, "socket group is the errand group");
	CHECK_INT(connect_as_nobody(&sa, sizeof(sa), NOBODY, NULL, 0), EACCES,
		  "0660 socket: no connect for a peer outside the group");
	CHECK_INT(connect_as_nobody(&sa, sizeof(sa), NOBODY, &g, 1), 0,
		  "0660 socket: a peer in the group connects");
	fd2 = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	CHECK_TRUE(fd2 >= 0, "accepted the group member");
	CHECK_INT(control_peer_allowed(fd2, TEST_GID), 0, "group member allowed on the socket");
	close(fd2);
	close(fd);
	unlink(path);

	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	close(fd);
	CHECK_INT(control_listen(path, CONTROL_NO_GROUP), -EEXIST,
		  "a regular file at the path is not replaced");
	CHECK_INT(access(path, F_OK), 0, "the regular file is still there");
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP: needs root (socket ownership, peers of other uids)\n");
		return 77;
	}
	test_names();
	test_round_trips();
	test_headers();
	test_refused();
	test_oversize();
	test_eof();
	test_write_checks();
	test_peers();
	test_listen();
	return test_exit();
}
