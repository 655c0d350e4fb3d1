#!/bin/bash
# Guarantee: a path that could be read more than one way is answered 400 and never forwarded; a strict capability list answers 403 with the list for a call it does not name (method and raw path, * one segment, ** any, the query never), a warning list forwards it and logs the entry that would name it.
. "$(dirname "$0")/common.sh"

broker_world
S1=$("$PROVIDER" mint)
CAPS='"capabilities": [{"method": "POST", "path": "/echo"}, {"method": "GET", "path": "/models/*"}, {"method": "*", "path": "/files/**"}]'
CONFIG=$(broker_config paths "$(provider_json strict "$CAPS, \"strictCapabilities\": true"), $(provider_json warn "$CAPS"), $(provider_json all '"capabilities": "*", "strictCapabilities": true')")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "strict=$S1" "warn=$S1" "all=$S1")" ok "a session registers"
requests() { grep -c '^request ' "$W_DIR/provider.log"; }
c() { call $SESS_A "$1" "$2" -H "x-api-key: $S1"; }

assert_eq "$(c POST /providers/strict/echo)" 200 "strict: a named call is forwarded"
assert_eq "$(c POST '/providers/strict/echo?path=/models/x&m=GET')" 200 "strict: the query plays no part"
assert_eq "$(c GET /providers/strict/models/abc)" 200 "strict: * matches one segment"
assert_eq "$(c GET /providers/strict/files)" 200 "strict: ** matches none"
assert_eq "$(c DELETE /providers/strict/files/a/b/c)" 200 "strict: ** matches several, * any method"
n0=$(requests)
assert_eq "$(c GET /providers/strict/echo)" 403 "strict: another method is 403"
assert_contains "$(cat "$W_DIR/body")" "POST /echo" "strict: the 403 lists what is allowed"
assert_contains "$(cat "$W_DIR/body")" "GET /models/*" "strict: the 403 lists every entry"
assert_eq "$(c GET /providers/strict/models/a/b)" 403 "strict: * does not match two segments"
assert_eq "$(c GET /providers/strict/models/)" 403 "strict: * does not match an empty segment"
assert_eq "$(c GET /providers/strict/model%73/abc)" 403 "strict: the path is matched raw, before decoding"
assert_eq "$(requests)" "$n0" "strict: no refused call reached the provider"

assert_eq "$(c GET /providers/warn/other)" 200 "warn: a call the list does not name is forwarded"
assert_match "$(cat "$BROKER_LOG")" 'provider=warn: not in capabilities, forwarded.*\{"method": "GET", "path": "/other"\}' \
	"warn: the log names the entry that would allow it"
assert_eq "$(c PATCH /providers/all/anything/at/all)" 200 'capabilities "*" allows every call'

n0=$(requests)
bad=
for p in '/a//b' '/a/./b' '/a/../b' '/a/.' '/..' '/a/%2e%2e/b' '/a/%2E/b' '/a/.%2e/b' '/a/%2fb' '/a/%2Fb' \
	'/a/%5cb' '/a;x=1/b' '/a/b;c' '/a/%3bb' '/a/%00b' '/a/%zz' '//b'; do
	st=$(c GET "/providers/all$p")
	[ "$st" = 400 ] || bad+=" $p=$st"
done
assert_empty "$bad" "every ambiguous path is 400"
assert_eq "$(requests)" "$n0" "no ambiguous path reached the provider"
assert_eq "$(c GET '/providers/all/a/b/?x=/../y')" 200 "a trailing / and a query holding .. are forwarded"
assert_contains "$(tail -n 8 "$W_DIR/provider.log")" "request GET /v1/a/b/?x=/../y" "the path and query go on as sent"
world_finish
