#!/bin/bash
# Guarantee: concurrent sessions resolve apart: a name one session resolves opens its addresses for that session only; another session allowed the same name still needs its own answer (each has its own responder and allow map).
# shellcheck disable=SC2016 # $NS, $P and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dns)

# Session 1 resolves api.test and connects, then waits for bg_go; by then
# session 2 has resolved other.test; session 1, allowed it too but without
# asking, must still be refused $HOST_B.
s1='NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1)
P='"$PROBE"'
echo "dns=$($P dns $NS api.test 2>&1 | tail -n 1)"
echo "a=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
'"$(bg_wait_sh)"'
echo "b=$($P tcp '"$HOST_B"' 443 2>&1 | tail -n 1)"
echo "a2=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
exec sleep 60'
errand_start --egress api.test --egress other.test -- sh -c "$s1" || { world_finish; exit 1; }
S1=$SESSION
bg_wait '^a=' || true
assert_match "$(bg_result dns)" "^answer NOERROR addrs=$HOST_A " "session 1 resolves api.test"
assert_eq "$(bg_result a)" "ok hello $HOST_A:443" "session 1 reaches $HOST_A:443"

errand_run --egress api.test --egress other.test -- sh -c "$(session_ns_sh)$(probe_script \
	a "tcp $HOST_A 443" \
	dns 'dns $NS other.test' \
	b "tcp $HOST_B 443")"
assert_eq "$RUN_RC" 0 "session 2 ran"
assert_eq "$(result a)" EPERM "session 2, allowed api.test but not having asked, is refused $HOST_A:443"
assert_eq "$(event_count "addr=$HOST_A port=443 reason=not-allowed")" 1 "... with a not-allowed event in session 2"
assert_match "$(result dns)" "^answer NOERROR addrs=$HOST_B " "session 2 resolves other.test"
assert_eq "$(result b)" "ok hello $HOST_B:443" "session 2 reaches $HOST_B:443"
assert_not_contains "$RUN_STDERR" "session=$S1 " "session 2's errandctl reports nothing of session 1"

bg_go || true
bg_wait '^a2=' || true
assert_eq "$(bg_result b)" EPERM "session 1 is still refused $HOST_B:443 (other.test resolved in session 2 only)"
assert_eq "$(bg_result a2)" "ok hello $HOST_A:443" "session 1 still reaches its own $HOST_A:443"
errand_stop
assert_eq "$(event_count "session=$S1 refused proto=tcp addr=$HOST_B port=443 reason=not-allowed")" 1 \
	"session 1 has a not-allowed event for $HOST_B:443"
assert_eq "$(event_count "addr=$HOST_A port=443 ")" 0 "session 1 has no event for $HOST_A:443"
assert_empty "$(leftovers)" "nothing left behind"

world_finish
