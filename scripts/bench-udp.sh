#!/usr/bin/env bash
# bench-udp.sh [ROUNDS] [BIMODAL_RUNS] — packet-path benchmarks.
#
# Builds the udp and broker test binaries once, then per round (default 5),
# each case a fresh process, in an order that rotates every round:
#   - BenchmarkTransfer, 256 MiB over one quic-go stream, on (a) a stock
#     *net.UDPConn, (b) udp.Conn with reads inline, (c) udp.Conn pinned;
#   - BenchmarkThroughput4KiBx64 (broker, 4 KiB x 64 x fanout 1, 512 MiB)
#     on stock sockets (FELIX_BENCH_CONN=plain) and on the default udp conn.
# Then BIMODAL_RUNS (default 20) fresh runs of the default broker
# throughput benchmark, and the worst / median ratio. Prints min/median/max
# of every metric; raw output (with each run's per-connection log lines)
# stays in $BENCH_OUT. About 12 minutes with the defaults on 2 cores.
set -euo pipefail

# shellcheck source=scripts/benchlib.sh
source "$(dirname "$0")/benchlib.sh"

rounds=${1:-5}
bimodal=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d /tmp/felix-bench-udp.XXXXXX)}
mkdir -p "$out"
cd "$root"

header
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
echo "# raw output in $out"

go test -c -o "$out/udp.test" ./udp/
go test -c -o "$out/broker.test" ./broker/
export FELIX_BENCH_FULL=1

tput='^BenchmarkThroughput4KiBx64$'
cases=(
	"udp.test ^BenchmarkTransfer\$/^conn=stdlib\$ -"
	"udp.test ^BenchmarkTransfer\$/^conn=felix\$ -"
	"udp.test ^BenchmarkTransfer\$/^conn=felix-pinned\$ -"
	"broker.test $tput plain"
	"broker.test $tput udp"
)

: >"$out/results"
start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	echo "# round $r/$rounds ($(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg))" >&2
	n=${#cases[@]}
	for i in $(seq 0 $((n - 1))); do
		read -r bin pat conn <<<"${cases[$(((i + r) % n))]}"
		if [[ $conn == - ]]; then
			run "$r" "$bin" "$pat" 1x
		else
			FELIX_BENCH_CONN=$conn run "$r.$conn" "$bin" "$pat" 1x
		fi
	done
done

: >"$out/bimodal"
for i in $(seq 1 "$bimodal"); do
	res=$(cd "$root/broker" && "$out/broker.test" -test.run='^$' -test.bench="$tput" -test.count=1 -test.benchtime=1x 2>&1)
	printf '%s\n' "$res" >"$out/bimodal$i.txt"
	mbs=$(printf '%s\n' "$res" | awk '/^Benchmark/ { for (i = 3; i <= NF; i++) if ($(i) == "MB/s") print $(i - 1) }')
	echo "$i $mbs" >>"$out/bimodal"
	echo "# bimodal run $i: $mbs MB/s" >&2
done

echo "# rounds (plain/udp rows of the broker benchmark carry the conn in the round column)"
awk '{ split($1, rc, "."); name = $2; if (rc[2] != "") name = name "/conn=" rc[2]; print rc[1], name, $3, $4 }' \
	"$out/results" >"$out/results.named" && mv "$out/results.named" "$out/results"
summarize 58
echo "# bimodality: $bimodal fresh runs of $tput (default conn), MB/s"
sort -k2,2g "$out/bimodal" | awk '{ v[NR] = $2; r[NR] = $1 } END {
	med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	printf "min %.1f (run %s)  median %.1f  max %.1f (run %s)  worst/median %.3f\n", v[1], r[1], med, v[NR], r[NR], v[1] / med
}'
echo "# finished after $(($(date +%s) - start)) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
