/* Guarantee: making a session's event socket or the control socket never
 * changes the agent's umask (the whole process's): sessions start in threads
 * at once, and a start that made its record directory while another had the
 * umask at 0177 got it 0600, which its launcher could not enter (the state
 * directory "does not exist or the session's uid cannot reach it"); each
 * socket is still born 0600. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/control.h"
#include "agent/observe.h"
#include "lib/util.h"
#include "selftests/unit/test.h"

#define ROUNDS 3000

/* Not errt*: selftests/run, started by another run meanwhile, sweeps
 * /tmp/errt-* as a crashed world's, and removed the sockets' directory
 * from under this test. */
static char dir[] = "/tmp/errand-umask.XXXXXX";
static atomic_bool done;
static atomic_long seen_other, reads;

/* The umask as the kernel has it, read without changing it. */
static long umask_now(void)
{
	char line[128];
	long m = -1;
	FILE *f = fopen("/proc/thread-self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %lo", &m) == 1)
			break;
	fclose(f);
	return m;
}

/* What another start thread sees meanwhile: the umask, and the mode its
 * record directory gets. */
static void *watch(void *arg)
{
	char path[PATH_MAX];
	struct stat st;

	(void)arg;
	if (path_fmt(path, sizeof(path), "%s/record", dir))
		abort();
	while (!atomic_load(&done)) {
		long m = umask_now();

		if (m != 022)
			atomic_fetch_add(&seen_other, 1);
		if (mkdir(path, 0711) == 0) {
			if (stat(path, &st) == 0 && (st.st_mode & 0777) != 0711)
				atomic_fetch_add(&seen_other, 1);
			rmdir(path);
		}
		atomic_fetch_add(&reads, 1);
	}
	return NULL;
}

int main(void)
{
	char obs[PATH_MAX], ctl[PATH_MAX];
	struct stat st;
	pthread_t t;
	int obs_mode = -1, ctl_mode = -1, fails = 0;
	time_t t0 = time(NULL);

	umask(022);
	if (!mkdtemp(dir) || path_fmt(obs, sizeof(obs), "%s/s.events", dir) ||
	    path_fmt(ctl, sizeof(ctl), "%s/agent.sock", dir))
		return 1;
	if (pthread_create(&t, NULL, watch, NULL))
		return 1;
	while (atomic_load(&reads) == 0)
		usleep(100);
	/* At least ROUNDS sockets, and until the watcher has looked often
	 * enough on a busy machine (30 s at most). */
	for (int i = 0; (i < ROUNDS || atomic_load(&reads) < 300) && time(NULL) - t0 < 30; i++) {
		struct observe_server *s = observe_server_new(obs);
		int fd;

		if (!s) {
			if (!fails++)
				fprintf(stderr, "# event socket %s: %s\n", obs, strerror(errno));
			continue;
		}
		if (obs_mode < 0 && stat(obs, &st) == 0)
			obs_mode = st.st_mode & 0777;
		observe_server_free(s);
		if (i % 10)
			continue;
		fd = control_listen(ctl, CONTROL_NO_GROUP);
		if (fd < 0) {
			if (!fails++)
				fprintf(stderr, "# control socket %s: %s\n", ctl, strerror(-fd));
			continue;
		}
		if (ctl_mode < 0 && stat(ctl, &st) == 0)
			ctl_mode = st.st_mode & 0777;
		close(fd);
		unlink(ctl);
	}
	atomic_store(&done, true);
	pthread_join(t, NULL);
	test_int(fails, 0, "every event socket and control socket was made");
	test_int(obs_mode, 0600, "a session's event socket is born 0600");
	test_int(ctl_mode, 0600, "the control socket is born 0600");
	test_report(atomic_load(&reads) >= 300, "the watching thread hardly ran",
		    "the umask was watched while the sockets were made (%ld reads)",
		    (long)atomic_load(&reads));
	test_int(atomic_load(&seen_other), 0,
		 "another thread never saw the umask changed, nor a directory made 0711 get "
		 "another mode");
	test_int(umask(022), 022, "the umask is as it was");
	rmdir(dir);
	return test_exit();
}
