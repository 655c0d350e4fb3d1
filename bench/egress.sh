#!/bin/bash
# Benchmark, not a test: connect rate (connect, read the greeting, close) and
# bulk TCP throughput of an unconfined process against the same command in an
# errand session, side by side in one run on the same world path: netns ->
# veth -> agent namespace (forward, NAT) -> wan. A third arm puts a do-nothing
# XDP program on the unconfined path's host-side veth, to measure what an XDP
# stage costs there (bpf/egress.bpf.c says why errand has none).
# The connect rate is measured twice: as the kernel places client and
# server on two CPUs (each round trip waits on the other side, so it is
# bound by latency and by where the scheduler puts them), and with client
# and server on one CPU, where it is bound by the CPU a connection takes,
# what the path itself costs (CONNS1 connections a round, a second or so: in
# a quarter of a second one scheduling blip moved a round's figure by a
# fifth).
# ROUNDS, CONNS, CONNS1 and BYTES tune it; each figure is the median of the rounds,
# each ratio the median of the rounds' own ratios.
# Last, what errand's programs cost a connection and a bulk transfer in the
# kernel, from their run-time statistics over one more session arm of each.
set -u
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-7}
CONNS=${CONNS:-5000}
CONNS1=${CONNS1:-20000}
BYTES=${BYTES:-2000000000}
XDP_OBJ=$ROOT/build/bench/xdp_pass.bpf.o
BPFSTATS=$ROOT/build/bench/bpfstats

if [ ! -x "$BPFSTATS" ] || [ "$ROOT/bench/bpfstats.c" -nt "$BPFSTATS" ]; then
	mkdir -p "$(dirname "$BPFSTATS")"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$BPFSTATS" "$ROOT/bench/bpfstats.c" || exit 1
fi

world_up >/dev/null
bare_up
# Each arm has ports of its own, so no arm's NAT and TIME_WAIT state slows
# another's: bare 9101/5001, errand 9102/5002, XDP 9103/5003, on one CPU
# bare 9104 and errand 9105 (a server of their own, on CPU 0). The bare
# namespace takes a new address each round, as each round's session comes
# from a new one (bare_fresh in bench/lib.sh).
for p in 5001 5002 5003; do
	in_wan "$PROBE" bulk-serve 198.18.1.10:$p >/dev/null 2>&1 &
	W_PIDS+=($!)
done
W_CONFIG=$(world_config bench)
world_serve wan "$W_DIR/bench-serve.log" 198.18.1.10:9101 198.18.1.10:9102 198.18.1.10:9103
: >"$W_DIR/bench-cpu0.log"
_start_ready wan "$W_DIR/bench-cpu0.out" taskset -c 0 "$PROBE" serve --log "$W_DIR/bench-cpu0.log" \
	198.18.1.10:9104 198.18.1.10:9105

sess() {
	errand_run --pin a.test=198.18.1.10 --egress a.test:9102 --egress a.test:5002 \
		--egress a.test:9105 -- "${SESSION_PROBE[@]}" "$@"
	cat "$RUN_OUT"
}
sess1() {
	local SESSION_PROBE=("${SESSION_WAIT[@]}" taskset -c 0 "$PROBE")
	sess rr 198.18.1.10 9105 "$CONNS1" | rate >>"$W_DIR/rr1.sess"
}
bare1() { in_bare taskset -c 0 "$PROBE" rr 198.18.1.10 9104 "$CONNS1" | rate >>"$W_DIR/rr1.bare"; }

