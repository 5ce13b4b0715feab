#!/usr/bin/env bash
# bench-delivery.sh [ROUNDS] — the delivery contract under load: felix-loadgen
# against a fresh felix-broker process per run, variants interleaved round by
# round so that each comparison is made inside one run (the machine is
# shared and noisy). Prints min/median/max per variant of: publish msg/s,
# delivered msg/s, ack p50 µs, dropped, unaccounted, redials, and the
# broker's peak anonymous RSS. Raw JSON in $BENCH_OUT (default: a temp dir).
#
# Scenarios (docs/BENCHMARKS.md, "Delivery"):
#   fanout10   1 publisher x 10 subscribers, 256 B, durable (periodic): the
#              default (catch-up) against FELIX_SUBSCRIBER_QUEUE_POLICY=block
#              with FELIX_DURABLE_SUBSCRIBER_CATCH_UP=false
#   pause      1 publisher, 1 subscriber, durable, full speed for 10 s; the
#              subscriber stops reading for 2 s at 4 s, against no pause
#   slow       50 subscribers, 10 sleeping 20 ms per event, a paced acked
#              publisher (2,000 msg/s), ephemeral and durable, against none
#              slow; FELIX_SUBSCRIBER_QUEUE=4096 so the slow ones outgrow it
#   fanout500  1 publisher x 500 subscribers, 256 B, 20 s, ephemeral and
#              durable, default knobs, beside 100 subscribers
# SCENARIOS="fanout10 pause" picks some. About 25 min for all with 5 rounds.
set -euo pipefail

# shellcheck source=scripts/benchlib.sh
source "$(dirname "$0")/benchlib.sh"

rounds=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d /tmp/felix-delivery.XXXXXX)}
scenarios=${SCENARIOS:-fanout10 pause slow fanout500}
mkdir -p "$out/bin"
cd "$root"

header
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); raw output in $out"
go build -o "$out/bin/" ./cmd/felix-broker
go build -o "$out/bin/felix-loadgen" ./tools/loadgen

port=$((20000 + RANDOM % 20000))

# one NAME "BROKER ENV" LOADGEN ARGS...: a fresh broker, one loadgen run.
one() {
	local name=$1 benv=$2 dir
	shift 2
	dir=$(mktemp -d "$out/run.XXXXXX")
	# shellcheck disable=SC2086
	env FELIX_DEV_DIR="$dir/dev" FELIX_DATA_DIR="$dir/data" FELIX_QUIC_BIND=127.0.0.1:$port \
		FELIX_ADMIN_BIND=127.0.0.1:$((port + 1)) FELIX_EMBEDDED_CONTROLPLANE_BIND=off $benv \
		"$out/bin/felix-broker" >"$dir/broker.log" 2>&1 &
	local bp=$!
	for _ in $(seq 200); do curl -sf "http://127.0.0.1:$((port + 1))/ready" >/dev/null && break; sleep 0.05; done
	if ! "$out/bin/felix-loadgen" --addr 127.0.0.1:$port --admin 127.0.0.1:$((port + 1)) \
		--ca "$dir/dev/cert.pem" --token dev --json "$out/$name.r$round.json" "$@" >"$dir/loadgen.out" 2>&1; then
		echo "FAILED: $name round $round" >&2
		tail -5 "$dir/loadgen.out" >&2
	fi
	kill "$bp"
	wait "$bp" 2>/dev/null || true
	rm -rf "$dir/data"
}

block="FELIX_SUBSCRIBER_QUEUE_POLICY=block FELIX_DURABLE_SUBSCRIBER_CATCH_UP=false"
small="FELIX_SUBSCRIBER_QUEUE=4096"
f10=(--profile throughput --payload 256 --publishers 1 --subscribers 10 --durable --duration 10s)
pz=(--profile throughput --payload 256 --publishers 1 --shards 1 --subscribers 1 --durable --duration 10s)
sl=(--profile latency --payload 256 --subscribers 50 --rate 2000 --inflight 64 --duration 10s)
slow=(--slow 10 --slow-delay 20ms --slow-window 64KiB)
f500=(--profile throughput --payload 256 --publishers 1 --duration 20s)

for round in $(seq 1 "$rounds"); do
	echo "# round $round/$rounds (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	for s in $scenarios; do
		case $s in
		fanout10)
			one fanout10-catchup "" "${f10[@]}"
			one fanout10-block "$block" "${f10[@]}"
			;;
		pause)
			one pause-none "" "${pz[@]}"
			one pause-2s "" "${pz[@]}" --pause 1 --pause-at 4s --pause-for 2s
			;;
		slow)
			one slow-ephemeral-none "$small" "${sl[@]}"
			one slow-ephemeral-10 "$small" "${sl[@]}" "${slow[@]}"
			one slow-durable-none "$small" "${sl[@]}" --durable
			one slow-durable-10 "$small" "${sl[@]}" "${slow[@]}" --durable
			;;
		fanout500)
			one fanout100-ephemeral "" "${f500[@]}" --subscribers 100
			one fanout500-ephemeral "" "${f500[@]}" --subscribers 500
			one fanout500-durable "" "${f500[@]}" --subscribers 500 --durable
			;;
		esac
	done
done

# min / median / max per variant over the rounds.
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(out, "*.r*.json"))):
    name = os.path.basename(f).rsplit(".r", 1)[0]
    r = json.load(open(f))["rounds"][0]
    ack = (r.get("ack_latency") or {}).get("p50_us", 0)
    slow = [s for s in r["subscribers"] if s.get("slow")]
    runs.setdefault(name, []).append({
        "pub msg/s": r["msg_per_s"], "delivered msg/s": r["delivered_msg_per_s"], "ack p50 µs": ack,
        "dropped": r["dropped"], "healthy dropped": r.get("healthy_dropped") or 0,
        "slow dropped": sum(s["dropped"] for s in slow), "unaccounted": r["unaccounted"],
        "duplicates": r["duplicates"], "redials": r.get("redials", 0),
        "rss MiB": r.get("broker_rss_max_bytes", 0) / 2**20})
def mmm(v):
    v = sorted(v)
    return f"{v[0]:.6g} / {statistics.median(v):.6g} / {v[-1]:.6g}"
for name, rs in runs.items():
    print(f"{name} ({len(rs)} rounds)")
    for k in rs[0]:
        print(f"  {k:16s} {mmm([r[k] for r in rs])}")
PY
