#!/bin/bash
# Guarantee: make install puts errandctl, errandctl-full, errand-agent, errand-launch and errand-broker (those built) together in PREFIX/lib/errand with errandctl and errand-agent linked into PREFIX/bin and PREFIX/sbin, the man pages errandctl(8) and errand-agent(8) where man finds them and free of roff warnings, a bash completion that registers for errandctl, a systemd unit that never kills sessions (Delegate=yes, KillMode=process) and starts the installed agent, and /etc/errand 0700; the installed errandctl runs.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
command -v install >/dev/null || skip "install(1) is missing (coreutils)"

MUST_WORK=0
{ [ "${ERRAND_MUST_WORK:-0}" = 1 ] || [ "${CI:-}" = true ]; } && MUST_WORK=1

# Not a world: only a directory to install into, under the runner's sweep
# prefix so that a crashed run's copy is swept.
D=/tmp/$W-install
rm -rf "$D"
trap 'rm -rf "$D"' EXIT
mkdir -p "$D"

out=$(make -C "$ROOT" --no-print-directory install DESTDIR="$D" PREFIX=/usr 2>&1)
rc=$?
sed 's/^/#   /' <<<"$out" | tail -n 25
assert_eq "$rc" 0 "make install DESTDIR=$D PREFIX=/usr succeeds" || { world_finish; exit 1; }

# Binaries: every one built is installed, executable, in /usr/lib/errand.
for b in errandctl errandctl-full errand-agent errand-launch errand-broker; do
	if [ -f "$ROOT/build/bin/$b" ]; then
		assert_eq "$([ -f "$D/usr/lib/errand/$b" ] && [ -x "$D/usr/lib/errand/$b" ] && echo yes)" yes \
			"$b is installed in /usr/lib/errand, executable"
		assert_eq "$(cmp -s "$ROOT/build/bin/$b" "$D/usr/lib/errand/$b" && echo same)" same \
			"... and is the one built"
	elif [ $MUST_WORK = 1 ]; then
		assert_eq "missing" "built" "build/bin/$b is built (ERRAND_MUST_WORK)"
	else
		trace "build/bin/$b is not built yet: not checked"
	fi
done

