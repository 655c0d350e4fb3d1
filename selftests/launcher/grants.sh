#!/bin/bash
# Guarantee: a grant never reaches past what is the session's own or errand's: a grant of / (`Read(/**)`) shows the host's directories read-only while the session keeps its own /proc, /dev and /tmp, and errand's run directory and the sessions' cgroups are empty; a grant under /proc or /dev is refused with one line naming it, 125; under a grant that covers errand's state and run directories another session's HOME and errand's sockets are not there while the session's own HOME is, and a grant inside them is dropped with a line; a grant that leads through a link in the project (which sessions write) is dropped with a line naming the link, while one through a link elsewhere binds what it leads to; a volume mounted on a granted path or below one, or unmounted there, after the agent made a session's PID 1 ahead is what the session sees as it is at the start.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"

# A grant of /: the host's directories, the session's own /proc, /dev, /tmp.
W_CONFIG=$(world_config root '"rules": { "allow": ["Read(/**)"] }')
touch "$W_DIR/host-tmp-marker"
errand_run --egress none --project "$PROJ" -- sh -c '
	echo "pids=$(cd /proc && echo [0-9]* | wc -w)"
	echo "null=$(echo x >/dev/null && echo ok)"
	echo "hosttmp=$(ls '"$W_DIR"'/host-tmp-marker 2>&1 >/dev/null | sed "s/.*: //")"
	echo "etc=$(head -c 4 /etc/passwd)"
	echo "usrw=$(touch /usr/errand-test 2>&1 >/dev/null | sed "s/.*: //")"
	echo "run=$(ls -A /run/'"$W"' 2>&1 | wc -l)"
	echo "cgroups=$(ls -A '"$W_CG/$W"' 2>&1 | wc -l)"
	echo "mine=$(echo x >"$HOME/f" && cat "$HOME/f")"
'
assert_eq "$RUN_RC" 0 "a session with Read(/**) starts"
assert_match "$(result pids)" '^[2-5]$' "... its /proc is its own (its few processes)"
assert_eq "$(result null)" ok "... its /dev is its own (/dev/null writable)"
assert_eq "$(result hosttmp)" "No such file or directory" "... its /tmp is its own (the host's file is not there)"
assert_eq "$(result etc)" "root" "... the host's files read"
assert_eq "$(result usrw)" "Read-only file system" "... read-only"
assert_ne "$(ls -A "/run/$W" | wc -l)" 0 "the host's run directory of errand holds entries"
assert_eq "$(result run)" 0 "... which a grant of / shows empty"
assert_eq "$(result cgroups)" 0 "... as it shows the sessions' cgroups"
assert_eq "$(result mine)" x "... while the session's HOME is its own and writable"

# Grants under the session's own /proc and /dev are refused at load.
for g in '"policyExtra": { "read": ["/proc/1"] }' '"rules": { "allow": ["Read(/dev/**)"] }'; do
	W_CONFIG=$(world_config floor "$g")
	errand_run --egress none --project "$PROJ" -- true
	assert_eq "$RUN_RC" 125 "a grant under the session's own /proc or /dev is refused: $g"
	assert_eq "$(grep -c . "$RUN_ERR")" 1 "... in one line"
	assert_match "$(cat "$RUN_ERR")" "is under /(proc|dev), which each session has of its own" "... naming it"
done

# A grant covering errand's own directories: another session's HOME is not
# there, nor errand's run directory; a grant inside one is dropped.
W_CONFIG=$(world_config own "\"policyExtra\": { \"read\": [\"$W_DIR\", \"/run/$W/netns\"] }")
errand_start --egress none --project "$PROJ" -- sh -c 'echo other >"$HOME/mine"; echo wrote; sleep 30'
other=$SESSION
bg_wait '^wrote$' 10
assert_eq "$(cat "$W_DIR/state/sessions/$other/work/mine")" other "a session wrote a file in its HOME"
errand_run --egress none --project "$PROJ" -- sh -c '
	echo "other=$(cat '"$W_DIR/state/sessions/$other/work/mine"' 2>&1 | sed "s/.*: //")"
	echo "sessions=$(ls '"$W_DIR/state/sessions"' | tr "\n" " ")"
	echo "mine=$(echo x >"$HOME/f" && cat "$HOME/f")"
	echo "netns=$(ls -A /run/'"$W"'/netns 2>&1 | sed "s/.*: //")"
'
assert_eq "$RUN_RC" 0 "a session under a grant of errand's state directory starts"
assert_eq "$(result other)" "No such file or directory" "... another session's HOME is not there"
assert_match "$(result sessions)" '^[0-9a-f]{8} $' "... its own record alone is"
assert_eq "$(result mine)" x "... and its own HOME writable"
assert_eq "$(result netns)" "No such file or directory" "... errand's run directory is not there"
assert_match "$(cat "$RUN_ERR")" "/run/$W/netns is under /run/$W, errand's own; nothing is granted there" "... and a grant inside it is dropped with a line"
kill "$BG_PID" 2>/dev/null
wait "$BG_PID" 2>/dev/null

