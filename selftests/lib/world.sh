# The test world of errand's kernel-level selftests (doc/design.md "Test worlds").
# Sourced by selftests/<area>/<test>.sh; needs root. A world is two network
# namespaces of its own, joined by one veth and linked to nothing else:
#
#   $W-host  the agent's namespace: errandctl runs here. wan0 198.18.0.1/24,
#            default route via 198.18.0.2, lo. A server on 198.18.0.1:9000.
#   $W-wan   the "internet": up0 198.18.0.2/24 (and 198.18.0.53, the
#            upstream DNS server's address) and a dummy link hosts0 (lo
#            where the kernel has no dummy driver) with
#            198.18.1.10 (public host A), 198.18.1.11 (public host B),
#            10.99.0.10 (a private host), 169.254.169.254 (metadata),
#            10.0.0.1 (no server); and all of 198.18.4.0/22 (a local route,
#            no server: connects there meet a reset).
#            Servers (probe serve, answering "hello ADDR:PORT") on A:443,
#            A:8080, B:443, 10.99.0.10:443, 169.254.169.254:80, logging every
#            accept to $W_DIR/wan-serve.log; a sniffer (probe sniff, protocols
#            1 and 253 and any packet carrying "errand-probe") logging to
#            $W_DIR/wan-sniff.log. With world_dns, an authoritative DNS server
#            (probe dns-serve) on 198.18.0.53:53, UDP and TCP, logging every
#            query to $W_DIR/dns.log as "query NAME TYPE from SRC[ tcp]".
#
# Every name starts with $W (errt<pid>): namespaces, /tmp/$W (scratch, config,
# errand's state), /run/$W (errand's run dir, a tmpfs of its own where /run
# is not one), /sys/fs/bpf/$W, cgroup <cgroup2>/$W. world_down removes all of
# it and is set as the EXIT trap.
#
# Functions:
#   world_up                       build the world (call first; traps EXIT);
#                                  exits 1 (77 if it cannot run here) on failure
#   world_down                     tear it down (automatic on exit)
#   world_finish                   print the tally; returns 1 if an assert failed
#   world_config NAME [SANDBOX_EXTRA] [EGRESS_EXTRA] [TOP_EXTRA]
#                                  write $W_DIR/NAME.json and print its path:
#                                  treatAsPublic 198.18.0.0/15 and the $W paths,
#                                  plus extra members ('"egressPorts":[443,80]')
#                                  for "sandbox" and "sandbox.egress", and for
#                                  the top level ('"dns": {...}'). Without a
#                                  "dns" member there, dns.upstream is the
#                                  world's server ($DNS_UPSTREAM): errand never
#                                  asks the machine's own resolver
#   world_config_plain NAME        same without treatAsPublic (paths only)
#   world_v6                       IPv6 in the world (off unless a test calls
#                                  it, after world_up): $W-host wan0
#                                  2001:2:ffff::1/64 ($AGENT_ADDR6), default
#                                  IPv6 route via 2001:2:ffff::2 ($W-wan up0);
#                                  on wan's hosts link $HOST6_A (2001:2::10),
#                                  $HOST6_B (2001:2::11), $HOST6_PRIV
#                                  (fd00:99::10, unique-local), servers on
#                                  [A]:443, [A]:8080, [B]:443, [PRIV]:443
#                                  logging to $W_DIR/wan6-serve.log; every
#                                  config written from then on (W_CONFIG too)
#                                  treats 2001:2::/48 as public
#   dns_config NAME [DNS_EXTRA] [SANDBOX_EXTRA] [EGRESS_EXTRA]
#                                  world_config with "dns": upstream
#                                  $DNS_UPSTREAM, ttlFloor 1, grace 0, each
#                                  unless DNS_EXTRA ('"maxNames": 3') sets it
#   world_dns [--silent] [LINE...] write $W_DIR/zone (LINEs "NAME TYPE VALUE
#                                  [TTL]", or the default zone dns_test_zone
#                                  when none) and (re)start the world's DNS
#                                  server on $DNS_UPSTREAM:53; --silent: it logs
#                                  queries and never answers
#   world_dns_stop                 stop it (queries then meet a closed port)
#   dns_test_zone                  prints the default zone. Its cap names lead
#                                  to 198.18.4.0/22, which $W-wan takes as its
#                                  own (a local route, no server): a connect
#                                  there that errand lets out is refused by wan
#                                  (ECONNREFUSED), one errand stops is EPERM
#   dns_queries [REGEX]            the server's query log (lines matching)
#   dns_query_count NAME           queries the server received for NAME
#   session_ns_sh                  prints sh setting NS to the session's
#                                  nameserver (from its /etc/resolv.conf), to
#                                  prefix a probe_script using \$NS
#   world_serve NS LOG SPEC...     one more probe serve in namespace NS (host or
#                                  wan) on [udp:]ADDR:PORT SPECs, logging to LOG
#   in_host CMD..., in_wan CMD...  run CMD in that namespace (nsenter --net)
#   in_session ID CMD...           run CMD as root in session ID's netns,
#                                  outside its cgroup
#   errand_run ARGS... -- CMD...   build/bin/errandctl run --config $W_CONFIG
#                                  ARGS -- CMD in $W-host; waits (60 s max,
#                                  W_RUN_TIMEOUT to change).
#                                  Sets RUN_RC, RUN_OUT/RUN_ERR (files) and
#                                  RUN_STDOUT/RUN_STDERR (their text)
#   errand_start ARGS... [-- CMD...]
#                                  starts a session running
#                                  sh -c 'echo id=$ERRAND_SESSION; sleep 60'
#                                  (or, after --, CMD in place of the sleep)
#                                  in the background; sets BG_PID and SESSION
#                                  (its id) once the command runs; BG_PID is
#                                  errandctl's pid
#   errand_stop                    kills the session's processes (cgroup.kill),
#                                  waits for errandctl; sets RUN_* as errand_run
#                                  (to the background session's, even when
#                                  errand_run ran meanwhile). For several
#                                  background sessions, save SESSION, BG_PID,
#                                  BG_OUT, BG_ERR after each start and set them
#                                  back before errand_stop.
#   bg_wait REGEX [SECONDS]        wait (10 s by default) until the background
#                                  session's stdout has a line matching REGEX;
#                                  returns 1 if it did not come
#   bg_result LABEL                RESULT of a line LABEL=RESULT on the
#                                  background session's stdout
#   bg_rounds N [SECONDS]          wait for N more lines "round" from the
#                                  background session than it has written so far
#   bg_wait_sh                     prints sh for a background session's
#                                  command (errand_start ... -- sh -c "...")
#                                  that waits there until bg_go. Sessions see
#                                  neither the world's files nor its /tmp: the
#                                  go is a signal (USR1) to the waiting shell
#   bg_go                          let it go on; returns 1 if it did not
#   session_cgroup [ID]            <cgroup2>/$W/ID (ID defaults to $SESSION)
#   session_procs_dir [ID]         the cgroup directory at or below it that
#                                  holds the session's processes
#   session_pins map|link [ID]     the names of the session's pinned maps (or
#                                  links) under /sys/fs/bpf/$W/ID, sorted, each
#                                  followed by a space
#   probe_script LABEL 'ARGS' ...  prints a sh script running "probe ARGS" for
#                                  each pair, each result as a line LABEL=RESULT
#   net_script                     prints sh lines reporting links=, routes=, gw=
#                                  from inside the session (for its result)
#   result LABEL                   RESULT of LABEL from the last run's stdout
#   events [REGEX]                 refusal event lines of the last run (matching)
#   event_count REGEX              how many there are
#   denials [REGEX]                denied-name event lines of the last run
#                                  ("errand: session=ID denied name=N type=T
#                                  reason=R" or JSON), matching
#   denial_count REGEX             how many there are
#   observe_start [ARGS...]        errandctl observe --config $W_CONFIG ARGS in
#                                  $W-host, in the background, output to the
#                                  file OBSERVE_OUT (pid OBSERVE_PID)
#   observe_stop                   ends it; OBSERVE_TEXT is what it printed
#   agent_start [ARGS...]          starts errand-agent --foreground --config
#                                  $W_CONFIG ARGS in $W-host, its log in
#                                  AGENT_LOG, pid AGENT_PID; waits until its
#                                  socket answers (returns 1 if it does not)
#   agent_kill9                    kill -9 of the agent (its sessions run on)
#   agent_stop                     SIGTERM, and waits for it to end
#   agent_sock                     prints the agent's socket path
#   teardown_wait                  until no errand-teardown child (errandctl's,
#                                  after it returned) of this world is left
#   leftovers                      prints errand objects of this world that
#                                  remain (netns files, cgroups, bpffs dirs,
#                                  eh* links, errand-* nft tables); empty = none
#   assert_eq ACTUAL EXPECTED WHAT, assert_ne, assert_match ACTUAL REGEX WHAT,
#   assert_no_match, assert_contains HAYSTACK NEEDLE WHAT, assert_not_contains,
#   assert_empty ACTUAL WHAT       print "ok - WHAT" or "not ok - WHAT: ..."
#   assert_le ACTUAL MAX WHAT      ACTUAL is a whole number no more than MAX
#   skip REASON                    print "SKIP: REASON", exit 77
#   need_errandctl                 skip unless build/bin/errandctl exists
#   trace MSG                      print "# MSG"
#
# Variables: W, W_DIR, W_CG (cgroup2 mount), W_CONFIG (config in use),
# ROOT (the source tree), ERRANDCTL (may be set beforehand), PROBE, IP (full
# path of ip(8)), HOST_A, HOST_B, HOST_PRIV, HOST_META, AGENT_ADDR,
# DNS_UPSTREAM (198.18.0.53), DNS_LOG ($W_DIR/dns.log); W_PIDS
# (pids world_down ends). KEEP_WORLD=1 leaves the world in place on exit, for
# a look around (selftests/run sweeps it next time). W_SNIFF=0 (the
# benchmarks') starts no sniffer: it takes a copy of every packet in wan.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=selftests/lib/sweep.sh
. "$ROOT/selftests/lib/sweep.sh"

