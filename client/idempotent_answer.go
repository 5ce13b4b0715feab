package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// answer applies one answer of the broker.
func (p *IdempotentPublisher) answer(m wire.Message) {
	switch m := m.(type) {
	case *wire.PublishOK:
		p.acked(m.RequestID, jsonAck(m.Offset, m.Shard, m.Owner))
	case *wire.PublishRefused:
		p.refused(m)
	case *wire.PublishError:
		p.failed(m.RequestID, brokerError(m.Message, m.Err, m.Owner))
	case *wire.ErrorMessage:
		p.first.cfg.Logger.Warn("broker error on an idempotent publisher", "message", m.Message)
	}
}

// acked completes the batch that request req was, with res.
func (p *IdempotentPublisher) acked(req uint64, res Ack) {
	p.mu.Lock()
	b := p.mu.w.answered(req)
	if b == nil {
		p.mu.Unlock()
		return // an earlier send's answer: the batch was sent again
	}
	p.mu.w.done(b)
	if p.mu.answered != nil {
		close(p.mu.answered)
		p.mu.answered = nil
	}
	p.mu.retry.delay = 0
	p.mu.spare = append(p.mu.spare, b.frame[:0])
	p.mu.Unlock()
	<-p.room
	b.pa.res = res
	b.pa.rtt = time.Since(b.pa.sent)
	b.pa.finish(nil)
}

// refused applies publish_refused: not_leader sends everything again to
// the broker it names; a gap the window can fill sends the shard again from
// the missing sequence (a re-send overtaken by a batch after it), and so
// does an unknown producer whose first batch the window still holds; the
// rest stops the publisher.
func (p *IdempotentPublisher) refused(m *wire.PublishRefused) {
	p.mu.Lock()
	b := p.mu.w.answered(m.RequestID)
	if b == nil {
		p.mu.Unlock()
		return
	}
	r := m.Reason
	switch {
	case r.Kind == wire.RefusedNotLeader:
		if r.Addr != nil {
			p.mu.addr = *r.Addr
		}
		ic := p.mu.conn
		p.mu.Unlock()
		if ic != nil {
			p.lost(ic)
		}
	case r.Kind == wire.RefusedSequenceGap && p.mu.w.holds(b.shard, r.Expected),
		// The shard has not seen this producer because the first batch,
		// still unanswered here, was refused for a moment (no leader yet)
		// and this one overtook it: send again from it (Expected is 0).
		r.Kind == wire.RefusedUnknownProducer && p.mu.w.holds(b.shard, 0):
		p.mu.w.resendFrom(b.shard, r.Expected)
		p.mu.Unlock()
		notify(p.wake)
	default:
		p.fatalLocked(&RefusedError{Reason: r, Message: m.Message})
	}
}

// failed applies publish_error: a retryable class sends the batch (and
// those after it on its shard) again after a backoff, or after the delay
// the broker asked for; a fatal one stops the publisher.
func (p *IdempotentPublisher) failed(req uint64, be *BrokerError) {
	p.mu.Lock()
	b := p.mu.w.answered(req)
	if b == nil {
		p.mu.Unlock()
		return
	}
	switch be.Retry() {
	case wire.Retry, wire.RetryAfter, wire.OutcomeUnknown, wire.Redirect:
	default:
		p.fatalLocked(be)
		return
	}
	ceiling := time.Second
	if be.Retry() == wire.Retry {
		ceiling = noLeaderRetry
	}
	delay := max(p.mu.retry.next(time.Now(), ceiling), be.RetryAfter())
	p.mu.Unlock()
	time.AfterFunc(delay, func() {
		p.mu.Lock()
		p.mu.w.resendFrom(b.shard, b.seq)
		p.mu.Unlock()
		notify(p.wake)
	})
}

// backoff is the delay before batches refused with a retryable answer
// are sent again: 10 ms, doubling to a ceiling, reset by an ack. It grows
// once per round of answers: a window of batches refused together (no
// leader for a moment, say) is one attempt; growing per batch would reach
// the ceiling at the first refusal of a full window.
type backoff struct {
	delay time.Duration
	grown time.Time
}

// noLeaderRetry is the ceiling for answers of class retry (nothing was
// applied; shard_unavailable while the shard's replicas elect a leader):
// each retry is one refusal on the connection there is, and a publisher
// retrying every second would find the new leader up to a second late.
// Other retryable answers (a broker overloaded or failing) back off to 1 s.
const noLeaderRetry = 100 * time.Millisecond

func (b *backoff) next(now time.Time, ceiling time.Duration) time.Duration {
	if now.Sub(b.grown) >= b.delay {
		b.delay = min(max(2*b.delay, 10*time.Millisecond), ceiling)
		b.grown = now
	}
	return min(b.delay, ceiling)
}

