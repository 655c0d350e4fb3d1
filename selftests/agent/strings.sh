#!/bin/bash
# Guarantee: what a session names reaches no operator raw: a suggestion is made only for a name errand's host rules take as it is (never for one holding ';', '$(...)', backticks, quotes, ESC or other bytes), and the agent's log, errandctl's stderr, denied, observe (lines and JSON), show and sessions hold no raw control byte, their JSON parses, and no line is forged.
# shellcheck disable=SC2016 # the session's python is single-quoted on purpose
# selftests-timeout: 180
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config strings)
ctl() { in_host "$ERRANDCTL" --config "$W_CONFIG" "$@"; }
# bytes no terminal should get raw: controls but newline, DEL, and every byte
# from 0x80 (C1 controls, and UTF-8 that can encode them)
raw_bytes() {
	python3 -c 'import sys
d = open(sys.argv[1], "rb").read()
print(sum(1 for b in d if (b < 0x20 and b != 10) or b >= 0x7f))' "$1"
}
# lines of a file that do not parse as JSON (0 = all do)
bad_json() {
	python3 -c 'import json, sys
n = 0
for line in open(sys.argv[1], "rb"):
    if line.strip():
        try:
            json.loads(line)
        except Exception:
            n += 1
print(n)' "$1"
}

# The session sends raw DNS queries, label by label: a label may carry any
# byte on the wire, '.', ';', ESC and NUL included. The responder refuses
# (FORMERR, no event) labels holding a control, space, '.', DEL or a byte
# from 0x80; printable ones (';', '$', '`', quotes, '\\') get through.
session_py='import socket, struct, time
ns = open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]
names = [
    [b"x;id>", b"tmp/p;", b"example"],  # x;id>/tmp/p;.example, as pasted
    [b"x;id>/tmp/p;", b"example"],
    [b"$(id)", b"example"],
    [b"`id`", b"example"],
    [b"a\x27b\x22c", b"example"],
    [b"a\\x1b", b"example"],
    [b"\x1b[2J\x1b]0;owned\x07", b"example"],
    [b"a\nerrand: session=forged refused proto=tcp", b"example"],
    [b"\xc2\x9b31m", b"example"],
    [b"\x9b\x85\x7f\xff", b"example"],
    [b"a.b", b"example"],
    [b"a\x00b", b"example"],
    [b"a b", b"example"],
    [b"UPPER-ok", b"test"],  # the control: a valid name, suggested
]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
time.sleep(1.5)  # observe connects meanwhile
for i, labels in enumerate(names):
    q = struct.pack(">HHHHHH", i + 1, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l for l in labels) + b"\0" + struct.pack(">HH", 1, 1)
    s.sendto(q, (ns, 53))
    try:
        r = s.recv(512)
        print("q%d=rcode %d" % (i, r[3] & 15))
    except OSError as e:
        print("q%d=none" % i)
print("done", flush=True)
time.sleep(30)'

# Through the daemon: its log, and what errandctl shows from it.
agent_start || exit 1
errand_start -- python3 -c "$session_py" || exit 1
observe_start
OBS_HUMAN=$OBSERVE_OUT OBS_HUMAN_PID=$OBSERVE_PID
observe_start --json
OBS_JSON=$OBSERVE_OUT
bg_wait '^done$' 20
sleep 0.5
observe_stop
OBSERVE_PID=$OBS_HUMAN_PID OBSERVE_OUT=$OBS_HUMAN observe_stop
assert_match "$(grep -a '^q0=' "$BG_OUT")" "^q0=rcode 3" "x;id>/tmp/p;.example is NXDOMAIN"
# the commands suggested, after "to allow it: "
sug=$(grep -a "to allow it:" "$AGENT_LOG" | sed 's/.*to allow it: //')
assert_eq "$(echo "$sug" | grep -c .)" 1 "one suggestion, for the one valid name"
assert_eq "$sug" "errandctl grant $SESSION upper-ok.test" "... upper-ok.test, the exact command to paste"
assert_not_contains "$sug" ";" "no suggestion names x;id>/tmp/p;.example or any name with ';'"
assert_not_contains "$sug" '$(' "... nor '\$(...)'"
assert_not_contains "$sug" '`' "... nor backticks"
assert_eq "$(grep -ac '"event":"suggest"' "$OBS_JSON")" 1 "observe --json: one suggest event"
assert_contains "$(grep -a 'denied name=' "$AGENT_LOG")" "name=x?id??tmp?p?.example " \
	"the agent's log shows the denied name x;id>/tmp/p;.example, its ';' made harmless"
for f in "$AGENT_LOG" "$OBS_HUMAN" "$OBS_JSON"; do
	assert_eq "$(raw_bytes "$f")" 0 "$(basename "$f"): no raw control byte, DEL or byte >= 0x80"
done
assert_eq "$(grep -ac '^errand: session=forged' "$AGENT_LOG" "$OBS_HUMAN" | awk -F: '{ n += $2 } END { print n }')" 0 \
	"no forged line"
assert_eq "$(bad_json "$OBS_JSON")" 0 "observe --json: every line parses"
assert_match "$(grep -ac . "$OBS_JSON")" "^[1-9]" "... and it printed events"
for c in "denied" "denied --json" "show $SESSION" "show $SESSION --json" "sessions" "sessions --json"; do
	f=$W_DIR/ctl.$RANDOM
	# shellcheck disable=SC2086 # c holds the words of the command
	ctl $c >"$f" 2>&1
	assert_eq "$(raw_bytes "$f")" 0 "errandctl $c: no raw control byte"
	case $c in *--json) assert_eq "$(python3 -c 'import json,sys; json.load(open(sys.argv[1])); print("ok")' "$f" 2>&1)" ok \
		"errandctl $c parses" ;; esac
done
assert_contains "$(ctl denied)" "x;id>/tmp/p;.example" "denied lists x;id>/tmp/p;.example (printable, as it is)"
errand_stop
agent_stop

# Embedded: errandctl's own stderr carries the events and suggestions.
errand_run -- python3 -c "${session_py/time.sleep(30)/}"
assert_eq "$(result q0)" "rcode 3" "embedded: x;id>/tmp/p;.example is NXDOMAIN"
assert_eq "$(raw_bytes "$RUN_ERR")" 0 "embedded: errandctl's stderr holds no raw control byte"
sug=$(grep -a "to allow it:" "$RUN_ERR" | sed 's/.*to allow it: //')
assert_eq "$(echo "$sug" | grep -c .)" 1 "embedded: one suggestion, for the one valid name"
assert_not_contains "$sug" ";" "embedded: no suggestion names a name with ';'"
# A command line that is not UTF-8 (JSON carries UTF-8 only) is refused,
# never run with the argument dropped.
errand_run -- printf '%s|%s|' $'a\xff\x1b[2J' end
assert_eq "$RUN_RC" 125 "an argument that is not UTF-8 is refused (exit 125)"
assert_contains "$RUN_STDERR" "argument 'a\\xff\\x1b[2J' is not valid UTF-8" "... named, escaped"
assert_empty "$RUN_STDOUT" "... and nothing ran"
assert_eq "$(raw_bytes "$RUN_ERR")" 0 "... errandctl's stderr holds no raw control byte"
world_finish