ERRANDCTL=${ERRANDCTL:-$ROOT/build/bin/errandctl}
PROBE=$ROOT/build/selftests/probe
IP=$(command -v ip)
W=errt$(($$ % 10000000))
W_DIR=/tmp/$W
W_CG=
W_CONFIG=
W_PIDS=()
W_BG_PIDS=()
W_OK=0
W_FAIL=0
W_UP=0
BG_PID=
BG_OUT=
BG_ERR=
SESSION=
W_HOSTS_IF=lo
RUN_N=0

HOST_A=198.18.1.10
HOST_B=198.18.1.11
HOST_PRIV=10.99.0.10
HOST_META=169.254.169.254
AGENT_ADDR=198.18.0.1
DNS_UPSTREAM=198.18.0.53
HOST6_A=2001:2::10
HOST6_B=2001:2::11
HOST6_PRIV=fd00:99::10
AGENT_ADDR6=2001:2:ffff::1
W_PUBLIC='"198.18.0.0/15"'
DNS_LOG=$W_DIR/dns.log
W_DNS_PID=
OBSERVE_PID=
OBSERVE_OUT=
OBSERVE_TEXT=

trace() { echo "# $*"; }

skip() {
	echo "SKIP: $*"
	exit 77
}

_ok() {
	W_OK=$((W_OK + 1))
	echo "ok - $1"
}

