package fanout

import "sync/atomic"

// Budget bounds the memory that the buffers in a set of queues hold
// together (one Budget per broker, shared by every subscriber queue).
//
// Design: a buffer counts once, by its capacity (the memory it pins), while
// at least one queue holds it, however many queues share it; a buffer the
// subscribers share is the point of encoding once, so counting it per queue
// would refuse a hundred subscribers of one stream a hundredth of what they
// cost. Over the limit, a push is refused (by the queue's policy, as if it
// were full) only into a queue that already holds at least its fair share,
// the limit divided by the number of queues: the subscribers that pin the
// memory are the ones behind, and a subscriber that keeps up holds little
// and goes on receiving. The queues held below their share can still grow
// to it, so the held bytes stay below twice the limit plus one buffer per
// queue.
type Budget struct {
	limit  int64
	used   atomic.Int64 // capacity of the buffers some queue holds
	queues atomic.Int64 // open queues sharing the budget
}

// NewBudget returns a Budget of limit bytes; 0 or less means no limit (the
// held bytes are still counted).
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit returns the configured limit in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used returns the bytes the queues hold now, each shared buffer counted
// once.
func (b *Budget) Used() int64 { return b.used.Load() }

// Queues returns the number of open queues sharing the budget.
func (b *Budget) Queues() int64 { return b.queues.Load() }

// admits reports whether a queue whose buffers pin pinned bytes may take
// buf.
func (b *Budget) admits(buf *Buffer, pinned int) bool {
	if b.limit <= 0 || buf.held.Load() > 0 || b.used.Load()+int64(buf.capacity) <= b.limit {
		return true // already paid for, or within the limit
	}
	return int64(pinned) < b.limit/max(b.queues.Load(), 1)
}

// hold and unhold count buf while at least one queue holds it.
func (b *Budget) hold(buf *Buffer) {
	if buf.held.Add(1) == 1 {
		b.used.Add(int64(buf.capacity))
	}
}

func (b *Budget) unhold(buf *Buffer) {
	if buf.held.Add(-1) == 0 {
		b.used.Add(-int64(buf.capacity))
	}
}
