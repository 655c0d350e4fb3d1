#!/bin/bash
# Guarantee: the project is written as its owner: a session creates, edits, renames and deletes files and commits with git in a project (mode 755) owned by an ordinary user or by root; on disk what it made belongs to the project's owner and existing files keep theirs, while the session stays errand-session, writes nothing outside the project and state directories, cannot read another user's 0600 file in the project or elsewhere, nor write a third user's 0644 file; only the owner or root may ask for it; a user namespace the agent lends for the idmap is taken only for a project of the owner it maps.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
command -v git >/dev/null || skip "git is missing"
command -v useradd >/dev/null || skip "useradd (passwd) is missing"
world_up

OWNER=${W}o
THIRD=${W}t
project_down() {
	local rc=$?
	userdel "$OWNER" 2>/dev/null
	userdel "$THIRD" 2>/dev/null
	getent group "$OWNER" >/dev/null && groupdel "$OWNER" 2>/dev/null
	getent group "$THIRD" >/dev/null && groupdel "$THIRD" 2>/dev/null
	(exit $rc)
	world_down
}
trap project_down EXIT
useradd --no-create-home --user-group --shell /usr/sbin/nologin "$OWNER" &&
	useradd --no-create-home --user-group --shell /usr/sbin/nologin "$THIRD" ||
	{ echo "cannot add the test users $OWNER and $THIRD" >&2; exit 1; }
S_UID=$(id -u errand-session 2>/dev/null || echo 65534)
SHARED=$W_DIR/shared
mkdir -p "$SHARED"
chmod 0755 "$SHARED"
echo elsewhere-secret >"$SHARED/secret.txt"
chown "$THIRD:$THIRD" "$SHARED/secret.txt"
chmod 0600 "$SHARED/secret.txt"
W_CONFIG=$(world_config project "\"policyExtra\": { \"read\": [\"$SHARED\"] }")

# The project's filesystem must be one this kernel can idmap (ext4, xfs and
# btrfs since 5.12, tmpfs since 6.3); launcher/project-gap covers the others.
fs=$(stat -f -c %T "$W_DIR")
kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
case $fs in
ext2/ext3 | xfs | btrfs) ;;
tmpfs) [ "$kv" -ge 6003 ] || fs= ;;
*) fs= ;;
esac
if [ -z "$fs" ]; then
	[ "${ERRAND_MUST_WORK:-0}" = 1 ] && { echo "not ok - $W_DIR ($(stat -f -c %T "$W_DIR")) cannot be idmapped here"; exit 1; }
	skip "$W_DIR is on $(stat -f -c %T "$W_DIR"), which this kernel cannot idmap"
fi
probe=$W_DIR/probe
mkdir -p "$probe"
verdict=$(cd "$probe" && in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json |
	python3 -c 'import json,sys; f=json.load(sys.stdin)["projectFilesystem"]; print(f["type"], f["idmap"])' 2>&1)
assert_match "$verdict" "^[a-z0-9]+ True$" "doctor says the project's filesystem ($fs) can be idmapped"

session_script() {
	cat <<EOS
cd "\$1" || exit 1
echo "uidmap=\$(tr -s ' ' </proc/self/uid_map | sed 's/^ //')"
echo one >new.txt && echo two >>new.txt && echo "edited=\$(tr '\n' , <new.txt)"
mv new.txt renamed.txt && [ ! -e new.txt ] && echo "renamed=\$(cat renamed.txt | tr '\n' ,)"
mkdir -p gone/sub && echo x >gone/sub/f && rm -r gone && [ ! -e gone ] && echo deleted=ok
echo more >>existing.txt && echo "existing=\$(tail -n 1 existing.txt)"
echo "inside_owner=\$(stat -c %u renamed.txt)"
echo "third_write=\$( (echo x >>third.txt) 2>&1 | sed 's/.*: //')"
echo "third_chmod=\$(chmod 0666 third.txt 2>&1 | sed 's/.*: //')"
echo "third_read=\$(cat third.txt)"
echo "secret_in=\$(cat secret.txt 2>&1 | sed 's/.*: //')"
echo "secret_out=\$(cat $SHARED/secret.txt 2>&1 | sed 's/.*: //')"
echo "shared_write=\$( (echo x >$SHARED/new) 2>/dev/null && echo ok || echo refused)"
echo "etc_write=\$( (echo x >/etc/errt-project) 2>/dev/null && echo ok || echo refused)"
echo "state_write=\$( (echo x >"\$HOME/f") 2>/dev/null && echo ok || echo refused)"
cp /bin/sh tool
echo "suid=\$(chmod 4755 tool 2>&1 | sed 's/.*: //')"
echo "sgid=\$(chmod 2755 tool 2>&1 | sed 's/.*: //')"
echo "suid_create=\$(python3 -c 'import os; os.open("tool2", os.O_CREAT | os.O_WRONLY, 0o6755)' 2>&1 | tail -n 1 | sed 's/:.*//')"
echo "fcaps=\$(python3 -c 'import os; os.setxattr("tool", "security.capability", bytes.fromhex("01000002" "c0000000" "00000000" "00000000" "00000000"))' 2>&1 | tail -n 1 | sed 's/:.*//')"
git init -q . && git add renamed.txt existing.txt &&
	git -c user.name=errt -c user.email=errt@example.invalid commit -q -m "from the session" &&
	echo "git=\$(git log --format=%s)"
EOS
}

