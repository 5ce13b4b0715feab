package fanout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Policy decides what a full Queue does with a push.
type Policy uint8

const (
	// DropNew drops the incoming buffer when it does not fit and keeps what
	// is queued. It is the default: the subscriber sees the oldest events
	// and a gap after them, and the publisher never waits.
	DropNew Policy = iota
	// DropOld evicts (and releases) the oldest queued buffers until the
	// incoming one fits: the subscriber sees the newest events. The
	// publisher never waits. (The published Felix named this mode but
	// behaved like DropNew; here it really evicts.)
	DropOld
	// Block is the lossless mode: a push into a full queue waits until the
	// subscriber frees space, the queue is closed, or the push is cancelled.
	// The publisher therefore runs at the pace of the slowest Block
	// subscriber; use it only where that coupling is wanted.
	Block
	// CatchUp is for consumers that can read what they missed from
	// elsewhere (a durable log): a push that does not fit empties the
	// queue, and the queue refuses pushes until the consumer has read past
	// the refused events and calls Resume. Nothing is lost, so nothing is
	// counted as dropped: refused and emptied events are Overflowed. The
	// consumer learns it must catch up from ErrLagging, which Next, TryNext
	// and Batcher.Next return once the queue is empty. The publisher never
	// waits, and the lagging consumer holds no buffer while it catches up.
	CatchUp
)

// String returns the policy's knob spelling.
func (p Policy) String() string {
	switch p {
	case DropNew:
		return "drop_new"
	case DropOld:
		return "drop_old"
	case Block:
		return "block"
	case CatchUp:
		return "catch_up"
	default:
		return fmt.Sprintf("Policy(%d)", uint8(p))
	}
}

// Queue defaults, applied when a Config field is zero: NATS's pending
// limits per subscription, so that a subscriber that keeps up on average
// rides out seconds of scheduling jitter.
const (
	DefaultCapacity = 65536
	DefaultMaxBytes = 64 << 20
)

// Config configures a Queue. The zero value is a DropNew queue of 65,536
// events or 64 MiB, whichever fills first, outside any Budget.
type Config struct {
	// Capacity bounds the queued events (the sum of Buffer.Events), not the
	// buffers. One buffer larger than Capacity (or MaxBytes) is still
	// admitted into an empty queue because a batch is never split here. 0
	// means DefaultCapacity.
	Capacity int
	// MaxBytes bounds the queued bytes, counted as len(Buffer.B) of every
	// queued buffer. A buffer shared by several queues counts in full in
	// each: this is what the subscriber would have to read, not the memory
	// the broker holds (Budget counts that). 0 means DefaultMaxBytes.
	MaxBytes int
	// Policy is what a push does when the queue is full. The zero value is
	// DropNew.
	Policy Policy
	// Budget, if set, is a bound shared with other queues on the memory
	// their buffers hold together; nil means none.
	Budget *Budget
}

func (c Config) withDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	return c
}

func (c Config) validate() error {
	if c.Capacity < 0 {
		return fmt.Errorf("%w: Capacity %d is negative", ErrInvalidConfig, c.Capacity)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("%w: MaxBytes %d is negative", ErrInvalidConfig, c.MaxBytes)
	}
	if c.Policy > CatchUp {
		return fmt.Errorf("%w: unknown Policy %d", ErrInvalidConfig, uint8(c.Policy))
	}
	return nil
}

// PushResult says what a Push did with the buffer.
type PushResult uint8

const (
	// Queued means the buffer is in the queue and nothing was dropped.
	Queued PushResult = iota
	// QueuedEvicted means the buffer is in the queue after DropOld evicted
	// one or more older buffers; Stats counts what was evicted.
	QueuedEvicted
	// Dropped means the buffer itself was dropped (DropNew on a full queue,
	// a cancelled Block push, or a closed queue) and its reference released.
	Dropped
	// Overflowed means a CatchUp queue refused the buffer (it did not fit,
	// or the queue is lagging) and released it; the consumer reads it
	// elsewhere.
	Overflowed
)

