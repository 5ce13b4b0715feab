#!/usr/bin/env bash
# bench-replication.sh [ROUNDS] — what replication costs (docs/BENCHMARKS.md,
# "Replication"): three brokers, etcd and a control plane on this machine
# (scripts/cluster.sh), one durable on_commit stream of one shard per
# cluster, in three variants:
#   rf1    replicas 1
#   rf3q   replicas 3, ack quorum
#   rf3l   replicas 3, ack leader
# Every (round, variant) is a fresh cluster holding only that stream; the
# variants' order rotates round by round, so compare them only inside one run.
# In each, felix-loadgen publishes to the shard's leader (the owner for rf1),
# so nothing is forwarded, with no subscriber:
#   latency     256 B, one acked publish in flight, LAT_DURATION (default 5s)
#   throughput  4 publishers x 64 x 4 KiB acked batches (16 in flight each),
#               TPUT_COUNT messages (default 131072: 512 MiB)
# and around the throughput run it reads each broker's CPU time
# (/proc/PID/stat) and the leader's counters: CPU-seconds per GB published
# summed over the three brokers; for rf3 entries per MsgApp (those carrying
# entries, and all) and records per log sync at the leader and the
# followers; for rf1 records per group-commit sync; the leader's mean quorum
# wait; the data disk's busy time, write rate and flush latency (the whole
# machine's: other work shows there too). Per round it derives
# rf3/rf1 ratios and the latency goal's budget: the rf3q - rf1 ack p50
# against one broker-to-broker round trip (the brokers' peer connections'
# smoothed RTT) plus one fsync (the rf1 shard's sync p50). A throughput run
# whose publishes failed is reported as V_failed, apart from the others.
#
# A throughput run that publishes less than 4x what can sit in buffers (the
# QUIC windows loadgen checks, plus for rf3 the leader's 64 MiB of
# uncommitted raft entries) is flagged "warning: undersized run". Prints
# min/median/max of every figure; raw output in $BENCH_OUT (default a temp
# dir). About 12-15 minutes for 5 rounds on 2 loaded cores.
#
# VARIANTS (default "rf1 rf3q rf3l") runs some of them; PREBUILT names a
# directory holding felix-broker, felix-controlplane, felix-devetcd, felix
# and felix-loadgen to run instead of building them, so that runs of two
# builds can be interleaved.
set -euo pipefail

rounds=${1:-5}
lat_dur=${LAT_DURATION:-5s}
tput_count=${TPUT_COUNT:-131072}
base=${CLUSTER_PORT_BASE:-$((20000 + RANDOM % 120 * 100))} # below the ephemeral ports
root=$(cd "$(dirname "$0")/.." && pwd)
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/felix-bench-replication.XXXXXX")}
mkdir -p "$out/bin"
cd "$root"
# shellcheck source=scripts/benchlib.sh
source scripts/benchlib.sh

header
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
dev=$(basename "$(df --output=source "$out" | tail -1)")
[ -f "/sys/block/$dev/stat" ] || { echo "bench-replication.sh: no /sys/block/$dev/stat for $out" >&2; exit 1; }
echo "# data on $dev, write cache: $(cat "/sys/block/$dev/queue/write_cache" 2>/dev/null || echo '?'); raw output in $out; ports from $base"
if [ -n "${PREBUILT:-}" ]; then
	cp "$PREBUILT"/{felix-broker,felix-controlplane,felix-devetcd,felix,felix-loadgen} "$out/bin/"
else
	go build -o "$out/bin/" ./cmd/felix-broker ./cmd/felix-controlplane ./cmd/felix-devetcd ./tools/felix
	go build -o "$out/bin/felix-loadgen" ./tools/loadgen
fi
: >"$out/results"

declare -A create=(
	[rf1]="--durable --fsync on_commit"
	[rf3q]="--durable --fsync on_commit --replicas 3 --ack quorum"
	[rf3l]="--durable --fsync on_commit --replicas 3 --ack leader"
)
read -r -a variants <<<"${VARIANTS:-rf1 rf3q rf3l}"

# The cluster of the cell running now, stopped on any exit.
cell_dir=
down() {
	[ -n "$cell_dir" ] && CLUSTER_PORT_BASE=$base scripts/cluster.sh down "$cell_dir" 2>>"$out/cluster.log"
	cell_dir=
}
trap down EXIT

# snap.py: reads the brokers (stats, metrics, /proc) and judges the runs.
cat >"$out/snap.py" <<'PY'
import json, os, re, sys, time, urllib.request

def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read().decode()

def stats(base, n):
    return json.loads(get(f"http://127.0.0.1:{base + 30 + n}/debug/felix/stats"))

