#!/bin/bash
# Guarantee: errand-agent keeps sandbox.pool networks prepared ahead (each a fresh network namespace with its veth and address, the pool's NAT, a cgroup, and the session's maps already in the program set with its hooks and backstop attached under a config that refuses everything (mode none) until its start, holding its own id's lock, so no sweep takes it, and its record directory made ahead: resolv.conf whole, the files its start fills in empty, the session's state directory the session account's, 0700); a session with a network takes one whole, is enforced in it exactly as in one of its own (the pinned host reached, a forbidden host refused), and it is never used again (gone with its session, replaced by a fresh one); a start that finds the pool empty while entries are being made takes one of those rather than making its own; --egress none takes none of them, but once asked for, sessions without network get prepared namespaces of their own (lo alone, no veth, cgroup and maps ready), taken whole and never reused, where the session still has no network; a reload that changes the address pool replaces them; one that cannot be prepared leaves nothing behind and sessions still start; sandbox.pool 0 prepares none; and the agent removes them when it stops. Each prepared network has a launcher started ahead, waiting in its cgroup with the session's PID 1 it made ahead (none of the agent's network namespace files among that PID 1's mounts, the host keeping every one), which its session's start hands the command line and the caller's stdio to (no exec on the start), runs the session at the agent's priority and returns its status, and ends with it, or when the agent stops or is killed. While it runs it keeps its nine hooks attached to an empty cgroup of its own (no process in it), so a start never turns the kernel's hook keys on; an agent killed leaves that cgroup empty and the next one sweeps it.
# selftests-timeout: 150
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config pool '"pool": 2, "addressPool": "10.213.0.0/24"')
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
# Prepared networks: netns files whose record has no policy yet (made
# ahead, empty until a start fills it in), with their veth (prepared_none:
# those without, for sessions without network).
prepared_all() {
	local f id
	for f in /run/"$W"/netns/*; do
		[ -e "$f" ] || continue
		id=${f##*/}
		[ -s "$W_DIR/state/sessions/$id/policy.json" ] || echo "$id"
	done | sort
}
prepared() {
	local links id
	links=$(in_host "$IP" -o link show)
	for id in $(prepared_all); do
		[[ "$links" == *": eh$id@"* ]] && echo "$id"
	done
}
prepared_none() {
	local links id
	links=$(in_host "$IP" -o link show)
	for id in $(prepared_all); do
		[[ "$links" == *": eh$id@"* ]] || echo "$id"
	done
}
# wait_prepared N (wait_prepared_none N): until N are prepared (10 s at
# most), the same ones twice 0.2 s apart (a reload's discards and refills
# overlap); prints them.
wait_listing() {
	local n=0 now again
	while [ $n -lt 50 ]; do
		now=$("$1")
		if [ "$(echo "$now" | grep -c .)" = "$2" ]; then
			sleep 0.2
			again=$("$1")
			[ "$again" = "$now" ] && break
		else
			sleep 0.2
		fi
		n=$((n + 1))
	done
	"$1"
}
wait_prepared() { wait_listing prepared "$1"; }
wait_prepared_none() { wait_listing prepared_none "$1"; }
# The programs attached to a prepared entry's cgroup, and its config's mode
# (struct sess_cfg: a u32 at byte 24; 0 is none).
cgroup_progs() { bpftool -j cgroup show "$(find "$W_CG/$W" -type d -name "$1" | head -n 1)" 2>/dev/null | python3 -c "import json,sys; t=sys.stdin.read().strip(); print(len(json.loads(t)) if t else 0)"; }
config_mode() { bpftool -j map dump pinned "/sys/fs/bpf/$W/$1/config" 2>/dev/null | python3 -c "import json,sys; v=json.load(sys.stdin)[0]['value']; print(int.from_bytes(bytes(int(b, 16) for b in v[24:28]), 'little'))"; }
veth_of() { in_host "$IP" -o -4 addr show dev "eh$1" 2>/dev/null | awk '{ print $4 }'; }

