#!/bin/bash
# Guarantee: a session's DNS is parsed, answered and resolved upstream by a worker process of its own (the agent's binary exec'd again, sharing none of the agent's memory), running as errand-dns with no capabilities, no_new_privs, a seccomp filter and no descriptor but sockets (what it sends on its gateway socket reaches the session alone, never a wan host), started at the session's first query (none before); a fully compromised worker (its channel to the agent taken over) gets programmed only what the session's policy admits: a name the session may not resolve, a forbidden address (10.x, 169.254.169.254, v4-mapped in AAAA, a pinned one), the host's own address or the gateway, more addresses than dns.maxAddresses, more names than dns.maxWildcardNames, a flag, or a malformed message are refused (the last ends the worker), and a pinned entry is never overwritten; while no worker runs the session's DNS gets no answer, the agent starts a new one, and a worker dies with its agent.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config worker '"maxAddresses": 4, "maxWildcardNames": 2')
agent_start || exit 1
EVIL=$ROOT/build/selftests/dnsevil
PIN=198.18.1.77
PIN10=10.1.2.3

worker_of() { pgrep -P "$1" -u errand-dns -r R,S,D,T; }
wait_worker() {
	local n=0 w
	while [ $n -lt 100 ]; do
		w=$(worker_of "$AGENT_PID")
		[ -n "$w" ] && [ "$w" != "${1:-}" ] && { echo "$w"; return 0; }
		sleep 0.05
		n=$((n + 1))
	done
	return 1
}
# gone, or a zombie left to a reaper that has not reaped it yet
dead() { case $(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null) in "" | Z) echo gone ;; *) echo alive ;; esac; }
show() { "$ERRANDCTL" --config "$W_CONFIG" show "$SESSION" 2>&1; }

errand_start --egress api.test --egress '*.wild.test' --egress pub.test --pin "pub.test=$PIN" \
	--egress pin10.test --pin "pin10.test=$PIN10" -- sh -c "$(bg_wait_sh)$(session_ns_sh)"'echo "ns=$NS"; P='"$PROBE"'
while :; do
	echo "udp=$($P dns $NS api.test --timeout 1 2>&1 | tail -n 1)"
	echo "b=$($P tcp '"$HOST_B"' 443 --timeout 1 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
# Until the session's first query, no worker: a session that never resolves
# a name has none.
bg_wait '^waiting=1' && sleep 0.5
assert_eq "$(worker_of "$AGENT_PID" | wc -l)" 0 "no DNS worker runs for a session that has not asked yet"
bg_go
bg_rounds 1 20
GW=$(bg_result ns)
assert_match "$(bg_result udp)" "^answer NOERROR addrs=$HOST_A " "control: the session's DNS is answered"

wk=$(wait_worker) || { echo "# no worker of the agent runs as errand-dns"; ps -ef --forest | sed 's/^/#   /'; }
assert_eq "$(worker_of "$AGENT_PID" | wc -l)" 1 "one DNS worker runs for the session, a child of the agent, as errand-dns"
uid=$(id -u errand-dns)
assert_eq "$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$wk/status")" "$uid $uid $uid $uid" "its real, effective, saved and file-system uids are errand-dns's"
assert_eq "$(awk '/^Groups:/ { print $2 }' "/proc/$wk/status")" "" "... with no supplementary group"
assert_eq "$(grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' "/proc/$wk/status" | awk '{ print $2 }' | sort -u)" 0000000000000000 \
	"it holds no capability (inheritable, permitted, effective, bounding, ambient)"
