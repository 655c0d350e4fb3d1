#!/bin/bash
# Benchmark, not a test: connect rate (connect, read the greeting, close) and
# bulk TCP throughput through an errand session against the proxy design of
# other sandboxes: an unconfined client whose only way out is an HTTP CONNECT
# proxy in the agent's namespace, squid or tinyproxy, which dials the wan
# itself. Every arm starts in a namespace wired like a session's (netns ->
# veth -> agent namespace -> wan): the session's probe connects straight out
# (its hooks, backstop and NAT on the way), the bare namespace's client
# (bench/connectc.c) asks the proxy on its veth's far end. The unconfined
# probe on that bare path is the fourth arm, for scale. The connect rate is
# measured twice: one client, one connection after another (bound by each
# connection's round trips), and PARALLEL clients at once sharing PCONNS
# connections (bound by what each connection costs the machine's CPUs, as on
# a host whose sessions all connect). Target: the session at 3x squid or
# better. ROUNDS, CONNS, PCONNS, PARALLEL and BYTES tune it; the median of
# the rounds is reported. The proxies are this run's own, in the world's agent
# namespace, with their config, pid and log under the world's directory;
# world_down ends them by pid.
set -u
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-2000}
PCONNS=${PCONNS:-6000}
PARALLEL=${PARALLEL:-8}
BYTES=${BYTES:-1000000000}
CONNECTC=$ROOT/build/bench/connectc

if ! command -v squid >/dev/null || ! command -v tinyproxy >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends squid tinyproxy >&2 ||
		{ echo "bench/proxy.sh: cannot install squid and tinyproxy" >&2; exit 1; }
fi
if [ ! -x "$CONNECTC" ] || [ "$ROOT/bench/connectc.c" -nt "$CONNECTC" ]; then
	mkdir -p "$(dirname "$CONNECTC")"
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$CONNECTC" "$ROOT/bench/connectc.c" || exit 1
fi

world_up >/dev/null
bare_up
# Ports of each arm's own, so no arm's NAT and TIME_WAIT state slows
# another's: bare 9121/9131/5021, errand 9122/9132/5022, squid
# 9123/9133/5023, tinyproxy 9124/9134/5024 (the second for the clients at
# once: a client's port in TIME_WAIT is taken again toward another port, so
# the rounds' connections do not run out of ports). The bulk server answers
# once it has every byte (connectc.c says why), the probe's bulk client
# waits for that answer as connectc does.
for p in 5021 5022 5023 5024; do
	in_wan "$CONNECTC" sink 198.18.1.10 $p "$BYTES" >/dev/null 2>&1 &
	W_PIDS+=($!)
done
W_CONFIG=$(world_config proxy)
world_serve wan "$W_DIR/proxy-serve.log" 198.18.1.10:9121 198.18.1.10:9122 198.18.1.10:9123 198.18.1.10:9124 \
	198.18.1.10:9131 198.18.1.10:9132 198.18.1.10:9133 198.18.1.10:9134

# squid as Debian ships it, one process (-N), CONNECT from the bare
# namespace to its two ports only, no cache, no logs per request, DNS (unused:
# the targets are addresses) the world's own.
SQ=$W_DIR/squid
mkdir -p "$SQ"
chown proxy:proxy "$SQ"
cat >"$SQ/squid.conf" <<EOF
http_port 10.214.0.1:3128
visible_hostname bench
pid_filename $SQ/squid.pid
cache_log $SQ/cache.log
access_log none
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir $SQ
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
dns_nameservers $DNS_UPSTREAM
shutdown_lifetime 0 seconds
max_filedescriptors 8192
acl bench src 10.214.0.0/30
acl bench_ports port 9123 9133 5023
acl CONNECT method CONNECT
http_access allow bench CONNECT bench_ports
http_access deny all
EOF
in_host squid -N -f "$SQ/squid.conf" >"$SQ/out" 2>&1 &
W_PIDS+=($!)

# tinyproxy the same: CONNECT from the bare namespace to its two ports.
TP=$W_DIR/tinyproxy
mkdir -p "$TP"
chown nobody:nogroup "$TP"
cat >"$TP/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port 8888
Listen 10.214.0.1
Timeout 60
LogFile "$TP/tinyproxy.log"
LogLevel Critical
PidFile "$TP/tinyproxy.pid"
MaxClients 256
Allow 10.214.0.0/30
ConnectPort 9124
ConnectPort 9134
ConnectPort 5024
DisableViaHeader Yes
EOF
in_host tinyproxy -d -c "$TP/tinyproxy.conf" >"$TP/out" 2>&1 &
W_PIDS+=($!)

sess() {
	errand_run --pin a.test=198.18.1.10 --egress a.test:9122 --egress a.test:9132 --egress a.test:5022 \
		-- "${SESSION_PROBE[@]}" "$@"
	cat "$RUN_OUT"
}
squid_() { in_bare "$CONNECTC" "$1" 10.214.0.1 3128 198.18.1.10 "$2" "$3" ${4:+"$4"}; }
tiny() { in_bare "$CONNECTC" "$1" 10.214.0.1 8888 198.18.1.10 "$2" "$3" ${4:+"$4"}; }

