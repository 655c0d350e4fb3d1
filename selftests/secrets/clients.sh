#!/bin/bash
# Guarantee: ordinary clients reach a secret's host through the session's broker unchanged, trusting its CA through the variables errand sets (curl through CURL_CA_BUNDLE, Python requests through REQUESTS_CA_BUNDLE, git through GIT_SSL_CAINFO, Node through NODE_EXTRA_CA_CERTS), and each puts the value on the wire where it holds the placeholder.
# shellcheck disable=SC2016 # $TOK and the like expand in the session's shell
# selftests-timeout: 180
. "$(dirname "$0")/common.sh"
need_errandctl
secrets_world
W_CONFIG=$(secrets_config clients)

sh='cd /tmp
echo "curl=$(curl -sS --max-time 20 -o /dev/null -w %{http_code} -H "X-Client: curl $TOK" https://sec.test/curl 2>&1)"
if command -v python3 >/dev/null && python3 -c "import requests" 2>/dev/null; then
	echo "python=$(python3 -c "import os, requests; print(requests.get(\"https://sec.test/python\", headers={\"X-Client\": \"python \" + os.environ[\"TOK\"]}, timeout=20).status_code)" 2>&1 | tail -n 1)"
else echo "python=missing"; fi
if command -v git >/dev/null; then
	echo "git=$(git -c http.extraHeader="X-Client: git $TOK" ls-remote https://sec.test/repo.git 2>&1 | tr "\n" " ")"
else echo "git=missing"; fi
if command -v node >/dev/null; then
	echo "node=$(node -e "require(\"https\").get(\"https://sec.test/node\", {headers: {\"X-Client\": \"node \" + process.env.TOK}}, r => { console.log(r.statusCode); r.resume(); }).on(\"error\", e => console.log(e.code)); setTimeout(() => process.exit(0), 20000).unref()" 2>&1 | tail -n 1)"
else echo "node=missing"; fi'
errand_run --project "$PROJ" --secret TOK=a@sec.test -- sh -c "$sh"
assert_eq "$RUN_RC" 0 "the session ran"
assert_eq "$(result curl)" 200 "curl trusts the broker's certificate"
assert_contains "$(echo_log)" "header X-Client: curl $VALUE_A" "and its header carries the value"
if [ "$(result python)" = missing ]; then
	trace "python3 with requests is not installed: not tried"
else
	assert_eq "$(result python)" 200 "Python requests trusts it"
	assert_contains "$(echo_log)" "header X-Client: python $VALUE_A" "and carries the value"
fi
if [ "$(result git)" = missing ]; then
	trace "git is not installed: not tried"
else
	assert_contains "$(echo_log)" "request GET /repo.git/info/refs?service=git-upload-pack" "git trusts it (its request reached the host)"
	assert_contains "$(echo_log)" "header X-Client: git $VALUE_A" "and carries the value"
	assert_not_contains "$(result git)" "certificate" "git met no certificate problem"
fi
if [ "$(result node)" = missing ]; then
	trace "node is not installed: not tried"
else
	assert_eq "$(result node)" 200 "Node trusts it"
	assert_contains "$(echo_log)" "header X-Client: node $VALUE_A" "and carries the value"
fi
assert_not_contains "$RUN_STDOUT$RUN_STDERR" "$VALUE_A" "the value never reaches the session or errand's output"

world_finish
