#!/bin/bash
# Benchmark, not a test: HTTPS calls a second with keep-alive, each carrying
# a secret's placeholder in a header that must reach the host as the value,
# through three relays on the same world path (a namespace wired like a
# session's -> veth -> agent namespace, where the relay is -> wan, to the
# TLS echo server of selftests/secrets for sec.test, verified against the
# run's CA):
#   errand     wrk in a session with --secret TOK=a@sec.test, calling
#              https://sec.test/echo: the connects go to the session broker's
#              intercept listener in the kernel, which terminates TLS with the
#              session's CA, swaps the placeholder for the value, and scrubs
#              the value from the answer
#   nginx      a TLS-terminating proxy_pass setting the header to the value
#   mitmproxy  reverse mode, TLS both ways, an addon swapping the placeholder
#              in the header for the value (cowboy's design)
# the last two driven by wrk in the bare namespace. Targets: errand at 0.8x
# nginx or better and 20x mitmproxy or better. ROUNDS, SECONDS_EACH and
# CONNS tune it; the median of the rounds is reported.
# shellcheck disable=SC2016 # $TOK expands in the session's shell
set -u
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=selftests/secrets/common.sh
. "$ROOT/selftests/secrets/common.sh"
# shellcheck source=bench/peers.sh
. "$ROOT/bench/peers.sh"

ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-10}
CONNS=${CONNS:-16}
W_RUN_TIMEOUT=$((SECONDS_EACH + 60))
PROXY=10.214.0.1

peers_install || exit 1
need_errandctl
secrets_world >/dev/null
bare_up
W_CONFIG=$(secrets_config bench)

# A placeholder (each session has its own) for the other arms' client to send.
errand_run --secret TOK=a@sec.test -- sh -c 'echo "ph=$TOK"' >/dev/null
PH=$(result ph)
[ -n "$PH" ] || { echo "bench/intercept.sh: no placeholder from a session: $RUN_STDERR" >&2; exit 1; }

nginx_up nginx "$(cat <<EOF
	upstream sec { server $SEC_ADDR:443; keepalive 64; keepalive_requests 1000000; }
	server {
		listen $PROXY:8443 ssl;
		ssl_certificate $W_DIR/tls/server.crt;
		ssl_certificate_key $W_DIR/tls/server.key;
		keepalive_requests 1000000;
		location / {
			proxy_pass https://sec;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host sec.test;
			proxy_set_header x-api-key "$VALUE_A";
			proxy_ssl_server_name on;
			proxy_ssl_name sec.test;
			proxy_ssl_verify on;
			proxy_ssl_trusted_certificate $W_DIR/tls/ca.crt;
			proxy_ssl_session_reuse on;
		}
	}
EOF
)"

cat >"$W_DIR/mitm_swap.py" <<EOF
PH = "$PH"
VALUE = open("$STORE/a").read().rstrip("\n")

class Swap:
    def request(self, flow):
        v = flow.request.headers.get("x-api-key")
        if v:
            flow.request.headers["x-api-key"] = v.replace(PH, VALUE)

addons = [Swap()]
EOF
mitm_up mitm sec.test "$SEC_ADDR" --mode reverse:https://sec.test:443/ --listen-host "$PROXY" \
	--listen-port 8444 --set ssl_verify_upstream_trusted_ca="$W_DIR/tls/ca.crt" \
	--set keep_host_header=false -s "$W_DIR/mitm_swap.py"

# Every arm puts the value on the wire before the rounds start: one call
# each, the echo server's log read after it.
check() {
	: >"$W_DIR/echo.log"
	"$@" >"$W_DIR/check.out" 2>&1
	grep -qi "^header x-api-key: $VALUE_A\$" "$W_DIR/echo.log" ||
		{ echo "bench/intercept.sh: $2 did not put the value on the wire:" >&2; cat "$W_DIR/check.out" >&2; exit 1; }
}
call='echo "ph=$TOK"; curl -sS --max-time 10 -H "x-api-key: $TOK" https://sec.test/echo'
check errand_run --secret TOK=a@sec.test -- sh -c "$call"
grep -q "x-api-key: $(result ph)" "$RUN_OUT" && ! grep -q -- "$VALUE_A" "$RUN_OUT" ||
	{ echo "bench/intercept.sh: the session's echo is not scrubbed to the placeholder:" >&2; cat "$RUN_OUT" "$RUN_ERR" >&2; exit 1; }
wait_ok in_bare curl -sk "https://$PROXY:8443/echo" || exit 1
check in_bare curl -sSk -H "x-api-key: $PH" "https://$PROXY:8443/echo"
wait_ok in_bare curl -sk "https://$PROXY:8444/echo" || exit 1
check in_bare curl -sSk -H "x-api-key: $PH" "https://$PROXY:8444/echo"

# The echo server logs every call: emptied after each run, so the log stays
# small (a write a call, the same for every arm).
run() {
	case $1 in
	errand)
		errand_run --secret TOK=a@sec.test -- sh -c \
			"exec wrk -t 2 -c $CONNS -d ${SECONDS_EACH}s -H \"x-api-key: \$TOK\" https://sec.test/echo" >/dev/null
		wrk_rate <"$RUN_OUT" ;;
	nginx) in_bare wrk -t 2 -c "$CONNS" -d "${SECONDS_EACH}s" -H "x-api-key: $PH" "https://$PROXY:8443/echo" | wrk_rate ;;
	mitm) in_bare wrk -t 2 -c "$CONNS" -d "${SECONDS_EACH}s" -H "x-api-key: $PH" "https://$PROXY:8444/echo" | wrk_rate ;;
	esac
	: >"$W_DIR/echo.log"
}
# The arms take turns going first, the order rotating each round.
set -- errand nginx mitm
for a in "$@"; do : >"$W_DIR/rps.$a"; done
for r in $(seq "$ROUNDS"); do
	for a in "$@"; do
		sleep 1
		run "$a" >>"$W_DIR/rps.$a"
	done
	set -- "${@:2}" "$1"
	echo "# round $r of $ROUNDS done" >&2
done

e=$(median <"$W_DIR/rps.errand"); n=$(median <"$W_DIR/rps.nginx"); m=$(median <"$W_DIR/rps.mitm")
echo "intercept benchmark: $(uname -r), $(nproc) cores, $CONNS keep-alive HTTPS connections, median of $ROUNDS rounds of ${SECONDS_EACH} s"
echo "every round (calls/s): $(tr '\n' ' ' <"$W_DIR/rps.errand")(errand) $(tr '\n' ' ' <"$W_DIR/rps.nginx")(nginx) $(tr '\n' ' ' <"$W_DIR/rps.mitm")(mitmproxy)"
printf '%-40s %10s\n' "" "calls/s"
printf '%-40s %10s\n' "errand, secret host intercepted" "$e"
printf '%-40s %10s   errand/nginx %s (target 0.8)\n' "nginx, TLS-terminating proxy_pass" "$n" "$(ratio "$e" "$n")"
printf '%-40s %10s   errand/mitmproxy %s (target 20)\n' "mitmproxy reverse, header-swap addon" "$m" "$(ratio "$e" "$m")"
