#!/bin/bash
# Benchmark, not a test: session start. `errandctl run -- /bin/true` with full
# confinement (cgroup, every namespace, veth and NAT, BPF attached and
# verified, DNS responder, Landlock, seccomp) through errand-agent with its
# warm pool (sandbox.pool 2, the default) and without (sandbox.pool 0), with
# --egress none, and embedded (no agent: errandctl does it all itself), side
# by side with bubblewrap unsharing everything and plain unshare, in one
# hyperfine run. All run from the world's agent namespace, so each pays the
# same nsenter. RUNS tunes it.
set -u
. "$(dirname "$0")/lib.sh"

RUNS=${RUNS:-30}
for t in hyperfine bwrap; do
	command -v "$t" >/dev/null || { echo "bench/start.sh needs $t (make bench installs it)" >&2; exit 1; }
done
world_up >/dev/null
ns="nsenter --net=/run/netns/$W-host"
# Two agents of their own paths: one with the pool, one without; and a
# configuration no agent serves, for the embedded arm.
W_CONFIG=$(world_config start-pool '"pool": 2')
pool_cfg=$W_CONFIG
agent_start >/dev/null || exit 1
nopool_cfg=$(world_config start-nopool '"pool": 0')
sed -i "s|/run/$W\"|/run/$W-np\"|; s|/sys/fs/bpf/$W\"|/sys/fs/bpf/$W-np\"|; s|\"cgroup\": \"$W\"|\"cgroup\": \"$W-np\"|; s|$W_DIR/state\"|$W_DIR/state-np\"|" "$nopool_cfg"
W_CONFIG=$nopool_cfg AGENT_LOG=$W_DIR/agent-np.log agent_start >/dev/null || exit 1
embedded_cfg=$(world_config start-embedded)
sed -i "s|/run/$W\"|/run/$W-em\"|; s|/sys/fs/bpf/$W\"|/sys/fs/bpf/$W-em\"|; s|\"cgroup\": \"$W\"|\"cgroup\": \"$W-em\"|; s|$W_DIR/state\"|$W_DIR/state-em\"|" "$embedded_cfg"
hyperfine -N --warmup 3 --runs "$RUNS" --export-markdown "$W_DIR/start.md" \
	-n "errandctl run -- /bin/true (agent, pool)" "$ns $ERRANDCTL run --config $pool_cfg -- /bin/true" \
	-n "errandctl run -- /bin/true (agent, no pool)" "$ns $ERRANDCTL run --config $nopool_cfg -- /bin/true" \
	-n "errandctl run --egress none -- /bin/true (agent)" "$ns $ERRANDCTL run --config $pool_cfg --egress none -- /bin/true" \
	-n "errandctl run -- /bin/true (embedded)" "$ns $ERRANDCTL run --config $embedded_cfg -- /bin/true" \
	-n "bwrap --unshare-all" "$ns bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true" \
	-n "unshare -Urnpf --mount-proc" "$ns unshare -Urnpf --mount-proc /bin/true" 2>&1 | grep -v '^ *$'
cat "$W_DIR/start.md"
