package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// baseOffsetAt is where the u64 base offset sits in an encoded shared event
// batch frame with offsets: right after the 12-byte header.
const baseOffsetAt = wire.HeaderLen

// shard orders the publishes of one stream shard, numbers them, keeps the
// recent ones in a ring and hands each encoded batch to every subscriber.
//
// Design: a publish is encoded once, outside the lock, into a pooled buffer
// laid out as a shared event batch frame with offsets (flags 0x0024). Under
// the lock the shard patches the base offset into the frame, appends it to
// the ring and pushes one reference into each subscriber queue, so offsets,
// ring order and every subscriber's queue order agree. Subscribers that did
// not negotiate offsets get the same bytes behind a rewritten 12-byte header.
type shard struct {
	b  *Broker
	st *stream
	id int
	// d is the durable storage of a durable shard, nil until opened
	// (openDurable): at creation outside cluster mode, else once the
	// placement makes this broker the owner (SetPlacement, or the first
	// use after a failed open), so that a cluster broker keeps no log for
	// the shards other brokers own. durable and ensureDurable read it.
	d atomic.Pointer[durable]
	// rep is a replicated shard's replica on this broker (replicated.go),
	// nil until the placement puts one here (takeOwned).
	rep    atomic.Pointer[replicated]
	openMu sync.Mutex // serialises opening d and rep; closed is guarded by it
	closed bool
	// bytesIn counts the payload bytes of accepted publishes (load.go),
	// eventsIn their events (metrics).
	bytesIn  atomic.Uint64
	eventsIn atomic.Uint64
	// idem is the idempotent producers' state (idempotent.go).
	idem idempotence
	mu   struct {
		sync.Mutex
		// next is the offset after the last batch delivered to subscribers
		// (for a durable shard: committed per its fsync mode; the log may
		// hold appended records beyond it that are still in commit).
		next uint64
		ring ring
		subs []*subscription // copy-on-write: replaced, never mutated in place
		// onCommit channels (cap 1) are signalled, never waited on, when
		// records reach the tail: consumer groups wake their pump.
		onCommit []chan struct{}
	}
}

func newShard(b *Broker, st *stream, id int) (*shard, error) {
	sh := &shard{b: b, st: st, id: id}
	sh.mu.ring.capacity = b.cfg.RingEvents
	if pv := b.placement.Load(); pv != nil && !st.spec.Durable {
		// A stream registered after the placement that may already list
		// it: start in the current epoch (see takeOwned).
		sh.mu.next = epochBase(pv.version)
	}
	if st.spec.Durable && !st.spec.replicated() && b.cfg.NodeID == "" {
		if _, err := sh.ensureDurable(); err != nil {
			return nil, err
		}
	}
	return sh, nil
}

// durable is the shard's durable storage, nil for an ephemeral shard and
// for a durable one not opened yet.
func (sh *shard) durable() *durable { return sh.d.Load() }

// ensureDurable opens a durable shard's log if it is not open yet, and
// returns nil for an ephemeral shard. The log's tail becomes the shard's
// next offset before any publish or subscriber can use the shard (they
// call it first).
func (sh *shard) ensureDurable() (*durable, error) {
	if !sh.st.spec.Durable || sh.st.spec.replicated() {
		return nil, nil
	}
	if d := sh.d.Load(); d != nil {
		return d, nil
	}
	sh.openMu.Lock()
	defer sh.openMu.Unlock()
	if d := sh.d.Load(); d != nil {
		return d, nil
	}
	if sh.closed {
		return nil, ErrDraining
	}
	d, err := openDurable(sh.b, sh.st.spec, sh.id)
	if err != nil {
		return nil, err
	}
	if err := sh.idem.rebuild(sh, d); err != nil {
		d.close()
		return nil, err
	}
	sh.mu.Lock()
	sh.mu.next = d.log.Next()
	sh.mu.Unlock()
	sh.d.Store(d)
	return d, nil
}

// ensureReplica opens this broker's replica of a replicated shard, whose
// replica set is peers, if it is not open yet. Its committed tail becomes
// the shard's next offset before anyone can use it.
func (sh *shard) ensureReplica(spec replicaSpec) (*replicated, error) {
	if r := sh.rep.Load(); r != nil {
		return r, nil
	}
	sh.openMu.Lock()
	defer sh.openMu.Unlock()
	if r := sh.rep.Load(); r != nil {
		return r, nil
	}
	if sh.closed {
		return nil, ErrDraining
	}
	r, err := openReplicated(sh.b, sh, spec)
	if err != nil {
		return nil, err
	}
	sh.mu.Lock()
	sh.mu.next = max(sh.mu.next, r.group.Status().Commit)
	sh.mu.Unlock()
	sh.rep.Store(r)
	return r, nil
}

