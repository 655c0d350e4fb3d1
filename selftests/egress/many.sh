#!/bin/bash
# Guarantee: fifty sessions served by one errand-agent at once, all from one verified program set, are enforced apart: with the same name pinned to different addresses and the same hosts allowed, each reaches its own pin under that name, is refused the other's address, and hears only its own refusals, all of them live at once; and when they end no key of theirs is left in the set's maps.
# selftests-timeout: 900
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

N=${MANY_SESSIONS:-50}
# Sessions hold, after their probes, until every one has probed (their
# output says so) and the test releases them by a file in their project (the
# tree, where the probe is), which they need only read: they overlap by
# construction, however slowly a loaded host or an emulated CPU starts them
# (a fixed hold made the overlap, and the test, depend on start speed).
RELEASE=$ROOT/build/selftests/$W.release
rm -f "$RELEASE"
W_CONFIG=$(world_config many '"addressPool": "10.213.0.0/23"')
agent_start || { world_finish; exit 1; }

rss() { awk '/^VmRSS/ { print $2 }' "/proc/$AGENT_PID/status" 2>/dev/null; }
# started sessions: each has its record's policy; the agent's prepared pool
# entries (links attached already) have the file made ahead, still empty
sessions_live() { find "$W_DIR/state/sessions" -mindepth 2 -maxdepth 2 -name policy.json -size +0 2>/dev/null | wc -l; }
probed() { grep -l '^other=' "$W_DIR"/many*.out 2>/dev/null | wc -l; }
# sessions that probed or ended without
settled() { for i in $(seq 1 "$N"); do grep -q '^other=' "$W_DIR/many$i.out" 2>/dev/null || [ -e "$W_DIR/many$i.rc" ] && echo; done | wc -l; }

rss0=$(rss)
start=$(date +%s)
pids=()
for i in $(seq 1 "$N"); do
	if [ $((i % 2)) = 0 ]; then own=$HOST_A other=$HOST_B; else own=$HOST_B other=$HOST_A; fi
	script="echo sid=\$ERRAND_SESSION; $(probe_script own "resolve shared.test 443" other "tcp $other 443")"
	script+="n=0; while [ ! -e $RELEASE ] && [ \$n -lt 540 ]; do sleep 1; n=\$((n + 1)); done"
	(nsenter --net="/run/netns/$W-host" timeout -k 5 600 "$ERRANDCTL" run --config "$W_CONFIG" \
		--pin "shared.test=$own:443" --egress shared.test:443 --egress other.test:443 -- \
		sh -c "$script" </dev/null >"$W_DIR/many$i.out" 2>"$W_DIR/many$i.err"; echo $? >"$W_DIR/many$i.rc") &
	pids+=($!)
	W_BG_PIDS+=($!)
	# ramp: ten at a time, a pause between, memory watched
	if [ $((i % 10)) = 0 ]; then
		sleep 1
		trace "$i started, $(sessions_live) sessions live, $(probed) probed, agent RSS $(rss) KiB"
	fi
done
# Wait (bounded, for a hang, not a speed) until each has probed or ended.
for _ in $(seq 1 500); do
	[ "$(settled)" -ge "$N" ] && break
	sleep 1
done
started=$(($(date +%s) - start))
peak=$(sessions_live)
all_probed=$(probed)
rss_peak=$(rss)
one=$(find "/sys/fs/bpf/$W" -mindepth 1 -maxdepth 1 -type d ! -name prog | head -n 1)
kmem=0
for f in "$one"/*; do
	b=$(bpftool -j map show pinned "$f" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("bytes_memlock", 0))' 2>/dev/null)
	kmem=$((kmem + ${b:-0}))
done
trace "$all_probed of $N probed after $started s; $peak sessions live at once; agent RSS $rss0 -> $rss_peak KiB; one session's maps: $((kmem / 1024)) KiB (bpftool memlock)"
touch "$RELEASE"
for p in "${pids[@]}"; do wait "$p"; done
W_BG_PIDS=()

ok=0 refused=0 apart=0 ran=0
for i in $(seq 1 "$N"); do
	if [ $((i % 2)) = 0 ]; then own=$HOST_A other=$HOST_B; else own=$HOST_B other=$HOST_A; fi
	out=$W_DIR/many$i.out err=$W_DIR/many$i.err
	sid=$(sed -n 's/^sid=//p' "$out")
	[ "$(cat "$W_DIR/many$i.rc")" = 0 ] && ran=$((ran + 1))
	if [ "$(sed -n 's/^own=//p' "$out")" = "ok hello $own:443" ]; then
		ok=$((ok + 1))
	else
		trace "session $i ($sid): own=$(sed -n 's/^own=//p' "$out"), expected ok hello $own:443"
	fi
	if [ "$(sed -n 's/^other=//p' "$out")" = EPERM ]; then
		refused=$((refused + 1))
	else
		trace "session $i ($sid): other=$(sed -n 's/^other=//p' "$out"), expected EPERM"
	fi
	# its refusal is among its own events, which are nobody else's (an ICMP
	# error its kernel sent its gateway, for a DNS answer that came after
	# its resolver closed, is refused and listed too: its own, and no
	# connection's)
	den=$(in_host "$ERRANDCTL" --config "$W_CONFIG" denied "$sid" --json 2>&1 |
		python3 -c 'import json,sys; print(" ".join(sorted(set("%s:%s" % (x["addr"], x["port"]) for x in json.load(sys.stdin) if x.get("proto") != "icmp"))))' 2>&1)
	if [ -n "$sid" ] && [ "$den" = "$other:443" ]; then
		apart=$((apart + 1))
	else
		trace "session $i ($sid): denied $den, expected $other:443 alone"
		sed 's/^/#   /' "$err"
	fi
done
assert_eq "$ran" "$N" "all $N sessions ran and exited 0"
assert_eq "$ok" "$N" "each reached its own pin of shared.test (even: $HOST_A, odd: $HOST_B)"
assert_eq "$refused" "$N" "each was refused the other session's address"
assert_eq "$apart" "$N" "each session's denied list holds its own refusal and no other session's"
assert_eq "$all_probed" "$N" "all $N sessions probed while every one of them held"
assert_eq "$peak" "$N" "all $N sessions were live, attached, at once"
assert_eq "$(grep -c 'cannot load the egress' "$AGENT_LOG")" 0 "the agent loaded its programs once, at start, without error"
agent_stop
assert_empty "$(leftovers)" "all ended (and the agent stopped, with its prepared networks): no session dir, no session key left in the program set"
rm -f "$RELEASE"
world_finish
