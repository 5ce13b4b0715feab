#!/usr/bin/env bash
# bench-durable.sh [ROUNDS] — durable-storage benchmarks
# (broker/bench_durable_test.go, and segment's BenchmarkRecoveryScan).
#
# Builds the broker and segment test binaries once, then runs every case
# ROUNDS times (default 3), each run a fresh process, with
# FELIX_BENCH_FULL=1 (1.5 s per time-sized case, 512 MiB per end-to-end
# throughput run), and prints min/median/max of every reported metric.
# Each round also measures the disk's sustained direct-write rate with dd
# (1 GiB, 1 MiB blocks, O_DIRECT) next to the data directory, runs the
# ephemeral and durable throughput cases back to back (alternating which
# goes first), and derives per-round ratios: durable/ephemeral MB/s per
# publisher count, on_commit conc=64 / conc=1 records/s per size and batch,
# and the durable ack p50 over the raw fdatasync p50 of the same round.
# Raw output is kept in $BENCH_OUT (default: a temp dir under $TMPDIR or
# /tmp, which must be on the file system being measured).
#
# A run is equivalent to, e.g.:
#   FELIX_BENCH_FULL=1 go test -run='^$' -count=1 -benchtime=1x \
#     -bench='^BenchmarkDurableAppend$/^mode=on_commit$/^size=128$/^conc=64$/^batch=1$' ./broker/
# About 4-5 minutes per round on 2 cores.
set -euo pipefail

# shellcheck source=scripts/benchlib.sh
source "$(dirname "$0")/benchlib.sh"

# background names the benchmark-disturbing jobs running now (fuzzers, other
# benchmarks), or "none".
background() {
	local jobs
	jobs=$(pgrep -af 'fuzz|test\.bench' | grep -v -e pgrep -e "$$" | cut -c1-120 || true)
	printf '%s\n' "${jobs:-none}" | sed 's/^/#   /'
}

rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/felix-bench-durable.XXXXXX")}
mkdir -p "$out"
cd "$root"

header
dev=$(df --output=source "$out" | tail -1)
echo "# data on $dev ($(findmnt -no FSTYPE,OPTIONS -T "$out" 2>/dev/null || echo '?')), write cache: $(cat "/sys/block/$(basename "$dev")/queue/write_cache" 2>/dev/null || echo '?')"
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
echo "# fuzzers and benchmarks running at start:"
background
echo "# raw output in $out"

go test -c -o "$out/broker.test" ./broker/
go test -c -o "$out/segment.test" ./segment/
# FELIX_BENCH_FULL= (set and empty) gives a quick check of this script with
# smoke-sized runs.
export FELIX_BENCH_FULL=${FELIX_BENCH_FULL-1}

cases=(
	"^BenchmarkRawFdatasync4K\$/^file=append\$ 1x"
	"^BenchmarkRawFdatasync4K\$/^file=preallocated\$ 1x"
	"^BenchmarkRawFdatasync4K\$/^file=overwrite\$ 1x"
	"^BenchmarkDurableAckLatency256B\$ 2000x"
)
for mode in never periodic on_commit; do
	for size in 128 4096; do
		for conc in 1 8 64; do
			for batch in 1 16; do
				cases+=("^BenchmarkDurableAppend\$/^mode=$mode\$/^size=$size\$/^conc=$conc\$/^batch=$batch\$ 1x")
			done
		done
	done
done

# disk ROUND: sustained O_DIRECT write rate of 1 GiB next to the data.
disk() {
	local f="$out/dd.bin" res
	res=$(LC_ALL=C dd if=/dev/zero of="$f" bs=1M count=1024 oflag=direct 2>&1 | tail -1)
	rm -f "$f"
	echo "# round $1 dd: $res" >&2
	printf '%s\n' "$res" | awk -v r="$1" '{ for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) s = $(i - 1)
		print r, "dd_oflag=direct_1GiB", "MB/s", $1 / s / 1e6 }' >>"$out/results"
}

: >"$out/results"
start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	echo "# round $r/$rounds ($(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg)), busiest before it:" >&2
	busiest | head -2 >&2
	background >&2
	disk "$r"
	for pubs in 1 8 16; do
		e="^BenchmarkDurableVsEphemeral\$/^publishers=$pubs\$/^stream=ephemeral\$"
		d="^BenchmarkDurableVsEphemeral\$/^publishers=$pubs\$/^stream=durable_on_commit\$"
		if ((r % 2)); then
			run "$r" broker.test "$e" 1x
			run "$r" broker.test "$d" 1x
		else
			run "$r" broker.test "$d" 1x
			run "$r" broker.test "$e" 1x
		fi
	done
	for c in "${cases[@]}"; do
		run "$r" broker.test "${c% *}" "${c##* }"
	done
	run "$r" segment.test '^BenchmarkRecoveryScan$' 3x
done

# Per-round ratios, from the results of the same round.
awk '
	$3 == "MB/s" && $2 ~ /^BenchmarkDurableVsEphemeral\// {
		split($2, p, "/"); key = p[2]
		if ($2 ~ /stream=ephemeral$/) eph[$1, key] = $4; else dur[$1, key] = $4
	}
	$3 == "records/s" && $2 ~ /^BenchmarkDurableAppend\/mode=on_commit\// {
		n = $2; c = n; sub(/\/conc=[0-9]+/, "", n)
		if (c ~ /conc=1\//) c1[$1, n] = $4
		if (c ~ /conc=64\//) c64[$1, n] = $4
	}
	$3 == "p50_us" && $2 == "BenchmarkDurableAckLatency256B" { ack[$1] = $4 }
	$3 == "p50_us" && $2 == "BenchmarkRawFdatasync4K/file=preallocated" { raw[$1] = $4 }
	END {
		for (k in dur) if (k in eph) { split(k, q, SUBSEP)
			print q[1], "durable/ephemeral/" q[2], "ratio", dur[k] / eph[k] }
		for (k in c64) if (k in c1) { split(k, q, SUBSEP); sub(/^BenchmarkDurableAppend\//, "", q[2])
			print q[1], "on_commit_conc64/conc1/" q[2], "ratio", c64[k] / c1[k] }
		for (r in ack) if (r in raw) print r, "ack_p50/RawFdatasync4K_preallocated_p50", "ratio", ack[r] / raw[r]
	}' "$out/results" >"$out/ratio"
cat "$out/ratio" >>"$out/results"

echo "# $rounds rounds in $(($(date +%s) - start)) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
echo "# fuzzers and benchmarks running at end:"
background
summarize 72
