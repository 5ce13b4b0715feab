package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/felixmq/felix/segment"
)

// cluster is a raft group of real replicas (real segment logs in temp
// directories, real raft) in one process; its transport hands messages
// from one replica's goroutine to another's Step, and can cut any link.
// It stands in for the broker-to-broker QUIC transport, which the broker's
// tests cover.
type cluster struct {
	t    *testing.T
	dirs map[uint64]string
	sync bool
	// retention is the logs' RetentionBytes (0: none).
	retention int64
	// maxUncommitted and maxHeld are the groups' MaxUncommittedBytes and
	// MaxHeldBytes (0: the defaults).
	maxUncommitted, maxHeld uint64
	// frozen stops the ticks: no election, no quorum timeout.
	frozen atomic.Bool

	mu   sync.Mutex
	reps map[uint64]*replicaUnderTest
	cut  map[[2]uint64]bool // from, to
	stop chan struct{}
	wg   sync.WaitGroup
}

type replicaUnderTest struct {
	g   *Group
	log *segment.Log
	// applied is every committed event Apply was told of, and tail the
	// last tail.
	mu      sync.Mutex
	applied []segment.Record
	tail    uint64
}

func newCluster(t *testing.T, ids ...uint64) *cluster { return newClusterWith(t, 0, ids...) }

// logConfig is a small-segment v4 replica log.
func (c *cluster) logConfig() segment.Config {
	return segment.Config{SegmentBytes: 16 << 10, FormatVersion: segment.FormatVersionV4, KeepPartialBatches: true,
		RetentionBytes: c.retention}
}

func newClusterWith(t *testing.T, retention int64, ids ...uint64) *cluster {
	c := unstartedCluster(t, ids...)
	c.retention = retention
	c.boot(ids...)
	return c
}

// unstartedCluster is a cluster to configure before boot starts it.
func unstartedCluster(t *testing.T, ids ...uint64) *cluster {
	c := &cluster{t: t, dirs: map[uint64]string{}, reps: map[uint64]*replicaUnderTest{},
		cut: map[[2]uint64]bool{}, stop: make(chan struct{}), sync: true}
	for _, id := range ids {
		c.dirs[id] = filepath.Join(t.TempDir(), fmt.Sprint(id))
	}
	return c
}

func (c *cluster) boot(ids ...uint64) {
	for _, id := range ids {
		c.start(id, ids)
	}
	c.wg.Add(1)
	go c.ticker()
	c.t.Cleanup(c.close)
}

func (c *cluster) start(id uint64, peers []uint64) {
	l, err := segment.Open(c.dirs[id], c.logConfig())
	require.NoError(c.t, err)
	r := &replicaUnderTest{log: l}
	g, err := Open(Config{ID: id, Peers: peers, Dir: c.dirs[id], Log: l, SyncEachWrite: c.sync,
		Transport: sender{c, id}, ElectionTicks: 10, QuorumTimeout: 2 * time.Second, MaxUncommittedBytes: c.maxUncommitted,
		MaxHeldBytes: c.maxHeld,
		Apply: func(evs []segment.Record, tail uint64) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, e := range evs {
				e.Payload = slices.Clone(e.Payload)
				r.applied = append(r.applied, e)
			}
			r.tail = tail
		}})
	require.NoError(c.t, err)
	r.g = g
	c.mu.Lock()
	c.reps[id] = r
	c.mu.Unlock()
}

// kill stops replica id (its group and log), as a crash after its last
// sync would.
func (c *cluster) kill(id uint64) {
	c.mu.Lock()
	r := c.reps[id]
	delete(c.reps, id)
	c.mu.Unlock()
	require.NoError(c.t, r.g.Close())
	require.NoError(c.t, r.log.Close())
}

func (c *cluster) rep(id uint64) *replicaUnderTest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reps[id]
}

type sender struct {
	c    *cluster
	from uint64
}

func (s sender) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		to := m.GetTo()
		s.c.mu.Lock()
		r, cut := s.c.reps[to], s.c.cut[[2]uint64{s.from, to}]
		s.c.mu.Unlock()
		if r == nil || cut {
			continue // lost: raft sends again
		}
		r.g.Step(m)
	}
}

// partition cuts every link between id and the others (both ways), or
// heals them.
func (c *cluster) partition(id uint64, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other := range c.dirs {
		if other != id {
			c.cut[[2]uint64{id, other}], c.cut[[2]uint64{other, id}] = on, on
		}
	}
}

// ticker is the broker's one ticker: every 5 ms a tick to every replica.
func (c *cluster) ticker() {
	defer c.wg.Done()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if c.frozen.Load() {
			continue
		}
		c.mu.Lock()
		for _, r := range c.reps {
			r.g.Tick()
		}
		c.mu.Unlock()
	}
}

func (c *cluster) close() {
	close(c.stop)
	c.wg.Wait()
	c.mu.Lock()
	ids := make([]uint64, 0, len(c.reps))
	for id := range c.reps {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.kill(id)
	}
}

// leader waits until the replicas up agree on a leader among them.
func (c *cluster) leader() uint64 {
	var lead uint64
	require.Eventually(c.t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		lead = 0
		for id, r := range c.reps {
			s := r.g.Status()
			if s.Role == "leader" && c.reps[s.Leader] != nil {
				lead = id
			}
		}
		if lead == 0 {
			return false
		}
		for _, r := range c.reps {
			if l, _ := r.g.Leader(); l != lead {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
	return lead
}

// propose proposes n events tagged name on replica id and waits for the
// answer.
func (c *cluster) propose(id uint64, name string, n int, ack Ack) (uint64, error) {
	recs := make([]segment.Record, n)
	for i := range recs {
		recs[i] = segment.Record{TimestampMicros: int64(i), Payload: fmt.Appendf(nil, "%s-%d", name, i)}
	}
	type answer struct {
		first uint64
		err   error
	}
	got := make(chan answer, 1)
	c.rep(id).g.Propose(recs, ack, nil, func(first uint64, err error) { got <- answer{first, err} })
	select {
	case a := <-got:
		return a.first, a.err
	case <-time.After(20 * time.Second):
		c.t.Fatal("no answer to a proposal")
		return 0, nil
	}
}

// records reads every record of replica id's log; nil when the log moved
// under the read (a truncation or a snapshot's reset): the caller asks
// again.
func (c *cluster) records(id uint64) []segment.Record {
	l := c.rep(id).log
	first, next := l.First(), l.Next()
	r, err := l.NewReader(first)
	if err != nil {
		return nil
	}
	defer r.Close()
	var out []segment.Record
	for off := first; off < next; off++ {
		rec, err := r.Next()
		if err != nil {
			return nil
		}
		rec.Payload = slices.Clone(rec.Payload)
		out = append(out, rec)
	}
	return out
}

// converged waits until every replica up holds the same records as the
// leader, at least through offset upTo.
func (c *cluster) converged(upTo uint64) {
	require.Eventually(c.t, func() bool {
		c.mu.Lock()
		ids := make([]uint64, 0, len(c.reps))
		for id := range c.reps {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		var want []segment.Record
		for i, id := range ids {
			got := c.records(id)
			if got == nil || got[len(got)-1].Offset+1 < upTo {
				return false
			}
			if i == 0 {
				want = got
			} else if !slices.EqualFunc(want, got, sameRecord) {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
}

func sameRecord(a, b segment.Record) bool {
	return a.Offset == b.Offset && a.TimestampMicros == b.TimestampMicros && a.Mark == b.Mark && string(a.Payload) == string(b.Payload)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
