package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/cluster"
)

var six = broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "six"}, Shards: 6}

func dialCluster(t testing.TB, nodes []*clusterNode, bootstrap int) *client.ClusterClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := client.DialCluster(ctx, client.ClusterConfig{
		Config:    client.Config{Tenant: "t1", Token: "dev", TLS: nodes[0].h.clientTLS},
		Bootstrap: []string{nodes[bootstrap].h.addr},
		// Generous for -race on a loaded machine; a closed broker's port
		// answers ICMP unreachable at once anyway.
		DialTimeout: 10 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// subscribeAll subscribes to every shard of six on its owner per p.
func subscribeAll(ctx context.Context, t *testing.T, nodes []*clusterNode, p *cluster.Placement) []*client.Subscription {
	var subs []*client.Subscription
	byID := map[string]*clusterNode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	for i := range six.Shards {
		m, ok := p.Owner(cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "six", Shard: i})
		require.True(t, ok)
		sub, err := byID[m.ID].h.dial(t).Subscribe(ctx, "default", "six", client.SubscribeOptions{Shard: uint32(i)})
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	return subs
}

func forwarded(nodes []*clusterNode) uint64 {
	var n uint64
	for _, node := range nodes {
		n += node.b.ClusterStats().ForwardedPublishes
	}
	return n
}

// TestClusterClientLearnsOwnersFromAcks: docs/design.md, "Data paths", Cluster:
// the first publish per shard goes to the bootstrap broker, which forwards
// it and names the owner; every later one goes straight to the owner, so
// forwarding stops after one publish per non-owned shard.
func TestClusterClientLearnsOwnersFromAcks(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2", "b3"}, []broker.StreamSpec{six}, false)
	p := assign(1, members(nodes), six.StreamKey, false, "b1", "b1", "b2", "b2", "b3", "b3")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 30*time.Second)
	subs := subscribeAll(ctx, t, nodes, p)
	cc := dialCluster(t, nodes, 0)
	for round := range 3 {
		for i := range six.Shards {
			require.NoError(t, cc.Publish(ctx, "default", "six", uint32(i), [][]byte{fmt.Appendf(nil, "%d/%d", round, i)}))
		}
		require.Equal(t, uint64(4), forwarded(nodes), "round %d: only the first publish to each of the 4 non-owned shards is forwarded", round)
	}
	for i, sub := range subs {
		for round := range 3 {
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("%d/%d", round, i), string(ev.Payload), "shard %d: every acked publish once, in order", i)
		}
	}
	// Subscribes are routed to the owner too (learned, or not_owner taught).
	sub, err := cc.Subscribe(ctx, "default", "six", client.SubscribeOptions{Shard: 5})
	require.NoError(t, err)
	require.NoError(t, cc.Publish(ctx, "default", "six", 5, [][]byte{[]byte("via cc")}))
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "via cc", string(ev.Payload))
}

// TestClusterClientReroutes: with the placement the ClusterClient never
// needs forwarding; when an owner goes away, publishes to its shards fail
// (owner_unavailable, never acked) until the placement moves them, then
// resume at the new owner.
func TestClusterClientReroutes(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2", "b3"}, []broker.StreamSpec{six}, false)
	ms := members(nodes)
	p := assign(1, ms, six.StreamKey, false, "b1", "b1", "b2", "b2", "b3", "b3")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 30*time.Second)
	cc := dialCluster(t, nodes, 0)
	cc.SetPlacement(p)
	for i := range six.Shards {
		require.NoError(t, cc.Publish(ctx, "default", "six", uint32(i), [][]byte{[]byte("a")}))
	}
	require.Zero(t, forwarded(nodes))

	// b2 stops: its shards fail until the placement moves them.
	require.NoError(t, nodes[1].b.Close())
	err := cc.Publish(ctx, "default", "six", 2, [][]byte{[]byte("lost?")})
	require.Error(t, err, "no ack from a closed owner")

	ms[1].Live = false
	p2 := assign(2, ms, six.StreamKey, false, "b1", "b1", "b1", "b3", "b3", "b3")
	for _, n := range []*clusterNode{nodes[0], nodes[2]} {
		n.b.SetPlacement(p2)
	}
	cc.SetPlacement(p2)
	require.Equal(t, nodes[0].h.addr, cc.Owner(cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "six", Shard: 2}))
	for i := range six.Shards {
		require.NoError(t, cc.Publish(ctx, "default", "six", uint32(i), [][]byte{[]byte("b")}), "shard %d", i)
	}
	require.Zero(t, forwarded(nodes))
}
