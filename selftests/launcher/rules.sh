#!/bin/bash
# Guarantee: sandbox.rules' allow rules widen the Landlock floor by exactly their verb's rights on the pattern's directory (Read reads, Edit writes an existing file, Create makes, Delete removes, Exec runs, Connect reaches one socket); the host's authorities (errand's own control socket, docker, Nix, containerd, D-Bus) and the journal stay hidden even where policyExtra grants the tree around them, until a Connect allow or sandbox.allowJournal opens one, named at start; doctor and the start name every rule and how it is enforced; deny rules with no BPF LSM are a gap, refused under requireFullEnforcement with the boot parameter named.
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
SYSPROBE=$ROOT/build/selftests/sysprobe
[ -x "$SYSPROBE" ] || skip "build/selftests/sysprobe is not built (make build/selftests/sysprobe)"
world_up

PROJ=$W_DIR/project
# Not under /tmp, which the floor makes writable: the rules alone grant here.
T=/var/tmp/$W-rules
rm -rf "$T"
mkdir -p "$PROJ" "$T/rd" "$T/ed" "$T/cr" "$T/dl" "$T/ex" "$T/none" "$T/sock"
chmod 0777 "$PROJ" "$T"/*
echo readable >"$T/rd/file"
echo old >"$T/ed/file"
echo doomed >"$T/dl/file"
echo kept >"$T/cr/existing"
echo secret >"$T/none/file"
printf '#!/bin/sh\necho tool-ran\n' >"$T/ex/tool"
cp "$T/ex/tool" "$T/rd/tool"
chmod 0666 "$T"/*/file "$T/cr/existing"
chmod 0755 "$T/ex/tool" "$T/rd/tool"
# A test daemon's socket, outside everything the floor grants.
"$SYSPROBE" unix-listen "$T/sock/app.sock" >/dev/null 2>&1 &
LISTENER=$!
W_BG_PIDS+=("$LISTENER")
for _ in $(seq 50); do [ -S "$T/sock/app.sock" ] && break; sleep 0.1; done

P=$SYSPROBE
probe() {
	errand_run --egress none --project "$PROJ" -- sh -c "
		echo \"rd_read=\$($P read $T/rd/file)\"
		echo \"rd_write=\$($P edit $T/rd/file)\"
		echo \"rd_exec=\$($T/rd/tool >/dev/null 2>&1; echo \$?)\"
		echo \"ed_edit=\$($P edit $T/ed/file)\"
		echo \"ed_create=\$($P write $T/ed/new)\"
		echo \"cr_create=\$($P write $T/cr/new)\"
		echo \"cr_write=\$(echo data >$T/cr/new2 && echo ok)\"
		echo \"cr_mkdir=\$($P mkdir $T/cr/newdir)\"
		echo \"cr_delete=\$($P unlink $T/cr/existing)\"
		echo \"dl_delete=\$($P unlink $T/dl/file)\"
		echo \"ex_run=\$($T/ex/tool 2>&1)\"
		echo \"none_read=\$($P read $T/none/file)\"
		echo \"sock=\$($P unix-connect $T/sock/app.sock)\"
	"
}

# Without rules, none of it is there.
W_CONFIG=$(world_config norules "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\"], \"execute\": [\"$ROOT/build/selftests\"] }")
probe
assert_eq "$RUN_RC" 0 "the session without rules ran"
assert_eq "$(result rd_read)" ENOENT "without a rule, a host directory is not there"
assert_eq "$(result sock)" ENOENT "... nor the test daemon's socket"

W_CONFIG=$(world_config rules "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\"], \"execute\": [\"$ROOT/build/selftests\"] },
	\"rules\": { \"allow\": [\"Read($T/rd/**)\", \"Edit($T/ed/file)\", \"Create($T/cr/**)\",
		\"Delete($T/dl/*)\", \"Exec($T/ex/**)\", \"Connect(unix:$T/sock/app.sock)\"] }")