// readLog is the log a durable shard's readers read: its own, or its
// replica's; nil for an ephemeral shard. A replicated shard without a
// replica on this broker is unavailable here.
func (sh *shard) readLog() (*segment.Log, error) {
	if sh.st.spec.replicated() {
		if r := sh.rep.Load(); r != nil {
			return r.log, nil
		}
		return nil, fmt.Errorf("%w: shard %s/%d has no replica on this broker", ErrOwnerUnavailable, sh.st.spec.StreamKey, sh.id)
	}
	d, err := sh.ensureDurable()
	if err != nil || d == nil {
		return nil, err
	}
	return d.log, nil
}

// logFirst is the first offset of the durable shard's log (its own or its
// replica's) here; a group asks it once it has the log open.
func (sh *shard) logFirst() uint64 {
	if log, err := sh.readLog(); err == nil && log != nil {
		return log.First()
	}
	return sh.tail()
}

// encode lays payloads out as one shared event batch frame with a zero base
// offset, in a pooled buffer holding one reference.
func (sh *shard) encode(payloads [][]byte) (*fanout.Buffer, error) {
	size := wire.HeaderLen + 8 + 4 + 4*len(payloads)
	for _, p := range payloads {
		size += len(p)
	}
	buf := sh.b.pool.Get(size)
	var err error
	buf.B, err = wire.AppendEventBatchFrame(buf.B[:0], wire.EventBatch{
		Shared: true, HasBaseOffset: true, Payloads: payloads,
	})
	if err != nil {
		buf.Release()
		return nil, err
	}
	buf.Events = len(payloads)
	return buf, nil
}

// publish appends payloads as one atomic batch and calls done exactly once
// with the offset of the first or an error. The payloads are copied before
// publish returns; the caller may reuse them.
//
// Ephemeral shards call done before publish returns. Durable shards append
// to the log and reserve the range with the commit sequencer under the shard
// lock (so reservation order is offset order), and done runs later on the
// sequencer's completer goroutine, once the batch is durable per the stream's fsync
// mode and has reached every subscriber queue: disk order = delivery order =
// ack order. A batch whose sync failed is never delivered nor acked.
//
// admit bounds how long a publish may wait for Block subscribers to make
// room; when it expires the batch is refused whole (ErrOverloaded) before it
// gets offsets, so a refused publish never leaves a partial trace.
//
// hook (nil for an ordinary publish) marks an idempotent producer's batch
// in the log and learns its offset under the shard lock (idempotent.go).
// meta (nil for none) is the batch's headers and publisher (batchmeta.go).
func (sh *shard) publish(admit context.Context, payloads [][]byte, meta *batchMeta, hook *appendHook, done func(uint64, error)) {
	if len(payloads) == 0 {
		done(0, fmt.Errorf("%w: empty batch", wire.ErrMissingField))
		return
	}
	if sh.st.spec.replicated() {
		// Records reach the ring and the subscribers at commit (apply).
		r := sh.rep.Load()
		if r == nil {
			_, err := sh.readLog()
			done(0, err)
			return
		}
		r.publish(payloads, meta, hook, done)
		return
	}
	buf, err := sh.encode(payloads)
	if err != nil {
		done(0, err)
		return
	}
	if meta != nil {
		buf.Extra = meta
	}
	if err := sh.admit(admit, buf.Events); err != nil {
		buf.Release()
		done(0, err)
		return
	}
	d, err := sh.ensureDurable()
	if err != nil {
		buf.Release()
		done(0, err)
		return
	}
	if d != nil {
		d.publish(sh, buf, payloads, meta, hook, done)
		return
	}
	sh.mu.Lock()
	base := sh.mu.next
	sh.deliverLocked(buf, base)
	hook.appendedLocked(base)
	sh.mu.Unlock()
	buf.Release()
	done(base, nil)
}

// beginEpoch moves an ephemeral shard's next offset up to base and drops
// its replay ring, whose records belong to an earlier ownership, and its
// producers, whose batches do too.
func (sh *shard) beginEpoch(base uint64) {
	sh.idem.reset()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if base <= sh.mu.next {
		return
	}
	sh.mu.next = base
	sh.mu.ring.clear()
}

// deliverLocked numbers buf from base, appends it to the ring and offers it
// to every subscriber. The shard lock is held.
func (sh *shard) deliverLocked(buf *fanout.Buffer, base uint64) {
	for _, sub := range sh.commitLocked(buf, base) {
		sub.offer(buf)
	}
}

