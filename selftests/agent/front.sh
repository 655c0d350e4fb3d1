#!/bin/bash
# Guarantee: errandctl, the front, runs a plain errandctl run (the command, --config, --egress, --pin, --secret, --env, --json) through errand-agent by itself, its arguments, environment and exit status carried exactly; every other command line, a run under a configuration whose text is not the agent's, and a run the agent refuses as a request, it hands to errandctl-full unchanged, so each refusal is errandctl-full's own, word for word, exit 125, and nothing of the session is made; a refusal of the host's (not of the request) is said once, never asked again.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config front)
agent_start || exit 1

# The front alone, without errandctl-full beside it: whatever it hands over
# fails, by name, so what runs did not go through errandctl-full.
mkdir -p "$W_DIR/lone"
cp "$ROOT/build/bin/errandctl" "$W_DIR/lone/errandctl"
LONE=$W_DIR/lone/errandctl
full_missing="errandctl: cannot run $W_DIR/lone/errandctl-full; errandctl and errandctl-full are installed together: reinstall errand"

args=(x 'a"b' 'c\d' "$(printf 'e\tf')" "$(printf 'g\nh')" 'ü€' '' '{"j":1}')
ERRANDCTL=$LONE errand_run --env 'FRONT=one two' --env 'Q="\' --egress none -- \
	sh -c 'printf "%s|" "$@"; printf "\nfront=%s q=%s term=%s\n" "$FRONT" "$Q" "$TERM"; exit 3' \
	"${args[@]}"
assert_eq "$RUN_RC" 3 "the front alone runs a plain errandctl run through the agent, its exit status carried"
assert_eq "$(head -n 2 "$RUN_OUT")" "$(printf '%s|' "${args[@]:1}")" \
	"... each argument exactly (quotes, backslashes, tabs, newlines, UTF-8, empty)"
assert_eq "$(result front)" "one two q=\"\\ term=$TERM" "... and each --env, and the caller's TERM"
assert_not_contains "$RUN_STDERR" "errandctl-full" "... without errandctl-full"

for ctl in "$LONE" "$ROOT/build/bin/errandctl-full"; do
	in_host timeout 60 env -u TERM "$ctl" --config "$W_CONFIG" run --json --egress none -- \
		sh -c 'echo "term=${TERM-unset}"' </dev/null >"$W_DIR/global.out" 2>/dev/null
	echo "rc=$?" >>"$W_DIR/global.out"
	mv "$W_DIR/global.out" "$W_DIR/global.${ctl##*/}"
done
assert_eq "$(sed -n 's/^rc=//p' "$W_DIR/global.errandctl")" 0 "the front takes --config before run too, and --json"
assert_eq "$(cat "$W_DIR/global.errandctl")" "$(cat "$W_DIR/global.errandctl-full")" \
	"... and a caller without TERM gets what errandctl-full gives it"

# Handed over: other commands, options the front leaves to errandctl-full.
for cl in "version" "--verbose run -- true" "run --project $W_DIR -- true" "run --help" \
	"run --pin bad -- true" "run --env =x -- true" "run --egress= -- true" "run -- $(printf '\xff')"; do
	# shellcheck disable=SC2086 # each is a command line, split
	out=$(in_host "$LONE" --config "$W_CONFIG" $cl 2>&1 </dev/null)
	assert_eq "$?:$out" "125:$full_missing" "the front hands 'errandctl $cl' to errandctl-full"
done
# shellcheck disable=SC2086
out=$(in_host "$LONE" run --config "$W_CONFIG" -- 2>&1 </dev/null)
assert_eq "$?:$out" "125:$full_missing" "... and a run with no command"

# A configuration that is not the agent's text (one byte more): the agent
# refuses the front's request, and errandctl-full runs it as it always did.
cp "$W_CONFIG" "$W_DIR/other.json"
echo >>"$W_DIR/other.json"
out=$(in_host "$LONE" run --config "$W_DIR/other.json" --egress none -- true 2>&1 </dev/null)
assert_eq "$?:$out" "125:$full_missing" "a configuration whose text is not the agent's goes to errandctl-full"
out=$(in_host "$ERRANDCTL" run --config "$W_DIR/other.json" --egress none -- sh -c 'echo ran' 2>/dev/null </dev/null)
assert_eq "$?:$out" "0:ran" "... which runs it through the agent"

# Refused as a request: errandctl-full's words, exactly, and nothing made.
started() { grep -c '^errand-agent: session .* started' "$AGENT_LOG"; }
n_before=$(started)
for bad in "--egress bad_host!" "--pin 'api.example.com=1.2.3.4:99999'" "--env '1X=y'"; do
	# shellcheck disable=SC2086
	full=$(eval in_host "$ROOT/build/bin/errandctl-full" --config "$W_CONFIG" run $bad -- true 2>&1 </dev/null)
	full_rc=$?
	# shellcheck disable=SC2086
	front=$(eval in_host "$ERRANDCTL" --config "$W_CONFIG" run $bad -- true 2>&1 </dev/null)
	assert_eq "$?:$front" "$full_rc:$full" "run $bad: the front's refusal is errandctl-full's"
	assert_eq "$full_rc" 125 "... exit 125"
	# shellcheck disable=SC2086
	out=$(eval in_host "$LONE" --config "$W_CONFIG" run $bad -- true 2>&1 </dev/null)
	assert_eq "$out" "$full_missing" "... which the agent refused as a request, handing it over"
done
# Refused by the agent, not as a request (a secret whose value is not
# there): said as errandctl-full says it, by the front itself.
full=$(in_host "$ROOT/build/bin/errandctl-full" --config "$W_CONFIG" run --secret nope@example.com -- true 2>&1 </dev/null)
front=$(in_host "$LONE" --config "$W_CONFIG" run --secret nope@example.com -- true 2>&1 </dev/null)
assert_eq "$?:$front" "125:$full" "a refusal of the agent's not of the request: the front says errandctl-full's line itself"
assert_contains "$front" "secret nope:" "... naming the secret"
assert_eq "$(started)" "$n_before" "... and no session was started by any of the refused runs"
