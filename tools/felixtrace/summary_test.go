package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummaryTotalsMeansAndMaxima(t *testing.T) {
	m := newSummary(t0)
	for i, bytes := range []uint64{1000, 3000} {
		m.add(&Sample{
			Interval:    time.Second,
			Connections: []ConnSample{{ID: 1, RTT: time.Duration(i+1) * time.Millisecond, MTU: 1452, Lost: 2, BytesIn: bytes}},
			Process:     &ProcessSample{CPU: float64(50 * (i + 1))},
			Threads:     []ThreadSample{{TID: 5, Name: "felix-io-0", CPU: float64(50 * (i + 1))}},
			Commit:      CommitSample{Syncs: 10, SyncsRate: 10, SyncP99: time.Duration(i+1) * time.Millisecond},
			Fanout:      FanoutSample{Subscriptions: 2 - i, MaxDepth: 10 * (i + 1), MaxDepthCapacity: 64, Drops: 3},
			System:      &SystemSample{CPUs: 2, SoftIRQ: float64(i), IOWait: 4},
			waiters:     histogram(2, 2).Snapshot(),
		})
	}
	m.finish(t0.Add(2 * time.Second))
	require.Equal(t, 2, m.Samples)
	require.Equal(t, 2*time.Second, m.Duration)
	c := m.Connections[0]
	require.Equal(t, uint64(4), c.Lost)
	require.Equal(t, uint64(4000), c.BytesIn)
	require.Equal(t, 2000.0, c.BytesInRate)
	require.Equal(t, 1500*time.Microsecond, c.RTTMean)
	require.Equal(t, 2*time.Millisecond, c.RTTMax)
	require.Equal(t, MeanMax{Mean: 75, Max: 100}, stripAcc(m.Process.CPU))
	require.Equal(t, []ThreadSummary{{TID: 5, Name: "felix-io-0", CPUTime: 1500 * time.Millisecond, CPUMean: 75, CPUMax: 100}}, m.Threads)
	require.Equal(t, uint64(20), m.Commit.Syncs)
	require.Equal(t, 2.0, m.Commit.WaitersPerSync)
	require.Equal(t, 2*time.Millisecond, m.Commit.SyncP99Max)
	require.Equal(t, FanoutSummary{MaxSubscriptions: 2, MaxDepth: 20, MaxDepthCapacity: 64, Drops: 6}, stripFanout(m.Fanout))
	require.Equal(t, MeanMax{Mean: 0.5, Max: 1}, stripAcc(m.System.SoftIRQ))
	require.Equal(t, MeanMax{Mean: 4, Max: 4}, stripAcc(m.System.IOWait))
}

func stripAcc(m MeanMax) MeanMax { return MeanMax{Mean: m.Mean, Max: m.Max} }

func stripFanout(f FanoutSummary) FanoutSummary {
	f.DeliveredRate = stripAcc(f.DeliveredRate)
	return f
}
