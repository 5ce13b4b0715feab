package broker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/cluster"
)

// ShardLoads reports, per owned shard that accepted publishes, the payload
// bytes per second since the previous call: a forwarded publish counts at
// its owner only, and a second call with no publishes in between reports
// nothing.
func TestShardLoads(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2"}, []broker.StreamSpec{quad}, false)
	p := assign(7, members(nodes), quad.StreamKey, false, "b1", "b1", "b2", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 20*time.Second)
	// The brokers' interval lies between outer's bounds and holds
	// inner's: the rate is between the bytes over each.
	outerStart := time.Now()
	for _, n := range nodes {
		n.b.ShardLoads() // start the measurement now
	}
	start := time.Now()
	pub, err := nodes[0].h.dial(t).NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	payload := make([]byte, 1000)
	for range 10 {
		require.NoError(t, pub.PublishShardAsync(0, [][]byte{payload}).Wait(ctx))
		require.NoError(t, pub.PublishShardAsync(3, [][]byte{payload, payload}).Wait(ctx)) // forwarded to b2
	}
	elapsed := time.Since(start).Seconds()
	shard := func(i int) cluster.Shard {
		return cluster.Shard{Tenant: quad.Tenant, Namespace: quad.Namespace, Stream: quad.Stream, Shard: i}
	}
	l1, l2 := nodes[0].b.ShardLoads(), nodes[1].b.ShardLoads()
	outer := time.Since(outerStart).Seconds()
	require.Len(t, l1, 1)
	require.Equal(t, shard(0), l1[0].Shard)
	require.GreaterOrEqual(t, float64(l1[0].BytesPerSec), 10_000/outer)
	require.LessOrEqual(t, float64(l1[0].BytesPerSec), 10_000/elapsed)
	require.Len(t, l2, 1)
	require.Equal(t, shard(3), l2[0].Shard)
	require.GreaterOrEqual(t, float64(l2[0].BytesPerSec), 20_000/outer)
	require.Empty(t, nodes[0].b.ShardLoads(), "nothing published since the last call")
}
