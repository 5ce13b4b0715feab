package main

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/commit"
	"github.com/felixmq/felix/cpuprofile"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/udp"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func histogram(values ...uint64) broker.HistogramStats {
	var h commit.Histogram
	for _, v := range values {
		h.Record(v)
	}
	s := h.Snapshot()
	return broker.HistogramStats{Count: s.Count, Sum: s.Sum, Buckets: s.Buckets[:]}
}

func durableShard(syncs uint64, waiters, latency broker.HistogramStats) []broker.StreamStats {
	return []broker.StreamStats{{
		StreamSpec: broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "ns", Stream: "orders"}, Durable: true},
		Shards:     []broker.ShardStats{{Shard: 0, Commit: &broker.CommitStats{Syncs: syncs, WaitersPerSync: waiters, SyncLatency: latency}}},
	}}
}

func TestComputeDeltasBetweenScrapes(t *testing.T) {
	sub := func(id uint64, depth int, delivered uint64) broker.SubscriptionStats {
		return broker.SubscriptionStats{ID: id, Capacity: 512, Queue: fanout.Stats{Depth: depth, Delivered: delivered}}
	}
	prev := &broker.Stats{
		Time:          t0,
		DroppedEvents: 100,
		Connections: []broker.ConnectionStats{
			{ID: 1, BytesReceived: 1000, BytesSent: 2000, PacketsLost: 5, Path: udp.ConnSnapshot{CongestionEvents: 1},
				Subscriptions: []broker.SubscriptionStats{sub(1, 0, 10)}},
			{ID: 3, BytesReceived: 1 << 30}, // closed before the second scrape
		},
		Streams: durableShard(10, histogram(1, 1), histogram(1000, 1000)),
	}
	cur := &broker.Stats{
		Time:          t0.Add(2 * time.Second),
		DroppedEvents: 150,
		Connections: []broker.ConnectionStats{
			{ID: 1, Remote: "127.0.0.1:7", SmoothedRTT: time.Millisecond, BytesReceived: 3000, BytesSent: 6000, PacketsLost: 7,
				Path:          udp.ConnSnapshot{MTU: 1452, CongestionEvents: 2},
				Subscriptions: []broker.SubscriptionStats{sub(1, 3, 30), sub(2, 9, 5)}},
			{ID: 2, BytesReceived: 100, BytesSent: 50, PacketsLost: 1},
		},
		// Ten more syncs: eight releasing 4 waiters, two releasing 8; all
		// taking about 1 ms except one of 1 s.
		Streams: durableShard(20, histogram(1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8),
			histogram(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1e9)),
	}
	s := compute(prev, cur)
	require.Equal(t, 2*time.Second, s.Interval)

	require.Len(t, s.Connections, 2)
	c := s.Connections[0]
	require.Equal(t, ConnSample{ID: 1, Remote: "127.0.0.1:7", RTT: time.Millisecond, MTU: 1452, Lost: 2, CongestionEvents: 1,
		BytesIn: 2000, BytesOut: 4000, BytesInRate: 1000, BytesOutRate: 2000, Subscriptions: 2}, c)
	require.Equal(t, ConnSample{ID: 2, Lost: 1, BytesIn: 100, BytesOut: 50, BytesInRate: 50, BytesOutRate: 25, New: true},
		s.Connections[1], "a new connection counts from its start")

	require.Equal(t, 1, s.Commit.DurableShards)
	require.Equal(t, uint64(10), s.Commit.Syncs)
	require.Equal(t, 5.0, s.Commit.SyncsRate)
	require.Equal(t, 4.8, s.Commit.WaitersPerSync)
	require.Equal(t, time.Duration(1023), s.Commit.SyncP50, "upper bound of 1000's power-of-two bucket")
	require.Equal(t, time.Duration(1<<30-1), s.Commit.SyncP99)

	require.Equal(t, FanoutSample{Subscriptions: 2, MaxDepth: 9, MaxDepthCapacity: 512, TotalDepth: 12, Drops: 50, DropRate: 25,
		Delivered: 20 + 5, DeliveredRate: 12.5}, s.Fanout)
	require.Nil(t, s.Process)
	require.Equal(t, noCPU, s.CPUUnavailable)
}

