#!/bin/bash
# make bench: every benchmark, one after another (never two at once: each
# needs the machine to itself), and what each printed written into
# BENCHMARKS.md between its "make bench" markers, under the machine, kernel
# and date of the run. The prose around the markers (what each figure means,
# the analysis of earlier runs) is kept as it is. BENCH lists the benchmarks
# to run (default: all of them); each takes its own tuning variables
# (ROUNDS, CONNS, RUNS, LEVELS...; see its header).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-"egress proxy egress6 dns start grant broker intercept rules scale"}
OUT=$ROOT/build/bench/latest.md
DOC=$ROOT/BENCHMARKS.md
BEGIN='<!-- make bench: begin -->'
END='<!-- make bench: end -->'

mkdir -p "$ROOT/build/bench"
{
	echo "## Latest \`make bench\`"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); kernel $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME");" \
		"$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1));" \
		"$(awk '/^MemTotal/ { printf "%d GiB", $2 / 1048576 }' /proc/meminfo) of memory."
	echo "Each section is what its script printed; the arms of each took turns."
} >"$OUT"
failed=0
for b in $BENCH; do
	script=$ROOT/bench/$b.sh
	[ -x "$script" ] || continue
	echo "== bench/$b.sh" >&2
	start=$(date +%s)
	if out=$("$script" 2>&1); then
		status=
	else
		status=" (failed: exit $?)"
		failed=$((failed + 1))
	fi
	printf '%s\n' "$out" >&2
	{
		echo
		echo "### bench/$b.sh$status, $(($(date +%s) - start)) s"
		echo
		echo '```'
		printf '%s\n' "$out" | grep -v '^#' | tail -n 60
		echo '```'
	} >>"$OUT"
done
# Replace what is between the markers, or add them at the end.
python3 - "$DOC" "$OUT" "$BEGIN" "$END" <<'PY'
import sys
doc, out, begin, end = sys.argv[1:]
text = open(doc).read()
new = begin + "\n" + open(out).read() + end
if begin in text and end in text:
    a = text.index(begin)
    b = text.index(end) + len(end)
    text = text[:a] + new + text[b:]
else:
    text = text.rstrip("\n") + "\n\n" + new + "\n"
open(doc, "w").write(text)
PY
echo "BENCHMARKS.md: the latest run written between its make bench markers ($failed failed)" >&2
[ "$failed" = 0 ]
