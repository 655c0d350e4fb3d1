#!/bin/bash
# Guarantee: a session's flow table is its own and bounded (an LRU of EGRESS_FLOWS_MAX, 128): a session that makes a thousand connections fills only its own table, and a connection the table forgot since still passes while the policy admits it (the backstop judges its next segment as a new connection's); another session's held connection and new connects meanwhile are untouched.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_serve wan "$W_DIR/echo.log" $HOST_A:8443/echo || exit 1
W_CONFIG=$(world_config flowtable)
FLOWS_MAX=$(sed -n 's/^#define EGRESS_FLOWS_MAX \([0-9]*\).*/\1/p' "$ROOT/bpf/egress.h")
HOLD=8

# The entries of a session's flow table, and those of them toward port 8443.
flows() {
	bpftool -j map dump pinned "/sys/fs/bpf/$W/$1/flows" 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d), sum(1 for e in d if int(e["key"][19], 16) * 256 + int(e["key"][18], 16) == 8443))'
}

# The other session: holds a connection through the flood, then connects anew.
errand_start --pin a.test=$HOST_A --egress a.test:8443 --egress a.test:443 -- sh -c \
	"echo \"held=\$($PROBE tcp-hold $HOST_A 8443 $HOLD 2>&1 | tail -n 1)\"; echo \"after=\$($PROBE tcp $HOST_A 443 2>&1 | tail -n 1)\"; echo done=1; sleep 30" ||
	{ world_finish; exit 1; }
OTHER=$SESSION OTHER_OUT=$BG_OUT OTHER_PID=$BG_PID
# The flooding session: one held connection, then a thousand more, each
# closed after its greeting (their flows stay in the table until pushed out).
errand_start --pin a.test=$HOST_A --egress a.test:8443 --egress a.test:443 -- sh -c \
	"($PROBE tcp-hold $HOST_A 8443 $HOLD 2>&1 | tail -n 1 | sed 's/^/held=/') & sleep 0.5; echo \"flood=\$($PROBE rr $HOST_A 443 1000 2>&1 | tail -n 1)\"; echo flooded=1; wait; echo done=1; sleep 30" ||
	{ world_finish; exit 1; }
bg_wait '^flooded=1' 60 || { world_finish; exit 1; }
read -r n n8443 <<<"$(flows "$SESSION")"
trace "the flooding session's table: $n flows, $n8443 to port 8443; the other's: $(flows "$OTHER")"
assert_match "$(bg_result flood)" "^ok 1000 " "the flooding session made its thousand connections: $(bg_result flood)"
assert_le "$n" "$FLOWS_MAX" "its flow table holds $FLOWS_MAX at most ($n now: the LRU keeps a few free per CPU)"
assert_eq "$n8443" 0 "... and has forgotten its held connection's flow"
bg_wait '^done=1' 20
assert_eq "$(bg_result held)" "ok held $HOLD s, echo ping" "the forgotten connection still carries data both ways (the policy admits it)"
BG_OUT=$OTHER_OUT
bg_wait '^done=1' 20
assert_eq "$(bg_result held)" "ok held $HOLD s, echo ping" "the other session's connection, held through the flood, carries data"
assert_eq "$(bg_result after)" "ok hello $HOST_A:443" "... and its new connect after the flood is let through"
assert_eq "$(flows "$OTHER" | cut -d' ' -f2)" 1 "... its own table still holds its held connection's flow"
errand_stop
BG_PID=$OTHER_PID SESSION=$OTHER BG_OUT=$OTHER_OUT
errand_stop
world_finish
