package broker

import (
	"container/heap"
	"fmt"
	"slices"
	"time"
)

// inflightRec is a record in play and not yet settled: claimed by a member
// until deadline, reserved for a member that reclaimed it (it goes to that
// member first, as another attempt), or, with no member, nacked with a
// delay and owed to the group again at deadline.
type inflightRec struct {
	m        *groupMember
	deadline time.Time
	reserved bool
}

// groupLedger is the delivery state of one consumer group over one shard:
// which records are finished (acked or dead-lettered), which are out to
// which member until when, which wait for redelivery, how many times each
// went out, and the group's dead letters. It is the pure core of
// groupShard: no clock (the time is passed in), no lock (groupShard holds
// its own around every call) and no I/O (groupShard reads the log and
// writes the state file). The one thing it touches outside itself is each
// member's in-flight count, an atomic the ledgers of every shard a member
// takes from share, so that max_inflight bounds them together.
//
// Invariant: a record is in exactly one of finished (below committed and
// not redriven, or in acked), in play (inflight: claimed, reserved or
// delayed), owed (in redo), or not yet delivered (at or above next); so it
// is out to at most one member at a time. Records go out reserved ones
// first, then owed ones lowest offset first, then never delivered ones in
// offset order. A record whose attempts reached maxAttempts is
// dead-lettered when it would be owed again: listed in dead, then
// finished, in one state write.
type groupLedger struct {
	key groupKey
	// loadedDelivered is the delivered mark of the state the ledger was
	// opened from: records below it that are not acked were delivered
	// before the restart, so they count at least one attempt.
	loadedDelivered uint64
	// maxAttempts bounds the deliveries of a record; 0 is no bound.
	maxAttempts uint32
	// exists: the group has a position (a state was saved, or a seek or a
	// delivery made one); group_seek with if_new moves only a new group.
	exists bool

	committed uint64 // every offset below it is finished, except redriven ones
	delivered uint64 // every offset below it went out at least once
	next      uint64 // the lowest offset never handed out since open
	acked     map[uint64]struct{}
	inflight  map[uint64]inflightRec
	redo      offsetHeap
	attempts  map[uint64]uint64 // deliveries of records in play or owed
	dead      map[uint64]struct{}
	redriven  map[uint64]struct{} // dead letters below committed owed again
	// lastReclaim is the newest connection whose poll reclaimed, per
	// member name: an older connection's reclaim is an ordinary poll.
	lastReclaim map[memberIdent]uint64
	// nextDeadline is the earliest deadline in play, zero when none is.
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
	l = &groupLedger{key: k, loadedDelivered: loaded, maxAttempts: st.MaxAttempts, exists: st.Exists,
		committed: st.Committed, delivered: st.Delivered, next: st.Committed,
		acked: map[uint64]struct{}{}, inflight: map[uint64]inflightRec{}, attempts: map[uint64]uint64{},
		dead: map[uint64]struct{}{}, redriven: map[uint64]struct{}{}, lastReclaim: map[memberIdent]uint64{}}
	for _, off := range st.Acked {
		if off >= st.Committed {
			l.acked[off] = struct{}{}
		}
	}
	for _, off := range st.Dead {
		l.dead[off] = struct{}{}
	}
	for _, off := range st.Redriven {
		if off >= first {
			l.redriven[off] = struct{}{}
			heap.Push(&l.redo, off)
		}
	}
	for _, a := range st.Attempts {
		l.attempts[a.offset] = a.count
	}
	l.advance() // an acked offset at a skipped-to position
	return l, trimmed
}

// errNeverDelivered refuses a settle for an offset the ledger never handed
// out: at or past the tail it never existed (invalid_request); below it,
// it was written after the state was last rebuilt and not handed out yet
// (stale_claim: the record will be delivered).
func (l *groupLedger) errNeverDelivered(off, tail uint64) error {
	err := fmt.Errorf("%w: queue: offset %d%s was never delivered to group %s", ErrInvalidRequest, off, l.key.shardSuffix(), l.key.group)
	if off < tail {
		return &staleClaim{err: err}
	}
	return err
}

// takeArgs are the bounds of one take.
type takeArgs struct {
	m          *groupMember
	limit      int           // records in all (dst included)
	tail       uint64        // the committed tail: nothing at or past it goes out
	now        time.Time     //
	visibility time.Duration // how long the claims stand
	groupCap   int           // records in play on this shard at most; 0 is none
}