# The links resolve to the real binaries, so errandctl and errand-agent find
# errand-launch beside them (the directory of /proc/self/exe).
for pair in bin/errandctl sbin/errand-agent; do
	b=${pair#*/}
	[ -f "$ROOT/build/bin/$b" ] || continue
	assert_eq "$([ -L "$D/usr/$pair" ] && echo link)" link "/usr/$pair is a symlink"
	assert_eq "$(readlink -f "$D/usr/$pair")" "$(readlink -f "$D/usr/lib/errand/$b")" \
		"... resolving to /usr/lib/errand/$b"
	assert_eq "$(readlink "$D/usr/$pair")" "../lib/errand/$b" "... by a relative path, valid with or without DESTDIR"
done

ver=$("$D/usr/bin/errandctl" version 2>&1)
rc=$?
assert_eq "$rc" 0 "the installed errandctl version runs (the front, handing it to errandctl-full beside it)"
assert_match "$ver" '^errandctl [0-9]+\.[0-9]+' "... and prints a version ($(head -n 1 <<<"$ver"))"

# Man pages: there, and formatted without a warning.
for m in errandctl errand-agent; do
	f=$D/usr/share/man/man8/$m.8
	assert_eq "$([ -f "$f" ] && echo yes)" yes "/usr/share/man/man8/$m.8 is installed"
	assert_eq "$(grep -c '^\.TH' "$f" 2>/dev/null)" 1 "... with one .TH header"
	if command -v groff >/dev/null; then
		warn=$(groff -man -Tutf8 -ww -z "$f" 2>&1)
		assert_empty "$warn" "... formatted by groff -man -ww without a warning"
		text=$(groff -man -Tutf8 "$f" 2>/dev/null | sed 's/.\x08//g')
		assert_match "$text" '^NAME' "... with a NAME section"
		assert_match "$text" "^ +$m +- " "... naming $m"
		assert_match "$text" '^SYNOPSIS' "... and a SYNOPSIS"
	else
		trace "groff is not installed: $m.8 checked for its .TH line only"
	fi
done
errandctl_page=$(cat "$D/usr/share/man/man8/errandctl.8")
for c in run sessions show stop grant revoke denied observe doctor reload version help; do
	assert_match "$errandctl_page" "^\.SS $c( |\$)" "errandctl(8) documents $c"
done
for o in config egress pin project env image json; do
	assert_contains "$errandctl_page" "\\-\\-$o" "errandctl(8) documents --$o"
done

# The completion: sourceable by a plain bash, registers for errandctl, and
# completes the command names.
comp=$D/usr/share/bash-completion/completions/errandctl
assert_eq "$([ -f "$comp" ] && echo yes)" yes "the bash completion is installed"
reg=$(bash --norc --noprofile -c '. "$1" && complete -p errandctl' _ "$comp" 2>&1)
assert_eq "$?" 0 "it is sourceable by bash"
assert_match "$reg" '^complete -F [A-Za-z_]+ errandctl$' "... and registers complete -p errandctl"
words=$(bash --norc --noprofile -c '. "$1"
	COMP_LINE="errandctl re"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(errandctl re); COMP_CWORD=1
	_errandctl; echo "${COMPREPLY[*]}"' _ "$comp" 2>&1)
assert_eq "$words" "revoke receipts reload" "it completes errandctl re to revoke, receipts and reload"

# The unit: keeps sessions alive across restarts, starts the installed agent.
unit=$D/lib/systemd/system/errand-agent.service
assert_eq "$([ -f "$unit" ] && echo yes)" yes "the unit is installed in /lib/systemd/system"
text=$(cat "$unit" 2>/dev/null)
assert_match "$text" '^Delegate=yes$' "it has Delegate=yes"
assert_match "$text" '^KillMode=process$' "it has KillMode=process"
assert_match "$text" '^Type=notify$' "it is Type=notify (the agent says READY=1 once agent.sock serves)"
assert_match "$text" '^ExecReload=/bin/kill -HUP \$MAINPID$' "reload is SIGHUP"
assert_no_match "$text" '@[A-Z]+@' "every @VAR@ is substituted"
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
assert_eq "$exec_start" /usr/sbin/errand-agent "ExecStart runs /usr/sbin/errand-agent"
if [ -f "$ROOT/build/bin/errand-agent" ]; then
	assert_eq "$([ -x "$D$exec_start" ] && echo yes)" yes "... which is installed, executable"
elif [ $MUST_WORK = 1 ]; then
	assert_eq "missing" "built" "build/bin/errand-agent is built, for ExecStart (ERRAND_MUST_WORK)"
else
	trace "build/bin/errand-agent is not built yet: ExecStart's file not checked"
fi
if command -v systemd-analyze >/dev/null && [ -f "$ROOT/build/bin/errand-agent" ]; then
	# verify resolves ExecStart on this machine: point it into DESTDIR
	vdir=$D/verify
	mkdir -p "$vdir"
	sed "s|^ExecStart=$exec_start|ExecStart=$D$exec_start|; /^Documentation=/d" "$unit" >"$vdir/errand-agent.service"
	v=$(systemd-analyze verify "$vdir/errand-agent.service" 2>&1)
	assert_empty "$v" "systemd-analyze verify finds nothing wrong with the unit"
fi

assert_eq "$(stat -c %a "$D/etc/errand" 2>/dev/null)" 700 "/etc/errand is made, mode 0700"

# uninstall takes back what install put there, and only that.
out=$(make -C "$ROOT" --no-print-directory uninstall DESTDIR="$D" PREFIX=/usr 2>&1)
assert_eq "$?" 0 "make uninstall succeeds"
left=$(cd "$D" && find . \( -type f -o -type l \) ! -path './verify/*' | sort)
assert_empty "$left" "make uninstall leaves no file behind"

world_finish
