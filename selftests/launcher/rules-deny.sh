#!/bin/bash
# Guarantee: sandbox.rules' deny rules hold inside what the floor and allow rules grant, in the kernel on the path it resolved: Read, Edit (truncate(2) too), Create, Delete and Exec denied each refuse with EACCES (deny beats allow; Exec through a symlink too), a rename or hard link into or out of a denied tree and a rename of a directory above one are refused, a symlink pointing into it is refused on open, a file created after start under a denied pattern is refused, a path too long for the matcher is refused beneath a denied tree and not elsewhere, lazyAllow beats deny only for what the session itself creates, a Connect deny refuses a test daemon's socket (re-created after the start too); each refusal is an event naming the rule and the path.
# selftests-covered-by: vm/kernel61
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
SYSPROBE=$ROOT/build/selftests/sysprobe
[ -x "$SYSPROBE" ] || skip "build/selftests/sysprobe is not built (make build/selftests/sysprobe)"
world_up

W_CONFIG=$(world_config probe "")
LSM=$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["checks"]["bpfLsm"]["detail"])')
case "$LSM" in
"present in the active LSM list, and"*) ;;
*) skip "BPF LSM programs do not run on this kernel ($LSM); launcher/rules covers the gap" ;;
esac

PROJ=$W_DIR/project
T=/var/tmp/$W-deny
rm -rf "$T"
mkdir -p "$PROJ/outer/inner" "$PROJ/movable/sub" "$PROJ/secret" "$PROJ/bin" "$PROJ/keep" "$PROJ/nocreate" "$T/rd" "$T/sock" "$T/sock2"
echo key >"$PROJ/secret/key"
echo old >"$PROJ/secret/newold"
echo plain >"$PROJ/plain"
echo edit-me >"$PROJ/ro.txt"
echo kept >"$PROJ/keep/file"
echo deep >"$PROJ/outer/inner/key"
# Paths longer than the kernel's matcher takes (255 bytes).
L=$(printf 'l%.0s' $(seq 120))
mkdir -p "$PROJ/secret/$L/$L" "$PROJ/long/$L/$L"
echo far >"$PROJ/secret/$L/$L/key"
echo far >"$PROJ/long/$L/$L/file"
echo open >"$T/rd/open"
echo closed >"$T/rd/file"
printf '#!/bin/sh\necho ran\n' >"$PROJ/bin/denied"
cp "$PROJ/bin/denied" "$PROJ/bin/allowed"
chmod -R a+rwX "$PROJ" "$T"
chmod 0755 "$PROJ/bin/denied" "$PROJ/bin/allowed"
"$SYSPROBE" unix-listen "$T/sock/app.sock" >/dev/null 2>&1 &
LISTENER=$!
W_BG_PIDS+=("$LISTENER")
for _ in $(seq 50); do [ -S "$T/sock/app.sock" ] && break; sleep 0.1; done

W_CONFIG=$(world_config deny "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\", \"$T/sock2\"], \"execute\": [\"$ROOT/build/selftests\"] },
	\"rules\": {
		\"allow\": [\"Read($T/rd/**)\", \"Connect(unix:$T/sock/app.sock)\"],
		\"deny\": [\"Read($PROJ/secret/**)\", \"Read(~/.ssh/**)\", \"Read($PROJ/outer/inner/**)\", \"Read($T/rd/file)\",
			\"Edit($PROJ/ro.txt)\", \"Create($PROJ/nocreate/**)\", \"Delete($PROJ/keep/**)\",
			\"Exec($PROJ/bin/denied)\", \"Connect(unix:$T/sock/app.sock)\",
			\"Connect(unix:$T/sock2/d.sock)\"],
		\"lazyAllow\": [\"Read($PROJ/secret/new*)\", \"Create($PROJ/nocreate/ok*)\"] }")