def shard(st, stream):
    for s in st.get("streams") or []:
        if s["stream"] == stream:
            return s["shard_stats"][0]
    return None

def leader(base, stream, token_file, replicated):
    """The broker number (1-3) leading stream's shard 0, once it serves."""
    token = open(token_file).read().strip()
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if replicated:
                named = [((shard(stats(base, n), stream) or {}).get("replica") or {}) for n in (1, 2, 3)]
                lead = [n for n, r in zip((1, 2, 3), named) if r.get("role") == "leader"]
                # and the placement's preferred leader: raft hands the
                # leadership to it, which mid-run would move the load.
                p = json.loads(get(f"http://127.0.0.1:{base + 11}/v1/placement",
                                   {"Authorization": "Bearer " + token}))
                owner = [a.get("owner") for a in p["assignments"] if a["stream"] == stream and a["shard"] == 0]
                if len(lead) == 1 and all(r.get("leader") == f"broker-{lead[0]}" for r in named) and owner == [f"broker-{lead[0]}"]:
                    return lead[0]
            else:
                p = json.loads(get(f"http://127.0.0.1:{base + 11}/v1/placement",
                                   {"Authorization": "Bearer " + token}))
                for a in p["assignments"]:
                    if a["stream"] == stream and a["shard"] == 0 and a.get("owner"):
                        n = int(a["owner"].rsplit("-", 1)[1])
                        if (shard(stats(base, n), stream) or {}).get("commit") is not None:
                            return n
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    sys.exit(f"no leader for {stream} within 60 s")

def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime

def disk(dev):
    """The data disk's /sys/block stat: writes, flushes and busy time (all of the machine's)."""
    f = [int(x) for x in open(f"/sys/block/{dev}/stat").read().split()]
    return {"write_sectors": f[6], "io_ticks_ms": f[9], "flushes": f[15] if len(f) > 16 else 0,
            "flush_ticks_ms": f[16] if len(f) > 16 else 0}

