#!/usr/bin/env bash
# bench-matrix.sh [ROUNDS] — the benchmark matrix with felix-loadgen
# against real felix-broker processes on 127.0.0.1, watched by felixtrace.
#
# Four brokers are started in turn, each a fresh process with its own
# ports and directories:
#   latency  FELIX_EVENT_BATCH_MAX_EVENTS=1, MAX_DELAY_US=0 (the latency
#            profile): acked publish p50/p99 by payload x fanout, fanout
#            1->500 paced, 50 subscribers with 10 slow, publish->delivery;
#   default  default batching: publish->delivery, ingest by publishers;
#   durable  FELIX_DATA_DIR set: durable on_commit vs ephemeral by publishers;
#   semantics FELIX_DATA_DIR set, default batching: the semantics scenarios (cache
#            put/get, counter add, watch fanout 1/50/500, roster late joiner
#            100/1K/10K, queue drain 0 B/256 B/4 KiB), about 3 minutes.
# Every loadgen run does ROUNDS rounds (default 3; fresh connections, same
# broker process) and writes its JSON; felixtrace samples the broker
# during each phase (CPU per thread, commit batching, softirq). Charts are
# drawn with `felix-loadgen report`. Output: $BENCH_OUT (default
# out/bench/<date>, ignored by git), a summary table on stdout. About 15
# minutes. Only the charts (*.svg) and MACHINE.txt go into docs/bench/<date>
# when docs/BENCHMARKS.md is updated from a run; the JSON, logs and traces
# stay out of the tree.
set -euo pipefail

rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$root/out/bench/$(date -u +%Y-%m-%d)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/felix-matrix.XXXXXX)
cd "$root"
# shellcheck source=scripts/benchlib.sh
source scripts/benchlib.sh
{ header; echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "# rounds per run: $rounds"; } | tee "$out/MACHINE.txt"

go build -o "$work/felix-broker" ./cmd/felix-broker
go build -o "$work/felix-loadgen" ./tools/loadgen
go build -o "$work/felixtrace" ./tools/felixtrace

bpf=()
[ "$(id -u)" = 0 ] && bpf=(--bpf)
broker_pid= trace_pid=
stop_broker() {
	[ -n "$trace_pid" ] && kill -INT "$trace_pid" 2>/dev/null && wait "$trace_pid" 2>/dev/null || true
	[ -n "$broker_pid" ] && kill -TERM "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null || true
	broker_pid= trace_pid=
}
trap 'stop_broker; rm -rf "$work"' EXIT

# start_broker NAME [VAR=VALUE...]: a fresh broker and a felixtrace on it.
start_broker() {
	local name=$1
	shift
	env FELIX_QUIC_BIND=127.0.0.1:15000 FELIX_ADMIN_BIND=127.0.0.1:18080 FELIX_DEV_DIR="$work/dev-$name" \
		FELIX_STREAMS= "$@" "$work/felix-broker" >"$out/broker-$name.log" 2>&1 &
	broker_pid=$!
	for _ in $(seq 100); do
		curl -fs http://127.0.0.1:18080/ready >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fs http://127.0.0.1:18080/ready >/dev/null || { echo "broker $name did not become ready" >&2; cat "$out/broker-$name.log" >&2; exit 1; }
	"$work/felixtrace" --admin 127.0.0.1:18080 --interval 1s "${bpf[@]}" --json "$out/trace-$name.jsonl" \
		>"$out/trace-$name.txt" 2>&1 &
	trace_pid=$!
}

# lg NAME ARGS...: one loadgen run, its table appended to the phase log.
lg() {
	local name=$1
	shift
	echo "## $name: felix-loadgen $*" | tee -a "$out/runs.txt" >&2
	FELIX_DEV_DIR="$work/dev-$phase" "$work/felix-loadgen" --addr 127.0.0.1:15000 --admin 127.0.0.1:18080 \
		--repeat "$rounds" --json "$out/$name.json" "$@" >>"$out/runs.txt" 2>>"$out/runs-stderr.txt" ||
		echo "FAILED: $name (see runs-stderr.txt)" | tee -a "$out/runs.txt" >&2
}

