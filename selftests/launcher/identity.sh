#!/bin/bash
# Guarantee: a session runs as an unprivileged host uid and gid (sandbox.uid/gid, errand-session by default), root only inside its own user namespace, so a 0600 root-owned file stays unreadable even in a directory the floor or a grant opens to it.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up

PROJ=$W_DIR/project
GRANT=$W_DIR/granted
mkdir -p "$PROJ" "$GRANT"
chmod 0777 "$PROJ" "$GRANT"
for d in "$PROJ" "$GRANT"; do
	echo root-only >"$d/secret"
	chown 0:0 "$d/secret"
	chmod 0600 "$d/secret"
	echo everyone >"$d/public"
	chmod 0644 "$d/public"
done
uid=$(id -u errand-session 2>/dev/null || echo 65534)
# As errand decides it: the group errand-session, else the account's own.
gid=$(getent group errand-session 2>/dev/null | cut -d: -f3)
[ -n "$gid" ] || gid=$(id -g errand-session 2>/dev/null || echo 65534)
# A project of errand-session's own: written as it is, with no idmap, so the
# root-owned secret in it is another user's (launcher/project has the others).
chown "$uid:$gid" "$PROJ"
W_CONFIG=$(world_config identity "\"policyExtra\": { \"read\": [\"$GRANT\"], \"write\": [\"$GRANT\"] }")

errand_run --egress none --project "$PROJ" -- sh -c "
	echo \"id=\$(id -u):\$(id -g)\"
	echo \"uidmap=\$(tr -s ' ' <\/proc/self/uid_map | sed 's/^ //')\"
	echo \"gidmap=\$(tr -s ' ' <\/proc/self/gid_map | sed 's/^ //')\"
	echo \"setgroups=\$(cat /proc/self/setgroups)\"
	echo \"nnp=\$(awk '/^NoNewPrivs:/ { print \$2 }' /proc/self/status)\"
	echo \"proj_secret=\$(cat $PROJ/secret 2>&1 | sed 's/.*: //')\"
	echo \"proj_public=\$(cat $PROJ/public)\"
	echo \"grant_secret=\$(cat $GRANT/secret 2>&1 | sed 's/.*: //')\"
	echo \"chmod_secret=\$(chmod 0644 $PROJ/secret 2>&1 | sed 's/.*: //')\"
	echo \"new_owner=\$(touch $PROJ/made && stat -c %u:%g $PROJ/made)\"
"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result id)" "0:0" "inside, the command is uid 0 and gid 0 of its own user namespace"
assert_eq "$(result uidmap)" "0 $uid 1" "... which maps only to host uid $uid (errand-session), never host root"
assert_eq "$(result gidmap)" "0 $gid 1" "... and gid 0 only to host gid $gid"
assert_eq "$(result setgroups)" deny "setgroups is denied in the session's user namespace"
assert_eq "$(result nnp)" 1 "no_new_privs is set"
assert_eq "$(result proj_secret)" "Permission denied" "a root-owned 0600 file in the project stays unreadable"
assert_eq "$(result proj_public)" everyone "... while a world-readable file next to it reads (control)"
assert_eq "$(result grant_secret)" "Permission denied" "a root-owned 0600 file in a directory policyExtra grants read and write stays unreadable"
assert_eq "$(result chmod_secret)" "Operation not permitted" "... and its mode cannot be changed"
assert_eq "$(stat -c %a "$PROJ/secret")" 600 "... it is still 0600 on the host"
assert_eq "$(result new_owner)" "0:0" "a file the session makes is owned by its root inside"
assert_eq "$(stat -c %u:%g "$PROJ/made" 2>/dev/null)" "$uid:$gid" "... and by $uid:$gid on the host"
assert_empty "$(leftovers)" "nothing is left"
world_finish
