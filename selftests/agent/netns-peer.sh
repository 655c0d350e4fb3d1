#!/bin/bash
# Guarantee: on a host whose run directory is on a shared mount (systemd makes /run one), each session's network namespace file is mounted once: the agent's bind of its netns directory onto itself is no peer of the mount beneath it (a peer had every namespace file mounted again beneath, where a session's PID 1 kept the copy), and a directory an older errand bound so is given a peer group of its own when an agent first uses it with no namespace file on it; one that has some (a live session's) keeps its group, so that their unmounts still reach the copies beneath and nothing is left mounted when they end.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
# shellcheck disable=SC2034 # agent_start and errand_run read it
W_CONFIG=$(world_config netns-peer '"pool": 1, "addressPool": "10.213.0.0/24"')
D=/run/$W/netns
# The run directory on a shared mount of its own, as /run is on a systemd
# host: the world's tmpfs there, or one mounted now (the world's sweep
# unmounts what is below /run/$W).
if ! mountpoint -q "/run/$W"; then
	mkdir -p "/run/$W" && mount -t tmpfs -o mode=0755,size=16m "$W-run" "/run/$W"
fi
mount --make-shared "/run/$W"
assert_match "$(findmnt -n -o PROPAGATION "/run/$W")" '^shared' "the run directory is a shared mount"
# mounts whose mount point is the path, in this mount namespace
mounts_at() { awk -v p="$1" '$5 == p' /proc/self/mountinfo | grep -c .; }
# the netns files, each with how many mounts it has
file_mounts() {
	local f
	for f in "$D"/*; do
		[ -e "$f" ] && echo "$(mounts_at "$f")"
	done | sort -u
}
# wait until the pool's network is there and every file is mounted (a
# file is made before its namespace is mounted on it)
settled() {
	local m
	for _ in $(seq 1 100); do
		m=$(file_mounts)
		[ -n "$m" ] && ! grep -qx 0 <<<"$m" && return 0
		sleep 0.1
	done
	return 1
}
check() {
	settled
	assert_eq "$(file_mounts)" 1 "$1: each namespace file mounted once"
	errand_run -- true
	assert_eq "$RUN_RC" 0 "... and a session runs"
	settled
	assert_eq "$(file_mounts)" 1 "... after which each is still mounted once"
}

# A fresh host: the agent binds the directory itself.
agent_start || { world_finish; exit 1; }
settled
assert_eq "$(mounts_at "$D")" 1 "the agent bound its netns directory onto itself once"
check "the agent's own bind"
agent_stop

# As an older errand left it: bound onto itself as a peer of the mount
# beneath (a bind of a directory on a shared mount is that mount's peer).
group_of() { awk -v p="$1" '$5 == p { for (i = 7; $i != "-"; i++) if ($i ~ /^shared:/) print $i }' /proc/self/mountinfo | tail -n 1; }
old_bind() {
	agent_stop
	for _ in $(seq 1 50); do
		[ -z "$(file_mounts)" ] && break
		sleep 0.1
	done
	assert_empty "$(file_mounts)" "the stopped agent left no namespace file"
	while mountpoint -q "$D"; do umount "$D" || break; done
	mount --bind "$D" "$D"
	assert_eq "$(group_of "$D")" "$(group_of "/run/$W" | head -n 1)" "an older errand's bind is a peer of the mount beneath"
}
old_bind
agent_start || { world_finish; exit 1; }
check "an older errand's bind"
assert_ne "$(group_of "$D")" "$(group_of "/run/$W" | head -n 1)" "... which the agent gave a peer group of its own"

# The same with a live session's namespace file on it (an adopted one's:
# its lock held): the directory keeps its group, and the file's unmount
# at its end still takes its copy beneath.
old_bind
mkdir -p "/run/$W/sessions"
live=ffff0001
(exec flock "/run/$W/sessions/$live.lock" sleep 600) &
W_PIDS+=($!)
for _ in $(seq 1 50); do
	flock -n "/run/$W/sessions/$live.lock" true || break
	sleep 0.1
done
touch "$D/$live"
unshare --net="$D/$live" true
assert_eq "$(mounts_at "$D/$live")" 2 "a live session's file on the old bind is mounted twice (once beneath)"
agent_start || { world_finish; exit 1; }
settled
assert_eq "$(group_of "$D")" "$(group_of "/run/$W" | head -n 1)" "... and the agent leaves the directory's group as it is"
assert_match "$(cat "$AGENT_LOG")" "netns dir $D: a peer of the mount beneath it .* with 1 namespace files on it" "... and says so"
umount "$D/$live"
assert_eq "$(mounts_at "$D/$live")" 0 "... so the file's unmount at its end takes its copy beneath too"
world_finish