// Stats is a snapshot of a Queue's counters, all in events unless named
// otherwise. Every field is exact. Fields are read one by one without the
// lock, so while pushes and pops are in flight a snapshot can be mid-update
// (and a parked Block push is already in Pushed but not yet in Depth); once
// no Push, Next or Close is in progress
//
//	Pushed == Delivered + DroppedEvents + Overflowed + Depth
//
// holds exactly, and after Close Depth is 0.
type Stats struct {
	// Pushed counts events offered to Push, kept or not.
	Pushed uint64 `json:"pushed"`
	// Enqueued counts events that entered the queue.
	Enqueued uint64 `json:"enqueued"`
	// Delivered counts events handed to the consumer.
	Delivered uint64 `json:"delivered"`
	// DroppedEvents counts events that will never be delivered: dropped on
	// push, evicted by DropOld, cancelled Block pushes, and buffers still
	// queued when the queue was closed.
	DroppedEvents uint64 `json:"dropped_events"`
	// DroppedBuffers counts the buffers behind DroppedEvents.
	DroppedBuffers uint64 `json:"dropped_buffers"`
	// Overflowed counts events a CatchUp queue refused or emptied, which
	// its consumer reads from elsewhere: not lost.
	Overflowed uint64 `json:"overflowed"`
	// Overflows counts the times a CatchUp queue started lagging.
	Overflows uint64 `json:"overflows"`
	// Depth is the number of queued events.
	Depth int `json:"depth"`
	// DepthBuffers is the number of queued buffers.
	DepthBuffers int `json:"depth_buffers"`
	// DepthBytes is the queued bytes, as MaxBytes counts them.
	DepthBytes int `json:"depth_bytes"`
}

// Queue is a bounded per-subscriber queue of Buffer references.
//
// Design: a ring of *Buffer under one mutex that grows by doubling (to at
// most Capacity slots, enough for Capacity one-event buffers) and shrinks
// back when it empties, so a quiet subscriber with a large Capacity costs
// a few slots, and a steady Push/Next cycle allocates nothing. Waiters
// park on one-slot notification channels rather than a sync.Cond so they
// can also select on a context and on close. A waiter registers
// (popWaiters / pushWaiters) in the same critical section in which it saw
// the queue empty or full, and the other side signals only when someone is
// registered; the one-slot channel keeps a signal sent between unlock and
// select, so no wakeup is lost and the uncontended path performs no channel
// operation. A woken waiter that leaves work behind re-signals, so several
// waiters on one side are all woken in turn.
//
// Rejected: a buffered Go channel of *Buffer (cannot count capacity in
// events, cannot evict the oldest, cannot release on close without racing
// the consumer); sync.Cond (cannot be combined with ctx.Done()).
type Queue struct {
	capacity int
	maxBytes int
	policy   Policy
	budget   *Budget

	notEmpty chan struct{} // one slot; wakes a parked consumer
	notFull  chan struct{} // one slot; wakes a parked Block pusher
	closed   chan struct{} // closed by Close; wakes everyone

	pushed         atomic.Uint64
	enqueued       atomic.Uint64
	delivered      atomic.Uint64
	droppedEvents  atomic.Uint64
	droppedBuffers atomic.Uint64
	overflowed     atomic.Uint64
	overflows      atomic.Uint64
	depth          atomic.Int64
	depthBuffers   atomic.Int64
	depthBytes     atomic.Int64

	mu struct {
		sync.Mutex
		ring        []*Buffer
		head        int // index of the oldest buffer
		n           int // queued buffers
		events      int // queued events
		bytes       int // queued len(B)
		pinned      int // queued capacity, for the Budget's share
		closed      bool
		lagging     bool // CatchUp: refusing pushes until Resume
		popWaiters  int
		pushWaiters int
	}
}

// minRing is the ring's starting (and smallest) length.
const minRing = 16

