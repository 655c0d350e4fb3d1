#!/bin/bash
# Guarantee: errand-agent removes what sessions that no longer run left behind (network namespace, veth, cgroup, bpffs pins, nftables table, record directory), by errand's own names only, at start and again later (on reload and every minute), and never touches a session that runs, nor anything named otherwise.
# selftests-timeout: 120
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config sweep)
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }

# What a session with id $1 that died with its agent leaves behind.
orphan() {
	local id=$1
	mkdir -p "/run/$W/netns" "/run/$W/sessions" "$W_DIR/state/sessions/$id/work" "/sys/fs/bpf/$W/$id" "$W_CG/$W/$id"
	touch "/run/$W/netns/$id" "/run/$W/sessions/$id.lock"
	unshare --net="/run/$W/netns/$id" true
	in_host "$IP" link add "eh$id" type veth peer name "es$id"
	in_host nft add table ip "errand-$id"
}
# Look-alikes errand must not touch: other names.
in_host "$IP" link add "xh0badc0de" type veth peer name "xs0badc0de"
in_host nft add table ip "errandx-0badc0de"
in_host nft add table ip "other"
orphan 0dead001
assert_eq "$(leftovers | wc -l)" 5 "control: an orphan's netns, cgroup, pins dir, veth and nft table exist"

# A live session of an embedded errandctl run, started before the agent.
errand_start --egress api.test || exit 1
live=$SESSION
agent_start || exit 1
left=$(leftovers)
assert_not_contains "$left" 0dead001 "at start, the agent removed every object of the dead session"
assert_eq "$([ -e "$W_DIR/state/sessions/0dead001" ] && echo there)" "" "... and its record directory"
assert_eq "$([ -e "/run/$W/sessions/0dead001.lock" ] && echo there)" "" "... and its lock file"
assert_contains "$left" "link eh$live" "the running session's veth is untouched"
assert_contains "$left" "cgroup $W_CG/$W/$live" "... and its cgroup"
assert_eq "$(in_host nft list tables | grep -c 'table ip errand-pool-')" 1 "... and the address pool's nft table (every session's NAT)"
assert_eq "$(in_host "$IP" -o link show xh0badc0de | grep -c xh0badc0de)" 1 "a link named otherwise is untouched"
assert_eq "$(in_host nft list tables | grep -c 'errandx-0badc0de\|table ip other$')" 2 "tables named otherwise are untouched"

# Later orphans: gone at the next sweep (reload runs one).
orphan 0dead002
ctl reload >/dev/null
# The sweep runs off the agent's loop, in a thread: done within moments.
for _ in $(seq 1 50); do
	leftovers | grep -q 0dead002 || break
	sleep 0.1
done
assert_not_contains "$(leftovers)" 0dead002 "an orphan made while the agent runs is removed at its next sweep"
errand_stop
assert_eq "$RUN_RC" 137 "control: the running session was killed by the test, not swept"
in_host "$IP" link del xh0badc0de
in_host nft delete table ip "errandx-0badc0de"
in_host nft delete table ip other
world_finish
