#!/bin/bash
# Benchmark, not a test: answers a second for an allowed, cached name, errand's
# responder (whose allow entries outlive every answer it gives) against
# dnsmasq as a caching forwarder, side by side in one run on the same world:
# both forward to the same upstream in the wan, and dnsperf asks each from a
# namespace wired the same way (an errand session; the bare namespace).
# ROUNDS and SECONDS_EACH tune it; the median of the rounds is reported.
set -u
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
SECONDS_EACH=${SECONDS_EACH:-10}

bench_need dnsperf dnsmasq
world_up >/dev/null
bare_up
world_dns "api.test A 198.18.1.10 3600" || exit 1
W_CONFIG=$(world_config dnsbench)
# In the project, not /tmp: a session has a /tmp of its own.
QUERIES=$ROOT/build/bench/dns-queries
mkdir -p "$(dirname "$QUERIES")"
echo "api.test A" >"$QUERIES"
in_host dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
	--server="$DNS_UPSTREAM" --listen-address=10.214.0.1 --bind-interfaces \
	--cache-size=1000 --pid-file="$W_DIR/dnsmasq.pid" --user=root 2>"$W_DIR/dnsmasq.err" &
W_PIDS+=($!)
sleep 0.5

qps() { sed -n 's/.*Queries per second: *\([0-9.]*\).*/\1/p' | head -n1; }
perf_args="-d $QUERIES -l $SECONDS_EACH -c 4 -q 64"
: >"$W_DIR/qps.errand"; : >"$W_DIR/qps.dnsmasq"
for r in $(seq "$ROUNDS"); do
	# shellcheck disable=SC2016,SC2086
	errand_run --egress api.test -- sh -c \
		'dnsperf -s "$(sed -n "s/^nameserver *//p" /etc/resolv.conf)" '"$perf_args"
	qps <"$RUN_OUT" >>"$W_DIR/qps.errand"
	# shellcheck disable=SC2086
	in_bare dnsperf -s 10.214.0.1 $perf_args | qps >>"$W_DIR/qps.dnsmasq"
	echo "# round $r of $ROUNDS done" >&2
done
e=$(median <"$W_DIR/qps.errand")
d=$(median <"$W_DIR/qps.dnsmasq")
echo "dns benchmark: $(uname -r), $(nproc) cores, median of $ROUNDS rounds of $SECONDS_EACH s"
echo "every figure: $(tr '\n' ' ' <"$W_DIR/qps.errand")(errand) $(tr '\n' ' ' <"$W_DIR/qps.dnsmasq")(dnsmasq)"
printf '%-40s %12s\n' "errand responder" "$e q/s"
printf '%-40s %12s\n' "dnsmasq, caching forwarder" "$d q/s"
printf '%-40s %12s\n' "ratio" "$(ratio "$e" "$d")"
