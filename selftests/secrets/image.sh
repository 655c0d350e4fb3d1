#!/bin/bash
# Guarantee: with --image, a session with a secret finds the roots it trusts at /run/errand/ca-bundle.pem and in the image's own store (/etc/ssl/certs/ca-certificates.crt): the image's roots and the session's CA, never a host file an image's link points at; the image itself is not written.
# shellcheck disable=SC2016 # $TOK expands in the session's shell
. "$(dirname "$0")/common.sh"
need_errandctl
secrets_world

# A tiny image: the host's sh and its libraries, a resolv.conf to bind on,
# a store of its own and a /run (which a tmpfs of errand's covers).
IMG=$W_DIR/image
mkdir -p "$IMG/usr/bin" "$IMG/etc/ssl/certs" "$IMG/run"
ln -s usr/bin "$IMG/bin"
SH=$(readlink -f /bin/sh)
cp "$SH" "$IMG/usr/bin/sh"
for lib in $(ldd "$SH" 2>/dev/null | grep -o '/[^ ]*'); do
	mkdir -p "$IMG$(dirname "$lib")"
	cp "$(readlink -f "$lib")" "$IMG$lib"
done
echo "root:x:0:0:root:/state:/bin/sh" >"$IMG/etc/passwd"
: >"$IMG/etc/resolv.conf"
echo "IMAGE-ROOTS-MARKER" >"$IMG/etc/ssl/certs/ca-certificates.crt"
chmod -R a+rX "$IMG"
before=$(find "$IMG" -newer "$IMG/etc/passwd" | wc -l)
chmod 0777 "$PROJ"
W_CONFIG=$(secrets_config image)

dump='while IFS= read -r l; do echo "$1$l"; done <"$2"'
errand_run --project "$PROJ" --image "$IMG" --secret TOK=a@sec.test -- sh -c '
	d() { '"$dump"'; }
	echo "tok=$TOK"; echo "file=$SSL_CERT_FILE"
	d b= /run/errand/ca-bundle.pem
	d s= /etc/ssl/certs/ca-certificates.crt
	echo done=1'
assert_eq "$RUN_RC" 0 "a session with a secret and an image ran"
assert_match "$(result tok)" "^errand-secret-[0-9a-f]{64}\$" "it holds the placeholder"
assert_eq "$(result file)" /run/errand/ca-bundle.pem "SSL_CERT_FILE names the bundle"
bundle=$(sed -n 's/^b=//p' "$RUN_OUT")
store=$(sed -n 's/^s=//p' "$RUN_OUT")
assert_contains "$bundle" "IMAGE-ROOTS-MARKER" "the bundle holds the image's roots"
assert_contains "$bundle" "BEGIN CERTIFICATE" "and the session's CA"
assert_eq "$store" "$bundle" "the image's own store is the same bundle"
assert_not_contains "$bundle" "$(head -n 2 /etc/ssl/certs/ca-certificates.crt 2>/dev/null | tail -n 1)" "the host's roots are not in it"
assert_eq "$(find "$IMG" -newer "$IMG/etc/passwd" | wc -l)" "$before" "nothing was written into the image"

# An image whose store is a link to a host file: the link stays inside the image.
rm "$IMG/etc/ssl/certs/ca-certificates.crt"
ln -s /etc/shadow "$IMG/etc/ssl/certs/ca-certificates.crt"
errand_run --project "$PROJ" --image "$IMG" --secret TOK=a@sec.test -- sh -c '
	d() { '"$dump"'; }
	d b= /run/errand/ca-bundle.pem'
assert_eq "$RUN_RC" 0 "a session whose image's store links to /etc/shadow ran"
assert_no_match "$(sed -n 's/^b=//p' "$RUN_OUT")" "^root:" "the bundle holds nothing of the host's /etc/shadow"
assert_contains "$(sed -n 's/^b=//p' "$RUN_OUT")" "BEGIN CERTIFICATE" "only the session's CA"

world_finish
