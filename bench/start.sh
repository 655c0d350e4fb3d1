#!/bin/bash
# Benchmark, not a test: session start. `errandctl run -- /bin/true` with full
# confinement (cgroup, every namespace, veth and NAT, BPF attached and
# verified, DNS responder, Landlock, seccomp) through errand-agent with its
# warm pool (sandbox.pool 2, the default) and without (sandbox.pool 0), with
# --egress none, and embedded (no agent: errandctl does it all itself), side
# by side with bubblewrap unsharing everything and plain unshare, in one
# hyperfine run a round. All run from the world's agent namespace, so each
# pays the same nsenter. ROUNDS rounds (5) of RUNS runs an arm (10), the
# arms taking turns going first; each figure is the median of the rounds'
# means, each ratio the median of the rounds' own. It runs twice: back to
# back, where each start shares two CPUs with the agent's teardown of the
# session before and its refill of the pool, and with each run 0.1 s after
# the last ended, so those are done (PAUSES, "0 0.1"; PAUSE=SECONDS for one
# alone). Each arm begins a second after the last one's runs, once their
# teardowns are done: bwrap binds the whole mount tree, and a namespace file
# of the embedded arm's last session unmounted meanwhile failed its run.
set -u
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-5}
RUNS=${RUNS:-10}
# PAUSE=SECONDS alone, or PAUSES="0 0.1" (the default): back to back, then
# paused
PAUSES=${PAUSES:-${PAUSE:-0 0.1}}
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
names=("errandctl run -- /bin/true (agent, pool)" "errandctl run -- /bin/true (agent, no pool)"
	"errandctl run --egress none -- /bin/true (agent)" "errandctl run -- /bin/true (embedded)"
	"bwrap --unshare-all" "unshare -Urnpf --mount-proc")
cmds=("$(in_ns host) $ERRANDCTL run --config $pool_cfg -- /bin/true"
	"$(in_ns np) $ERRANDCTL run --config $nopool_cfg -- /bin/true"
	"$(in_ns host) $ERRANDCTL run --config $pool_cfg --egress none -- /bin/true"
	"$(in_ns em) $ERRANDCTL run --config $embedded_cfg -- /bin/true"
	"$(in_ns host) bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true"
	"$(in_ns host) unshare -Urnpf --mount-proc /bin/true")
n=${#names[@]}
# One table a pause: back to back (0), and each start a while after the last
# ended (its session torn down, the pool refilled), as a shell that runs a
# session per tool call has it.
for pause in $PAUSES; do
	for round in $(seq 1 "$ROUNDS"); do
		args=()
		for k in $(seq 0 $((n - 1))); do
			i=$(((k + round - 1) % n)) # round r starts with arm r
			args+=(-n "${names[$i]}" "${cmds[$i]}")
		done
		prep=()
		[ "$pause" = 0 ] || prep=(--prepare "sleep $pause")
		if ! hyperfine -N ${HF_ARGS:-} "${prep[@]}" --cleanup "sleep 1" --warmup 3 \
			--runs "$RUNS" --export-json "$W_DIR/start-$round.json" "${args[@]}" >"$W_DIR/start-$round.out" 2>&1; then
			cat "$W_DIR/start-$round.out"
			exit 1
		fi
	done
	if [ "$pause" = 0 ]; then
		what="back to back"
	else
		what="each run $pause s after the last ended (its teardown and the pool's refill done)"
	fi
	echo "start benchmark: $(uname -r), $(nproc) cores, $what, median of $ROUNDS rounds of $RUNS runs an arm (each round's mean; a ratio: of the rounds' own)"
	python3 - "$W_DIR" "$ROUNDS" "${names[@]}" <<'PY'
import json, statistics, sys
d, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
means = {name: [] for name in names}
for r in range(1, rounds + 1):
    for res in json.load(open("%s/start-%d.json" % (d, r)))["results"]:
        means[res["command"]].append(res["mean"] * 1e3)
med = lambda v: statistics.median(v)
bw, un = means["bwrap --unshare-all"], means["unshare -Urnpf --mount-proc"]
print("%-50s %9s %9s %9s" % ("", "mean (ms)", "x bwrap", "x unshare"))
for name in names:
    m = means[name]
    print("%-50s %9.1f %9.2f %9.2f" % (name, med(m), med([a / b for a, b in zip(m, bw)]),
                                       med([a / b for a, b in zip(m, un)])))
print("rounds' means (ms):")
for name in names:
    print("  %-48s %s" % (name, " ".join("%.1f" % x for x in means[name])))
PY
done
