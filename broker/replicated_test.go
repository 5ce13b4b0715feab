package broker_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
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
)

var rf3 = broker.StreamSpec{StreamKey: broker.StreamKey{Tenant: "t1", Namespace: "default", Stream: "rf3"},
	Shards: 1, Durable: true, Fsync: "on_commit", Replicas: 3}

// raftCluster is three in-process brokers holding replicas of rf3's shard.
type raftCluster struct {
	t       *testing.T
	cert    *devtls.Cert
	tls     *tls.Config
	ids     []string
	dirs    []string
	nodes   []*harness
	started []bool
	version int64
}

func raftConfig(fw *forward.Forwarder) broker.Config {
	return broker.Config{NodeToken: "node-secret", Forwarder: fw, RaftTick: 20 * time.Millisecond,
		RaftDialer: func(ctx context.Context, m cluster.Member) (broker.RaftConn, error) { return fw.DialRaft(ctx, m) }}
}

func startRaftCluster(t *testing.T) *raftCluster {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	rc := &raftCluster{t: t, cert: cert, tls: &tls.Config{RootCAs: pool}, ids: []string{"b1", "b2", "b3"}}
	for range rc.ids {
		rc.dirs = append(rc.dirs, t.TempDir())
		rc.nodes = append(rc.nodes, nil)
		rc.started = append(rc.started, false)
	}
	for i := range rc.ids {
		rc.start(i)
	}
	rc.place()
	return rc
}

// start (re)starts broker i on its data directory.
func (rc *raftCluster) start(i int) {
	fw := forward.New(forward.Config{TLS: rc.tls, Token: "node-secret"})
	cfg := raftConfig(fw)
	cfg.NodeID, cfg.DataDir = rc.ids[i], rc.dirs[i]
	opts := brokertest.Options{Cert: rc.cert}
	if rc.nodes[i] == nil && !rc.started[i] {
		opts.Streams = []broker.StreamSpec{rf3} // later starts reopen it from the catalog
	}
	rc.started[i] = true
	h := serve(rc.t, cfg, opts)
	rc.t.Cleanup(func() { fw.Close() })
	rc.nodes[i] = h
}

// place gives every live broker the placement: rf3's shard replicated on
// all three, b1 preferred.
func (rc *raftCluster) place() {
	rc.version++
	p := &cluster.Placement{Version: rc.version}
	for i, id := range rc.ids {
		m := cluster.Member{ID: id}
		if rc.nodes[i] != nil {
			m.QUICAddr, m.Live = rc.nodes[i].addr, true
		}
		p.Members = append(p.Members, m)
	}
	p.Assignments = []cluster.Assignment{{Shard: cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "rf3"},
		Owner: "b1", Durable: true, Replicas: rc.ids}}
	for _, h := range rc.nodes {
		if h != nil {
			h.b.SetPlacement(p)
		}
	}
}

// leader waits for a leader and returns its index.
func (rc *raftCluster) leader() int {
	rc.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, h := range rc.nodes {
			if h == nil {
				continue
			}
			for _, st := range h.b.Stats().Streams {
				if st.Stream == "rf3" && st.Shards[0].Replica != nil && st.Shards[0].Replica.Role == "leader" {
					return i
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc.t.Fatal("no leader within 10 s")
	return -1
}

func (rc *raftCluster) stop(i int) {
	rc.nodes[i].bt.Close(rc.t)
	rc.nodes[i] = nil
}

// events reads the events of broker i's replica log (the broker closed).
func (rc *raftCluster) events(i int) []string {
	dir := filepath.Join(rc.dirs[i], segment.ShardDirName("t1", "default", "rf3", 0))
	l, err := segment.Open(dir, segment.Config{FormatVersion: segment.FormatVersionV4, KeepPartialBatches: true})
	require.NoError(rc.t, err)
	defer l.Close()
	r, err := l.NewReader(l.First())
	require.NoError(rc.t, err)
	defer r.Close()
	var out []string
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if rec.Mark.IsEvent() {
			out = append(out, fmt.Sprintf("%d:%s", rec.Offset, rec.Payload))
		}
	}
	return out
}

// TestReplicatedShardCommitsOnEveryReplica: docs/cluster.md,
// "Replication": a publish to any broker reaches the leader (forwarded by
// the others), is acked once a majority holds it, and names the leader;
// the leader's subscribers see it; after the leader stops, another is
// elected and takes publishes; the stopped one catches up when it comes
// back, and the three logs hold the same events at the same offsets.
func TestReplicatedShardCommitsOnEveryReplica(t *testing.T) {
	rc := startRaftCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lead := rc.leader()
	sub, err := rc.nodes[lead].dialWith(t, client.Config{TLS: rc.tls}).Subscribe(ctx, "default", "rf3", client.SubscribeOptions{From: client.Earliest()})
	require.NoError(t, err)

	publish := func(via, n int, tag string) {
		t.Helper()
		c := rc.nodes[via].dialWith(t, client.Config{TLS: rc.tls})
		p, err := c.NewPublisher(ctx, "default", "rf3")
		require.NoError(t, err)
		for k := range n {
			pa := p.PublishShardAsync(0, [][]byte{fmt.Appendf(nil, "%s-%d", tag, k)})
			require.NoError(t, pa.Wait(ctx), "publish %s-%d via b%d", tag, k, via+1)
			own, named := pa.Owner()
			require.True(t, named)
			require.Equal(t, rc.ids[rc.leader()], own.ID, "the ack names the leader")
		}
		p.Close(ctx)
	}
	for i := range rc.nodes {
		publish(i, 10, fmt.Sprintf("via%d", i))
	}
	// Offsets rise, with a gap where a term's first record is (no event).
	var last uint64
	for k := range 30 {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("via%d-%d", k/10, k%10), string(ev.Payload))
		require.Greater(t, ev.Offset+1, last)
		last = ev.Offset + 1
	}

	rc.stop(lead)
	next := rc.leader()
	require.NotEqual(t, lead, next)
	publish(next, 10, "after")
	rc.start(lead)
	rc.place()
	publish(rc.leader(), 5, "back")
	// Every replica reaches the same commit, then their logs compare.
	require.Eventually(t, func() bool {
		var commits []uint64
		for _, h := range rc.nodes {
			commits = append(commits, h.b.Stats().Streams[0].Shards[0].Replica.Commit)
		}
		return commits[0] == commits[1] && commits[1] == commits[2]
	}, 10*time.Second, 20*time.Millisecond)
	for i := range rc.nodes {
		rc.stop(i)
	}
	want := rc.events(0)
	require.Len(t, want, 45)
	require.Equal(t, want, rc.events(1))
	require.Equal(t, want, rc.events(2))
}
