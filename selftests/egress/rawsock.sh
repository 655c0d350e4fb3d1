#!/bin/bash
# Guarantee: raw sockets carry nothing out of a session: the session cannot open one (sock_create), and what root sends from the session's namespace outside its cgroup is held by the tc backstop, which admits only what the policy admits.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
SNIFF=$W_DIR/wan-sniff.log

# Control: the sniffer in wan sees raw packets sent by the agent namespace.
assert_eq "$(in_host "$PROBE" icmp $HOST_A)" sent "control: the agent namespace sends a raw ICMP echo"
assert_eq "$(in_host "$PROBE" rawip $HOST_A 253)" sent "control: ... and a raw protocol-253 packet"
for _ in $(seq 40); do [ "$(wc -l <"$SNIFF")" -ge 2 ] && break; sleep 0.05; done
assert_match "$(cat "$SNIFF")" "got proto=1 src=$AGENT_ADDR dst=$HOST_A" "control: the wan sniffer saw the ICMP echo"
assert_match "$(cat "$SNIFF")" "got proto=253 src=$AGENT_ADDR dst=$HOST_A" "control: the wan sniffer saw the protocol-253 packet"
: >"$SNIFF"

# Inside the session: no raw socket at all.
errand_run --pin a.test=$HOST_A:443 --egress a.test:443 -- sh -c "$(probe_script \
	icmp "icmp $HOST_A" \
	raw "rawip $HOST_A 253")"
assert_eq "$(result icmp)" EPERM "inside the session a raw ICMP socket is refused"
assert_eq "$(result raw)" EPERM "inside the session a raw IP socket is refused"

# Root in the session's namespace, outside its cgroup: the tc backstop.
errand_start --pin a.test=$HOST_A:443 --egress a.test:443 || { world_finish; exit 1; }
assert_eq "$(in_session "$SESSION" "$PROBE" icmp $HOST_A)" sent "root in the session netns sends a raw ICMP echo to the pinned host"
assert_eq "$(in_session "$SESSION" "$PROBE" rawip $HOST_A 253)" sent "root in the session netns sends a protocol-253 packet to the pinned host"
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_B 443 --timeout 2)" ETIMEDOUT \
	"a TCP connect from the session netns to a host not allowed ($HOST_B:443) times out (SYN dropped)"
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" \
	"a TCP connect from the session netns to the pinned host $HOST_A:443 passes the backstop"

# Root in the session's cgroup: sock_create refuses even a process holding CAP_NET_RAW.
cgdir=$(session_procs_dir)
assert_ne "$cgdir" "" "found the cgroup the session's processes run in"
if [ -n "$cgdir" ]; then
	out=$(in_session "$SESSION" sh -c "echo \$\$ >'$cgdir/cgroup.procs' && exec '$PROBE' icmp $HOST_A" 2>&1 | tail -n 1)
	assert_eq "$out" EPERM "root (with CAP_NET_RAW) in the session's cgroup cannot open a raw ICMP socket"
fi
sleep 0.5
errand_stop

assert_empty "$(cat "$SNIFF")" "the wan sniffer saw none of the session's raw packets"
assert_eq "$(event_count "proto=icmp .*reason=proto hook=tc")" 1 "one tc proto event for the ICMP echo"
assert_eq "$(event_count "proto=253 .*reason=proto hook=tc")" 1 "one tc proto event for the protocol-253 packet"
assert_match "$(event_count "proto=tcp addr=$HOST_B port=443 reason=not-allowed hook=tc")" '^[1-9]' \
	"tc not-allowed events for the SYN to $HOST_B:443"
assert_eq "$(event_count "proto=icmp .*reason=socket hook=sock_create")" 1 "one sock_create event for the raw socket in the cgroup"
assert_empty "$(grep -v "^accept $HOST_A:443 " "$W_DIR/wan-serve.log")" "no server but the pinned one saw a connection"

world_finish
