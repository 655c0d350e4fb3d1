#!/bin/bash
# Guarantee: --secret ENV[=SECRET]@HOST and the file's secrets give the session only a placeholder (errand-secret- and 64 hex digits) in ENV, never the value from paths.secrets: not in its environment, its files, errand's record or errand's output; the secret's hosts are reachable on 443 (through its broker); a store file that is missing, not root's 0600, empty, holding CR/LF/NUL or a value a placeholder may hold, over 16 secrets or 256 hosts, a bad spec or --egress none refuse the session with 125 and one line, nothing made.
# shellcheck disable=SC2016 # $TOK and the like expand in the session's shell
. "$(dirname "$0")/../lib/world.sh"
need_errandctl
world_up
world_dns || exit 1
STORE=$W_DIR/secrets
mkdir -p "$STORE"
chmod 0700 "$STORE"
VALUE="ghp-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$VALUE" >"$STORE/gh"
chmod 0600 "$STORE/gh"
# cfg NAME [TOP_EXTRA]: a DNS world config whose paths.secrets is $STORE
cfg() {
	local f
	f=$(dns_config "$1" "" "" "")
	sed -i "s|\"paths\": {|\"paths\": { \"secrets\": \"$STORE\",|" "$f"
	[ -n "${2:-}" ] && sed -i "s|^{\$|{ $2,|" "$f"
	echo "$f"
}
W_CONFIG=$(cfg secrets)
PH_RE='^errand-secret-[0-9a-f]{64}$'

PROJ=$W_DIR/proj
mkdir -p "$PROJ"
cp "$PROBE" "$PROJ/probe"
errand_start --project "$PROJ" --secret TOK=gh@api.test -- sh -c 'echo "tok=$TOK"; env | sed "s/^/env /"; echo "$TOK" >"$HOME/tok"; '"$(PROBE=$PROJ/probe probe_script reach "resolve api.test 443")"'echo done; sleep 60' || exit 1
bg_wait '^done' 20
PH=$(sed -n 's/^tok=//p' "$BG_OUT")
assert_match "$PH" "$PH_RE" "TOK holds a placeholder"
assert_match "$(sed -n 's/^reach=//p' "$BG_OUT")" "^ok" "the secret's host is reachable on 443 (its broker answers it)"
environs=$(for p in $(cat "$(session_cgroup)"/cgroup.procs "$(session_cgroup)"/*/cgroup.procs 2>/dev/null); do tr '\0' '\n' <"/proc/$p/environ"; done)
assert_contains "$environs" "TOK=$PH" "the session's processes hold the placeholder"
assert_not_contains "$environs" "$VALUE" "no process of the session holds the value in its environment"
rec=$W_DIR/state/sessions/$SESSION/placeholders.json
assert_contains "$(cat "$rec" 2>/dev/null)" "\"TOK\": \"$PH\"" "the placeholder is kept in the session's record"
assert_eq "$(stat -c %a "$rec" 2>/dev/null)" 600 "the record of placeholders is 0600"
assert_eq "$(grep -rl -- "$VALUE" "$W_DIR/state" "/run/$W" "$PROJ" 2>/dev/null | wc -l | tr -d ' ')" 0 \
	"no file of errand's state (the session's home included), run directory or project holds the value"
errand_stop
assert_not_contains "$RUN_STDOUT" "$VALUE" "the session's output does not hold the value"
assert_not_contains "$RUN_STDERR" "$VALUE" "errand's output does not hold the value"

errand_run --secret GH@api.test -- sh -c 'echo "gh=$GH"'
assert_eq "$RUN_RC" 125 "ENV@HOST reads the file named ENV: no file GH, refused"
assert_match "$RUN_STDERR" "$STORE/GH cannot be used \\(no such file\\)" "the refusal names the file"

W_CONFIG=$(cfg fromfile '"secrets": [{"env": "GH_TOKEN", "secret": "gh", "hosts": ["api.test"]}]')
errand_run -- sh -c 'echo "gh=$GH_TOKEN"; '"$(probe_script reach "resolve api.test 443")"
assert_eq "$RUN_RC" 0 "a session with the file's secret ran"
assert_match "$(result gh)" "$PH_RE" "the file's secret gives a placeholder"
assert_ne "$(result gh)" "$PH" "another session, another placeholder"
assert_match "$(result reach)" "^ok" "the file's secret's host is reachable"
assert_not_contains "$RUN_STDOUT$RUN_STDERR" "$VALUE" "and the value is not seen"
W_CONFIG=$(cfg secrets)

# refuse RE WHAT ARGS...: 125, one line matching RE (besides the host's gaps
# and weakened guarantees, said first), nothing left behind
refuse() {
	local re=$1 what=$2
	shift 2
	errand_run "$@" -- true
	assert_eq "$RUN_RC" 125 "$what: refused with 125"
	assert_match "$RUN_STDERR" "$re" "$what: the line says why"
	assert_eq "$(printf '%s\n' "$RUN_STDERR" | grep -v '^errand: \(gap\|weakened\):' | grep -c .)" 1 \
		"$what: one line"
	assert_empty "$(leftovers)" "$what: nothing left behind"
}
printf 'a\r\n' >"$STORE/cr" && chmod 0600 "$STORE/cr"
printf 'a\nb\n' >"$STORE/lf" && chmod 0600 "$STORE/lf"
printf 'a\0b\n' >"$STORE/nul" && chmod 0600 "$STORE/nul"
: >"$STORE/empty" && chmod 0600 "$STORE/empty"
printf 'v\n' >"$STORE/open" && chmod 0644 "$STORE/open"
printf 'v\n' >"$STORE/nobody" && chmod 0600 "$STORE/nobody" && chown 65534 "$STORE/nobody"
printf 'secret-\n' >"$STORE/ph" && chmod 0600 "$STORE/ph"
ln -sf gh "$STORE/link"
refuse "CR, LF or NUL" "a CR in the value" --secret T=cr@api.test
refuse "CR, LF or NUL" "an LF inside the value" --secret T=lf@api.test
refuse "CR, LF or NUL" "a NUL in the value" --secret T=nul@api.test
refuse "it is empty" "an empty value" --secret T=empty@api.test
refuse "placeholders .* may hold it" "a value every placeholder holds" --secret T=ph@api.test
refuse "not root's alone" "a file others may read" --secret T=open@api.test
refuse "not root's alone" "a file not root's" --secret T=nobody@api.test
refuse "not a regular file" "a symbolic link" --secret T=link@api.test
refuse "write ENV\\[=SECRET\\]@HOST" "a spec without hosts" --secret TOK
refuse "the secret's name" "a store name leaving the store" --secret T=../gh@api.test
refuse "needs the network" "with --egress none" --egress none --secret T=gh@api.test
args=()
for i in $(seq 1 17); do args+=(--secret "T$i=gh@h$i.test"); done
refuse "at most 16" "17 secrets" "${args[@]}"
hosts=$(seq -s, -f 'h%g.test' 1 257)
refuse "at most 256" "257 hosts" --secret "T=gh@$hosts"
refuse "both set the variable" "--env of the same variable" --secret T=gh@api.test --env T=x
assert_not_contains "$(cat "$W_DIR"/run*.err)" "$VALUE" "no refusal ever printed the value"

world_finish
