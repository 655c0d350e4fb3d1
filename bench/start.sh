#!/bin/bash
# Benchmark, not a test: session start. `errandctl run -- /bin/true` with full
# confinement (cgroup, every namespace, veth and NAT, BPF attached and
# verified, DNS responder, Landlock, seccomp) side by side with bubblewrap
# unsharing everything and plain unshare, in one hyperfine run. All three run
# from the world's agent namespace, so each pays the same nsenter.
# RUNS tunes it.
set -u
. "$(dirname "$0")/lib.sh"

RUNS=${RUNS:-30}
for t in hyperfine bwrap; do
	command -v "$t" >/dev/null || { echo "bench/start.sh needs $t (make bench installs it)" >&2; exit 1; }
done
world_up >/dev/null
W_CONFIG=$(world_config start)
ns="nsenter --net=/run/netns/$W-host"
hyperfine -N --warmup 3 --runs "$RUNS" --export-markdown "$W_DIR/start.md" \
	-n "errandctl run -- /bin/true" "$ns $ERRANDCTL run --config $W_CONFIG -- /bin/true" \
	-n "errandctl run --egress none -- /bin/true" "$ns $ERRANDCTL run --config $W_CONFIG --egress none -- /bin/true" \
	-n "bwrap --unshare-all" "$ns bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true" \
	-n "unshare -Urnpf --mount-proc" "$ns unshare -Urnpf --mount-proc /bin/true" 2>&1 | grep -v '^ *$'
cat "$W_DIR/start.md"