: >"$out/runs.txt"
: >"$out/runs-stderr.txt"
lat=(--profile latency --duration 3s --warmup 1s)

phase=latency
start_broker latency FELIX_EVENT_BATCH_MAX_EVENTS=1 FELIX_EVENT_BATCH_MAX_DELAY_US=0
for p in 0 256 4096; do
	for f in 1 10 50; do
		lg "lat-p$p-f$f" "${lat[@]}" --payload "$p" --subscribers "$f"
	done
done
for s in 1 10 50 100 500; do
	lg "fanout-s$s" "${lat[@]}" --payload 256 --subscribers "$s" --rate 1000 --inflight 64
done
lg slow-none "${lat[@]}" --payload 256 --subscribers 50 --rate 1000 --inflight 64
lg slow-10 "${lat[@]}" --payload 256 --subscribers 50 --slow 10 --slow-delay 20ms --slow-window 64KiB --rate 1000 --inflight 64
stop_broker

phase=default
start_broker default
lg delivery-default "${lat[@]}" --payload 256 --subscribers 1
for n in 1 2 4 8; do
	lg "ingest-4k-n$n" --profile throughput --payload 4KiB --publishers "$n" --duration 5s --warmup 1s
	lg "ingest-256-n$n" --profile throughput --payload 256 --publishers "$n" --duration 5s --warmup 1s
done
stop_broker

phase=durable
start_broker durable FELIX_DATA_DIR="$work/data"
for n in 1 8 16; do
	lg "eph-n$n" --profile throughput --ack batch --payload 4KiB --publishers "$n" --duration 5s --warmup 1s
	lg "dur-n$n" --profile throughput --ack batch --payload 4KiB --publishers "$n" --duration 5s --warmup 1s --durable --fsync on_commit
done
stop_broker

# Semantics scenarios. Watch rates fall with the watcher count so that one writer can
# keep its pace on a small host (the table warns when it cannot): a shared
# 2-core host delivered ~15 K/s at 500 watchers, so that cell is 50 K
# deliveries per round. The queue cells publish 10 K records to a fresh
# durable on_commit stream per round.
phase=semantics
start_broker semantics FELIX_DATA_DIR="$work/data-semantics"
lg cache-putget --scenario cache --op putget --workers 1 --duration 3s --warmup 1s
lg counter-add --scenario counter --workers 1 --keys 16 --duration 3s --warmup 1s
lg watch-w1 --scenario watch --watchers 1 --rate 1000 --count 2000 --warmup 500ms
lg watch-w50 --scenario watch --watchers 50 --rate 200 --count 600 --warmup 500ms
lg watch-w500 --scenario watch --watchers 500 --rate 20 --count 100 --warmup 500ms
for m in 100 1000 10000; do
	lg "roster-m$m" --scenario roster --members "$m" --count 20 --warmup 0
done
for p in 0 256 4096; do
	lg "queue-p$p" --scenario queue --payload "$p" --consumers 1 --count 10000
done
stop_broker

# felixtrace's per-second JSON lines are large (a row per connection): keep them compressed.
gzip -f "$out"/trace-*.jsonl
"$work/felix-loadgen" report --chart fanout --svg "$out/latency-fanout.svg" "$out"/lat-p*-f*.json >"$out/charts.txt"
"$work/felix-loadgen" report --chart publishers --svg "$out/throughput-publishers.svg" "$out"/ingest-*.json >>"$out/charts.txt"
"$work/felix-loadgen" report --chart publishers --svg "$out/durable-publishers.svg" "$out"/eph-n*.json "$out"/dur-n*.json >>"$out/charts.txt"
cat "$out/charts.txt"
echo "# finished; load $(cut -d' ' -f1-3 /proc/loadavg); results in $out"