_notok() {
	W_FAIL=$((W_FAIL + 1))
	echo "not ok - $1"
}

# One line, quoted, shortened: for showing actual values.
_q() {
	local s=${1//$'\n'/\\n}
	[ ${#s} -gt 300 ] && s="${s:0:300}..."
	printf "'%s'" "$s"
}

assert_eq() {
	if [ "$1" == "$2" ]; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected $(_q "$2")"
	return 1
}

assert_ne() {
	if [ "$1" != "$2" ]; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected anything else"
	return 1
}

assert_match() {
	if grep -Eq -- "$2" <<<"$1"; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected to match /$2/"
	return 1
}

assert_no_match() {
	if ! grep -Eq -- "$2" <<<"$1"; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected not to match /$2/"
	return 1
}

assert_contains() {
	if [[ "$1" == *"$2"* ]]; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected to contain $(_q "$2")"
	return 1
}

assert_not_contains() {
	if [[ "$1" != *"$2"* ]]; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected not to contain $(_q "$2")"
	return 1
}

assert_empty() {
	if [ -z "$1" ]; then _ok "$2"; return 0; fi
	_notok "$2: actual $(_q "$1"), expected nothing"
	return 1
}

assert_le() {
	if [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -le "$2" ]; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected a number no more than $2"
	return 1
}

assert_ge() {
	if [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ]; then _ok "$3"; return 0; fi
	_notok "$3: actual $(_q "$1"), expected a number no less than $2"
	return 1
}

world_finish() {
	echo "# $W_OK ok, $W_FAIL not ok"
	[ "$W_FAIL" -eq 0 ]
}

need_errandctl() {
	[ -x "$ERRANDCTL" ] || skip "build/bin/errandctl is not built yet"
}

in_host() { nsenter --net="/run/netns/$W-host" "$@"; }
in_wan() { nsenter --net="/run/netns/$W-wan" "$@"; }
in_session() {
	local id=$1
	shift
	nsenter --net="/run/$W/netns/$id" "$@"
}

# Starts CMD in the background inside namespace NS (host or wan), stdout to
# OUT; waits for its "ready" line. The pid is kept for world_down.
_start_ready() {
	local ns=$1 out=$2 n=0
	shift 2
	nsenter --net="/run/netns/$W-$ns" "$@" >"$out" 2>&1 &
	W_PIDS+=($!)
	while ! grep -q '^ready' "$out" 2>/dev/null; do
		if ! kill -0 "${W_PIDS[-1]}" 2>/dev/null || [ $n -ge 100 ]; then
			echo "world: '$*' in $ns did not start:" >&2
			cat "$out" >&2
			return 1
		fi
		sleep 0.05
		n=$((n + 1))
	done
}

# The world has no way out: only the links it made, and routes that lead
# nowhere but the other world namespace.
_world_check_sealed() {
	local links want ns
	for ns in host wan; do
		links=$(nsenter --net="/run/netns/$W-$ns" "$IP" -o link show | awk -F': ' '{ print $2 }' |
			sed 's/@.*//' | grep -v '^eh' | sort | tr '\n' ' ')
		case $ns in
		host) want="lo wan0 " ;;
		wan) want="lo up0 "; [ "$W_HOSTS_IF" = hosts0 ] && want="hosts0 lo up0 " ;;
		esac
		if [ "$links" != "$want" ]; then
			echo "world: namespace $W-$ns has links '$links', expected '$want': refusing to run" >&2
			return 1
		fi
	done
	if [ -n "$(in_wan "$IP" route show default)" ]; then
		echo "world: $W-wan has a default route: refusing to run" >&2
		return 1
	fi
	if [ "$(in_host "$IP" route show default)" != "default via 198.18.0.2 dev wan0 " ] &&
		[ "$(in_host "$IP" route show default)" != "default via 198.18.0.2 dev wan0" ]; then
		echo "world: $W-host default route is '$(in_host "$IP" route show default)': refusing to run" >&2
		return 1
	fi
	# The peer of wan0 must be up0 in the wan namespace, nowhere else.
	if ! in_wan "$IP" -o link show up0 >/dev/null 2>&1 ||
		! in_host "$IP" -d -o link show wan0 | grep -q 'link-netns'; then
		echo "world: wan0 is not linked to $W-wan: refusing to run" >&2
		return 1
	fi
}

world_up() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -x "$PROBE" ] || skip "build/selftests/probe is not built (make build/selftests/probe)"
	command -v nsenter >/dev/null || skip "nsenter (util-linux) is missing"
	[ -n "$IP" ] || skip "ip (iproute2) is missing"
	W_CG=$(cgroup2_mount)
	[ -n "$W_CG" ] || skip "no cgroup2 mount (mount cgroup2 at /sys/fs/cgroup/unified)"
	bpffs_ensure || skip "cannot mount bpffs at /sys/fs/bpf"

	trap world_down EXIT
	trap 'exit 130' INT TERM
	errt_sweep "$W" "$W-*"
	W_UP=1
	mkdir -p "$W_DIR"
	chmod 0755 "$W_DIR"
	# errand's run dir is on tmpfs on a systemd host (/run). Where /run is
	# not (a VM image that keeps it on its root filesystem: ext4 without a
	# journal here, where each inode made scans past those deleted lately:
	# 1.4 to 3.2 ms of the machine's CPU a start), the world mounts one
	# there, as such a host would have it.
	if [ "$(stat -f -c %T /run)" != tmpfs ]; then
		mkdir -p "/run/$W" && mount -t tmpfs -o mode=0755,size=64m "$W-run" "/run/$W" ||
			{ echo "world: cannot mount a tmpfs at /run/$W" >&2; exit 1; }
	fi
	# Who owns this world: selftests/run leaves it alone while we live.
	echo "$$ $(awk '{ print $22 }' /proc/$$/stat)" >"$W_DIR/owner"

	ip netns add "$W-host" && ip netns add "$W-wan" ||
		{ echo "world: cannot make network namespaces $W-host, $W-wan" >&2; exit 1; }
	ip -n "$W-host" link add wan0 type veth peer name up0 netns "$W-wan" ||
		{ echo "world: cannot make the veth between $W-host and $W-wan" >&2; exit 1; }
	ip -n "$W-host" link set lo up
	ip -n "$W-host" addr add 198.18.0.1/24 dev wan0
	ip -n "$W-host" link set wan0 up
	ip -n "$W-host" route add default via 198.18.0.2 dev wan0
	ip -n "$W-wan" link set lo up
	ip -n "$W-wan" addr add 198.18.0.2/24 dev up0
	ip -n "$W-wan" addr add $DNS_UPSTREAM/32 dev up0
	ip -n "$W-wan" link set up0 up
	# The test hosts live on a dummy link, or on lo where the kernel has no
	# dummy driver.
	W_HOSTS_IF=lo
	if ip -n "$W-wan" link add hosts0 type dummy 2>/dev/null; then
		W_HOSTS_IF=hosts0
		ip -n "$W-wan" link set hosts0 up
	fi
	local a
	for a in $HOST_A $HOST_B $HOST_PRIV $HOST_META; do
		ip -n "$W-wan" addr add "$a/32" dev $W_HOSTS_IF
	done
	# Every address of 198.18.4.0/22 is wan's own: the many hosts of the DNS
	# cap tests, answering a connect with a reset. And 10.0.0.1, where a
	# rebinding test's name points: an address of the world, too.
	ip -n "$W-wan" route add local 198.18.4.0/22 dev lo
	ip -n "$W-wan" addr add 10.0.0.1/32 dev $W_HOSTS_IF
	_world_check_sealed || exit 1

	: >"$W_DIR/wan-serve.log"
	: >"$W_DIR/wan-sniff.log"
	: >"$W_DIR/host-serve.log"
	_start_ready wan "$W_DIR/wan-serve.out" "$PROBE" serve --log "$W_DIR/wan-serve.log" \
		$HOST_A:443 $HOST_A:8080 $HOST_B:443 $HOST_PRIV:443 $HOST_META:80 || exit 1
	if [ "${W_SNIFF:-1}" != 0 ]; then
		_start_ready wan "$W_DIR/wan-sniff.out" "$PROBE" sniff --log "$W_DIR/wan-sniff.log" 1 253 || exit 1
	fi
	_start_ready host "$W_DIR/host-serve.out" "$PROBE" serve --log "$W_DIR/host-serve.log" \
		$AGENT_ADDR:9000 || exit 1
	W_CONFIG=$(world_config default)
	trace "world $W up: $W-host (agent, 198.18.0.1), $W-wan (hosts $HOST_A $HOST_B $HOST_PRIV $HOST_META)"
}

