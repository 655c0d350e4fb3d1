#!/bin/bash
# Guarantee: an HTTP path a session sends the broker (percent-encoded C1 CSI, ESC, a newline, bytes that are not UTF-8) reaches no operator raw: the broker's log and errandctl receipts show it escaped, and its receipt is listed, as a table and as JSON that parses, never dropped.
. "$(dirname "$0")/common.sh"
raw_bytes() {
	python3 -c 'import sys
d = open(sys.argv[1], "rb").read()
print(sum(1 for b in d if (b < 0x20 and b != 10) or b >= 0x7f))' "$1"
}

broker_world
S1=$("$PROVIDER" mint)
CONFIG=$(broker_config strings "$(provider_json prov '"kind": "anthropic"')")
broker_start "$CONFIG" || exit 1
assert_eq "$(broker_register s1 $SESS_A "prov=$S1")" ok "a session registers"
# UTF-8's CSI (U+009B), ESC [ 2 J, a byte that is not UTF-8, a newline
status=$(call $SESS_A GET '/providers/prov/files/%c2%9b31m%1b%5b2J%ff%0aforged' -H "x-api-key: $S1")
echo "# status $status"
for _ in $(seq 1 40); do
	[ "$(receipts | wc -l)" -ge 1 ] && break
	sleep 0.05
done
assert_eq "$(receipts | wc -l)" 1 "the call left its receipt"
in_host "$ERRANDCTL" --config "$CONFIG" receipts --json >"$W_DIR/receipts.json" 2>&1
in_host "$ERRANDCTL" --config "$CONFIG" receipts >"$W_DIR/receipts.txt" 2>&1
assert_eq "$(python3 -c 'import json, sys
print(len([r for r in json.load(open(sys.argv[1])) if "/files/" in r["path"]]))' "$W_DIR/receipts.json" 2>&1)" 1 \
	"receipts --json parses and lists the call, though its path is not UTF-8"
assert_contains "$(cat "$W_DIR/receipts.txt")" '/files/\xc2\x9b31m\x1b[2J\xff\x0aforged' \
	"receipts shows the path escaped"
for f in "$W_DIR/receipts.json" "$W_DIR/receipts.txt" "$BROKER_LOG"; do
	assert_eq "$(raw_bytes "$f")" 0 "$(basename "$f"): no raw control byte, DEL or byte >= 0x80"
done
assert_eq "$(grep -ac '^forged' "$BROKER_LOG" "$W_DIR/receipts.txt" | awk -F: '{ n += $2 } END { print n }')" 0 \
	"no forged line"
world_finish
