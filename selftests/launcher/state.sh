#!/bin/bash
# Guarantee: a session's state directory is its own: HOME, 0700 and writable by the session's uid only, gone when the session ends, and removed without following what the session left in it: a link to a host directory goes, the directory never does; a state path that resolves to / is refused.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
VICTIM=$W_DIR/victim
mkdir -p "$PROJ" "$VICTIM/sub"
chmod 0777 "$PROJ"
echo keep >"$VICTIM/keep"
echo keep >"$VICTIM/sub/keep"
W_CONFIG=$(world_config state)

errand_run --egress none --project "$PROJ" -- sh -c "
	echo \"home=\$HOME\"
	echo \"mode=\$(stat -c '%a %u' \"\$HOME\")\"
	echo \"write=\$(echo x >\"\$HOME/file\" && echo ok)\"
	mkdir -p \"\$HOME/a/b\"
	ln -s $VICTIM \"\$HOME/evil\"
	ln -s $VICTIM/keep \"\$HOME/evil-file\"
	ln -s $VICTIM \"\$HOME/a/b/evil\"
	ln -s $VICTIM/sub \"\$HOME/a/evil-sub\"
	echo \"links=\$(ls \"\$HOME\" | tr '\n' ' ')\"
"
home=$(result home)
assert_eq "$RUN_RC" 0 "the session ran"
assert_match "$home" "^$W_DIR/state/sessions/[0-9a-f]{8}/" "HOME is the session's state directory, under paths.state"
assert_eq "$(result mode)" "700 0" "it is 0700 and the session's own"
assert_eq "$(result write)" ok "the session writes there"
assert_eq "$(result links)" "a evil evil-file file " "the session left links to a host directory in it"
assert_eq "$(ls -d "$home" 2>/dev/null)" "" "the state directory is gone after the session"
assert_eq "$(cat "$VICTIM/keep" 2>/dev/null)" keep "a host directory a link in it pointed at is untouched"
assert_eq "$(cat "$VICTIM/sub/keep" 2>/dev/null)" keep "... also where the link was deeper down"
assert_empty "$(leftovers)" "nothing is left"

# A state path that resolves to / (a link to it, or //) is refused like / is:
# exit 125, one line, the command never runs.
launcher_setup state
ln -s / "$W_DIR/rootlink"
for st in "$W_DIR/rootlink" //; do
	"$ROOT/build/bin/errand-launch" --session "$W-s" --cgroup "$LCG" --netns "/run/netns/$W-state" \
		--uid "$S_UID" --gid "$S_GID" --project "$PROJ" --state "$st" -- sh -c 'echo ran' \
		>"$W_DIR/root.out" 2>"$W_DIR/root.err"
	assert_eq "$?:$(grep -c . "$W_DIR/root.err")" "125:1" "--state $st: exit 125, one line"
	assert_contains "$(cat "$W_DIR/root.err")" "resolves to /" "... saying it resolves to /"
	assert_empty "$(cat "$W_DIR/root.out")" "... and the command did not run"
done
world_finish
