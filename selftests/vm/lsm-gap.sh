#!/bin/bash
# Guarantee: on a kernel booted without bpf in its LSM list (lsm= without bpf), sandbox.rules' deny, lazyAllow and Connect rules are a gap named with the boot parameter to fix it: doctor and the start name each such rule NOT ENFORCED, a session under requireFullEnforcement is refused and one without it runs with the gap stated, while allow rules and errand's own closures (Landlock and the launcher's masks) still hold.
# selftests-timeout: 1200
#
# Boots Debian 12's 6.1 in qemu with vmtests/run --append 'lsm=...' (bpf
# left out of the list) and runs launcher/rules and unit/config inside.
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
command -v qemu-system-x86_64 >/dev/null ||
	skip "qemu-system-x86_64 is not installed (Debian package qemu-system-x86; make deps installs it)"
if ! fetch=$("$RUN" --fetch-only debian-6.1 2>&1); then
	echo "$fetch"
	skip "Debian 12's kernel package cannot be had: $(grep -m1 '^FAIL' <<<"$fetch")"
fi

LSM=lsm=landlock,lockdown,yama,apparmor
out=$("$RUN" --append "$LSM" --tests launcher/rules,unit/config --timeout 1500 debian-6.1)
rc=$?
echo "# $out"
log=$ROOT/build/vmtests/debian-6.1-append-${LSM//[!A-Za-z0-9,.=-]/_}/console.log
check "the kernel booted without bpf in its LSM list passes launcher/rules and unit/config (exit $rc)" '[ $rc = 0 ]'
check "... one PASS line, nothing skipped (rules-deny is not run: it needs BPF LSM)" \
	'grep -Eq "^PASS debian-6.1-append-.*: [0-9]+ passed, 0 failed, 0 skipped" <<<"$out"'
check "... and doctor named the boot parameter for the deny rule's gap" \
	'grep -aq "bpf is not in the active LSM list" "$log" && grep -aq "add it to the lsm= boot parameter" "$log"'
check "... and the session under requireFullEnforcement was refused" \
	'grep -aq "ok - with requireFullEnforcement the session is refused" "$log"'
echo "# $ok ok, $notok not ok"
[ $notok = 0 ]
