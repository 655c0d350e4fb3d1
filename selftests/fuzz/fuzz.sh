#!/bin/bash
# Guarantee: errand's parsers of hostile input survive libFuzzer (ASan, UBSan) without a crash, leak or timeout: every build/fuzz/<name> target runs ${FUZZ_SECONDS:-20} s on a copy of selftests/fuzz/corpus/<name>.
# One line per target; a crash fails with libFuzzer's report and the input kept
# in build/fuzz-crashes/<name>/ to reproduce. Exit 77 when no target is built.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${FUZZ_SECONDS:-20}

targets=()
for t in "$ROOT"/build/fuzz/*; do
	[ -f "$t" ] && [ -x "$t" ] && targets+=("$t")
done
if [ ${#targets[@]} -eq 0 ]; then
	echo "SKIP: no fuzz targets built (make build/fuzz/dnsmsg needs clang and libclang-rt-14-dev)"
	exit 77
fi

# A copy of the seeds, so what libFuzzer adds never lands in the tree.
work=$(mktemp -d /tmp/errand-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

failed=0
for t in "${targets[@]}"; do
	name=$(basename "$t")
	dir=$work/$name
	mkdir -p "$dir/corpus" "$dir/artifacts"
	if [ -d "$ROOT/selftests/fuzz/corpus/$name" ]; then
		cp -R "$ROOT/selftests/fuzz/corpus/$name/." "$dir/corpus/"
	fi
	start=$(date +%s)
	"$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1 </dev/null
	rc=$?
	ran=$(($(date +%s) - start))
	if [ $rc -eq 0 ]; then
		echo "ok - fuzz $name ran $ran s, no crash"
		continue
	fi
	failed=1
	echo "not ok - fuzz $name: libFuzzer exited $rc after $ran s"
	grep -v '^#[0-9]' "$dir/log" | tail -n 60 | sed 's/^/# /'
	keep=$ROOT/build/fuzz-crashes/$name
	if compgen -G "$dir/artifacts/*" >/dev/null; then
		mkdir -p "$keep"
		cp "$dir"/artifacts/* "$keep/"
		for f in "$dir"/artifacts/*; do
			echo "# reproduce: $t $keep/$(basename "$f")"
		done
	fi
done
exit $failed