# Both proxies answer a tunnel before the rounds start.
for n in $(seq 100); do
	squid_ rr 9123 1 >/dev/null 2>&1 && tiny rr 9124 1 >/dev/null 2>&1 && break
	[ "$n" = 100 ] && {
		echo "bench/proxy.sh: a proxy does not tunnel:" >&2
		squid_ rr 9123 1 >&2; tiny rr 9124 1 >&2
		tail -n5 "$SQ/out" "$SQ/cache.log" "$TP/out" >&2 2>/dev/null
		exit 1
	}
	sleep 0.1
done

ARMS="bare sess squid tiny"
for a in $ARMS; do : >"$W_DIR/rr.$a"; : >"$W_DIR/rrp.$a"; : >"$W_DIR/bulk.$a"; done
one() {
	case $1 in
	bare) bare rr 198.18.1.10 9121 "$CONNS" | rate >>"$W_DIR/rr.bare"
		sleep 1; bare rr 198.18.1.10 9131 "$PCONNS" --parallel "$PARALLEL" | rate >>"$W_DIR/rrp.bare"
		sleep 1; bare bulk 198.18.1.10 5021 "$BYTES" | mbit >>"$W_DIR/bulk.bare" ;;
	sess) sess rr 198.18.1.10 9122 "$CONNS" | rate >>"$W_DIR/rr.sess"
		sleep 1; sess rr 198.18.1.10 9132 "$PCONNS" --parallel "$PARALLEL" | rate >>"$W_DIR/rrp.sess"
		sleep 1; sess bulk 198.18.1.10 5022 "$BYTES" | mbit >>"$W_DIR/bulk.sess" ;;
	squid) squid_ rr 9123 "$CONNS" | rate >>"$W_DIR/rr.squid"
		sleep 1; squid_ rr 9133 "$PCONNS" "$PARALLEL" | rate >>"$W_DIR/rrp.squid"
		sleep 1; squid_ bulk 5023 "$BYTES" | tee "$W_DIR/last.squid" | mbit >>"$W_DIR/bulk.squid" ;;
	tiny) tiny rr 9124 "$CONNS" | rate >>"$W_DIR/rr.tiny"
		sleep 1; tiny rr 9134 "$PCONNS" "$PARALLEL" | rate >>"$W_DIR/rrp.tiny"
		sleep 1; tiny bulk 5024 "$BYTES" | tee "$W_DIR/last.tiny" | mbit >>"$W_DIR/bulk.tiny" ;;
	esac
}
# The arms take turns going first (the order rotates each round), each after
# a pause (bench/egress.sh says why).
# shellcheck disable=SC2086 # the arms, one word each
set -- $ARMS
for r in $(seq "$ROUNDS"); do
	for a in "$@"; do
		sleep 1
		one "$a"
	done
	set -- "${@:2}" "$1"
	echo "# round $r of $ROUNDS done" >&2
done

echo "proxy benchmark: $(uname -r), $(nproc) cores, median of $ROUNDS rounds of $CONNS connections" \
	"(one client), $PCONNS ($PARALLEL clients at once) and $BYTES bytes"
echo "squid $(squid -v | sed -n 's/.*Version \([^ ]*\).*/\1/p' | head -n1), tinyproxy $(tinyproxy -v 2>&1 | awk '{ print $2 }');" \
	"connect rates, one client: $(tr '\n' ' ' <"$W_DIR/rr.sess")(errand) $(tr '\n' ' ' <"$W_DIR/rr.squid")(squid);" \
	"$PARALLEL at once: $(tr '\n' ' ' <"$W_DIR/rrp.sess")(errand) $(tr '\n' ' ' <"$W_DIR/rrp.squid")(squid)"
printf '%-34s %10s %10s %10s %10s %8s %8s %8s\n' "" unconfined errand squid tinyproxy "/unconf" "/squid" "/tiny"
for m in rr rrp bulk; do
	b=$(median <"$W_DIR/$m.bare"); e=$(median <"$W_DIR/$m.sess")
	s=$(median <"$W_DIR/$m.squid"); t=$(median <"$W_DIR/$m.tiny")
	case $m in
	rr) what="connect rate (conn/s)" ;;
	rrp) what="connect rate, $PARALLEL at once (conn/s)" ;;
	bulk) what="bulk TCP (Mbit/s)" ;;
	esac
	printf '%-34s %10s %10s %10s %10s %8s %8s %8s\n' "$what" "$b" "$e" "$s" "$t" \
		"$(ratio "$e" "$b")" "$(ratio "$e" "$s")" "$(ratio "$e" "$t")"
done
echo "last bulk through squid: $(cat "$W_DIR/last.squid"); through tinyproxy: $(cat "$W_DIR/last.tiny")"
echo "target: errand at 3x squid or better"
