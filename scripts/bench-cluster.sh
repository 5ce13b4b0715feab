#!/usr/bin/env bash
# bench-cluster.sh [ROUNDS] — cluster: throughput of two brokers against one.
#
# Each broker runs with its own felix-loadgen in its own network namespace
# (its own loopback and UDP stack, as on separate hosts), so the only thing
# the brokers share is the machine's CPUs and disk. That is the steady state
# of a ClusterClient: every shard's publishes go straight to its owner
# (forwarded 0), so the data path is one broker per stream. Per round, in
# alternating order: "1" = one broker with its generator, "2" = two brokers
# with one generator each, started together; each generator runs the same
# throughput profile, acked per batch and lossless (4 KiB x 64, PUBLISHERS
# publishers, one subscriber, Block policy, DURATION). The aggregate is the
# sum of the generators' payload MB/s; each must report 0 dropped and 0
# unaccounted. On 2 cores both
# configurations are CPU-bound, so this measures what a second broker costs
# on the same cores, not what a second host adds. Root only.
set -euo pipefail

rounds=${1:-3}
dur=${DURATION:-5s}
pubs=${PUBLISHERS:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d /tmp/felix-bench-cluster.XXXXXX)}
mkdir -p "$out"
cd "$root"
source scripts/benchlib.sh
[ "$(id -u)" = 0 ] || { echo "bench-cluster.sh: needs root (ip netns)" >&2; exit 1; }
{ header; echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"; } | tee "$out/MACHINE.txt"

go build -o "$out/felix-broker" ./cmd/felix-broker
go build -o "$out/felix-loadgen" ./tools/loadgen

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for n in 1 2; do ip netns del "felixbench$n" 2>/dev/null || true; done
}
trap cleanup EXIT

for n in 1 2; do
	ip netns del "felixbench$n" 2>/dev/null || true
	ip netns add "felixbench$n"
	ip -n "felixbench$n" link set lo up
done

# start N: one broker per namespace 1..N, each ready before returning.
start() {
	pids=()
	for n in $(seq "$1"); do
		rm -rf "$out/dev$n"
		ip netns exec "felixbench$n" env FELIX_QUIC_BIND=127.0.0.1:15000 FELIX_ADMIN_BIND=127.0.0.1:18080 \
			FELIX_DEV_DIR="$out/dev$n" FELIX_EMBEDDED_CONTROLPLANE_BIND=off FELIX_STREAMS= FELIX_SUBSCRIBER_QUEUE_POLICY=block \
			"$out/felix-broker" >"$out/broker$n.log" 2>&1 &
		pids+=($!)
	done
	for n in $(seq "$1"); do
		for _ in $(seq 100); do
			ip netns exec "felixbench$n" curl -fs http://127.0.0.1:18080/ready >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
}

stop() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
}

# run R N: N generators at once, one per broker.
run() {
	local r=$1 n=$2 gen=()
	start "$n"
	for i in $(seq "$n"); do
		ip netns exec "felixbench$i" "$out/felix-loadgen" --addr 127.0.0.1:15000 --admin 127.0.0.1:18080 \
			--ca "$out/dev$i/cert.pem" --token dev --profile throughput --ack batch --payload 4KiB --batch 64 \
			--publishers "$pubs" --duration "$dur" --warmup 1s --json "$out/r$r-n$n-g$i.json" \
			>"$out/r$r-n$n-g$i.txt" 2>&1 &
		gen+=($!)
	done
	wait "${gen[@]}"
	stop
	python3 - "$out" "$r" "$n" <<'PY'
import json, sys
out, r, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = [json.load(open(f"{out}/r{r}-n{n}-g{i}.json"))["summary"] for i in range(1, n + 1)]
mbs = [s["mb_per_s"]["median"] for s in res]
bad = [(s["dropped"], s["unaccounted"]) for s in res if s["dropped"] or s["unaccounted"]]
if bad:
    print(f"round {r} brokers {n}: NOT LOSSLESS (dropped, unaccounted) {bad}")
print(f"round {r} brokers {n}: " + " + ".join(f"{m:.1f}" for m in mbs) + f" = {sum(mbs):.1f} MB/s")
PY
}

for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then run "$r" 1; run "$r" 2; else run "$r" 2; run "$r" 1; fi
done | tee "$out/results.txt"
echo "# finished; load $(cut -d' ' -f1-3 /proc/loadavg); raw output in $out"
