package replica

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/segment"
)

// Three replicas elect a leader; what it accepts is committed at the same
// offsets on all three, byte for byte, and every replica applies the same
// events in order. A follower refuses proposals naming the leader.
func TestThreeReplicasCommitTheSameLog(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	lead := c.leader()
	var next uint64
	for i := range 20 {
		first, err := c.propose(lead, fmt.Sprint("b", i), 10, AckQuorum)
		require.NoError(t, err)
		if i == 0 {
			next = first
		}
		require.Equal(t, next, first, "batches get consecutive offsets")
		next += 10
	}
	c.converged(next)
	for id := range c.dirs {
		r := c.rep(id)
		require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.applied) == 200 }, 5*time.Second, time.Millisecond)
		r.mu.Lock()
		for i, e := range r.applied {
			require.Equal(t, fmt.Sprintf("b%d-%d", i/10, i%10), string(e.Payload))
		}
		r.mu.Unlock()
	}
	for id := range c.dirs {
		if id != lead {
			_, err := c.propose(id, "x", 1, AckQuorum)
			var nl *NotLeaderError
			require.ErrorAs(t, err, &nl)
			require.Equal(t, lead, nl.Leader)
		}
	}
}

// A leader that loses its followers acks nothing more at quorum (its
// proposals time out or fail when it steps down), while leader acks still
// come; once healed, the group converges.
func TestMinorityLeaderAcksNoQuorumPublish(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	lead := c.leader()
	_, err := c.propose(lead, "before", 5, AckQuorum)
	require.NoError(t, err)
	c.partition(lead, true)
	_, err = c.propose(lead, "cut off", 5, AckQuorum)
	require.True(t, errors.Is(err, ErrQuorumTimeout) || errors.Is(err, ErrLeadershipLost) || isNotLeader(err), "%v", err)
	c.partition(lead, false)
	newLead := c.leader()
	first, err := c.propose(newLead, "after", 5, AckQuorum)
	require.NoError(t, err)
	c.converged(first + 5)
}

// A leader MaxUncommittedBytes ahead of its commit has raft drop a
// proposal: it waits, with what came after it (even what raft would take,
// so that nothing lands ahead of it), until the commit makes room, and is
// then appended in order; beyond MaxHeldBytes a proposal is refused
// ErrProposalDropped (send again later), not as not the leader, which
// would name the leader itself, and so is everything after it.
func TestProposalsWaitForRoom(t *testing.T) {
	c := unstartedCluster(t, 1, 2, 3)
	c.maxUncommitted, c.maxHeld = 4<<10, 3<<10
	c.boot(1, 2, 3)
	lead := c.leader()
	c.frozen.Store(true) // no election and no quorum timeout while cut off
	c.partition(lead, true)
	g := c.rep(lead).g
	answers := heldProposals(t, g, 3<<10)
	require.Eventually(t, func() bool { return g.Status().Pending == 1 }, 10*time.Second, time.Millisecond) // raft took it
	answers = append(answers, heldProposals(t, g, 2<<10, 512, 1<<10, 256)...)
	// 5 KiB uncommitted: dropped and held; 3.5 KiB would fit, but is
	// behind it; past 3 KiB held: refused, and what follows.
	for _, a := range answers[3:] {
		err := a.wait(t)
		require.ErrorIs(t, err, ErrProposalDropped)
		require.False(t, isNotLeader(err))
	}
	require.Equal(t, 2, g.Status().Held)
	for _, a := range answers[:3] {
		select {
		case <-a.c:
			t.Fatalf("answered before the commit made room: %v", a.err)
		default:
		}
	}

	c.partition(lead, false)
	c.frozen.Store(false)
	var firsts []uint64
	for _, a := range answers[:3] {
		require.NoError(t, a.wait(t))
		firsts = append(firsts, a.first)
	}
	require.True(t, slices.IsSorted(firsts) && firsts[0] < firsts[1] && firsts[1] < firsts[2], "appended in order: %v", firsts)
	require.Zero(t, g.Status().Held)
}