agent_start || exit 1
pool=$(wait_prepared 2)
assert_eq "$(echo "$pool" | grep -c .)" 2 "the agent prepares sandbox.pool (2) networks at start"
first=$(echo "$pool" | head -n 1)
assert_match "$(veth_of "$first")" "^10\.213\.0\.[0-9]+/30$" "a prepared network has its veth with an address of the pool"
assert_contains "$(in_host nft list tables)" "errand-pool-10.213.0.0-24" "... and the pool's NAT table"
assert_eq "$([ -e "/run/$W/sessions/$first.lock" ] && echo held)" held "... and its id's lock"
rec=$W_DIR/state/sessions/$first
assert_eq "$(stat -c '%a' "$rec" 2>&1)" 711 "... and its record directory, made ahead"
gw=$(veth_of "$first")
assert_eq "$(cat "$rec/resolv.conf" 2>&1)" "nameserver ${gw%/30}" \
	"... with its resolv.conf naming the gateway, its DNS responder"
assert_eq "$(for f in policy config request; do stat -c '%s %a' "$rec/$f.json" 2>&1; done | sort -u)" "0 600" \
	"... and the files its start fills in, empty, 0600"
assert_eq "$(stat -c '%u %a' "$rec/work" 2>&1)" "$(id -u errand-session 2>/dev/null || echo 65534) 700" \
	"... and the session's state directory, the session account's, 0700"
assert_eq "$(find "$W_CG/$W" -type d -name "$first" | grep -c .)" 1 "... and its cgroup"
assert_eq "$([ -e "/sys/fs/bpf/$W/$first/config" ] && echo pinned)" pinned "... and its maps, in the program set already"
assert_eq "$(ls "/sys/fs/bpf/$W/$first" | grep -cx 'connect4\|tc_ingress')" 2 "... its hooks and backstop attached already"
# Its tc programs are clsact filters, never tcx links: a tcx attach, and its
# removal with the veth, each hold the RTNL lock through an RCU grace
# period, in which no link, address or namespace is made on the host.
for _ in $(seq 1 50); do
	in_host tc filter show dev "eh$first" egress 2>/dev/null | grep -q 'errand_tc_out' && break
	sleep 0.1
done
assert_match "$(in_host tc filter show dev "eh$first" ingress 2>&1)" "bpf .*errand_tc_in.* direct-action" \
	"... the backstop a clsact filter on its veth's ingress"
assert_match "$(in_host tc filter show dev "eh$first" egress 2>&1)" "bpf .*errand_tc_out.* direct-action" \
	"... the flow guard one on its egress"
assert_eq "$(find "/sys/fs/bpf/$W/$first" -name 'tc_*_link' | grep -c .)" 0 "... and no tcx link pinned"
# From Linux 6.6 (tcx), none on its tcx hooks either, where a program would
# run before the filters and decide alone (BPF_PROG_QUERY: bpftool 7.1 does
# not know tcx).
if [ "$(printf '6.6\n%s\n' "$(uname -r)" | sort -V | head -n 1)" = 6.6 ]; then
	assert_eq "$(in_host python3 - "eh$first" 2>&1 <<'PY'
import ctypes, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
n = 0
for at in (46, 47):  # BPF_TCX_INGRESS, BPF_TCX_EGRESS
    ids = (ctypes.c_uint32 * 8)()
    attr = (ctypes.c_uint8 * 128)()
    struct.pack_into("IIIIQI", attr, 0, socket.if_nametoindex(sys.argv[1]), at, 0, 0, ctypes.addressof(ids), 8)
    if libc.syscall(321, 16, attr, 128) < 0:  # bpf(BPF_PROG_QUERY)
        sys.exit("query: errno %d" % ctypes.get_errno())
    n += struct.unpack_from("I", attr, 24)[0]
