#!/bin/bash
# Benchmark, not a test: sessions at scale. One errand-agent holds LEVELS
# sessions at once (default "1 100 1000"), each pinned to a wan host and
# sleeping; at each level, measured with the sessions running: one more
# session's start (median of 5 `errandctl run -- /bin/true`), the connect
# rate from one more session (connect, read the greeting, close; CONNS of
# them, client and server on one CPU, so that the rate is bound by the CPU
# a connection takes and not by where the scheduler puts the two ends)
# taking turns with an unconfined process's on the same path, ROUNDS fresh
# sessions and as many unconfined runs: the median of each and of the
# pairs' ratios (this machine's speed drifts by a third within a minute,
# both arms' alike, so the ratio taken pair by pair is what compares one
# level with another), the agent's RSS and the kernel memory of one
# session's maps (bpftool's memlock). Sessions are added 50 at a time; a level stops early
# when MemAvailable falls below MIN_FREE_MB (default 2048) and says so.
set -u
. "$(dirname "$0")/lib.sh"

LEVELS=${LEVELS:-"1 100 1000"}
CONNS=${CONNS:-5000}
ROUNDS=${ROUNDS:-5}
MIN_FREE_MB=${MIN_FREE_MB:-2048}
HOLD=${HOLD:-7200}

world_up >/dev/null
bare_up
W_CONFIG=$(world_config scale '"addressPool": "10.200.0.0/16"')
: >"$W_DIR/scale-serve.log"
# Each level's arms connect to ports of their own (the session's 9110 + 2k,
# the unconfined one's the next), so that every level's rounds start with
# no TIME_WAIT entries of an earlier level's for their server in the NAT's
# table: a fresh session's address is new to the NAT, which must look past
# each such entry for a free port (counted as "found" in the agent
# namespace's /proc/net/stat/nf_conntrack); the unconfined arm takes a new
# address each round too (bare_fresh), so it pays that search alike.
listen=()
k=0
for _ in $LEVELS; do
	listen+=("198.18.1.10:$((9110 + 2 * k))" "198.18.1.10:$((9111 + 2 * k))")
	k=$((k + 1))
done
_start_ready wan "$W_DIR/scale-serve.out" taskset -c 0 "$PROBE" serve --log "$W_DIR/scale-serve.log" \
	198.18.1.10:9102 "${listen[@]}"
agent_start --max-sessions 1100 >/dev/null || exit 1

free_mb() { awk '/^MemAvailable/ { print int($2 / 1024) }' /proc/meminfo; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$AGENT_PID/status"; }
ms_now() { date +%s%N | cut -c1-13; }
# Sessions whose hooks are attached (a prepared network has none yet):
# counted from the outside, so the count costs the agent nothing.
live() { find "/sys/fs/bpf/$W" -mindepth 2 -maxdepth 2 -name connect4 | wc -l; }
# A refusal is an errandctl: line on its stderr (a start's statements, its
# gaps and weakened guarantees, are errand: lines).
failed() { grep -l '^errandctl: ' "$W_DIR"/scale*.err 2>/dev/null | wc -l; }
one_maps_kb() {
	local d t=0 b f
	d=$(find "/sys/fs/bpf/$W" -mindepth 1 -maxdepth 1 -type d ! -name prog | head -n 1)
	for f in "$d"/*; do
		b=$(bpftool -j map show pinned "$f" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("bytes_memlock", 0))' 2>/dev/null)
		t=$((t + ${b:-0}))
	done
	echo $((t / 1024))
}
start_ms() {
	local i s e
	for i in 1 2 3 4 5; do
		s=$(ms_now)
		in_host "$ERRANDCTL" run --config "$W_CONFIG" -- /bin/true 2>/dev/null
		e=$(ms_now)
		echo $((e - s))
		sleep 0.3
	done | median
}
# "SESSION | UNCONFINED | RATIO": the medians of ROUNDS pairs, each a fresh
# session's rate and then an unconfined process's, to PORT and PORT + 1.
conn_rates() {
	local s b port=$1
	for _ in $(seq 1 "$ROUNDS"); do
		errand_run --pin a.test=198.18.1.10 --egress "a.test:$port" -- "${SESSION_WAIT[@]}" \
			taskset -c 0 "$PROBE" rr 198.18.1.10 "$port" "$CONNS" >/dev/null
		s=$(rate <"$RUN_OUT")
		sleep 0.5
		bare_fresh || return
		b=$(in_bare taskset -c 0 "$PROBE" rr 198.18.1.10 $((port + 1)) "$CONNS" | rate)
		echo "${s:-0} ${b:-0}"
	done >"$W_DIR/scale-rates"
	printf '%s | %s | %s' "$(cut -d' ' -f1 "$W_DIR/scale-rates" | median)" \
		"$(cut -d' ' -f2 "$W_DIR/scale-rates" | median)" \
		"$(awk '$2 > 0 { printf "%.3f\n", $1 / $2 }' "$W_DIR/scale-rates" | median)"
}

n=0
printf '| sessions | started in (s) | start, one more (ms) | connects/s, one more | connects/s, unconfined | one more / unconfined | agent RSS (MiB) | one session'"'"'s maps (KiB) | MemAvailable (MiB) |\n'
printf '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
li=0
for level in $LEVELS; do
	t0=$(date +%s)
	short=
	while [ "$n" -lt "$level" ]; do
		if [ "$(free_mb)" -lt "$MIN_FREE_MB" ]; then
			short=" (stopped: MemAvailable below $MIN_FREE_MB MiB)"
			break
		fi
		for _ in $(seq 1 50); do
			[ "$n" -ge "$level" ] && break
			n=$((n + 1))
			(exec nsenter --net="/run/netns/$W-host" "$ERRANDCTL" run --config "$W_CONFIG" \
				--pin s.test=198.18.1.10 --egress s.test:9102 -- sleep "$HOLD" \
				</dev/null >/dev/null 2>"$W_DIR/scale$n.err") &
			W_BG_PIDS+=($!)
		done
		# this batch is up (or failed, and said why) before the next one starts
		for _ in $(seq 1 240); do
			[ "$(($(live) + $(failed)))" -ge "$n" ] && break
			sleep 0.5
		done
	done
	up=$(live)
	t1=$(date +%s)
	[ "$(failed)" != 0 ] && short="$short ($(failed) failed to start: $(grep -h '^errandctl: ' "$W_DIR"/scale*.err | head -n 1))"
	printf '| %s%s | %s | %s | %s | %s | %s | %s |\n' "$up" "$short" "$((t1 - t0))" "$(start_ms)" \
		"$(conn_rates $((9110 + 2 * li)))" "$(($(rss_kb) / 1024))" "$(one_maps_kb)" "$(free_mb)"
	# a level cut short ends the table (a test's status, not the loop's)
	if [ -n "$short" ]; then break; fi
	li=$((li + 1))
done