probe
assert_eq "$RUN_RC" 0 "the session with allow rules ran"
assert_eq "$(result rd_read)" ok "Read(DIR/**): a file beneath is readable"
assert_match "$(result rd_write)" '^(EACCES|EROFS)$' "... not writable"
assert_eq "$(result rd_exec)" 126 "... and not executable"
assert_eq "$(result ed_edit)" ok "Edit(FILE): the file is writable"
assert_match "$(result ed_create)" '^(EACCES|EROFS|ENOENT)$' "... but nothing new is made beside it"
assert_eq "$(result cr_create)" ok "Create(DIR/**): a new file is made"
assert_eq "$(result cr_mkdir)" ok "... and a new directory"
assert_eq "$(result cr_delete)" EACCES "... but what is there is not removed (Create is not Delete)"
assert_eq "$(cat "$T/cr/existing")" kept "... and the file is still on the host"
assert_eq "$(result dl_delete)" ok "Delete(DIR/*): a file beneath is removed"
assert_eq "$(result ex_run)" tool-ran "Exec(DIR/**): a program beneath runs"
assert_eq "$(result none_read)" ENOENT "a directory no rule names stays out of the session"
assert_eq "$(result sock)" ok "Connect(unix:PATH): the test daemon's socket is reachable"
assert_eq "$(result cr_write)" ok "... and written (Landlock cannot tell a new file's first write from an edit)"
assert_contains "$RUN_STDERR" "errand: rule: allow Read($T/rd/**): Landlock grants $T/rd (the pattern's fixed directory, wider than the pattern) with Read's rights" "the start names an allow rule and how it is enforced"
assert_not_contains "$RUN_STDERR" "errand: closed to the session" "... and not errand's own closures, the same at every start"
closures=$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG")
for p in /run/docker.sock /nix/var/nix/daemon-socket/socket /run/containerd/containerd.sock /run/dbus/system_bus_socket "/run/$W/agent.sock" "/var/log/journal/**"; do
	assert_contains "$closures" "$p" "doctor names errand's own closure of $p"
done

# The journal: hidden under a grant of /var/log, open with allowJournal.
if [ -d /var/log/journal ]; then
	W_CONFIG=$(world_config journal "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\", \"/var/log\"], \"execute\": [\"$ROOT/build/selftests\"] }")
	errand_run --egress none --project "$PROJ" -- sh -c "echo \"fs=\$(stat -f -c %T /var/log/journal)\"; echo \"log=\$(ls -d /var/log/apt 2>/dev/null || echo none)\""
	assert_eq "$(result fs)" tmpfs "a grant of /var/log leaves /var/log/journal an empty tmpfs (closed)"
	W_CONFIG=$(world_config journal-open "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\", \"/var/log\"], \"execute\": [\"$ROOT/build/selftests\"] }, \"allowJournal\": true")
	errand_run --egress none --project "$PROJ" -- sh -c "echo \"fs=\$(stat -f -c %T /var/log/journal)\"; echo \"list=\$(ls /var/log/journal >/dev/null 2>&1 && echo ok || echo refused)\""
	assert_eq "$(result list)" ok "sandbox.allowJournal: the journal is readable"
	assert_ne "$(result fs)" tmpfs "... and it is the host's"
	assert_contains "$RUN_STDERR" "errand: rule: allow Read(/var/log/journal/**)" "... by the Read rule it adds, named at start"
else
	echo "# this host has no /var/log/journal: the journal's closure is not exercised here"
fi

# Deny rules need BPF LSM: where it does not run, a gap stated, or refused.
LSM_OK=$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["checks"]["bpfLsm"]["detail"].startswith("present in the active LSM list, and"))')
W_CONFIG=$(world_config deny "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\"], \"execute\": [\"$ROOT/build/selftests\"] },
	\"rules\": { \"allow\": [\"Read($T/rd/**)\"], \"deny\": [\"Read($T/rd/file)\"] }")
human=$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG")
echo "$human" | sed 's/^/#   /'
assert_contains "$human" "deny Read($T/rd/file)" "doctor names the deny rule"
assert_contains "$human" "allow Read($T/rd/**): Landlock grants" "... and the allow rule with how it is enforced"
if [ "$LSM_OK" = True ]; then
	assert_contains "$human" "deny Read($T/rd/file): BPF LSM on the session's cgroup" "doctor: the deny rule is BPF LSM's"
