#!/bin/bash
# Guarantee: a session's broker serves at most 256 intercepted connections at once: the next one is refused at once (not queued), and once connections close new ones are served again.
# selftests-timeout: 120
. "$(dirname "$0")/common.sh"
need_errandctl
secrets_world
W_CONFIG=$(secrets_config limits)
command -v python3 >/dev/null || skip "python3 is missing"

cat >"$PROJ/hold.py" <<'EOP'
import socket, subprocess, sys, time
held = [socket.create_connection(("sec.test", 443), timeout=5) for _ in range(256)]
print("held=%d" % len(held), flush=True)
t = time.monotonic()
r = subprocess.run(["curl", "-sS", "--max-time", "8", "-o", "/dev/null", "-w", "%{http_code}",
                    "https://sec.test/over"], capture_output=True, text=True)
print("over=%s" % r.stdout, flush=True)
print("over_fast=%d" % (time.monotonic() - t < 5), flush=True)
for s in held:
    s.close()
time.sleep(1)
r = subprocess.run(["curl", "-sS", "--max-time", "8", "-o", "/dev/null", "-w", "%{http_code}",
                    "https://sec.test/after"], capture_output=True, text=True)
print("after=%s" % r.stdout, flush=True)
EOP
errand_run --project "$PROJ" --secret TOK=a@sec.test -- python3 "$PROJ/hold.py"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result held)" 256 "256 connections to a secret's host are open through the broker"
assert_eq "$(result over)" 000 "the 257th is refused"
assert_eq "$(result over_fast)" 1 "at once, not queued"
assert_eq "$(result after)" 200 "once they close, a new one is served"
assert_not_contains "$(echo_log)" "/over" "the refused one never reached the host"

world_finish
