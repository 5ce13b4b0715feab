package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
)

func TestClusterColumns(t *testing.T) {
	prev := &broker.Stats{Time: t0, Cluster: broker.ClusterStats{NodeID: "b1", PlacementVersion: 4, ShardsOwned: 4,
		ForwardedPublishes: 10, ForwardedEvents: 640, ForwardedBytes: 1 << 20, ForwardErrors: 1}}
	cur := &broker.Stats{Time: t0.Add(2 * time.Second), Cluster: broker.ClusterStats{NodeID: "b1", PlacementVersion: 5, ShardsOwned: 3,
		ForwardedPublishes: 30, ForwardedEvents: 1920, ForwardedBytes: 3 << 20, ForwardErrors: 3}}
	s := compute(prev, cur)
	require.Equal(t, ClusterSample{NodeID: "b1", PlacementVersion: 5, ShardsOwned: 3, Forwarded: 20, ForwardedEvents: 1280,
		ForwardedBytes: 2 << 20, ForwardedRate: float64(1 << 20), ForwardErrors: 2}, s.Cluster)
	var out bytes.Buffer
	printSample(&out, &s, 5)
	require.Contains(t, out.String(), "CLUSTER   node b1  placement v5  shards owned 3  forwarded 20 (1.28k events, 1.05 MB/s)  errors 2")

	var m Summary
	m.Cluster.add(&ClusterSample{NodeID: "b1", PlacementVersion: 4})
	m.Cluster.add(&s.Cluster)
	require.Equal(t, 1, m.Cluster.PlacementChanges)
	out.Reset()
	printClusterSummary(&out, &m.Cluster)
	require.Contains(t, out.String(), "placement v5 (1 changes)  shards owned 3  forwarded 20, 2.10 MB")

	// Single-broker mode prints no cluster line.
	out.Reset()
	single := compute(&broker.Stats{Time: t0}, &broker.Stats{Time: t0.Add(time.Second)})
	printSample(&out, &single, 5)
	require.NotContains(t, out.String(), "CLUSTER")
}
