#!/bin/bash
# Guarantee: concurrent sessions are enforced apart: each has its own address, allow map and events, and one session's start or end never touches another's objects.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_start --pin a.test=$HOST_A:443 --egress a.test:443 || { world_finish; exit 1; }
X=$SESSION
X_ERR=$RUN_ERR
x_objects=$(leftovers)
x_addr=$(in_session "$X" "$IP" -4 -o addr show dev eth0 | awk '{ print $4 }')

# Inside a session netlink is closed (seccomp), so its address is read from
# its gateway, the nameserver: errand gives the session the next address.
errand_run --pin b.test=$HOST_B:443 --egress b.test:443 -- sh -c "echo \"sid=\$ERRAND_SESSION\"; gw=\$(sed -n 's/^nameserver *//p' /etc/resolv.conf); echo \"addr=\${gw%.*}.\$((\${gw##*.} + 1))/30\"; $(probe_script \
	a "tcp $HOST_A 443" \
	b "tcp $HOST_B 443" \
	x "tcp ${x_addr%/*} 443")"
Y=$(result sid)
assert_ne "$Y" "$X" "the second session has an id of its own"
assert_ne "$(result addr)" "$x_addr" "... and an address of its own (first: $x_addr)"
assert_eq "$(result b)" "ok hello $HOST_B:443" "the second session reaches its own pinned host $HOST_B:443"
assert_eq "$(result a)" EPERM "... but not the first session's pinned host $HOST_A:443"
assert_eq "$(event_count "session=$Y .*addr=$HOST_A port=443 reason=not-allowed")" 1 "the second session's refusal is its own event"
assert_eq "$(result x)" EPERM "the second session cannot reach the first session's address ${x_addr%/*}"
assert_eq "$(event_count "session=$Y .*addr=${x_addr%/*} port=443 reason=forbidden")" 1 "... reason forbidden"
assert_eq "$(grep -c "session=$Y" "$X_ERR")" 0 "the first session's errandctl reports none of the second's events"
assert_eq "$(leftovers)" "$x_objects" "the second session's start and end left the first session's objects as they were"

# The first session still holds its policy, at the backstop too.
assert_eq "$(in_session "$X" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" "the first session's netns still reaches $HOST_A:443"
assert_eq "$(in_session "$X" "$PROBE" tcp $HOST_B 443 --timeout 2)" ETIMEDOUT "... and still not $HOST_B:443"
assert_eq "$(in_session "$X" "$PROBE" tcp "$(result addr | cut -d/ -f1)" 443 --timeout 2)" ETIMEDOUT \
	"root in the first session's netns does not reach the second session's address either (tc)"

# A pool with room for four sessions, the first of which is taken by X: three
# more start, a fifth concurrent one is refused whole.
x_session=$SESSION x_pid=$BG_PID x_out=$BG_OUT x_err=$BG_ERR
W_CONFIG=$(world_config pool16 '"addressPool": "10.213.0.0/28"')
extra=()
for i in 1 2 3; do
	if errand_start --egress open; then
		extra+=("$SESSION $BG_PID $BG_OUT $BG_ERR")
	else
		_notok "session $i of 3 more in a /28 pool starts"
	fi
done
assert_eq "${#extra[@]}" 3 "three more sessions fill the /28 pool"
before=$(leftovers)
errand_run --egress open -- echo ran
assert_eq "$RUN_RC" 125 "with the pool used up, another session is refused (125)"
assert_eq "$(grep -Evc "weakened|^errand: gap:" "$RUN_ERR")" 1 "... with one line on stderr"
assert_empty "$(cat "$RUN_OUT")" "... and its command does not run"
assert_eq "$(leftovers)" "$before" "... and nothing of it is created, nothing of the others touched"
for e in "${extra[@]}"; do
	read -r SESSION BG_PID BG_OUT BG_ERR <<<"$e"
	errand_stop >/dev/null
done
SESSION=$x_session BG_PID=$x_pid BG_OUT=$x_out BG_ERR=$x_err
W_CONFIG=$(world_config default)

errand_stop
assert_match "$(event_count "session=$X refused proto=tcp addr=$HOST_B port=443 reason=not-allowed hook=tc")" '^[1-9]' \
	"the first session's errandctl reports its tc refusals"
assert_eq "$(event_count "session=$X ")" "$(event_count .)" "... and names no other session in its events"
assert_empty "$(leftovers)" "both sessions are gone, nothing left"

world_finish
