#!/bin/bash
# Benchmark, not a test: connect rate (connect, read the greeting, close) over
# IPv6 of an unconfined process against the same command in a dual-stack
# errand session, side by side in one run on the same world path: netns ->
# veth -> agent namespace (forward, NAT66) -> wan. Target: the session at
# 0.95x of unconfined or better. ROUNDS and CONNS tune it; the median of the
# rounds is reported.
set -u
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-9}
CONNS=${CONNS:-2000}

world_up >/dev/null
world_v6 >/dev/null
bare_up
bare6_up
W_CONFIG=$(world_config bench6)
# Each arm has a port of its own, so neither's NAT and TIME_WAIT state slows
# the other's: bare 9111, errand 9112.
world_serve wan "$W_DIR/bench6-serve.log" "[$HOST6_A]:9111" "[$HOST6_A]:9112"

sess() {
	errand_run --pin a6.test="[$HOST6_A]:9112" --egress a6.test:9112 -- "${SESSION_PROBE[@]}" "$@"
	cat "$RUN_OUT"
}

: >"$W_DIR/rr6.bare"; : >"$W_DIR/rr6.sess"
# The arms take turns going first, each after a pause (bench/egress.sh says why).
settle() { sleep 1; }
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		settle; bare rr "$HOST6_A" 9111 "$CONNS" | rate >>"$W_DIR/rr6.bare"
		settle; sess rr "$HOST6_A" 9112 "$CONNS" | rate >>"$W_DIR/rr6.sess"
	else
		settle; sess rr "$HOST6_A" 9112 "$CONNS" | rate >>"$W_DIR/rr6.sess"
		settle; bare rr "$HOST6_A" 9111 "$CONNS" | rate >>"$W_DIR/rr6.bare"
	fi
	echo "# round $r of $ROUNDS done" >&2
done

rr_bare=$(median <"$W_DIR/rr6.bare"); rr_sess=$(median <"$W_DIR/rr6.sess")
echo "egress IPv6 benchmark: $(uname -r), $(nproc) cores, median of $ROUNDS rounds"
echo "each round: $CONNS connections; every figure: $(tr '\n' ' ' <"$W_DIR/rr6.bare")(rr bare) $(tr '\n' ' ' <"$W_DIR/rr6.sess")(rr errand)"
printf '%-28s %12s %12s %8s\n' "" unconfined errand ratio
printf '%-28s %12s %12s %8s\n' "IPv6 connect rate (conn/s)" "$rr_bare" "$rr_sess" "$(ratio "$rr_sess" "$rr_bare")"
