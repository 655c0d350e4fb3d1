#!/bin/bash
# Guarantee: a network the pool prepared under a program set that has since been replaced (the object changed, or its set's pins went) is made the start's own again under the current set: its old tc programs (and, from Linux 6.6, the tcx links an older errand pinned for them) are taken off its veth before the new ones go on, so the start is verified and enforced by the current set's programs alone, its backstop and flow guard among them.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config pool '"pool": 2, "addressPool": "10.213.0.0/24"')
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
jq_py() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
P=/sys/fs/bpf/$W/prog
prepared() { find "/sys/fs/bpf/$W" -mindepth 1 -maxdepth 1 -type d ! -name prog -printf '%f\n' | sort; }
agent_start || { world_finish; exit 1; }
tcx=0
[ "$(printf '6.6\n%s\n' "$(uname -r)" | sort -V | head -n 1)" = 6.6 ] && tcx=1
# Prepared: both networks there, their veths' filters on.
for _ in $(seq 1 100); do
	[ "$(prepared | grep -c .)" = 2 ] && break
	sleep 0.1
done
for id in $(prepared); do
	for _ in $(seq 1 50); do
		in_host tc filter show dev "eh$id" egress 2>/dev/null | grep -q . && break
		sleep 0.1
	done
done
pool=$(prepared)
assert_eq "$(echo "$pool" | grep -c .)" 2 "the pool prepared two networks"
old=$(find "$P" -mindepth 1 -maxdepth 1 -type d -printf '%f\n')
assert_match "$old" '^[0-9a-f]{16}$' "... under one program set"
# An older errand's prepared networks had their tc programs as tcx links,
# pinned in the session's directory, which run before any clsact filter
# and decide alone: from 6.6 each network gets the old set's two as such,
# as that errand left them, and a tool (bpftool link show, a monitor) holds
# them open, which keeps them attached past their unpinning: only a detach
# takes them off.
old_links() {
	in_host python3 - "$@" <<'PY' &
import ctypes, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def bpf(cmd, attr):
    return libc.syscall(321, cmd, attr, 128)
def obj_get(path):
    name = ctypes.create_string_buffer(path.encode())
    attr = (ctypes.c_uint8 * 128)()
    struct.pack_into("QII", attr, 0, ctypes.addressof(name), 0, 0)
    return bpf(7, attr)  # BPF_OBJ_GET
progs, held = sys.argv[1], []
for sess in sys.argv[2:]:
    ifindex = socket.if_nametoindex("eh" + sess.rsplit("/", 1)[1])
    for prog, at, pin in (("errand_tc_in", 46, "tc_ingress_link"), ("errand_tc_out", 47, "tc_egress_link")):
        attr = (ctypes.c_uint8 * 128)()
        struct.pack_into("IIII", attr, 0, obj_get(progs + "/" + prog), ifindex, at, 0)
        link = bpf(28, attr)  # BPF_LINK_CREATE
        name = ctypes.create_string_buffer((sess + "/" + pin).encode())
        attr = (ctypes.c_uint8 * 128)()
        struct.pack_into("QI", attr, 0, ctypes.addressof(name), link)
        if link >= 0 and bpf(6, attr) == 0:  # BPF_OBJ_PIN
            held.append(link)
print("held", len(held), flush=True)
time.sleep(600)
PY
	W_PIDS+=($!)
}
if [ $tcx = 1 ]; then
	sessions=()
	for id in $pool; do sessions+=("/sys/fs/bpf/$W/$id"); done
	old_links "$P/$old" "${sessions[@]}" >"$W_DIR/held.out"
	for _ in $(seq 1 50); do
		grep -q '^held' "$W_DIR/held.out" && break
		sleep 0.1
	done
	assert_eq "$(cat "$W_DIR/held.out")" "held 4" "each network has the old set's programs as tcx links, pinned and held open"
fi
# The set's pins gone from where the agent finds them: its next start
# loads the set again, and the prepared networks are of a set replaced.
mv "$P/$old" "$P/00000000000000aa"
errand_start --pin a.test=$HOST_A:443 --egress a.test:443 || { world_finish; exit 1; }
assert_contains "$pool" "$SESSION" "a start took a network of the replaced set"
new=$(find "$P" -mindepth 1 -maxdepth 1 -type d ! -name 00000000000000aa -printf '%f\n')
assert_eq "$new" "$old" "... and loaded the set again, under its hash"
show=$(ctl show "$SESSION" --json)
assert_eq "$(echo "$show" | jq_py "sorted(p['hook'] for p in d['programs'] if p['attached'])")" \
	"['connect4', 'connect6', 'getpeername4', 'getpeername6', 'recvmsg4', 'recvmsg6', 'sendmsg4', 'sendmsg6', 'sock_create', 'tc_egress', 'tc_ingress']" \
	"its programs are attached, each the one its veth or cgroup runs first"
tc_in=$(bpftool -j prog show pinned "$P/$new/errand_tc_in" | jq_py "d['id']")
assert_match "$tc_in" '^[0-9]+$' "the current set's backstop is pinned"
assert_eq "$(echo "$show" | jq_py "[p['progId'] for p in d['programs'] if p['hook'] == 'tc_ingress'][0]")" "$tc_in" \
	"... the backstop the current set's"
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" "the session reaches its pin"
assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_B 443 --timeout 2)" ETIMEDOUT "... and its backstop refuses another host"
errand_stop
world_finish