// A restarted broker (counters back to zero) reads as an interval without
// traffic, not as 2^64 bytes.
func TestComputeAfterRestart(t *testing.T) {
	prev := &broker.Stats{Time: t0, DroppedEvents: 7, Connections: []broker.ConnectionStats{{ID: 1, BytesSent: 1 << 20}},
		Streams: durableShard(50, histogram(1, 2, 3), histogram(5, 6))}
	cur := &broker.Stats{Time: t0.Add(time.Second), Connections: []broker.ConnectionStats{{ID: 1, BytesSent: 10}},
		Streams: durableShard(1, histogram(1), histogram(5))}
	s := compute(prev, cur)
	require.Zero(t, s.Connections[0].BytesOut)
	require.Zero(t, s.Fanout.Drops)
	require.Equal(t, uint64(1), s.Commit.Syncs, "a reopened shard counts from zero")
	require.Equal(t, 1.0, s.Commit.WaitersPerSync)
}

func TestComputeCPU(t *testing.T) {
	threads := func(a, b time.Duration) []cpuprofile.Thread {
		return []cpuprofile.Thread{{TID: 10, Name: "felix-broker", User: a}, {TID: 11, Name: "felix-io-0", User: b, System: b}}
	}
	cpus := func(user, softirq, iowait, idle time.Duration) cpuprofile.SystemCPU {
		ct := cpuprofile.CPUTimes{User: user, SoftIRQ: softirq, IOWait: iowait, Idle: idle}
		return cpuprofile.SystemCPU{Total: ct, CPUs: []cpuprofile.CPUStat{{ID: 0}, {ID: 1}}}
	}
	prev := &broker.Stats{Time: t0, CPU: &cpuprofile.Snapshot{At: t0, Threads: threads(0, 0), System: cpus(0, 0, 0, 0)}}
	cur := &broker.Stats{Time: t0.Add(time.Second), CPU: &cpuprofile.Snapshot{At: t0.Add(time.Second),
		Process: cpuprofile.ProcessCPU{User: 900 * time.Millisecond, System: 300 * time.Millisecond},
		Threads: threads(100*time.Millisecond, 400*time.Millisecond),
		System:  cpus(1200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond)}}
	s := compute(prev, cur)
	require.Equal(t, &ProcessSample{CPU: 120, User: 90, System: 30, Threads: 2}, roundProcess(s.Process))
	require.Equal(t, "felix-io-0", s.Threads[0].Name, "busiest first")
	require.InDelta(t, 80, s.Threads[0].CPU, 1e-9)
	require.InDelta(t, 10, s.Threads[1].CPU, 1e-9)
	require.Equal(t, 2, s.System.CPUs)
	require.InDelta(t, 60, s.System.User, 1e-9, "% of all CPUs")
	require.InDelta(t, 10, s.System.SoftIRQ, 1e-9)
	require.InDelta(t, 5, s.System.IOWait, 1e-9)
	require.InDelta(t, 25, s.System.Idle, 1e-9)
}

func roundProcess(p *ProcessSample) *ProcessSample {
	r := func(v float64) float64 { return float64(int(v*1e6+0.5)) / 1e6 }
	return &ProcessSample{CPU: r(p.CPU), User: r(p.User), System: r(p.System), Threads: p.Threads}
}

// --json is an interface: every name is snake_case and the summary's
// totals follow the samples.
func TestJSONNamesAreSnakeCase(t *testing.T) {
	s := Sample{Connections: []ConnSample{{}}, Process: &ProcessSample{}, Threads: []ThreadSample{{}},
		System: &SystemSample{}, BPF: &BPFSample{Softirq: []SoftirqSample{{}}}}
	m := newSummary(t0)
	m.add(&s)
	m.finish(t0)
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for _, r := range []record{{Start: &startRecord{}}, {Sample: &s}, {Summary: m}} {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		walkKeys(v, func(k string) { require.Regexp(t, snake, k) })
	}
}

func walkKeys(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			f(k)
			walkKeys(e, f)
		}
	case []any:
		for _, e := range v {
			walkKeys(e, f)
		}
	}
}