world_v6() {
	local a
	in_host sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.wan0.disable_ipv6=0 &&
		in_wan sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.up0.disable_ipv6=0 ||
		{ echo "world: cannot turn IPv6 on in $W-host and $W-wan" >&2; exit 1; }
	ip -n "$W-host" -6 addr add $AGENT_ADDR6/64 dev wan0 nodad &&
		ip -n "$W-wan" -6 addr add 2001:2:ffff::2/64 dev up0 nodad &&
		ip -n "$W-host" -6 route add default via 2001:2:ffff::2 dev wan0 ||
		{ echo "world: cannot address IPv6 in the world" >&2; exit 1; }
	in_wan sysctl -qw "net.ipv6.conf.$W_HOSTS_IF.disable_ipv6=0"
	for a in $HOST6_A $HOST6_B $HOST6_PRIV; do
		ip -n "$W-wan" -6 addr add "$a/128" dev $W_HOSTS_IF nodad ||
			{ echo "world: cannot add $a in $W-wan" >&2; exit 1; }
	done
	# Still sealed: wan has no IPv6 default route, host's leads to wan.
	if [ -n "$(in_wan "$IP" -6 route show default)" ] ||
		[ "$(in_host "$IP" -6 route show default | awk '{ print $3, $5 }')" != "2001:2:ffff::2 wan0" ]; then
		echo "world: IPv6 routes are not the world's own: refusing to run" >&2
		exit 1
	fi
	world_serve wan "$W_DIR/wan6-serve.log" "[$HOST6_A]:443" "[$HOST6_A]:8080" "[$HOST6_B]:443" \
		"[$HOST6_PRIV]:443" || exit 1
	W_PUBLIC='"198.18.0.0/15", "2001:2::/48"'
	W_CONFIG=$(world_config default)
	trace "world $W has IPv6: $W-host $AGENT_ADDR6, hosts $HOST6_A $HOST6_B $HOST6_PRIV"
}

