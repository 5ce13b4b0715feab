package commit

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// GoroutineLabel is the pprof label (key "goroutine") of every Sequencer's
// flusher goroutine (its completer's is GoroutineLabel+"-complete"), so CPU
// profiles and cpuprofile/ name them the same way.
const GoroutineLabel = "felix-commit"

// Sequencer is the group-commit sequencer of one log: writers reserve the
// record ranges they appended, one flusher goroutine syncs, and one
// completer goroutine runs their callbacks strictly in reservation order.
// See core for the design.
//
// Why two goroutines: the callbacks are the post-commit half (ring append,
// fanout, ack), and fanout to a Block subscriber waits for room in its
// queue. On one goroutine that wait stalled the next sync, so the disk and
// the subscriber took turns (measured: the flusher spent 97% of a loaded
// durable run completing and 3% syncing). Now the next sync runs while the
// previous batch is still being delivered; completerDepth batches may wait
// for the completer before the flusher waits too.
//
// All methods are safe for concurrent use. Reserve must be called in append
// order, which the caller guarantees by reserving under its append lock.
type Sequencer struct {
	syncer   Syncer
	mode     Mode
	interval time.Duration
	maxDelay time.Duration
	inline   bool // Config.InlineCallbacks
	log      *slog.Logger

	wake      chan struct{}   // capacity 1: something was staged
	flushReq  chan chan error // Flush requests, served by run
	closing   chan struct{}   // closed by the first Close
	exited    chan struct{}   // closed when run and the completer return
	completed chan completion // run → completer, in round order
	// queued counts what was sent on completed and is not done yet: the
	// flusher runs a batch itself only when it is 0, so callbacks still
	// run one at a time, in round order.
	queued    atomic.Int64
	closeOnce sync.Once
	closeErr  error // written by run before exited is closed

	stats stats

	// Written and read by the flusher goroutine only: what the last sync
	// released and how long it took, and what gathers bring in, for gather.
	lastReleased int
	lastSync     time.Duration
	gatherEst    gatherEstimate

	mu struct {
		sync.Mutex
		core core
	}
}

// New starts a Sequencer and its flusher goroutine. Close stops it.
func New(cfg Config) (*Sequencer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sequencer{
		syncer:    cfg.Syncer,
		mode:      cfg.Mode,
		interval:  cfg.Interval,
		maxDelay:  cfg.MaxDelay,
		inline:    cfg.InlineCallbacks,
		log:       cfg.Logger,
		wake:      make(chan struct{}, 1),
		flushReq:  make(chan chan error),
		closing:   make(chan struct{}),
		exited:    make(chan struct{}),
		completed: make(chan completion, completerDepth),
	}
	s.mu.core.mode = cfg.Mode
	go pprof.Do(context.Background(), pprof.Labels("goroutine", GoroutineLabel), func(context.Context) {
		s.run()
	})
	return s, nil
}

// Reserve registers the records [first, end) that the caller has just
// appended. It must be called in append order (first no less than the end of
// the previous reservation; it panics otherwise) and is cheap: no I/O, and no
// allocation once the staging buffers have grown to the working set.
//
// If Reserve returns nil, done is called exactly once, later, from the
// completer goroutine (or the flusher's, see Config.InlineCallbacks),
// strictly in reservation order and never concurrently with another
// callback of this Sequencer, so post-commit work done in it
// (replay-ring append, fanout, ack) happens in disk order. done must not call
// Flush or Close (they wait for the completer). It may block (a full Block
// subscriber queue): syncs go on meanwhile, and later callbacks wait. done
// receives:
//   - OnCommit: nil after a Sync that started after the range was staged, so
//     the range is durable;
//   - Periodic, Never: nil without waiting for a sync;
//   - any mode: an error wrapping ErrSyncFailed and its cause, once a sync
//     has failed, for every reservation not yet completed with nil.
//
// After Close has begun, Reserve returns an error wrapping ErrClosed (and the
// terminal error, if any) and done is never called: the caller must not ack.
func (s *Sequencer) Reserve(first, end uint64, done func(error)) error {
	s.mu.Lock()
	if s.mu.core.closing {
		err := s.closedErrLocked()
		s.mu.Unlock()
		return err
	}
	s.mu.core.reserve(first, end, done)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // the flusher is already due to look
	}
	return nil
}

// Flush syncs now, completes every reservation staged before it, and waits.
// It syncs even in Never mode and even if nothing was reserved. It returns
// the terminal error if a sync has failed (without syncing again), and an
// error wrapping ErrClosed once Close has begun.
func (s *Sequencer) Flush() error {
	if err := s.closedErr(); err != nil {
		return err
	}
	reply := make(chan error, 1)
	select {
	case s.flushReq <- reply:
		return <-reply
	case <-s.exited: // Close won the race
		return s.closedErr()
	}
}

// Close syncs one last time (in every mode, unless a sync already failed),
// completes every staged reservation, stops the flusher goroutine and waits
// for it. It returns the terminal error, if any, and nil otherwise. Close is
// idempotent: later calls wait for the first and return the same result.
func (s *Sequencer) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.core.closing = true
		s.mu.Unlock()
		close(s.closing)
	})
	<-s.exited
	return s.closeErr
}

