package broker

import (
	"container/heap"
	"fmt"
	"slices"
	"sync"
	"time"
)

// groupKey names a consumer group on one shard of a stream. A group over a
// stream of N shards is N of these, independent of each other (state file,
// pump, positions); its members take from all of them.
type groupKey struct {
	stream StreamKey
	shard  uint32
	group  string
}

// inflightRec is a record handed to a member and not yet acked.
type inflightRec struct {
	c        *groupMember
	deadline time.Time
}

// groupShard is the delivery state of one consumer group over one shard of
// a durable stream: which records are acked, which are out to which member
// until when, and which wait for redelivery.
//
// Design: members pull. Each member's writer takes records under mu (up to
// its in-flight limit: redeliveries first, lowest offset first, then records
// never delivered, in offset order), reads them from the stream's log and
// writes them to its own event stream, so a slow member only delays itself.
// A record is in exactly one of: acked (below committed or in acked),
// in flight (one member), waiting in redo, or not yet delivered (at or
// above next) — so it is out to at most one member at a time. One pump
// goroutine per group expires visibility timeouts, wakes members when
// records arrive, and writes the state file (group commit for acks).
//
// Lock order: groupShard.mu, then shard.mu (reading the tail). The shard
// only signals the pump's channel, without locks, when records commit. A
// member's in-flight count is shared by the groups of every shard it takes
// from, so it is an atomic rather than guarded by any one group's mu.
type groupShard struct {
	b    *Broker
	key  groupKey
	sh   *shard
	path string
	// loadedDelivered is the persisted delivered mark at open: records
	// below it that are not acked were delivered before the restart.
	loadedDelivered uint64

	kick chan struct{} // cap 1: wake the pump
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		committed    uint64
		delivered    uint64
		next         uint64
		acked        map[uint64]struct{}
		inflight     map[uint64]inflightRec
		redo         offsetHeap
		redeliveries map[uint64]uint64
		changed      chan struct{} // closed and replaced when a member may take more
		seq          uint64        // bumped by every state change worth persisting
		durableSeq   uint64
		// savedDelivered is the delivered mark last written. Deliveries
		// alone do not trigger a write (that would be a sync per take);
		// the final write at close records them.
		savedDelivered uint64
		waiters        []ackWaiter
		nextDeadline   time.Time
		closed         bool
	}
}

type ackWaiter struct {
	seq  uint64
	done func(error)
}

// errNeverDelivered and friends are the precise refusals of ack and nack.
func errNeverDelivered(off uint64, k groupKey) error {
	return fmt.Errorf("%w: queue: offset %d%s was never delivered to group %s", ErrInvalidRequest, off, k.shardSuffix(), k.group)
}

// shardSuffix names the shard in refusals, except shard 0, so that the
// texts of single-shard streams read as before.
func (k groupKey) shardSuffix() string {
	if k.shard == 0 {
		return ""
	}
	return fmt.Sprintf(" of shard %d", k.shard)
}

func openGroup(b *Broker, k groupKey, sh *shard) (*groupShard, error) {
	path := groupStatePath(b.cfg.DataDir, k.stream, k.shard, k.group)
	st, err := loadGroupState(path)
	if err != nil {
		return nil, err
	}
	d, err := sh.ensureDurable()
	if err != nil {
		return nil, err
	}
	g := &groupShard{b: b, key: k, sh: sh, path: path, loadedDelivered: st.Delivered,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if first := d.log.First(); st.Committed < first {
		// Retention removed records the group never acked: they cannot be
		// delivered any more. Say so once and start at the oldest record.
		b.log.Warn("queue group position below the log's retention; skipping trimmed records",
			"stream", k.stream.String(), "shard", k.shard, "group", k.group, "committed", st.Committed, "first", first)
		st.Committed, st.Delivered = first, max(st.Delivered, first)
	}
	g.mu.committed, g.mu.delivered, g.mu.next = st.Committed, st.Delivered, st.Committed
	g.mu.savedDelivered = st.Delivered
	g.mu.acked = map[uint64]struct{}{}
	for _, off := range st.Acked {
		if off >= st.Committed {
			g.mu.acked[off] = struct{}{}
		}
	}
	g.advanceLocked() // an acked offset at a skipped-to position
	g.mu.inflight = map[uint64]inflightRec{}
	g.mu.redeliveries = map[uint64]uint64{}
	g.mu.changed = make(chan struct{})
	sh.notifyOnCommit(g.kick)
	go g.pump()
	return g, nil
}

// broadcastLocked wakes every member waiting to take.
func (g *groupShard) broadcastLocked() {
	close(g.mu.changed)
	g.mu.changed = make(chan struct{})
}

// take hands up to limit records to c and returns them with their previous
// delivery counts, or the channel to wait on when there is nothing.
func (g *groupShard) take(c *groupMember, limit int, now time.Time, dst []takenRec) ([]takenRec, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return dst, nil
	}
	if c.gone.Load() {
		// Released already: whatever it took now would sit with a member
		// that is gone until the visibility timeout.
		return dst, g.mu.changed
	}
	tail := g.sh.tail()
	deadline := now.Add(c.visibility)
	// Only c's own writer takes for c, so the count cannot grow past the
	// limit between this check and the Add below, whichever shard runs it.
	for len(dst) < limit && c.inflight.Load() < int64(c.maxInflight) {
		off, ok := g.nextLocked(tail)
		if !ok {
			break
		}
		n := g.mu.redeliveries[off]
		if n == 0 && off < g.loadedDelivered {
			n = 1 // delivered before the restart, not acked
		}
		g.mu.redeliveries[off] = n + 1
		g.mu.inflight[off] = inflightRec{c: c, deadline: deadline}
		g.mu.delivered = max(g.mu.delivered, off+1)
		c.inflight.Add(1)
		dst = append(dst, takenRec{shard: g.key.shard, offset: off, redeliveries: n})
	}
	if len(dst) > 0 && (g.mu.nextDeadline.IsZero() || deadline.Before(g.mu.nextDeadline)) {
		g.mu.nextDeadline = deadline
		notify(g.kick)
	}
	return dst, g.mu.changed
}