world_serve() {
	local ns=$1 log=$2
	shift 2
	: >"$log"
	_start_ready "$ns" "$log.out" "$PROBE" serve --log "$log" "$@"
}

world_down() {
	local rc=$? pid
	[ "$W_UP" = 1 ] || return $rc
	W_UP=0
	[ -n "$BG_PID" ] && _session_kill
	for pid in "${W_BG_PIDS[@]}"; do
		kill -0 "$pid" 2>/dev/null || continue
		kill -TERM "$pid" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
	done
	for pid in "${W_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${W_PIDS[@]}"; do
		wait "$pid" 2>/dev/null
	done
	if [ -n "${KEEP_WORLD:-}" ]; then
		echo "# KEEP_WORLD set: $W left in place" >&2
		return $rc
	fi
	errt_sweep "$W" "$W-*"
	return $rc
}

# world_config NAME [SANDBOX_EXTRA] [EGRESS_EXTRA] [TOP_EXTRA]: prints the
# file's path. Unless TOP_EXTRA has its own "dns", the world's DNS server is
# dns.upstream, so no world ever makes errand ask the machine's resolver.
world_config() {
	local name=$1 sandbox=${2:-} egress=${3:-} top=${4:-} f
	f=$W_DIR/$name.json
	[ -n "$sandbox" ] && sandbox=",$sandbox"
	[ -n "$egress" ] && egress=",$egress"
	[ -n "$top" ] && top=",
  $top"
	[[ "$top" == *'"dns"'* ]] || top=",
  \"dns\": { \"upstream\": [\"$DNS_UPSTREAM\"] }$top"
	cat >"$f" <<EOF
{
  "sandbox": {
    "requireFullEnforcement": false,
    "egress": { "treatAsPublic": [$W_PUBLIC]$egress }$sandbox
  },
  "paths": { "run": "/run/$W", "state": "$W_DIR/state", "bpf": "/sys/fs/bpf/$W", "cgroup": "$W" }$top
}
EOF
	echo "$f"
}

# dns_config NAME [DNS_EXTRA] [SANDBOX_EXTRA] [EGRESS_EXTRA]: a world_config
# whose "dns" has upstream $DNS_UPSTREAM, ttlFloor 1 and grace 0, each unless
# DNS_EXTRA names it, then DNS_EXTRA.
dns_config() {
	local name=$1 extra=${2:-} d=""
	[[ "$extra" == *'"upstream"'* ]] || d+="\"upstream\": [\"$DNS_UPSTREAM\"], "
	[[ "$extra" == *'"ttlFloor"'* ]] || d+='"ttlFloor": 1, '
	[[ "$extra" == *'"grace"'* ]] || d+='"grace": 0, '
	d+=$extra
	d=${d%, }
	world_config "$name" "${3:-}" "${4:-}" "\"dns\": { $d }"
}

world_config_plain() {
	local f=$W_DIR/$1.json
	cat >"$f" <<EOF
{
  "sandbox": { "requireFullEnforcement": false },
  "paths": { "run": "/run/$W", "state": "$W_DIR/state", "bpf": "/sys/fs/bpf/$W", "cgroup": "$W" }
}
EOF
	echo "$f"
}

_run_files() {
	RUN_N=$((RUN_N + 1))
	RUN_OUT=$W_DIR/run$RUN_N.out
	RUN_ERR=$W_DIR/run$RUN_N.err
}

_run_collect() {
	RUN_STDOUT=$(cat "$RUN_OUT")
	RUN_STDERR=$(cat "$RUN_ERR")
	echo "# exit $RUN_RC; stdout:"
	sed 's/^/#   /' "$RUN_OUT"
	echo "# stderr:"
	sed 's/^/#   /' "$RUN_ERR"
}

# For a test that runs errand-launch itself: a cgroup ($LCG) and a network
# namespace ($W-NAME) of the world's, and the session account's ids
# ($S_UID, $S_GID). The test removes the two (the sweep would otherwise).
launcher_setup() { # NAME
	LCG=$W_CG/$W-$1
	mkdir -p "$LCG"
	ip netns add "$W-$1"
	S_UID=$(id -u errand-session 2>/dev/null || echo 65534)
	S_GID=$(getent group errand-session | cut -d: -f3)
	[ -n "$S_GID" ] || S_GID=$(id -g errand-session 2>/dev/null || echo 65534)
}

errand_run() {
	_run_files
	echo "# errandctl run $*"
	in_host timeout -k 5 "${W_RUN_TIMEOUT:-60}" "$ERRANDCTL" run --config "$W_CONFIG" "$@" </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
	RUN_RC=$?
	_run_collect
	return 0
}

