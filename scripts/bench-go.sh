#!/usr/bin/env bash
# bench-go.sh ROUNDS PACKAGE PATTERN [BENCHTIME] — the Go benchmarks of one
# package matching PATTERN, each round a fresh process of one test binary,
# with FELIX_BENCH_FULL=1. PATTERN may list several patterns separated by
# ';': each is then its own fresh process in every round, in an order that
# reverses every other round, so that variants are compared inside a round (full volumes and case times; the smoke run of
# `make bench-smoke` uses small ones). Prints the commit, the machine and
# its load, and min/median/max/n of every reported metric (ns/op, B/op,
# allocs/op and each benchmark's own). Raw output stays in $BENCH_OUT
# (default: a temp dir). Extra environment (FELIX_BENCH_CASE_TIME=6s, ...)
# passes through. Examples, as docs/BENCHMARKS.md uses them:
#   scripts/bench-go.sh 5 wire '64x4K$' 2s
#   scripts/bench-go.sh 10 broker '^BenchmarkDurableCachePutScaling$'
set -euo pipefail

[[ $# -ge 3 ]] || { echo "usage: $0 ROUNDS PACKAGE PATTERN [BENCHTIME]" >&2; exit 2; }
rounds=$1
pkg=${2#./}
pattern=$3
benchtime=${4:-1x}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/felix-bench-go.XXXXXX")}
mkdir -p "$out"
cd "$root"
# shellcheck source=scripts/benchlib.sh
source scripts/benchlib.sh

header
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); raw output in $out"
bin="$out/$(echo "$pkg" | tr / _).test"
go test -c -o "$bin" "./$pkg"
: >"$out/results"
IFS=';' read -ra patterns <<<"$pattern"
for r in $(seq "$rounds"); do
	order=("${patterns[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((i = ${#patterns[@]} - 1; i >= 0; i--)); do order+=("${patterns[i]}"); done
	fi
	for p in "${order[@]}"; do
		res=$(cd "$root/$pkg" && FELIX_BENCH_FULL=1 "$bin" -test.run='^$' -test.bench="$p" \
			-test.benchmem -test.count=1 -test.benchtime="$benchtime" 2>&1) || {
			printf '%s\n' "$res" | tail -20 >&2
			echo "FAILED: round $r $p" >&2
			exit 1
		}
		printf '%s\n' "$res" >>"$out/round$r.txt"
		printf '%s\n' "$res" | awk -v r="$r" '/^Benchmark/ && NF > 3 {
			name = $1; sub(/-[0-9]+$/, "", name)
			for (i = 3; i + 1 <= NF; i += 2) print r, name, $(i + 1), $i
		}' >>"$out/results"
	done
done
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
summarize 60