else
	assert_contains "$human" "deny Read($T/rd/file): NOT ENFORCED: BPF LSM programs do not run on this host (they need bpf in the lsm= boot parameter and a kernel that loads them" "doctor: where BPF LSM does not run, the deny rule is named not enforced"
	assert_contains "$human" "sandbox.rules' deny, lazyAllow and Connect rules are not enforced" "... and it is a gap"
	if ! grep -qw bpf /sys/kernel/security/lsm 2>/dev/null; then
		assert_contains "$human" "bpf is not in the active LSM list" "... because bpf is not in the LSM list"
		assert_contains "$human" "add it to the lsm= boot parameter" "... naming the boot parameter"
	fi
	errand_run --egress none --project "$PROJ" -- sh -c "echo ran"
	assert_eq "$RUN_RC" 0 "with requireFullEnforcement false the session runs"
	assert_contains "$RUN_STDERR" "errand: gap: " "... the gap stated"
	assert_contains "$RUN_STDERR" "NOT ENFORCED" "... and the rule named not enforced"
	W_CONFIG=$(world_config deny-full "\"requireFullEnforcement\": true, \"policyExtra\": { \"read\": [\"$ROOT/build/selftests\"] },
		\"rules\": { \"deny\": [\"Read($T/rd/file)\"] }")
	sed -i 's/"requireFullEnforcement": false,//' "$W_CONFIG"
	errand_run --egress none --project "$PROJ" -- sh -c "echo ran"
	assert_ne "$RUN_RC" 0 "with requireFullEnforcement the session is refused"
	assert_empty "$RUN_STDOUT" "... the command does not run"
	assert_contains "$RUN_STDERR" "sandbox.rules' deny, lazyAllow and Connect rules are not enforced" "... naming the rules' gap"
fi

# The host's authorities: errand's own control socket (the agent's, running
# now) stays hidden under a policyExtra grant of its directory (errand's own,
# which no grant brings in), until a Connect allow names it, named at start
# as weakened.
RUN=/run/$W
AUTH=$RUN/agent.sock
W_CONFIG=$(world_config auth "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\", \"$RUN\"], \"execute\": [\"$ROOT/build/selftests\"] }")
agent_start
assert_eq "$([ -S "$AUTH" ] && echo there)" there "errand's control socket is at $AUTH"
chmod o+x "$RUN"
chmod 0666 "$AUTH"
errand_run --egress none --project "$PROJ" -- sh -c "echo \"auth=\$($P unix-connect $AUTH)\"; echo \"dir=\$(ls -d $RUN)\""
assert_empty "$(result dir)" "policyExtra.read does not bring errand's run directory into the session"
assert_contains "$RUN_STDERR" "$RUN is under $RUN, errand's own; nothing is granted there" "... and says so"
assert_match "$(result auth)" '^(ECONNREFUSED|EACCES|ENOENT)$' "... but errand's own control socket there is not reachable"
world_config auth "\"policyExtra\": { \"read\": [\"$ROOT/build/selftests\", \"$RUN\"], \"execute\": [\"$ROOT/build/selftests\"] },
	\"rules\": { \"allow\": [\"Connect(unix:$AUTH)\"] }" >/dev/null
in_host "$ERRANDCTL" --config "$W_CONFIG" reload
# The agent's own permissions would refuse the session's uid anyway: opened
# here (this world's agent) so that only errand's closure is tested.
chmod o+x "$RUN"
chmod 0666 "$AUTH"
errand_run --egress none --project "$PROJ" -- sh -c "echo \"auth=\$($P unix-connect $AUTH)\""
assert_eq "$(result auth)" ok "a Connect allow naming it opens errand's control socket"
chmod 0600 "$AUTH"
assert_contains "$RUN_STDERR" "errand: weakened: Connect(unix:$AUTH) opens a host authority's socket" "... named at start as weakened, on the errandctl's stderr"
assert_contains "$RUN_STDERR" "errand: rule: allow Connect(unix:$AUTH)" "... with the rule named, as an embedded start does"
assert_contains "$(cat "$AGENT_LOG")" "errand: weakened: Connect(unix:$AUTH) opens a host authority's socket" "... and in the agent's log"
agent_stop

kill "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null
rm -rf "$T"
assert_empty "$(leftovers)" "nothing is left"
world_finish