// deliverCommitted is deliverLocked for a durable shard's commit completer,
// the one goroutine that delivers its batches, in offset order. It offers
// outside the shard lock: offering to a full Block subscriber waits for
// room, and under the lock that wait would also stop the publishers
// appending the next batches, so the disk would idle while the subscriber
// caught up. Subscribers attached after the ring push replay buf from the
// ring; the list offered to is the one the push saw (copy on write).
func (sh *shard) deliverCommitted(buf *fanout.Buffer, base uint64) {
	sh.mu.Lock()
	subs := sh.commitLocked(buf, base)
	sh.mu.Unlock()
	for _, sub := range subs {
		sub.offer(buf)
	}
}

// commitLocked numbers buf from base, appends it to the ring, wakes the
// tail watchers and returns the subscribers to offer it to.
func (sh *shard) commitLocked(buf *fanout.Buffer, base uint64) []*subscription {
	binary.BigEndian.PutUint64(buf.B[baseOffsetAt:], base)
	buf.BaseOffset = base
	sh.mu.next = base + uint64(buf.Events)
	sh.mu.ring.push(buf)
	for _, ch := range sh.mu.onCommit {
		notify(ch)
	}
	return sh.mu.subs
}

// notifyOnCommit signals ch whenever records reach the tail.
func (sh *shard) notifyOnCommit(ch chan struct{}) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.mu.onCommit = append(sh.mu.onCommit, ch)
}

// tail is the offset after the last record delivered to subscribers (for a
// durable shard: committed per its fsync mode, so readable from the log).
func (sh *shard) tail() uint64 {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.mu.next
}

// admit waits until every Block subscriber has room for events, or ctx ends.
// Subscribers with a drop or catch-up policy never make a publisher wait,
// and a Block subscriber that has held publishers up for longer than
// SlowConsumerTimeout is cut instead of waited for.
func (sh *shard) admit(ctx context.Context, events int) error {
	if sh.b.cfg.Queue.Policy != fanout.Block {
		return nil
	}
	sh.mu.Lock()
	subs := sh.mu.subs
	sh.mu.Unlock()
	for _, sub := range subs {
		if sub.queue.Policy() != fanout.Block {
			continue
		}
		if err := sub.waitRoom(ctx, events, sh.b.cfg.SlowConsumerTimeout); err != nil {
			return fmt.Errorf("%w: subscriber queue full", ErrOverloaded)
		}
	}
	return nil
}

// attach registers sub on this shard starting at start and hands it what it
// must replay first: records from the log (durable shards, below the ring)
// and ring buffers. Registration and the replay bounds are fixed under one
// lock, so replay and the live queue meet with no gap and no duplicate.
func (sh *shard) attach(sub *subscription, start wire.Start, hasStart bool) error {
	log, err := sh.readLog()
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	next := sh.mu.next
	ringFirst := sh.mu.ring.first(next)
	first := ringFirst
	if log != nil {
		first = min(log.First(), ringFirst)
	}
	from := next
	if hasStart {
		switch start.Kind {
		case wire.StartEarliest:
			from = first
		case wire.StartOffset:
			switch {
			case start.Offset > next:
				return &CursorError{Reason: "in_future", Requested: start.Offset, Available: next}
			case start.Offset < first:
				return &CursorError{Reason: "too_old", Requested: start.Offset, Available: first}
			}
			from = start.Offset
		}
	}
	sub.start = from
	if sub.queue.Policy() == fanout.CatchUp {
		// Everything before next is in the log, the rest will be queued:
		// the writer reads the log up to the first queued offset, as it
		// does whenever the queue overflows.
		sub.history = historyRange{from: from, to: next}
	} else {
		if from < ringFirst {
			sub.history = historyRange{from: from, to: ringFirst}
		}
		sub.replay, sub.replayFrom = sh.mu.ring.from(max(from, ringFirst)), max(from, ringFirst)
	}
	subs := make([]*subscription, 0, len(sh.mu.subs)+1)
	sh.mu.subs = append(append(subs, sh.mu.subs...), sub)
	return nil
}

// detach removes sub; its queue is closed by the caller.
func (sh *shard) detach(sub *subscription) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i := slices.Index(sh.mu.subs, sub); i >= 0 {
		sh.mu.subs = slices.Delete(slices.Clone(sh.mu.subs), i, i+1)
	}
}

// stats is a snapshot for the admin endpoints.
func (sh *shard) stats() (next, first uint64, subs int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.mu.next, sh.mu.ring.first(sh.mu.next), len(sh.mu.subs)
}

// close ends the shard: a durable one gets its final sync first.
func (sh *shard) close() error {
	sh.openMu.Lock()
	sh.closed = true
	sh.openMu.Unlock()
	var err error
	if d := sh.durable(); d != nil {
		err = d.close()
	}
	if r := sh.rep.Load(); r != nil {
		err = errors.Join(err, r.close())
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.mu.ring.clear()
	return err
}
