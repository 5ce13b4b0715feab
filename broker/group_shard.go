package broker

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/felixmq/felix/segment"
)

// groupKey names a consumer group on one shard of a stream. A group over a
// stream of N shards is N of these, independent of each other (state file,
// pump, positions); its members take from all of them.
type groupKey struct {
	stream StreamKey
	shard  uint32
	group  string
}

// groupShard is one consumer group on one shard of a durable stream: its
// ledger (group_ledger.go, the pure delivery state) behind a lock, the
// pump that expires visibility timeouts and persists the state
// (group_pump.go), and what wakes members.
//
// Design: members pull. A queue_consume member's writer takes records
// under mu (up to its in-flight limit), reads them from the stream's log
// and writes them to its own event stream, so a slow member only delays
// itself; a group_poll takes for the connection's poll holder and answers
// with what it took. One pump goroutine per group expires visibility
// timeouts, wakes members when records arrive, and writes the state file
// (group commit for acks and every other change that must survive).
//
// Lock order: groupShard.mu, then shard.mu (reading the tail). The shard
// only signals the pump's channel, without locks, when records commit.
type groupShard struct {
	b    *Broker
	key  groupKey
	sh   *shard
	path string
	fs   segment.FS // the storage's: the state file goes through it

	kick chan struct{} // cap 1: wake the pump
	stop chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		ledger  *groupLedger
		changed chan struct{} // closed and replaced when a member may take more
		seq     uint64        // bumped by every state change worth persisting
		// durableSeq is the seq the last written state covers.
		durableSeq uint64
		// savedDelivered is the delivered mark last written. Deliveries
		// alone do not trigger a write (that would be a sync per take);
		// the final write at close records them.
		savedDelivered uint64
		waiters        []ackWaiter
		// holders are the poll members of live connections, by
		// connection and member name.
		holders map[holderKey]*groupMember
		closed  bool
	}
}

type ackWaiter struct {
	seq  uint64
	done func(error)
}

// holderKey names a poll member: a connection and, within it, a member
// name (the zero ident for polls that name none).
type holderKey struct {
	conn  uint64
	ident memberIdent
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
	log, err := sh.readLog()
	if err != nil {
		return nil, err
	}
	g := &groupShard{b: b, key: k, sh: sh, path: path, fs: b.cfg.Storage.FS,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	ledger, trimmed := newGroupLedger(k, st, log.First())
	if trimmed {
		// Retention removed records the group never acked: they cannot be
		// delivered any more. Say so once and start at the oldest record.
		b.log.Warn("queue group position below the log's retention; skipping trimmed records",
			"stream", k.stream.String(), "shard", k.shard, "group", k.group, "committed", st.Committed, "first", log.First())
	}
	if ledger.maxAttempts == 0 {
		ledger.maxAttempts = b.cfg.Groups.MaxAttempts
	}
	g.mu.ledger = ledger
	g.mu.savedDelivered = ledger.delivered
	g.mu.changed = make(chan struct{})
	g.mu.holders = map[holderKey]*groupMember{}
	sh.notifyOnCommit(g.kick)
	go g.pump()
	return g, nil
}

// broadcastLocked wakes every member waiting to take.
func (g *groupShard) broadcastLocked() {
	close(g.mu.changed)
	g.mu.changed = make(chan struct{})
}

// changedLocked records a change the state file must hold: done, if not
// nil, runs once a write covering it is durable (or with the error that
// kept it from being written).
func (g *groupShard) changedLocked(done func(error)) {
	g.mu.seq++
	if done != nil {
		g.mu.waiters = append(g.mu.waiters, ackWaiter{seq: g.mu.seq, done: done})
	}
	notify(g.kick)
}

// take hands up to limit records to m and returns them with their previous
// delivery counts, and the channel to wait on for more (nil once the group
// closed).
func (g *groupShard) take(m *groupMember, limit int, now time.Time, dst []takenRec) ([]takenRec, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return dst, nil
	}
	if m.gone.Load() {
		// Released already: whatever it took now would sit with a member
		// that is gone until the visibility timeout.
		return dst, g.mu.changed
	}
	return g.takeLocked(takeArgs{m: m, limit: limit, now: now, visibility: m.visibility}, dst), g.mu.changed
}

func (g *groupShard) takeLocked(a takeArgs, dst []takenRec) []takenRec {
	before := len(dst)
	a.tail, a.groupCap = g.sh.tail(), g.b.cfg.Groups.MaxInFlight
	dst, moved, dead := g.mu.ledger.take(a, dst)
	g.sh.b.metrics.features.groupTaken(dst[before:])
	if dead {
		g.changedLocked(nil)
	}
	if moved {
		notify(g.kick)
	}
	return dst
}

