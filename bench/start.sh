#!/bin/bash
# Benchmark, not a test: session start. `errandctl run -- /bin/true` with full
# confinement (cgroup, every namespace, veth and NAT, BPF attached and
# verified, DNS responder, Landlock, seccomp) through errand-agent with its
# warm pool (sandbox.pool 2, the default) and without (sandbox.pool 0), with
# --egress none, and embedded (no agent: errandctl does it all itself), side
# by side with bubblewrap unsharing everything and plain unshare, in one
# hyperfine run. All run from the world's agent namespace, so each pays the
# same nsenter. RUNS tunes it; PAUSE=SECONDS waits that long before each
# run, so the agent's refill and teardown of the run before are done (back
# to back, the default, each start shares two CPUs with them). Each arm
# begins a second after the last one's runs, once their teardowns are done:
# bwrap binds the whole mount tree, and a namespace file of the embedded
# arm's last session unmounted meanwhile failed its run.
set -u
. "$(dirname "$0")/lib.sh"

RUNS=${RUNS:-30}
bench_need hyperfine bwrap
world_up >/dev/null
# Each errand of its own paths in a namespace of its own (an agent sweeps the
# veths of its namespace that no session of its own holds): the pool's
# agent in the world's, the one without a pool and the embedded errandctl in
# empty ones; every arm pays the same nsenter.
W_CONFIG=$(world_config start-pool '"pool": 2')
pool_cfg=$W_CONFIG
agent_start >/dev/null || exit 1
other_paths() {
	sed -i "s|/run/$W\"|/run/$W-$2\"|; s|/sys/fs/bpf/$W\"|/sys/fs/bpf/$W-$2\"|; s|\"cgroup\": \"$W\"|\"cgroup\": \"$W-$2\"|; s|$W_DIR/state\"|$W_DIR/state-$2\"|" "$1"
	ip netns add "$W-$2"
	ip -n "$W-$2" link set lo up
}
nopool_cfg=$(world_config start-nopool '"pool": 0')
other_paths "$nopool_cfg" np
(exec nsenter --net="/run/netns/$W-np" "$ROOT/build/bin/errand-agent" --foreground --config "$nopool_cfg" \
	</dev/null >>"$W_DIR/agent-np.log" 2>&1) &
W_PIDS+=($!)
embedded_cfg=$(world_config start-embedded)
other_paths "$embedded_cfg" em
for _ in $(seq 1 100); do
	"$ERRANDCTL" --config "$nopool_cfg" version 2>/dev/null | grep -q '^errand-agent [0-9]' && break
	sleep 0.05
done
in_ns() { echo "nsenter --net=/run/netns/$W-$1"; }
hyperfine -N ${HF_ARGS:-} ${PAUSE:+--prepare "sleep $PAUSE"} --cleanup "sleep 1" --warmup 3 --runs "$RUNS" --export-markdown "$W_DIR/start.md" \
	-n "errandctl run -- /bin/true (agent, pool)" "$(in_ns host) $ERRANDCTL run --config $pool_cfg -- /bin/true" \
	-n "errandctl run -- /bin/true (agent, no pool)" "$(in_ns np) $ERRANDCTL run --config $nopool_cfg -- /bin/true" \
	-n "errandctl run --egress none -- /bin/true (agent)" "$(in_ns host) $ERRANDCTL run --config $pool_cfg --egress none -- /bin/true" \
	-n "errandctl run -- /bin/true (embedded)" "$(in_ns em) $ERRANDCTL run --config $embedded_cfg -- /bin/true" \
	-n "bwrap --unshare-all" "$(in_ns host) bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true" \
	-n "unshare -Urnpf --mount-proc" "$(in_ns host) unshare -Urnpf --mount-proc /bin/true" 2>&1 | grep -v '^ *$'
cat "$W_DIR/start.md"
