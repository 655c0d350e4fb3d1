# Shared by the broker and secrets selftests (sourced after world.sh, not
# run): a CA of this run alone, a server certificate from it, and the test
# TLS server (build/selftests/provider serve) that presents it in $W-wan.
#
#   tls_need                      skips unless the provider tool, curl and
#                                 openssl are there
#   tls_certs WHO NAME...         $W_DIR/tls/ca.key, ca.crt (0644, what
#                                 tls.trustedCa names) and server.key,
#                                 server.crt for the NAMEs (the first its CN,
#                                 every one in its subjectAltName); WHO starts
#                                 the error line
#   tls_serve OUT LOG ADDR:PORT [ARGS...]
#                                 the server on ADDR:PORT with that
#                                 certificate, what it received in LOG (one
#                                 line a request line, header, body or end),
#                                 its output in OUT; ARGS go before ADDR:PORT
# shellcheck shell=bash

PROVIDER=$ROOT/build/selftests/provider

tls_need() {
	[ -x "$PROVIDER" ] || skip "build/selftests/provider is not built (make all)"
	command -v curl >/dev/null || skip "curl is missing (make deps)"
	command -v openssl >/dev/null || skip "openssl is missing (make deps)"
}

tls_certs() {
	local who=$1 d=$W_DIR/tls san
	shift
	san=$(printf 'DNS:%s,' "$@")
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=errand test CA $W" -keyout "$d/ca.key" -out "$d/ca.crt" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
		2>/dev/null || { echo "$who: cannot make the test CA" >&2; exit 1; }
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$1" \
		-keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null &&
		printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "${san%,}" >"$d/ext" &&
		openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
			-days 2 -extfile "$d/ext" -out "$d/server.crt" 2>/dev/null ||
		{ echo "$who: cannot make the server certificate" >&2; exit 1; }
	chmod 0644 "$d/ca.crt"
}

tls_serve() {
	local out=$1 log=$2 addr=$3
	shift 3
	_start_ready wan "$out" "$PROVIDER" serve --cert "$W_DIR/tls/server.crt" \
		--key "$W_DIR/tls/server.key" --log "$log" "$@" "$addr"
}
