#!/usr/bin/env bash
# bench-broker.sh [ROUNDS] — issue 3 broker benchmarks (broker/bench_test.go).
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

# busiest prints the three busiest processes over the last second.
busiest() {
	top -b -n2 -d1 -o %CPU -w 160 | awk '/^top -/ { i++ } i == 2' | sed -n '8,10p' |
		awk '{ printf "#   %5s%% %s\n", $9, $12 }'
}

rounds=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d /tmp/felix-bench.XXXXXX)}
mkdir -p "$out"
cd "$root"

# FELIX_BENCH_COMMIT names the commit when running from an exported tree.
if [[ -n ${FELIX_BENCH_COMMIT:-} ]]; then
	echo "# commit $FELIX_BENCH_COMMIT"
else
	echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (dirty tree)')"
fi
echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "# kernel $(uname -r), $(go version | cut -d' ' -f3-)"
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

# run ROUND PATTERN BENCHTIME: one fresh process; result lines go to
# $out/results as "round name unit value".
run() {
	local res
	if ! res=$(cd broker && "$out/broker.test" -test.run='^$' -test.bench="$2" -test.count=1 \
		-test.benchtime="$3" 2>&1); then
		printf '%s\n' "$res" >>"$out/round$1.txt"
		echo "FAILED: round $1 $2" >&2
		printf '%s\n' "$res" | tail -20 >&2
		return 1
	fi
	printf '%s\n' "$res" >>"$out/round$1.txt"
	printf '%s\n' "$res" | grep -i warning >&2 || true
	printf '%s\n' "$res" | awk -v r="$1" '/^Benchmark/ && NF > 3 {
		name = $1; sub(/-[0-9]+$/, "", name)
		for (i = 3; i + 1 <= NF; i += 2) print r, name, $(i + 1), $i
	}' >>"$out/results"
}

: >"$out/results"
start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	echo "# round $r/$rounds ($(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg)), busiest before it:" >&2
	busiest | head -2 >&2
	if ((r % 2)); then
		run "$r" "$tput" 1x
		run "$r" "$relay" 1x
	else
		run "$r" "$relay" 1x
		run "$r" "$tput" 1x
	fi
	for c in "${cases[@]}"; do
		run "$r" "${c% *}" "${c##* }"
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
printf '%-58s %-16s %12s %12s %12s %3s\n' benchmark metric min median max n
sort -k2,2 -k3,3 -k4,4g "$out/results" | awk '
	function flush() {
		if (n == 0) return
		med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		printf "%-58s %-16s %12.4g %12.4g %12.4g %3d\n", key1, key2, v[1], med, v[n], n
		n = 0
	}
	{ if ($2 != key1 || $3 != key2) { flush(); key1 = $2; key2 = $3 } v[++n] = $4 }
	END { flush() }'
