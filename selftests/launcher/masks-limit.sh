#!/bin/bash
# Guarantee: a launcher that finds no inotify instance left to it (fs.inotify.max_user_instances reached: each watching launcher is root's, as at hundreds of sessions whose grants show a masked path's directory) still keeps a masked daemon socket closed to the session after its daemon re-creates it or its directory is made again: it looks at them every 250 ms instead, and says so. Runs in the test VM (vm/kernel61) alone, where the limit is the VM's own to lower.
# selftests-covered-by: vm/kernel61
if [ "${ERRAND_VM:-}" != 1 ]; then
	. "$(dirname "$0")/../lib/world.sh"
	skip "lowers fs.inotify.max_user_instances, which is the host's: runs in the test VM (vm/kernel61)"
fi
MASKS_NO_INOTIFY=1 . "$(dirname "$0")/masks.sh"