// take hands a.m up to a.limit records in all (dst included) while it is
// under its in-flight limit and the group under its cap, and appends them
// to dst with their earlier delivery counts. moved reports that the
// earliest deadline in play moved earlier (the driver re-arms its timer),
// dead that records were dead-lettered on the way (their attempts ran out
// before a restart), which the driver persists.
func (l *groupLedger) take(a takeArgs, dst []takenRec) (out []takenRec, moved, dead bool) {
	m := a.m
	deadline := a.now.Add(a.visibility)
	n := len(dst)
	// Only m's own writer takes for m, so the count cannot grow past the
	// limit between this check and the Add below, whichever shard runs it.
	for len(dst) < a.limit {
		off, reserved, ok := l.nextFor(m, a)
		if !ok {
			break
		}
		c := l.attempts[off]
		if c == 0 && off < l.loadedDelivered {
			c = 1 // delivered before the restart, not acked
		}
		if l.spent(c) && len(l.dead) < maxDeadLetters {
			if reserved {
				m.inflight.Add(-1)
				delete(l.inflight, off)
			}
			l.deadLetter(off)
			dead = true
			continue
		}
		l.attempts[off] = c + 1
		l.inflight[off] = inflightRec{m: m, deadline: deadline}
		l.delivered = max(l.delivered, off+1)
		l.exists = true
		if !reserved {
			m.inflight.Add(1)
		}
		dst = append(dst, takenRec{shard: l.key.shard, offset: off, redeliveries: c})
	}
	if len(dst) > n && (l.nextDeadline.IsZero() || deadline.Before(l.nextDeadline)) {
		l.nextDeadline = deadline
		moved = true
	}
	return dst, moved, dead
}

// spent reports whether a record delivered c times may not go out again.
func (l *groupLedger) spent(c uint64) bool {
	return l.maxAttempts > 0 && c >= uint64(l.maxAttempts)
}

// nextFor picks the next record for m: one reserved for it, else (while m
// and the group have room) the lowest offset owed, else the next never
// delivered below the tail.
func (l *groupLedger) nextFor(m *groupMember, a takeArgs) (off uint64, reserved, ok bool) {
	for len(m.reserved) > 0 {
		off := m.reserved[0]
		m.reserved = m.reserved[1:]
		if r, in := l.inflight[off]; in && r.m == m && r.reserved {
			return off, true, true
		}
	}
	if m.inflight.Load() >= int64(m.maxInflight) || (a.groupCap > 0 && len(l.inflight) >= a.groupCap) {
		return 0, false, false
	}
	for l.redo.Len() > 0 {
		off := heap.Pop(&l.redo).(uint64)
		if l.isFinished(off) {
			continue
		}
		if _, out := l.inflight[off]; out {
			continue
		}
		return off, false, true
	}
	for l.next < a.tail {
		off := l.next
		l.next++
		if !l.isFinished(off) {
			return off, false, true
		}
	}
	return 0, false, false
}

// untake gives back a record take handed to m that was never sent (a
// poll's byte budget ran out first): as if it had not been taken.
func (l *groupLedger) untake(m *groupMember, off uint64) {
	if r, ok := l.inflight[off]; !ok || r.m != m {
		return
	}
	delete(l.inflight, off)
	m.inflight.Add(-1)
	if c := l.attempts[off]; c > 1 {
		l.attempts[off] = c - 1
	} else {
		delete(l.attempts, off)
	}
	heap.Push(&l.redo, off)
}

func (l *groupLedger) isFinished(off uint64) bool {
	if _, ok := l.redriven[off]; ok {
		return false
	}
	if off < l.committed {
		return true
	}
	_, ok := l.acked[off]
	return ok
}

// checkHandedOut refuses an offset never handed out (errNeverDelivered).
func (l *groupLedger) checkHandedOut(off, tail uint64) error {
	if off >= l.next && !l.isFinished(off) {
		return l.errNeverDelivered(off, tail)
	}
	return nil
}

// ack finishes offsets. All are checked before any is applied, so a
// refused ack changes nothing. Acking a finished offset is a no-op; an
// offset never handed out is refused.
func (l *groupLedger) ack(offsets []uint64, tail uint64) error {
	for _, off := range offsets {
		if err := l.checkHandedOut(off, tail); err != nil {
			return err
		}
	}
	for _, off := range offsets {
		if !l.isFinished(off) {
			l.finish(off)
		}
	}
	l.advance()
	return nil
}

