package broker_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client"
	"github.com/felixmq/felix/client/forward"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/internal/devtls"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// clusterNode is one broker of an in-process cluster: real QUIC on
// 127.0.0.1, a shared certificate (the cluster's CA) and a forwarder.
type clusterNode struct {
	id      string
	b       *broker.Broker
	h       *harness
	dataDir string // "" without one
}

// startCluster starts one broker per id, all serving streams, and gives
// each the placement place(members) builds.
func startCluster(t testing.TB, ids []string, streams []broker.StreamSpec, dataDir bool) ([]*clusterNode, *tls.Config) {
	t.Helper()
	return startClusterCfg(t, ids, streams, dataDir, broker.Config{})
}

// startClusterCfg is startCluster with base as every broker's Config.
func startClusterCfg(t testing.TB, ids []string, streams []broker.StreamSpec, dataDir bool, base broker.Config) ([]*clusterNode, *tls.Config) {
	t.Helper()
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	clientTLS := &tls.Config{RootCAs: pool}
	var nodes []*clusterNode
	for _, id := range ids {
		fw := forward.New(forward.Config{TLS: clientTLS, Token: "node-secret"})
		cfg := base
		cfg.NodeID, cfg.Forwarder, cfg.NodeToken = id, fw, "node-secret"
		if dataDir {
			cfg.DataDir = t.TempDir()
		}
		h := serve(t, cfg, brokertest.Options{Streams: streams, Cert: cert})
		t.Cleanup(func() { fw.Close() }) // before the broker closes
		nodes = append(nodes, &clusterNode{id: id, b: h.b, h: h, dataDir: cfg.DataDir})
	}
	return nodes, clientTLS
}

func members(nodes []*clusterNode) []cluster.Member {
	var ms []cluster.Member
	for _, n := range nodes {
		ms = append(ms, cluster.Member{ID: n.id, QUICAddr: n.h.addr, Live: true})
	}
	return ms
}

// assign places shard i of each stream on owners[i].
func assign(version int64, ms []cluster.Member, k broker.StreamKey, durable bool, owners ...string) *cluster.Placement {
	p := &cluster.Placement{Version: version, Members: ms}
	for i, o := range owners {
		p.Assignments = append(p.Assignments, cluster.Assignment{
			Shard: cluster.Shard{Tenant: k.Tenant, Namespace: k.Namespace, Stream: k.Stream, Shard: i}, Owner: o, Durable: durable,
		})
	}
	return p
}

var quad = broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "quad"}, Shards: 4}

// TestClusterForwardsOnceAndNamesOwner: docs/design.md, "Data paths", Cluster: a
// publish to a non-owner is forwarded once, acked by the owner, and the ack
// names the owner, in the binary and JSON encodings; the event reaches the
// owner's subscribers.
func TestClusterForwardsOnceAndNamesOwner(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1", "b2"}, []broker.StreamSpec{quad}, false)
	p := assign(7, members(nodes), quad.StreamKey, false, "b1", "b1", "b2", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 20*time.Second)
	c2 := nodes[1].h.dial(t)
	sub, err := c2.Subscribe(ctx, "default", "quad", client.SubscribeOptions{Shard: 3})
	require.NoError(t, err)

	for _, enc := range []struct {
		name  string
		flags wire.Flags
	}{{"binary", 0}, {"json", wire.KnownCapabilities &^ (wire.FlagBinaryPublishBatch | wire.FlagBinaryPublishAcked | wire.FlagBinaryPublishAck)}} {
		t.Run(enc.name, func(t *testing.T) {
			c1 := nodes[0].h.dialWith(t, client.Config{Flags: enc.flags})
			pub, err := c1.NewPublisher(ctx, "default", "quad")
			require.NoError(t, err)
			before := nodes[0].b.ClusterStats().ForwardedPublishes
			pa := pub.PublishShardAsync(3, [][]byte{[]byte(enc.name)})
			require.NoError(t, pa.Wait(ctx))
			own, ok := pa.Owner()
			require.True(t, ok)
			require.Equal(t, wire.Owner{ID: "b2", Addr: nodes[1].h.addr, Generation: 7}, own)
			res := pa.Result()
			require.True(t, res.HasShard && res.HasOffset)
			require.Equal(t, uint32(3), res.Shard)
			require.Equal(t, before+1, nodes[0].b.ClusterStats().ForwardedPublishes)
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, enc.name, string(ev.Payload))

			// Fire-and-forget is forwarded too, in order after the acked one.
			require.NoError(t, pub.SendShard(3, [][]byte{[]byte(enc.name + "-ff")}))
			ev, err = sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, enc.name+"-ff", string(ev.Payload))

			// A shard it owns is served locally and named too.
			pa = pub.PublishShardAsync(0, [][]byte{[]byte("local")})
			require.NoError(t, pa.Wait(ctx))
			own, _ = pa.Owner()
			require.Equal(t, "b1", own.ID)
			require.Equal(t, before+2, nodes[0].b.ClusterStats().ForwardedPublishes)
			require.NoError(t, pub.Close(ctx))
		})
	}
	st := nodes[1].b.ClusterStats()
	require.Equal(t, int64(7), st.PlacementVersion)
	require.Equal(t, 2, st.ShardsOwned)
	require.Zero(t, st.ForwardedPublishes)
}

