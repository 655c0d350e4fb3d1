#!/bin/bash
# Guarantee: host rules match names as doc/design.md "Host rules" says: lowercased, trailing dot trimmed, *.example.com exactly one label below and never the apex.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

errand_run --pin A.Test.=$HOST_A:443 --egress a.TEST -- sh -c "$(probe_script a "tcp $HOST_A 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result a)" "ok hello $HOST_A:443" "a pin 'A.Test.' and a rule 'a.TEST' name the same host"

errand_run --pin x.a.test=$HOST_A:443 --egress '*.a.test' -- sh -c "$(probe_script a "tcp $HOST_A 443")"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result a)" "ok hello $HOST_A:443" "'*.a.test' admits x.a.test (one label below)"

errand_run --pin a.test=$HOST_A:443 --egress '*.a.test' -- sh -c "$(probe_script a "tcp $HOST_A 443")"
assert_eq "$(result a)" EPERM "'*.a.test' does not admit the apex a.test"
errand_run --pin y.x.a.test=$HOST_A:443 --egress '*.a.test' -- sh -c "$(probe_script a "tcp $HOST_A 443")"
assert_eq "$(result a)" EPERM "'*.a.test' does not admit y.x.a.test (two labels below)"
errand_run --pin b.test=$HOST_A:443 --egress a.test -- sh -c "$(probe_script a "tcp $HOST_A 443")"
assert_eq "$(result a)" EPERM "a pin for b.test is not reached through a rule for a.test"

world_finish
