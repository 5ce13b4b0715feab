package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/client"
)

// pubWorker is one publisher: its own connection and client.Publisher.
// The sending goroutine (and, for acked publishes, one ack waiter) own the
// plain fields until run returns.
type pubWorker struct {
	id     int
	stream int // index into round.streams
	c      *client.Client
	p      *client.Publisher
	ip     *client.IdempotentPublisher // instead of p: acked --idempotent
	slots  chan *slot                  // free slots

	sent  atomic.Uint64 // messages handed to the client, for progress
	acked atomic.Uint64 // messages acked ok, for progress
	stop  atomic.Bool   // a terminal error: stop sending

	published uint64 // messages the broker took (acked ok, or sent without ack)
	measured  uint64 // of those, after the warm-up boundary
	failed    uint64 // messages refused after all retries
	retries   uint64
	ackHist   Histogram
	last      time.Time // when the last measured publish completed

	errMu sync.Mutex
	err   error // the first terminal error; see setErr
}

// setErr records the first terminal error and stops the sender.
func (w *pubWorker) setErr(err error) {
	w.errMu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.errMu.Unlock()
	w.stop.Store(true)
}

// slot is one publish in flight: its payload buffers are reused only after
// its ack, so a refused publish can be re-sent as it was.
type slot struct {
	payloads [][]byte
	n        int
	intended time.Time // the paced send time; latency counts from it
	called   time.Time // when PublishAsync was called (for the last attempt)
	measured bool
	pa       *client.PendingAck
}

func newSlot(batch, size int) *slot {
	s := &slot{payloads: make([][]byte, batch)}
	buf := make([]byte, batch*size)
	for i := range s.payloads {
		s.payloads[i] = buf[i*size : (i+1)*size : (i+1)*size]
	}
	return s
}

// fill stamps each payload with publisher id, sequence and intended time
// (big-endian); payloads shorter than headerBytes carry nothing.
func (s *slot) fill(pubID uint32, seq uint32, n int, intended time.Time, measured bool) {
	s.n, s.intended, s.measured = n, intended, measured
	ns := uint64(intended.UnixNano())
	for i, p := range s.payloads[:n] {
		if len(p) < headerBytes {
			continue
		}
		binary.BigEndian.PutUint32(p[0:], pubID)
		binary.BigEndian.PutUint32(p[4:], seq+uint32(i))
		binary.BigEndian.PutUint64(p[8:], ns)
	}
}

// run publishes until the round's bound (duration or quota), ctx ends, or a
// terminal error, then closes the publisher (waiting for the broker to take
// or answer everything sent).
func (w *pubWorker) run(ctx context.Context, r *round) {
	cfg := r.cfg
	var send func(s *slot)
	var finish func()
	switch {
	case cfg.Ack == "none":
		send, finish = w.unacked(r)
	case cfg.Inflight == 1:
		send, finish = w.sequential(r)
	default:
		send, finish = w.pipelined(r)
	}
	interval, next := r.pacing(w.id)
	var timer *time.Timer
	var seq uint32
	var measuredSent int64
	measuring := false
	quota := r.quota(w.id)
	for ctx.Err() == nil && !w.stop.Load() {
		var s *slot
		if interval == 0 {
			// Unpaced, a publish is timed from when it can go, not from
			// before waiting for the previous one to free its slot.
			s = w.takeSlot()
		}
		intended := time.Now()
		if interval > 0 {
			if timer == nil {
				timer = time.NewTimer(time.Until(next))
			} else {
				timer.Reset(time.Until(next))
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				continue
			}
			s = w.takeSlot()
			intended, next = next, next.Add(interval)
		}
		if !measuring && !intended.Before(r.warmupEnd) {
			// Publish the boundary before the first measured message
			// leaves: a subscriber that sees sequence ≥ boundary[id]
			// counts it as measured, anything below as warm-up.
			measuring = true
			r.boundary[w.id].Store(seq)
		}
		n := int64(cfg.Batch)
		if measuring {
			if cfg.Count > 0 {
				if n = min(n, quota-measuredSent); n <= 0 {
					w.slots <- s
					break
				}
			} else if !intended.Before(r.end) {
				w.slots <- s
				break
			}
			measuredSent += n
		}
		if uint64(seq)+uint64(n) > math.MaxUint32 {
			w.setErr(fmt.Errorf("publisher %d: sequence space (2^32 messages) exhausted", w.id))
			w.slots <- s
			break
		}
		s.fill(r.pubID(w.id), seq, int(n), intended, measuring)
		send(s)
		seq += uint32(n)
	}
	if timer != nil {
		timer.Stop()
	}
	finish()
}