// TestClusterRefusals: subscribes for a non-owned shard get not_owner with
// the owner; a forwarded publish for a non-owned shard is never forwarded
// again; a shard whose owner is not live fails owner_unavailable.
func TestClusterRefusals(t *testing.T) {
	durableQuad := quad
	durableQuad.Durable = true
	nodes, _ := startCluster(t, []string{"b1", "b2"}, []broker.StreamSpec{durableQuad}, true)
	ms := append(members(nodes), cluster.Member{ID: "b3", QUICAddr: "127.0.0.1:1", Live: false})
	p := assign(3, ms, quad.StreamKey, true, "b1", "b2", "b3", "b3")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 20*time.Second)
	c1 := nodes[0].h.dial(t)

	_, err := c1.Subscribe(ctx, "default", "quad", client.SubscribeOptions{Shard: 1})
	require.ErrorIs(t, err, client.ErrNotOwner)
	var be *client.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, &wire.Owner{ID: "b2", Addr: nodes[1].h.addr, Generation: 3}, be.Owner)

	pub, err := c1.NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	err = pub.PublishShardAsync(2, [][]byte{[]byte("x")}).Wait(ctx)
	require.ErrorIs(t, err, client.ErrOwnerUnavailable, "durable shard of a member that is not live")
	require.Contains(t, err.Error(), "b3")

	// A live owner that cannot be reached: owner_unavailable, not acked.
	ms[2] = cluster.Member{ID: "b3", QUICAddr: "127.0.0.1:1", Live: true}
	nodes[0].b.SetPlacement(assign(4, ms, quad.StreamKey, true, "b1", "b2", "b3", "b3"))
	err = pub.PublishShardAsync(3, [][]byte{[]byte("x")}).Wait(ctx)
	require.ErrorIs(t, err, client.ErrOwnerUnavailable, "unreachable owner")
	require.ErrorContains(t, err, "unreachable")

	fwd := nodes[0].h.dialWith(t, client.Config{Tenant: "t1", Token: "node-secret", Flags: wire.KnownCapabilities | wire.CapForwarded})
	fpub, err := fwd.NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	err = fpub.PublishShardAsync(1, [][]byte{[]byte("x")}).Wait(ctx)
	require.ErrorIs(t, err, client.ErrNotOwner, "a forwarded publish is not forwarded again")
	require.Zero(t, nodes[1].b.ClusterStats().ForwardedPublishes)
	require.Equal(t, uint64(3), nodes[0].b.ClusterStats().ForwardErrors)

	// The cluster counters are exported.
	srv := httptest.NewServer(nodes[0].b.AdminHandler())
	defer srv.Close()
	_, body := do(t, srv, "GET", "/metrics", "")
	for _, m := range []string{"felix_forward_errors_total 3", "felix_placement_version 4", "felix_shards_owned 1", "felix_forwarded_publishes_total 0"} {
		require.True(t, strings.Contains(body, m), "metrics lack %q", m)
	}
}

