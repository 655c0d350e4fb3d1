#!/bin/bash
# Benchmark, not a test: what sandbox.rules' BPF LSM hooks cost a file-heavy
# job. In a session (--egress none, the project bound in), untar a generated
# tree of FILES small files in DIRS directories (kernel-sized: nothing is
# downloaded), then `find | xargs stat` every entry of it; once with no rules
# (no LSM program attached) and once with 50 deny rules (49 of Read, Edit,
# Create, Delete and Exec, with wildcards, under the tree's own directories,
# none matching a file of the job, and one on a canary file the job reads,
# which must be refused: the rules are in force), which attach the rules
# programs to the session's cgroup: every open, creation and exec of the job
# is matched against them. Target: 50 rules at most 5 % slower. The hooks run
# only where BPF LSM is active (bpf in the lsm= boot parameter): elsewhere
# the script prints one line saying it is not measurable here and exits 0.
# ROUNDS, FILES and DIRS tune it; the median of the rounds is reported.
# shellcheck disable=SC2016 # the job's $(...) run in the session
set -u
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
FILES=${FILES:-50000}
DIRS=${DIRS:-500}

need_errandctl
world_up >/dev/null
W_CONFIG=$(world_config none "")
LSM=$(in_host "$ERRANDCTL" doctor --config "$W_CONFIG" --json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["checks"]["bpfLsm"]["detail"])')
case "$LSM" in
"present in the active LSM list, and"*) ;;
*)
	echo "rules benchmark: not measurable here: BPF LSM programs do not run on this kernel ($(uname -r): $LSM)"
	exit 0
	;;
esac

PROJ=$W_DIR/proj
mkdir -p "$PROJ/src" "$PROJ/work"
python3 - "$PROJ/src/tree" "$FILES" "$DIRS" <<'PY'
import os, sys
root, files, dirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "sub%d" % (d % 20), "d%d" % d)
    os.makedirs(p, exist_ok=True)
    for f in range(files // dirs):
        with open(os.path.join(p, "f%d.c" % f), "w") as fh:
            fh.write("/* file %d of dir %d */\nint x%d_%d;\n" % (f, d, d, f))
PY
tar -C "$PROJ/src" -cf "$PROJ/tree.tar" tree
rm -rf "$PROJ/src"
chmod -R a+rwX "$PROJ"

# 49 rules no file of the job matches, and a canary the job reads: refused
# with the rules (so they are in force), read without.
echo canary >"$PROJ/canary"
rules="\"Read($PROJ/canary)\""
for i in $(seq 10); do
	for v in Read Edit Create Delete Exec; do
		[ "$i$v" = 10Exec ] || rules+=", \"$v($PROJ/work/tree/sub*/d*/secret$i-$v*)\""
	done
done
W_RULES=$(world_config rules50 "\"rules\": { \"deny\": [ $rules ] }")
W_NONE=$W_CONFIG

# Timed inside the session, so its start is not counted.
job='cd '"$PROJ"'/work && rm -rf tree && t0=$(date +%s.%N) &&
tar -xf ../tree.tar && t1=$(date +%s.%N) &&
find tree -print0 | xargs -0 stat >/dev/null && t2=$(date +%s.%N) &&
awk -v a="$t0" -v b="$t1" -v c="$t2" "BEGIN { printf \"untar=%.3f\nstat=%.3f\n\", b - a, c - b }" &&
echo "n=$(find tree -type f | wc -l)" && { cat '"$PROJ"'/canary >/dev/null 2>&1 && echo canary=read || echo canary=refused; }'
one() {
	W_CONFIG=$2
	errand_run --egress none --project "$PROJ" -- sh -c "$job" >/dev/null
	[ "$(result n)" = "$FILES" ] || {
		echo "bench/rules.sh: the job failed with $1: $RUN_STDOUT $RUN_STDERR" >&2
		exit 1
	}
	[ "$(result canary)" = "$3" ] || {
		echo "bench/rules.sh: with $1 the canary was $(result canary), not $3: $RUN_STDERR" >&2
		exit 1
	}
	result untar >>"$W_DIR/untar.$1"
	result stat >>"$W_DIR/stat.$1"
}
: >"$W_DIR/untar.none"; : >"$W_DIR/stat.none"; : >"$W_DIR/untar.rules"; : >"$W_DIR/stat.rules"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		one none "$W_NONE" read; one rules "$W_RULES" refused
	else
		one rules "$W_RULES" refused; one none "$W_NONE" read
	fi
	echo "# round $r of $ROUNDS done" >&2
done
un=$(median <"$W_DIR/untar.none"); ur=$(median <"$W_DIR/untar.rules")
sn=$(median <"$W_DIR/stat.none"); sr=$(median <"$W_DIR/stat.rules")
echo "rules benchmark: $(uname -r), $(nproc) cores, $FILES files in $DIRS directories, median of $ROUNDS rounds"
echo "every round (s): untar $(tr '\n' ' ' <"$W_DIR/untar.none")(none) $(tr '\n' ' ' <"$W_DIR/untar.rules")(50 rules);" \
	"stat $(tr '\n' ' ' <"$W_DIR/stat.none")(none) $(tr '\n' ' ' <"$W_DIR/stat.rules")(50 rules)"
printf '%-26s %10s %10s %8s\n' "" "no rules" "50 rules" ratio
printf '%-26s %10s %10s %8s\n' "untar (s)" "$un" "$ur" "$(ratio "$ur" "$un")"
printf '%-26s %10s %10s %8s\n' "find | xargs stat (s)" "$sn" "$sr" "$(ratio "$sr" "$sn")"
echo "target: 50 rules at most 1.05x no rules"