for who in "$OWNER" root; do
	# The user's as `errandctl run --project ~/repo` names it: in a home
	# errand-session cannot even enter.
	P=$W_DIR/project-$who
	[ "$who" = root ] || P=$W_DIR/home-$who/repo
	mkdir -p "$P"
	if [ "$who" != root ]; then
		chown "$who:$who" "${P%/repo}"
		chmod 0700 "${P%/repo}"
	fi
	echo before >"$P/existing.txt"
	echo third >"$P/third.txt"
	echo in-project-secret >"$P/secret.txt"
	chown "$who:$who" "$P" "$P/existing.txt"
	chown "$THIRD:$THIRD" "$P/third.txt" "$P/secret.txt"
	chmod 0755 "$P"
	chmod 0644 "$P/existing.txt" "$P/third.txt"
	chmod 0600 "$P/secret.txt"
	o_uid=$(id -u "$who")
	o_gid=$(id -g "$who")

	errand_run --egress none --project "$P" -- sh -c "$(session_script)" sh "$P"
	assert_eq "$RUN_RC" 0 "[$who] the session ran in a 755 project owned by $who ($P)"
	assert_eq "$(result uidmap)" "0 $S_UID 1" "[$who] ... as errand-session (uid $S_UID), never as the owner"
	assert_eq "$(result edited)" "one,two," "[$who] it creates and edits a file"
	assert_eq "$(result renamed)" "one,two," "[$who] ... renames it"
	assert_eq "$(result deleted)" ok "[$who] ... makes and deletes a tree"
	assert_eq "$(result existing)" more "[$who] ... and edits a file the owner had"
	assert_eq "$(result git)" "from the session" "[$who] git init, add and commit work"
	assert_eq "$(result inside_owner)" 0 "[$who] inside, what it made is its own"
	assert_eq "$(stat -c %u:%g "$P/renamed.txt" 2>/dev/null)" "$o_uid:$o_gid" \
		"[$who] on disk, what it made belongs to the project's owner ($who)"
	assert_eq "$(find "$P/.git" ! -user "$who" 2>/dev/null | head -3)" "" \
		"[$who] ... so does every file of the git repository"
	assert_eq "$(find "$P" -uid "$S_UID" 2>/dev/null | head -3)" "" "[$who] nothing is owned by errand-session"
	assert_eq "$(stat -c %u:%g "$P/existing.txt")" "$o_uid:$o_gid" "[$who] an existing file keeps its owner"
	assert_eq "$(git -c safe.directory='*' -C "$P" log --format=%s 2>&1)" "from the session" \
		"[$who] the host sees the commit"
	assert_eq "$(result third_write)" "Permission denied" "[$who] a third user's 0644 file is not writable"
	# EOVERFLOW: its owner has no id in the session at all.
	assert_match "$(result third_chmod)" "^(Operation not permitted|Value too large for defined data type)$" \
		"[$who] ... nor can its mode change"
	assert_eq "$(result third_read)" third "[$who] ... while it reads, as its mode gives others (control)"
	assert_eq "$(cat "$P/third.txt"):$(stat -c %U:%a "$P/third.txt")" "third:$THIRD:644" \
		"[$who] ... and on disk it is untouched, still $THIRD's"
	assert_eq "$(result secret_in)" "Permission denied" "[$who] another user's 0600 file in the project stays unreadable"
	assert_eq "$(result secret_out)" "Permission denied" "[$who] ... and one elsewhere (a policyExtra read grant)"
	assert_eq "$(result shared_write)" refused "[$who] nothing is written outside the project and state: not a read grant"
	assert_eq "$(result etc_write)" refused "[$who] ... nor /etc"
	assert_eq "$(ls "$SHARED/new" /etc/errt-project 2>/dev/null)" "" "[$who] ... nothing appeared on the host"
	assert_eq "$(result state_write)" ok "[$who] the state directory is written"
	# Written as the owner, a setuid, setgid or file-capability binary would
	# run as the owner (root) for whoever executes it on the host.
	assert_eq "$(result suid):$(result sgid)" "Operation not permitted:Operation not permitted" \
		"[$who] the session cannot make a setuid or setgid file"
	assert_eq "$(result suid_create)" PermissionError "[$who] ... nor create one with that mode"
	assert_eq "$(result fcaps)" PermissionError "[$who] ... nor give a file capabilities"
	assert_eq "$(find "$P" -perm /6000 | head -3)" "" "[$who] on disk no file is setuid or setgid"
	assert_eq "$(python3 -c 'import os,sys; print(os.listxattr(sys.argv[1]))' "$P/tool" 2>&1)" "[]" \
		"[$who] ... and none carries capabilities"