errand_start() {
	local n=0 args=() cmd=(sleep 60)
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		args+=("$1")
		shift
	done
	if [ "${1:-}" = -- ]; then
		shift
		cmd=("$@")
	fi
	_run_files
	SESSION=
	echo "# errandctl run ${args[*]} -- (background) ${cmd[*]}"
	# shellcheck disable=SC2016
	# exec: BG_PID is errandctl's own pid (signals in tests go to it).
	(exec nsenter --net="/run/netns/$W-host" "$ERRANDCTL" run --config "$W_CONFIG" "${args[@]}" -- \
		sh -c 'echo "id=$ERRAND_SESSION"; exec "$@"' sh "${cmd[@]}" </dev/null >"$RUN_OUT" 2>"$RUN_ERR") &
	BG_PID=$!
	W_BG_PIDS+=("$BG_PID")
	BG_OUT=$RUN_OUT
	BG_ERR=$RUN_ERR
	while [ $n -lt 200 ]; do
		SESSION=$(sed -n 's/^id=\([0-9a-f]\{8\}\)$/\1/p' "$RUN_OUT" | head -n1)
		[ -n "$SESSION" ] && break
		if ! kill -0 "$BG_PID" 2>/dev/null; then
			wait "$BG_PID"
			RUN_RC=$?
			BG_PID=
			echo "# the session did not start:"
			_run_collect
			return 1
		fi
		sleep 0.05
		n=$((n + 1))
	done
	if [ -z "$SESSION" ]; then
		echo "# the session did not report its id within 10 s"
		return 1
	fi
	echo "# session $SESSION running (errandctl pid $BG_PID)"
}

bg_wait() {
	local re=$1 n=0 max=$((${2:-10} * 20))
	while ! grep -Eq -- "$re" "$BG_OUT" 2>/dev/null; do
		if [ $n -ge $max ]; then
			echo "# no line /$re/ from the background session within ${2:-10} s"
			return 1
		fi
		sleep 0.05
		n=$((n + 1))
	done
}

bg_rounds() {
	local want n=0 max=$((${2:-10} * 20))
	want=$(($(grep -c '^round$' "$BG_OUT") + $1))
	while [ "$(grep -c '^round$' "$BG_OUT")" -lt "$want" ]; do
		if [ $n -ge $max ]; then
			echo "# fewer than $1 more rounds from the background session within ${2:-10} s"
			return 1
		fi
		sleep 0.05
		n=$((n + 1))
	done
}

bg_result() {
	sed -n "s/^$1=//p" "$BG_OUT" | tail -n 1
}

bg_wait_sh() {
	# shellcheck disable=SC2016
	echo ': errand-bg-wait; go=; trap "go=1" USR1; echo "waiting=1"; while [ -z "$go" ]; do sleep 0.05; done; echo "go=1"; '
}

# Signals the session's shell that runs bg_wait_sh (its command line starts
# "sh -c" and holds the marker; the launcher's, which holds it too, does not
# start so), until the session says go=1.
bg_go() {
	local d=$W_CG/$W/$SESSION n=0 p
	bg_wait '^waiting=1' || return 1
	while ! grep -q '^go=1' "$BG_OUT"; do
		if [ $n -ge 200 ]; then
			echo "# the background session did not take the go signal"
			return 1
		fi
		if [ $((n % 10)) = 0 ]; then
			for p in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do
				tr '\0\n' '  ' 2>/dev/null <"/proc/$p/cmdline" | grep -q '^sh -c .*: errand-bg-wait;' &&
					kill -USR1 "$p" 2>/dev/null
			done
		fi
		sleep 0.02
		n=$((n + 1))
	done
}

# The session's cgroup: where its processes are, below <cgroup2>/$W/<id>.
session_cgroup() {
	local id=${1:-$SESSION}
	echo "$W_CG/$W/$id"
}

session_procs_dir() {
	local f
	while IFS= read -r f; do
		[ -n "$(cat "$f")" ] && { echo "${f%/cgroup.procs}"; return; }
	done < <(find "$(session_cgroup "${1:-$SESSION}")" -name cgroup.procs 2>/dev/null)
}