def snap(base, stream, pids, lead, dev):
    """Counters of the three brokers now."""
    s = {"time": time.time(), "disk": disk(dev), "cpu_ticks": {n: cpu_ticks(pid) for n, pid in pids.items()}, "brokers": {}}
    for n in (1, 2, 3):
        sh = shard(stats(base, n), stream) or {}
        rep, com = sh.get("replica") or {}, sh.get("commit") or {}
        s["brokers"][n] = {"syncs": rep.get("log_syncs", com.get("syncs", 0)),
                           "records": rep.get("log_synced_records", com.get("records", 0)),
                           "quorum_acks": rep.get("quorum_acks", 0),
                           "quorum_wait_ms": rep.get("quorum_wait_mean_ms", 0) * rep.get("quorum_acks", 0)}
    text = get(f"http://127.0.0.1:{base + 30 + lead}/metrics")
    def metric(name, labels=""):
        m = re.search(r"^" + re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0
    s["apps_full"] = metric("felix_raft_append_messages_total", 'empty="false"')
    s["apps_empty"] = metric("felix_raft_append_messages_total", 'empty="true"')
    s["entries"] = metric("felix_raft_append_entries_total")
    return s

def peer_rtt_us(base):
    """Median smoothed RTT of the brokers' connections from other brokers."""
    rtts = sorted(c["smoothed_rtt_ns"] / 1e3 for n in (1, 2, 3) for c in stats(base, n).get("connections") or []
                  if c.get("role") == "peer" and c.get("smoothed_rtt_ns"))
    return rtts[len(rtts) // 2] if rtts else None

def judge(cell, r, v, lead):
    """Result lines "round name unit value" of one cell, and warnings."""
    lines, warn = [], []
    lat = json.load(open(f"{cell}/lat.json"))["summary"]
    lines += [(f"latency_256B/{v}", "ack_p50_us", lat["ack_p50_us"]["median"]),
              (f"latency_256B/{v}", "ack_p99_us", lat["ack_p99_us"]["median"])]
    ex = json.load(open(f"{cell}/extra.json"))
    if ex.get("sync_p50_us"):
        lines.append((f"latency_256B/{v}", "sync_p50_us", ex["sync_p50_us"]))
    if ex.get("quorum_wait_us"):
        lines.append((f"latency_256B/{v}", "quorum_wait_us", ex["quorum_wait_us"]))
    if ex.get("peer_rtt_us"):
        lines.append((f"latency_256B/{v}", "peer_rtt_us", ex["peer_rtt_us"]))
    t = json.load(open(f"{cell}/tput.json"))
    rd = t["rounds"][0]
    sm = t["summary"]
    failed = any(sm.get(k) for k in ("unaccounted", "duplicates", "publish_failed", "errors"))
    a, b = json.load(open(f"{cell}/before.json")), json.load(open(f"{cell}/after.json"))
    gb = rd["transport"]["published_bytes"] / 1e9
    tck = os.sysconf("SC_CLK_TCK")
    cpu = {n: (b["cpu_ticks"][n] - a["cpu_ticks"][n]) / tck for n in a["cpu_ticks"]}
    # A run whose publishes failed is kept apart: its rate is not the variant's.
    name = f"throughput_4KiBx64x4/{v}" + ("_failed" if failed else "")
    lines += [(name, "MB/s", rd["mb_per_s"]), (name, "cpu_s/GB", sum(cpu.values()) / gb),
              (name, "leader_cpu_s/GB", cpu[str(lead)] / gb), (name, "retries", rd["retries"])]
    d = lambda n, k: b["brokers"][n][k] - a["brokers"][n][k]
    if d(str(lead), "syncs"):
        lines.append((name, "records/sync_leader", d(str(lead), "records") / d(str(lead), "syncs")))
    fol = [n for n in ("1", "2", "3") if n != str(lead) and d(n, "syncs")]
    if v != "rf1" and fol:
        lines.append((name, "records/sync_followers", sum(d(n, "records") for n in fol) / sum(d(n, "syncs") for n in fol)))
    if d(str(lead), "quorum_acks"):
        lines.append((name, "quorum_wait_ms", d(str(lead), "quorum_wait_ms") / d(str(lead), "quorum_acks")))
    dt, da = b["time"] - a["time"], {k: b["disk"][k] - a["disk"][k] for k in a["disk"]}
    lines += [(name, "disk_busy_%", 100 * da["io_ticks_ms"] / 1e3 / dt), (name, "disk_write_MB/s", da["write_sectors"] * 512 / 1e6 / dt)]
    if da["flushes"]:
        lines.append((name, "disk_flush_ms", da["flush_ticks_ms"] / da["flushes"]))
    full, empty, ents = (b[k] - a[k] for k in ("apps_full", "apps_empty", "entries"))
    if v != "rf1" and full:
        lines += [(name, "entries/MsgApp", ents / full), (name, "entries/MsgApp_all", ents / (full + empty))]
    buffers = rd["transport"]["absorb_bytes"] + (64 << 20 if v != "rf1" else 0)
    if rd["transport"]["published_bytes"] < 4 * buffers:
        warn.append(f"warning: undersized run: round {r} {v} published {rd['transport']['published_bytes'] / 1e6:.1f} MB, "
                    f"less than 4 x the {buffers / 1e6:.1f} MB the QUIC windows{' and raft' if v != 'rf1' else ''} can hold: raise TPUT_COUNT")
    for f, res in (("latency", lat), ("throughput", t["summary"])):
        bad = {k: res[k] for k in ("unaccounted", "duplicates", "publish_failed", "errors") if res.get(k)}
        if bad:
            warn.append(f"warning: round {r} {v} {f}: {bad}")
    return [f"{r} {n} {u} {x:.6g}" for n, u, x in lines], warn

def ratios(results, r):
    """Per-round comparisons of the variants."""
    got = {}
    for line in open(results):
        if not line.strip():
            continue
        rr, n, u, x = line.split()
        if rr == r:
            got[(n, u)] = float(x)
    out = []
    def g(n, u):
        return got.get((n, u))
    for v in ("rf3q", "rf3l"):
        for u in ("MB/s", "cpu_s/GB"):
            x, y = g(f"throughput_4KiBx64x4/{v}", u), g("throughput_4KiBx64x4/rf1", u)
            if x and y:
                out.append(f"{r} ratio/{v}÷rf1 {u} {x / y:.4g}")
        x, y = g(f"latency_256B/{v}", "ack_p50_us"), g("latency_256B/rf1", "ack_p50_us")
        if x and y:
            out.append(f"{r} added/{v}-rf1 ack_p50_us {x - y:.4g}")
    x, y = g("latency_256B/rf3q", "ack_p50_us"), g("latency_256B/rf1", "ack_p50_us")
    rtt, sync = g("latency_256B/rf3q", "peer_rtt_us"), g("latency_256B/rf1", "sync_p50_us")
    if x and y and rtt and sync:
        out.append(f"{r} goal/rf3q-rf1_p50÷(rtt+fsync) ratio {(x - y) / (rtt + sync):.4g}")
    return out

cmd = sys.argv[1]
if cmd == "leader":
    print(leader(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] != "rf1"))
elif cmd == "snap":
    base, stream, lead = int(sys.argv[2]), sys.argv[3], int(sys.argv[5])
    pids = dict(p.split(":") for p in sys.argv[4].split(","))
    print(json.dumps(snap(base, stream, {int(k): v for k, v in pids.items()}, lead, sys.argv[6])))
elif cmd == "extra":
    base, stream, lead = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    sh = shard(stats(base, lead), stream) or {}
    p50 = ((sh.get("commit") or {}).get("sync_latency_ns") or {}).get("p50")
    qw = (sh.get("replica") or {}).get("quorum_wait_mean_ms")
    print(json.dumps({"sync_p50_us": p50 / 1e3 if p50 else None, "peer_rtt_us": peer_rtt_us(base),
                      "quorum_wait_us": qw * 1e3 if qw else None}))
elif cmd == "judge":
    lines, warn = judge(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    print("\n".join(lines))
    for w in warn:
        print(w, file=sys.stderr)
elif cmd == "ratios":
    out = ratios(sys.argv[2], sys.argv[3])
    if out:
        print("\n".join(out))
PY

# cell R V: a fresh cluster with stream V, its latency and throughput runs.
cell() {
	local r=$1 v=$2 dir="$out/r$1-$2" lead pids lg
	cell_dir=$dir
	CLUSTER_PREBUILT="$out/bin" CLUSTER_PORT_BASE=$base scripts/cluster.sh up "$dir" 2>>"$out/cluster.log"
	# shellcheck disable=SC2086
	# --wait 0: the CLI would wait on a broker at the default admin address
	# (none here); snap.py leader waits for the shard to be served instead.
	"$dir/bin/felix" admin stream create "$v" --tenant t1 --namespace default ${create[$v]} --wait 0 \
		--controlplane "http://127.0.0.1:$((base + 11))" --token-file "$dir/bootstrap.token" >/dev/null
	lead=$(python3 "$out/snap.py" leader "$base" "$v" "$dir/bootstrap.token" "$v") || {
		echo "SKIPPED: round $r $v: no leader serving within 60 s" >&2
		down
		return 0
	}
	pids=$(awk '$2 ~ /^broker-/ { sub(/broker-/, "", $2); printf "%s%s:%s", sep, $2, $1; sep = "," }' "$dir/pids")
	lg=("$out/bin/felix-loadgen" --addr "127.0.0.1:$((base + 20 + lead))" --admin "127.0.0.1:$((base + 30 + lead))"
		--ca "$dir/tls/ca.pem" --token "$(cat "$dir/client.token")" --stream "$v" --create=false --shards 1 --subscribers 0)
	"${lg[@]}" --profile latency --payload 256 --duration "$lat_dur" --warmup 1s --json "$dir/lat.json" >"$dir/lat.txt" 2>&1 ||
		{ echo "FAILED: round $r $v latency" >&2; tail -5 "$dir/lat.txt" >&2; }
	python3 "$out/snap.py" extra "$base" "$v" "$lead" >"$dir/extra.json"
	python3 "$out/snap.py" snap "$base" "$v" "$pids" "$lead" "$dev" >"$dir/before.json"
	"${lg[@]}" --profile throughput --ack batch --payload 4KiB --batch 64 --publishers 4 --count "$tput_count" \
		--warmup 1s --json "$dir/tput.json" >"$dir/tput.txt" 2>&1 ||
		{ echo "FAILED: round $r $v throughput" >&2; tail -5 "$dir/tput.txt" >&2; }
	python3 "$out/snap.py" snap "$base" "$v" "$pids" "$lead" "$dev" >"$dir/after.json"
	down
	rm -rf "$dir"/data-* "$dir/etcd"
	python3 "$out/snap.py" judge "$dir" "$r" "$v" "$lead" >>"$out/results"
	grep -h -i warning "$dir/lat.txt" "$dir/tput.txt" >&2 || true
	echo "#   $v: leader broker-$lead, $(grep -h "^$r [^ ]*/$v " "$out/results" |
		awk '$3 == "ack_p50_us" || $3 == "MB/s" || $3 == "cpu_s/GB" { printf "%s %s  ", $3, $4 }')" >&2
}

start=$(date +%s)
for r in $(seq 1 "$rounds"); do
	echo "# round $r/$rounds ($(($(date +%s) - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	for i in "${!variants[@]}"; do
		cell "$r" "${variants[$(((r - 1 + i) % ${#variants[@]}))]}"
	done
	python3 "$out/snap.py" ratios "$out/results" "$r" >>"$out/results"
done

echo "# $rounds rounds in $(($(date +%s) - start)) s; load at end: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes:"
busiest
summarize 44
