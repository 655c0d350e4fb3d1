# Sweeping what test worlds leave behind, by name. Sourced by selftests/run
# (which sweeps every errt* left by earlier crashed runs) and by world.sh
# (which removes its own world on exit). Only objects whose names match the
# given glob patterns are touched, and every pattern must start with "errt".
#
#   cgroup2_mount                 prints the cgroup2 mount point (from mountinfo)
#   bpffs_ensure                  mounts bpffs at /sys/fs/bpf unless it is one
#   errt_sweep PATTERN...         removes, for names matching PATTERN:
#       /run/netns/NAME           (processes inside are killed by pid first)
#       <cgroup2>/NAME            (its processes killed through cgroup.kill)
#       /sys/fs/bpf/NAME, /run/NAME (netns files unmounted first), /tmp/NAME
# shellcheck shell=bash

cgroup2_mount() {
	awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' \
		/proc/self/mountinfo
}

bpffs_ensure() {
	if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != "bpf_fs" ]; then
		mount -t bpf bpf /sys/fs/bpf
	fi
}

# Mount points at or below a path, deepest first.
_sweep_mounts_below() {
	awk -v p="$1" '$5 == p || index($5, p "/") == 1 { print length($5) " " $5 }' /proc/self/mountinfo |
		sort -rn | cut -d' ' -f2-
}

_sweep_check_pattern() {
	case "$1" in
	errt*) return 0 ;;
	*) echo "sweep: refusing pattern '$1' (must start with errt)" >&2; return 1 ;;
	esac
}

_sweep_kill_netns_pids() {
	local ns=$1 pid
	for pid in $(ip netns pids "$ns" 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null
	done
}

_sweep_cgroup() {
	local dir=$1 d
	[ -d "$dir" ] || return 0
	# Deepest first: kill what is left inside, then remove the directory.
	while IFS= read -r d; do
		# cgroupfs files have size 0: read them to see whether they are empty.
		if [ -n "$(cat "$d/cgroup.procs" 2>/dev/null)" ]; then
			if [ -e "$d/cgroup.kill" ]; then
				echo 1 >"$d/cgroup.kill" 2>/dev/null
			else
				local pid
				while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$d/cgroup.procs"
			fi
			local n=0
			while [ -n "$(cat "$d/cgroup.procs" 2>/dev/null)" ] && [ $n -lt 40 ]; do
				sleep 0.05
				n=$((n + 1))
			done
		fi
		rmdir "$d" 2>/dev/null
	done < <(find "$dir" -depth -type d 2>/dev/null)
}

_sweep_run_dir() {
	local dir=$1 m
	[ -e "$dir" ] || return 0
	while IFS= read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done < <(_sweep_mounts_below "$dir")
	# A second pass: a path can be mounted over more than once.
	while IFS= read -r m; do
		umount -l "$m" 2>/dev/null
	done < <(_sweep_mounts_below "$dir")
	rm -rf "$dir" 2>/dev/null
}

errt_sweep() {
	local pat cg f name
	cg=$(cgroup2_mount)
	for pat in "$@"; do
		_sweep_check_pattern "$pat" || return 1
		for f in /run/netns/$pat; do
			[ -e "$f" ] || continue
			name=${f##*/}
			_sweep_kill_netns_pids "$name"
			ip netns del "$name" 2>/dev/null || { umount -l "$f" 2>/dev/null; rm -f "$f"; }
		done
		if [ -n "$cg" ]; then
			for f in "$cg"/$pat; do
				[ -d "$f" ] && _sweep_cgroup "$f"
			done
		fi
		for f in /sys/fs/bpf/$pat; do
			[ -e "$f" ] && rm -rf "$f" 2>/dev/null
		done
		for f in /run/$pat; do
			[ -e "$f" ] && _sweep_run_dir "$f"
		done
		for f in /tmp/$pat; do
			[ -e "$f" ] && rm -rf "$f" 2>/dev/null
		done
	done
	return 0
}