session_pins() {
	local f
	for f in "/sys/fs/bpf/$W/${2:-$SESSION}"/*; do
		bpftool "$1" show pinned "$f" >/dev/null 2>&1 && basename "$f"
	done | sort | tr '\n' ' '
}

_session_kill() {
	local d=$W_CG/$W/$SESSION
	[ -n "$SESSION" ] && [ -d "$d" ] || return 0
	if [ -e "$d/cgroup.kill" ]; then
		echo 1 >"$d/cgroup.kill"
	else
		local p
		find "$d" -name cgroup.procs -exec cat {} + | while read -r p; do kill -KILL "$p"; done
	fi
}

errand_stop() {
	[ -n "$BG_PID" ] || return 0
	_session_kill
	wait "$BG_PID"
	RUN_RC=$?
	BG_PID=
	RUN_OUT=$BG_OUT
	RUN_ERR=$BG_ERR
	_run_collect
}

agent_sock() { echo "/run/$W/agent.sock"; }

agent_start() {
	local n=0
	AGENT_LOG=${AGENT_LOG:-$W_DIR/agent.log}
	echo "# errand-agent --foreground --config $W_CONFIG $*"
	# exec: AGENT_PID is the agent's own pid (kill -9 in tests goes to it).
	(exec nsenter --net="/run/netns/$W-host" "$ROOT/build/bin/errand-agent" --foreground \
		--config "$W_CONFIG" "$@" </dev/null >>"$AGENT_LOG" 2>&1) &
	AGENT_PID=$!
	W_PIDS+=("$AGENT_PID")
	while [ $n -lt 100 ]; do
		"$ERRANDCTL" --config "$W_CONFIG" version 2>/dev/null | grep -q '^errand-agent [0-9]' && return 0
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.05
		n=$((n + 1))
	done
	echo "# errand-agent did not come up; its log:"
	sed 's/^/#   /' "$AGENT_LOG"
	return 1
}

agent_kill9() {
	kill -KILL "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
}

agent_stop() {
	kill -TERM "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
}

# probe_script LABEL 'ARGS' [LABEL 'ARGS']...: a sh script for the session.
probe_script() {
	local s=""
	while [ $# -ge 2 ]; do
		s+="echo \"$1=\$($PROBE $2 2>&1 | tail -n 1)\"; "
		shift 2
	done
	echo "$s"
}

# sh lines for a session reporting its links (links=lo eth0 ), its IPv4
# routes (routes=default via 10.213.0.1 dev eth0;10.213.0.0/30 dev eth0;) and
# its default gateway (gw=10.213.0.1). From /proc/net, not ip(8): a session
# may not open netlink sockets.
net_script() {
	cat <<'EOS'
_nawk='function h(x, i, n) { n = 0; for (i = 1; i <= length(x); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(x, i, 1))) - 1; return n } function ip(x) { return h(substr(x, 7, 2)) "." h(substr(x, 5, 2)) "." h(substr(x, 3, 2)) "." h(substr(x, 1, 2)) } function len(x, n, b) { n = h(x); b = 0; while (n > 0) { b += n % 2; n = int(n / 2) } return b }'; echo "links=$(awk -F: 'NR > 2 { gsub(/ /, "", $1); printf "%s ", $1 }' /proc/net/dev)"; echo "routes=$(awk "$_nawk"' NR > 1 { if ($2 == "00000000" && $8 == "00000000") printf "default via %s dev %s;", ip($3), $1; else { printf "%s/%d", ip($2), len($8); if ($3 != "00000000") printf " via %s", ip($3); printf " dev %s;", $1 } }' /proc/net/route)"; echo "gw=$(awk "$_nawk"' NR > 1 && $2 == "00000000" && $8 == "00000000" { print ip($3); exit }' /proc/net/route)"; 
EOS
}

result() {
	sed -n "s/^$1=//p" "$RUN_OUT" | tail -n 1
}

# Refusal events of the last run: text lines or JSON lines.
events() {
	grep -E '^errand: session=[0-9a-f]+ refused |"event" *: *"refused"' "$RUN_ERR" | grep -E -- "${1:-.}"
}

event_count() {
	events "$1" | wc -l | tr -d ' '
}

# Denied-name events of the last run: text lines or JSON lines.
denials() {
	grep -E '^errand: session=[0-9a-f]+ denied |"event" *: *"denied"' "$RUN_ERR" | grep -E -- "${1:-.}"
}

denial_count() {
	denials "$1" | wc -l | tr -d ' '
}

# The world's DNS server (probe dns-serve) on $DNS_UPSTREAM:53, in $W-wan.
dns_test_zone() {
	local i
	cat <<EOZ
api.test A $HOST_A 60
other.test A $HOST_B 60
wild.test A $HOST_A 60
x.wild.test A $HOST_A 60
y.wild.test A $HOST_B 60
a.b.wild.test A $HOST_A 60
alias.test CNAME mid.test 30
mid.test CNAME api.test 20
rebind-lo.test A 127.0.0.1
rebind-ten.test A 10.0.0.1
rebind-priv.test A $HOST_PRIV
rebind-meta.test A $HOST_META
rebind-mapped.test AAAA ::ffff:10.0.0.1
rebind-agent.test A $AGENT_ADDR
mixed.test A $HOST_PRIV
mixed.test A $HOST_A
zero.test A $HOST_A 0
short.test A $HOST_A 2
long.test A $HOST_A 100000
txt.test TXT hello
txt.test A $HOST_A
v4only.test A $HOST_A
secret.test A $HOST_B
pinned.test A $HOST_B
EOZ
	# long.chain.test: a chain too long for a UDP answer (truncated: asked
	# again over TCP)
	local l63=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
	echo "long.chain.test CNAME c1.$l63.$l63.$l63.test 30"
	echo "c1.$l63.$l63.$l63.test CNAME c2.$l63.$l63.$l63.test 30"
	echo "c2.$l63.$l63.$l63.test CNAME c3.$l63.$l63.$l63.test 30"
	echo "c3.$l63.$l63.$l63.test A $HOST_A 60"
	for i in $(seq 1 8); do echo "many.test A 198.18.6.$i"; done
	for i in $(seq 1 70); do echo "n$i.wild.test A 198.18.4.$i"; done
	for i in $(seq 1 10); do echo "m$i.test A 198.18.5.$i"; done
}

world_dns() {
	local silent=() n=0
	if [ "${1:-}" = --silent ]; then
		silent=(--silent)
		shift
	fi
	if [ $# -eq 0 ]; then
		dns_test_zone >"$W_DIR/zone"
	else
		printf '%s\n' "$@" >"$W_DIR/zone"
	fi
	world_dns_stop
	[ -e "$DNS_LOG" ] || : >"$DNS_LOG"
	_start_ready wan "$W_DIR/dns.out" "$PROBE" dns-serve "${silent[@]}" --zone "$W_DIR/zone" \
		--log "$DNS_LOG" "$DNS_UPSTREAM:53" || return 1
	W_DNS_PID=${W_PIDS[-1]}
	# Up is up: it answers (or, silent, logs) a query from the agent namespace.
	if [ ${#silent[@]} -eq 0 ]; then
		while ! in_host "$PROBE" dns "$DNS_UPSTREAM" world-check.invalid >/dev/null 2>&1; do
			[ $n -ge 20 ] && { echo "world: the DNS server does not answer" >&2; return 1; }
			sleep 0.1
			n=$((n + 1))
		done
	fi
}

world_dns_stop() {
	local p keep=()
	[ -n "$W_DNS_PID" ] || return 0
	kill -TERM "$W_DNS_PID" 2>/dev/null
	wait "$W_DNS_PID" 2>/dev/null
	for p in "${W_PIDS[@]}"; do
		[ "$p" = "$W_DNS_PID" ] || keep+=("$p")
	done
	W_PIDS=("${keep[@]}")
	W_DNS_PID=
}

dns_queries() {
	[ -e "$DNS_LOG" ] || return 0
	grep -E -- "${1:-.}" "$DNS_LOG"
}

# Queries the server received for NAME (any type, any case).
dns_query_count() {
	local n=${1,,}
	[ -e "$DNS_LOG" ] || { echo 0; return; }
	grep -c -F -- "query $n " "$DNS_LOG"
}

# sh that sets NS to the session's nameserver, as its resolv.conf names it.
session_ns_sh() {
	# shellcheck disable=SC2016
	echo 'NS=$(sed -n "s/^nameserver[[:space:]]*//p" /etc/resolv.conf | head -n 1); '
}

