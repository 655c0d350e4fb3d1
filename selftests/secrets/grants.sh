#!/bin/bash
# Guarantee: a session granted the whole host (`Read(/**)`) still gets its CA bundle at /run/errand/ca-bundle.pem and reaches a secret's host through its broker, while the host's /run/errand and errand's run directory stay empty to it.
# shellcheck disable=SC2016 # $TOK_A expands in the session's shell
. "$(dirname "$0")/common.sh"
need_errandctl
secrets_world
W_CONFIG=$(secrets_config grants)
sed -i 's|"requireFullEnforcement": false,|"requireFullEnforcement": false, "rules": { "allow": ["Read(/**)"] },|' "$W_CONFIG"
grep -q 'Read(/\*\*)' "$W_CONFIG" || { echo "not ok - the config has no Read(/**) rule"; exit 1; }
# The launcher makes /run/errand on the host for the bundle's mount point
# where a grant shows the host's /run; one this test made goes with it.
made_run=
[ -e /run/errand ] || made_run=1
grants_down() {
	local rc=$?
	[ -n "$made_run" ] && rmdir /run/errand 2>/dev/null
	(exit $rc)
	world_down
}
trap grants_down EXIT

errand_run --project "$PROJ" --secret TOK_A=a@sec.test -- sh -c '
	echo "bundle=$(grep -c "BEGIN CERTIFICATE" /run/errand/ca-bundle.pem)"
	echo "runerrand=$(ls -A /run/errand | tr "\n" " ")"
	echo "code=$(curl -sS --max-time 20 -o /dev/null -w "%{http_code}" -H "X-T: $TOK_A" https://sec.test/echo)"
	echo "run=$(ls -A /run/'"$W"' | wc -l)"
'
assert_eq "$RUN_RC" 0 "a session with Read(/**) and a secret starts"
assert_match "$(result bundle)" '^[1-9][0-9]*$' "... its CA bundle is at /run/errand/ca-bundle.pem"
assert_eq "$(result runerrand)" "ca-bundle.pem " "... alone in /run/errand"
assert_eq "$(result code)" 200 "... and it reaches the secret's host through its broker, trusting the bundle"
assert_contains "$(echo_log)" "header X-T: $VALUE_A" "... the value put on the wire"
assert_eq "$(result run)" 0 "errand's run directory (the broker's sockets in it) is empty to it"
world_finish
