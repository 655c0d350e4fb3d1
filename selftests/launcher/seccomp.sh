#!/bin/bash
# Guarantee: a session's syscall surface is cut: bpf, ptrace, process_vm_*, perf_event_open, userfaultfd, the keyring, the mount family (open_tree_attr of Linux 6.15 too, which Debian 12's libseccomp does not know by name), kexec, modules, io_uring, clone3 (threads still work), unshare and setns return ENOSYS, clone() for a new namespace EPERM; socket families other than unix, inet and inet6 EAFNOSUPPORT; TIOCSTI and TIOCLINUX EPERM, also with bits above 32 set; the x32 and i386 entry points ENOSYS (an i386 call never runs: ENOSYS, or the fault a kernel without that entry point gives it anyway); sandbox.blockedSyscalls adds names (one of another architecture only, such as socketcall on x86_64, has nothing to filter and the session starts), and an unknown name is refused at load; the same through errand-agent's launchers started ahead, whose filter built while they wait is loaded only when the session blocks nothing more.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
SYSPROBE=$ROOT/build/selftests/sysprobe
[ -x "$SYSPROBE" ] || skip "build/selftests/sysprobe is not built (make build/selftests/sysprobe)"
world_up

PROJ=$W_DIR/project
mkdir -p "$PROJ" && chmod 0777 "$PROJ"
tools="\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\"], \"execute\": [\"$ROOT/build/selftests\"] }"
# socketcall: a call of other architectures only (copied from Docker's
# profile), which libseccomp numbers below zero here
W_CONFIG=$(world_config seccomp "$tools, \"blockedSyscalls\": [\"uname\", \"socketcall\", \"getcpu\"]")