# errandctl observe in the agent's namespace, in the background.
observe_start() {
	OBSERVE_OUT=$W_DIR/observe$RUN_N.$RANDOM.out
	(exec nsenter --net="/run/netns/$W-host" "$ERRANDCTL" observe --config "$W_CONFIG" "$@" \
		</dev/null >"$OBSERVE_OUT" 2>&1) &
	OBSERVE_PID=$!
	W_BG_PIDS+=("$OBSERVE_PID")
	echo "# errandctl observe $* (pid $OBSERVE_PID)"
}

observe_stop() {
	[ -n "$OBSERVE_PID" ] || return 0
	kill -TERM "$OBSERVE_PID" 2>/dev/null
	wait "$OBSERVE_PID" 2>/dev/null
	OBSERVE_PID=
	OBSERVE_TEXT=$(cat "$OBSERVE_OUT")
	echo "# observe printed:"
	sed 's/^/#   /' "$OBSERVE_OUT"
}

# launchers_waiting: how many launchers started ahead (errand-launch --await)
# wait in this world's prepared networks.
launchers_waiting() {
	local p n=0
	for p in $(pgrep -f '^[^ ]*errand-launch --await '); do
		grep -q "/$W/" "/proc/$p/cgroup" 2>/dev/null && n=$((n + 1))
	done
	echo "$n"
}

# pool_ready N: until N launchers wait in this world's prepared networks
# (10 s at most).
pool_ready() {
	for _ in $(seq 1 100); do
		[ "$(launchers_waiting)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# errandctl hands CMD's status back first and removes the session in a
# child (errand-teardown): teardown_wait waits (15 s at most) until no
# such child of this world is left.
teardown_wait() {
	local p n=0 busy=1
	while [ -n "$busy" ] && [ $n -lt 300 ]; do
		busy=
		for p in $(pgrep -x errand-teardown); do
			grep -qa -- "$W" "/proc/$p/cmdline" 2>/dev/null && busy=1
		done
		[ -n "$busy" ] && sleep 0.05
		n=$((n + 1))
	done
}

leftovers() {
	local f
	# what is left is what remains after the teardowns
	teardown_wait
	for f in /run/"$W"/netns/*; do
		[ -e "$f" ] && echo "netns file $f"
	done
	# An agent's hooks cgroup is the agent's while it holds them (the
	# programs stay attached there, no process in it, while it runs).
	if [ -d "$W_CG/$W" ]; then
		find "$W_CG/$W" -mindepth 1 -type d 2>/dev/null | while read -r f; do
			[ "$f" = "$W_CG/$W/hooks" ] && [ -n "$(bpftool cgroup show "$f" 2>/dev/null)" ] &&
				continue
			echo "cgroup $f"
		done
	fi
	# The program set (prog/<hash>) stays for the sessions to come; what
	# must not stay is a session's key in its maps.
	if [ -d "/sys/fs/bpf/$W" ]; then
		find "/sys/fs/bpf/$W" -mindepth 1 2>/dev/null | grep -v "^/sys/fs/bpf/$W/prog\(/\|$\)" |
			sed 's/^/bpffs /'
		for f in /sys/fs/bpf/"$W"/prog/*/cfg_of /sys/fs/bpf/"$W"/prog/*/veth_sess /sys/fs/bpf/"$W"/prog/*/tc_sess; do
			[ -e "$f" ] || continue
			bpftool -j map dump pinned "$f" 2>/dev/null |
				python3 -c 'import json,sys; n=len(json.load(sys.stdin)); print(n) if n else None' |
				sed "s|^|bpf session keys in $f: |"
		done
	fi
	in_host "$IP" -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' |
		grep '^eh' | sed 's/^/link /'
	# The address pools' NAT tables (errand-pool-..., errand-pool6-...) serve every session
	# of the pool, ever, as the program set does: it stays.
	in_host nft list tables 2>/dev/null | grep 'errand-' | grep -v 'errand-pool6\?-' | sed 's/^/nft /'
}