assert_eq "$(awk '/^NoNewPrivs:/ { print $2 }' "/proc/$wk/status")" 1 "no_new_privs is set"
assert_eq "$(awk '/^Seccomp:/ { print $2 }' "/proc/$wk/status")" 2 "a seccomp filter is loaded"
fds=$(for f in /proc/"$wk"/fd/*; do readlink "$f"; done)
trace "its descriptors: $(echo "$fds" | tr '\n' ' ')"
assert_eq "$(echo "$fds" | grep -vc '^socket:\[')" 0 "every descriptor it holds is a socket"
assert_le 3 "$(echo "$fds" | sort -u | wc -l)" "... its channel and its DNS sockets"
# Exec'd, not forked: a fork shares every page of the agent's (copy-on-write)
# and keeps the agent's command line.
assert_eq "$(tr '\0' '\n' <"/proc/$wk/cmdline" | head -n 1)" errand-dns \
	"the worker is a program of its own (argv[0] errand-dns), not a fork of the agent"
assert_eq "$(readlink "/proc/$wk/exe")" "$(readlink "/proc/$AGENT_PID/exe")" "... the agent's own binary, exec'd again"
# Anonymous pages shared with another process (the agent's, after a fork)
# count in Pss_Anon for a share only. (Not Shared_Dirty: a binary just
# rebuilt has dirty page cache, which the agent maps too.)
trace "the worker's memory: $(tr -s ' \n' ' ' <"/proc/$wk/smaps_rollup")"
anon=$(awk '/^Anonymous:/ { print $2 }' "/proc/$wk/smaps_rollup")
pss_anon=$(awk '/^Pss_Anon:/ { print $2 }' "/proc/$wk/smaps_rollup")
assert_eq "$pss_anon" "$anon" "every anonymous page it holds is its own, none the agent's (Pss_Anon = Anonymous, ${anon} kB)"

# A compromised worker: its channel, taken while it is stopped.
kill -STOP "$wk"
bg_rounds 2 20
assert_match "$(bg_result udp)" "^timeout" "a stopped worker: the session's query gets no answer (fails closed)"
# Code in the worker sends UDP on its socket on the gateway to a host of the
# wan that is no upstream resolver: the socket is bound to the session's
# link, so nothing reaches the host; from the same address on a socket of
# root's own it does (control).
world_serve wan "$W_DIR/udp-b.log" "udp:$HOST_B:5353" || exit 1
in_host "$PROBE" udp "$HOST_B" 5353 --from "$GW" >/dev/null 2>&1
sleep 0.3
assert_match "$(cat "$W_DIR/udp-b.log")" "recv udp" "control: UDP from the gateway's address reaches $HOST_B:5353"
: >"$W_DIR/udp-b.log"
evil_udp=$("$EVIL" "$wk" udp 5 "$HOST_B" 5353 2>&1)
trace "the worker's fd 5: $(readlink "/proc/$wk/fd/5"); its UDP to $HOST_B:5353: $evil_udp"
assert_eq "$evil_udp" sent "the worker's gateway UDP socket (fd 5) sends"
sleep 0.3
assert_eq "$(grep -c 'recv udp' "$W_DIR/udp-b.log")" 0 \
	"UDP the worker sends on its gateway socket to $HOST_B:5353 (no resolver) does not reach it"
out=$("$EVIL" "$wk" \
	program api.test A "$HOST_A" 30 \
	program evil.test A "$HOST_B" \
	program api.test A 10.0.0.1 \
	program api.test A "$HOST_META" \
	program api.test AAAA ::ffff:198.18.1.12 \
	program api.test A "$AGENT_ADDR" \
	program api.test A "$GW" \
	program api.test A "$HOST_A,10.0.0.2" \
	program pin10.test A "$PIN10" \
	program api.test A "$HOST_A" 30 1 \
	many api.test 5 \
	program a.wild.test A 198.18.1.21 \
	program b.wild.test A 198.18.1.22 \
	program c.wild.test A 198.18.1.23 \
	program pub.test A "$PIN" 5 \
	program api.test A "$PIN" 5 \
	event "evil.test" 99 \
	program api.test A 198.18.1.24 2>&1)
trace "the agent's answers: $(echo "$out" | tr '\n' '|')"
line() { echo "$out" | sed -n "${1}p"; }
assert_eq "$(line 1)" "reply 0 ttl=30" "control: an allowed name's public address is programmed"
assert_eq "$(line 2)" "reply EPERM" "a name the session may not resolve is refused"
assert_eq "$(line 3)" "reply EACCES" "a private address (10.0.0.1) is refused"
assert_eq "$(line 4)" "reply EACCES" "the cloud metadata address is refused"
assert_eq "$(line 5)" "reply EACCES" "an IPv4 address mapped into AAAA is refused"
assert_eq "$(line 6)" "reply EACCES" "the host's own address ($AGENT_ADDR) is refused"
assert_eq "$(line 7)" "reply EACCES" "the session's gateway ($GW) is refused"
assert_eq "$(line 8)" "reply EACCES" "one forbidden address among good ones refuses the whole request"
assert_eq "$(line 9)" "reply EACCES" "a pinned name's forbidden address is refused through a request (pins are not the worker's)"
assert_eq "$(line 10)" "reply EBADMSG" "a request with a flag (as a pin would be) is refused"
assert_eq "$(line 11)" "reply EDQUOT" "more addresses than dns.maxAddresses (4) are refused"
assert_eq "$(line 12)" "reply 0 ttl=60" "control: a first name under *.wild.test"
assert_eq "$(line 13)" "reply 0 ttl=60" "control: a second"
assert_eq "$(line 14)" "reply EDQUOT" "a third name under *.wild.test is over dns.maxWildcardNames (2)"
assert_eq "$(line 15)" "reply 0 ttl=5" "a public pinned address asked for again is answered ..."
assert_eq "$(line 17)" "sent" "a denied-name event with an unknown reason ..."
assert_eq "$(line 18)" "closed" "... ends the worker: the agent closes its channel"
sleep 0.3
assert_eq "$(dead "$wk")" gone "the misbehaving worker is gone"
assert_match "$(cat "$AGENT_LOG")" "the DNS worker \\(pid $wk\\) sent a malformed message" "the agent logs why it ended the worker"
assert_match "$(cat "$AGENT_LOG")" "refused [0-9]+ request\\(s\\) of its DNS worker" "the agent logs the refusals"
map=$(show)
trace "allow map: $(echo "$map" | sed -n '/^allow map/,/^programs/p' | tr '\n' '|')"
assert_match "$map" "$HOST_A +443 +expires" "control: $HOST_A:443 is in the allow map"
for a in "$HOST_B" 10.0.0.1 10.0.0.2 "$HOST_META" ::ffff:198.18.1.12 "$AGENT_ADDR" "$GW" 198.18.2. 198.18.1.23 198.18.1.24; do
	assert_no_match "$(echo "$map" | sed -n '/^allow map/,/^programs/p')" "^  ${a//./\\.}[0-9]* " "no allow entry for $a"
done
assert_match "$map" "$PIN +443 +no expiry, pinned" "the pinned entry for $PIN is still the pin (no expiry), not the request's"
assert_match "$map" "$PIN10 +443 +no expiry, pinned" "... and so is the one for $PIN10"
bg_rounds 2 20
assert_eq "$(bg_result b)" EPERM "the session still cannot reach $HOST_B:443"

# The agent starts a new worker, which answers.
wk2=$(wait_worker "$wk") || echo "# no new worker"
assert_ne "$wk2" "" "a new worker runs (pid $wk2)"
bg_rounds 2 20
assert_match "$(bg_result udp)" "^answer NOERROR addrs=$HOST_A " "the new worker answers the session's DNS"
kill -STOP "$wk2"
assert_eq "$("$EVIL" "$wk2" raw 100 2>&1)" closed "a message of the wrong size ends the worker"
wk3=$(wait_worker "$wk2") || echo "# no new worker"
kill -KILL "$wk3"
wk4=$(wait_worker "$wk3") || echo "# no new worker"
assert_ne "$wk4" "" "a worker killed outright is replaced"
assert_match "$(cat "$AGENT_LOG")" "the DNS worker \\(pid $wk3\\) ended" "... and the agent says it ended"
bg_rounds 2 20
assert_match "$(bg_result udp)" "^answer NOERROR addrs=$HOST_A " "... and DNS is answered again"

agent_kill9
sleep 0.5
assert_eq "$(dead "$wk4")" gone "the worker dies with its agent"
agent_start || exit 1
wk5=$(wait_worker) || echo "# no worker after the restart"
assert_ne "$wk5" "" "the restarted agent starts a worker for the adopted session"
bg_rounds 2 40
assert_match "$(bg_result udp)" "^answer NOERROR addrs=$HOST_A " "... which answers with the sockets taken back from the launcher"
errand_stop
world_finish