// TestClusterSingleBrokerUnchanged: without a placement acks name no owner
// (v1 bytes) and shard-addressed publishes still work.
func TestClusterSingleBrokerUnchanged(t *testing.T) {
	h := startBroker(t, broker.Config{}, quad)
	ctx := ctxT(t, 10*time.Second)
	pub, err := h.dial(t).NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	pa := pub.PublishShardAsync(2, [][]byte{[]byte("x")})
	require.NoError(t, pa.Wait(ctx))
	_, named := pa.Owner()
	require.False(t, named)
	err = pub.PublishShardAsync(9, [][]byte{[]byte("x")}).Wait(ctx)
	require.ErrorContains(t, err, "shard 9 not in [0, 4)")
	require.Equal(t, 4, h.b.ClusterStats().ShardsOwned)
}

// userOnly accepts the token "user" only: the node credential is not a
// user token, so only Config.NodeToken can let a forwarding broker in.
type userOnly struct{}

func (userOnly) Verify(ctx context.Context, tenant, token string) (broker.Principal, error) {
	if token != "user" {
		return nil, fmt.Errorf("%w: unknown token", broker.ErrAuth)
	}
	return broker.DevVerifier{}.Verify(ctx, tenant, token)
}

// TestClusterNodeCredential: forwarding authenticates with the cluster's
// node credential, which may only publish, and only on a stream that
// declares itself forwarded.
func TestClusterNodeCredential(t *testing.T) {
	nodes, _ := startClusterCfg(t, []string{"b1", "b2"}, []broker.StreamSpec{quad}, false, broker.Config{Verifier: userOnly{}})
	p := assign(1, members(nodes), quad.StreamKey, false, "b1", "b1", "b2", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 20*time.Second)
	pub, err := nodes[0].h.dialWith(t, client.Config{Tenant: "t1", Token: "user"}).NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	require.NoError(t, pub.PublishShardAsync(3, [][]byte{[]byte("x")}).Wait(ctx), "forwarded with the node credential")
	require.Equal(t, uint64(1), nodes[0].b.ClusterStats().ForwardedPublishes)

	node := nodes[1].h.dialWith(t, client.Config{Tenant: "t1", Token: "node-secret", Flags: wire.KnownCapabilities | wire.CapForwarded})
	_, err = node.Subscribe(ctx, "default", "quad", client.SubscribeOptions{Shard: 3})
	require.ErrorContains(t, err, "only forwards publishes")

	_, err = client.Dial(ctx, nodes[1].h.addr, client.Config{Tenant: "t1", Token: "node-secret", TLS: nodes[1].h.clientTLS})
	require.ErrorIs(t, err, client.ErrAuth, "the node credential is not a client token")
}

// TestForwardedStreamNeedsNodeCredential: a stream that declares itself
// forwarded is a forwarding broker's. Without a node credential it is
// refused, even with a token the verifier accepts for the claimed tenant
// (the dev verifier takes any), so no client gets a publish-anywhere node
// principal; with one it lives until the credential expires.
func TestForwardedStreamNeedsNodeCredential(t *testing.T) {
	expiry := time.Now().Add(time.Second)
	cfg := broker.Config{NodeID: "b1", NodeVerifier: func(_ context.Context, token string) (broker.NodeCredential, error) {
		if token != "node" {
			return broker.NodeCredential{}, fmt.Errorf("not a node credential")
		}
		return broker.NodeCredential{Subject: "b2", Expiry: expiry}, nil
	}}
	h := startBroker(t, cfg, quad)
	h.b.SetPlacement(assign(1, []cluster.Member{{ID: "b1", QUICAddr: h.addr, Live: true}}, quad.StreamKey, false, "b1", "b1", "b1", "b1"))
	ctx := ctxT(t, 20*time.Second)
	fwd := client.Config{Tenant: "t1", Token: "admin-of-t2", Flags: wire.KnownCapabilities | wire.CapForwarded, TLS: h.clientTLS}
	_, err := client.Dial(ctx, h.addr, fwd)
	require.ErrorIs(t, err, client.ErrAuth)
	require.ErrorContains(t, err, "forwarded stream needs a node credential")

	fwd.Token = "node"
	pub, err := h.dialWith(t, fwd).NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	require.NoError(t, pub.PublishShardAsync(1, [][]byte{[]byte("x")}).Wait(ctx))
	require.Eventually(t, func() bool { return pub.Err() != nil }, 10*time.Second, 5*time.Millisecond,
		"the stream ends when the node credential expires")
	require.ErrorContains(t, pub.Err(), "token expired")
	require.False(t, time.Now().Before(expiry))
}

