#!/bin/bash
# Guarantee: a session's files are its floor and its grants: the project and its state directory writable and executable, /tmp and /dev/shm writable only; system directories read and execute; nothing else of the host is there, and Landlock refuses what the mounts leave; sandbox.policyExtra read, write and execute only add, are named at start (writable ones apart), and a relative path is refused at load.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
SYSPROBE=$ROOT/build/selftests/sysprobe
[ -x "$SYSPROBE" ] || skip "build/selftests/sysprobe is not built (make build/selftests/sysprobe)"
world_up

PROJ=$W_DIR/project
RO=$W_DIR/granted-ro
RW=$W_DIR/granted-rw
BIN=$W_DIR/granted-bin
HIDDEN=$W_DIR/not-granted
mkdir -p "$PROJ" "$RO" "$RW" "$BIN" "$HIDDEN"
chmod 0777 "$PROJ" "$RO" "$RW" "$BIN" "$HIDDEN"
echo readable >"$RO/file"
echo hidden >"$HIDDEN/file"
chmod 0666 "$RO/file" "$HIDDEN/file"
printf '#!/bin/sh\necho tool-ran\n' >"$BIN/tool"
chmod 0755 "$BIN/tool"
W_CONFIG=$(world_config landlock "\"policyExtra\": {
	\"read\": [\"$ROOT/build/selftests\", \"$RO\", \"$BIN\"],
	\"write\": [\"$RW\"],
	\"execute\": [\"$ROOT/build/selftests\", \"$BIN\"] }")

P=$SYSPROBE
errand_run --egress none --project "$PROJ" -- sh -c "
	echo \"proj_write=\$($P write $PROJ/new)\"
	echo \"home=\$HOME\"
	echo \"home_write=\$($P write \$HOME/new)\"
	echo \"tmp_write=\$($P write /tmp/new)\"
	echo \"shm_write=\$($P write /dev/shm/new)\"
	echo \"etc_read=\$($P read /etc/passwd)\"
	echo \"etc_write=\$($P write /etc/errt-new)\"
	echo \"usr_write=\$($P write /usr/errt-new)\"
	echo \"root_write=\$($P write /errt-new)\"
	echo \"comm_write=\$($P write /proc/self/comm)\"
	echo \"root_list=\$(ls / >/dev/null 2>&1 && echo ok || echo refused)\"
	echo \"hidden_read=\$($P read $HIDDEN/file)\"
	echo \"world_read=\$($P read $W_DIR/landlock.json)\"
	echo \"host_root=\$($P read /root)\"
	echo \"host_var=\$($P read /var)\"
	echo \"ro_read=\$(cat $RO/file)\"
	echo \"ro_write=\$($P write $RO/new)\"
	echo \"rw_write=\$(echo from-session >$RW/out && echo ok)\"
	echo \"bin_run=\$($BIN/tool)\"
	echo \"null_write=\$(echo x >/dev/null && echo ok)\"
	cp $BIN/tool /tmp/tool && echo \"tmp_exec=\$(/tmp/tool >/dev/null 2>&1; echo \$?)\"
	cp $BIN/tool $PROJ/tool && echo \"proj_exec=\$($PROJ/tool)\"
"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result proj_write)" ok "the project ($PROJ) is writable"
assert_match "$(result home)" "^$W_DIR/state/sessions/[0-9a-f]{8}/" "HOME is the session's state directory under paths.state"
assert_eq "$(result home_write)" ok "... and writable"
assert_eq "$(result tmp_write)" ok "/tmp is writable"
assert_eq "$(result shm_write)" ok "/dev/shm is writable"
assert_eq "$(result etc_read)" ok "system directories are readable (/etc/passwd)"
assert_match "$(result etc_write)" '^(EACCES|EROFS)$' "writing in /etc is refused"
assert_match "$(result usr_write)" '^(EACCES|EROFS)$' "writing in /usr is refused"
assert_match "$(result root_write)" '^(EACCES|EROFS)$' "writing in / is refused"
assert_eq "$(result comm_write)" EACCES "writing /proc/self/comm (writable by its owner, mounted read-write) is refused by Landlock"
assert_eq "$(result root_list)" refused "listing / (on the mounts, but not granted) is refused by Landlock"
assert_eq "$(result hidden_read)" ENOENT "a host directory nothing grants ($HIDDEN) is not there"
assert_eq "$(result world_read)" ENOENT "... nor the test's own files next to the project"
assert_eq "$(result host_root)" ENOENT "... nor /root"
assert_eq "$(result host_var)" ENOENT "... nor /var"
assert_eq "$(result ro_read)" readable "policyExtra.read: a granted file is readable"
assert_match "$(result ro_write)" '^(EACCES|EROFS)$' "policyExtra.read: ... but not writable"
assert_eq "$(result rw_write)" ok "policyExtra.write: a granted directory is writable"
assert_eq "$(cat "$RW/out" 2>/dev/null)" from-session "... and what the session wrote is on the host"
assert_eq "$(result bin_run)" tool-ran "policyExtra.execute: a program in a granted directory runs"
assert_eq "$(result null_write)" ok "/dev/null is writable"
assert_eq "$(result proj_exec)" tool-ran "a program written to the project runs"
assert_eq "$(result tmp_exec)" 126 "a program written to /tmp does not (scratch is written, not executed from)"
assert_contains "$RUN_STDERR" "granted to read (sandbox.policyExtra.read): $ROOT/build/selftests, $RO, $BIN" "the start names the read grants"
assert_contains "$RUN_STDERR" "granted WRITABLE outside the project (sandbox.policyExtra.write): $RW" "... and the writable grant, apart"

# Without an execute grant, a readable program does not run.
W_CONFIG=$(world_config noexec "\"policyExtra\": { \"read\": [\"$BIN\"] }")
errand_run --egress none --project "$PROJ" -- sh -c "$BIN/tool; echo \"rc=\$?\""
assert_eq "$(result rc)" 126 "a program in a directory granted only to read does not run (126)"

# Relative paths are refused when the configuration loads, in one line.
for key in read write execute; do
	W_CONFIG=$(world_config rel-$key "\"policyExtra\": { \"$key\": [\"/opt\", \"relative/dir\"] }")
	errand_run --egress none --project "$PROJ" -- sh -c 'echo ran'
	assert_eq "$RUN_RC" 125 "a relative path in sandbox.policyExtra.$key: errandctl exits 125"
	assert_empty "$RUN_STDOUT" "... and the command does not run"
	assert_eq "$(wc -l <"$RUN_ERR")" 1 "... one line on stderr"
	assert_contains "$RUN_STDERR" "sandbox.policyExtra.${key}[1]: \"relative/dir\" is not an absolute path" "... naming the key and the path"
done
assert_empty "$(leftovers)" "nothing is left"
world_finish
