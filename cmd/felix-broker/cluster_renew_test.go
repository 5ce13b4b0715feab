package main

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/controlplane/api"
)

// TestClusterNodeCredentialRenews: node credentials that live 3 s, two
// broker processes running for more than three of those lifetimes. Both
// stay live members (their keepalives carry renewed credentials), still
// follow the placement, and a publish through b1 to a shard b2 owns is
// forwarded on a connection dialled only now, so with a credential b2
// accepts now. Before renewal, a broker dropped out of the cluster one
// token lifetime after it started (FELIX_TOKEN_TTL_S, 15 min by default).
func TestClusterNodeCredentialRenews(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a control plane and two broker processes")
	}
	const ttl = 3 * time.Second
	cp := startClusterControlPlaneTTL(t, ttl)
	certFile, keyFile, pool := writeCert(t, t.TempDir())
	brokers := map[string]*clusterBroker{}
	for _, id := range []string{"b1", "b2"} {
		brokers[id] = newClusterBroker(t, id, cp, certFile, keyFile)
		brokers[id].start(t)
	}
	cp.createStream(t, "renew", 2, false)

	time.Sleep(3*ttl + ttl/2) // every credential minted so far has expired
	w, err := api.NewWatcher(api.WatcherConfig{URL: cp.url, Token: cp.bootstrap, Wait: time.Second})
	require.NoError(t, err)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x, err := w.Next(ctx, 0)
	require.NoError(t, err)
	for id, cb := range brokers {
		require.True(t, liveMember(&x.Placement, id), "%s is not live after its first credential expired; log:\n%s", id, cb.logTail())
		require.Equal(t, x.Version, cb.stats(t).PlacementVersion, "%s does not follow the placement", id)
	}
	shard := -1
	for _, a := range x.Assignments {
		if a.Stream == "renew" && a.Owner == "b2" {
			shard = a.Shard.Shard
		}
	}
	require.NotEqual(t, -1, shard, "no shard of renew on b2: %+v", x.Assignments)

	c, err := client.Dial(ctx, brokers["b1"].addr, client.Config{Tenant: "t1", Token: cp.writerToken(t), TLS: &tls.Config{RootCAs: pool}})
	require.NoError(t, err)
	defer c.Close()
	pub, err := c.NewPublisher(ctx, "default", "renew")
	require.NoError(t, err)
	pa := pub.PublishShardAsync(uint32(shard), [][]byte{[]byte("after expiry")})
	require.NoError(t, pa.Wait(ctx), "forwarded publish to b2; b1 log:\n%s", brokers["b1"].logTail())
	owner, named := pa.Owner()
	require.True(t, named)
	require.Equal(t, "b2", owner.ID)
	require.Equal(t, uint64(1), brokers["b1"].stats(t).ForwardedPublishes)
}
