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
# The median of the rounds' own ratios, line N of file A over line N of file
# B, to three places: where the arms take turns within each round, the rate
# a round's conditions set on both cancels out of its ratio.
paired() { paste -d' ' "$1" "$2" | awk '$2 > 0 {print $1 / $2}' | median | xargs printf '%.3f'; }
# A over B to three places, "n/a" when B is not positive.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
