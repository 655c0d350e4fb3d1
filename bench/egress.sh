#!/bin/bash
# Benchmark, not a test: connect rate (connect, read the greeting, close) and
# bulk TCP throughput of an unconfined process against the same command in an
# errand session, side by side in one run on the same world path: netns ->
# veth -> agent namespace (forward, NAT) -> wan. A third arm puts a do-nothing
# XDP program on the unconfined path's host-side veth, to measure what an XDP
# stage costs there (bpf/egress.bpf.c says why errand has none).
# ROUNDS, CONNS and BYTES tune it; the median of the rounds is reported.
set -u
. "$(dirname "$0")/../selftests/lib/world.sh"

ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-2000}
BYTES=${BYTES:-2000000000}
XDP_OBJ=$ROOT/build/bench/xdp_pass.bpf.o

world_up >/dev/null
B=$W-bare
ip netns add "$B"
trap 'ip netns del "$B" 2>/dev/null; world_down' EXIT
# Each arm has ports of its own, so no arm's NAT and TIME_WAIT state slows
# another's: bare 9101/5001, errand 9102/5002, XDP 9103/5003.
for p in 5001 5002 5003; do
	in_wan "$PROBE" bulk-serve 198.18.1.10:$p >/dev/null 2>&1 &
	W_PIDS+=($!)
done
ip link add bh0 netns "$W-host" type veth peer name eth0 netns "$B"
in_host ip addr add 10.214.0.1/30 dev bh0
in_host ip link set bh0 up
ip -n "$B" addr add 10.214.0.2/30 dev eth0
ip -n "$B" link set eth0 up
ip -n "$B" link set lo up
ip -n "$B" route add default via 10.214.0.1
in_host sysctl -qw net.ipv4.ip_forward=1
in_host nft -f - <<NFT
table ip ${W}bench {
	chain post { type nat hook postrouting priority srcnat; ip saddr 10.214.0.0/30 masquerade; }
}
NFT
W_CONFIG=$(world_config bench)
world_serve wan "$W_DIR/bench-serve.log" 198.18.1.10:9101 198.18.1.10:9102 198.18.1.10:9103

rate() { sed -n 's/.*(\([0-9.]*\)\/s).*/\1/p' | head -n1; }
mbit() { sed -n 's/.*(\([0-9.]*\) Mbit\/s).*/\1/p' | head -n1; }
bare() { nsenter --net="/run/netns/$B" "$PROBE" "$@"; }
sess() {
	errand_run --pin a.test=198.18.1.10 --egress a.test:9102 --egress a.test:5002 -- "$PROBE" "$@"
	cat "$RUN_OUT"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

: >"$W_DIR/rr.bare"; : >"$W_DIR/rr.sess"; : >"$W_DIR/rr.xdp"
: >"$W_DIR/bulk.bare"; : >"$W_DIR/bulk.sess"; : >"$W_DIR/bulk.xdp"
# The arms take turns going first, and each measurement starts after a pause:
# a session's network namespace is torn down asynchronously by the kernel,
# and on two cores that work would otherwise land on whichever arm ran next.
settle() { sleep 1; }
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		settle; bare rr 198.18.1.10 9101 "$CONNS" | rate >>"$W_DIR/rr.bare"
		settle; sess rr 198.18.1.10 9102 "$CONNS" | rate >>"$W_DIR/rr.sess"
		settle; bare bulk 198.18.1.10 5001 "$BYTES" | mbit >>"$W_DIR/bulk.bare"
		settle; sess bulk 198.18.1.10 5002 "$BYTES" | mbit >>"$W_DIR/bulk.sess"
	else
		settle; sess rr 198.18.1.10 9102 "$CONNS" | rate >>"$W_DIR/rr.sess"
		settle; bare rr 198.18.1.10 9101 "$CONNS" | rate >>"$W_DIR/rr.bare"
		settle; sess bulk 198.18.1.10 5002 "$BYTES" | mbit >>"$W_DIR/bulk.sess"
		settle; bare bulk 198.18.1.10 5001 "$BYTES" | mbit >>"$W_DIR/bulk.bare"
	fi
	if in_host ip link set dev bh0 xdpdrv obj "$XDP_OBJ" sec xdp 2>"$W_DIR/xdp.err"; then
		settle; bare rr 198.18.1.10 9103 "$CONNS" | rate >>"$W_DIR/rr.xdp"
		settle; bare bulk 198.18.1.10 5003 "$BYTES" | mbit >>"$W_DIR/bulk.xdp"
		in_host ip link set dev bh0 xdpdrv off
	fi
	echo "# round $r of $ROUNDS done" >&2
done

rr_bare=$(median <"$W_DIR/rr.bare"); rr_sess=$(median <"$W_DIR/rr.sess")
bk_bare=$(median <"$W_DIR/bulk.bare"); bk_sess=$(median <"$W_DIR/bulk.sess")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
echo "egress benchmark: $(uname -r), $(nproc) cores, median of $ROUNDS rounds"
echo "each round: $CONNS connections, $BYTES bytes; every figure: $(tr '\n' ' ' <"$W_DIR/rr.bare")(rr bare) $(tr '\n' ' ' <"$W_DIR/rr.sess")(rr errand)"
printf '%-28s %12s %12s %8s\n' "" unconfined errand ratio
printf '%-28s %12s %12s %8s\n' "connect rate (conn/s)" "$rr_bare" "$rr_sess" "$(ratio "$rr_sess" "$rr_bare")"
printf '%-28s %12s %12s %8s\n' "bulk TCP (Mbit/s)" "$bk_bare" "$bk_sess" "$(ratio "$bk_sess" "$bk_bare")"
if [ -s "$W_DIR/rr.xdp" ]; then
	rr_xdp=$(median <"$W_DIR/rr.xdp"); bk_xdp=$(median <"$W_DIR/bulk.xdp")
	printf '%-28s %12s %12s %8s\n' "  XDP pass on host veth" "conn/s" "$rr_xdp" "$(ratio "$rr_xdp" "$rr_bare")"
	printf '%-28s %12s %12s %8s\n' "" "Mbit/s" "$bk_xdp" "$(ratio "$bk_xdp" "$bk_bare")"
else
	echo "XDP arm not run: $(head -n1 "$W_DIR/xdp.err")"
fi
