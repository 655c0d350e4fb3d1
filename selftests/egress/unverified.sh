#!/bin/bash
# Guarantee: a session whose enforcement cannot be attached, pinned and verified never starts: exit 125, one line naming why, nothing left behind.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# A pin directory outside bpffs: the programs load, but their links cannot be
# pinned, so the enforcement chain is incomplete and CMD must never run.
mkdir -p "$W_DIR/not-bpffs"
W_CONFIG=$W_DIR/unverified.json
cat >"$W_CONFIG" <<JSON
{
  "sandbox": { "egress": { "treatAsPublic": ["198.18.0.0/15"] }, "requireFullEnforcement": false },
  "paths": { "run": "/run/$W", "state": "$W_DIR/state", "bpf": "$W_DIR/not-bpffs", "cgroup": "$W" }
}
JSON
errand_run --pin a.test=$HOST_A:443 --egress a.test:443 -- sh -c "echo started; $PROBE tcp $HOST_A 443"
assert_eq "$RUN_RC" 125 "errandctl exits 125"
assert_not_contains "$RUN_STDOUT" started "the command never ran"
assert_eq "$(grep -Evc "weakened|^errand: gap:" "$RUN_ERR")" 1 "one line on stderr says why"
assert_contains "$RUN_STDERR" "cannot pin" "... naming the pin that failed"
assert_empty "$(grep "^accept " "$W_DIR/wan-serve.log")" "no server saw a connection"
assert_empty "$(leftovers)" "nothing is left behind"
assert_empty "$(find "$W_DIR/not-bpffs" -mindepth 1)" "no pin or directory under the pin path"
assert_empty "$(find "$W_CG/$W" -mindepth 1 -type d 2>/dev/null)" "no session cgroup"

world_finish
