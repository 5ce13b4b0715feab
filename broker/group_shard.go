package broker

import (
	"fmt"
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
// Design: members pull. Each member's writer takes records under mu (up to
// its in-flight limit), reads them from the stream's log and writes them
// to its own event stream, so a slow member only delays itself. One pump
// goroutine per group expires visibility timeouts, wakes members when
// records arrive, and writes the state file (group commit for acks).
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
		closed         bool
	}
}

type ackWaiter struct {
	seq  uint64
	done func(error)
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
	g.mu.ledger = ledger
	g.mu.savedDelivered = ledger.delivered
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
	before := len(dst)
	dst, moved := g.mu.ledger.take(m, limit, g.sh.tail(), now, dst)
	g.sh.b.metrics.features.queueTaken(dst[before:])
	if moved {
		notify(g.kick)
	}
	return dst, g.mu.changed
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
	if err := g.mu.ledger.ack(offsets); err != nil {
		return err
	}
	g.sh.b.metrics.features.queueAcks.Add(uint64(len(offsets)))
	g.mu.seq++
	if done != nil {
		g.mu.waiters = append(g.mu.waiters, ackWaiter{seq: g.mu.seq, done: done})
	}
	notify(g.kick)
	g.broadcastLocked()
	return nil
}

// nack hands in-flight offsets back for immediate redelivery.
func (g *groupShard) nack(offsets []uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.mu.ledger.nack(offsets); err != nil {
		return err
	}
	g.sh.b.metrics.features.queueNacks.Add(uint64(len(offsets)))
	g.broadcastLocked()
	return nil
}

// release returns everything in flight to m for redelivery (m is gone:
// m.gone is set, so it takes nothing more from this group).
func (g *groupShard) release(m *groupMember) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.ledger.release(m)
	g.broadcastLocked()
}
