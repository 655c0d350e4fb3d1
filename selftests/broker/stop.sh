#!/bin/bash
# Guarantee: the session's errand-broker is stopped through its pidfd: errandctl never signals the broker's pid once it has reaped it (the pid may be another process's by then), and the broker ends with its session.
# shellcheck disable=SC2016 # $PROV_BASE_URL expands in the session's shell
. "$(dirname "$0")/common.sh"

broker_world
getent passwd errand-broker >/dev/null || skip "no account errand-broker (make accounts)"
command -v strace >/dev/null || skip "no strace"
# shellcheck disable=SC2034 # errand_run (world.sh) runs with it
W_CONFIG=$(world_config stop '"addressPool": "10.217.0.0/24"' "" \
	"\"agent\": { \"providers\": { $(provider_json prov) } }")
# errandctl under strace: without -f, errandctl itself and the errandctl-full
# it execs (the same process), which runs the session embedded and stops its
# broker; the session's own processes are not traced.
TRACE=$W_DIR/trace
cat >"$W_DIR/ctl-traced" <<EOT
#!/bin/sh
exec strace -qq -o "$TRACE" -e trace=kill,wait4,pidfd_open,pidfd_send_signal "$ERRANDCTL" "\$@"
EOT
chmod 0755 "$W_DIR/ctl-traced"
ERRANDCTL=$W_DIR/ctl-traced

errand_run -- sh -c 'echo "url=$PROV_BASE_URL"'
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$(result url)" '^http://10\.217\.0\.[0-9]+:4780/providers/prov$' "it had its broker"
# wait4(PID, ...) = PID reaped PID; a kill(PID, ...) after that names a pid
# that is no longer the broker's.
late=$(awk '/^wait4\(/ && match($0, /= [0-9]+$/) { reaped[substr($0, RSTART + 2)] = 1 }
	/^kill\(/ { p = $0; sub(/^kill\(/, "", p); sub(/,.*/, "", p); if (p in reaped) print }' "$TRACE")
assert_eq "$late" "" "no kill() names a pid errandctl had reaped"
assert_match "$(grep -c '^pidfd_send_signal(.*SIGTERM' "$TRACE")" '^[1-9]' "the broker is sent SIGTERM through its pidfd"
assert_eq "$(pgrep -u errand-broker -f "errand-broker.*/run/$W/" || true)" "" "no broker of the world is left"
world_finish
