#!/bin/bash
# Guarantee: from inside, a session sees itself only (a command that chroots and climbs '..' lands in its own root again): /proc lists only its own processes, its hostname is its id, /dev holds only null, zero, full, random, urandom, tty, a pts of its own and /dev/shm, and PID 1 (the launcher's reaper) cannot be traced or read through /proc.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"
W_CONFIG=$(world_config view)
host_pids=$(find /proc -maxdepth 1 -name '[0-9]*' | wc -l)

errand_run --egress none --project "$PROJ" -- sh -c '
	echo "pids=$(cd /proc && echo [0-9]* | wc -w)"
	echo "pid1=$(cat /proc/1/comm)"
	echo "self=$$"
	echo "host=$(hostname)"
	echo "sid=$ERRAND_SESSION"
	echo "dev=$(ls /dev | tr "\n" " ")"
	echo "mem1=$(head -c1 /proc/1/mem 2>&1 >/dev/null | sed "s/.*: //")"
	echo "environ1=$(head -c1 /proc/1/environ 2>&1 >/dev/null | sed "s/.*: //")"
	echo "urandom=$(head -c 8 /dev/urandom | wc -c)"
'
assert_eq "$RUN_RC" 0 "the session ran"
trace "the host shows $host_pids processes"
assert_match "$(result pids)" '^[2-5]$' "/proc lists only the session's few processes"
assert_eq "$(result pid1)" errand-launch "... PID 1 is the session's reaper"
assert_eq "$(result self)" 2 "... and the command is PID 2"
assert_eq "$(result host)" "$(result sid)" "the hostname is the session id"
assert_eq "$(result dev)" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero " "/dev holds only what a program needs"
assert_eq "$(result urandom)" 8 "/dev/urandom reads"
assert_eq "$(result mem1)" "Permission denied" "PID 1's memory cannot be read through /proc/1/mem"
assert_eq "$(result environ1)" "Permission denied" "... nor its environment"

# Root of its own user namespace, the command may chroot: into a directory of
# its own, then '..' as far as it goes, and chroot there. It lands in its own
# root again, never below it, where the session's root was built (the host's
# root was there, and the staging directories).
errand_run --egress none -- python3 -c '
import os
os.mkdir("/tmp/in"); open("/tmp/mark", "w").close()
os.chroot("/tmp/in")
for _ in range(16): os.chdir("..")
os.chroot(".")
print("mark=%s" % os.path.exists("/tmp/mark"))
print("below=" + " ".join(p for p in ("/oldroot", "/newroot") if os.path.lexists(p)))
'
assert_eq "$RUN_RC" 0 "a session chroots and climbs out of it"
assert_eq "$(result mark)" True "... and is in its own root again"
assert_eq "$(result below)" "" "... with nothing of where its root was built in reach"
assert_empty "$(leftovers)" "nothing is left"
world_finish
