#!/bin/bash
# Guarantee: while no errand responder serves a session (errand-agent killed), its DNS gets no answer, never another process's: a resolver on 0.0.0.0:53 in the agent's namespace (UDP and TCP) sees none of the session's queries, because the session's launcher holds the responder's sockets, bound to the gateway's port 53, and never passes them to the session; the restarted agent takes them back and the session's DNS answers again from errand.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config dnsdown)
agent_start || exit 1

# A resolver of the host, as dnsmasq would run it: every name is $HOST_B,
# UDP and TCP on 0.0.0.0:53 with SO_REUSEADDR; each query logged with its source.
cat >"$W_DIR/rogue.py" <<'EOPY'
import socket, select, struct, sys
log = open(sys.argv[1], "a", buffering=1)
def answer(q):
    # header: id, QR RD RA, 1 question, 1 answer; the question; A 198.18.1.11
    end = 12
    while q[end]:
        end += q[end] + 1
    end += 5
    return q[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00" + q[12:end] + \
        b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton("198.18.1.11")
socks, state = [], []
for kind, t in (("udp", socket.SOCK_DGRAM), ("tcp", socket.SOCK_STREAM)):
    s = socket.socket(socket.AF_INET, t)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", 53))
        if t == socket.SOCK_STREAM:
            s.listen(16)
        socks.append((kind, s))
        state.append(kind + "=bound")
    except OSError as e:
        state.append(kind + "=" + (e.strerror or str(e)).replace(" ", "-"))
print("ready " + " ".join(state), flush=True)
while True:
    r, _, _ = select.select([s for _, s in socks], [], [])
    for kind, s in socks:
        if s not in r:
            continue
        if kind == "udp":
            q, src = s.recvfrom(4096)
            log.write("query from %s udp\n" % src[0])
            s.sendto(answer(q), src)
        else:
            c, src = s.accept()
            c.settimeout(2)
            try:
                n = struct.unpack("!H", c.recv(2))[0]
                q = c.recv(n)
                log.write("query from %s tcp\n" % src[0])
                a = answer(q)
                c.sendall(struct.pack("!H", len(a)) + a)
            except Exception:
                pass
            c.close()
EOPY

errand_start --egress api.test -- sh -c "$(session_ns_sh)"'P='"$PROBE"'
echo "sockets=$(ls -l /proc/$$/fd/ 2>/dev/null | grep -c socket:)"
while :; do
	echo "udp=$($P dns $NS api.test --timeout 2 2>&1 | tail -n 1)"
	echo "tcp=$($P dns $NS api.test --tcp --timeout 2 2>&1 | tail -n 1)"
	echo "any=$($P dns 198.18.0.1 api.test --timeout 2 2>&1 | tail -n 1)"
	echo "v6=$($P dns 2001:4860::8888 api.test --timeout 2 2>&1 | tail -n 1)"
	echo round
	sleep 0.2
done' || exit 1
bg_rounds 1 20
assert_eq "$(bg_result sockets)" 0 "the session's command holds no socket (the launcher's DNS sockets are not passed on)"
assert_match "$(bg_result udp)" "^answer NOERROR addrs=$HOST_A " "control: errand answers the session's DNS over UDP"
assert_match "$(bg_result tcp)" "^answer NOERROR addrs=$HOST_A " "control: ... and over TCP"
assert_match "$(bg_result v6)" "^answer NOERROR addrs=$HOST_A " "control: ... and sent to an IPv6 address"

agent_kill9
: >"$W_DIR/rogue.log"
_start_ready host "$W_DIR/rogue.out" python3 "$W_DIR/rogue.py" "$W_DIR/rogue.log" || exit 1
trace "the host's resolver: $(cat "$W_DIR/rogue.out")"
assert_match "$(in_host "$PROBE" dns 198.18.0.1 api.test)" "^answer NOERROR addrs=$HOST_B " \
	"control: the host's resolver answers on 0.0.0.0:53 in the agent's namespace"
bg_rounds 2 40
assert_match "$(bg_result udp)" "^(timeout|answer SERVFAIL)" "agent killed: the session's UDP query gets no answer"
assert_match "$(bg_result tcp)" "^(timeout|closed|answer SERVFAIL)" "agent killed: ... nor its TCP query"
assert_match "$(bg_result any)" "^(timeout|answer SERVFAIL)" "agent killed: ... nor a query to the agent's own address"
assert_match "$(bg_result v6)" "^(timeout|answer SERVFAIL)" "agent killed: ... nor one sent to an IPv6 address"
assert_empty "$(grep -v 'from 198\.18\.0\.1 ' "$W_DIR/rogue.log")" "the host's resolver saw none of the session's queries"

agent_start || exit 1
assert_match "$(cat "$AGENT_LOG")" "session $SESSION adopted" "the restarted agent adopts the session"
assert_no_match "$(cat "$AGENT_LOG")" "session $SESSION: its launcher holds no DNS sockets" \
	"... taking its DNS sockets back from the launcher"
bg_rounds 2 40
assert_match "$(bg_result udp)" "^answer NOERROR addrs=$HOST_A " "after the restart, errand answers the session's DNS over UDP"
assert_match "$(bg_result tcp)" "^answer NOERROR addrs=$HOST_A " "... and over TCP"
assert_match "$(bg_result v6)" "^answer NOERROR addrs=$HOST_A " "... and sent to an IPv6 address"
assert_empty "$(grep -v 'from 198\.18\.0\.1 ' "$W_DIR/rogue.log")" "the host's resolver still saw none of the session's queries"
errand_stop
world_finish
