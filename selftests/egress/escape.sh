#!/bin/bash
# Guarantee: a session's processes cannot shed enforcement: they cannot move out of the session's cgroup or into another network namespace, and stay refused whatever they try.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

# Inside the session: try every cgroup.procs above the session's cgroup, and
# the agent's network namespace, then connect to a host that is not allowed.
cgtargets="$W_CG/cgroup.procs $W_CG/$W/cgroup.procs /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs"
errand_run --pin a.test=$HOST_A:443 --egress a.test:443 -- sh -c "
	moved=''
	for f in $cgtargets; do
		if [ -e \"\$f\" ] && echo \$\$ 2>/dev/null >\"\$f\"; then moved=\"\$moved \$f\"; fi
	done
	echo \"moved=\$moved\"
	echo \"cg=\$(tr '\\n' ';' </proc/self/cgroup)\"
	$(probe_script b "tcp $HOST_B 443 --timeout 2" a "tcp $HOST_A 443")
	echo \"setns=\$(nsenter --net=/run/netns/$W-host $PROBE tcp $HOST_B 443 --timeout 2 2>&1 | tail -n 1)\"
	echo \"setns1=\$(nsenter --net=/proc/1/ns/net $PROBE tcp $HOST_B 443 --timeout 2 2>&1 | tail -n 1)\"
	echo \"unshare=\$(unshare --user --map-root-user --net sh -c '$PROBE tcp $HOST_B 443 --timeout 2' 2>&1 | tail -n 1)\"
"
assert_eq "$RUN_RC" 0 "the session ran"
assert_empty "$(result moved)" "the session could not move itself to another cgroup"
assert_eq "$(result cg | tr ';' '\n' | grep '^0::')" "0::/" "the session's cgroup namespace shows its own cgroup as the root, no host path"
assert_eq "$(result b)" EPERM "after trying, a host not allowed ($HOST_B:443) is still refused at connect (EPERM)"
assert_eq "$(result a)" "ok hello $HOST_A:443" "... and the pinned host still reached (control)"
assert_no_match "$(result setns)" '^ok' "entering the agent's netns by its file does not reach $HOST_B:443"
assert_no_match "$(result setns1)" '^ok' "entering pid 1's netns does not reach $HOST_B:443"
assert_no_match "$(result unshare)" '^ok' "a new user+net namespace does not reach $HOST_B:443"
assert_empty "$(grep "^accept $HOST_B:443 " "$W_DIR/wan-serve.log")" "$HOST_B's server saw no connection"

world_finish
