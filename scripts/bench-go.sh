#!/usr/bin/env bash
# bench-go.sh ROUNDS PACKAGE PATTERN [BENCHTIME] — the Go benchmarks of one
# package matching PATTERN, each round a fresh process of one test binary,
# with FELIX_BENCH_FULL=1 (full volumes and case times; the smoke run of
# `make bench-smoke` uses small ones).
#
# PATTERN may list several cases separated by ';', each a -bench pattern,
# optionally after VAR=VALUE words: that process's extra environment, and
# its results are named NAME{VAR=VALUE}. Each case is its own fresh process
# in every round, in an order that reverses every other round, so that
# variants are compared inside a round.
#
# BENCH_COMMITS="A B" builds the package's test binary at each of the
# commits A and B (from `git archive`; "." is the work tree) and runs every
# case on each in every round, in the same alternating order: a before and
# after measured in one run. Results are then named NAME@A.
#
# Prints the commit, the machine and its load, and min/median/max/n of
# every reported metric (ns/op, B/op, allocs/op and each benchmark's own).
# Raw output stays in $BENCH_OUT (default: a temp dir). Extra environment
# (FELIX_BENCH_CASE_TIME=6s, ...) passes through. Examples, as
# docs/BENCHMARKS.md uses them:
#   scripts/bench-go.sh 5 wire 'PublishBatch64x4K$' 2s
#   scripts/bench-go.sh 5 broker '^BenchmarkThroughput4KiBx64$;FELIX_BENCH_NO_TRACE=1 ^BenchmarkThroughput4KiBx64$'
#   BENCH_COMMITS='d373322 3898b23' scripts/bench-go.sh 5 tools/loadgen/floor '^BenchmarkFloor$'
set -euo pipefail

[[ $# -ge 3 ]] || { echo "usage: $0 ROUNDS PACKAGE PATTERN [BENCHTIME]" >&2; exit 2; }
rounds=$1
pkg=${2#./}
pattern=$3
benchtime=${4:-1x}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/felix-bench-go.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"
# shellcheck source=scripts/benchlib.sh
source scripts/benchlib.sh

header
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); raw output in $out"

# One test binary per build: labels[i] ("" without BENCH_COMMITS) built
# from trees[i].
labels=("") trees=("$root")
if [[ -n ${BENCH_COMMITS:-} ]]; then
	labels=() trees=()
	for c in $BENCH_COMMITS; do
		if [[ $c == . ]]; then
			labels+=(tree) trees+=("$root")
			continue
		fi
		label=$(git rev-parse --short "$c^{commit}")
		rm -rf "$out/src-$label" && mkdir -p "$out/src-$label"
		git archive "$label" | tar -x -C "$out/src-$label"
		labels+=("$label") trees+=("$out/src-$label")
	done
	echo "# builds: ${labels[*]}"
fi
bin() { echo "$out/${labels[$1]:-$(echo "$pkg" | tr / _)}.test"; }
for i in "${!labels[@]}"; do
	(cd "${trees[i]}" && go test -c -o "$(bin "$i")" "./$pkg")
done

# runs holds "BUILD;CASE" for every process of a round, in its order.
IFS=';' read -ra cases <<<"$pattern"
runs=()
for c in "${cases[@]}"; do
	for i in "${!labels[@]}"; do runs+=("$i;$c"); done
done

: >"$out/results"
for r in $(seq "$rounds"); do
	order=("${runs[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((j = ${#runs[@]} - 1; j >= 0; j--)); do order+=("${runs[j]}"); done
	fi
	for run in "${order[@]}"; do
		i=${run%%;*}
		read -ra words <<<"${run#*;}"
		env=() suffix=
		while ((${#words[@]})) && [[ ${words[0]} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
			env+=("${words[0]}")
			words=("${words[@]:1}")
		done
		((${#env[@]} == 0)) || suffix="{$(IFS=,; echo "${env[*]}")}"
		[[ -z ${labels[i]} ]] || suffix+="@${labels[i]}"
		res=$(cd "${trees[i]}/$pkg" && env FELIX_BENCH_FULL=1 "${env[@]}" "$(bin "$i")" -test.run='^$' \
			-test.bench="${words[*]}" -test.benchmem -test.count=1 -test.benchtime="$benchtime" 2>&1) || {
			printf '%s\n' "$res" | tail -20 >&2
			echo "FAILED: round $r ${run#*;}${labels[i]:+ at ${labels[i]}}" >&2
			exit 1
		}
		printf '%s\n' "$res" >>"$out/round$r.txt"
		printf '%s\n' "$res" | awk -v r="$r" -v suffix="$suffix" '/^Benchmark/ && NF > 3 {
			name = $1; sub(/-[0-9]+$/, "", name)
			for (i = 3; i + 1 <= NF; i += 2) print r, name suffix, $(i + 1), $i
		}' >>"$out/results"
	done
done
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
summarize 60
