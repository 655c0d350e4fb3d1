#!/bin/bash
# Guarantee: a socket is judged by the session it was made in, whoever uses it: taken out of the session (pidfd_getfd by root on the host, or into another session's cgroup), it reaches what its own session allows and nothing else, and its refusals are its own session's events.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# The host pid of the session's process whose command line starts with CMD
# (its own pid namespace numbers it otherwise).
host_pid_of() {
	local p
	for p in $(cat "$(session_procs_dir "$1")/cgroup.procs" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "^$2" && { echo "$p"; return; }
	done
}

# Session B may reach b.test only; its cgroup is where the second taker runs.
errand_start --pin b.test=$HOST_B:443 --egress b.test:443 || { world_finish; exit 1; }
B=$SESSION B_PID=$BG_PID B_OUT=$BG_OUT B_ERR=$BG_ERR
b_dir=$(session_procs_dir "$B")
assert_ne "$b_dir" "" "found the cgroup session B's processes run in"

# Session A may reach a.test only, and holds three TCP sockets it made.
errand_start --pin a.test=$HOST_A:443 --egress a.test:443 -- "$PROBE" sock-hold 3 60 ||
	{ world_finish; exit 1; }
A=$SESSION
bg_wait '^held pid=' || { world_finish; exit 1; }
read -r fd1 fd2 fd3 < <(sed -n 's/^held pid=[0-9]* fds=//p' "$BG_OUT")
pid=$(host_pid_of "$A" "$PROBE sock-hold")
assert_ne "$pid" "" "found the host pid of session A's socket holder"
assert_ne "$fd3" "" "session A holds three sockets ($fd1 $fd2 $fd3)"

# Root on the host, in no session, connects A's sockets.
assert_eq "$(in_host "$PROBE" tcp $HOST_A 443 --taken "$pid:$fd1")" "ok hello $HOST_A:443" \
	"root on the host connects session A's socket to A's host $HOST_A:443: A's policy admits it"
assert_eq "$(in_host "$PROBE" tcp $HOST_A 8080 --taken "$pid:$fd2")" EPERM \
	"... and not to $HOST_A:8080, a port A does not allow"

# A process in session B's cgroup connects A's socket to B's host: refused,
# as A's policy says, however B's reads.
if [ -n "$b_dir" ]; then
	out=$(in_host sh -c "echo \$\$ >'$b_dir/cgroup.procs' && exec '$PROBE' tcp $HOST_B 443 --taken '$pid:$fd3'" 2>&1 | tail -n 1)
	assert_eq "$out" EPERM "a process in session B's cgroup connecting A's socket to B's host $HOST_B:443 is refused"
fi
assert_eq "$(in_session "$B" "$PROBE" tcp $HOST_B 443)" "ok hello $HOST_B:443" \
	"control: root in session B's network reaches B's host (its backstop admits it)"

sleep 0.5
errand_stop
assert_eq "$(event_count "session=$A .*addr=$HOST_A port=8080 reason=not-allowed hook=connect4")" 1 \
	"the host's refusal is session A's event"
assert_eq "$(event_count "session=$A .*addr=$HOST_B port=443 reason=not-allowed hook=connect4")" 1 \
	"... and so is the refusal in session B's cgroup"
SESSION=$B BG_PID=$B_PID BG_OUT=$B_OUT BG_ERR=$B_ERR
errand_stop
assert_eq "$(event_count "addr=$HOST_B")" 0 "session B reports no refusal of its own"
world_finish
