package broker_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
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
	// set is the replica set the placement wants (the first three ids
	// unless a test moves it); report, when set, gives the placement the
	// group's membership as the leader's stats show it (the control
	// plane's part in a real cluster).
	set    []string
	report bool
	// frame, when set, is every broker's MaxFrameBytes; tick, every
	// broker's RaftTick (20 ms unless set).
	frame uint32
	tick  time.Duration
	// follow, when set, is given every placement place makes (a client
	// following the control plane).
	follow func(*cluster.Placement)
	// logger, when set, gives each broker its logger.
	logger func(id string) *slog.Logger
}

func raftConfig(fw *forward.Forwarder) broker.Config {
	return broker.Config{NodeToken: "node-secret", Forwarder: fw, RaftTick: 20 * time.Millisecond,
		RaftDialer: func(ctx context.Context, m cluster.Member) (broker.RaftConn, error) { return fw.DialRaft(ctx, m) }}
}

func startRaftCluster(t *testing.T) *raftCluster { return startRaftClusterOf(t, 3) }

// startRaftClusterOf starts n brokers, b1..bn, the set being b1..b3.
func startRaftClusterOf(t *testing.T, n int) *raftCluster {
	rc := &raftCluster{}
	for i := range n {
		rc.ids = append(rc.ids, fmt.Sprintf("b%d", i+1))
	}
	return startRaftClusterWith(t, rc)
}

// startRaftClusterWith starts rc's brokers (b1..b3 unless rc names its
// ids), taking the options rc sets.
func startRaftClusterWith(t *testing.T, rc *raftCluster) *raftCluster {
	cert, err := devtls.SelfSigned()
	require.NoError(t, err)
	pool, err := devtls.Pool(cert.PEM)
	require.NoError(t, err)
	rc.t, rc.cert, rc.tls = t, cert, &tls.Config{RootCAs: pool}
	for i := len(rc.ids); i < 3; i++ {
		rc.ids = append(rc.ids, fmt.Sprintf("b%d", i+1))
	}
	rc.set = rc.ids[:3]
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
	cfg.NodeID, cfg.DataDir, cfg.MaxFrameBytes = rc.ids[i], rc.dirs[i], rc.frame
	if rc.tick != 0 {
		cfg.RaftTick = rc.tick
	}
	if rc.logger != nil {
		cfg.Logger = rc.logger(rc.ids[i])
	}
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
	a := cluster.Assignment{Shard: cluster.Shard{Tenant: "t1", Namespace: "default", Stream: "rf3"},
		Owner: rc.set[0], Durable: true, Replicas: rc.set}
	if rc.report {
		for _, h := range rc.nodes {
			if h == nil {
				continue
			}
			if r := h.b.Stats().Streams[0].Shards[0].Replica; r != nil && r.Role == "leader" {
				a.Voters, a.Learners, a.InSync = r.Voters, r.Learners, r.InSync
			}
		}
	}
	p.Assignments = []cluster.Assignment{a}
	for _, h := range rc.nodes {
		if h != nil {
			h.b.SetPlacement(p)
		}
	}
	if rc.follow != nil {
		rc.follow(p)
	}
}