// A leader that steps down answers what waits for room as not the leader:
// nothing of it was appended.
func TestHeldProposalsFollowTheLeadership(t *testing.T) {
	c := unstartedCluster(t, 1, 2, 3)
	c.maxUncommitted = 4 << 10
	c.boot(1, 2, 3)
	lead := c.leader()
	c.frozen.Store(true)
	c.partition(lead, true)
	g := c.rep(lead).g
	answers := heldProposals(t, g, 3<<10, 2<<10)
	require.Eventually(t, func() bool { return g.Status().Held == 1 }, 10*time.Second, time.Millisecond)
	c.frozen.Store(false)
	require.ErrorIs(t, answers[0].wait(t), ErrLeadershipLost) // CheckQuorum: it steps down
	require.True(t, isNotLeader(answers[1].wait(t)), "%v", answers[1].err)
	require.Zero(t, g.Status().Held)
}

// heldAnswer is the answer to one proposal of heldProposals.
type heldAnswer struct {
	c     chan struct{} // closed once answered
	first uint64
	err   error
}

func (a *heldAnswer) wait(t *testing.T) error {
	select {
	case <-a.c:
		return a.err
	case <-time.After(10 * time.Second):
		t.Fatal("a proposal was not answered")
		return nil
	}
}

// heldProposals hands g one proposal of one record per size, together.
func heldProposals(t *testing.T, g *Group, sizes ...int) []*heldAnswer {
	var ps []*proposal
	var out []*heldAnswer
	for _, size := range sizes {
		a := &heldAnswer{c: make(chan struct{})}
		recs := []segment.Record{{Payload: make([]byte, size)}}
		ps = append(ps, g.newProposal(recs, AckQuorum, nil, func(first uint64, err error) { a.first, a.err = first, err; close(a.c) }))
		out = append(out, a)
	}
	g.enqueue(ps...)
	return out
}

func isNotLeader(err error) bool {
	var nl *NotLeaderError
	return errors.As(err, &nl)
}

// Killing the leader: another is elected and takes proposals; the old one,
// restarted, catches up and the logs converge.
func TestLeaderKilledAndRestarted(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	lead := c.leader()
	_, err := c.propose(lead, "one", 50, AckQuorum)
	require.NoError(t, err)
	c.kill(lead)
	newLead := c.leader()
	require.NotEqual(t, lead, newLead)
	first, err := c.propose(newLead, "two", 50, AckQuorum)
	require.NoError(t, err)
	c.start(lead, []uint64{1, 2, 3})
	c.converged(first + 50)
}

// A follower down while the leader writes (and its retention drops what
// the follower missed) comes back to a snapshot: its log restarts at the
// leader's first retained offset, and then holds the same records.
func TestFollowerBehindRetentionGetsASnapshot(t *testing.T) {
	c := newClusterWith(t, 32<<10, 1, 2, 3)
	lead := c.leader()
	var follower uint64
	for id := range c.dirs {
		if id != lead {
			follower = id
			break
		}
	}
	c.kill(follower)
	var last uint64
	for i := range 120 {
		first, err := c.propose(lead, fmt.Sprint("r", i), 20, AckQuorum)
		require.NoError(t, err)
		last = first + 20
	}
	l := c.rep(lead).log
	require.Greater(t, l.Stats().Segments, 3)
	// Retention as the broker runs it, floored at what is committed.
	for id := range c.dirs {
		if r := c.rep(id); r != nil {
			r.log.SetRetentionFloor(r.g.Status().Commit)
			_, err := r.log.EnforceRetention(time.Now())
			require.NoError(t, err)
		}
	}
	require.Positive(t, l.First())
	c.start(follower, []uint64{1, 2, 3})
	c.converged(0)
	got := c.records(follower)
	require.Equal(t, l.First(), got[0].Offset, "the follower's log starts where the leader's does")
	require.Equal(t, last, got[len(got)-1].Offset+1)
}

// Under SyncEachWrite every replica counts its log syncs and the entries
// they made durable: all of each batch, at most one sync per entry.
func TestSyncsCountWhatTheyMadeDurable(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	lead := c.leader()
	var next uint64
	for i := range 5 {
		first, err := c.propose(lead, fmt.Sprint("s", i), 64, AckQuorum)
		require.NoError(t, err)
		next = first + 64
	}
	c.converged(next)
	for id := range c.dirs {
		g := c.rep(id).g
		require.Eventually(t, func() bool { return g.Status().SyncedRecords >= 5*64 }, 5*time.Second, time.Millisecond)
		s := g.Status()
		require.Positive(t, s.Syncs)
		require.LessOrEqual(t, s.Syncs, s.SyncedRecords)
		require.LessOrEqual(t, s.SyncedRecords, s.LastIndex, "an entry is synced once")
	}
}
