#!/bin/bash
# Runs inside a virtme-ng guest (vmtests/run's vng backend, or a kernel
# developer's own `vng --exec`): the host's root, read-only with tmpfs
# overlays, under the kernel being tested. Sets the machine up as image/init
# does for the plain-qemu VM (cgroup2 with nsdelegate, bpffs, shared mounts,
# the modules of image/modules.list, the scratch disk on /tmp), runs errand's
# selftests with ERRAND_MUST_WORK=1 and prints the same lines image/init
# prints, ending with
#
#   ERRAND-VMTEST-RESULT: <exit status of selftests/run>
#
#   vmtests/vng-inside.sh [FILTERS [TIMEOUT]]   FILTERS comma-separated
#                                               (default egress/,dns/,launcher/,unit/)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "vmtest: $*"; }
rc=1
trap 'echo "ERRAND-VMTEST-RESULT: $rc"' EXIT

tests=${1:-egress/,dns/,launcher/,unit/}
timeout=${2:-600}

[ "$(id -u)" = 0 ] || { say "needs root in the guest (vng runs as root with --user root, or as root on the host)"; exit 1; }
# virtme mounts cgroup2 plainly: nsdelegate as a systemd host has it (a
# session's cgroup namespace is a delegation boundary).
mount -o remount,nsdelegate /sys/fs/cgroup 2>/dev/null || say "cannot remount cgroup2 with nsdelegate"
grep -q ' /sys/fs/bpf bpf ' /proc/mounts || mount -t bpf -o mode=0700 bpf /sys/fs/bpf ||
	say "cannot mount bpffs at /sys/fs/bpf"
mount --make-rshared /
ip link set lo up

missing=
while read -r m; do
	m=${m%%#*}
	m=${m//[[:space:]]/}
	[ -n "$m" ] || continue
	modprobe "$m" >/dev/null 2>&1 || missing="$missing $m"
done <"$ROOT/image/modules.list"

# The scratch disk (vng --disk): /tmp on ext4, which every supported kernel
# can idmap, where virtme's /tmp is an overlay.
# (vng --disk makes it a virtio-blk disk: the only one, /dev/vda)
modprobe -q virtio_blk 2>/dev/null
udevadm settle 2>/dev/null
disk=/dev/vda
if [ -b "$disk" ] && mount -t ext4 -o nosuid,nodev "$disk" /tmp; then
	chmod 1777 /tmp
else
	say "no scratch disk: /tmp stays virtme's overlay (projects there may not be idmapped)"
fi

lsm=$(cat /sys/kernel/security/lsm 2>/dev/null)
btf=no
[ -r /sys/kernel/btf/vmlinux ] && btf=yes
say "kernel $(uname -r) up after $(cut -d. -f1 /proc/uptime)s; btf=$btf; lsm=${lsm:-unknown}; cpus=$(nproc); mem=$(awk '/^MemTotal/ { print $2 " kB" }' /proc/meminfo); virtme-ng"
[ -n "$missing" ] && say "modules missing:$missing"
say "running selftests/run ${tests//,/ } (ERRAND_MUST_WORK=1, ${timeout}s per test)"

cd "$ROOT" || exit 1
start=$(cut -d' ' -f1 /proc/uptime)
out=$(mktemp)
# shellcheck disable=SC2046
ERRAND_MUST_WORK=1 ERRAND_TEST_TIMEOUT=$timeout ERRAND_VM=1 \
	bash selftests/run $(tr , ' ' <<<"$tests") </dev/null 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
# A run that ran nothing proves nothing.
if [ "$rc" = 0 ] && ! grep -Eq '^[1-9][0-9]* passed, 0 failed' "$out"; then
	say "the run passed no test: counted as a failure"
	rc=1
fi
end=$(cut -d' ' -f1 /proc/uptime)
say "suite took $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%d", b - a }') s (guest clock)"
sed -n 's/^FAIL \([^ ]*\).*/\1/p' "$out" | while read -r t; do
	log=build/selftests/logs/${t//\//-}.log
	echo "----- $log"
	cat "$log" 2>/dev/null
	echo "----- end of $log"
done
rm -f "$out"
