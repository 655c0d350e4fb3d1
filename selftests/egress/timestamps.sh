#!/bin/bash
# Guarantee: every session's TCP timestamps run on one clock, the host's, with no offset of the session's address or ports (a SYN's TSval from a session started later is never older than one from an earlier session, or from an earlier connection of the same), so a peer that still holds the NAT address's port in TIME_WAIT takes the next session's SYN on it (PAWS) instead of dropping it for a second; a session cannot change that setting; what leaves the session carries that clock moved by a number of the boot's own (not the host's uptime), and what comes back has its echo moved back.
# shellcheck disable=SC2016 # $P expands in the session's shell
# selftests-timeout: 90
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config timestamps)
_start_ready wan "$W_DIR/syn.out" "$PROBE" syn-serve --log "$W_DIR/syn.log" 198.18.1.10:7070 || exit 1
agent_start >/dev/null || exit 1
two='P='"$PROBE"'; echo "c1=$($P tcp 198.18.1.10 7070)"; echo "c2=$($P tcp 198.18.1.10 7070)"'
knob='echo "knob=$(cat /proc/sys/net/ipv4/tcp_timestamps)"
if echo 1 >/proc/sys/net/ipv4/tcp_timestamps 2>/dev/null; then echo set=yes; else echo set=no; fi
echo "after=$(cat /proc/sys/net/ipv4/tcp_timestamps)"'

# Session A holds its address while B runs beside it: two sessions, two
# addresses, leaving through the one NAT address.
errand_start --pin a.test=198.18.1.10 --egress a.test:7070 -- sh -c "$two; echo done; sleep 60" || exit 1
a=$SESSION a_pid=$BG_PID a_out=$BG_OUT a_err=$BG_ERR
bg_wait '^done$' 10
assert_eq "$(bg_result c2)" "ok errand-probe" "control: session A reaches the server twice"
a_addr=$(in_session "$a" "$IP" -4 -o addr show dev eth0 | awk '{print $4}')
sleep 1.2
errand_start --pin a.test=198.18.1.10 --egress a.test:7070 -- sh -c "$two; $knob; echo done; sleep 60" || exit 1
bg_wait '^done$' 10
assert_eq "$(bg_result c2)" "ok errand-probe" "control: session B reaches it twice too"
b_addr=$(in_session "$SESSION" "$IP" -4 -o addr show dev eth0 | awk '{print $4}')
assert_match "$a_addr" '^[0-9.]+/[0-9]+$' "control: session A's address ($a_addr)"
assert_ne "$b_addr" "$a_addr" "control: session B's address ($b_addr) is another"
assert_eq "$(bg_result knob)" 2 "a session's tcp_timestamps is 2: timestamps without a random offset"
assert_eq "$(bg_result set) $(bg_result after)" "no 2" "the session cannot write it back"
errand_stop
SESSION=$a BG_PID=$a_pid BG_OUT=$a_out BG_ERR=$a_err
errand_stop

# Four SYNs, in the order sent: A's two, then B's two 1.2 s and more later.
# With offsets of their own (tcp_timestamps=1) each pair differs by a random
# 32-bit number; on one clock, by the milliseconds between them (modulo
# 2^32, as the clock wraps; one going back shows as some four billion).
mapfile -t ts < <(sed -n 's/^tsval //p' "$W_DIR/syn.log")
assert_eq "${#ts[@]}" 4 "the server saw four SYNs, each with a timestamp (${ts[*]})"
ms() { [[ "${ts[$1]}${ts[$2]}" =~ ^[0-9]+$ ]] && echo $(((ts[$2] - ts[$1]) & 0xffffffff)); }
assert_le "$(ms 0 1)" 5000 "A's second SYN: no older than its first, and not a random offset away ($(ms 0 1) ms)"
assert_ge "$(ms 1 2)" 1000 "B's first SYN: 1.2 s and more of the same clock after A's last ($(ms 1 2) ms)"
assert_le "$(ms 1 2)" 30000 "... not a random offset away"
assert_le "$(ms 2 3)" 5000 "B's second SYN: no older than its first ($(ms 2 3) ms)"
# That clock is moved by a number of the boot's own on its way out: a SYN
# does not carry the host's uptime in milliseconds (the kernel's clock for
# timestamps=2) but something else, which the controls above show the
# session gets back as its own (a SYN-ACK echoing another value resets the
# connect).
up=$(awk '{printf "%d", $1 * 1000}' /proc/uptime)
last=${ts[3]:-}
[[ "$last" =~ ^[0-9]+$ ]] || last=0
assert_ne "$last" 0 "B's last SYN carried a timestamp (${ts[3]:-none})"
off=$(((last - up) & 0xffffffff))
assert_ge "$(((off + 60000) & 0xffffffff))" 120000 \
	"a SYN's timestamp is not the host's uptime ($up ms) give or take a minute ($last)"
world_finish