// NewQueue returns an empty queue configured by cfg.
func NewQueue(cfg Config) (*Queue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q := &Queue{
		capacity: cfg.Capacity,
		maxBytes: cfg.MaxBytes,
		policy:   cfg.Policy,
		budget:   cfg.Budget,
		notEmpty: make(chan struct{}, 1),
		notFull:  make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
	q.mu.ring = make([]*Buffer, min(minRing, max(cfg.Capacity, 1)))
	if q.budget != nil {
		q.budget.queues.Add(1)
	}
	return q, nil
}

// Capacity returns the configured capacity in events.
func (q *Queue) Capacity() int { return q.capacity }

// MaxBytes returns the configured bound in bytes.
func (q *Queue) MaxBytes() int { return q.maxBytes }

// Policy returns the configured drop policy.
func (q *Queue) Policy() Policy { return q.policy }

// Stats returns the queue's counters without taking the lock, so a metrics
// scrape never contends with the data path.
func (q *Queue) Stats() Stats {
	return Stats{
		Pushed:         q.pushed.Load(),
		Enqueued:       q.enqueued.Load(),
		Delivered:      q.delivered.Load(),
		DroppedEvents:  q.droppedEvents.Load(),
		DroppedBuffers: q.droppedBuffers.Load(),
		Overflowed:     q.overflowed.Load(),
		Overflows:      q.overflows.Load(),
		Depth:          int(q.depth.Load()),
		DepthBuffers:   int(q.depthBuffers.Load()),
		DepthBytes:     int(q.depthBytes.Load()),
	}
}

// Push offers b to the queue and always consumes one reference to it: the
// caller Retains before pushing a buffer it shares and must not Release on
// the queue's behalf. On success the queue holds the reference until the
// consumer takes it; on a drop the queue releases it at once. A full queue
// behaves per the Policy; under Block, Push waits with no way to cancel (use
// PushWait). On a closed queue Push returns Dropped and ErrClosed. A buffer
// with Events <= 0 is released and rejected with ErrNoEvents.
func (q *Queue) Push(b *Buffer) (PushResult, error) {
	return q.push(nil, nil, b)
}

// Hand gives b to take instead of queueing it, when nothing is queued and
// the consumer is parked waiting for the queue (so it holds nothing taken
// from it that b could overtake): the caller writes b where the consumer
// would, with no consumer to wake. take runs under the queue's lock (no
// consumer takes meanwhile) and reports whether it took b; Hand reports
// the same, and b is counted as pushed, enqueued and delivered then.
// Otherwise nothing happened and the caller pushes b as usual. The caller
// keeps its reference to b either way.
//
// Only a consumer that parks with nothing in hand may be handed to: one
// that waits for more to complete a batch (a Batcher with a delay) holds
// what it took, which b would overtake.
func (q *Queue) Hand(b *Buffer, take func(*Buffer) bool) bool {
	if b.Events <= 0 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.n > 0 || q.mu.popWaiters == 0 || q.mu.closed || q.mu.lagging || !take(b) {
		return false
	}
	ev := uint64(b.Events)
	q.pushed.Add(ev)
	q.enqueued.Add(ev)
	q.delivered.Add(ev)
	return true
}

// PushWait is Push whose Block wait also ends when ctx is done; the buffer
// is then dropped (counted and released) and ctx.Err() returned. For the
// other policies it is the same as Push.
func (q *Queue) PushWait(ctx context.Context, b *Buffer) (PushResult, error) {
	return q.push(ctx, ctx.Done(), b)
}

func (q *Queue) push(ctx context.Context, done <-chan struct{}, b *Buffer) (PushResult, error) {
	ev := b.Events
	if ev <= 0 {
		b.Release()
		return Dropped, ErrNoEvents
	}
	q.pushed.Add(uint64(ev))
	q.mu.Lock()
	for {
		if q.mu.closed {
			q.mu.Unlock()
			q.drop(b)
			return Dropped, ErrClosed
		}
		if q.mu.lagging {
			q.mu.Unlock()
			q.overflow(b)
			return Overflowed, nil
		}
		if q.fitsLocked(b) {
			q.appendLocked(b)
			q.mu.Unlock()
			return Queued, nil
		}
		switch q.policy {
		case DropOld:
			for !q.fitsLocked(b) {
				q.drop(q.removeHeadLocked())
			}
			q.appendLocked(b)
			q.mu.Unlock()
			return QueuedEvicted, nil
		case CatchUp:
			q.startLaggingLocked()
			q.mu.Unlock()
			q.overflow(b)
			return Overflowed, nil
		case Block:
			q.mu.pushWaiters++
			q.mu.Unlock()
			var cancelled bool
			select {
			case <-q.notFull:
			case <-q.closed:
			case <-done:
				cancelled = true
			}
			q.mu.Lock()
			q.mu.pushWaiters--
			if cancelled {
				q.mu.Unlock()
				q.drop(b)
				return Dropped, ctx.Err()
			}
		default: // DropNew
			q.mu.Unlock()
			q.drop(b)
			return Dropped, nil
		}
	}
}

// startLaggingLocked empties a CatchUp queue and makes it refuse pushes
// until Resume, waking a parked consumer to learn it (ErrLagging).
func (q *Queue) startLaggingLocked() {
	q.mu.lagging = true
	q.overflows.Add(1)
	for q.mu.n > 0 {
		q.overflow(q.removeHeadLocked())
	}
	if q.mu.popWaiters > 0 {
		signal(q.notEmpty)
	}
}

// Resume ends a CatchUp queue's lagging: the consumer has read, from
// elsewhere, everything up to where it now wants pushes again. Events
// pushed between the consumer's last read and Resume were refused; the
// consumer finds them by the offsets of what it takes next.
func (q *Queue) Resume() {
	q.mu.Lock()
	q.mu.lagging = false
	q.mu.Unlock()
}

// overflow counts b as refused for a consumer that reads it elsewhere, and
// releases the queue's reference.
func (q *Queue) overflow(b *Buffer) {
	q.overflowed.Add(uint64(b.Events))
	b.Release()
}

// fitsLocked reports whether b fits in the queue's events and bytes, and
// in its share of the Budget. An empty queue admits any buffer so an
// oversize batch is delivered whole rather than never.
func (q *Queue) fitsLocked(b *Buffer) bool {
	return q.roomLocked(b.Events, len(b.B)) && (q.mu.n == 0 || q.budget == nil || q.budget.admits(b, q.mu.pinned))
}

// roomLocked reports whether events and bytes more fit in the queue's own
// bounds.
func (q *Queue) roomLocked(events, bytes int) bool {
	return q.mu.n == 0 || q.mu.events+events <= q.capacity && q.mu.bytes+bytes <= q.maxBytes
}

// appendLocked queues b (which must fit) and wakes a parked consumer.
func (q *Queue) appendLocked(b *Buffer) {
	if q.mu.n == len(q.mu.ring) {
		q.resizeLocked(2 * len(q.mu.ring))
	}
	i := q.mu.head + q.mu.n
	if i >= len(q.mu.ring) {
		i -= len(q.mu.ring)
	}
	q.mu.ring[i] = b
	q.mu.n++
	q.mu.events += b.Events
	q.mu.bytes += len(b.B)
	q.mu.pinned += b.capacity
	q.enqueued.Add(uint64(b.Events))
	if q.budget != nil {
		q.budget.hold(b)
	}
	q.publishDepthLocked()
	if q.mu.popWaiters > 0 {
		signal(q.notEmpty)
	}
	// Another Block pusher may fit in what is left; let it look.
	if q.mu.pushWaiters > 0 && q.mu.events < q.capacity && q.mu.bytes < q.maxBytes {
		signal(q.notFull)
	}
}

// resizeLocked moves the queued buffers, oldest first, into a ring of n
// slots (n >= q.mu.n).
func (q *Queue) resizeLocked(n int) {
	ring := make([]*Buffer, n)
	for i := range q.mu.n {
		ring[i] = q.mu.ring[(q.mu.head+i)%len(q.mu.ring)]
	}
	q.mu.ring, q.mu.head = ring, 0
}

// removeHeadLocked unlinks and returns the oldest buffer. The caller
// accounts for it as delivered, dropped or overflowed. A ring grown for a
// burst goes back to its smallest size once it is empty again.
func (q *Queue) removeHeadLocked() *Buffer {
	b := q.mu.ring[q.mu.head]
	q.mu.ring[q.mu.head] = nil
	q.mu.head++
	if q.mu.head == len(q.mu.ring) {
		q.mu.head = 0
	}
	q.mu.n--
	q.mu.events -= b.Events
	q.mu.bytes -= len(b.B)
	q.mu.pinned -= b.capacity
	if q.budget != nil {
		q.budget.unhold(b)
	}
	if q.mu.n == 0 && len(q.mu.ring) > minRing {
		q.mu.ring, q.mu.head = make([]*Buffer, minRing), 0
	}
	q.publishDepthLocked()
	return b
}

func (q *Queue) publishDepthLocked() {
	q.depth.Store(int64(q.mu.events))
	q.depthBuffers.Store(int64(q.mu.n))
	q.depthBytes.Store(int64(q.mu.bytes))
}

// drop counts b as lost and releases the queue's reference.
func (q *Queue) drop(b *Buffer) {
	q.droppedEvents.Add(uint64(b.Events))
	q.droppedBuffers.Add(1)
	b.Release()
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Close releases every queued buffer (counting it as dropped), makes later
// pushes fail with ErrClosed, and wakes parked pushers (which drop their
// buffer and return ErrClosed) and consumers (which return ErrClosed). It is
// idempotent and safe to call concurrently with everything else.
func (q *Queue) Close() {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return
	}
	q.mu.closed = true
	for q.mu.n > 0 {
		q.drop(q.removeHeadLocked())
	}
	q.mu.Unlock()
	if q.budget != nil {
		q.budget.queues.Add(-1)
	}
	close(q.closed)
}

// Done returns a channel that is closed when the queue is closed.
func (q *Queue) Done() <-chan struct{} { return q.closed }

// TryNext returns the oldest buffer without waiting, or false if the queue
// is empty or closed. The caller owns the returned reference and must
// Release it once the bytes are written; the bytes are valid until then.
//
// A lagging CatchUp queue is empty, so TryNext reports false; Next tells
// the two apart.
func (q *Queue) TryNext() (*Buffer, bool) {
	b, st := q.take(unlimited, unlimited, false)
	return b, st == taken
}

// Next returns the oldest buffer, waiting for one if the queue is empty. It
// returns ErrClosed once the queue is closed, ErrLagging while a CatchUp
// queue refuses pushes (until Resume), and ctx.Err() if ctx is done
// first. The caller owns the returned reference and must Release it once the
// bytes are written; the bytes are valid until then.
func (q *Queue) Next(ctx context.Context) (*Buffer, error) {
	for {
		b, st := q.take(unlimited, unlimited, true)
		switch st {
		case taken:
			return b, nil
		case closedQueue:
			return nil, ErrClosed
		case laggingQueue:
			return nil, ErrLagging
		}
		if q.park(ctx.Done(), nil) == parkCancelled {
			return nil, ctx.Err()
		}
	}
}
