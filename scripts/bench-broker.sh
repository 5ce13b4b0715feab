#!/usr/bin/env bash
# bench-broker.sh [ROUNDS] — pub/sub broker benchmarks (broker/bench_test.go).
#
# Builds the broker test binary once, then runs every benchmark case ROUNDS
# times (default 5), each run a fresh process, and prints min/median/max of
# every reported metric. Within each round the broker throughput run and
# the bare relay baseline run back to back, alternating which goes first,
# and the broker's MB/s is also reported as a percentage of the relay's in
# the same round. FELIX_BENCH_FULL=1 makes the fixed-volume runs move the
# full 512 MiB. Raw output is kept in $BENCH_OUT (default: a temp dir).
#
# A run is equivalent to, e.g.:
#   FELIX_BENCH_FULL=1 go test -run='^$' -bench='^BenchmarkThroughput4KiBx64$' \
#     -count=1 -benchtime=1x ./broker/
# About 6 minutes with 5 rounds on 2 cores.
set -euo pipefail

# shellcheck source=scripts/benchlib.sh
source "$(dirname "$0")/benchlib.sh"

rounds=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d /tmp/felix-bench.XXXXXX)}
mkdir -p "$out"
cd "$root"

header
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
echo "# raw output in $out"

go test -c -o "$out/broker.test" ./broker/
export FELIX_BENCH_FULL=1

lat=3000x   # timed acked publishes per latency run (after a 200 warm-up)
cases=(
	"^BenchmarkAckedPublishLatency\$/^payload=0\$/^fanout=1\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=0\$/^fanout=10\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=0\$/^fanout=50\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=256\$/^fanout=1\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=256\$/^fanout=10\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=256\$/^fanout=50\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=4096\$/^fanout=1\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=4096\$/^fanout=10\$ $lat"
	"^BenchmarkAckedPublishLatency\$/^payload=4096\$/^fanout=50\$ $lat"
	"^BenchmarkDelivered256B\$/^subs=1\$ 500000x"
	"^BenchmarkDelivered256B\$/^subs=10\$ 100000x"
	"^BenchmarkDelivered256B\$/^subs=50\$ 20000x"
	"^BenchmarkDelivered256B\$/^subs=100\$ 10000x"
	"^BenchmarkIsolationRun\$/^slow=0\$ 3000x"
	"^BenchmarkIsolationRun\$/^slow=2\$ 3000x"
	"^BenchmarkIsolation\$ 3000x"
)
tput='^BenchmarkThroughput4KiBx64$'
relay='^BenchmarkRelayBaseline4KiBx64$'

: >"$out/results"
start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	echo "# round $r/$rounds ($(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg)), busiest before it:" >&2
	busiest | head -2 >&2
	if ((r % 2)); then
		run "$r" broker.test "$tput" 1x
		run "$r" broker.test "$relay" 1x
	else
		run "$r" broker.test "$relay" 1x
		run "$r" broker.test "$tput" 1x
	fi
	for c in "${cases[@]}"; do
		run "$r" broker.test "${c% *}" "${c##* }"
	done
done

# Broker throughput as a percentage of the relay measured in the same round.
awk '$3 == "MB/s" && $2 == "BenchmarkThroughput4KiBx64" { b[$1] = $4 }
     $3 == "MB/s" && $2 == "BenchmarkRelayBaseline4KiBx64" { rl[$1] = $4 }
     END { for (r in b) if (r in rl) print r, "BenchmarkThroughput4KiBx64", "%_of_relay", 100 * b[r] / rl[r] }' \
	"$out/results" >"$out/ratio"
cat "$out/ratio" >>"$out/results"

echo "# $rounds rounds in $(($(date +%s) - start)) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
summarize 58