print(n)
PY
)" 0 "... and no program on its tcx hooks"
fi
assert_eq "$(cgroup_progs "$first")" 9 "... all nine hooks on its cgroup"
assert_eq "$(config_mode "$first")" 0 "... under a config that refuses everything (mode none) until its start"
# waiting PREPARED: the pid of its launcher started ahead (it comes last in
# the preparation: 5 s at most), once its cgroup holds that launcher
# (errand-launch --await) and the session's PID 1 it made ahead, the
# launcher's child, PID 1 of a PID namespace of its own.
ns_pids() { sed -n 's/^NSpid:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null | tr '\t' ' '; }
waiting() {
	local cg procs launcher pid1
	for _ in $(seq 1 50); do
		cg=$(find "$W_CG/$W" -type d -name "$1" | head -n 1)
		procs=$(cat "$cg/cgroup.procs" 2>/dev/null)
		launcher= pid1=
		for p in $procs; do
			[[ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" == *"errand-launch --await "* ]] || continue
			[[ "$(ns_pids "$p")" == *" 1" ]] && pid1=$p || launcher=$p
		done
		if [ "$(echo "$procs" | grep -c .)" = 2 ] && [ -n "$launcher" ] && [ -n "$pid1" ] &&
			[ "$(awk '{ print $4 }' "/proc/$pid1/stat" 2>/dev/null)" = "$launcher" ]; then
			echo "$launcher $pid1"
			return
		fi
		sleep 0.1
	done
}
read -r launcher pid1 <<<"$(waiting "$first")"
assert_match "$launcher" "^[0-9]+$" "... and its launcher, started ahead, waiting in its cgroup"
assert_match "$pid1" "^[0-9]+$" "... with the session's PID 1 it made ahead, in a PID namespace of its own"
assert_eq "$(readlink "/proc/$pid1/ns/net")" "$(readlink "/proc/$launcher/ns/net")" "... in the prepared network"
assert_match "$(awk '{ print $1, $2, $3 }' "/proc/$pid1/uid_map" 2>/dev/null)" "^0 $(id -u errand-session 2>/dev/null || echo 65534) 1$" "... root there as the session's account, mapped already"
assert_eq "$(awk '$5 == "/newroot/proc" && $(NF - 2) == "proc"' "/proc/$pid1/mountinfo" 2>/dev/null | grep -c .)" 1 "... the system part of its root mounted already (the new root's own /proc)"
assert_eq "$(awk '/^Uid:/ { print $2 }' "/proc/$pid1/status")" "$(id -u errand-session 2>/dev/null || echo 65534)" "... running as that account"
# The agent's netns files, one mount a session, are not in PID 1's copy of
# the host's mounts (its launcher shed their directory before the clone),
# and the host still has every one.
assert_eq "$(grep -c " /oldroot/run/$W/netns/" "/proc/$pid1/mountinfo")" 0 "... holding none of the agent's network namespace files, one mount a session"
assert_eq "$(grep -c " /run/$W/netns/$first " /proc/self/mountinfo)" 1 "control: the host still has the prepared network's namespace file mounted"
assert_eq "$(readlink "/proc/$launcher/ns/mnt")" "$(readlink "/proc/$AGENT_PID/ns/mnt")" "... and the launcher is back in the agent's mount namespace"

# The session waits, once it has said what it found, for the record to be
# read: the agent removes the record with the session, after errandctl
# returned.
errand_start --pin "a.test=$HOST_A:443" --egress a.test:443 -- sh -c \
	"echo sid=\$ERRAND_SESSION; echo nice=\$(cut -d' ' -f19 /proc/self/stat); sed -En 's/^(SigIgn|SigBlk):[[:space:]]*/\\1=/p' /proc/self/status; $(probe_script pinned "tcp $HOST_A 443" forbidden "tcp $HOST_PRIV 80") $(bg_wait_sh)"
sid=$SESSION
bg_wait '^waiting=1'
assert_contains "$(cat "$W_DIR/state/sessions/$sid/policy.json" 2>&1)" "\"session\": \"$sid\"" \
	"the session's start filled in the record made ahead (policy.json)"
assert_contains "$(cat "$W_DIR/state/sessions/$sid/request.json" 2>&1)" "a.test" "... and request.json"
assert_contains "$(cat "$W_DIR/state/sessions/$sid/config.json" 2>&1)" "10.213.0.0/24" "... and config.json"
bg_go
wait "$BG_PID"
RUN_RC=$?
BG_PID=
RUN_OUT=$BG_OUT
assert_eq "$RUN_RC" 0 "a session starts through the agent"
assert_eq "$(result nice)" 0 "... its command at the agent's priority, not the pool's (nice 10) its PID 1 was made at"
# The agent ignores SIGPIPE; its launcher waited with that reset ahead.
assert_eq "$(result SigIgn)" 0000000000000000 "the command ignores no signal (the agent's ignored SIGPIPE is not passed on)"
assert_eq "$(result SigBlk)" 0000000000000000 "... and blocks none"
assert_contains "$pool" "$sid" "it took a prepared network (its id is one of them)"
assert_eq "$(result pinned)" "ok hello $HOST_A:443" "in the prepared network, the pinned host is reached"
assert_eq "$(result forbidden)" EPERM "... and a private address is refused"
# A fresh host: the agent makes paths.bpf and loads the set at its start,
# and a start in a prepared network (its clsact made ahead) is quiet.
assert_not_contains "$(cat "$AGENT_LOG")" "not loaded yet" "the agent loaded the program set at its start, on a host with no paths.bpf yet"
assert_not_contains "$(cat "$AGENT_LOG")" "libbpf:" "... and libbpf wrote nothing to its log (that is for -v)"
after=$(wait_prepared 2)
assert_not_contains "$after" "$sid" "the network it took is not prepared again"
for _ in $(seq 1 100); do
	[ -e "/run/$W/netns/$sid" ] || break
	sleep 0.1
done
assert_eq "$([ -e "/run/$W/netns/$sid" ] && echo there)" "" "... its namespace is removed with its session"
assert_eq "$(comm -13 <(echo "$pool") <(echo "$after") | grep -c .)" 1 "a fresh one replaced it"

# The launcher waiting in a prepared network becomes its session's, with
# the caller's stdio, and is gone with it.
declare -A ahead
for id in $after; do ahead[$id]=$(waiting "$id" | cut -d" " -f1); done
assert_eq "$(for id in $after; do [ -n "${ahead[$id]}" ] && echo "$id"; done | grep -c .)" 2 "each prepared network has its launcher waiting"
in_host "$ERRANDCTL" --config "$W_CONFIG" run -- sh -c 'echo "sid=$ERRAND_SESSION"; read -r line; echo "read=$line"; echo to-stderr >&2; sleep 2; exit 3' \
	<<<"from-stdin" >"$W_DIR/ahead.out" 2>"$W_DIR/ahead.err" &
bg=$!
for _ in $(seq 1 100); do
	grep -q '^read=' "$W_DIR/ahead.out" && break
	sleep 0.1
done
asid=$(sed -n 's/^sid=//p' "$W_DIR/ahead.out")
alauncher=${ahead[$asid]:-none}
assert_contains "$after" "$asid" "a session takes a prepared network"
assert_match "$(tr '\0' ' ' <"/proc/$alauncher/cmdline" 2>/dev/null)" "errand-launch --await [0-9]+ --netns [^ ]+ --uid [0-9]+ --gid [0-9]+ $" "... and the launcher that waited there runs it, never exec'd again"
assert_eq "$(grep -cx "$alauncher" "$(find "$W_CG/$W" -type d -name "$asid" | head -n 1)/cgroup.procs")" 1 "... in the session's cgroup"
assert_eq "$(awk '{ print $19 }' "/proc/$alauncher/stat" 2>/dev/null)" 0 "... at the agent's priority, not the pool's (nice 10)"
wait "$bg"
assert_eq "$?" 3 "the command's exit status comes back through it"
assert_eq "$(cat "$W_DIR/ahead.out" | grep '^read=')" "read=from-stdin" "... and the caller's stdin reached the command"
assert_contains "$(cat "$W_DIR/ahead.err")" "to-stderr" "... and its stderr the caller's"
# errandctl has the status from the session's PID 1, which may be ahead
# of the launcher's own end by a moment.
for _ in $(seq 1 50); do
	kill -0 "$alauncher" 2>/dev/null || break
	sleep 0.1
done
assert_eq "$(kill -0 "$alauncher" 2>/dev/null && echo alive)" "" "... and that launcher is gone with its session"

# The status comes from the session's PID 1 once it has killed and reaped
# every other process of the session, ahead of its own end: a background
# process holding 512 MiB (each page freed at its end) and an orphan are
# gone when errandctl returns.
in_host "$ERRANDCTL" --config "$W_CONFIG" run -- sh -c \
	'dd if=/dev/zero bs=512M count=1 2>/dev/null | sleep 86391 & (sleep 86392 &); sleep 2; exit 6' &
bg=$!
left=
for _ in $(seq 1 100); do
	left=$(pgrep -f '^(sleep 8639[12]|dd if=/dev/zero bs=512M count=1)$' | sort -n | tr '\n' ' ')
	[ "$(echo $left | wc -w)" -ge 3 ] && break
	sleep 0.05
done
wait "$bg"
rc=$?
# /proc/PID is there until the process is reaped, its teardown included;
# looked at first thing (a process freeing 512 MiB takes tens of ms).
alive=
for pid in $left; do [ -e "/proc/$pid" ] && alive+="$pid "; done
assert_eq "$rc" 6 "a command that leaves processes behind: its status comes back"
assert_eq "$(echo $left | wc -w)" 3 "... (its three processes were seen running: $left)"
assert_empty "$alive" "... once none of them is left, the one freeing 512 MiB and the orphan included"
in_host "$ERRANDCTL" --config "$W_CONFIG" run -- sh -c 'kill -KILL $$'
assert_eq "$?" 137 "a command killed by a signal: 128 + its number"
for _ in $(seq 1 100); do
	[ -e "/run/$W/netns/$asid" ] || break
	sleep 0.1
done
after=$(wait_prepared 2)

assert_empty "$(prepared_none)" "no namespace without network is prepared before such a session is asked for"
errand_run --egress none -- sh -c 'echo sid=$ERRAND_SESSION'
assert_eq "$RUN_RC" 0 "an --egress none session starts"
assert_not_contains "$after" "$(result sid)" "... without taking a prepared network"
assert_eq "$(wait_prepared 2)" "$after" "... which stay as they were"
none=$(wait_prepared_none 2)
assert_eq "$(echo "$none" | grep -c .)" 2 "then sandbox.pool (2) namespaces without network are prepared"
nfirst=$(echo "$none" | head -n 1)
assert_eq "$(nsenter --net="/run/$W/netns/$nfirst" "$IP" -o link show | awk -F': ' '{ print $2 }' | tr '\n' ' ')" "lo " "a prepared namespace without network has lo alone"
assert_eq "$(find "$W_CG/$W" -type d -name "$nfirst" | grep -c .)" 1 "... its cgroup"
assert_eq "$([ -e "/sys/fs/bpf/$W/$nfirst/config" ] && echo pinned)" pinned "... and its maps, in the program set already"
assert_eq "$(ls "/sys/fs/bpf/$W/$nfirst" | grep -c 'connect4\|tc_ingress')" 1 "... its hooks attached already (no veth, no backstop)"
assert_eq "$(config_mode "$nfirst")" 0 "... refusing everything until its start"
errand_run --egress none -- sh -c "echo sid=\$ERRAND_SESSION; $(net_script) $(probe_script reach "tcp $HOST_A 443")"
nsid=$(result sid)
assert_eq "$RUN_RC" 0 "a second --egress none session starts"
assert_contains "$none" "$nsid" "... in a prepared namespace without network (its id is one of them)"
assert_eq "$(result links)" "lo " "... where it has lo alone"
assert_eq "$(result reach)" EPERM "... and reaches nothing (the connect hook refuses)"
assert_not_contains "$(wait_prepared_none 2)" "$nsid" "the namespace it took is not prepared again"
assert_eq "$(wait_prepared 2)" "$after" "the prepared networks stay as they were"

# A reload with another address pool: what was prepared goes, new ones come.
sed -i 's|"addressPool": "10.213.0.0/24"|"addressPool": "10.214.0.0/24"|' "$W_CONFIG"
ctl reload >/dev/null
n=0
while [ $n -lt 100 ]; do
	now=$(prepared)
	[ "$(echo "$now" | grep -c .)" = 2 ] && [ -z "$(comm -12 <(echo "$after") <(echo "$now"))" ] && break
	sleep 0.1
	n=$((n + 1))
done
assert_eq "$(comm -12 <(echo "$after") <(echo "$now") | grep -c .)" 0 "a reload that changes the address pool discards what was prepared"
assert_match "$(veth_of "$(echo "$now" | head -n 1)")" "^10\.214\.0\.[0-9]+/30$" "... and prepares from the new pool"

# A /28 pool has room for four sessions and six are to be prepared: the fifth
# cannot be, and leaves nothing.
sed -i 's|"addressPool": "10.214.0.0/24"|"addressPool": "10.215.0.0/28"|; s|"pool": 2|"pool": 6|' "$W_CONFIG"
ctl reload >/dev/null
for _ in $(seq 1 100); do
	grep -q "sandbox.pool: cannot prepare a network ahead" "$AGENT_LOG" && break
	sleep 0.1
done
sleep 0.5
assert_eq "$(prepared | grep -c .)" 4 "with room for four, four networks are prepared"
assert_match "$(cat "$AGENT_LOG")" "sandbox.pool: cannot prepare a network ahead .*no free address in sandbox.addressPool" "the fifth, which cannot be, is named in the log with its cause"
assert_eq "$(in_host "$IP" -o link show | grep -c ': eh')" 4 "... and left no veth behind"
errand_run --pin "a.test=$HOST_A:443" --egress a.test:443 -- sh -c "$(probe_script pinned "tcp $HOST_A 443")"
assert_eq "$(result pinned)" "ok hello $HOST_A:443" "a session still starts (in a prepared network) and is served"

# sandbox.pool 0: nothing prepared.
sed -i 's|"pool": 6|"pool": 0|' "$W_CONFIG"
ctl reload >/dev/null
sleep 1
assert_empty "$(wait_prepared 0)" "sandbox.pool 0 prepares none (and drops what was)"
assert_empty "$(wait_prepared_none 0)" "... nor namespaces without network"
sed -i 's|"pool": 0|"pool": 2|; s|"addressPool": "10.215.0.0/28"|"addressPool": "10.213.0.0/24"|' "$W_CONFIG"
ctl reload >/dev/null
assert_eq "$(wait_prepared 2 | grep -c .)" 2 "control: prepared again after a reload back"

# Links made ahead are verified at the start: a prepared network whose
# connect4 link went (its pin removed by hand) never runs a command. One
# prepared at a time, so the start takes that one.
sed -i 's|"pool": 2|"pool": 1|' "$W_CONFIG"
ctl reload >/dev/null
tampered=$(wait_prepared 1)
assert_eq "$(echo "$tampered" | grep -c .)" 1 "control: with sandbox.pool 1, one network is prepared"
rm -f "/sys/fs/bpf/$W/$tampered/connect4"
errand_run --pin "a.test=$HOST_A:443" --egress a.test:443 -- sh -c 'echo ran'
assert_eq "$RUN_RC" 125 "a start in a prepared network whose connect4 link is gone is refused"
assert_contains "$(cat "$RUN_ERR")" "enforcement not verified: connect4 is not attached" "... saying its enforcement is not verified"
assert_empty "$(cat "$RUN_OUT")" "... and its command never ran"
fresh=$(wait_prepared 1)
assert_eq "$([ -n "$fresh" ] && [ "$fresh" != "$tampered" ] && echo fresh)" fresh "... and that network is gone, a fresh one prepared"
errand_run --pin "a.test=$HOST_A:443" --egress a.test:443 -- sh -c "$(probe_script pinned "tcp $HOST_A 443")"
assert_eq "$(result pinned)" "ok hello $HOST_A:443" "... where the next session is served"
sed -i 's|"pool": 1|"pool": 2|' "$W_CONFIG"
ctl reload >/dev/null
assert_eq "$(wait_prepared 2 | grep -c .)" 2 "control: two prepared again"

# A start that finds the pool empty while the pool's refill is under way
# waits for that network rather than making one of its own: with one
# prepared at a time, sessions back to back (each the moment the one before
# returned, while its refill runs) all start in prepared networks.
sed -i 's|"pool": 2|"pool": 1|' "$W_CONFIG"
ctl reload >/dev/null
assert_eq "$(wait_prepared 1 | grep -c .)" 1 "control: one prepared"
before=$(grep -c 'started in a network prepared ahead' "$AGENT_LOG")
for _ in 1 2 3 4 5 6; do
	in_host "$ERRANDCTL" --config "$W_CONFIG" run -- true
done
assert_eq "$(($(grep -c 'started in a network prepared ahead' "$AGENT_LOG") - before))" 6 "six sessions back to back with sandbox.pool 1 each start in a prepared network (waiting for the one being prepared)"
sed -i 's|"pool": 1|"pool": 2|' "$W_CONFIG"
ctl reload >/dev/null
assert_eq "$(wait_prepared 2 | grep -c .)" 2 "control: two prepared again"

# The hooks' static keys stay on while the agent runs: its programs stay
# attached to an empty cgroup of its own beside the sessions'.
hooks=$W_CG/$W/hooks
hooks_attached() { bpftool -j cgroup show "$hooks" 2>/dev/null | python3 -c "import json,sys; t=sys.stdin.read().strip(); print(len(json.loads(t)) if t else 0)"; }
assert_eq "$(hooks_attached)" 9 "the agent keeps its nine hooks attached to its own cgroup"
assert_eq "$(cat "$hooks/cgroup.procs")" "" "... where no process ever is"
killed=""
for id in $(prepared); do killed="$killed $(waiting "$id")"; done
agent_kill9
assert_eq "$(hooks_attached)" 0 "an agent killed leaves that cgroup holding nothing (its links went with it)"
for _ in $(seq 1 50); do
	alive=$(for p in $killed; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
	[ -z "$alive" ] && break
	sleep 0.1
done
assert_eq "$(echo "$killed" | wc -w)" 4 "control: two launchers and their PIDs 1 were waiting when the agent was killed"
assert_empty "$alive" "... and each ends when its agent is killed (its socket closes), its PID 1 with it"
agent_start || exit 1
assert_eq "$([ -d "$hooks" ] && echo there)" "" "... and the next agent sweeps it at its start"
in_host "$ERRANDCTL" --config "$W_CONFIG" run -- true
assert_eq "$(hooks_attached)" 9 "its first session's start attaches them again"
stopped=""
for id in $(prepared); do stopped="$stopped $(waiting "$id")"; done
agent_stop
# A PID 1 ends with its launcher (its parent-death signal), a moment after.
for _ in $(seq 1 50); do
	alive=$(for p in $stopped; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
	[ -z "$alive" ] && break
	sleep 0.1
done
assert_empty "$alive" "the agent ends the launchers waiting in its prepared networks, and their PIDs 1, when it stops"
assert_empty "$(leftovers)" "the agent removes its prepared networks and its hooks cgroup when it stops: nothing left"
world_finish
