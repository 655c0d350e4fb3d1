#!/bin/bash
# Guarantee: a session leaves nothing behind (netns, cgroup, bpffs pins, veth) however its command ends (its address pool's NAT table, which every session of the pool shares, stays), and the next run sweeps what a crashed one left, the per-session nft table of an older errand included.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --pin a.test=$HOST_A:443 --egress a.test:443 -- sh -c "$(probe_script a "tcp $HOST_A 443")"
assert_eq "$RUN_RC" 0 "a session whose command succeeds exits 0"
assert_eq "$(result a)" "ok hello $HOST_A:443" "... after reaching its pinned host"
assert_empty "$(leftovers)" "... and leaves nothing behind"

errand_run --egress open -- sh -c 'exit 3'
assert_eq "$RUN_RC" 3 "a session whose command fails exits with its status"
assert_empty "$(leftovers)" "... and leaves nothing behind"

errand_run --egress none -- sh -c 'kill -KILL $$'
assert_eq "$RUN_RC" 137 "a session whose command is killed by SIGKILL exits 128+9"
assert_empty "$(leftovers)" "... and leaves nothing behind"

errand_start --egress open || { world_finish; exit 1; }
assert_ne "$(leftovers)" "" "a running session has its objects (control for the checks above)"
assert_match "$(leftovers)" "netns file /run/$W/netns/$SESSION" "... its netns file"
assert_match "$(leftovers)" "link eh$SESSION" "... its host-side veth"
assert_eq "$(in_host nft list tables | grep -c 'table ip errand-pool-10.213.0.0-16')" 1 "... and the NAT of its address pool"
assert_match "$(leftovers)" "cgroup $W_CG/$W/$SESSION" "... its cgroup"
assert_match "$(leftovers)" "bpffs /sys/fs/bpf/$W/$SESSION" "... its bpffs directory"
kill -TERM "$BG_PID"
for _ in $(seq 100); do kill -0 "$BG_PID" 2>/dev/null || break; sleep 0.1; done
errand_stop
assert_empty "$(leftovers)" "errandctl stopped by SIGTERM leaves nothing behind"

# The leftovers of a crashed run, made the way errand names them.
dead=deadbeef
mkdir -p "/run/$W/netns"
touch "/run/$W/netns/$dead"
unshare --net sh -c "mount --bind /proc/self/ns/net /run/$W/netns/$dead"
mkdir -p "$W_CG/$W/$dead"
mkdir -p "/sys/fs/bpf/$W/$dead"
if command -v bpftool >/dev/null; then
	bpftool map create "/sys/fs/bpf/$W/$dead/allow" type hash key 20 value 16 entries 16 name allow
fi
in_host nft add table ip errand-$dead
in_host "$IP" link add eh$dead type veth peer name es$dead
expected=$(printf '%s\n' "netns file /run/$W/netns/$dead" "cgroup $W_CG/$W/$dead" "bpffs /sys/fs/bpf/$W/$dead" \
	"link eh$dead" "nft table ip errand-$dead")
got=$(leftovers | grep -v "/sys/fs/bpf/$W/$dead/" | grep -v "link es$dead")
assert_eq "$(sort <<<"$got")" "$(sort <<<"$expected")" "the fake leftovers of a crashed session are in place"

errand_run --egress none -- true
assert_eq "$RUN_RC" 0 "the next session runs"
assert_empty "$(leftovers)" "... and the crashed session's netns file, cgroup, bpffs pins, veth and nft table are swept"
assert_eq "$(grep -c "/run/$W/netns/$dead" /proc/self/mountinfo)" 0 "the crashed session's netns is unmounted"
assert_eq "$(in_host "$IP" -o link show | grep -c "$dead")" 0 "the crashed session's veth pair is gone, both ends"

world_finish
