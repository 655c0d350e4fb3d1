#!/bin/bash
# Guarantee: errandctl run relays a session with secrets or provider keys only through a relay of the agent's (root; never the errandctl client, in the daemon's case): every secret's value of 8 bytes or more and every provider's real key, raw or percent-encoded, reaches the caller's stdout and stderr as its placeholder or stand-in, also split between two writes with a pause between; a shorter value is left as it is; everything the session wrote (binary, megabytes) arrives whole before errandctl returns the exit status; without secrets or providers the session writes to the caller's descriptors itself, byte for byte.
# shellcheck disable=SC2016 # $TOK and the like expand in the session's shell
# selftests-timeout: 240
. "$(dirname "$0")/common.sh"
need_errandctl
command -v python3 >/dev/null || skip "python3 is missing (make deps)"
secrets_world
PROJ=$W_DIR/proj
mkdir -p "$PROJ"
# a 7-byte secret: under the 8 bytes the relay replaces
SHORT=s7$(od -An -tx1 -N3 /dev/urandom | tr -d ' \n' | cut -c1-5)
printf '%s\n' "$SHORT" >"$STORE/s"
chmod 0600 "$STORE/s"
KEY=sk-out-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
KEY_FILE=$W_DIR/prov.key
printf '%s\n' "$KEY" >"$KEY_FILE"
chmod 0600 "$KEY_FILE"
PROV="\"agent\": { \"providers\": { \"prov\": { \"baseUrl\": \"https://sec.test/v1\", \"credentialFile\": \"$KEY_FILE\", \"trustedCa\": \"$W_DIR/tls/ca.crt\", \"placement\": \"x-api-key\" } } }"
SCRUB_CONFIG=$(secrets_config outscrub "$PROV")
PLAIN_CONFIG=$(secrets_config outplain)
head -c 4M /dev/urandom >"$PROJ/blob"
# The value as a URL carries it, lower-case hex: va%2f...%2bA.
PCT_A=$(printf '%s' "$VALUE_A" | sed 's|/|%2f|g; s|+|%2b|g')
half=$((${#VALUE_A} / 2))
A1=${VALUE_A:0:$half}
A2=${VALUE_A:$half}
K1=${KEY:0:9}
K2=${KEY:9}

# The session never holds a value: the operator types them on its command
# line, and it prints them, whole and in two writes half a second apart.
sh='v=$1; pct=$2; a1=$3; a2=$4; k=$5; k1=$6; k2=$7; short=$8
echo "ph=$TOK"
echo "st=$PROV_API_KEY"
if [ -p /dev/stdout ]; then echo "stdout=pipe"; else echo "stdout=direct"; fi
printf "one=%s\n" "$v"
printf "pct=%s\n" "$pct"
printf "key=%s\n" "$k"
printf "short=%s\n" "$short"
printf "split=%s" "$a1"; sleep 0.5; printf "%s\n" "$a2"
printf "ksplit=%s" "$k1"; sleep 0.5; printf "%s\n" "$k2"
printf "eone=%s\n" "$v" >&2
printf "esplit=%s" "$a1" >&2; sleep 0.5; printf "%s\n" "$a2" >&2
printf "ekey=%s\n" "$k" >&2
exit 7'

# errand_run for binary output, not copied into the log: stdout goes to a
# pipe that a slow reader drains (16 KiB each 5 ms), and the shell writes
# EXIT=<status> into the same pipe once errandctl has returned. Output that
# arrived after errandctl returned would follow that line.
blob_run() {
	_run_files
	echo "# errandctl run $* (output not shown)"
	{
		in_host timeout -k 5 60 "$ERRANDCTL" run --config "$W_CONFIG" "$@" </dev/null 2>"$RUN_ERR"
		echo "EXIT=$?"
	} | python3 -c 'import sys, time
out = open(sys.argv[1], "wb")
while True:
    b = sys.stdin.buffer.read1(16384)
    if not b:
        break
    out.write(b)
    time.sleep(0.005)' "$RUN_OUT"
	echo "# $(wc -c <"$RUN_OUT") bytes out, $(wc -c <"$RUN_ERR") bytes err"
}

scrubbed() {
	local how=$1 ph st
	W_CONFIG=$SCRUB_CONFIG
	errand_run --project "$PROJ" --secret TOK=a@sec.test --secret SHORT=s@sec.test -- \
		sh -c "$sh" sh "$VALUE_A" "$PCT_A" "$A1" "$A2" "$KEY" "$K1" "$K2" "$SHORT"
	assert_eq "$RUN_RC" 7 "$how: the session's exit status comes back"
	ph=$(result ph)
	st=$(result st)
	assert_match "$ph" '^errand-secret-[0-9a-f]{64}$' "$how: the session holds a placeholder"
	assert_match "$st" '^errand-session-[0-9a-f]{64}$' "$how: and a stand-in for the provider"
	assert_eq "$(result stdout)" pipe "$how: with secrets, the session's stdout is the relay's pipe"
	assert_eq "$(result one)" "$ph" "$how: a secret's value on stdout reaches the caller as its placeholder"
	assert_eq "$(result pct)" "$ph" "$how: so does its percent-encoded form"
	assert_eq "$(result key)" "$st" "$how: a provider's real key reaches the caller as its stand-in"
	assert_eq "$(result split)" "$ph" "$how: a value split between two writes, half a second apart, is replaced"
	assert_eq "$(result ksplit)" "$st" "$how: so is a key split so"
	assert_eq "$(sed -n 's/^eone=//p' "$RUN_ERR")" "$ph" "$how: a value on stderr reaches the caller as its placeholder"
	assert_eq "$(sed -n 's/^esplit=//p' "$RUN_ERR")" "$ph" "$how: split on stderr too"
	assert_eq "$(sed -n 's/^ekey=//p' "$RUN_ERR")" "$st" "$how: a key on stderr as its stand-in"
	assert_eq "$(result short)" "$SHORT" "$how: a value under 8 bytes is left as it is"
	[ "$how" = embedded ] && assert_not_contains "$RUN_STDERR" "errand-broker:" \
		"embedded: the broker's routine lines stay off the user's terminal (they show with -v)"
	assert_not_contains "$RUN_STDOUT$RUN_STDERR" "$VALUE_A" "$how: the value never reaches the caller"
	assert_not_contains "$RUN_STDOUT$RUN_STDERR" "$KEY" "$how: the key never reaches the caller"

	# Megabytes of binary, on both streams, the session ending right
	# after: all of it arrives, before the exit status.
	blob_run --project "$PROJ" --secret TOK=a@sec.test -- \
		sh -c 'cat "$1"; printf "tail-out"; cat "$1" >&2; printf "tail-err" >&2; exit 3' sh "$PROJ/blob"
	{ cat "$PROJ/blob"; printf 'tail-outEXIT=3\n'; } >"$W_DIR/want.out"
	{ cat "$PROJ/blob"; printf tail-err; } >"$W_DIR/want.err"
	assert_eq "$(cmp "$W_DIR/want.out" "$RUN_OUT" 2>&1 && echo same)" same \
		"$how: binary stdout through the relay arrives whole and unchanged, all of it before errandctl returns the exit status"
	# errand's own lines go to the embedded agent's stderr too, around it
	assert_eq "$(python3 -c 'import sys; w = open(sys.argv[1], "rb").read(); print("same" if w in open(sys.argv[2], "rb").read() else "differ")' "$W_DIR/want.err" "$RUN_ERR")" \
		same "$how: so does stderr"
}

relay_parent() {
	local pid
	for pid in $(pgrep -x errand-output); do
		ps -o ppid= -p "$pid" | tr -d ' '
	done | sort -u | tr '\n' ' '
}

# The relay's user and effective capabilities, a child of $1.
relay_creds() {
	local pid
	pid=$(pgrep -x -P "$1" errand-output | head -n 1)
	[ -n "$pid" ] && awk '/^Uid:/ { u = $2 } /^CapEff:/ { c = $2 } END { print u, c }' "/proc/$pid/status"
}

# Embedded: errandctl, root, runs the relay itself.
scrubbed embedded
W_CONFIG=$SCRUB_CONFIG
errand_start --project "$PROJ" --secret TOK=a@sec.test -- sleep 30 || exit 1
assert_contains " $(relay_parent)" " $BG_PID " "embedded: the relay is errandctl's own child"
assert_eq "$(relay_creds "$BG_PID")" "0 0000000000000000" "embedded: the relay is root's, without capabilities"
errand_stop

# The daemon: the relay is the agent's; the client only gets what it wrote.
W_CONFIG=$SCRUB_CONFIG
agent_start || exit 1
scrubbed daemon
errand_start --project "$PROJ" --secret TOK=a@sec.test -- sleep 30 || exit 1
parents=$(relay_parent)
assert_contains " $parents" " $AGENT_PID " "daemon: the relay is errand-agent's child"
assert_eq "$(relay_creds "$AGENT_PID")" "0 0000000000000000" "daemon: the relay is root's, without capabilities"
assert_not_contains " $parents" " $BG_PID " "daemon: no relay is the errandctl client's"
assert_contains "$(head -n 1 "$BG_OUT")" "id=$SESSION" "daemon: the relay passes output on while the session runs"
errand_stop
agent_stop

# Without secrets or providers: no relay, the caller's descriptors themselves.
W_CONFIG=$PLAIN_CONFIG
errand_run --project "$PROJ" -- \
	sh -c 'if [ -p /dev/stdout ]; then echo "stdout=pipe"; else echo "stdout=direct"; fi; printf "one=%s\n" "$1"' sh "$VALUE_A"
assert_eq "$(result stdout)" direct "no secrets: the session writes to the caller's stdout itself"
assert_eq "$(result one)" "$VALUE_A" "no secrets: nothing is replaced"
blob_run --project "$PROJ" -- sh -c 'cat "$1"; printf "tail-out"; exit 3' sh "$PROJ/blob"
assert_eq "$(cmp "$W_DIR/want.out" "$RUN_OUT" 2>&1 && echo same)" same "no secrets: binary output byte for byte"

world_finish
