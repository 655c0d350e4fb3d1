#!/bin/bash
# Guarantee: a session that holds more connections to its broker than the broker has descriptors for does not make it spin: the broker says so once, waits 100 ms between tries while it is out of descriptors, and serves the session's calls again once the connections go.
# shellcheck disable=SC2016 # $PROV_BASE_URL expands in the session's shell
. "$(dirname "$0")/common.sh"

broker_world
getent passwd errand-broker >/dev/null || skip "no account errand-broker (make accounts)"
command -v prlimit >/dev/null || skip "no prlimit (util-linux)"
W_CONFIG=$(world_config accept '"addressPool": "10.216.0.0/24"' "" \
	"\"agent\": { \"providers\": { $(provider_json prov) } }")

# The embedded run hands its broker errandctl's limits: 64 descriptors, hard.
_run_files
in_host timeout -k 5 60 prlimit --nofile=64:64 "$ERRANDCTL" run --config "$W_CONFIG" -- python3 -c '
import os, socket, time, urllib.request
url = os.environ["PROV_BASE_URL"]
host, port = url.split("//")[1].split("/")[0].split(":")
held = []
for _ in range(120):
    try:
        held.append(socket.create_connection((host, int(port)), timeout=2))
    except OSError:
        break
print("held=%d" % len(held), flush=True)
time.sleep(2)
for s in held:
    s.close()
time.sleep(1)
req = urllib.request.Request(url + "/echo", data=b"after", headers={"x-api-key": os.environ["PROV_API_KEY"]})
print("after=%d" % urllib.request.urlopen(req, timeout=20).status, flush=True)
' </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
RUN_RC=$?
_run_collect
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$(result held)" '^[0-9]+$' "it held connections to its broker"
assert_eq "$(grep -c "accept: Too many open files" "$RUN_ERR")" 1 "the broker, out of descriptors, says so once (no spinning)"
assert_eq "$(result after)" 200 "... and serves the session's call once the connections went"
world_finish
