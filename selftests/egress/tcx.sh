#!/bin/bash
# Guarantee: the tc backstop and flow guard are on the session's veth: on a kernel with tcx (6.6 on) as links pinned with the session, which replacing or removing the veth's qdiscs (clsact included) leaves on, so what root sends from the session's namespace outside its cgroup is still held; before 6.6 as filters on the veth's clsact.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_start --pin a.test=$HOST_A:443 --egress a.test:443 || { world_finish; exit 1; }
pins=/sys/fs/bpf/$W/$SESSION
hif=eh$SESSION
held() {
	assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_B 443 --timeout 2)" ETIMEDOUT \
		"$1: a TCP connect from the session netns, outside its cgroup, to a host not allowed ($HOST_B:443) is dropped"
	assert_eq "$(in_session "$SESSION" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" \
		"... and one to the pinned host passes"
}
# tcx came with 6.6; errand's own probe is not the judge of whether it is used
if uname -r | awk -F. '{ exit !($1 > 6 || ($1 == 6 && $2 >= 6)) }'; then
	assert_eq "$(session_pins link | tr ' ' '\n' | grep -c '^tcx_')" 2 \
		"the backstop and the flow guard are tcx links pinned with the session (kernel $(uname -r))"
	held "control"
	in_host tc qdisc del dev "$hif" clsact 2>/dev/null # none with tcx
	assert_eq "$(in_host tc qdisc add dev "$hif" clsact 2>&1 && in_host tc qdisc del dev "$hif" clsact 2>&1 && echo done)" done \
		"root on the host adds a clsact qdisc to the session's veth and deletes it"
	held "after clsact came and went"
	assert_eq "$(in_host tc qdisc replace dev "$hif" root pfifo limit 100 2>&1 && in_host tc qdisc del dev "$hif" root 2>&1 && echo done)" done \
		"root replaces the veth's root qdisc and deletes it"
	held "after the root qdisc changed"
else
	trace "no tcx before 6.6: this kernel ($(uname -r)) has the backstop on clsact"
	assert_match "$(in_host tc filter show dev "$hif" ingress)" "errand_tc_in" \
		"the backstop is a filter on the veth's clsact ingress"
	assert_match "$(in_host tc filter show dev "$hif" egress)" "errand_tc_out" \
		"... and the flow guard on its egress"
	held "clsact"
fi
assert_match "$(in_host "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION")" "tc_ingress +prog [0-9]+ +attached" \
	"show: the backstop attached"
errand_stop
# the teardown comes after the exit status is handed back
for _ in $(seq 100); do [ -e "$pins" ] || break; sleep 0.1; done
assert_eq "$(ls "$pins" 2>/dev/null)" "" "the session's pins, its links among them, are gone with it"

world_finish