// nextLocked picks the next record to deliver: the lowest offset waiting
// for redelivery, else the next never delivered below tail.
func (g *groupShard) nextLocked(tail uint64) (uint64, bool) {
	for g.mu.redo.Len() > 0 {
		off := heap.Pop(&g.mu.redo).(uint64)
		if g.isAckedLocked(off) {
			continue
		}
		if _, out := g.mu.inflight[off]; out {
			continue
		}
		return off, true
	}
	for g.mu.next < tail {
		off := g.mu.next
		g.mu.next++
		if !g.isAckedLocked(off) {
			return off, true
		}
	}
	return 0, false
}

func (g *groupShard) isAckedLocked(off uint64) bool {
	if off < g.mu.committed {
		return true
	}
	_, ok := g.mu.acked[off]
	return ok
}

// ack marks offsets acked. All are checked before any is applied, so a
// refused ack changes nothing. done, if not nil, runs once the state
// holding these acks is durable (or with the error that kept it from
// being written).
func (g *groupShard) ack(offsets []uint64, done func(error)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return ErrDraining
	}
	for _, off := range offsets {
		if off >= g.mu.next && !g.isAckedLocked(off) {
			return errNeverDelivered(off, g.key)
		}
	}
	for _, off := range offsets {
		if g.isAckedLocked(off) {
			continue
		}
		if r, ok := g.mu.inflight[off]; ok {
			r.c.inflight.Add(-1)
			delete(g.mu.inflight, off)
		}
		delete(g.mu.redeliveries, off)
		g.mu.acked[off] = struct{}{}
	}
	g.advanceLocked()
	g.mu.seq++
	if done != nil {
		g.mu.waiters = append(g.mu.waiters, ackWaiter{seq: g.mu.seq, done: done})
	}
	notify(g.kick)
	g.broadcastLocked()
	return nil
}

// advanceLocked moves committed past acked offsets.
func (g *groupShard) advanceLocked() {
	for {
		if _, ok := g.mu.acked[g.mu.committed]; !ok {
			return
		}
		delete(g.mu.acked, g.mu.committed)
		g.mu.committed++
		g.mu.next = max(g.mu.next, g.mu.committed)
	}
}

// nack hands in-flight offsets back for immediate redelivery.
func (g *groupShard) nack(offsets []uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, off := range offsets {
		switch {
		case g.isAckedLocked(off):
			return fmt.Errorf("%w: queue: offset %d%s is already acked by group %s", ErrInvalidRequest, off, g.key.shardSuffix(), g.key.group)
		case off >= g.mu.next:
			return errNeverDelivered(off, g.key)
		}
	}
	for _, off := range offsets {
		if r, ok := g.mu.inflight[off]; ok {
			r.c.inflight.Add(-1)
			delete(g.mu.inflight, off)
			heap.Push(&g.mu.redo, off)
		} // else already waiting for redelivery
	}
	g.broadcastLocked()
	return nil
}

// release returns everything in flight to c for redelivery (c is gone:
// c.gone is set, so it takes nothing more from this group).
func (g *groupShard) release(c *groupMember) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for off, r := range g.mu.inflight {
		if r.c == c {
			delete(g.mu.inflight, off)
			heap.Push(&g.mu.redo, off)
			c.inflight.Add(-1)
		}
	}
	g.broadcastLocked()
}

// expireLocked moves records past their visibility deadline to redo and
// returns the next deadline (zero when nothing is in flight).
func (g *groupShard) expireLocked(now time.Time) time.Time {
	var next time.Time
	for off, r := range g.mu.inflight {
		if !now.Before(r.deadline) {
			r.c.inflight.Add(-1)
			delete(g.mu.inflight, off)
			heap.Push(&g.mu.redo, off)
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	g.mu.nextDeadline = next
	return next
}

// stateLocked is the state to persist now.
func (g *groupShard) stateLocked() groupState {
	acked := make([]uint64, 0, len(g.mu.acked))
	for off := range g.mu.acked {
		acked = append(acked, off)
	}
	slices.Sort(acked)
	return groupState{Committed: g.mu.committed, Delivered: max(g.mu.delivered, g.mu.committed), Acked: acked}
}

// takenRec is one record a member took.
type takenRec struct {
	shard        uint32
	offset       uint64
	redeliveries uint64
}

// offsetHeap is a min-heap of offsets waiting for redelivery, so the
// oldest unacked record goes out first.
type offsetHeap []uint64

func (h offsetHeap) Len() int           { return len(h) }
func (h offsetHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h offsetHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *offsetHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *offsetHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
