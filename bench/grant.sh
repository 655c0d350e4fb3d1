#!/bin/bash
# Benchmark, not a test: how soon a grant reaches a running session. The
# session asks errand's responder for a name in a tight loop; the moment
# `errandctl grant` returns is taken on the host, the moment the session
# gets the answer and its connect is admitted is taken in the session (the
# same clock). Each round grants a new name (n1.wild.test, ...), whose
# address has a route and no server, so an admitted connect meets
# ECONNREFUSED and a refused one EPERM. ROUNDS tunes it.
set -u
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-30}
world_up >/dev/null
world_dns --silent >/dev/null 2>&1
world_dns >/dev/null || exit 1
W_CONFIG=$(dns_config grant)
agent_start >/dev/null || exit 1
errand_start -- python3 -c '
import socket, struct, sys, time, errno
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def query(name):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    s.sendto(q, (ns, 53))
    r = s.recv(512)
    s.close()
    return r[3] & 0x0f
print("ready", flush=True)
for i in range(1, int(sys.argv[1]) + 1):
    name = "n%d.wild.test" % i
    refused = []
    while True:
        t_send = time.time()
        if query(name) == 0:
            break
        refused.append(t_send)
    t_answer = time.time()
    t_last_refused = refused[-1] if refused else 0
    c = socket.socket()
    rc = c.connect_ex(("198.18.4.%d" % i, 443))
    t_conn = time.time()
    print("got %d %.6f %.6f %s %.6f %.6f" % (i, t_answer, t_conn, errno.errorcode.get(rc, rc),
                                            t_send, t_last_refused), flush=True)
' "$ROUNDS" >/dev/null || exit 1
bg_wait '^ready$' 10 || exit 1
: >"$W_DIR/granted"
for i in $(seq 1 "$ROUNDS"); do
	sleep 0.2
	in_host python3 -c '
import subprocess, sys, time
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print("%.6f" % time.time())' "$ERRANDCTL" --config "$W_CONFIG" grant "$SESSION" "n$i.wild.test" always >>"$W_DIR/granted"
done
bg_wait "^got $ROUNDS " 10 || exit 1
paste -d' ' <(grep '^got ' "$BG_OUT") "$W_DIR/granted" |
	awk '{ printf "%.0f %.0f %s %.0f %.0f\n", ($3 - $8) * 1e6, ($4 - $8) * 1e6, $5, ($3 - $6) * 1e6, ($7 - $8) * 1e6 }' >"$W_DIR/lat"
# columns: grant->answer, grant->connect, connect result, the answering
# query's own round trip (its name's first upstream lookup), and when the
# last refused query was sent relative to the grant's return (> 0: the
# grant had not reached the responder yet)
stat() { printf 'median %s, max %s' "$(cut -d' ' -f"$1" "$W_DIR/lat" | median)" "$(cut -d' ' -f"$1" "$W_DIR/lat" | sort -n | tail -n 1)"; }
echo "grant returned -> session's answer (us): $(stat 1)"
echo "grant returned -> session's connect admitted (us): $(stat 2)"
echo "... of which the answering query's own round trip, upstream lookup included (us): $(stat 4)"
echo "queries sent after the grant returned and still refused: $(awk '$5 > 0' "$W_DIR/lat" | wc -l) of $ROUNDS"
echo "connects refused after their answer: $(awk '$3 != "ECONNREFUSED"' "$W_DIR/lat" | wc -l) of $ROUNDS"
errand_stop >/dev/null