# Links: one in the project (a session may have made it) is never followed
# by a grant; one elsewhere binds what it leads to.
mkdir -p "$W_DIR/outside" "$W_DIR/data/real"
echo outside-file >"$W_DIR/outside/f"
echo data-file >"$W_DIR/data/real/f"
chmod -R a+rX "$W_DIR/outside" "$W_DIR/data"
ln -s "$W_DIR/outside" "$PROJ/link"
ln -s real "$W_DIR/data/via"
W_CONFIG=$(world_config links "\"policyExtra\": { \"read\": [\"$PROJ/link/f\", \"$W_DIR/data/via\"] }")
errand_run --egress none --project "$PROJ" -- sh -c '
	echo "outside=$(cat '"$W_DIR"'/outside/f 2>&1 | sed "s/.*: //")"
	echo "data=$(cat '"$W_DIR"'/data/real/f 2>&1)"
'
assert_eq "$RUN_RC" 0 "a session with grants through links starts"
assert_eq "$(result outside)" "No such file or directory" "a grant through a link in the project binds nothing"
assert_match "$(cat "$RUN_ERR")" "$PROJ/link/f leads through the link $PROJ/link, in a directory sessions write" "... and says so, naming the link"
assert_eq "$(result data)" data-file "a grant through a link elsewhere binds what it leads to"

# The mounts along a granted path as they are at the start, whatever they
# were when the agent made a PID 1 ahead: a volume mounted since on a
# directory below the grant is seen, one unmounted since is not, and one
# mounted on the granted path itself is.
VOL=$W_DIR/vol
SRV=$W_DIR/srv
mkdir -p "$VOL" "$SRV/data"
echo under-the-volume >"$SRV/data/f"
chmod -R a+rX "$VOL" "$SRV"
grants_down() {
	local rc=$?
	mountpoint -q "$VOL" && umount "$VOL"
	mountpoint -q "$SRV/data" && umount "$SRV/data"
	mountpoint -q "$W_DIR/elsewhere" && umount "$W_DIR/elsewhere"
	(exit $rc)
	world_down
}
trap grants_down EXIT
# ahead_made OLD: the pid of a launcher started ahead, not OLD, once the
# PID 1 it makes is there (10 s at most); empty if none.
ahead_made() {
	local p
	for _ in $(seq 100); do
		for p in $(pgrep -f "errand-launch --await [0-9]+ --netns /run/$W/netns/"); do
			[ "$p" != "$1" ] && pgrep -P "$p" >/dev/null && echo "$p" && return
		done
		sleep 0.1
	done
}
# shellcheck disable=SC2034 # errand_run and agent_start read it
W_CONFIG=$(world_config vol "\"pool\": 1, \"addressPool\": \"10.218.0.0/24\", \"policyExtra\": { \"read\": [\"$VOL\", \"$SRV\"] }")
agent_start || exit 1
ahead=$(ahead_made none)
assert_ne "$ahead" "" "the agent made a launcher and its PID 1 ahead"
mount -t tmpfs -o size=64k,mode=0755 errt-data "$SRV/data"
echo on-the-volume >"$SRV/data/f"
chmod 0644 "$SRV/data/f"
errand_run -- sh -c "echo \"data=\$(cat $SRV/data/f 2>&1 | sed 's/.*: //')\""
assert_eq "$RUN_RC" 0 "a session granted a directory with a volume mounted below it since starts"
assert_eq "$(result data)" on-the-volume "... and sees the volume, not the directory below"
ahead=$(ahead_made "$ahead")
assert_ne "$ahead" "" "the agent made another launcher and PID 1 ahead, the volume mounted"
umount "$SRV/data"
errand_run -- sh -c "echo \"data=\$(cat $SRV/data/f 2>&1 | sed 's/.*: //')\""
assert_eq "$RUN_RC" 0 "a session granted a directory with a volume unmounted below it since starts"
assert_eq "$(result data)" under-the-volume "... and sees the directory, not the volume gone"
ahead=$(ahead_made "$ahead")
assert_ne "$ahead" "" "the agent made another launcher and PID 1 ahead"
# A volume mounted since elsewhere: that PID 1 still fits, and runs the session.
mkdir -p "$W_DIR/elsewhere"
mount -t tmpfs -o size=64k errt-else "$W_DIR/elsewhere"
umount "$W_DIR/elsewhere"
pid1=$(pgrep -P "$ahead")
errand_start -- sh -c "echo \"data=\$(cat $SRV/data/f)\"; sleep 30"
bg_wait '^data=' 10
assert_eq "$(pgrep -P "$ahead")" "$pid1" "a volume mounted and unmounted elsewhere since: the session runs in the PID 1 made ahead"
kill "$BG_PID" 2>/dev/null
wait "$BG_PID" 2>/dev/null
ahead=$(ahead_made "$ahead")
assert_ne "$ahead" "" "the agent made another launcher and PID 1 ahead"
mount -t tmpfs -o size=64k,mode=0755 errt-vol "$VOL"
echo on-the-volume >"$VOL/f"
chmod 0644 "$VOL/f"
errand_run -- sh -c "echo \"vol=\$(cat $VOL/f 2>&1 | sed 's/.*: //')\""
assert_eq "$RUN_RC" 0 "a session with a grant of a volume mounted since starts"
assert_eq "$(result vol)" on-the-volume "... and sees the volume, not the directory below"
agent_stop

world_finish
