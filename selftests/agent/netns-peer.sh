#!/bin/bash
# Guarantee: on a host whose run directory is on a shared mount (systemd makes /run one), each session's network namespace file is mounted once: the agent's bind of its netns directory onto itself is no peer of the mount beneath it (a peer had every namespace file mounted again beneath, where a session's PID 1 kept the copy), and a directory an older errand bound so is given a peer group of its own when the agent first uses it.
# selftests-timeout: 90
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
# shellcheck disable=SC2034 # agent_start and errand_run read it
W_CONFIG=$(world_config netns-peer '"pool": 1, "addressPool": "10.213.0.0/24"')
D=/run/$W/netns
# The run directory on a shared mount, as /run is on a systemd host: where
# the world mounted a tmpfs of its own there, that one made shared.
if mountpoint -q "/run/$W"; then
	mount --make-shared "/run/$W"
fi
base=$(findmnt -n -o PROPAGATION --target "/run/$W")
assert_match "$base" '^shared' "the run directory is on a shared mount"
# mounts whose mount point is the path, in this mount namespace
mounts_at() { awk -v p="$1" '$5 == p' /proc/self/mountinfo | grep -c .; }
# the netns files, each with how many mounts it has
file_mounts() {
	local f
	for f in "$D"/*; do
		[ -e "$f" ] && echo "$(mounts_at "$f")"
	done | sort -u
}
# wait until the pool's one network is there (its netns file mounted)
pool_ready() {
	for _ in $(seq 1 100); do
		[ -n "$(file_mounts)" ] && return 0
		sleep 0.1
	done
	return 1
}
check() {
	pool_ready
	assert_eq "$(file_mounts)" 1 "$1: each namespace file mounted once"
	errand_run -- true
	assert_eq "$RUN_RC" 0 "... and a session runs"
	assert_eq "$(file_mounts)" 1 "... after which each is still mounted once"
}

# A fresh host: the agent binds the directory itself.
agent_start || { world_finish; exit 1; }
pool_ready
assert_eq "$(mounts_at "$D")" 1 "the agent bound its netns directory onto itself once"
check "the agent's own bind"
agent_stop

# As an older errand left it: bound onto itself as a peer of the mount
# beneath (a bind of a directory on a shared mount is that mount's peer).
for _ in $(seq 1 50); do
	[ -z "$(file_mounts)" ] && break
	sleep 0.1
done
assert_empty "$(file_mounts)" "the stopped agent left no namespace file"
while mountpoint -q "$D"; do umount "$D" || break; done
mount --bind "$D" "$D"
peer=$(awk -v p="$D" '$5 == p { for (i = 7; $i != "-"; i++) if ($i ~ /^shared:/) print $i }' /proc/self/mountinfo)
under=$(awk -v p="/run/$W" '$5 == p { for (i = 7; $i != "-"; i++) if ($i ~ /^shared:/) print $i }' /proc/self/mountinfo)
[ -n "$under" ] || under=$(awk '$5 == "/run" { for (i = 7; $i != "-"; i++) if ($i ~ /^shared:/) print $i }' /proc/self/mountinfo)
assert_eq "$peer" "$under" "an older errand's bind is a peer of the mount beneath"
agent_start || { world_finish; exit 1; }
check "an older errand's bind"
world_finish
