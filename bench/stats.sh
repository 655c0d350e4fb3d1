# Shared by the benchmarks (sourced, not run; bench/lib.sh sources it): what
# they need before they start and how they sum up their rounds.
# shellcheck shell=bash

# bench_need TOOL...: exits naming the first TOOL missing.
bench_need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null || { echo "bench/${0##*/} needs $t (make bench installs it)" >&2; exit 1; }
	done
}

# The median of the numbers on stdin, one a line.
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# A over B to three places, "n/a" when B is not positive.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