// TestClusterRefusesShardsNotPlacedYet: a cluster broker does not act as the
// owner of a shard the placement does not list (none applied yet, or a
// stream created after it): publishes and subscribes wait PlacementWait for
// a placement that lists it, then get owner_unavailable, so no record lands
// on a broker the placer may not choose. A placement that lists the shard
// while a publish waits serves it.
func TestClusterRefusesShardsNotPlacedYet(t *testing.T) {
	nodes, _ := startClusterCfg(t, []string{"b1"}, []broker.StreamSpec{quad}, false, broker.Config{PlacementWait: 200 * time.Millisecond})
	ctx := ctxT(t, 20*time.Second)
	c := nodes[0].h.dial(t)
	pub, err := c.NewPublisher(ctx, "default", "quad")
	require.NoError(t, err)
	refused := func(shard uint32, want string) {
		t.Helper()
		err := pub.PublishShardAsync(shard, [][]byte{[]byte("x")}).Wait(ctx)
		require.ErrorContains(t, err, "owner_unavailable")
		require.ErrorContains(t, err, want)
		_, err = c.Subscribe(ctx, "default", "quad", client.SubscribeOptions{Shard: shard})
		require.ErrorContains(t, err, want)
	}
	refused(0, "this broker has no placement yet")

	// Version 3 places only shards 0 and 1.
	nodes[0].b.SetPlacement(assign(3, members(nodes), quad.StreamKey, false, "b1", "b1"))
	require.NoError(t, pub.PublishShardAsync(1, [][]byte{[]byte("placed")}).Wait(ctx))
	refused(2, "not in placement version 3 yet")

	waiting := pub.PublishShardAsync(2, [][]byte{[]byte("waited")})
	time.Sleep(50 * time.Millisecond)
	nodes[0].b.SetPlacement(assign(4, members(nodes), quad.StreamKey, false, "b1", "b1", "b1"))
	require.NoError(t, waiting.Wait(ctx), "a publish waiting for the placement is served once it lists the shard")
}

// TestClusterOpensDurableShardsPlacedBeforeTheirStream: a stream's spec
// and the placement listing it reach a broker by two watches, in either
// order. Placed first, the durable shards the broker owns open when the
// stream registers, not at their first request.
func TestClusterOpensDurableShardsPlacedBeforeTheirStream(t *testing.T) {
	jobs := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"},
		Shards: 2, Durable: true, Fsync: "on_commit"}
	nodes, _ := startClusterCfg(t, []string{"b1", "b2"}, nil, true, broker.Config{})
	p := assign(5, members(nodes), jobs.StreamKey, true, "b1", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
		require.NoError(t, n.b.CreateStream(jobs))
	}
	for i, n := range nodes {
		var opened []int
		for _, st := range n.b.Stats().Streams {
			for _, sh := range st.Shards {
				if st.StreamKey == jobs.StreamKey && sh.Commit != nil {
					opened = append(opened, sh.Shard)
				}
			}
		}
		require.Equal(t, []int{i}, opened, "%s opened the log of the shard it owns, and only that one", n.id)
	}
}

