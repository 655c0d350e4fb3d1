#!/bin/bash
# Guarantee: on a stock Debian 12 host booted with systemd and cgroup v2 unified (Debian 12's 6.1 kernel, in qemu), errand as make install puts it is started by its unit (Type=notify: ready once the control socket serves; reload is SIGHUP between RELOADING=1 and READY=1), sessions' cgroups live in errand-sessions.scope, which systemd delegates (Delegate=yes), so memory, cpu and pids limits apply with no gap (a fork bomb stops at pids.max, an allocation past memory.max is killed); restarting the unit keeps a running session alive with its limits and the new agent adopts it; errandctl run without the agent puts its session in that scope too, never outside systemd's delegation.
# selftests-timeout: 1500
#
# vmtests/systemd does the work: the image is image/rootfs.sh --systemd
# (cached in /var/cache/errand-image/debian-12-systemd, built on first use
# from Debian's archive), the kernel the one vm/kernel61 boots. About two
# minutes under TCG once both are cached. Skips (77) when qemu, debootstrap
# or the kernel package cannot be had here.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

skip() {
	echo "SKIP: $*"
	exit 77
}

[ "$(id -u)" = 0 ] || skip "needs root"
[ "${ERRAND_VM:-}" = 1 ] && skip "already inside a vmtest VM"
command -v qemu-system-x86_64 >/dev/null ||
	skip "qemu-system-x86_64 is not installed (Debian package qemu-system-x86; make deps installs it)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (make deps)"
command -v cpio >/dev/null || skip "cpio is not installed (Debian package cpio; make deps)"
command -v depmod >/dev/null || skip "depmod is not installed (Debian package kmod; make deps)"
[ -x "$ROOT/build/bin/errand-agent" ] || skip "build/bin/errand-agent is not built yet"

if ! out=$("$ROOT/vmtests/run" --fetch-only debian-6.1 2>&1); then
	echo "$out"
	skip "Debian 12's kernel package cannot be had: $(grep -m1 '^FAIL' <<<"$out" | sed 's/^FAIL debian-6.1: //')"
fi

"$ROOT/vmtests/systemd" --timeout 1200
rc=$?
sed 's/^/# /' "$ROOT/build/vmtests/systemd/console.log" | grep -aE '^# (not ok|ok) - |^# # ' | head -n 80
exit $rc
