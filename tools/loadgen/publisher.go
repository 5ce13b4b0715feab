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
	if cfg.Ack == "none" {
		send, finish = w.unacked(r)
	} else {
		send, finish = w.pipelined(r)
	}
	interval, next := r.pacing(w.id)
	var timer *time.Timer
	var seq uint32
	var measuredSent int64
	measuring := false
	quota := r.quota(w.id)
	for ctx.Err() == nil && !w.stop.Load() {
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
					break
				}
			} else if !intended.Before(r.end) {
				break
			}
			measuredSent += n
		}
		if uint64(seq)+uint64(n) > math.MaxUint32 {
			w.setErr(fmt.Errorf("publisher %d: sequence space (2^32 messages) exhausted", w.id))
			break
		}
		s := w.takeSlot()
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
		ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
		defer cancel()
		if w.ip != nil {
			w.ip.Close(ctx)
			w.retries = w.ip.Resends()
			return
		}
		w.p.Close(ctx)
	}
	return send, finish
}

// publishAsync sends s's batch acked: through the idempotent producer (its
// window bounds what is in flight; it re-sends on its own), or plainly.
func (w *pubWorker) publishAsync(r *round, s *slot) *client.PendingAck {
	if w.ip != nil {
		return w.ip.PublishAsync(r.ackCtx, nil, s.payloads[:s.n])
	}
	return w.p.PublishAsync(s.payloads[:s.n])
}

// complete waits for s's ack, re-sends it while the broker refuses it and
// retries remain, and accounts for the outcome.
func (w *pubWorker) complete(r *round, s *slot) {
	err := s.pa.Wait(r.ackCtx)
	var refused *client.BrokerError
	for attempt := 0; w.ip == nil && errors.As(err, &refused) && attempt < r.cfg.Retries && !w.stop.Load(); attempt++ {
		w.retries++
		s.called = time.Now()
		s.pa = w.p.PublishAsync(s.payloads[:s.n])
		err = s.pa.Wait(r.ackCtx)
	}
	if err != nil {
		w.failed += uint64(s.n)
		w.setErr(fmt.Errorf("publisher %d: %w", w.id, err))
		return
	}
	done := s.called.Add(s.pa.Latency())
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
