#!/bin/bash
# Guarantee: a session's flow table is its own and bounded (an LRU of EGRESS_FLOWS_MAX, 128): a session that makes thousands of connections fills only its own table, and a connection the table forgot since still passes while the policy admits it (the backstop judges its next segment as a new connection's); another session's held connection and new connects meanwhile are untouched.
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_serve wan "$W_DIR/echo.log" $HOST_A:8443/echo || exit 1
W_CONFIG=$(world_config flowtable)
# EGRESS_FLOWS_MAX (bpf/egress.h; a VM's image carries the build, not the sources)
FLOWS_MAX=128
HOLD=20

# The entries of a session's flow table, and those of them toward port 8443.
flows() {
	bpftool -j map dump pinned "/sys/fs/bpf/$W/$1/flows" 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d), sum(1 for e in d if int(e["key"][19], 16) * 256 + int(e["key"][18], 16) == 8443))'
}

RELEASE=$ROOT/build/selftests/$W.release
rm -f "$RELEASE"
# The other session: holds a connection through the flood, then connects anew.
errand_start --pin a.test=$HOST_A --egress a.test:8443 --egress a.test:443 -- sh -c \
	"echo \"held=\$($PROBE tcp-hold $HOST_A 8443 $HOLD 2>&1 | tail -n 1)\"; echo \"after=\$($PROBE tcp $HOST_A 443 2>&1 | tail -n 1)\"; echo done=1; sleep 60" ||
	{ world_finish; exit 1; }
OTHER=$SESSION OTHER_OUT=$BG_OUT OTHER_PID=$BG_PID
# The flooding session: one held connection, then connections a thousand at
# a time, each closed after its greeting (their flows stay in the table until
# pushed out), until the test has seen the held one's flow forgotten (an LRU
# is not strict: how many newer flows that takes varies) and releases it.
errand_start --pin a.test=$HOST_A --egress a.test:8443 --egress a.test:443 -- sh -c \
	"($PROBE tcp-hold $HOST_A 8443 $HOLD 2>&1 | tail -n 1 | sed 's/^/held=/') & sleep 0.5; n=0; while [ ! -e $RELEASE ] && [ \$n -lt 20 ]; do echo \"flood=\$($PROBE rr $HOST_A 443 1000 2>&1 | tail -n 1)\"; n=\$((n + 1)); done; echo flooded=\$n; wait; echo done=1; sleep 60" ||
	{ world_finish; exit 1; }
forgotten=
for _ in $(seq 1 100); do
	read -r n n8443 <<<"$(flows "$SESSION")"
	[ "${n8443:-1}" = 0 ] && grep -q '^flood=ok' "$BG_OUT" && { forgotten=1; break; }
	sleep 0.1
done
touch "$RELEASE"
bg_wait '^flooded=' 60 || { world_finish; exit 1; }
read -r n n8443 <<<"$(flows "$SESSION")"
trace "the flooding session's table: $n flows, $n8443 to port 8443, after $(bg_result flooded) thousand connections; the other's: $(flows "$OTHER")"
assert_match "$(bg_result flood)" "^ok 1000 " "the flooding session made its connections: $(bg_result flood)"
assert_eq "$(bpftool -j map show pinned "/sys/fs/bpf/$W/$SESSION/flows" | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_entries"])')" "$FLOWS_MAX" \
	"its flow table is an LRU of $FLOWS_MAX"
assert_le "$n" "$FLOWS_MAX" "its flow table holds $FLOWS_MAX at most ($n now: the LRU keeps a few free per CPU)"
assert_eq "$forgotten" 1 "... and forgot its held connection's flow while the connection was held"
bg_wait '^done=1' 30
assert_match "$(grep -E '^(flooded|held)=' "$BG_OUT" | cut -d= -f1 | tr '\n' ' ')" "^flooded held $" \
	"the flood was over before the held connection spoke again"
assert_eq "$(bg_result held)" "ok held $HOLD s, echo ping" "the forgotten connection still carries data both ways (the policy admits it)"
BG_OUT=$OTHER_OUT
bg_wait '^done=1' 30
assert_eq "$(bg_result held)" "ok held $HOLD s, echo ping" "the other session's connection, held through the flood, carries data"
assert_eq "$(bg_result after)" "ok hello $HOST_A:443" "... and its new connect after the flood is let through"
assert_eq "$(flows "$OTHER" | cut -d' ' -f2)" 1 "... its own table still holds its held connection's flow"
errand_stop
BG_PID=$OTHER_PID SESSION=$OTHER BG_OUT=$OTHER_OUT
errand_stop
rm -f "$RELEASE"
world_finish
