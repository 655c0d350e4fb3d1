#!/bin/bash
# Benchmark, not a test: keep-alive calls a second through errand-broker
# against nginx (proxy_pass with proxy_set_header putting the key in) and
# mitmproxy in reverse mode with an addon doing the same, all three relaying
# plain HTTP from the agent namespace to one TLS provider in the wan namespace
# (build/selftests/provider, verified against the run's own CA). wrk drives
# each for SECONDS with CONNS connections; the median of ROUNDS is reported.
# Targets: errand-broker at 0.8x nginx or better, and 15x mitmproxy or better.
set -u
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=selftests/broker/common.sh
. "$ROOT/selftests/broker/common.sh"
# shellcheck source=bench/peers.sh
. "$ROOT/bench/peers.sh"

ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-10}
CONNS=${CONNS:-16}

peers_install || exit 1

broker_world >/dev/null
S=$("$PROVIDER" mint)
CONFIG=$(broker_config bench "$(provider_json prov)")
broker_start "$CONFIG" || exit 1
# wrk cannot choose its source address: from the host namespace it calls
# from the broker's own address, so that is the benchmark session's.
[ "$(broker_register bench $BROKER_ADDR "prov=$S")" = ok ] || { echo "cannot register" >&2; exit 1; }

# nginx: the same route, the key set by proxy_set_header, upstream verified
nginx_up nginx "$(cat <<EOF2
	upstream provider { server $PROV_ADDR:$PROV_PORT; keepalive 64; }
	server {
		listen $BROKER_ADDR:8081;
		location /providers/prov/ {
			proxy_pass https://provider/v1/;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host provider.test:$PROV_PORT;
			proxy_set_header x-api-key "$KEY";
			proxy_set_header Accept-Encoding identity;
			proxy_ssl_server_name on;
			proxy_ssl_name provider.test;
			proxy_ssl_verify on;
			proxy_ssl_trusted_certificate $W_DIR/tls/ca.crt;
			proxy_ssl_session_reuse on;
		}
	}
EOF2
)"

# mitmproxy: reverse mode, an addon rewriting the path and setting the key
# (read once, as nginx's config holds it)
cat >"$W_DIR/mitm_addon.py" <<EOF2
KEY = open("$KEY_FILE").read().strip()

class Inject:
    def request(self, flow):
        p = flow.request.path
        if p.startswith("/providers/prov"):
            flow.request.path = "/v1" + p[len("/providers/prov"):]
        flow.request.headers["x-api-key"] = KEY
        flow.request.headers["Accept-Encoding"] = "identity"

addons = [Inject()]
EOF2
mitm_up mitm provider.test "$PROV_ADDR" --mode "reverse:https://provider.test:$PROV_PORT/" \
	--listen-host "$BROKER_ADDR" --listen-port 8082 --set ssl_verify_upstream_trusted_ca="$W_DIR/tls/ca.crt" \
	--set keep_host_header=false -s "$W_DIR/mitm_addon.py"

for port in $BROKER_PORT 8081 8082; do
	wait_ok in_host curl -s -o /dev/null "http://$BROKER_ADDR:$port/providers/prov/echo" -H "x-api-key: $S" || exit 1
done
for port in $BROKER_PORT 8081 8082; do
	st=$(in_host curl -s -o "$W_DIR/check" -w '%{http_code}' "http://$BROKER_ADDR:$port/providers/prov/echo" -H "x-api-key: $S")
	grep -q "x-api-key: \(\[redacted\]\|$KEY\)" "$W_DIR/check" && [ "$st" = 200 ] ||
		{ echo "bench: port $port does not relay with the key (status $st)" >&2; exit 1; }
done

rps() {
	in_host wrk -t 2 -c "$CONNS" -d "${SECONDS_EACH}s" -H "x-api-key: $S" \
		"http://$BROKER_ADDR:$1/providers/prov/echo" | wrk_rate
}
: >"$W_DIR/rps.broker"; : >"$W_DIR/rps.nginx"; : >"$W_DIR/rps.mitm"
# The arms take turns going first, the order rotating each round.
set -- "$BROKER_PORT broker" "8081 nginx" "8082 mitm"
for r in $(seq "$ROUNDS"); do
	for arm in "$@"; do
		rps "${arm% *}" >>"$W_DIR/rps.${arm#* }"
	done
	set -- "${@:2}" "$1"
	echo "# round $r of $ROUNDS done" >&2
done
b=$(median <"$W_DIR/rps.broker"); n=$(median <"$W_DIR/rps.nginx"); m=$(median <"$W_DIR/rps.mitm")
echo "broker benchmark: $(uname -r), $(nproc) cores, $CONNS keep-alive connections, median of $ROUNDS rounds of ${SECONDS_EACH} s"
printf '%-32s %12s\n' "" "calls/s"
printf '%-32s %12s\n' "errand-broker" "$b"
printf '%-32s %12s   errand-broker/nginx %s (target 0.8)\n' "nginx proxy_pass" "$n" "$(awk -v a="$b" -v b="$n" 'BEGIN { printf "%.2f", a / b }')"
printf '%-32s %12s   errand-broker/mitmproxy %s (target 15)\n' "mitmproxy reverse + addon" "$m" "$(awk -v a="$b" -v b="$m" 'BEGIN { printf "%.2f", a / b }')"
