#!/bin/bash
# Guarantee: a provider route that would be left open or call out in the clear is refused at load: a misspelt placement, capabilities or strictCapabilities (a letter or two off, another case, or a prefix like place, strict, capab), an empty capability list, strictCapabilities without a list, plain http but to a loopback literal with allowInternal; and each session gets its stand-in and base URL under the variables its provider's kind names.
. "$(dirname "$0")/common.sh"

[ -x "$PROVIDER" ] || skip "build/selftests/provider is not built (make all)"
mkdir -p "$W_DIR"
trap 'rm -rf "$W_DIR"' EXIT
KEY_FILE=/etc/errand/test.key
S=$("$PROVIDER" mint)

# load NAME PROVIDER_MEMBERS [EGRESS_EXTRA]: prints what provider env printed
load() {
	local f=$W_DIR/$1.json egress=${3:-}
	[ -n "$egress" ] && egress="\"sandbox\": { \"egress\": { $egress } },"
	cat >"$f" <<EOC
{ $egress "agent": { "providers": { $2 } } }
EOC
	"$PROVIDER" env "$f" 10.213.0.1 4780 "p=$S" 2>&1
}
base='"baseUrl": "https://api.example.com/v1", "credentialFile": "/etc/errand/p.key"'

for k in Placement placment placemnt PLACEMENT place placer capabilites Capabilities capability capab capabs \
	strictcapabilities strictCapabilites strict strictness; do
	out=$(load miss "\"p\": { $base, \"placement\": \"bearer\", \"$k\": true }")
	assert_match "$out" "unknown key agent\.providers\.p\.$k; did you mean agent\.providers\.p\.(placement|capabilities|strictCapabilities)\?" \
		"the misspelt key $k is refused at load"
done
for k in platform capacity notes; do
	out=$(load own "\"p\": { $base, \"placement\": \"bearer\", \"$k\": 1 }")
	assert_contains "$out" "P_API_KEY=$S" "the operator's own key $k is ignored"
done

assert_match "$(load empty "\"p\": { $base, \"placement\": \"bearer\", \"capabilities\": [] }")" \
	"capabilities is empty" "an empty capability list is refused"
assert_match "$(load strict "\"p\": { $base, \"placement\": \"bearer\", \"strictCapabilities\": true }")" \
	"strictCapabilities is true without a capabilities list" "strictCapabilities without a list is refused"
assert_match "$(load noplace "\"p\": { $base }")" "no placement" "a route with neither placement nor kind is refused"
assert_match "$(load badplace "\"p\": { $base, \"placement\": \"header\" }")" "not a placement" "an unknown placement is refused"
assert_match "$(load badcap "\"p\": { $base, \"placement\": \"bearer\", \"capabilities\": [{\"method\": \"post\", \"path\": \"/x\"}] }")" \
	"not a method" "a lower-case method is refused"
assert_match "$(load capkey "\"p\": { $base, \"placement\": \"bearer\", \"capabilities\": [{\"method\": \"POST\", \"pth\": \"/x\"}] }")" \
	"did you mean .*path" "a misspelt key in a capability is refused"
http='"credentialFile": "/etc/errand/p.key", "placement": "bearer"'
assert_match "$(load http "\"p\": { \"baseUrl\": \"http://api.example.com\", $http }")" "plain http" "plain http to a name is refused"
assert_match "$(load http2 "\"p\": { \"baseUrl\": \"http://127.0.0.1:8080\", $http }")" "plain http" \
	"plain http to loopback without allowInternal is refused"
assert_match "$(load http3 "\"p\": { \"baseUrl\": \"http://10.0.0.1:8080\", $http }" '"allowInternal": true')" "plain http" \
	"plain http to a private address is refused even with allowInternal"
assert_contains "$(load http4 "\"p\": { \"baseUrl\": \"http://127.0.0.1:8080\", $http }" '"allowInternal": true')" "P_BASE_URL=" \
	"plain http to a loopback literal with allowInternal is taken"
assert_match "$(load query "\"p\": { \"baseUrl\": \"https://api.example.com/v1?key=x\", $http }")" "query" "a base URL with a query is refused"
assert_match "$(load user "\"p\": { \"baseUrl\": \"https://u:p@api.example.com/\", $http }")" "no plain host" "a base URL with userinfo is refused"

out=$(load kinds "\"p\": { $base, \"kind\": \"anthropic\" }")
assert_eq "$out" "ANTHROPIC_API_KEY=$S
ANTHROPIC_BASE_URL=http://10.213.0.1:4780/providers/p" "kind anthropic: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL"
out=$(load kinds2 "\"p\": { $base, \"kind\": \"openai\" }")
assert_eq "$out" "OPENAI_API_KEY=$S
OPENAI_BASE_URL=http://10.213.0.1:4780/providers/p" "kind openai: OPENAI_API_KEY and OPENAI_BASE_URL"
out=$(load other "\"p\": { $base, \"placement\": \"bearer\", \"kind\": \"groq\" }")
assert_eq "$out" "P_API_KEY=$S
P_BASE_URL=http://10.213.0.1:4780/providers/p" "another kind: NAME_API_KEY and NAME_BASE_URL"
assert_eq "$("$PROVIDER" env "$W_DIR/other.json" 10.213.0.1 4780)" ENOENT "a provider without a stand-in gets no environment"
assert_match "$S" '^errand-session-[0-9a-f]{64}$' "a stand-in is errand-session- and 64 hex digits"
assert_ne "$S" "$("$PROVIDER" mint)" "each stand-in is fresh"
world_finish
