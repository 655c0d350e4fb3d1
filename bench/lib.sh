# Shared by the benchmarks: the test world plus a "bare" network namespace
# wired like a session's (a veth to the agent namespace, forwarding and NAT
# there) but with no cgroup, no BPF and no other namespace: the unconfined
# side of every comparison.
# shellcheck shell=bash
# The world's packet sniffer is for tests: it would take a copy of every
# packet of every arm (a tenth of the machine in an HTTPS benchmark).
W_SNIFF=0
. "$(dirname "${BASH_SOURCE[0]}")/../selftests/lib/world.sh"
# shellcheck source=bench/stats.sh
. "$(dirname "${BASH_SOURCE[0]}")/stats.sh"

B=
bare_up() {
	B=$W-bare
	ip netns add "$B"
	trap 'ip netns del "$B" 2>/dev/null; world_down' EXIT
	ip link add bh0 netns "$W-host" type veth peer name eth0 netns "$B"
	in_host ip addr add 10.214.0.1/24 dev bh0
	in_host ip link set bh0 up
	ip -n "$B" addr add 10.214.0.2/24 dev eth0
	ip -n "$B" link set eth0 up
	ip -n "$B" link set lo up
	ip -n "$B" route add default via 10.214.0.1
	# TCP timestamps as a session's namespace has them (agent/netlink.c,
	# without a random offset a connection), so both arms' TCP is the same.
	in_bare sysctl -qw net.ipv4.tcp_timestamps=2
	in_host sysctl -qw net.ipv4.ip_forward=1
	in_host nft -f - <<NFT
table ip ${W}bench {
	chain post { type nat hook postrouting priority srcnat; ip saddr 10.214.0.0/24 masquerade; }
}
NFT
}
# A new source address for the bare namespace's connections, as every fresh
# session has one: to the NAT a new address's connections must find ports
# free of the TIME_WAIT entries earlier rounds left for the same server
# (the same address again reuses its own), so an arm of fresh sessions
# taking turns with one that calls this each round pays that search alike.
# Counted from the link, not kept in a variable: callers run in subshells.
bare_fresh() {
	local a
	a=$((2 + $(ip -n "$B" -4 -o addr show dev eth0 | wc -l)))
	[ "$a" -lt 255 ] || { echo "bare_fresh: out of addresses" >&2; return 1; }
	ip -n "$B" addr add "10.214.0.$a/24" dev eth0
	ip -n "$B" route replace default via 10.214.0.1 src "10.214.0.$a"
}

in_bare() { nsenter --net="/run/netns/$B" "$@"; }
# The probe in the bare namespace, and the figure of its rr (conn/s) and
# bulk (Mbit/s) reports on stdin.
bare() { in_bare "$PROBE" "$@"; }
# The probe as a session's command measuring the path: it starts half a
# second after the session does. The agent's refill of its pool (the next
# prepared network and launcher, about 15 ms of CPU) follows each start, and
# on two cores it landed on the probe's first connections; the start has
# benchmarks of its own (bench/start.sh, bench/scale.sh).
SESSION_WAIT=(sh -c 'sleep 0.5; exec "$0" "$@"')
SESSION_PROBE=("${SESSION_WAIT[@]}" "$PROBE")
rate() { sed -n 's/.*(\([0-9.]*\)\/s).*/\1/p' | head -n1; }
mbit() { sed -n 's/.*(\([0-9.]*\) Mbit\/s).*/\1/p' | head -n1; }

# IPv6 on the bare namespace, as a dual-stack session has it: a /126 on the
# same veth, a default route via the agent namespace, NAT66 there. Needs
# world_v6 and bare_up first.
bare6_up() {
	in_host sysctl -qw net.ipv6.conf.all.forwarding=1 net.ipv6.conf.bh0.disable_ipv6=0
	in_bare sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0
	in_host ip -6 addr add fd66:6262::1/126 dev bh0 nodad
	ip -n "$B" -6 addr add fd66:6262::2/126 dev eth0 nodad
	ip -n "$B" -6 route add default via fd66:6262::1 dev eth0
	in_host nft -f - <<NFT
table ip6 ${W}bench6 {
	chain post { type nat hook postrouting priority srcnat; ip6 saddr fd66:6262::/126 masquerade; }
}
NFT
}