done

# The same through errand-agent: root asked, so the owner's project is
# written as the owner.
agent_start || exit 1
P=$W_DIR/home-$OWNER/repo
errand_run --egress none --project "$P" -- sh -c "cd $P && echo x >via-agent && echo made=ok"
assert_eq "$RUN_RC:$(result made)" 0:ok "through errand-agent the session writes the project"
assert_eq "$(stat -c %U "$P/via-agent" 2>/dev/null)" "$OWNER" "... as its owner, $OWNER"
agent_stop

# Only the owner (or root) may have a session write a project as its owner:
# the launcher checks the tree it mounts, past any renaming of the path.
launcher_setup launch
P=$W_DIR/home-$OWNER/repo
launch() {
	"$ROOT/build/bin/errand-launch" --session "$W-l" --cgroup "$LCG" --netns "/run/netns/$W-launch" \
		--uid "$S_UID" --gid "$S_GID" --project "$P" --requester "$1" -- sh -c 'echo errt-ran' 2>&1
}
out=$(launch "$(id -u "$THIRD")")
rc=$?
assert_eq "$rc" 125 "a requester that does not own the project is refused: exit 125"
assert_contains "$out" "belongs to uid $(id -u "$OWNER"), not to uid $(id -u "$THIRD") who asked" "... naming both"
assert_not_contains "$out" errt-ran "... and the command never ran"
out=$(launch "$(id -u "$OWNER")")
assert_eq "$out" errt-ran "the owner's own request runs"
out=$(launch 0)
assert_eq "$out" errt-ran "... and root's"

# The agent lends the launcher the user namespace the project's idmap needs
# (--project-userns FD:UID:GID, UID:GID the owner it maps): taken only for
# a project of that owner, else the launcher makes its own.
O_UID=$(id -u "$OWNER")
O_GID=$(id -g "$OWNER")
lend() { # DISK_UID DISK_GID NAME: a run given a namespace mapping DISK to the session's account
	local pid r
	unshare --user sleep 30 &
	pid=$!
	for _ in $(seq 1 100); do
		[ "$(readlink "/proc/$pid/ns/user")" != "$(readlink /proc/self/ns/user)" ] && break
		sleep 0.02
	done
	echo "$1 $S_UID 1" >"/proc/$pid/uid_map"
	echo "$2 $S_GID 1" >"/proc/$pid/gid_map"
	"$ROOT/build/bin/errand-launch" --session "$W-l" --cgroup "$LCG" --netns "/run/netns/$W-launch" \
		--uid "$S_UID" --gid "$S_GID" --project "$P" --project-userns "7:$1:$2" \
		-- sh -c "echo x >$3 && echo errt-ran" 2>&1 7<"/proc/$pid/ns/user"
	r=$?
	kill "$pid"
	wait "$pid" 2>/dev/null
	return $r
}
out=$(lend "$O_UID" "$O_GID" lent-owner)
assert_eq "$out" errt-ran "a lent namespace that maps the project's owner is taken"
assert_eq "$(stat -c %U:%G "$P/lent-owner" 2>/dev/null)" "$OWNER:$(id -gn "$OWNER")" "... and what the session makes is the owner's"
out=$(lend 4242 4242 lent-other)
assert_eq "$out" errt-ran "a lent namespace for another owner does not stop the session"
assert_eq "$(stat -c %u:%g "$P/lent-other" 2>/dev/null)" "$O_UID:$O_GID" "... but is not taken: what it makes is still the project's owner's, not uid 4242's"
out=$("$ROOT/build/bin/errand-launch" --session "$W-l" --cgroup "$LCG" --netns "/run/netns/$W-launch" \
	--uid "$S_UID" --gid "$S_GID" --project "$P" --project-userns 0:1:1 -- sh -c 'echo errt-ran' 2>&1)
rc=$?
assert_eq "$rc:$(echo "$out" | grep -c .)" 125:1 "--project-userns naming no user namespace: exit 125, one line"
assert_contains "$out" "--project-userns 0:1:1 is not FD:UID:GID with FD an open user namespace" "... naming what to pass"
assert_not_contains "$out" errt-ran "... and the command never ran"
ip netns del "$W-launch"
rmdir "$LCG"
assert_empty "$(leftovers)" "nothing is left"
world_finish
