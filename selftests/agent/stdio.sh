#!/bin/bash
# Guarantee: errand never hands a session a socket: stdin, stdout or stderr that is a socket (UDP connected or not, a unix datagram socket, a unix socketpair as Node.js gives its children) reaches the session as a pipe relayed by errandctl, with and without errand-agent; the session sends nothing through it, and a caller on socketpairs still gets the whole output, EOF on stdin, and CMD's exit status.
# selftests-timeout: 240
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
W_CONFIG=$(world_config stdio)
UDP_LOG=$W_DIR/udp.log
world_serve wan "$UDP_LOG" "udp:$HOST_A:5300" "udp:$HOST_B:5300" || exit 1
ABSTRACT="$W-abstract"

# The caller, in the agent's namespace: makes the sockets and runs errandctl
# on them, reporting one LABEL=RESULT line each.
cat >"$W_DIR/caller.py" <<'EOF_PY'
import os, socket, subprocess, sys, threading

ctl, config, host_a, host_b, abstract = sys.argv[1:6]
run = [ctl, "run", "--config", config, "--egress", "none", "--"]

# The session tries to send through its stdin, as the attack did: connected,
# and by sendto to a public host and to the caller's abstract namespace.
attack = r'''
import errno, os, socket, sys
print("fd0=" + os.readlink("/proc/self/fd/0").split(":")[0])
def try_(label, f):
    try:
        f(socket.socket(fileno=os.dup(0)))
        print(label + "=sent")
    except OSError as e:
        print(label + "=" + errno.errorcode.get(e.errno, str(e.errno)))
    except Exception as e:  # an address of another family: tried, refused
        print(label + "=" + type(e).__name__)
try_("send", lambda s: s.send(b"errand-probe connected"))
try_("sendto", lambda s: s.sendto(b"errand-probe sendto", (sys.argv[1], 5300)))
try_("unix", lambda s: s.sendto(b"errand-probe unix", "\0" + sys.argv[2]))
'''

def session_on(label, sock):
    out = subprocess.run(run + ["python3", "-c", attack, host_b, abstract], stdin=sock.fileno(),
                         capture_output=True, timeout=60)
    sock.close()
    for line in out.stdout.decode(errors="replace").splitlines():
        print(label + "." + line)
    print(label + ".rc=%d" % out.returncode)
    sys.stdout.flush()

listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
listener.bind("\0" + abstract)
listener.settimeout(0.5)

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((host_a, 5300))
session_on("udpconn", s)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
session_on("udp", s)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
session_on("unixdgram", s)
got = []
try:
    while True:
        got.append(listener.recv(512))
except OSError:
    pass
print("abstract.received=%d" % len(got))

# libuv's stdio: a unix socketpair on each of 0, 1 and 2. The session echoes
# 1 MiB of stdin to stdout until EOF, writes to stderr, and exits 7.
pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]
cmd = 'ls -l /proc/$$/fd/0 /proc/$$/fd/1 /proc/$$/fd/2 >&2; cat; echo end; echo bye >&2; exit 7'
p = subprocess.Popen(run + ["sh", "-c", cmd], stdin=pairs[0][1].fileno(),
                     stdout=pairs[1][1].fileno(), stderr=pairs[2][1].fileno())
for a, b in pairs:
    b.close()
data = bytes(range(256)) * 4096
def feed():
    pairs[0][0].sendall(data)
    pairs[0][0].shutdown(socket.SHUT_WR)
def drain(sock, into):
    while True:
        b = sock.recv(65536)
        if not b:
            return
        into.append(b)
out, err = [], []
threads = [threading.Thread(target=feed), threading.Thread(target=drain, args=(pairs[2][0], err))]
for t in threads:
    t.start()
drain(pairs[1][0], out)
for t in threads:
    t.join(60)
