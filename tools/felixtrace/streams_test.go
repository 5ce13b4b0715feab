package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

// latency builds a cumulative histogram on the broker's bounds from
// per-bucket counts.
func latency(perBucket ...uint64) broker.LatencyHistogram {
	bounds := []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3}
	h := broker.LatencyHistogram{BoundsSeconds: bounds, Counts: make([]uint64, len(bounds))}
	var cum uint64
	for i := range bounds {
		if i < len(perBucket) {
			cum += perBucket[i]
		}
		h.Counts[i] = cum
	}
	h.Count = cum
	return h
}

// A stream's row shows its publish and delivery rates per second, its
// acks per second and their latency quantiles over the interval only,
// and the table names connections by role, tenant, principal and stream,
// and the goroutines by role.
func TestStreamsFeaturesAndConnectionsAreNamed(t *testing.T) {
	orders := func(pub, acked uint64, lat broker.LatencyHistogram) broker.StreamTraffic {
		return broker.StreamTraffic{Tenant: "t1", Namespace: "ns", Stream: "orders", PublishEvents: pub, PublishBytes: 100 * pub,
			DeliveredEvents: 2 * pub, Subscribers: 2, AckLatency: lat}
	}
	prev := &broker.Stats{Time: t0, Traffic: []broker.StreamTraffic{orders(1000, 10, latency(0, 0, 0, 0, 0, 0, 10))},
		Features: broker.FeatureStats{CacheOps: map[string]uint64{"get": 100}, GroupAcks: 5}}
	// 2 s later: 4000 more events in 100 more acked batches, 98 of them
	// within 50 µs, two within 1 ms.
	cur := &broker.Stats{Time: t0.Add(2 * time.Second),
		Traffic:  []broker.StreamTraffic{orders(5000, 110, latency(0, 0, 98, 0, 0, 0, 12))},
		Features: broker.FeatureStats{CacheOps: map[string]uint64{"get": 300, "put": 10}, GroupAcks: 25, RosterJoins: 3},
		Caches:   []broker.CacheStats{{Entries: 7, Watchers: 1}},
		Rosters:  []broker.RosterStats{{Roster: "t1/ns/lobby", Members: 3}},
		Groups: []broker.GroupStats{{Stream: "t1/ns/orders", Group: "workers", Committed: 4000, Tail: 5000, Inflight: 16},
			{Stream: "t1/ns/orders", Shard: 1, Group: "workers", Committed: 10, Tail: 10}},
		Connections: []broker.ConnectionStats{{ID: 1, Remote: "10.0.0.5:4242", Tenant: "t1", Principal: "alice",
			Role: broker.RolePublisher, Streams: []string{"t1/ns/orders"}}},
		Goroutines: map[string]int{"felix-commit": 2, "felix-commit-complete": 2},
	}
	s := compute(prev, cur)
	require.Len(t, s.Streams, 1)
	st := s.Streams[0]
	require.Equal(t, "t1/ns/orders", st.Stream)
	require.Equal(t, 2000.0, st.PublishRate)
	require.Equal(t, 200000.0, st.PublishBytes)
	require.Equal(t, 4000.0, st.DeliveredRate)
	require.Equal(t, 50.0, st.AckRate)
	require.Equal(t, 50*time.Microsecond, st.AckP50, "the bucket of the interval's median, not the run's")
	require.Equal(t, time.Millisecond, st.AckP99)

	f := s.Features
	require.Equal(t, map[string]float64{"get": 100, "put": 5}, f.CacheOpsRate)
	require.Equal(t, 10.0, f.AckRate)
	require.Equal(t, uint64(1000), f.GroupLag)
	require.Equal(t, 16, f.GroupInflight)
	require.Equal(t, 3, f.RosterMembers)
	require.Equal(t, "alice", s.Connections[0].Principal)

	var out bytes.Buffer
	printSample(&out, &s, 8)
	screen := out.String()
	for _, want := range []string{
		"10.0.0.5:4242         publisher  t1/alice", "t1/ns/orders",
		"STREAM", "PUB/s", "ACK p99", "≤50.0µs", "≤1.00ms", "2.00k",
		"drops/s", "CACHE     caches 1  entries 7  ops/s 105 (get 100, put 5)", "QUEUE     groups 2  lag 1000  in flight 16",
		"ROSTER    rosters 1  members 3  joins 3", "ROLES     felix-commit ×2  felix-commit-complete ×2",
	} {
		require.Contains(t, screen, want)
	}

	m := newSummary(t0)
	m.add(&s)
	m.finish(cur.Time)
	require.Equal(t, uint64(4000), m.Streams[0].Published)
	require.Equal(t, uint64(100), m.Streams[0].Acks)
	require.Equal(t, time.Millisecond, m.Streams[0].AckP99)
}