blocked="bpf ptrace process_vm_readv process_vm_writev perf_event_open userfaultfd keyctl add_key
request_key mount umount2 pivot_root move_mount open_tree fsopen fsmount fsconfig kexec_load
kexec_file_load init_module finit_module delete_module io_uring_setup io_uring_enter
io_uring_register clone3 unshare setns open_tree_attr"
# check_filter HOW BLOCKED: a session's filter, started HOW; BLOCKED yes when
# sandbox.blockedSyscalls names uname and getcpu.
check_filter() {
	local how=$1 extra=$2
	# shellcheck disable=SC2086
	errand_run --egress none --project "$PROJ" -- sh -c "
	$SYSPROBE sys $(echo $blocked | sed 's/open_tree_attr/&:467/') uname getcpu getpid
	for f in packet netlink vsock unix inet inet6; do echo \"socket_\$f=\$($SYSPROBE socket \$f)\"; done
	for i in tiocsti tiocsti-high tioclinux; do echo \"ioctl_\$i=\$($SYSPROBE ioctl \$i)\"; done
	echo \"threads=\$($SYSPROBE threads)\"
	echo \"clone_ns=\$($SYSPROBE clone-ns)\"
	echo \"x32=\$($SYSPROBE x32)\"
	echo \"i386=\$($SYSPROBE i386)\"
	echo \"unshare_cmd=\$(unshare --user true 2>&1 | tail -n 1)\"
"
	assert_eq "$RUN_RC" 0 "$how: the session ran"
	for s in $blocked; do
		assert_eq "$(result "$s")" ENOSYS "$how: $s returns ENOSYS"
	done
	if [ "$extra" = yes ]; then
		assert_eq "$(result uname)" ENOSYS "$how: uname, named there, returns ENOSYS"
		assert_eq "$(result getcpu)" ENOSYS "$how: getcpu, named there, returns ENOSYS"
	else
		# the kernel's own answers to the probe's null arguments
		assert_match "$(result uname)" "^(ok|EFAULT)$" "$how: uname is not blocked"
		assert_match "$(result getcpu)" "^(ok|EFAULT)$" "$how: getcpu is not blocked"
	fi
	assert_eq "$(result getpid)" ok "$how: getpid, not blocked, works (control)"
	assert_eq "$(result threads)" ok "$how: threads work without clone3 (glibc falls back to clone)"
	assert_eq "$(result clone_ns)" EPERM "$how: clone() asking for a new namespace returns EPERM"
	for f in packet netlink vsock; do
		assert_eq "$(result "socket_$f")" EAFNOSUPPORT "$how: socket(AF_${f^^}) returns EAFNOSUPPORT"
	done
	for f in unix inet inet6; do
		assert_eq "$(result "socket_$f")" ok "$how: socket(AF_${f^^}) works (control)"
	done
	assert_eq "$(result ioctl_tiocsti)" EPERM "$how: ioctl TIOCSTI returns EPERM"
	assert_eq "$(result ioctl_tiocsti-high)" EPERM "$how: ioctl TIOCSTI | 1<<32 returns EPERM (the kernel reads 32 bits)"
	assert_eq "$(result ioctl_tioclinux)" EPERM "$how: ioctl TIOCLINUX returns EPERM"
	assert_eq "$(result x32)" ENOSYS "$how: an x32 system call returns ENOSYS"
	if [ "$HOST_I386" = ok ]; then
		assert_eq "$(result i386)" ENOSYS "$how: an i386 system call (int 0x80) returns ENOSYS"
	else
		# A host whose kernel takes no int 0x80 at all (a PVM guest's: it
		# faults outside a session too): the call still never runs.
		assert_match "$(result i386)" "^(ENOSYS|)$" \
			"$how: an i386 system call (int 0x80) never runs (ENOSYS, or the fault this host gives it outside a session too: '$HOST_I386')"
	fi
	assert_match "$(result unshare_cmd)" "Function not implemented" "$how: unshare(1) inside fails: Function not implemented"
}
# The kernel's own answer to int 0x80 outside a session: getpid's "ok", or
# nothing where the host has no i386 entry point (the probe faults).
HOST_I386=$("$SYSPROBE" i386 2>/dev/null)
check_filter "sandbox.blockedSyscalls uname and getcpu" yes
assert_eq "$("$SYSPROBE" clone-ns)" ok "clone() for a new namespace outside a session works (control)"
trace "outside a session: i386 getpid says $("$SYSPROBE" i386), x32 says $("$SYSPROBE" x32) (the kernel's own answer)"
# Through errand-agent, whose prepared networks have their launcher started
# ahead, with errand's own filter built while it waited: loaded as it is
# when the session blocks nothing more, built again when it does.
# through_agent NAME EXTRA HOW BLOCKED: check_filter in a session of an
# errand-agent with the configuration's EXTRA, once launchers wait in its
# prepared namespaces without network (the first such session asks for them).
through_agent() {
	W_CONFIG=$(world_config "$1" "$2")
	agent_start || exit 1
	errand_run --egress none -- true
	assert_eq "$(pool_ready 4 && echo ready)" ready "$3: launchers wait in the prepared namespaces (control)"
	check_filter "$3" "$4"
	agent_stop
}
through_agent seccomp-agent "$tools" "a launcher started ahead, no blockedSyscalls" no
through_agent seccomp "$tools, \"blockedSyscalls\": [\"uname\", \"socketcall\", \"getcpu\"]" \
	"a launcher started ahead, blockedSyscalls uname, socketcall and getcpu" yes

# A name libseccomp does not know is refused when the configuration loads.
W_CONFIG=$(world_config badsys "\"blockedSyscalls\": [\"ptrace\", \"no_such_call\"]")
errand_run --egress none --project "$PROJ" -- sh -c 'echo ran'
assert_eq "$RUN_RC" 125 "an unknown name in sandbox.blockedSyscalls: errandctl exits 125"
assert_empty "$RUN_STDOUT" "... and the command does not run"
assert_eq "$(wc -l <"$RUN_ERR")" 1 "... with one line on stderr"
assert_contains "$RUN_STDERR" 'sandbox.blockedSyscalls[1]: "no_such_call" is not a system call' "... naming the key and the name"
assert_empty "$(leftovers)" "nothing is left"
world_finish