: >"$W_DIR/rr.bare"; : >"$W_DIR/rr.sess"; : >"$W_DIR/rr.xdp"
: >"$W_DIR/bulk.bare"; : >"$W_DIR/bulk.sess"; : >"$W_DIR/bulk.xdp"
: >"$W_DIR/rr.xdpbare"; : >"$W_DIR/bulk.xdpbare"; : >"$W_DIR/rr1.bare"; : >"$W_DIR/rr1.sess"
# The arms take turns going first, and each measurement starts after a pause:
# a session's network namespace is torn down asynchronously by the kernel,
# and on two cores that work would otherwise land on whichever arm ran next.
settle() { sleep 1; }
for r in $(seq "$ROUNDS"); do
	bare_fresh || exit 1
	if [ $((r % 2)) = 1 ]; then
		settle; bare rr 198.18.1.10 9101 "$CONNS" | rate >>"$W_DIR/rr.bare"
		settle; sess rr 198.18.1.10 9102 "$CONNS" | rate >>"$W_DIR/rr.sess"
		settle; bare bulk 198.18.1.10 5001 "$BYTES" | mbit >>"$W_DIR/bulk.bare"
		settle; sess bulk 198.18.1.10 5002 "$BYTES" | mbit >>"$W_DIR/bulk.sess"
		settle; bare1
		settle; sess1
	else
		settle; sess rr 198.18.1.10 9102 "$CONNS" | rate >>"$W_DIR/rr.sess"
		settle; bare rr 198.18.1.10 9101 "$CONNS" | rate >>"$W_DIR/rr.bare"
		settle; sess bulk 198.18.1.10 5002 "$BYTES" | mbit >>"$W_DIR/bulk.sess"
		settle; bare bulk 198.18.1.10 5001 "$BYTES" | mbit >>"$W_DIR/bulk.bare"
		settle; sess1
		settle; bare1
	fi
	# Loaded with bpftool under the world's own pin: ip(8) would leave
	# globals directories in the machine's bpffs.
	if bpftool prog load "$XDP_OBJ" "/sys/fs/bpf/$W-xdp" type xdp 2>"$W_DIR/xdp.err" &&
		in_host bpftool net attach xdpdrv pinned "/sys/fs/bpf/$W-xdp" dev bh0 2>>"$W_DIR/xdp.err"; then
		settle; bare rr 198.18.1.10 9103 "$CONNS" | rate >>"$W_DIR/rr.xdp"
		settle; bare bulk 198.18.1.10 5003 "$BYTES" | mbit >>"$W_DIR/bulk.xdp"
		# Its ratios pair it with this round's unconfined figures, so
		# a round whose load failed shifts no pair.
		tail -n1 "$W_DIR/rr.bare" >>"$W_DIR/rr.xdpbare"
		tail -n1 "$W_DIR/bulk.bare" >>"$W_DIR/bulk.xdpbare"
		in_host bpftool net detach xdpdrv dev bh0
	fi
	rm -f "/sys/fs/bpf/$W-xdp"
	echo "# round $r of $ROUNDS done" >&2
done

rr_bare=$(median <"$W_DIR/rr.bare"); rr_sess=$(median <"$W_DIR/rr.sess")
bk_bare=$(median <"$W_DIR/bulk.bare"); bk_sess=$(median <"$W_DIR/bulk.sess")
echo "egress benchmark: $(uname -r), $(nproc) cores, median of $ROUNDS rounds (a ratio: of the rounds' own)"
echo "each round: $CONNS connections ($CONNS1 on one CPU), $BYTES bytes; every figure: $(tr '\n' ' ' <"$W_DIR/rr.bare")(rr bare) $(tr '\n' ' ' <"$W_DIR/rr.sess")(rr errand) $(tr '\n' ' ' <"$W_DIR/bulk.bare")(bulk bare) $(tr '\n' ' ' <"$W_DIR/bulk.sess")(bulk errand) $(tr '\n' ' ' <"$W_DIR/rr1.bare")(rr bare, one CPU) $(tr '\n' ' ' <"$W_DIR/rr1.sess")(rr errand, one CPU)"
printf '%-28s %12s %12s %8s\n' "" unconfined errand ratio
printf '%-28s %12s %12s %8s\n' "connect rate (conn/s)" "$rr_bare" "$rr_sess" "$(paired "$W_DIR/rr.sess" "$W_DIR/rr.bare")"
printf '%-28s %12s %12s %8s\n' "  on one CPU" "$(median <"$W_DIR/rr1.bare")" "$(median <"$W_DIR/rr1.sess")" "$(paired "$W_DIR/rr1.sess" "$W_DIR/rr1.bare")"
printf '%-28s %12s %12s %8s\n' "bulk TCP (Mbit/s)" "$bk_bare" "$bk_sess" "$(paired "$W_DIR/bulk.sess" "$W_DIR/bulk.bare")"
if [ -s "$W_DIR/rr.xdp" ]; then
	rr_xdp=$(median <"$W_DIR/rr.xdp"); bk_xdp=$(median <"$W_DIR/bulk.xdp")
	printf '%-28s %12s %12s %8s\n' "  XDP pass on host veth" "conn/s" "$rr_xdp" "$(paired "$W_DIR/rr.xdp" "$W_DIR/rr.xdpbare")"
	printf '%-28s %12s %12s %8s\n' "" "Mbit/s" "$bk_xdp" "$(paired "$W_DIR/bulk.xdp" "$W_DIR/bulk.xdpbare")"