// TestClusterGroupMembersServeTheirOwnersShards: in cluster mode a consumer
// group's records are in each shard owner's log, so a member takes only the
// shards its broker owns; acking a shard of another broker is refused
// not_owner, and a broker owning none of the stream refuses the member.
func TestClusterGroupMembersServeTheirOwnersShards(t *testing.T) {
	jobs := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "jobs"},
		Shards: 2, Durable: true, Fsync: "on_commit"}
	nodes, _ := startClusterCfg(t, []string{"b1", "b2", "b3"}, []broker.StreamSpec{jobs}, true, broker.Config{PlacementWait: -1})
	p := assign(5, members(nodes), jobs.StreamKey, true, "b1", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	ctx := ctxT(t, 20*time.Second)
	pub, err := nodes[0].h.dial(t).NewPublisher(ctx, "default", "jobs")
	require.NoError(t, err)
	for shard := range uint32(2) {
		require.NoError(t, pub.PublishShardAsync(shard, [][]byte{[]byte(fmt.Sprintf("job-%d", shard))}).Wait(ctx))
	}
	for i, n := range nodes[:2] {
		q, err := n.h.dial(t).Consume(ctx, "default", "jobs", "workers", client.QueueOptions{})
		require.NoError(t, err)
		m, err := q.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint32(i), m.Shard, "%s serves only its own shard", n.id)
		require.Equal(t, fmt.Sprintf("job-%d", i), string(m.Payload))
		other := client.QueueRef{Shard: uint32(1 - i), Offset: 0}
		require.ErrorContains(t, q.Ack(ctx, other), "not_owner")
		require.NoError(t, q.Ack(ctx, m.Ref()))
	}
	_, err = nodes[2].h.dial(t).Consume(ctx, "default", "jobs", "workers", client.QueueOptions{})
	require.ErrorContains(t, err, "no shard of t1/default/jobs is served by this broker")

	// A member never joins part of a stream whose other shards are not
	// placed yet (it would never take them): it is refused until they are.
	nodes[0].b.SetPlacement(assign(6, members(nodes), jobs.StreamKey, true, "b1"))
	_, err = nodes[0].h.dial(t).Consume(ctx, "default", "jobs", "workers", client.QueueOptions{})
	require.ErrorContains(t, err, "owner_unavailable: shard t1/default/jobs#1 is not in placement version 6 yet")
}

// TestClusterOpensOnlyOwnedDurableLogs: a cluster broker keeps no log for
// durable shards other brokers own (each would preallocate a whole segment,
// 256 MiB by default, for records that live elsewhere): none before its
// first placement, then only its own; the other shard's records are
// forwarded to and served by their owner.
func TestClusterOpensOnlyOwnedDurableLogs(t *testing.T) {
	logs := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "logs"},
		Shards: 2, Durable: true, Fsync: "on_commit"}
	nodes, _ := startCluster(t, []string{"b1", "b2"}, []broker.StreamSpec{logs}, true)
	shardDir := func(n *clusterNode, shard int) string {
		return filepath.Join(n.dataDir, segment.ShardDirName("t1", "default", "logs", uint32(shard)))
	}
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }
	for _, n := range nodes {
		for shard := range 2 {
			require.False(t, exists(shardDir(n, shard)), "%s opened shard %d before any placement", n.id, shard)
		}
	}
	p := assign(2, members(nodes), logs.StreamKey, true, "b1", "b2")
	for _, n := range nodes {
		n.b.SetPlacement(p)
	}
	for i, n := range nodes {
		require.True(t, exists(shardDir(n, i)), "%s did not open its own shard %d", n.id, i)
		require.False(t, exists(shardDir(n, 1-i)), "%s opened shard %d of the other broker", n.id, 1-i)
	}
	ctx := ctxT(t, 20*time.Second)
	sub, err := nodes[1].h.dial(t).Subscribe(ctx, "default", "logs", client.SubscribeOptions{Shard: 1})
	require.NoError(t, err)
	pub, err := nodes[0].h.dial(t).NewPublisher(ctx, "default", "logs")
	require.NoError(t, err)
	require.NoError(t, pub.PublishShardAsync(1, [][]byte{[]byte("kept by b2")}).Wait(ctx))
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "kept by b2", string(ev.Payload))
	require.False(t, exists(shardDir(nodes[0], 1)))
}

