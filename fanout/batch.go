package fanout

import (
	"context"
	"fmt"
	"time"
)

// Batch defaults, applied when a BatchConfig field is zero.
const (
	DefaultBatchMaxEvents = 64
	DefaultBatchMaxBytes  = 64 << 10
	DefaultBatchMaxDelay  = 250 * time.Microsecond
)

// NoDelay as BatchConfig.MaxDelay sends whatever is already queued without
// waiting for more. Zero cannot mean that, because the zero value means the
// default; the broker maps FELIX_EVENT_BATCH_MAX_DELAY_US=0 to NoDelay. Any
// negative MaxDelay means the same.
const NoDelay time.Duration = -1

// BatchConfig says when a delivery batch is complete. The zero value is
// the throughput profile: 64 events, 64 KiB, 250µs. MaxEvents 1 (or
// MaxDelay NoDelay) is the latency profile: each buffer goes out as soon as
// the writer can take it.
type BatchConfig struct {
	// MaxEvents closes a batch once it holds this many events. 0 means
	// DefaultBatchMaxEvents.
	MaxEvents int
	// MaxBytes closes a batch once it holds this many bytes. 0 means
	// DefaultBatchMaxBytes.
	MaxBytes int
	// MaxDelay is how long after taking the batch's first buffer the batcher
	// may wait for more. It is a deadline fixed by the first buffer and is
	// never extended by later arrivals. 0 means DefaultBatchMaxDelay;
	// NoDelay (any negative value) means never wait.
	MaxDelay time.Duration
}

func (c BatchConfig) withDefaults() BatchConfig {
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultBatchMaxEvents
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultBatchMaxBytes
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultBatchMaxDelay
	}
	return c
}

func (c BatchConfig) validate() error {
	if c.MaxEvents < 0 {
		return fmt.Errorf("%w: MaxEvents %d is negative", ErrInvalidConfig, c.MaxEvents)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("%w: MaxBytes %d is negative", ErrInvalidConfig, c.MaxBytes)
	}
	return nil
}

// batchPlan is the pure batching decision: what the batch holds so far and
// what it may still take. It does no I/O and reads no clock.
type batchPlan struct {
	cfg    BatchConfig
	events int
	bytes  int
}

// add records a buffer taken into the batch.
func (p *batchPlan) add(b *Buffer) {
	p.events += b.Events
	p.bytes += len(b.B)
}

// full reports whether the batch must go out now. A first buffer that alone
// reaches a limit makes the batch full: it goes out alone, never split.
func (p *batchPlan) full() bool {
	return p.events >= p.cfg.MaxEvents || p.bytes >= p.cfg.MaxBytes
}

// room is the largest buffer, in events and bytes, the batch can still take.
func (p *batchPlan) room() (events, bytes int) {
	return p.cfg.MaxEvents - p.events, p.cfg.MaxBytes - p.bytes
}

// waits reports whether an empty queue is worth waiting on.
func (p *batchPlan) waits() bool { return p.cfg.MaxDelay > 0 }

// Batcher gathers delivery batches from a Queue. It is the thin driver
// around batchPlan: one per subscriber writer goroutine, not safe for
// concurrent use. It reuses one timer, so gathering allocates nothing.
//
// Design: the wait for more buffers ends at a deadline fixed when the first
// buffer is taken (first + MaxDelay). The published Felix restarted the
// wait on every arrival, so a steady trickle (one event per 100µs against a
// 250µs delay) kept a batch open until it filled: a 190µs delivery became
// about 6ms. Here such a trickle yields batches of at most three events and
// no event waits longer than MaxDelay for the batcher.
type Batcher struct {
	cfg   BatchConfig
	timer *time.Timer
}

// NewBatcher returns a Batcher configured by cfg.
func NewBatcher(cfg BatchConfig) (*Batcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Batcher{cfg: cfg}, nil
}

// Config returns the effective configuration, defaults applied.
func (bt *Batcher) Config() BatchConfig { return bt.cfg }

// Next waits for the first buffer on q, then takes buffers already queued,
// then, if neither MaxEvents nor MaxBytes is reached and MaxDelay > 0,
// waits for more until the deadline set by the first buffer. A buffer that
// would push the batch past a limit is left for the next batch; a first
// buffer that alone exceeds a limit goes out alone.
//
// The batch is appended to dst (pass dst[:0] of a reused slice to avoid
// allocating) and returned. The caller owns one reference to each buffer,
// writes them in order and releases each (ReleaseAll); the bytes are valid
// until then. Next returns an error (ErrClosed, ErrLagging or ctx.Err())
// only when it returns no buffers: if the queue closes, starts lagging or
// ctx ends mid-batch, the partial batch is returned and the next call
// reports the error.
func (bt *Batcher) Next(ctx context.Context, q *Queue, dst []*Buffer) ([]*Buffer, error) {
	first, err := q.Next(ctx)
	if err != nil {
		return dst, err
	}
	dst = append(dst, first)
	p := batchPlan{cfg: bt.cfg}
	p.add(first)
	if p.full() {
		return dst, nil
	}
	var deadline time.Time
	if p.waits() {
		deadline = time.Now().Add(bt.cfg.MaxDelay)
	}
	armed := false
	defer func() {
		if armed {
			bt.timer.Stop()
		}
	}()
	for {
		maxEvents, maxBytes := p.room()
		b, st := q.take(maxEvents, maxBytes, p.waits())
		switch st {
		case taken:
			dst = append(dst, b)
			p.add(b)
			if p.full() {
				return dst, nil
			}
			continue
		case tooBig, closedQueue, laggingQueue:
			return dst, nil
		}
		if !p.waits() {
			return dst, nil
		}
		if !armed {
			left := time.Until(deadline)
			if left <= 0 {
				q.unpark()
				return dst, nil
			}
			bt.arm(left)
			armed = true
		}
		if q.park(ctx.Done(), bt.timer.C) != parkWoken {
			return dst, nil
		}
	}
}

// arm starts the batch timer. Since Go 1.23 Reset on a stopped or fired
// timer leaves no stale tick in C, so one timer serves every batch.
func (bt *Batcher) arm(d time.Duration) {
	if bt.timer == nil {
		bt.timer = time.NewTimer(d)
		return
	}
	bt.timer.Reset(d)
}