// settle runs a change of the ledger that must be durable before it is
// answered: done (if not nil) runs once it is, or at once with nil when
// change reports nothing to persist. A refused change returns its error,
// and done is not called.
func (g *groupShard) settle(change func(l *groupLedger, tail uint64) (persist bool, err error), done func(error)) error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return ErrDraining
	}
	persist, err := change(g.mu.ledger, g.sh.tail())
	if err != nil {
		g.mu.Unlock()
		return err
	}
	if persist {
		g.changedLocked(done)
	}
	g.broadcastLocked()
	g.mu.Unlock()
	if !persist && done != nil {
		done(nil)
	}
	return nil
}

// ack marks offsets acked. All are checked before any is applied, so a
// refused ack changes nothing. done, if not nil, runs once the state
// holding these acks is durable (or with the error that kept it from
// being written).
func (g *groupShard) ack(offsets []uint64, done func(error)) error {
	return g.settle(func(l *groupLedger, tail uint64) (bool, error) {
		if err := l.ack(offsets, tail); err != nil {
			return false, err
		}
		g.sh.b.metrics.features.groupAcks.Add(uint64(len(offsets)))
		return true, nil
	}, done)
}

// nack hands in-flight offsets back for redelivery, at once or after
// a.delay; one whose attempts ran out is dead-lettered, and done then
// waits for the state that lists it.
func (g *groupShard) nack(offsets []uint64, a nackArgs, done func(error)) error {
	return g.settle(func(l *groupLedger, tail uint64) (bool, error) {
		dead, moved, err := l.nack(offsets, tail, a)
		if err != nil {
			return false, err
		}
		if moved {
			notify(g.kick)
		}
		g.sh.b.metrics.features.groupNacks.Add(uint64(len(offsets)))
		return dead, nil
	}, done)
}

// release returns everything in flight to m for redelivery (m is gone:
// m.gone is set, so it takes nothing more from this group).
func (g *groupShard) release(m *groupMember) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.ledger.release(m) {
		g.changedLocked(nil)
	}
	g.broadcastLocked()
}

// holder is conn's poll member named ident (created on first use, and
// forgotten when the connection ends: its claims stay until they lapse,
// or until a later connection of the same member name reclaims them).
func (g *groupShard) holder(c *conn, principal, consumer string) *groupMember {
	k := holderKey{conn: c.id}
	if consumer != "" {
		k.ident = memberIdent{principal: principal, consumer: consumer}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.mu.holders[k]; h != nil {
		return h
	}
	h := &groupMember{group: g.key.group, member: consumer, ident: k.ident, connID: c.id, maxInflight: math.MaxInt32, conn: c}
	g.mu.holders[k] = h
	context.AfterFunc(c.ctx, func() {
		g.mu.Lock()
		delete(g.mu.holders, k)
		g.mu.Unlock()
	})
	return h
}

// pollArgs are a group_poll's bounds.
type pollArgs struct {
	max        int
	visibility time.Duration
	reclaim    bool
}

// poll takes up to a.max records for the poll member h (reserving h's
// older claims first on a reclaim), and returns the channel to wait on
// for more (nil once the group closed).
func (g *groupShard) poll(h *groupMember, a pollArgs, now time.Time) ([]takenRec, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return nil, nil
	}
	if a.reclaim {
		g.mu.ledger.reclaim(h)
	}
	return g.takeLocked(takeArgs{m: h, limit: a.max, now: now, visibility: a.visibility}, nil), g.mu.changed
}

// untake hands back records a poll took but could not send.
func (g *groupShard) untake(h *groupMember, taken []takenRec) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range taken {
		g.mu.ledger.untake(h, t.offset)
	}
	g.broadcastLocked()
}

// extend keeps a claim standing for d from now.
func (g *groupShard) extend(off, attempts uint64, d time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.ledger.extend(off, attempts, time.Now(), d)
}

// setMaxAttempts makes n the group's bound (0 leaves it as it is).
func (g *groupShard) setMaxAttempts(n uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n != 0 && g.mu.ledger.maxAttempts != n {
		g.mu.ledger.maxAttempts = n
		g.changedLocked(nil)
	}
}

// deadLetters lists the group's dead letters.
func (g *groupShard) deadLetters() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.ledger.deadLetters()
}

// describe is the group's state and the shard's committed tail.
func (g *groupShard) describe() (groupInfo, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.ledger.describe(), g.sh.tail()
}