else
	echo "XDP arm not run: $(head -n1 "$W_DIR/xdp.err")"
fi

# What errand's programs cost in the kernel: one more session rr and one
# more session bulk under BPF run-time statistics (bench/bpfstats.c), each
# errand program's time and runs read before and after each. Not among the
# rounds: the statistics slow every program they time.
bpf_runs() {
	bpftool prog show --json 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("errand_"):
        print(p["id"], p["name"], p.get("run_time_ns", 0), p.get("run_cnt", 0))'
}
# Each program's runs and time between two bpf_runs: per connection (rr
# BEFORE AFTER CONNS) or per MB with the share of the transfer's time (bulk
# BEFORE AFTER BYTES MBIT).
costs() {
	python3 - "$@" <<'PY'
import sys
def runs(path):
    out = {}
    for line in open(path):
        pid, name, ns, cnt = line.split()
        out[pid] = (name, int(ns), int(cnt))
    return out
mode, before, after, n = sys.argv[1], runs(sys.argv[2]), runs(sys.argv[3]), int(sys.argv[4])
total = 0
for pid, (name, ns, cnt) in sorted(after.items(), key=lambda x: x[1][0]):
    _, ns0, cnt0 = before.get(pid, (name, 0, 0))
    dns, dcnt = ns - ns0, cnt - cnt0
    if not dcnt:
        continue
    total += dns
    if mode == "rr":
        print("  %-16s %6.2f runs a connection, %5.0f ns a run" % (name, dcnt / n, dns / dcnt))
    else:
        print("  %-16s %8.1f runs a MB, %5.0f ns a run" % (name, dcnt / (n / 1e6), dns / dcnt))
if mode == "rr":
    print("  all of them: %.2f us a connection" % (total / n / 1000))
else:
    secs = n * 8 / (float(sys.argv[5]) * 1e6)
    print("  all of them: %.1f ms of the transfer's %.0f ms" % (total / 1e6, secs * 1000))
PY
}
"$BPFSTATS" >"$W_DIR/bpfstats.out" 2>&1 &
BPFSTATS_PID=$!
W_PIDS+=("$BPFSTATS_PID")
for _ in $(seq 50); do
	grep -q '^on$' "$W_DIR/bpfstats.out" && break
	sleep 0.05
done
if grep -q '^on$' "$W_DIR/bpfstats.out"; then
	bpf_runs >"$W_DIR/bpf.before"
	settle; rr_stats=$(sess rr 198.18.1.10 9102 "$CONNS" | rate)
	bpf_runs >"$W_DIR/bpf.after"
	settle; bk_stats=$(sess bulk 198.18.1.10 5002 "$BYTES" | mbit)
	bpf_runs >"$W_DIR/bpf.bulk"
	kill "$BPFSTATS_PID"
	wait "$BPFSTATS_PID" 2>/dev/null
	echo "errand's programs in the kernel, one more session rr ($CONNS connections, $rr_stats conn/s under the statistics):"
	costs rr "$W_DIR/bpf.before" "$W_DIR/bpf.after" "$CONNS"
	echo "and over one more session bulk ($BYTES bytes, $bk_stats Mbit/s under the statistics):"
	costs bulk "$W_DIR/bpf.after" "$W_DIR/bpf.bulk" "$BYTES" "$bk_stats"
else
	kill "$BPFSTATS_PID" 2>/dev/null
	echo "errand's programs in the kernel: not measured: $(head -n1 "$W_DIR/bpfstats.out")"
fi