P=$SYSPROBE
errand_run --egress none --project "$PROJ" -- sh -c "
	echo \"secret=\$($P read $PROJ/secret/key)\"
	echo \"plain=\$($P read $PROJ/plain)\"
	mkdir -p \$HOME/.ssh && echo made-after-start >\$HOME/.ssh/id && echo \"ssh_made=ok\"
	echo \"ssh_read=\$($P read \$HOME/.ssh/id)\"
	echo \"rd_open=\$($P read $T/rd/open)\"
	echo \"rd_file=\$($P read $T/rd/file)\"
	echo \"ro_read=\$($P read $PROJ/ro.txt)\"
	echo \"ro_edit=\$($P edit $PROJ/ro.txt)\"
	echo \"ro_truncate=\$(truncate -s 0 $PROJ/ro.txt 2>/dev/null && echo ok || echo refused)\"
	echo \"nocreate=\$($P write $PROJ/nocreate/new)\"
	echo \"lazy_create=\$($P write $PROJ/nocreate/okfile)\"
	echo \"nocreate_dir=\$($P mkdir $PROJ/nocreate/d)\"
	echo \"keep_delete=\$($P unlink $PROJ/keep/file)\"
	echo \"exec_denied=\$($PROJ/bin/denied >/dev/null 2>&1; echo \$?)\"
	ln -s $PROJ/bin/denied $PROJ/bin/alias
	echo \"exec_alias=\$($PROJ/bin/alias >/dev/null 2>&1; echo \$?)\"
	echo \"exec_allowed=\$($PROJ/bin/allowed)\"
	echo \"long_secret=\$($P read $PROJ/secret/$L/$L/key)\"
	echo \"long_read=\$($P read $PROJ/long/$L/$L/file)\"
	echo \"long_create=\$($P write $PROJ/long/$L/$L/new)\"
	echo \"rename_in=\$($P rename $PROJ/plain $PROJ/secret/moved)\"
	echo \"rename_out=\$($P rename $PROJ/secret/key $PROJ/stolen)\"
	echo \"link_out=\$($P link $PROJ/secret/key $PROJ/alias)\"
	echo \"rename_parent=\$($P rename $PROJ/outer $PROJ/outer2)\"
	echo \"rename_dir=\$($P rename $PROJ/movable $PROJ/moved)\"
	echo \"link_in=\$($P link $PROJ/plain $PROJ/secret/alias)\"
	ln -s $PROJ/secret/key $PROJ/sl
	echo \"symlink=\$($P read $PROJ/sl)\"
	echo mine >$PROJ/secret/newmine
	echo \"lazy_mine=\$($P read $PROJ/secret/newmine)\"
	echo \"lazy_old=\$($P read $PROJ/secret/newold)\"
	echo \"sock=\$($P unix-connect $T/sock/app.sock)\"
