#!/bin/bash
# Guarantee: a masked daemon socket (errand-launch --mask PATH) under a granted directory stays closed to the session for as long as it runs: the session cannot connect to it at start, nor after the daemon re-creates it (unlink and bind anew, as a restart does) or removes and makes again its whole directory (a runtime directory), while a socket beside it no mask names stays reachable throughout; a pooled session whose grant shows a masked path's directory runs in the PID 1 made ahead.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
SYSPROBE=$ROOT/build/selftests/sysprobe
[ -x "$SYSPROBE" ] || skip "build/selftests/sysprobe is not built (make build/selftests/sysprobe)"
world_up
# MASKS_NO_INOTIFY=1 (launcher/masks-limit, in the test VM alone): the
# launcher finds no inotify instance left to it
limit=/proc/sys/fs/inotify/max_user_instances
if [ "${MASKS_NO_INOTIFY:-}" = 1 ]; then
	old_limit=$(cat "$limit")
	trap 'echo "$old_limit" >"$limit"; world_down' EXIT
	echo 0 >"$limit"
fi

launcher_setup masks
PROJ=$W_DIR/project
T=$W_DIR/run
mkdir -p "$PROJ" "$T/sock"
chmod 0777 "$PROJ"
chmod -R a+rX "$T"
S=$T/sock/daemon.sock
O=$T/sock/other.sock

# listen PATH: a test daemon bound at PATH, in the background ($LISTENER)
listen() {
	"$SYSPROBE" unix-listen "$1" >/dev/null 2>&1 &
	LISTENER=$!
	W_BG_PIDS+=("$LISTENER")
	for _ in $(seq 50); do [ -S "$1" ] && break; sleep 0.1; done
}
listen "$O"
listen "$S"
daemon=$LISTENER

P=$SYSPROBE
"$ROOT/build/bin/errand-launch" --session "$W-s" --cgroup "$LCG" --netns "/run/netns/$W-masks" \
	--uid "$S_UID" --gid "$S_GID" --project "$PROJ" \
	--policy-read "$T" --policy-read "$ROOT/build/selftests" --policy-exec "$ROOT/build/selftests" \
	--mask "$S" -- sh -c "
	echo \"before=\$($P unix-connect $S)\"
	echo \"other_before=\$($P unix-connect $O)\"
	echo waiting
	n=0
	while [ ! -e $T/restarted ] && [ \$n -lt 200 ]; do sleep 0.05; n=\$((n + 1)); done
	# a short while for the cover to come back
	n=0
	while [ \"\$($P unix-connect $S)\" = ok ] && [ \$n -lt 40 ]; do sleep 0.05; n=\$((n + 1)); done
	sleep 0.2
	echo \"after=\$($P unix-connect $S)\"
	echo \"other_after=\$($P unix-connect $O)\"
	n=0
	while [ ! -e $T/remade ] && [ \$n -lt 200 ]; do sleep 0.05; n=\$((n + 1)); done
	n=0
	while [ \"\$($P unix-connect $S)\" = ok ] && [ \$n -lt 40 ]; do sleep 0.05; n=\$((n + 1)); done
	sleep 0.2
	echo \"anew=\$($P unix-connect $S)\"
	echo \"other_anew=\$($P unix-connect $O)\"
" >"$W_DIR/out" 2>"$W_DIR/err" &
launcher=$!
W_BG_PIDS+=("$launcher")
for _ in $(seq 100); do grep -q '^waiting$' "$W_DIR/out" && break; sleep 0.05; done
assert_eq "$(grep -c '^waiting$' "$W_DIR/out")" 1 "the session started"

# The daemon restarts: its socket unlinked, a new one bound at the same path.
kill "$daemon"
wait "$daemon" 2>/dev/null
rm -f "$S"
listen "$S"
assert_eq "$([ -S "$S" ] && kill -0 "$LISTENER" && [ "$LISTENER" != "$daemon" ] && echo yes)" yes "the test daemon bound its socket anew"
touch "$T/restarted"
# Then its whole directory removed and made again, as a runtime directory
# is when its daemon restarts (systemd's RuntimeDirectory=).
for _ in $(seq 100); do grep -q '^other_after=' "$W_DIR/out" && break; sleep 0.05; done
other=$(pgrep -f "unix-listen $O")
kill "$LISTENER" $other
wait "$LISTENER" $other 2>/dev/null
rm -rf "$T/sock"
mkdir "$T/sock"
chmod a+rx "$T/sock"
listen "$O"
listen "$S"
touch "$T/remade"
wait "$launcher"
rc=$?
echo "# exit $rc; stdout:"
sed 's/^/#   /' "$W_DIR/out"
echo "# stderr:"
sed 's/^/#   /' "$W_DIR/err"
result() { sed -n "s/^$1=//p" "$W_DIR/out"; }
assert_eq "$rc" 0 "the session ran"
assert_eq "$(result other_before)" ok "a socket no mask names under the grant is reachable"
assert_match "$(result before)" '^(ECONNREFUSED|ENOENT|EACCES)$' "the masked socket is not, at start"
assert_match "$(result after)" '^(ECONNREFUSED|ENOENT|EACCES)$' "... nor once its daemon made it again"
assert_eq "$(result other_after)" ok "... while the socket beside it still is"
assert_match "$(result anew)" '^(ECONNREFUSED|ENOENT|EACCES)$' "... nor once its daemon's directory was removed and made again with it"
assert_eq "$(result other_anew)" ok "... while the socket beside it, made again too, is reachable"
if [ "${MASKS_NO_INOTIFY:-}" = 1 ]; then
	assert_contains "$(cat "$W_DIR/err")" "no inotify instance left (fs.inotify.max_user_instances): the masked paths' directories are looked at every 250 ms instead" \
		"... the launcher, with no inotify instance left, looking at them every 250 ms, as it said"
	echo "$old_limit" >"$limit"
	world_finish
	exit
fi

ip netns del "$W-masks"
rmdir "$LCG" 2>/dev/null

# Through the agent's pool: a session granted the journal's directory (its
# mask's, watched) runs in the PID 1 made ahead, which says when its root
# is built.
# Every host has /var/log; the test VM's minimal root has none (made here,
# and removed again, where missing).
made_log=
[ -d /var/log ] || { mkdir /var/log && made_log=1; }
# shellcheck disable=SC2034 # errand_start and agent_start read it
W_CONFIG=$(world_config pool "\"pool\": 1, \"addressPool\": \"10.219.0.0/24\", \"policyExtra\": { \"read\": [\"/var/log\"] }")
agent_start || exit 1
ahead=
for _ in $(seq 100); do
	for p in $(pgrep -f "errand-launch --await [0-9]+ --netns /run/$W/netns/"); do
		pgrep -P "$p" >/dev/null && ahead=$p
	done
	[ -n "$ahead" ] && break
	sleep 0.1
done
assert_ne "$ahead" "" "the agent made a launcher and its PID 1 ahead"
pid1=$(pgrep -P "$ahead")
errand_start -- sh -c 'echo ran; sleep 30'
bg_wait '^ran$' 10
assert_contains "$(cat "$BG_OUT")" ran "a pooled session granted a masked path's directory runs"
assert_eq "$(pgrep -P "$ahead")" "$pid1" "... in the PID 1 made ahead"
assert_eq "$(find "/proc/$ahead/fd" -lname 'anon_inode:inotify' | grep -c .)" 1 "... its launcher watching the journal's directory"
kill "$BG_PID" 2>/dev/null
wait "$BG_PID" 2>/dev/null
agent_stop
[ -n "$made_log" ] && rmdir /var/log
world_finish