// finish settles a record in play or owed: it leaves whoever holds it and
// counts as acked (advance moves committed past it).
func (l *groupLedger) finish(off uint64) {
	if r, ok := l.inflight[off]; ok {
		if r.m != nil {
			r.m.inflight.Add(-1)
		}
		delete(l.inflight, off)
	}
	delete(l.attempts, off)
	if _, ok := l.redriven[off]; ok {
		delete(l.redriven, off) // below committed: finished again
		return
	}
	l.acked[off] = struct{}{}
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

// maxDeadLetters bounds a group shard's dead letters (each is 8 bytes of
// a state file rewritten on every ack): a record that runs out of attempts
// past it is owed again instead, until some are discarded or redriven.
const maxDeadLetters = 1 << 20

// owe hands a record back to the group: owed again at once, or
// dead-lettered when its attempts ran out (true: the state changed).
func (l *groupLedger) owe(off uint64) bool {
	if l.spent(l.attempts[off]) && len(l.dead) < maxDeadLetters {
		l.deadLetter(off)
		return true
	}
	heap.Push(&l.redo, off)
	return false
}

// deadLetter lists off as a dead letter and finishes it.
func (l *groupLedger) deadLetter(off uint64) {
	l.dead[off] = struct{}{}
	l.finish(off)
	l.advance()
}

// nackArgs are a nack's options (group_nack's delay_ms and attempts).
type nackArgs struct {
	delay time.Duration
	// attempts, when not 0, names the delivery handed back: the nack is
	// refused (stale_claim, fatal) unless that claim still stands.
	attempts uint64
	now      time.Time
}

// nack hands in-flight offsets back: owed again at once, or, with a delay,
// held by nobody until then. All are checked first: a finished offset, or
// one never handed out, refuses the whole nack. One owed or delayed
// already is left as it is. dead reports dead-lettered records (their
// attempts ran out), moved a deadline earlier than the timer's.
func (l *groupLedger) nack(offsets []uint64, tail uint64, a nackArgs) (dead, moved bool, err error) {
	for _, off := range offsets {
		if l.isFinished(off) {
			return false, false, fmt.Errorf("%w: queue: offset %d%s is already acked by group %s", ErrInvalidRequest, off, l.key.shardSuffix(), l.key.group)
		}
		if err := l.checkHandedOut(off, tail); err != nil {
			return false, false, err
		}
		if a.attempts != 0 && !l.claimStands(off, a.attempts) {
			return false, false, l.staleClaim(off, a.attempts)
		}
	}
	for _, off := range offsets {
		r, ok := l.inflight[off]
		if !ok || r.m == nil {
			continue
		}
		r.m.inflight.Add(-1)
		delete(l.inflight, off)
		switch {
		case a.delay > 0 && !l.spent(l.attempts[off]):
			deadline := a.now.Add(a.delay)
			l.inflight[off] = inflightRec{deadline: deadline}
			if l.nextDeadline.IsZero() || deadline.Before(l.nextDeadline) {
				l.nextDeadline, moved = deadline, true
			}
		case l.owe(off):
			dead = true
		}
	}
	return dead, moved, nil
}

// claimStands reports whether delivery attempts of off is still claimed.
func (l *groupLedger) claimStands(off, attempts uint64) bool {
	r, ok := l.inflight[off]
	return ok && r.m != nil && !r.reserved && l.attempts[off] == attempts
}

func (l *groupLedger) staleClaim(off, attempts uint64) error {
	return &staleClaim{fatal: true, err: fmt.Errorf("%w: queue: the claim of delivery %d of offset %d%s no longer stands in group %s",
		ErrInvalidRequest, attempts, off, l.key.shardSuffix(), l.key.group)}
}

// extend keeps the claim of delivery attempts of off standing until now+d.
func (l *groupLedger) extend(off, attempts uint64, now time.Time, d time.Duration) error {
	if !l.claimStands(off, attempts) {
		return l.staleClaim(off, attempts)
	}
	r := l.inflight[off]
	r.deadline = now.Add(d)
	l.inflight[off] = r
	return nil
}

// release hands everything m holds back to the group (m is gone); dead
// reports records dead-lettered on the way.
func (l *groupLedger) release(m *groupMember) (dead bool) {
	for off, r := range l.inflight {
		if r.m == m {
			delete(l.inflight, off)
			m.inflight.Add(-1)
			dead = l.owe(off) || dead
		}
	}
	return dead
}

// expire hands back records past their deadline, and returns the next
// deadline (zero when nothing is in play) and whether records were
// dead-lettered.
func (l *groupLedger) expire(now time.Time) (next time.Time, dead bool) {
	for off, r := range l.inflight {
		if !now.Before(r.deadline) {
			if r.m != nil {
				r.m.inflight.Add(-1)
			}
			delete(l.inflight, off)
			dead = l.owe(off) || dead
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	l.nextDeadline = next
	return next, dead
}

// state is the state to persist now.
func (l *groupLedger) state() groupState {
	st := groupState{Committed: l.committed, Delivered: max(l.delivered, l.committed), MaxAttempts: l.maxAttempts,
		Exists: l.exists, Acked: sortedKeys(l.acked), Dead: sortedKeys(l.dead), Redriven: sortedKeys(l.redriven)}
	for _, off := range sortedKeys(l.attempts) {
		if len(st.Attempts) == maxStateAttempts {
			break // the rest count from loadedDelivered after a restart
		}
		if !l.isFinished(off) {
			st.Attempts = append(st.Attempts, offsetCount{offset: off, count: l.attempts[off]})
		}
	}
	return st
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for off := range m {
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}

// maxStateAttempts bounds the delivery counts a state file keeps.
const maxStateAttempts = 1 << 20

// takenRec is one record a member took.
type takenRec struct {
	shard        uint32
	offset       uint64
	redeliveries uint64
}

// offsetHeap is a min-heap of offsets owed to the group, so the oldest
// unsettled record goes out first.
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