// Err returns the terminal error (wrapping ErrSyncFailed) if a sync has
// failed, and nil otherwise.
func (s *Sequencer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.core.err
}

// Stats returns a snapshot of the counters and histograms.
func (s *Sequencer) Stats() Stats { return s.stats.snapshot() }

// closedErr returns nil before Close, and afterwards ErrClosed wrapped
// with the terminal error if there is one.
func (s *Sequencer) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closedErrLocked()
}

func (s *Sequencer) closedErrLocked() error {
	if !s.mu.core.closing {
		return nil
	}
	if err := s.mu.core.err; err != nil {
		return fmt.Errorf("%w after %w", ErrClosed, err)
	}
	return ErrClosed
}

// run is the flusher goroutine: it waits for work and runs rounds.
func (s *Sequencer) run() {
	done := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("goroutine", GoroutineLabel+"-complete"), func(context.Context) {
		s.completer(done)
	})
	defer func() {
		close(s.completed)
		<-done
		close(s.exited)
	}()
	var tick <-chan time.Time
	if s.mode == Periodic {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		tick = t.C
	}
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	for {
		select {
		case <-s.wake:
			switch {
			case s.mode == OnCommit && s.maxDelay > 0:
				delay.Reset(s.maxDelay)
				select {
				case <-delay.C:
				case <-s.closing:
				}
			case s.mode == OnCommit:
				s.gather()
			}
			s.round(onReserve)
		case <-tick:
			s.round(onTick)
		case reply := <-s.flushReq:
			// Answered by the completer once the round's batch completed.
			s.enqueue(completion{reply: reply, err: s.round(onFlush)})
		case <-s.closing:
			// Reserve refuses from here on, so this round takes the last
			// staged reservation; the deferred close drains the completer.
			s.closeErr = s.round(onFlush)
			return
		}
	}
}

// round plans, syncs if planned, records the outcome and completes the
// batch. It returns the error the batch was (or would be) completed with.
func (s *Sequencer) round(t trigger) error {
	s.mu.Lock()
	st := s.mu.core.plan(t)
	s.mu.Unlock()

	if st.early && st.err == nil {
		s.hand(completion{batch: st.batch})
	}
	var syncErr error
	if st.sync {
		start := time.Now()
		syncErr = s.syncer.Sync()
		s.lastSync = time.Since(start)
		s.stats.syncLatency.Record(uint64(s.lastSync))
	}

	s.mu.Lock()
	res := s.mu.core.finish(st, syncErr)
	s.mu.Unlock()

	switch {
	case syncErr != nil:
		// Only the first failure reaches here: later rounds do not sync.
		s.stats.syncErrors.Add(1)
		s.log.Error("commit: sync failed; the log is read-only from now on",
			"err", syncErr, "durable_upto", st.from, "tail", st.tail)
	case st.sync:
		s.stats.syncs.Add(1)
		s.stats.recordsPerSync.Record(st.tail - st.from)
		waiters := len(st.batch)
		if st.early {
			waiters = 0
		}
		s.lastReleased = waiters
		s.stats.waitersPerSync.Record(uint64(waiters))
	}
	if !st.early || st.err != nil {
		s.hand(completion{batch: st.batch, err: res})
	}
	return res
}

// hand completes c on the flusher, when its callbacks never wait for long
// and nothing is queued for the completer (so order holds and no callback
// runs concurrently with another), else on the completer.
func (s *Sequencer) hand(c completion) {
	if s.inline && s.queued.Load() == 0 {
		s.completeOne(c)
		return
	}
	s.enqueue(c)
}

func (s *Sequencer) enqueue(c completion) {
	s.queued.Add(1)
	s.completed <- c
}

// completerDepth is how many rounds may wait for the completer before the
// flusher waits for it: enough to keep syncing while one slow batch is
// being delivered, few enough that acknowledged work stays bounded.
const completerDepth = 4

// completion is one round's batch to complete with err, or (reply set) a
// Flush to answer with err once everything before it has completed.
type completion struct {
	batch []reservation
	err   error
	reply chan error
}

// completer runs the callbacks, in round order, until run closes
// s.completed.
func (s *Sequencer) completer(done chan<- struct{}) {
	defer close(done)
	for c := range s.completed {
		s.completeOne(c)
		s.queued.Add(-1)
	}
}

// completeOne answers a Flush, or runs a batch's callbacks and recycles it.
func (s *Sequencer) completeOne(c completion) {
	if c.reply != nil {
		c.reply <- c.err
		return
	}
	s.complete(c.batch, c.err)
	if cap(c.batch) > 0 {
		s.mu.Lock()
		s.mu.core.recycle(c.batch)
		s.mu.Unlock()
	}
}

// complete runs the callbacks of a batch in order.
func (s *Sequencer) complete(batch []reservation, err error) {
	if len(batch) == 0 {
		return
	}
	var records uint64
	for _, r := range batch {
		r.done(err)
		records += r.end - r.first
	}
	s.stats.reservations.Add(uint64(len(batch)))
	s.stats.records.Add(records)
	if err != nil {
		s.stats.failed.Add(uint64(len(batch)))
	}
}
