#!/bin/bash
# Guarantee: one session's own BPF maps cost at most 64 KiB of kernel memory (bpftool's bytes_memlock, summed over the maps pinned in its directory), idle and after it has resolved a few names and made a few connections, so a host holds a thousand sessions for 64 MiB of maps; the per-map figures are printed for BENCHMARKS.md.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config mapmem)
LIMIT=$((64 * 1024))

# bytes_memlock of each map in the session's pin directory, "name bytes" a line.
maps_of() {
	local f b
	for f in "/sys/fs/bpf/$W/$SESSION"/*; do
		b=$(bpftool -j map show pinned "$f" 2>/dev/null |
			python3 -c 'import json,sys; print(json.load(sys.stdin).get("bytes_memlock", 0))' 2>/dev/null)
		echo "$(basename "$f") ${b:-0}"
	done
}
total() { awk '{ t += $2 } END { print t + 0 }' <<<"$1"; }

script="$(bg_wait_sh)$(session_ns_sh)P=$PROBE"'
for n in api.test other.test many.test m1.test m2.test m3.test x.wild.test y.wild.test; do
	echo "dns $n: $($P dns $NS $n 2>&1 | tail -n 1)"
done
echo "conn=$($P tcp '"$HOST_A"' 443 2>&1 | tail -n 1)"
echo "conn2=$($P tcp '"$HOST_B"' 443 2>&1 | tail -n 1)"
echo resolved=1
sleep 60'
errand_start --egress api.test --egress other.test --egress many.test --egress m1.test --egress m2.test --egress m3.test \
	--egress '*.wild.test' -- sh -c "$script" || { world_finish; exit 1; }
bg_wait '^waiting=1' || { world_finish; exit 1; }
idle=$(maps_of)
trace "idle session's maps (bytes):"
sed 's/^/#   /' <<<"$idle"
assert_le "$(total "$idle")" "$LIMIT" "an idle session's maps: $(total "$idle") bytes, at most 64 KiB"
bg_go || { world_finish; exit 1; }
bg_wait '^resolved=1' 20 || { world_finish; exit 1; }
used=$(maps_of)
trace "after 8 names and 2 connections (bytes):"
sed 's/^/#   /' <<<"$used"
assert_eq "$(bg_result conn)" "ok hello $HOST_A:443" "the session reached an address it resolved"
assert_match "$(sed -n 's/^\(allow\) \([0-9]*\)$/\2/p' <<<"$used")" '^[0-9]+$' "its allow map is there"
assert_le "$(total "$used")" "$LIMIT" "after resolving names: $(total "$used") bytes, at most 64 KiB"
errand_stop
world_finish