// unacked sends fire-and-forget batches from one reused slot. Close then
// waits until the broker read everything; a refusal it reported then is an
// error of this publisher.
func (w *pubWorker) unacked(r *round) (send func(*slot), finish func()) {
	one := newSlot(r.cfg.Batch, r.cfg.Payload)
	w.slots = make(chan *slot, 1)
	w.slots <- one
	send = func(s *slot) {
		defer func() { w.slots <- s }()
		if err := w.p.Send(s.payloads[:s.n]); err != nil {
			w.setErr(fmt.Errorf("publisher %d: %w", w.id, err))
			return
		}
		w.sent.Add(uint64(s.n))
		w.published += uint64(s.n)
		if s.measured {
			w.measured += uint64(s.n)
		}
	}
	finish = func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.DrainTimeout)
		defer cancel()
		w.p.Close(ctx)
		if err := w.p.Err(); err != nil {
			w.setErr(fmt.Errorf("publisher %d: %w", w.id, err))
		}
		if w.measured > 0 {
			w.last = time.Now()
		}
	}
	return send, finish
}

// sequential publishes one acked batch at a time, waiting for each ack on
// the sending goroutine, as a caller of Publish does: no goroutine hand-off
// per publish between a sender and an ack waiter (--inflight 1).
func (w *pubWorker) sequential(r *round) (send func(*slot), finish func()) {
	w.slots = make(chan *slot, 1)
	w.slots <- newSlot(r.cfg.Batch, r.cfg.Payload)
	send = func(s *slot) {
		defer func() { w.slots <- s }()
		w.sent.Add(uint64(s.n))
		done, err := w.publishSync(r, s)
		w.settle(r, s, done, err, func() (time.Time, error) { return w.publishSync(r, s) })
	}
	return send, func() { w.closePublisher(r) }
}

// publishSync publishes s's batch acked and waits for the answer; it
// returns when the answer came.
func (w *pubWorker) publishSync(r *round, s *slot) (time.Time, error) {
	s.called = time.Now()
	var err error
	if w.ip != nil {
		_, err = w.ip.Publish(r.ackCtx, s.payloads[:s.n])
	} else {
		err = w.p.PublishBatch(r.ackCtx, s.payloads[:s.n])
	}
	return time.Now(), err
}

// pipelined keeps up to --inflight acked publishes outstanding: the sender
// takes a free slot, publishes it and queues it; one waiter takes the
// queue in sending order, waits for each ack (re-sending a refused publish
// up to --retries times) and frees the slot.
func (w *pubWorker) pipelined(r *round) (send func(*slot), finish func()) {
	cfg := r.cfg
	w.slots = make(chan *slot, cfg.Inflight)
	for range cfg.Inflight {
		w.slots <- newSlot(cfg.Batch, cfg.Payload)
	}
	queue := make(chan *slot, cfg.Inflight)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		for s := range queue {
			w.complete(r, s)
			w.slots <- s
		}
	}()
	send = func(s *slot) {
		s.called = time.Now()
		s.pa = w.publishAsync(r, s)
		w.sent.Add(uint64(s.n))
		queue <- s
	}
	finish = func() {
		close(queue)
		<-waited
		w.closePublisher(r)
	}
	return send, finish
}

// closePublisher closes the acked publisher, waiting for what it has in
// flight up to --drain-timeout.
func (w *pubWorker) closePublisher(r *round) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.DrainTimeout)
	defer cancel()
	if w.ip != nil {
		w.ip.Close(ctx)
		w.retries = w.ip.Resends()
		return
	}
	w.p.Close(ctx)
}

// publishAsync sends s's batch acked: through the idempotent producer (its
// window bounds what is in flight; it re-sends on its own), or plainly.
func (w *pubWorker) publishAsync(r *round, s *slot) *client.PendingAck {
	if w.ip != nil {
		return w.ip.PublishAsync(r.ackCtx, nil, s.payloads[:s.n])
	}
	return w.p.PublishAsync(s.payloads[:s.n])
}

// complete waits for s's ack and settles it.
func (w *pubWorker) complete(r *round, s *slot) {
	wait := func() (time.Time, error) {
		err := s.pa.Wait(r.ackCtx)
		return s.called.Add(s.pa.Latency()), err
	}
	done, err := wait()
	w.settle(r, s, done, err, func() (time.Time, error) {
		s.called = time.Now()
		s.pa = w.p.PublishAsync(s.payloads[:s.n])
		return wait()
	})
}

// settle re-sends s (again) while the broker refuses it and retries remain,
// and accounts for the outcome: an answer at done, or err.
func (w *pubWorker) settle(r *round, s *slot, done time.Time, err error, again func() (time.Time, error)) {
	var refused *client.BrokerError
	for attempt := 0; w.ip == nil && errors.As(err, &refused) && attempt < r.cfg.Retries && !w.stop.Load(); attempt++ {
		w.retries++
		done, err = again()
	}
	if err != nil {
		w.failed += uint64(s.n)
		w.setErr(fmt.Errorf("publisher %d: %w", w.id, err))
		return
	}
	w.published += uint64(s.n)
	w.acked.Add(uint64(s.n))
	if s.measured {
		w.measured += uint64(s.n)
		w.ackHist.Record(int64(done.Sub(s.intended)))
		if done.After(w.last) {
			w.last = done
		}
	}
}

// takeSlot blocks until a slot is free (for acked publishes: until fewer
// than --inflight are outstanding).
func (w *pubWorker) takeSlot() *slot { return <-w.slots }
