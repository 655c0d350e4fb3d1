#!/bin/bash
# Guarantee: a kernel errand cannot enforce on is a failure with a clear line, never a skip or a pass: vmtests/run fails a kernel package that is missing, and a kernel without the tc BPF classifier (cls_bpf), where no session starts because its backstop cannot be attached.
# selftests-timeout: 600
#
# The missing kernels cost nothing; the broken one boots Debian 12's 6.1 in
# qemu with cls_bpf and act_bpf left out of its modules (vmtests/run
# --without), as a kernel built without them, and runs egress/backstop inside.
# shellcheck disable=SC2016,SC2034 # check's conditions are evaluated later
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUN=$ROOT/vmtests/run
ok=0 notok=0

skip() {
	echo "SKIP: $*"
	exit 77
}
check() {
	if eval "$2"; then
		echo "ok - $1"
		ok=$((ok + 1))
	else
		echo "not ok - $1"
		notok=$((notok + 1))
	fi
}

[ "$(id -u)" = 0 ] || skip "needs root"
[ "${ERRAND_VM:-}" = 1 ] && skip "already inside a vmtest VM"

# A kernel that cannot be had: a FAIL line, exit 1.
out=$("$RUN" /nonexistent/linux-image-0.0-amd64.deb 2>/dev/null)
rc=$?
echo "# $out"
check "a missing kernel package fails (exit $rc)" '[ $rc = 1 ]'
check "... with one FAIL line naming it" \
	'[ "$out" = "FAIL linux-image-0.0-amd64: no such package file: /nonexistent/linux-image-0.0-amd64.deb" ]'
out=$("$RUN" debian-2.0 2>/dev/null)
rc=$?
echo "# $out"
check "an unknown kernel fails (exit $rc)" '[ $rc = 1 ]'
check "... with one FAIL line naming it" '[[ "$out" == "FAIL debian-2.0: unknown kernel "* ]]'

command -v qemu-system-x86_64 >/dev/null ||
	skip "qemu-system-x86_64 is not installed (Debian package qemu-system-x86; make deps installs it)"
command -v busybox >/dev/null && command -v cpio >/dev/null && command -v depmod >/dev/null ||
	skip "busybox, cpio or depmod is missing (Debian packages busybox-static, cpio, kmod; make deps)"
if ! fetch=$("$RUN" --fetch-only debian-6.1 2>&1); then
	echo "$fetch"
	skip "Debian 12's kernel package cannot be had: $(grep -m1 '^FAIL' <<<"$fetch")"
fi

# A kernel without the tc BPF classifier: the suite inside fails, and the
# line says which module the kernel lacks.
out=$("$RUN" --without cls_bpf --without act_bpf --tests egress/backstop --timeout 500 debian-6.1)
rc=$?
echo "# $out"
log=$ROOT/build/vmtests/debian-6.1-without-cls_bpf-without-act_bpf/console.log
check "a kernel without cls_bpf fails (exit $rc)" '[ $rc = 1 ]'
check "... with one FAIL line naming the test and the missing modules" \
	'grep -Eq "^FAIL debian-6.1-without-cls_bpf-without-act_bpf \(.*\): 0 passed, 1 failed, 0 skipped: egress/backstop; kernel lacks modules: *cls_bpf act_bpf" <<<"$out"'
check "... because errand refused to start the session (exit 125), not for another reason" \
	'grep -aq "^# exit 125" "$log"'
echo "# $ok ok, $notok not ok"
[ $notok = 0 ]