// moveSet makes set the replica set the placement wants (rc.report on)
// and waits until the group is that set, every voter in sync, then
// places once more with that membership.
func (rc *raftCluster) moveSet(set ...string) {
	rc.t.Helper()
	rc.set = set
	require.Eventually(rc.t, func() bool {
		rc.place() // with the leader's report, as the control plane does
		r := rc.nodes[rc.leader()].b.Stats().Streams[0].Shards[0].Replica
		return slices.Equal(r.Voters, set) && len(r.Learners) == 0 && len(r.InSync) == len(set)
	}, 30*time.Second, 100*time.Millisecond, "the group becomes %v", set)
	rc.place()
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

// sameCommit reports whether brokers idx (all when none) report one
// commit index for rf3's replica.
func (rc *raftCluster) sameCommit(idx ...int) bool {
	if len(idx) == 0 {
		idx = []int{0, 1, 2}
	}
	var c []uint64
	for _, i := range idx {
		r := rc.nodes[i].b.Stats().Streams[0].Shards[0].Replica
		if r == nil {
			return false
		}
		c = append(c, r.Commit)
	}
	return !slices.ContainsFunc(c, func(x uint64) bool { return x != c[0] })
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
	require.Eventually(t, func() bool { return rc.sameCommit() }, 10*time.Second, 20*time.Millisecond)
	for i := range rc.nodes {
		rc.stop(i)
	}
	want := rc.events(0)
	require.Len(t, want, 45)
	require.Equal(t, want, rc.events(1))
	require.Equal(t, want, rc.events(2))
}

// TestReplicaSetMovesToAnotherBroker: docs/cluster.md, "Operating a
// replicated cluster": when the placement moves a replica from b3 to b4,
// the leader adds b4 as a learner, promotes it once caught up and removes
// b3, one change at a time; b3 drops its copy once the reported membership
// no longer has it, and b4 holds the same events as the others.
func TestReplicaSetMovesToAnotherBroker(t *testing.T) {
	rc := startRaftClusterOf(t, 4)
	rc.report = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publish := func(n int, tag string) {
		t.Helper()
		p, err := rc.nodes[rc.leader()].dialWith(t, client.Config{TLS: rc.tls}).NewPublisher(ctx, "default", "rf3")
		require.NoError(t, err)
		for k := range n {
			require.NoError(t, p.PublishShardAsync(0, [][]byte{fmt.Appendf(nil, "%s-%d", tag, k)}).Wait(ctx))
		}
		p.Close(ctx)
	}
	publish(50, "before")
	rc.moveSet("b1", "b2", "b4")
	b3dir := filepath.Join(rc.dirs[2], segment.ShardDirName("t1", "default", "rf3", 0))
	require.Eventually(t, func() bool { _, err := os.Stat(b3dir); return os.IsNotExist(err) }, 10*time.Second, 20*time.Millisecond,
		"b3 removed its copy")
	publish(10, "after")
	require.Eventually(t, func() bool { return rc.sameCommit(0, 1, 3) }, 10*time.Second, 20*time.Millisecond)
	for i := range rc.nodes {
		rc.stop(i)
	}
	want := rc.events(0)
	require.Len(t, want, 60)
	require.Equal(t, want, rc.events(1))
	require.Equal(t, want, rc.events(3))
}

// TestDrainHandsTheLeadershipOver: docs/cluster.md, "Operating a
// replicated cluster": a leader that drains (SIGTERM) hands its
// leadership to a caught up follower first; an idempotent publisher
// publishing meanwhile is redirected and sees no error.
func TestDrainHandsTheLeadershipOver(t *testing.T) {
	rc := startRaftCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lead := rc.leader()
	other := (lead + 1) % 3
	c := rc.nodes[other].dialWith(t, client.Config{TLS: rc.tls})
	pub, err := c.NewIdempotentPublisher(ctx, "default", "rf3", client.IdempotentOptions{
		Redial: func(ctx context.Context, addr string) (*client.Client, error) {
			if addr == "" {
				addr = rc.nodes[other].addr
			}
			return client.Dial(ctx, addr, client.Config{Tenant: "t1", Token: "dev", TLS: rc.tls})
		}})
	require.NoError(t, err)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	acked := atomic.Int64{}
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := pub.Publish(ctx, [][]byte{fmt.Appendf(nil, "e%d", i)}); err != nil {
				errs <- err
				return
			}
			acked.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return acked.Load() > 50 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, rc.nodes[lead].b.Drain(ctx))
	rc.nodes[lead] = nil
	next := rc.leader()
	require.NotEqual(t, lead, next)
	at := acked.Load()
	require.Eventually(t, func() bool { return acked.Load() > at+50 }, 10*time.Second, 10*time.Millisecond)
	close(stop)
	require.NoError(t, <-errs)
}

// A raft append may be larger than a client's frame (raft packs up to
// 1 MiB of entries in one, and the transport batches messages): with
// FELIX_MAX_FRAME_BYTES small, a follower that was away still catches up
// (its replication stream once refused the batches, so it never did).
func TestSmallFramesStillReplicate(t *testing.T) {
	rc := startRaftClusterWith(t, &raftCluster{frame: 64 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lead := rc.leader()
	away := (lead + 1) % 3
	rc.stop(away)
	p, err := rc.nodes[lead].dialWith(t, client.Config{TLS: rc.tls}).NewPublisher(ctx, "default", "rf3")
	require.NoError(t, err)
	payload := make([]byte, 30<<10)
	for range 100 {
		require.NoError(t, p.PublishShardAsync(0, [][]byte{payload}).Wait(ctx))
	}
	rc.start(away)
	rc.place()
	require.Eventually(t, func() bool { return rc.sameCommit(away, lead) }, 20*time.Second, 20*time.Millisecond, "the follower that was away catches up 3 MB through 64 KiB frames")
}

// A member the placement moves out of the replica set leads until it has
// handed its leadership over (here it cannot: the member joining is down,
// so it is never added): the other replicas forward publishes to it, raft
// says it leads, rather than to the preferred leader, which forwarded to
// itself and refused the forwarded publish (not_owner naming itself) for
// as long as the move took.
func TestLeaderLeavingTheSetStillServes(t *testing.T) {
	rc := startRaftClusterOf(t, 4)
	rc.report = true
	ctx := ctxT(t, 30*time.Second)
	require.Eventually(t, func() bool {
		lead := rc.leader()
		if lead == 2 {
			return true
		}
		code, _ := rc.stepDown(lead, "", `{"to":"b3"}`)
		return code == http.StatusOK && rc.leader() == 2
	}, 20*time.Second, 20*time.Millisecond, "b3 leads")
	rc.stop(3)
	rc.set = []string{"b1", "b2", "b4"} // b4 down: b3 cannot move its replica yet
	rc.place()
	for _, via := range []int{0, 1} {
		p, err := rc.nodes[via].dialWith(t, client.Config{TLS: rc.tls}).NewPublisher(ctx, "default", "rf3")
		require.NoError(t, err)
		pa := p.PublishShardAsync(0, [][]byte{[]byte("x")})
		require.NoError(t, pa.Wait(ctx), "via %s", rc.ids[via])
		own, _ := pa.Owner()
		require.Equal(t, "b3", own.ID, "the ack names the leader")
	}
}
