#!/bin/bash
# Guarantee: a session's environment is built, never inherited: PATH (sandbox.pathExtra ahead of the system's), HOME (its state directory), TERM, LANG, USER, then sandbox.env; no signal ignored or blocked (a caller's ignored ones survive exec, the agent ignores SIGPIPE); nothing of the caller's environment; PATH, HOME and ERRAND_* are refused in sandbox.env at load, naming the key but never a value; sandbox.env's names, not values, are stated at start; no --env value is in the session launcher's command line.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
TOOLS=$W_DIR/toolchain/bin
mkdir -p "$PROJ" "$TOOLS"
chmod 0777 "$PROJ"
printf '#!/bin/sh\necho from-toolchain\n' >"$TOOLS/errt-tool"
chmod 0755 "$TOOLS/errt-tool"
W_CONFIG=$(world_config env "\"env\": { \"ERRT_CACHE\": \"/var/cache/errt\", \"LANG\": \"C\" },
	\"pathExtra\": [\"$TOOLS\"],
	\"policyExtra\": { \"read\": [\"$W_DIR/toolchain\"], \"execute\": [\"$TOOLS\"] }")

export ERRT_CALLER_SECRET=caller-value-$$
export LD_PRELOAD=/nonexistent/errt.so
saved_term=${TERM-}
export TERM=errt-term
errand_run --egress none --project "$PROJ" -- sh -c '
	echo "caller=${ERRT_CALLER_SECRET:-unset}"
	echo "preload=${LD_PRELOAD:-unset}"
	echo "path=$PATH"
	echo "home=$HOME"
	echo "cache=$ERRT_CACHE"
	echo "lang=$LANG"
	echo "user=$USER"
	echo "term=${TERM:-unset}"
	echo "tool=$(errt-tool)"
	echo "names=$(env | cut -d= -f1 | sort | tr "\n" " ")"
'
unset ERRT_CALLER_SECRET LD_PRELOAD
TERM=$saved_term
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result caller)" unset "a variable of the caller's environment is absent inside"
assert_eq "$(result preload)" unset "... LD_PRELOAD too"
assert_eq "$(result path)" "$TOOLS:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
	"PATH is sandbox.pathExtra ahead of the system's directories"
assert_eq "$(result tool)" from-toolchain "... so a program there is found by name"
assert_match "$(result home)" "^$W_DIR/state/sessions/[0-9a-f]{8}/" "HOME is the session's state directory"
assert_eq "$(result cache)" /var/cache/errt "a sandbox.env variable is set"
assert_eq "$(result lang)" C "... and sandbox.env may set LANG"
assert_eq "$(result user)" errand "USER is set"
assert_eq "$(result term)" errt-term "TERM is the caller's"
assert_eq "$(result names)" "ERRAND_SESSION ERRT_CACHE HOME LANG PATH PWD TERM USER " \
	"nothing else is in the environment (PWD is the shell's own)"
assert_contains "$RUN_STDERR" "sandbox.env sets (values not shown): ERRT_CACHE, LANG" "the start names sandbox.env's names"
assert_not_contains "$RUN_STDERR" "/var/cache/errt" "... and never a value"

# Ignored signals survive exec: a caller's (nohup's SIGHUP, a shell's
# trap '') must not reach the command, and it starts with none blocked.
trap '' HUP PIPE USR2
errand_run --egress none --project "$PROJ" -- sh -c "sed -En 's/^(SigIgn|SigBlk):[[:space:]]*/\\1=/p' /proc/self/status"
trap - HUP PIPE USR2
assert_eq "$RUN_RC" 0 "a session started by a caller that ignores SIGHUP, SIGPIPE and SIGUSR2 ran"
assert_eq "$(result SigIgn)" 0000000000000000 "... and its command ignores no signal"
assert_eq "$(result SigBlk)" 0000000000000000 "... and blocks none"

for name in PATH HOME ERRAND_SESSION; do
	W_CONFIG=$(world_config env-$name "\"env\": { \"$name\": \"errt-secret-value\" }")
	errand_run --egress none --project "$PROJ" -- sh -c 'echo ran'
	assert_eq "$RUN_RC" 125 "$name in sandbox.env: errandctl exits 125"
	assert_empty "$RUN_STDOUT" "... the command does not run"
	assert_eq "$(wc -l <"$RUN_ERR")" 1 "... one line on stderr"
	assert_contains "$RUN_STDERR" "sandbox.env.$name is refused" "... naming the key"
	assert_not_contains "$RUN_STDERR" "errt-secret-value" "... and not the value"
done
# --env values are the caller's, maybe credentials: the session's launcher
# takes its command line over a socket, never in its argv, which
# /proc/PID/cmdline shows any user of the host.
W_CONFIG=$(world_config_plain envargv)
errand_start --egress none --project "$PROJ" --env ERRT_TOKEN=errt-argv-secret -- sleep 30 || exit 1
launchers=0 leaked=0
for d in /proc/[0-9]*; do
	[ "$(cat "$d/comm" 2>/dev/null)" = errand-launch ] || continue
	grep -qa "$W" "$d/cgroup" 2>/dev/null || continue
	launchers=$((launchers + 1))
	grep -qa errt-argv-secret "$d/cmdline" 2>/dev/null && leaked=$((leaked + 1))
done
assert_ne "$launchers" 0 "the session's launcher runs"
assert_eq "$leaked" 0 "... and its command line holds no --env value"
errand_stop
assert_empty "$(leftovers)" "nothing is left"
world_finish
