#!/bin/bash
# Guarantee: with sandbox.image a session's root is that image, read-only, with the project bind-mounted at /workspace and the state directory at /state, a fresh /proc, /dev, /tmp of its own, and nothing of the host's filesystem reachable.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# A tiny image: the host's sh (dash, or busybox in a vmtest), the libraries
# it loads, and a marker in /etc.
IMG=$W_DIR/image
mkdir -p "$IMG/usr/bin" "$IMG/etc"
ln -s usr/bin "$IMG/bin"
SH=$(readlink -f /bin/sh)
cp "$SH" "$IMG/usr/bin/sh"
# ldd is a script around the dynamic loader's --list; a minimal userland may
# have only the loader.
list_libs() {
	if command -v ldd >/dev/null; then
		ldd "$1"
	else
		/lib64/ld-linux-x86-64.so.2 --list "$1"
	fi
}
for lib in $(list_libs "$SH" 2>/dev/null | grep -o '/[^ ]*'); do
	mkdir -p "$IMG$(dirname "$lib")"
	cp "$(readlink -f "$lib")" "$IMG$lib"
done
echo "root:x:0:0:root:/state:/bin/sh" >"$IMG/etc/passwd"
echo errt-image >"$IMG/etc/errt-marker"
chmod -R a+rX "$IMG"
# The marker is the newest file of the image: what is newer, the session wrote.
sleep 0.05
touch "$IMG/etc/errt-marker"
PROJ=$W_DIR/project
mkdir -p "$PROJ"
chmod 0777 "$PROJ"
echo from-host >"$PROJ/in-project"
chmod 0644 "$PROJ/in-project"
W_CONFIG=$(world_config image "\"image\": \"$IMG\"")

# Shell builtins only: the image has nothing else.
errand_run --egress none --project "$PROJ" -- sh -c '
	read m </etc/errt-marker; echo "marker=$m"
	read p </workspace/in-project; echo "project=$p"
	echo "pwd=$(pwd)"
	echo "home=$HOME"
	echo "ws_write=$( (echo x >/workspace/from-session) 2>/dev/null && echo ok || echo refused)"
	echo "home_write=$( (echo y >$HOME/f) 2>/dev/null && echo ok || echo refused)"
	echo "etc_write=$( (echo z >/etc/errt-new) 2>/dev/null && echo ok || echo refused)"
	echo "root_write=$( (echo z >/errt-new) 2>/dev/null && echo ok || echo refused)"
	echo "tmp_write=$( (echo t >/tmp/t) 2>/dev/null && echo ok || echo refused)"
	for p in /work /root /var /home /usr/bin/apt /usr/bin/env '"$PROJ"' /etc/hostname; do
		[ -e "$p" ] && echo "seen=$p"
	done
	echo "proc=$( [ -r /proc/self/status ] && echo yes || echo no)"
	echo "null=$( (echo x >/dev/null) 2>/dev/null && echo ok || echo refused)"
	echo done=1
'
assert_eq "$RUN_RC" 0 "a session with sandbox.image ran"
assert_eq "$(result marker)" errt-image "its /etc is the image's"
assert_eq "$(result project)" from-host "the project is at /workspace"
assert_eq "$(result pwd)" /workspace "... and the command starts there"
assert_eq "$(result home)" /state "HOME is the state directory, at /state"
assert_eq "$(result ws_write)" ok "/workspace is writable"
assert_eq "$(cat "$PROJ/from-session" 2>/dev/null)" x "... and writes land in the project on the host"
# Written as the project's owner (root) where its filesystem can be idmapped
# (tmpfs before Linux 6.3 cannot: then as errand-session, the gap stated).
idmap=$(cd "$PROJ" && in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["projectFilesystem"]["idmap"])' 2>/dev/null)
[ "$idmap" = True ] && owner=root || owner=$(id -un errand-session 2>/dev/null || echo nobody)
assert_eq "$(stat -c %U "$PROJ/from-session" 2>/dev/null)" "$owner" "... as the project's owner, $owner, at /workspace too"
assert_eq "$(result home_write)" ok "/state is writable"
assert_eq "$(result etc_write)" refused "the image's /etc is not writable"
assert_eq "$(result root_write)" refused "... nor its /"
assert_eq "$(result tmp_write)" ok "/tmp is writable"
assert_empty "$(grep '^seen=' "$RUN_OUT")" "nothing of the host's filesystem is there (/work, /root, /var, /home, the host's tools, the project's host path)"
assert_eq "$(result proc)" yes "/proc is mounted"
assert_eq "$(result null)" ok "/dev/null works"
assert_eq "$(result "done")" 1 "the script ran to its end"
assert_empty "$(find "$IMG" -newer "$IMG/etc/errt-marker" ! -type d 2>/dev/null)" "the image itself is unchanged"
assert_empty "$(leftovers)" "nothing is left"

# Through the agent's pool: the PID 1 a waiting launcher made ahead holds
# the host's system directories, not the image; the start ends it and the
# launcher makes the session's PID 1 as it does unpooled.
# With a network, the session's resolv.conf is bound on the image's.
touch "$IMG/etc/resolv.conf"
W_CONFIG=$(world_config image-pool "\"image\": \"$IMG\", \"pool\": 1")
agent_start || exit 1
errand_run --project "$PROJ" -- sh -c 'read m </etc/errt-marker; echo "marker=$m"; [ -e /usr/bin/env ] && echo host=seen; echo done=1'
assert_eq "$RUN_RC" 0 "through the agent's pool, a session with sandbox.image ran"
assert_eq "$(result marker)" errt-image "... in the image"
assert_empty "$(result host)" "... with nothing of the host's system"
assert_eq "$(result "done")" 1 "... to its end"
agent_stop
assert_empty "$(leftovers)" "nothing is left"
world_finish
