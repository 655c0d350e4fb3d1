#!/bin/bash
# Guarantee: every refusal yields exactly one event naming the session, protocol, address, port, reason and hook; --json gives the same as one JSON object per line.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

script="echo \"sid=\$ERRAND_SESSION\"; $(probe_script \
	priv "tcp $HOST_PRIV 443" \
	udp "udp $HOST_A 9999" \
	b "tcp $HOST_B 443" \
	a "tcp $HOST_A 443")"

errand_run --pin a.test=$HOST_A:443 --egress a.test -- sh -c "$script"
sid=$(result sid)
assert_match "$sid" '^[0-9a-f]{8}$' "the session knows its id"
assert_eq "$(result a)" "ok hello $HOST_A:443" "the allowed connect works (control)"
assert_eq "$(result priv)$(result udp)$(result b)" EPERMEPERMEPERM "the three refused calls saw EPERM"
assert_eq "$(event_count "addr=$HOST_PRIV ")" 1 "one event for the connect to $HOST_PRIV"
assert_eq "$(events "addr=$HOST_PRIV ")" \
	"errand: session=$sid refused proto=tcp addr=$HOST_PRIV port=443 reason=forbidden hook=connect4" \
	"... in the documented form"
assert_eq "$(event_count "addr=$HOST_A port=9999 ")" 1 "one event for the UDP send to $HOST_A:9999"
assert_eq "$(events "addr=$HOST_A port=9999 ")" \
	"errand: session=$sid refused proto=udp addr=$HOST_A port=9999 reason=udp hook=sendmsg4" \
	"... in the documented form"
assert_eq "$(event_count "addr=$HOST_B ")" 1 "one event for the connect to $HOST_B"
assert_eq "$(events "addr=$HOST_B ")" \
	"errand: session=$sid refused proto=tcp addr=$HOST_B port=443 reason=not-allowed hook=connect4" \
	"... in the documented form"
assert_eq "$(event_count .)" 3 "three refusals, three events, nothing else"

errand_run --pin a.test=$HOST_A:443 --egress a.test -- sh -c "$(probe_script uc "udp-connect $HOST_A 443")"
assert_eq "$(result uc)" EPERM "a connected UDP socket to the pinned host's port 443 is refused at connect"
assert_eq "$(events "addr=$HOST_A port=443 ")" \
	"errand: session=$(sed -n 's/.*session=\([0-9a-f]*\).*/\1/p' "$RUN_ERR" | head -n 1) refused proto=udp addr=$HOST_A port=443 reason=udp hook=connect4" \
	"... one event, reason udp, from connect4"
assert_match "$RUN_STDERR" "weakened.*198\.18\.0\.0/15" "treatAsPublic is reported as a weakened guarantee"
assert_eq "$(grep -c weakened "$RUN_ERR")" 1 "... in one line"

errand_run --json --pin a.test=$HOST_A:443 --egress a.test -- sh -c "$script"
sid=$(result sid)
json=$(grep '^{' "$RUN_ERR" | grep '"refused"')
assert_eq "$(grep -c . <<<"$json")" 3 "--json: three refusal events"
assert_empty "$(grep 'errand: session=.* refused ' "$RUN_ERR")" "--json: no text event lines"
if command -v python3 >/dev/null; then
	parsed=$(python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    print(" ".join("%s=%s" % (k, e.get(k)) for k in ("event", "session", "proto", "addr", "port", "reason", "hook")))
' <<<"$json" 2>&1)
	assert_eq "$(sort <<<"$parsed")" "$(sort <<EOX
event=refused session=$sid proto=tcp addr=$HOST_PRIV port=443 reason=forbidden hook=connect4
event=refused session=$sid proto=udp addr=$HOST_A port=9999 reason=udp hook=sendmsg4
event=refused session=$sid proto=tcp addr=$HOST_B port=443 reason=not-allowed hook=connect4
EOX
)" "--json: each line parses as JSON with the documented fields"
else
	for r in forbidden udp not-allowed; do
		assert_match "$json" "\"reason\": *\"$r\"" "--json: an event with reason $r"
	done
fi

world_finish