// fatalLocked stops the publisher with err: every pending batch and every
// later call fails with it. It unlocks p.mu.
func (p *IdempotentPublisher) fatalLocked(err error) {
	if p.mu.err == nil {
		p.mu.err = err
	}
	err = p.mu.err
	batches := p.mu.w.drain()
	if p.mu.answered != nil {
		close(p.mu.answered)
		p.mu.answered = nil
	}
	ic := p.mu.conn
	p.mu.conn = nil
	p.mu.Unlock()
	if ic != nil {
		ic.close()
	}
	for _, b := range batches {
		<-p.room
		b.pa.rtt = time.Since(b.pa.sent)
		b.pa.finish(err)
	}
	notify(p.wake)
}

// pump connects again after a connection failed and sends what is due
// again, one goroutine, so that answers are never waited on by a write.
func (p *IdempotentPublisher) pump() {
	defer close(p.done)
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		case <-p.first.stop: // the Client closed under the publisher
			p.mu.Lock()
			p.fatalLocked(ErrClosed)
			return
		}
		for p.sendDue() {
		}
	}
}

// sendDue dials if the connection is gone and batches wait, then sends the
// due batches. It reports whether to look again.
func (p *IdempotentPublisher) sendDue() bool {
	p.mu.Lock()
	if p.mu.err != nil {
		p.mu.Unlock()
		return false
	}
	ic := p.mu.conn
	if ic == nil {
		if len(p.mu.w.inflight) == 0 {
			p.mu.Unlock()
			return false // dial when there is something to send
		}
		addr := p.mu.addr
		p.mu.Unlock()
		nic := p.connect(addr)
		if nic == nil {
			return false // closed
		}
		p.waitDead()
		p.mu.Lock()
		if p.mu.err != nil {
			p.mu.Unlock()
			nic.close()
			return false
		}
		ic, p.mu.conn = nic, nic
		p.mu.w.resendAll = true
		p.reconnects.Add(1)
	}
	due := p.mu.w.due()
	if len(due) == 0 {
		p.mu.Unlock()
		return false
	}
	ic.wmu.Lock()
	p.mu.Unlock()
	err := ic.write(p, due...)
	ic.wmu.Unlock()
	p.resends.Add(uint64(len(due)))
	if err != nil {
		p.lost(ic)
	}
	ic.rr.ask()
	return true
}

// connect dials addr until it works or Close; nil after Close. A broker
// a not_leader refusal named that cannot be reached (it died since) gives
// way to the first broker, which knows the new leader. Failed dials back
// off from 20 ms to 2 s; a refused one (nothing listens there: the host
// said so at once) to noLeaderRetry at most, since the next broker asked
// may be the new leader, elected meanwhile.
func (p *IdempotentPublisher) connect(addr string) *idemConn {
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			addr = ""
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.DialTimeout)
		go func() {
			select {
			case <-p.stop:
				cancel()
			case <-p.first.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		c, err := p.redial(ctx, addr)
		var ic *idemConn
		if err == nil {
			if ic, err = p.open(ctx, c, c); err != nil {
				c.Close()
			}
		}
		cancel()
		if err == nil {
			return ic
		}
		p.first.cfg.Logger.Debug("idempotent publisher: redial failed", "addr", addr, "err", err, "retry_in", backoff)
		select {
		case <-p.stop:
			return nil
		case <-p.first.stop:
			return nil
		case <-time.After(backoff):
		}
		ceiling := 2 * time.Second
		if errors.Is(err, ErrConnectionRefused) {
			ceiling = noLeaderRetry
		}
		backoff = min(2*backoff, ceiling)
	}
}

func (p *IdempotentPublisher) redial(ctx context.Context, addr string) (*Client, error) {
	if p.opts.Redial != nil {
		return p.opts.Redial(ctx, addr)
	}
	if addr == "" {
		addr = p.first.addr
	}
	return Dial(ctx, addr, p.first.cfg)
}

// Close waits until every batch sent was answered (or ctx ended, or the
// publisher stopped), then stops reconnecting and ends its streams. Batches
// still unanswered then fail with ErrClosed, which Close returns too: they
// may or may not have been written.
func (p *IdempotentPublisher) Close(ctx context.Context) error {
	p.mu.Lock()
	p.mu.closing = true
	p.mu.Unlock()
	for i := 0; i < p.opts.Window; i++ {
		select {
		case p.room <- struct{}{}:
		case <-ctx.Done():
			i = p.opts.Window
		}
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	n := len(p.mu.w.inflight)
	p.fatalLocked(ErrClosed)
	if n > 0 {
		return fmt.Errorf("%w with %d batches unanswered", ErrClosed, n)
	}
	return nil
}