rc = p.wait(60)
out, err = b"".join(out), b"".join(err).decode(errors="replace")
print("pair.rc=%d" % rc)
print("pair.out=%s" % ("complete" if out == data + b"end\n" else "%d bytes" % len(out)))
print("pair.pipes=%d" % err.count("pipe:"))
print("pair.sockets=%d" % err.count("socket:"))
print("pair.err=%s" % err.strip().splitlines()[-1:])
EOF_PY

caller() {
	: >"$UDP_LOG.count"
	in_host timeout -k 5 150 python3 "$W_DIR/caller.py" "$ERRANDCTL" "$W_CONFIG" "$HOST_A" \
		"$HOST_B" "$ABSTRACT" >"$W_DIR/caller.out" 2>&1
	echo "# caller:"
	sed 's/^/#   /' "$W_DIR/caller.out"
}
r() { sed -n "s/^$1=//p" "$W_DIR/caller.out" | head -n 1; }

check() {
	local how=$1 c
	for c in udpconn udp unixdgram; do
		assert_eq "$(r "$c.fd0")" pipe "$how: stdin a $c socket: the session's fd 0 is a pipe"
		assert_eq "$(r "$c.send")" ENOTSOCK "$how: $c: send on fd 0 fails (ENOTSOCK)"
		assert_eq "$(r "$c.sendto")" ENOTSOCK "$how: $c: sendto $HOST_B through fd 0 fails"
		assert_eq "$(r "$c.unix")" ENOTSOCK "$how: $c: sendto the caller's abstract namespace fails"
		assert_eq "$(r "$c.rc")" 0 "$how: $c: the session ran, exit 0"
	done
	assert_eq "$(r abstract.received)" 0 "$how: nothing reached the caller's abstract socket"
	assert_empty "$(grep -a 'recv udp' "$UDP_LOG")" "$how: nothing reached $HOST_A or $HOST_B by UDP"
	assert_empty "$(grep -a 'errand-probe' "$W_DIR/wan-sniff.log")" "$how: the sniffer saw no datagram"
	assert_eq "$(r pair.rc)" 7 "$how: on socketpairs (libuv), errandctl exits with CMD's status"
	assert_eq "$(r pair.out)" complete "$how: ... stdout carries all of 1 MiB and the last line: EOF reached the session and its output was drained"
	assert_eq "$(r pair.pipes)" 3 "$how: ... the session's fds 0, 1 and 2 are pipes"
	assert_eq "$(r pair.sockets)" 0 "$how: ... none is a socket"
	assert_eq "$(r pair.err)" "['bye']" "$how: ... stderr carries the last line"
}

caller
check embedded
agent_start || exit 1
caller
check "errand-agent"

# A client of its own (not errandctl) hands the agent a UDP socket as the
# command's stdin: the agent refuses it, and nothing runs.
raw=$(in_host python3 - "$(agent_sock)" "$HOST_A" "$W_DIR" <<'EOF_PY'
import array, json, socket, struct, sys
path, host_a, project = sys.argv[1:4]
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(path)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect((host_a, 5300))
out = open(project + "/raw.out", "w")
body = json.dumps({"argv": ["sh", "-c", "echo ran"], "project": project}).encode()
fds = array.array("i", [u.fileno(), out.fileno(), out.fileno()])
c.sendmsg([struct.pack(">HHI", 1, 1, len(body)) + body],
           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
hdr = c.recv(8, socket.MSG_WAITALL)
_, typ, n = struct.unpack(">HHI", hdr)
reply = json.loads(c.recv(n, socket.MSG_WAITALL))
print("type=%#x error=%s" % (typ, reply.get("error", "")))
EOF_PY
)
echo "# raw client: $raw"
assert_match "$raw" "^type=0x8002 error=the command's stdin is a socket" \
	"errand-agent refuses a client's socket on stdin, naming it"
sleep 0.3
assert_empty "$(cat "$W_DIR/raw.out" 2>/dev/null)" "... and nothing ran"
assert_empty "$(grep -a 'recv udp' "$UDP_LOG")" "... nor sent"
agent_stop
world_finish