"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result secret)" EACCES "deny Read(PROJ/secret/**): a file in the writable project is refused"
assert_eq "$(result plain)" ok "... the rest of the project reads"
assert_eq "$(result ssh_made)" ok "a file is made after start under ~/.ssh"
assert_eq "$(result ssh_read)" EACCES "deny Read(~/.ssh/**): ... and refused on read (HOME is the session's)"
assert_eq "$(result rd_open)" ok "allow Read(DIR/**) reads"
assert_eq "$(result rd_file)" EACCES "... deny Read(DIR/file) beats it"
assert_eq "$(result ro_read)" ok "deny Edit(FILE): it reads"
assert_eq "$(result ro_edit)" EACCES "... and is not written"
assert_eq "$(result ro_truncate)" refused "... nor truncated by path (truncate(2))"
assert_eq "$(cat "$PROJ/ro.txt")" edit-me "... and keeps its content on the host"
assert_eq "$(result nocreate)" EACCES "deny Create(DIR/**): no file is made"
assert_eq "$(result lazy_create)" ok "lazyAllow Create(DIR/ok*) beats deny Create(DIR/**) for a new entry it names"
assert_eq "$(result nocreate_dir)" EACCES "... nor a directory"
assert_eq "$(result keep_delete)" EACCES "deny Delete(DIR/**): a file is not removed"
assert_eq "$(cat "$PROJ/keep/file")" kept "... and stays on the host"
assert_eq "$(result exec_denied)" 126 "deny Exec(FILE): it does not run"
assert_eq "$(result exec_alias)" 126 "... nor through a symlink to it (the kernel's resolved path is matched)"
assert_eq "$(result exec_allowed)" ran "... its neighbour runs"
assert_eq "$(result long_secret)" EACCES "a path in a denied tree longer than the matcher takes is refused (beneath the pattern's directory)"
assert_eq "$(result long_read)" ok "... and one as long elsewhere reads"
assert_eq "$(result long_create)" ok "... and is made"
assert_eq "$(result rename_in)" EACCES "a rename into a denied tree is refused"
assert_eq "$(result rename_out)" EACCES "a rename out of a denied tree is refused"
assert_eq "$(result rename_parent)" EACCES "a rename of a directory above a denied tree is refused (it would carry the tree out from under its pattern)"
assert_eq "$(cat "$PROJ/outer/inner/key")" deep "... and the tree stays where its pattern names it"
assert_eq "$(result rename_dir)" ok "... while a directory with no denied tree beneath is renamed"
assert_eq "$(result link_out)" EACCES "a hard link of a file in a denied tree is refused"
assert_eq "$(result link_in)" EACCES "a hard link into a denied tree is refused"
assert_eq "$(result symlink)" EACCES "a symlink pointing into a denied tree is refused on open"
assert_eq "$(result lazy_mine)" ok "lazyAllow beats deny for a file the session made"
assert_eq "$(result lazy_old)" EACCES "... but not for one that was there at start"
assert_eq "$(result sock)" EACCES "deny Connect(unix:PATH) beats its allow: the test daemon is refused"
assert_contains "$RUN_STDERR" "refused rule=Read($PROJ/secret/**) path=$PROJ/secret/key hook=file_open" "a refusal is an event naming the rule and the path"
assert_contains "$RUN_STDERR" "refused rule=Exec($PROJ/bin/denied) path=$PROJ/bin/denied hook=exec" "... an Exec refusal too"
assert_contains "$RUN_STDERR" "refused rule=Connect(unix:$T/sock/app.sock) path=$T/sock/app.sock hook=unix_stream_connect" "... and a Connect refusal"
assert_contains "$RUN_STDERR" "errand: rule: deny Read($PROJ/secret/**): BPF LSM on the session's cgroup" "the start names how the deny rule is enforced"

# The same refusal as errandctl observe shows it, live.
errand_start --egress none --project "$PROJ" -- sh -c "sleep 1; echo \"r=\$($P read $PROJ/secret/key)\"; sleep 1"
observe_start "$SESSION" --json
bg_wait '^r=' 15
sleep 0.5
observe_stop
errand_stop
assert_contains "$(cat "$OBSERVE_OUT")" "\"event\":\"rule\",\"session\":\"$SESSION\",\"rule\":\"Read($PROJ/secret/**)\",\"path\":\"$PROJ/secret/key\",\"hook\":\"file_open\",\"errno\":\"EACCES\"" "errandctl observe shows the refusal, naming the rule and the path"

# A daemon restarted after the session started (a new socket, a new inode)
# is still refused, by the name it bound.
"$SYSPROBE" unix-listen "$T/sock2/d.sock" >/dev/null 2>&1 &
L2=$!
W_BG_PIDS+=("$L2")
for _ in $(seq 50); do [ -S "$T/sock2/d.sock" ] && break; sleep 0.1; done
errand_start --egress none --project "$PROJ" -- sh -c "sleep 2; echo \"re=\$($P unix-connect $T/sock2/d.sock)\"; sleep 0.5"
kill "$L2"
wait "$L2" 2>/dev/null
rm -f "$T/sock2/d.sock"
"$SYSPROBE" unix-listen "$T/sock2/d.sock" >/dev/null 2>&1 &
L2=$!
W_BG_PIDS+=("$L2")
for _ in $(seq 50); do [ -S "$T/sock2/d.sock" ] && break; sleep 0.02; done
bg_wait '^re=' 15
errand_stop
assert_eq "$(sed -n 's/^re=//p' "$BG_OUT")" EACCES "deny Connect: the daemon's socket re-created after the start is refused too"

kill "$LISTENER" "$L2" 2>/dev/null
wait "$LISTENER" "$L2" 2>/dev/null
rm -rf "$T"
assert_empty "$(leftovers)" "nothing is left"
world_finish