// A cluster broker's admin API does not create streams: one only this
// broker knew would never be placed, so every broker would refuse it.
func TestClusterAdminRefusesLocalStreams(t *testing.T) {
	nodes, _ := startCluster(t, []string{"b1"}, nil, false)
	srv := httptest.NewServer(nodes[0].b.AdminHandler())
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/v1/streams", "application/json",
		strings.NewReader(`{"tenant":"t1","namespace":"default","stream":"local"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, string(body), "cluster mode: create streams at the control plane")
}

// TestClusterEphemeralShardMoveStartsANewEpoch: an ephemeral shard keeps no
// records across owners, so each broker that takes it starts its offsets at
// the placement version's epoch (version << 32), above every offset the
// previous owner gave. A subscriber resuming with an old owner's offset is
// told too_old with the new first offset, never in_future and never served
// records that reuse offsets it has seen; a shard that moves back starts a
// newer epoch and drops its stale ring.
func TestClusterEphemeralShardMoveStartsANewEpoch(t *testing.T) {
	solo := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "solo"}, Shards: 1}
	nodes, _ := startCluster(t, []string{"b1", "b2"}, []broker.StreamSpec{solo}, false)
	ms := members(nodes)
	place := func(version int64, owner string) {
		for _, n := range nodes {
			n.b.SetPlacement(assign(version, ms, solo.StreamKey, false, owner))
		}
	}
	ctx := ctxT(t, 20*time.Second)
	publish := func(n *clusterNode, payload string) {
		t.Helper()
		pub, err := n.h.dial(t).NewPublisher(ctx, "default", "solo")
		require.NoError(t, err)
		require.NoError(t, pub.PublishShardAsync(0, [][]byte{[]byte(payload)}).Wait(ctx))
	}
	replay := func(n *clusterNode, from client.From) ([]client.Event, error) {
		t.Helper()
		sub, err := n.h.dial(t).Subscribe(ctx, "default", "solo", client.SubscribeOptions{From: from})
		if err != nil {
			return nil, err
		}
		defer sub.Close()
		var evs []client.Event
		for len(evs) < 2 {
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			evs = append(evs, ev)
		}
		return evs, nil
	}

	place(5, "b1")
	publish(nodes[0], "a0")
	publish(nodes[0], "a1")
	old, err := replay(nodes[0], client.Earliest())
	require.NoError(t, err)
	require.Equal(t, []uint64{5 << 32, 5<<32 + 1}, []uint64{old[0].Offset, old[1].Offset})

	place(6, "b2")
	publish(nodes[1], "b0")
	publish(nodes[1], "b1")
	_, err = replay(nodes[1], client.Offset(old[1].Offset+1))
	var ce *client.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, client.CursorError{Reason: "too_old", Requested: 5<<32 + 2, Available: 6 << 32}, *ce)
	evs, err := replay(nodes[1], client.Earliest())
	require.NoError(t, err)
	require.Equal(t, "b0", string(evs[0].Payload))
	require.Equal(t, uint64(6<<32), evs[0].Offset)

	// Back to b1: a newer epoch, and a0/a1 are not served as its history.
	place(7, "b1")
	publish(nodes[0], "c0")
	publish(nodes[0], "c1")
	evs, err = replay(nodes[0], client.Earliest())
	require.NoError(t, err)
	require.Equal(t, []string{"c0", "c1"}, []string{string(evs[0].Payload), string(evs[1].Payload)})
	require.Equal(t, uint64(7<<32), evs[0].Offset)

	// A placement that keeps the owner does not restart its offsets.
	place(8, "b1")
	publish(nodes[0], "c2")
	_, err = replay(nodes[0], client.Offset(7<<32+4))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "in_future", ce.Reason)
	require.Equal(t, uint64(7<<32+3), ce.Available)
}
