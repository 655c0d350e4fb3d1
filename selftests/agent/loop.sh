#!/bin/bash
# Guarantee: errand-agent's loop never blocks: while control clients hold large answers unread, another sends a frame that never completes, and 20 sessions start and stop, every DNS query of the running sessions is answered within its resolver's timeout (2 s) and each keeps its enforcement (a forbidden connect stays EPERM, an allowed one works); the slow readers are dropped after their deadline, never waited for.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 240
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
command -v sqlite3 >/dev/null || skip "sqlite3 (the command) is needed to fill state.db"
world_up
world_dns || exit 1
W_CONFIG=$(dns_config loop)
agent_start || exit 1
SOCK=$(agent_sock)
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }

# A large answer: an ended session with many refusals in state.db, so that
# `denied` is megabytes, far more than a socket buffer holds.
sqlite3 "$W_DIR/state/state.db" <<'SQL'
PRAGMA busy_timeout = 5000;
INSERT INTO sessions(id, created, command, mode, status, exit_status, ended)
	VALUES ('0badcafe', strftime('%s'), '["true"]', 'restricted', 'exited', 0, strftime('%s'));
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 15000)
INSERT INTO denied(session, at, name, proto, reason)
	SELECT '0badcafe', strftime('%s'), 'n' || i || '.a-long-name-that-makes-the-answer-large.example', 'dns', 'not-allowed' FROM c;
SQL
size=$(ctl denied --json | wc -c)
assert_le 1000000 "$size" "the denied answer is large ($size bytes)"

# Two sessions that keep asking and connecting, a round every 0.2 s; each
# query has 2 s, the resolver's timeout.
watch_sh='while :; do
	echo "dns=$('"$PROBE"' dns $NS api.test --timeout 2 2>&1 | tail -n 1)"
	echo "allowed=$('"$PROBE"' tcp '"$HOST_A"' 443 --timeout 2 2>&1 | tail -n 1)"
	echo "forbidden=$('"$PROBE"' tcp 10.99.0.10 443 --timeout 2 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done'
errand_start --egress api.test -- sh -c "$(session_ns_sh)$watch_sh" || exit 1
A_OUT=$BG_OUT
bg_rounds 2 10 || exit 1
errand_start --egress api.test -- sh -c "$(session_ns_sh)$watch_sh" || exit 1
B_OUT=$BG_OUT
bg_rounds 2 10 || exit 1
a0=$(wc -l <"$A_OUT")
b0=$(wc -l <"$B_OUT")

# Hostile clients, each holding its connection for 25 s: six ask for the
# large answer and never read it; one sends half a header, never the rest.
RAW_PIDS=()
raw() {
	in_host python3 - "$SOCK" "$1" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
s.sendall(bytes.fromhex(sys.argv[2]))
time.sleep(25)
PY
	RAW_PIDS+=("$!")
	W_BG_PIDS+=("$!")
}
for _ in 1 2 3 4 5 6; do
	raw 00010007000000027b7d # version 1, denied, payload "{}"
done
raw 00010002

# Meanwhile 20 sessions start and stop, two at a time.
started=0
for i in $(seq 1 10); do
	for j in 1 2; do
		in_host timeout -k 5 60 "$ERRANDCTL" run --config "$W_CONFIG" -- true \
			</dev/null >"$W_DIR/short$i.$j.out" 2>&1 &
		SHORT[j]=$!
	done
	for j in 1 2; do
		wait "${SHORT[j]}" && started=$((started + 1))
	done
done
assert_eq "$started" 20 "20 sessions started and ended meanwhile"
for p in "${RAW_PIDS[@]}"; do
	wait "$p" 2>/dev/null
done
agent_alive=$(ctl version 2>/dev/null | grep -c '^errand-agent [0-9]')
assert_eq "$agent_alive" 1 "the agent still answers"

# What the running sessions saw from the first hostile client on.
tail -n +"$((a0 + 1))" "$A_OUT" >"$W_DIR/a.seen"
tail -n +"$((b0 + 1))" "$B_OUT" >"$W_DIR/b.seen"
for x in a b; do
	f=$W_DIR/$x.seen
	rounds=$(grep -c '^round$' "$f")
	assert_le 20 "$rounds" "session $x: at least 20 rounds while under load ($rounds)"
	bad=$(grep '^dns=' "$f" | grep -cv "^dns=answer NOERROR addrs=$HOST_A")
	assert_eq "$bad" 0 "session $x: every DNS query answered within 2 s ($(grep '^dns=' "$f" | grep -v "answer NOERROR" | sort | uniq -c | head -n 3 | tr '\n' ' '))"
	bad=$(grep '^allowed=' "$f" | grep -cv "^allowed=ok hello $HOST_A:443")
	assert_eq "$bad" 0 "session $x: every allowed connect worked"
	bad=$(grep '^forbidden=' "$f" | grep -cv '^forbidden=EPERM$')
	assert_eq "$bad" 0 "session $x: every forbidden connect stayed EPERM"
done
assert_match "$(cat "$AGENT_LOG")" "client dropped: it did not read its whole answer within 10 s" \
	"a client that does not read its answer is dropped after its deadline"
assert_match "$(cat "$AGENT_LOG")" "client dropped: no whole request within 5 s" \
	"a frame that never completes is dropped after its deadline"
world_finish
