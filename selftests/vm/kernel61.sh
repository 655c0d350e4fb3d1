#!/bin/bash
# Guarantee: the egress core (cgroup sock_addr hooks, the tc backstop for IPv4 and IPv6, dual-stack sessions with NAT66, the ring buffer, sk_storage, LPM tries), the DNS redirection, the session's namespaces, and the agent (restart and re-adoption, once grants spent in the kernel, the warm pool with each namespace file mounted once on a /run that is a shared mount, as systemd makes it) work on Debian 12's 6.1 kernel, the oldest errand supports, with ERRAND_MUST_WORK=1 (nothing may skip there).
# selftests-timeout: 1900
#
# Boots Debian 12's kernel (linux-image-amd64, fetched with apt-get download
# into /var/cache/errand-vmtests) in qemu and runs the kernel-level selftests
# inside (vmtests/run debian-6.1): passes and fails with that run. To keep make
# check within the CI budget under TCG (this subset takes about 18 minutes
# on two cores; the vmtests/run limit is 30)
# it runs egress/, launcher/ and unit/ whole and, of dns/, the two tests that
# exercise the kernel's part of DNS (resolve: answers writing the allow map;
# anyaddr: UDP, connected UDP, TCP and v4-mapped redirection with the recvmsg
# and getpeername rewrites) and agent/pool, whose /run here is shared as on a
# systemd host (the host's own may not be); ERRAND_VM61_TESTS=F1,F2 overrides. make vmcheck
# runs every test on every kernel. Skips (77) when qemu, the initramfs tools
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
command -v busybox >/dev/null || skip "busybox is not installed (Debian package busybox-static; make deps)"
command -v cpio >/dev/null || skip "cpio is not installed (Debian package cpio; make deps)"
command -v depmod >/dev/null || skip "depmod is not installed (Debian package kmod; make deps)"
[ -x "$ROOT/build/bin/errandctl" ] || skip "build/bin/errandctl is not built yet"

if ! out=$("$ROOT/vmtests/run" --fetch-only debian-6.1 2>&1); then
	echo "$out"
	skip "Debian 12's kernel package cannot be had: $(grep -m1 '^FAIL' <<<"$out" | sed 's/^FAIL debian-6.1: //')"
fi
echo "# $out"

exec "$ROOT/vmtests/run" --tests "${ERRAND_VM61_TESTS:-egress/,launcher/,unit/,dns/resolve,dns/anyaddr,agent/daemon,agent/grants,agent/pool}" --timeout 1800 debian-6.1
