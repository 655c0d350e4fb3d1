#!/bin/bash
# Guarantee: one session's own BPF maps cost at most 64 KiB of kernel memory (bpftool's bytes_memlock, summed over the maps pinned in its directory, on a kernel that reports memory used: 6.4 and later), idle and after it has resolved a few names and made a few connections, so a host holds a thousand sessions for 64 MiB of maps: the allow and own-address maps are tries, the flow table an LRU of 128, the grant maps hold 64; the per-map figures are printed for BENCHMARKS.md.
# shellcheck disable=SC2016 # $NS and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
W_CONFIG=$(dns_config mapmem)
LIMIT=$((64 * 1024))

# Each map in the session's pin directory: "name bytes_memlock type max_entries"
# a line (links, pinned beside them, are not maps: 0).
maps_of() {
	local f m
	for f in "/sys/fs/bpf/$W/$SESSION"/*; do
		m=$(bpftool -j map show pinned "$f" 2>/dev/null |
			python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("bytes_memlock", 0), d["type"], d["max_entries"])' 2>/dev/null)
		echo "$(basename "$f") ${m:-0 - 0}"
	done
}
total() { awk '{ t += $2 } END { print t + 0 }' <<<"$1"; }
shape() { awk -v m="$2" '$1 == m { print $3, $4 }' <<<"$1"; }
# bytes_memlock is the memory a map uses from 6.4 on (map_mem_usage); before,
# it is max_entries times key and value, whatever the map holds: there the
# maps' shapes, which make the figures 6.18 reports, are what can be checked.
kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
real_usage() { [ "$kv" -ge 6004 ]; }

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
trace "idle session's maps (name, bytes, type, max entries):"
grep -v ' 0 - 0$' <<<"$idle" | sed 's/^/#   /'
assert_eq "$(shape "$idle" allow)" "lpm_trie 4097" "the allow map is a trie (memory per entry, no buckets)"
assert_eq "$(shape "$idle" self_addrs)" "lpm_trie 256" "... and so is the own-address map"
assert_eq "$(shape "$idle" flows)" "lru_hash 128" "the flow table is an LRU of 128"
assert_eq "$(shape "$idle" grants_live)" "hash 64" "grants_live holds the agent's 64 grants"
assert_eq "$(shape "$idle" once_used)" "hash 128" "... once_used twice that (each spent grant's mark and its SYN's port)"
if real_usage; then
	assert_le "$(total "$idle")" "$LIMIT" "an idle session's maps: $(total "$idle") bytes, at most 64 KiB"
else
	trace "kernel $(uname -r): bytes_memlock is max_entries times key and value here, not memory used; not summed"
fi
bg_go || { world_finish; exit 1; }
bg_wait '^resolved=1' 20 || { world_finish; exit 1; }
used=$(maps_of)
trace "after 8 names and 2 connections (name, bytes, type, max entries):"
grep -v ' 0 - 0$' <<<"$used" | sed 's/^/#   /'
assert_eq "$(bg_result conn)" "ok hello $HOST_A:443" "the session reached an address it resolved"
if real_usage; then
	assert_le "$(total "$used")" "$LIMIT" "after resolving names: $(total "$used") bytes, at most 64 KiB"
fi
errand_stop
world_finish
