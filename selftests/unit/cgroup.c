/* Guarantee: cgroup2_mount, which the agent asks at every session start and
 * which answers from the mount it found last while that mount is still
 * there, never gives a cgroup2 mount that is gone: unmounted, it finds the
 * next one or says there is none; mounted elsewhere, it finds it there.
 * Runs in a mount namespace of its own, so the host's mounts are untouched. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cgroup.h"
#include "selftests/unit/test.h"

int main(void)
{
	char top[] = "/tmp/errand-unit-cgroup-XXXXXX", a[256], b[256], got[PATH_MAX];
	int rc, n = 0;

	if (geteuid() != 0) {
		printf("SKIP: needs root (mounts in a mount namespace of its own)\n");
		return 77;
	}
	if (!CHECK_TRUE(unshare(CLONE_NEWNS) == 0 &&
				mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0,
			"a mount namespace of the test's own (as root)"))
		return test_exit();
	if (!CHECK_TRUE(mkdtemp(top) != NULL, "a directory of the test's own"))
		return test_exit();
	snprintf(a, sizeof(a), "%s/a", top);
	snprintf(b, sizeof(b), "%s/b", top);
	mkdir(a, 0700);
	mkdir(b, 0700);

	/* Each found is unmounted in turn, the last found among them. */
	while ((rc = cgroup2_mount(got, sizeof(got))) == 0 && n < 64) {
		if (umount2(got, MNT_DETACH) < 0)
			break;
		n++;
	}
	CHECK_INT(rc, -ENOENT, "with each cgroup2 mount it found unmounted (%d), it finds none", n);

	rc = mount("cgroup2", a, "cgroup2", 0, NULL);
	CHECK_INT(rc, 0, "cgroup2 mounted at %s", a);
	rc = cgroup2_mount(got, sizeof(got));
	CHECK_TRUE(rc == 0 && !strcmp(got, a), "it is found there (%d, %.200s)", rc, rc ? "" : got);
	rc = cgroup2_mount(got, sizeof(got));
	CHECK_TRUE(rc == 0 && !strcmp(got, a), "and again while it stays");

	umount2(a, MNT_DETACH);
	rc = mount("cgroup2", b, "cgroup2", 0, NULL);
	CHECK_INT(rc, 0, "moved: unmounted from a, mounted at %s", b);
	rc = cgroup2_mount(got, sizeof(got));
	CHECK_TRUE(rc == 0 && !strcmp(got, b),
		   "it is found at b, not at a where it was (%d, %.200s)", rc, rc ? "" : got);

	/* b holds a tmpfs now, where the mount found last was */
	umount2(b, MNT_DETACH);
	rc = mount("tmpfs", b, "tmpfs", 0, "size=64k");
	CHECK_INT(rc, 0, "unmounted, and a tmpfs mounted where it was");
	rc = cgroup2_mount(got, sizeof(got));
	CHECK_INT(rc, -ENOENT, "the tmpfs is not taken for it: none is found");
	umount2(b, MNT_DETACH);
	rc = cgroup2_mount(got, sizeof(got));
	CHECK_INT(rc, -ENOENT, "nor the bare directory under it");

	rmdir(a);
	rmdir(b);
	rmdir(top);
	return test_exit();
}
