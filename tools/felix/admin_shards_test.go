package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/broker"
	"github.com/felixmq/felix/broker/brokertest"
	"github.com/felixmq/felix/client/forward"
	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/controlplane/api"
	"github.com/felixmq/felix/internal/devtls"
)

// felix admin stream shards: the placement's replica set of each shard of
// an RF=3 stream held by three real brokers, and the leader raft elected,
// read from the brokers' stats; when the leader's broker stops, its member
// shows why it could not be read and the leader moves to another replica.
func TestAdminStreamShardsShowsTheLeader(t *testing.T) {
	cp, admin := startAdminCP(t)
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	spec := broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "ns", Stream: "r"},
		Shards: 2, Durable: true, Fsync: "on_commit", Replicas: 3}
	ids := []string{"b1", "b2", "b3"}
	brokers := map[string]*brokertest.Broker{}
	for _, id := range ids {
		fw := forward.New(forward.Config{TLS: &tls.Config{RootCAs: pool}, Token: "node-secret"})
		t.Cleanup(func() { fw.Close() })
		cfg := broker.Config{NodeID: id, DataDir: t.TempDir(), NodeToken: "node-secret", Forwarder: fw, RaftTick: 20 * time.Millisecond,
			RaftDialer: func(ctx context.Context, m cluster.Member) (broker.RaftConn, error) { return fw.DialRaft(ctx, m) }}
		h := brokertest.Start(t, cfg, brokertest.Options{Cert: cert, Admin: true, Streams: []broker.StreamSpec{spec}})
		brokers[id] = h
		a, err := api.NewAgent(context.Background(), api.AgentConfig{URL: cp, Token: cpBootstrapToken,
			Member: cluster.Member{ID: id, QUICAddr: h.Addr, AdminAddr: h.Admin}})
		require.NoError(t, err)
		t.Cleanup(func() { a.Close() })
	}
	code, _, stderr := admin("stream", "create", "r", "--tenant", "t1", "--namespace", "ns", "--durable", "--fsync", "on_commit",
		"--shards", "2", "--replicas", "3")
	require.Equal(t, exitOK, code, stderr)
	cpc, err := api.NewClient(api.ClientConfig{URL: cp, Token: func() string { return cpBootstrapToken }})
	require.NoError(t, err)
	var p cluster.Placement
	require.Eventually(t, func() bool { // the control plane places the new stream
		p = cluster.Placement{}
		return cpc.Do(context.Background(), http.MethodGet, "/v1/placement", nil, &p) == nil && len(p.Assignments) == 2
	}, 10*time.Second, 10*time.Millisecond)
	for _, h := range brokers {
		h.SetPlacement(&p)
	}

	// shards runs the command; a zero view when it fails.
	shards := func() shardsView {
		var v shardsView
		if code, out, _ := admin("stream", "shards", "r", "--tenant", "t1", "--namespace", "ns"); code == exitOK {
			json.Unmarshal([]byte(out), &v)
		}
		return v
	}
	// settled: every replica of the shard reports the leader.
	settled := func(s shardView) bool {
		for _, m := range s.Members {
			var rs broker.ReplicaStats
			if json.Unmarshal(m.Replica, &rs) != nil || rs.Leader != s.Leader {
				return false
			}
		}
		return s.Leader != "" && len(s.Members) == 3
	}
	var v shardsView
	if !assert.Eventually(t, func() bool {
		v = shards()
		return len(v.Shards) == 2 && settled(v.Shards[0]) && settled(v.Shards[1])
	}, 10*time.Second, 20*time.Millisecond, "both shards elect a leader that every replica knows") {
		out, _ := json.MarshalIndent(v, "", "  ")
		t.Fatalf("last view: %s", out)
	}
	require.Equal(t, "t1/ns/r", v.Stream)
	require.Equal(t, p.Version, v.PlacementVersion)
	for i, s := range v.Shards {
		require.Equal(t, i, s.Shard)
		require.ElementsMatch(t, ids, s.Replicas)
		require.Equal(t, s.Replicas[0], s.Owner, "the placement's owner is the preferred leader")
		require.Len(t, s.Members, 3)
		for _, m := range s.Members {
			require.Empty(t, m.Error)
			require.Equal(t, brokers[m.ID].Admin, m.AdminAddr)
			var rs broker.ReplicaStats
			require.NoError(t, json.Unmarshal(m.Replica, &rs), "the broker's own replica stats")
			require.Equal(t, m.ID == s.Leader, rs.Role == "leader")
			require.Equal(t, s.Term, rs.Term)
		}
	}

	old := v.Shards[0].Leader
	brokers[old].Close(t)
	require.Eventually(t, func() bool {
		v = shards()
		return len(v.Shards) == 2 && v.Shards[0].Leader != "" && v.Shards[0].Leader != old
	}, 10*time.Second, 20*time.Millisecond, "shard 0 elects another leader")
	for _, m := range v.Shards[0].Members {
		require.Equal(t, m.ID == old, m.Error != "", "%s: %s", m.ID, m.Error)
	}

	code, _, stderr = admin("stream", "shards", "nope", "--tenant", "t1", "--namespace", "ns")
	require.Equal(t, exitFail, code)
	require.Contains(t, stderr, "stream t1/ns/nope has no shard in placement version")
	code, _, _ = admin("stream", "shards", "r", "--tenant", "t1")
	require.Equal(t, exitUsage, code)
}
