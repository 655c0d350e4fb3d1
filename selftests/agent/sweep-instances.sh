#!/bin/bash
# Guarantee: two errands with paths of their own (paths.run, paths.state, paths.bpf, paths.cgroup) in one network namespace never sweep each other's sessions: one's sweep removes the veth of its own dead session and leaves the other's live session's veth, and that session still reaches what it may.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
# Errand A has the world's paths; errand B the same with "-b" after each.
A_CONFIG=$(dns_config sweepa "" '"pool": 0')
B_CONFIG=$W_DIR/sweepb.json
sed -e "s|\"/run/$W\"|\"/run/$W-b\"|" -e "s|\"$W_DIR/state\"|\"$W_DIR/state-b\"|" \
	-e "s|\"/sys/fs/bpf/$W\"|\"/sys/fs/bpf/$W-b\"|" -e "s|\"cgroup\": \"$W\"|\"cgroup\": \"$W-b\"|" \
	"$A_CONFIG" >"$B_CONFIG"
assert_eq "$(grep -o -- "$W-b\|state-b" "$B_CONFIG" | wc -l)" 4 "control: errand B's paths are its own"

# A live session of B's: a name resolved and a connect to it, a round.
W_CONFIG=$B_CONFIG
# shellcheck disable=SC2016 # $NS expands in the session's shell
errand_start --egress api.test -- sh -c "$(session_ns_sh)"'while :; do
	'"$PROBE"' dns $NS api.test >/dev/null 2>&1
	echo "allowed=$('"$PROBE"' tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
live=$SESSION
bg_rounds 1 || exit 1
assert_match "$(bg_result allowed)" "^ok" "control: B's session reaches an allowed host"

# What a session of A's that died with its errandctl left: its lock file and veth.
dead=0dead001
mkdir -p "/run/$W/sessions"
touch "/run/$W/sessions/$dead.lock"
in_host "$IP" link add "eh$dead" type veth peer name "es$dead"

# An embedded run of A's sweeps first.
# shellcheck disable=SC2034 # errand_run reads it
W_CONFIG=$A_CONFIG
errand_run --egress none -- true
assert_eq "$RUN_RC" 0 "A's run ran, and swept"
links=$(in_host "$IP" -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//')
assert_not_contains "$links" "eh$dead" "A's sweep removed its own dead session's veth"
assert_contains "$links" "eh$live" "A's sweep left the veth of B's live session"
bg_rounds 2 || exit 1
assert_match "$(bg_result allowed)" "^ok" "B's session still reaches the allowed host"

# B's session ends by its own cgroup (errand_stop knows A's).
echo 1 >"$W_CG/$W-b/$live/cgroup.kill"
wait "$BG_PID"
BG_PID=
world_finish
