#!/bin/bash
# Guarantee: the egress programs are verified once and pinned as a set under <paths.bpf>/prog/<hash>/, which sessions share; a session of another (older) set keeps that set's programs and its enforcement while newer sessions take the running build's set; the sweep removes a set no session uses, never one a live session's config names, and a session's end takes its keys out of its own set.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
P=/sys/fs/bpf/$W/prog
sets() { find "$P" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort | tr '\n' ' '; }

errand_start --pin a.test=$HOST_A:443 --egress a.test:443 || { world_finish; exit 1; }
A=$SESSION a_pid=$BG_PID a_out=$BG_OUT a_err=$BG_ERR
own=$(sets)
assert_match "$own" '^[0-9a-f]{16} $' "the first session loaded one set, under prog/<hash>"
own=${own% }
assert_eq "$(bpftool prog show pinned "$P/$own/errand_conn4" 2>/dev/null | grep -c cgroup_sock_addr)" 1 "... its programs pinned there"

errand_run --pin a.test=$HOST_B:443 --egress a.test:443 -- sh -c "$(probe_script b "tcp $HOST_B 443")"
assert_eq "$(result b)" "ok hello $HOST_B:443" "a second session runs on the same set"
assert_eq "$(sets)" "$own " "... which it loaded no second time"

# Session A as an older build would have left it: its set under another
# hash, its config naming that hash. A set nobody uses lies beside it.
# The session before's teardown (errandctl's child, after its status)
# is done first: renamed under it, its set's pins were not where it took
# its key out (the key then stayed in the renamed set's veth_sess).
teardown_wait
old=00000000000000aa
mv "$P/$own" "$P/$old"
cur=$(bpftool -j map lookup pinned "/sys/fs/bpf/$W/$A/config" key 0 0 0 0)
val=$(echo "$cur" | python3 -c '
import json, sys
v = [int(x, 16) for x in json.load(sys.stdin)["value"]]
v[8:16] = list((0xaa).to_bytes(8, "little"))
print(" ".join("%d" % x for x in v))')
# shellcheck disable=SC2086
bpftool map update pinned "/sys/fs/bpf/$W/$A/config" key 0 0 0 0 value $val
mkdir "$P/00000000000000bb"
bpftool map create "$P/00000000000000bb/cfg_of" type hash key 8 value 4 entries 1 name cfg_of

errand_run --pin a.test=$HOST_B:443 --egress a.test:443 -- sh -c "$(probe_script b "tcp $HOST_B 443" a "tcp $HOST_A 443")"
assert_eq "$(result b)" "ok hello $HOST_B:443" "with the build's set gone, the next session loads it again and runs"
assert_eq "$(result a)" EPERM "... enforced: not its host"
assert_eq "$(sets)" "$old $own " "the sweep kept the old set a live session names and removed the unused one"
assert_eq "$(in_session "$A" "$PROBE" tcp $HOST_A 443)" "ok hello $HOST_A:443" "the old set's session still reaches its pin"
assert_eq "$(in_session "$A" "$PROBE" tcp $HOST_B 443 --timeout 2)" ETIMEDOUT "... and its backstop still refuses the other host"

SESSION=$A BG_PID=$a_pid BG_OUT=$a_out BG_ERR=$a_err
errand_stop
assert_eq "$(grep -c "session=$A refused .*addr=$HOST_B port=443" "$RUN_ERR")" 1 "the old set's session heard its own refusal"
assert_empty "$(leftovers)" "it ended: no session left, and no key of it in its set's maps"
errand_run --egress none -- true
assert_eq "$(sets)" "$own " "the next start's sweep removed the old set, which no session names any more"
assert_empty "$(leftovers)" "nothing left"
world_finish
