package broker

import (
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// inflightRec is a record handed to a member and not yet acked.
type inflightRec struct {
	m        *groupMember
	deadline time.Time
}

// groupLedger is the delivery state of one consumer group over one shard:
// which records are acked, which are out to which member until when, and
// which wait for redelivery. It is the pure core of groupShard: no clock
// (the time is passed in), no lock (groupShard holds its own around every
// call) and no I/O (groupShard reads the log and writes the state file).
// The one thing it touches outside itself is each member's in-flight
// count, an atomic the ledgers of every shard a member takes from share, so
// that max_inflight bounds them together.
//
// Invariant: a record is in exactly one of acked (below committed, or in
// acked), in flight (with one member), waiting in redo, or not yet
// delivered (at or above next); so it is out to at most one member at a
// time. Records go out redeliveries first, lowest offset first, then never
// delivered ones in offset order.
type groupLedger struct {
	key groupKey
	// loadedDelivered is the delivered mark of the state the ledger was
	// opened from: records below it that are not acked were delivered
	// before the restart, so they go out with a redelivery count of at
	// least 1.
	loadedDelivered uint64

	committed    uint64 // every offset below it is acked
	delivered    uint64 // every offset below it went out at least once
	next         uint64 // the lowest offset never handed out since open
	acked        map[uint64]struct{}
	inflight     map[uint64]inflightRec
	redo         offsetHeap
	redeliveries map[uint64]uint64
	// nextDeadline is the earliest visibility deadline in flight, zero
	// when nothing is.
	nextDeadline time.Time
}

// newGroupLedger restarts a group from its saved state. first is the
// oldest record the log still holds: retention may have removed records
// the group never acked, which can no longer be delivered, so the ledger
// starts at first and trimmed says so.
func newGroupLedger(k groupKey, st groupState, first uint64) (l *groupLedger, trimmed bool) {
	loaded := st.Delivered
	if st.Committed < first {
		trimmed = true
		st.Committed, st.Delivered = first, max(st.Delivered, first)
	}
	l = &groupLedger{key: k, loadedDelivered: loaded,
		committed: st.Committed, delivered: st.Delivered, next: st.Committed,
		acked: map[uint64]struct{}{}, inflight: map[uint64]inflightRec{}, redeliveries: map[uint64]uint64{}}
	for _, off := range st.Acked {
		if off >= st.Committed {
			l.acked[off] = struct{}{}
		}
	}
	l.advance() // an acked offset at a skipped-to position
	return l, trimmed
}

// errNeverDelivered and friends are the precise refusals of ack and nack.
func errNeverDelivered(off uint64, k groupKey) error {
	return fmt.Errorf("%w: queue: offset %d%s was never delivered to group %s", ErrInvalidRequest, off, k.shardSuffix(), k.group)
}

// take hands m up to limit records in all (dst included) below tail, each
// visible to m until now + m.visibility, while m is under its in-flight
// limit; it appends them to dst with their previous delivery counts.
// moved reports that the earliest deadline in flight moved earlier, so the
// driver's timer must be re-armed.
func (l *groupLedger) take(m *groupMember, limit int, tail uint64, now time.Time, dst []takenRec) (out []takenRec, moved bool) {
	deadline := now.Add(m.visibility)
	n := len(dst)
	// Only m's own writer takes for m, so the count cannot grow past the
	// limit between this check and the Add below, whichever shard runs it.
	for len(dst) < limit && m.inflight.Load() < int64(m.maxInflight) {
		off, ok := l.nextOffset(tail)
		if !ok {
			break
		}
		c := l.redeliveries[off]
		if c == 0 && off < l.loadedDelivered {
			c = 1 // delivered before the restart, not acked
		}
		l.redeliveries[off] = c + 1
		l.inflight[off] = inflightRec{m: m, deadline: deadline}
		l.delivered = max(l.delivered, off+1)
		m.inflight.Add(1)
		dst = append(dst, takenRec{shard: l.key.shard, offset: off, redeliveries: c})
	}
	if len(dst) > n && (l.nextDeadline.IsZero() || deadline.Before(l.nextDeadline)) {
		l.nextDeadline = deadline
		moved = true
	}
	return dst, moved
}

// nextOffset picks the next record to deliver: the lowest offset waiting
// for redelivery, else the next never delivered below tail.
func (l *groupLedger) nextOffset(tail uint64) (uint64, bool) {
	for l.redo.Len() > 0 {
		off := heap.Pop(&l.redo).(uint64)
		if l.isAcked(off) {
			continue
		}
		if _, out := l.inflight[off]; out {
			continue
		}
		return off, true
	}
	for l.next < tail {
		off := l.next
		l.next++
		if !l.isAcked(off) {
			return off, true
		}
	}
	return 0, false
}

func (l *groupLedger) isAcked(off uint64) bool {
	if off < l.committed {
		return true
	}
	_, ok := l.acked[off]
	return ok
}

// ack marks offsets acked. All are checked before any is applied, so a
// refused ack changes nothing. Acking an acked offset is a no-op; an
// offset never handed out is refused.
func (l *groupLedger) ack(offsets []uint64) error {
	for _, off := range offsets {
		if off >= l.next && !l.isAcked(off) {
			return errNeverDelivered(off, l.key)
		}
	}
	for _, off := range offsets {
		if l.isAcked(off) {
			continue
		}
		if r, ok := l.inflight[off]; ok {
			r.m.inflight.Add(-1)
			delete(l.inflight, off)
		}
		delete(l.redeliveries, off)
		l.acked[off] = struct{}{}
	}
	l.advance()
	return nil
}

// advance moves committed past acked offsets.
func (l *groupLedger) advance() {
	for {
		if _, ok := l.acked[l.committed]; !ok {
			return
		}
		delete(l.acked, l.committed)
		l.committed++
		l.next = max(l.next, l.committed)
	}
}

// nack hands in-flight offsets back for immediate redelivery. All are
// checked first: an acked offset, or one never handed out, refuses the
// whole nack. One already waiting for redelivery is left as it is.
func (l *groupLedger) nack(offsets []uint64) error {
	for _, off := range offsets {
		switch {
		case l.isAcked(off):
			return fmt.Errorf("%w: queue: offset %d%s is already acked by group %s", ErrInvalidRequest, off, l.key.shardSuffix(), l.key.group)
		case off >= l.next:
			return errNeverDelivered(off, l.key)
		}
	}
	for _, off := range offsets {
		if r, ok := l.inflight[off]; ok {
			r.m.inflight.Add(-1)
			delete(l.inflight, off)
			heap.Push(&l.redo, off)
		}
	}
	return nil
}

// release returns everything in flight to m for redelivery (m is gone).
func (l *groupLedger) release(m *groupMember) {
	for off, r := range l.inflight {
		if r.m == m {
			delete(l.inflight, off)
			heap.Push(&l.redo, off)
			m.inflight.Add(-1)
		}
	}
}

// expire moves records past their visibility deadline to redo and returns
// the next deadline (zero when nothing is in flight).
func (l *groupLedger) expire(now time.Time) time.Time {
	var next time.Time
	for off, r := range l.inflight {
		if !now.Before(r.deadline) {
			r.m.inflight.Add(-1)
			delete(l.inflight, off)
			heap.Push(&l.redo, off)
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	l.nextDeadline = next
	return next
}

// state is the state to persist now.
func (l *groupLedger) state() groupState {
	acked := make([]uint64, 0, len(l.acked))
	for off := range l.acked {
		acked = append(acked, off)
	}
	slices.Sort(acked)
	return groupState{Committed: l.committed, Delivered: max(l.delivered, l.committed), Acked: acked}
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
