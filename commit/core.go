package commit

import "fmt"

// core is the sequencer's state machine: the staged reservations, the
// durable position and the terminal error. It has no goroutines, clock or
// lock of its own; the Sequencer guards it with its mutex and its run loop
// drives it with three calls per round:
//
//	st := c.plan(trigger)    // under the lock: take the staged batch, decide
//	err := Syncer.Sync()     // outside the lock, only if st.sync
//	res := c.finish(st, err) // under the lock: record the outcome
//	complete st.batch with res // on the completer goroutine, in order
//	c.recycle(st.batch)      // under the lock, once completed
//
// Design. Offsets are the caller's business; the core only checks that
// reservations arrive in order and remembers the end of the last one (the
// tail). A sync planned under the lock covers every reservation staged
// before it, because the caller appended each batch before reserving it and
// the sync starts after the plan. All of them are released together after
// the sync: that is group commit. Reservations staged while the sync runs go
// to a fresh slice from a small free list and wait for the next round, so
// batching grows with concurrency without any timer, and steady state does
// not allocate.
//
// A failed sync is terminal and recorded in finish before any callback of
// that round runs; every later plan carries the error instead of syncing, so
// nothing completes with nil after a failure is known. We do not retry: after
// a failed fdatasync the kernel may have dropped the dirty pages and marked
// them clean, so a second sync can succeed without the data being on disk.
//
// Rejected alternative: waiters contending for a flush mutex, the winner
// syncing for everyone (upstream disk_log/sync.rs). It needs no goroutine,
// but callbacks would then run on whichever waiter won, and the post-commit
// half (ring append, fanout) must run in offset order, one at a time (on
// the completer, or on the flusher while the completer is idle).
type core struct {
	mode    Mode
	pending []reservation   // staged since the last plan, in order
	spares  [][]reservation // empty batch buffers for reuse (at most maxSpares)
	tail    uint64          // end of the last reservation
	synced  uint64          // tail covered by the last successful sync
	err     error           // terminal; wraps ErrSyncFailed
	closing bool            // Close has begun; Reserve refuses
	started bool            // a reservation was seen; synced starts at its first
}

type reservation struct {
	first, end uint64
	done       func(error)
}

// trigger is why the run loop plans a round.
type trigger uint8

const (
	onReserve trigger = iota // something was staged
	onTick                   // the Periodic interval elapsed
	onFlush                  // Flush or Close: sync unconditionally
)

// step is one planned round.
type step struct {
	batch []reservation // complete these, in order, this round
	tail  uint64        // the sync target: the end of the last staged reservation
	from  uint64        // synced before this round; tail-from = records covered
	sync  bool          // call Syncer.Sync
	// early: complete the batch before syncing (Periodic, Never), because
	// their acknowledgements never wait for the disk.
	early bool
	err   error // terminal error already known: complete the batch with it, do not sync
}

// reserve stages [first, end). It panics if the caller broke the ordering
// contract, which would break disk order = delivery order silently.
func (c *core) reserve(first, end uint64, done func(error)) {
	if done == nil {
		panic("commit: Reserve with nil done")
	}
	if end < first || first < c.tail {
		panic(fmt.Sprintf("commit: Reserve [%d, %d) out of order: tail is %d", first, end, c.tail))
	}
	if !c.started {
		// A reopened log starts at its recovered offset, not 0.
		c.started, c.tail, c.synced = true, first, first
	}
	c.pending = append(c.pending, reservation{first: first, end: end, done: done})
	c.tail = end
}

// plan takes the staged batch and decides the round.
func (c *core) plan(t trigger) step {
	st := step{batch: c.pending, tail: c.tail, from: c.synced, early: c.mode != OnCommit}
	c.pending = nil
	if n := len(c.spares); n > 0 {
		c.pending, c.spares = c.spares[n-1], c.spares[:n-1]
	}
	switch {
	case c.err != nil:
		st.err = c.err
	case t == onFlush:
		st.sync = true
	case t == onTick:
		st.sync = c.tail > c.synced
	case c.mode == OnCommit:
		st.sync = len(st.batch) > 0
	}
	return st
}

// finish records the outcome of the round's sync and returns the error to
// complete the round's batch with. It is the only place the terminal error
// is set, so it is known before the first callback that could observe it.
func (c *core) finish(st step, syncErr error) error {
	switch {
	case st.err != nil:
		return st.err
	case !st.sync:
		return nil
	case syncErr != nil:
		if c.err == nil {
			c.err = fmt.Errorf("%w: %w", ErrSyncFailed, syncErr)
		}
		return c.err
	}
	c.synced = max(c.synced, st.tail)
	return nil
}

// recycle returns a completed batch's buffer for reuse, dropping the
// callbacks so their captures can be collected.
func (c *core) recycle(batch []reservation) {
	clear(batch)
	if len(c.spares) < maxSpares && cap(batch) > 0 {
		c.spares = append(c.spares, batch[:0])
	}
}

// maxSpares bounds the free list: one buffer staging, one syncing and the
// completer's queue in flight (see completerDepth) is the working set.
const maxSpares = completerDepth + 2
