# Shared by the secrets selftests (sourced, not run): a world with a TLS echo
# server (build/selftests/provider serve) in $W-wan on $SEC_ADDR:443 for
# sec.test, sec2.test and plain.test, under a test CA of this run that
# tls.trustedCa names; a secret store in $STORE with $VALUE_A (file a) and
# $VALUE_B (file b), root's 0600.
#
#   secrets_world                 all of the above, DNS included
#   secrets_config NAME [TOP_EXTRA] [EGRESS_EXTRA]
#                                 a DNS world config with paths.secrets and
#                                 tls.trustedCa set; prints its path
#   echo_log                      what the echo server received
# shellcheck shell=bash

# shellcheck source=selftests/lib/world.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/world.sh"

PROVIDER=$ROOT/build/selftests/provider
SEC_ADDR=198.18.1.30
STORE=
VALUE_A=
VALUE_B=

secrets_world() {
	[ -x "$PROVIDER" ] || skip "build/selftests/provider is not built (make all)"
	[ -x "$ROOT/build/bin/errand-broker" ] || skip "build/bin/errand-broker is not built (make all)"
	getent passwd errand-broker >/dev/null || skip "no account errand-broker (make accounts)"
	command -v curl >/dev/null || skip "curl is missing (make deps)"
	command -v openssl >/dev/null || skip "openssl is missing (make deps)"
	world_up
	world_dns "sec.test A $SEC_ADDR" "sec2.test A $SEC_ADDR" "plain.test A $SEC_ADDR" \
		"priv.test A $HOST_PRIV" || exit 1
	ip -n "$W-wan" addr add "$SEC_ADDR/32" dev "$W_HOSTS_IF"
	local d=$W_DIR/tls
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=errand test CA $W" -keyout "$d/ca.key" -out "$d/ca.crt" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
		2>/dev/null || { echo "secrets: cannot make the test CA" >&2; exit 1; }
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=sec.test" \
		-keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null &&
		printf 'subjectAltName=DNS:sec.test,DNS:sec2.test,DNS:plain.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$d/ext" &&
		openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
			-days 2 -extfile "$d/ext" -out "$d/server.crt" 2>/dev/null ||
		{ echo "secrets: cannot make the server certificate" >&2; exit 1; }
	chmod 0644 "$d/ca.crt"
	_start_ready wan "$W_DIR/echo.out" "$PROVIDER" serve --cert "$d/server.crt" \
		--key "$d/server.key" --log "$W_DIR/echo.log" "$SEC_ADDR:443" || exit 1
	STORE=$W_DIR/secrets
	mkdir -p "$STORE"
	chmod 0700 "$STORE"
	# values with bytes a URL must encode: the request line carries them encoded
	VALUE_A="va/$(od -An -tx1 -N10 /dev/urandom | tr -d ' \n')+A"
	VALUE_B="vb-$(od -An -tx1 -N10 /dev/urandom | tr -d ' \n')"
	printf '%s\n' "$VALUE_A" >"$STORE/a"
	printf '%s\n' "$VALUE_B" >"$STORE/b"
	chmod 0600 "$STORE/a" "$STORE/b"
}

secrets_config() {
	local f
	f=$(dns_config "$1" "" "" "${3:-}")
	sed -i "s|\"paths\": {|\"paths\": { \"secrets\": \"$STORE\",|" "$f"
	sed -i "s|^{\$|{ \"tls\": { \"trustedCa\": \"$W_DIR/tls/ca.crt\" },|" "$f"
	[ -n "${2:-}" ] && sed -i "s|^{ |{ $2, |" "$f"
	echo "$f"
}

echo_log() { cat "$W_DIR/echo.log" 2>/dev/null; }
