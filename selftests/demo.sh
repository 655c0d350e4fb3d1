#!/bin/bash
# make demo: a world of its own (selftests/lib/world.sh), one session that
# reaches the host it was allowed and is refused everywhere else, told in a
# few lines; then everything is cleaned up. Exit 0 when all went as expected.
# Set DEMO_VERBOSE=1 to see the session's own output and errandctl's stderr.
. "$(dirname "$0")/lib/world.sh"

if [ "$(id -u)" != 0 ]; then
	echo "demo: run as root (it builds network namespaces and cgroups of its own)" >&2
	exit 1
fi
[ -x "$ERRANDCTL" ] || { echo "demo: $ERRANDCTL is not built (make)" >&2; exit 1; }
[ -x "$PROBE" ] || { echo "demo: $PROBE is not built (make)" >&2; exit 1; }

# What would make a test skip ends the demo, saying why.
skip() {
	echo "demo: cannot run here: $*" >&2
	exit 1
}

log=$(mktemp /tmp/errand-demo.XXXXXX)
world_up >"$log" || { cat "$log"; rm -f "$log"; exit 1; }
world_dns >>"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
good=1

echo "world: agent namespace $W-host (198.18.0.1), wan $W-wan with public hosts"
echo "       $HOST_A and $HOST_B, a private one $HOST_PRIV, metadata $HOST_META,"
echo "       and a DNS server $DNS_UPSTREAM that knows api.test and other.test"
args=(--egress api.test)
echo "session: errandctl run ${args[*]} -- probe ..."
errand_run "${args[@]}" -- sh -c "$(probe_script \
	name "resolve api.test" \
	other "resolve other.test" \
	a "tcp $HOST_A 443" \
	b "tcp $HOST_B 443" \
	priv "tcp $HOST_PRIV 443" \
	meta "tcp $HOST_META 80" \
	a8080 "tcp $HOST_A 8080")" >>"$log" 2>&1
[ -n "${DEMO_VERBOSE:-}" ] && sed 's/^/    | /' "$log"

# One line per destination: what happened, and a note where it was not what
# was expected.
reason_of() {
	events "addr=${1%:*} port=${1##*:} " | sed -n 's/.*reason=\([a-z-]*\).*/\1/p' | head -n 1
}
dots() {
	local s="$1 "
	while [ ${#s} -lt 32 ]; do s+=.; done
	printf '%s' "$s"
}

res=$(result name)
printf '  %s %s\n' "$(dots "api.test resolves")" "${res:-no result}"
[ "$res" = "resolved $HOST_A" ] || { good=0; echo "    ^ expected: resolved $HOST_A (errand's responder)"; }
res=$(result other)
printf '  %s %s\n' "$(dots "other.test resolves")" "${res:-no result}"
[[ "$res" == noname* ]] || { good=0; echo "    ^ expected: no such name (only allowed names exist)"; }
[ "$(dns_query_count other.test)" = 0 ] || { good=0; echo "    ^ expected: never asked upstream"; }
res=$(result a)
case $res in
ok\ *) shown="reached: ${res#ok }" ;;
EPERM) shown="refused ($(reason_of $HOST_A:443))" ;;
*) shown=${res:-no result} ;;
esac
printf '  %s %s\n' "$(dots "api.test ($HOST_A:443)")" "$shown"
[[ "$(result a)" == "ok hello $HOST_A:443" ]] || { good=0; echo "    ^ expected to reach it"; }
for spec in "b $HOST_B:443 not-allowed" "a8080 $HOST_A:8080 not-allowed" "priv $HOST_PRIV:443 forbidden" \
	"meta $HOST_META:80 forbidden"; do
	set -- $spec
	res=$(result "$1")
	reason=$(reason_of "$2")
	if [ "$res" = EPERM ]; then
		shown="refused (${reason:-no event})"
	else
		shown="${res:-no result}"
	fi
	printf '  %s %s\n' "$(dots "$2")" "$shown"
	if [ "$res" != EPERM ] || [ "$reason" != "$3" ]; then
		good=0
		echo "    ^ expected: refused ($3)"
	fi
done
[ "$RUN_RC" = 0 ] || { good=0; echo "  errandctl exited $RUN_RC (expected 0)"; }

left=$(leftovers)
if [ -z "$left" ]; then
	echo "cleaned up: no namespace, cgroup, pin, veth or nft table of the session left"
else
	good=0
	echo "left behind:"
	sed 's/^/  /' <<<"$left"
fi
world_down >>"$log" 2>&1
rm -f "$log"
if [ $good = 1 ]; then
	echo "demo: all as expected"
	exit 0
fi
echo "demo: something was not as expected (DEMO_VERBOSE=1 selftests/demo.sh for the details)"
exit 1
