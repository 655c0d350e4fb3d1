# Shared by the broker selftests (sourced, not run): a world (selftests/lib/
# world.sh) with a TLS provider in $W-wan and errand-broker started by hand in
# $W-host, until the agent starts it. Sessions are faked: addresses on the
# host namespace's lo, registered with build/selftests/provider register;
# calls are made with curl bound to them. Every packet stays in the world.
#
#   broker_world [accept]         world, DNS (provider.test, forbidden.test,
#                                 untrusted.test), CA and server certificate,
#                                 the provider on $PROV_ADDR:$PROV_PORT, the
#                                 key in $KEY_FILE ($KEY, root's, 0600), session
#                                 addresses; with accept, the provider answers
#                                 401 to any key but $ACCEPT_FILE's
#   broker_config NAME PROVIDERS [EGRESS_EXTRA]
#                                 a world config whose agent.providers is
#                                 PROVIDERS (JSON object members); prints its path
#   provider_json NAME [EXTRA]    a provider member for provider.test with the
#                                 test CA, placement x-api-key, plus EXTRA
#   broker_start CONFIG           errand-broker on $BROKER_ADDR:$BROKER_PORT as
#                                 65534:65534, its log in $BROKER_LOG, and
#                                 provider keeper handing it the keys as the
#                                 agent does (root reads them)
#   broker_register ID ADDR [PROVIDER=STANDIN]...   prints ok or the errno name
#   broker_unregister ID
#   call SRC METHOD PATH [CURL_ARGS...]
#                                 one call from SRC; prints the status; the
#                                 answer's head in $W_DIR/head, body in $W_DIR/body
#   provider_log                  what the provider received ("request",
#                                 "header", "body", "end" lines)
#   receipts [SQL_WHERE]          rows of receipts.db, "|"-separated
# shellcheck shell=bash

# shellcheck source=selftests/lib/world.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/world.sh"
# shellcheck source=selftests/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/tls.sh"

BROKER=${BROKER:-$ROOT/build/bin/errand-broker}
PROV_ADDR=198.18.1.20
PROV_PORT=8443
BROKER_ADDR=10.213.0.1
BROKER_PORT=4780
SESS_A=10.213.0.2
SESS_B=10.213.0.6
SESS_C=10.213.0.10
BROKER_LOG=
BROKER_PID=
KEY=
KEY_FILE=
ACCEPT_FILE=

broker_world() {
	[ -x "$BROKER" ] || skip "build/bin/errand-broker is not built (make all)"
	tls_need
	command -v sqlite3 >/dev/null || skip "sqlite3 is missing (make deps)"
	world_up
	world_dns "provider.test A $PROV_ADDR" "forbidden.test A $HOST_PRIV" \
		"untrusted.test A $PROV_ADDR" "closed.test A 198.18.4.7" "blackhole.test A 198.18.9.9" || exit 1
	# a route that drops: a dial there meets silence, not a reset
	ip -n "$W-wan" route add blackhole 198.18.9.0/24
	ip -n "$W-wan" addr add "$PROV_ADDR/32" dev "$W_HOSTS_IF"
	local a
	for a in $BROKER_ADDR $SESS_A $SESS_B $SESS_C; do
		ip -n "$W-host" addr add "$a/32" dev lo
	done
	# provider.test alone: untrusted.test reaches the same server under a
	# name its certificate does not carry
	tls_certs broker provider.test
	mkdir -p "$W_DIR/keys"
	KEY=sk-test-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	KEY_FILE=$W_DIR/keys/provider.key
	# root's, 0600: the agent reads it, never the broker's account
	echo "$KEY" >"$KEY_FILE"
	chmod 0600 "$KEY_FILE"
	# broker_world accept: the provider takes only the key in $ACCEPT_FILE
	local accept=()
	if [ "${1:-}" = accept ]; then
		ACCEPT_FILE=$W_DIR/accepted
		echo "$KEY" >"$ACCEPT_FILE"
		accept=(--accept "$ACCEPT_FILE")
	fi
	tls_serve "$W_DIR/provider.out" "$W_DIR/provider.log" "$PROV_ADDR:$PROV_PORT" \
		"${accept[@]}" || exit 1
}

provider_json() {
	local name=$1 extra=${2:-}
	[ -n "$extra" ] && extra=", $extra"
	echo "\"$name\": { \"baseUrl\": \"https://provider.test:$PROV_PORT/v1\", \"credentialFile\": \"$KEY_FILE\", \"trustedCa\": \"$W_DIR/tls/ca.crt\", \"placement\": \"x-api-key\"$extra }"
}

broker_config() {
	world_config "$1" "" "${3:-}" "\"agent\": { \"providers\": { $2 } }"
}

broker_start() {
	BROKER_LOG=$W_DIR/broker$RANDOM.log
	_start_ready host "$BROKER_LOG" "$BROKER" --config "$1" --listen "$BROKER_ADDR:$BROKER_PORT" \
		--user 65534:65534 || return 1
	BROKER_PID=${W_PIDS[-1]}
	_start_ready host "$W_DIR/keeper$RANDOM.out" "$PROVIDER" keeper "/run/$W/broker.sock" "$1" || return 1
}

broker_stop() {
	[ -n "$BROKER_PID" ] || return 0
	kill -TERM "$BROKER_PID" 2>/dev/null
	wait "$BROKER_PID" 2>/dev/null
	BROKER_PID=
}

broker_register() {
	in_host "$PROVIDER" register "/run/$W/broker.sock" "$@"
}

broker_unregister() {
	in_host "$PROVIDER" unregister "/run/$W/broker.sock" "$@"
}

call() {
	local src=$1 method=$2 path=$3
	shift 3
	: >"$W_DIR/head"
	: >"$W_DIR/body"
	in_host curl -sS --path-as-is --max-time 30 --interface "$src" -X "$method" \
		-o "$W_DIR/body" -D "$W_DIR/head" -w '%{http_code}' \
		"http://$BROKER_ADDR:$BROKER_PORT$path" "$@" 2>"$W_DIR/curl.err"
}

provider_log() {
	cat "$W_DIR/provider.log"
}

receipts() {
	sqlite3 "$W_DIR/state/receipts.db" \
		"SELECT session, provider, credential_var, host, method, path, query_len, status, bytes_up, bytes_down, outcome, unrecorded FROM receipts ${1:-} ORDER BY started_at_us, id"
}
