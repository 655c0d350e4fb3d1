# Shared by the secrets selftests (sourced, not run): a world with a TLS echo
# server (build/selftests/provider serve) in $W-wan on $SEC_ADDR:443 for
# sec.test, sec2.test and plain.test, under a test CA of this run that
# tls.trustedCa names; a secret store in $STORE with $VALUE_A (file a) and
# $VALUE_B (file b), root's 0600; and $PROJ, an empty project directory.
#
#   secrets_world                 all of the above, DNS included
#   secrets_config NAME [TOP_EXTRA] [EGRESS_EXTRA]
#                                 a DNS world config with paths.secrets and
#                                 tls.trustedCa set; prints its path
#   echo_log                      what the echo server received
# shellcheck shell=bash

# shellcheck source=selftests/lib/world.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/world.sh"
# shellcheck source=selftests/lib/tls.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/tls.sh"

SEC_ADDR=198.18.1.30
STORE=
PROJ=
VALUE_A=
VALUE_B=

secrets_world() {
	[ -x "$ROOT/build/bin/errand-broker" ] || skip "build/bin/errand-broker is not built (make all)"
	getent passwd errand-broker >/dev/null || skip "no account errand-broker (make accounts)"
	tls_need
	world_up
	world_dns "sec.test A $SEC_ADDR" "sec2.test A $SEC_ADDR" "plain.test A $SEC_ADDR" \
		"w.sec.test A $SEC_ADDR" "priv.test A $HOST_PRIV" || exit 1
	ip -n "$W-wan" addr add "$SEC_ADDR/32" dev "$W_HOSTS_IF"
	tls_certs secrets sec.test sec2.test plain.test w.sec.test
	tls_serve "$W_DIR/echo.out" "$W_DIR/echo.log" "$SEC_ADDR:443" || exit 1
	STORE=$W_DIR/secrets
	mkdir -p "$STORE"
	chmod 0700 "$STORE"
	# values with bytes a URL must encode: the request line carries them encoded
	VALUE_A="va/$(od -An -tx1 -N10 /dev/urandom | tr -d ' \n')+A"
	VALUE_B="vb-$(od -An -tx1 -N10 /dev/urandom | tr -d ' \n')"
	printf '%s\n' "$VALUE_A" >"$STORE/a"
	printf '%s\n' "$VALUE_B" >"$STORE/b"
	chmod 0600 "$STORE/a" "$STORE/b"
	PROJ=$W_DIR/proj
	mkdir -p "$PROJ"
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
