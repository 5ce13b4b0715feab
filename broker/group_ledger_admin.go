package broker

import (
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/felixmq/felix/wire"
)

// The ledger's dead letters, its position (seek, delete), its description
// and member reclaim: the published 0.6 group operations beyond poll, ack
// and nack. Like the rest of groupLedger they are pure: groupShard calls
// them under its lock and persists what they changed.

// staleClaim refuses a settle or an extension the group has no claim for:
// retryable for an ack or nack of a record written after the ledger was
// last rebuilt (it will be delivered), fatal for an extension or an
// attempts-named nack whose claim no longer stands. It is an
// ErrInvalidRequest too, for callers that only ask whether it was refused.
type staleClaim struct {
	fatal bool
	err   error
}

func (e *staleClaim) Error() string { return e.err.Error() }
func (e *staleClaim) Unwrap() error { return e.err }

// TypedError is stale_claim with its retry class.
func (e *staleClaim) TypedError() *wire.TypedError {
	t := wire.NewTypedError(wire.CodeStaleClaim)
	if e.fatal {
		t.Retry = wire.Fatal
	}
	return t
}

// deadLetters lists the group's dead letters, lowest offset first.
func (l *groupLedger) deadLetters() []uint64 { return sortedKeys(l.dead) }

// deadLetterNow lists a record in play as a dead letter and finishes it
// (group_dead_letter), whoever holds it. A finished record is refused, and
// one never handed out as for an ack.
func (l *groupLedger) deadLetterNow(off, tail uint64) error {
	if l.isFinished(off) {
		return fmt.Errorf("%w: queue: offset %d%s is already finished by group %s", ErrInvalidRequest, off, l.key.shardSuffix(), l.key.group)
	}
	if err := l.checkHandedOut(off, tail); err != nil {
		return err
	}
	if len(l.dead) >= maxDeadLetters {
		return fmt.Errorf("%w: queue: group %s%s holds %d dead letters; discard or redrive some", ErrLimitExceeded,
			l.key.group, l.key.shardSuffix(), len(l.dead))
	}
	l.deadLetter(off)
	return nil
}

func (l *groupLedger) errNotDead(off uint64) error {
	return fmt.Errorf("%w: queue: offset %d%s is not a dead letter of group %s", ErrInvalidRequest, off, l.key.shardSuffix(), l.key.group)
}

// discard drops a dead letter: it stays finished.
func (l *groupLedger) discard(off uint64) error {
	if _, ok := l.dead[off]; !ok {
		return l.errNotDead(off)
	}
	delete(l.dead, off)
	return nil
}

// redrive puts a dead letter back: owed to the group again, with its
// attempts counted afresh. A record the log no longer holds (below first)
// cannot be delivered, and is refused.
func (l *groupLedger) redrive(off, first uint64) error {
	if _, ok := l.dead[off]; !ok {
		return l.errNotDead(off)
	}
	if off < first {
		return fmt.Errorf("%w: queue: offset %d was removed by retention (the log starts at %d)", ErrInvalidRequest, off, first)
	}
	delete(l.dead, off)
	delete(l.attempts, off)
	if off < l.committed {
		l.redriven[off] = struct{}{}
	} else {
		delete(l.acked, off)
	}
	heap.Push(&l.redo, off)
	return nil
}

// seek moves the group's position to pos (first <= pos <= tail, checked by
// the caller): every claim standing is voided and nothing below pos is
// owed but redriven dead letters; the dead letters stay. With ifNew an
// existing group stays where it is. It returns where the group stands and
// whether it moved.
func (l *groupLedger) seek(pos uint64, ifNew bool) (uint64, bool) {
	if ifNew && l.exists {
		return l.committed, false
	}
	for off, r := range l.inflight {
		if r.m != nil {
			r.m.inflight.Add(-1)
		}
		delete(l.inflight, off)
	}
	l.committed, l.delivered, l.next = pos, pos, pos
	l.loadedDelivered = min(l.loadedDelivered, pos)
	clear(l.acked)
	clear(l.attempts)
	l.redo = l.redo[:0]
	for off := range l.redriven {
		if off >= pos {
			delete(l.redriven, off)
			continue
		}
		heap.Push(&l.redo, off)
	}
	l.nextDeadline = time.Time{}
	l.exists = true
	return pos, true
}

// reset forgets the group (group_delete): position, dead letters, claims.
// It returns whether there was a group to forget.
func (l *groupLedger) reset(first uint64) bool {
	existed := l.exists || len(l.dead) > 0
	l.seek(first, false)
	clear(l.dead)
	clear(l.redriven)
	l.redo = l.redo[:0]
	l.exists, l.loadedDelivered = false, 0
	return existed
}

// groupInfo is what group_describe reports.
type groupInfo struct {
	committed      uint64
	exists         bool
	inFlight, owed uint64
	deadLetters    uint64
	maxAttempts    uint32
}

func (l *groupLedger) describe() groupInfo {
	info := groupInfo{committed: l.committed, exists: l.exists, inFlight: uint64(len(l.inflight)),
		deadLetters: uint64(len(l.dead)), maxAttempts: l.maxAttempts}
	seen := map[uint64]struct{}{}
	for _, off := range l.redo {
		if _, dup := seen[off]; dup || l.isFinished(off) {
			continue
		}
		if _, out := l.inflight[off]; out {
			continue
		}
		seen[off] = struct{}{}
		info.owed++
	}
	return info
}

// memberIdent names a member across its connections: its consumer name
// and the principal it authenticated as, so one principal's name never
// reaches another's claims. The zero value is an anonymous member, which
// nothing reclaims.
type memberIdent struct {
	principal, consumer string
}

// reclaim reserves for m every claim its member name holds from an older
// connection, once per connection: they go to m first, each as another
// attempt. A reservation lapses at the claim's deadline, and the record is
// then owed to the group like any lapsed claim.
func (l *groupLedger) reclaim(m *groupMember) {
	if m.ident == (memberIdent{}) || l.lastReclaim[m.ident] >= m.connID {
		return
	}
	l.lastReclaim[m.ident] = m.connID
	var offs []uint64
	for off, r := range l.inflight {
		if r.m != nil && r.m != m && r.m.ident == m.ident && r.m.connID < m.connID {
			r.m.inflight.Add(-1)
			m.inflight.Add(1)
			l.inflight[off] = inflightRec{m: m, deadline: r.deadline, reserved: true}
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	m.reserved = append(m.reserved, offs...)
}
