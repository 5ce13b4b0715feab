package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/cluster"
	"github.com/felixmq/felix/wire"
)

// A ClusterClient sends a publish or a subscribe again, elsewhere or
// later, when doing so cannot apply it twice: the broker refused it with a
// class that says nothing was applied (redirect: not_leader / not_owner;
// retry: shard_unavailable, draining; retry_after: overloaded), or it never
// left this client (no connection to the broker routed to). A publish
// whose connection failed after it was written may have been applied, and
// is not sent again. A subscribe changes nothing, so any failure but a
// refusal that says otherwise is tried again.

// defaultAttempts is how many times a request is sent at most when
// ClusterConfig.Attempts is 0: with the backoff below, about 3 s of
// waiting, which covers an election after a leader's host died (one to two
// election timeouts, 1–2 s by default).
const defaultAttempts = 10

// firstBackoff and maxBackoff bound the wait before a request is sent again
// to the same place: 10 ms, doubling per wait, up to 1 s, or longer when
// the broker asked for longer (retry_after_ms).
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = time.Second
)

// retrier paces the attempts of one request.
type retrier struct {
	left   int  // attempts left after the current one
	waits  int  // backoffs so far
	hopped bool // a redirect was followed at once
}

func newRetrier(attempts int) retrier { return retrier{left: attempts - 1} }

// next says whether a request whose attempt at from failed with err is
// sent again, to, where the route now points, and after how long. sent:
// the request left this client (see resendable). A redirect to another
// broker goes at once the first time (the refusal named where the shard
// is); anything else backs off, so brokers that name each other while a
// leadership moves are asked again at a falling rate.
func (r *retrier) next(err error, sent bool, from, to string) (time.Duration, bool) {
	if r.left <= 0 || !resendable(err, sent) {
		return 0, false
	}
	r.left--
	if to != from && !r.hopped && RetryOf(err) == wire.Redirect {
		r.hopped = true
		return 0, true
	}
	d := min(firstBackoff<<min(r.waits, 7), maxBackoff)
	r.waits++
	var be *BrokerError
	if errors.As(err, &be) {
		d = max(d, be.RetryAfter())
	}
	return d, true
}

// resendable reports whether a request that failed with err may be sent
// again: the broker refused it and said nothing was applied, or (sent
// false) it never reached a broker, for a reason other than one that
// sending again cannot cure (ErrClosed, the caller's context, a bad
// config, a refused credential: RetryOf's Fatal).
func resendable(err error, sent bool) bool {
	switch RetryOf(err) {
	case wire.Retry, wire.RetryAfter, wire.Redirect:
		return true
	case wire.Fatal:
		return false
	}
	return !sent && !answered(err)
}

// answered reports whether err is a broker's answer (rather than no
// answer: a connection that failed or could not be made).
func answered(err error) bool {
	var be *BrokerError
	var ce *CursorError
	var se *StorageError
	return errors.As(err, &be) || errors.As(err, &ce) || errors.As(err, &se)
}

// steering reports whether an attempt's failure moves the request to
// another broker when the answer named no owner: a refusal that says the
// shard is elsewhere, has no leader here, or that this broker is going
// away (redirect, retry), or no answer at all (the broker cannot be
// reached, or the connection failed). An overloaded broker (retry_after)
// is the right place, only busy.
func steering(err error) bool {
	switch RetryOf(err) {
	case wire.Redirect, wire.Retry:
		return true
	case wire.OutcomeUnknown:
		return !answered(err)
	}
	return false
}

// waitRetry waits d, or until ctx ends (its error).
func waitRetry(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopped is the error of a request whose retries ctx stopped: the last
// attempt's, and why no further one was made.
func stopped(last, ctxErr error) error {
	return fmt.Errorf("%w (retrying stopped: %w)", last, ctxErr)
}

// clusterPublish is one acked publish of a ClusterClient, through its
// attempts.
type clusterPublish struct {
	cc       *ClusterClient
	ctx      context.Context
	s        cluster.Shard
	payloads [][]byte // the client's copy, for attempts after the first
	out      *PendingAck
	r        retrier
}

// attempt sends the publish to where s routes now.
func (q *clusterPublish) attempt() {
	cc := q.cc
	cc.mu.Lock()
	addr := cc.routeLocked(q.s)
	cc.mu.Unlock()
	err := cc.send(q.ctx, addr, q.s, q.payloads, func(pa *PendingAck) {
		cc.learn(q.s, addr, ownerOf(pa.res), pa.err)
		q.answered(addr, pa)
	})
	if err != nil { // not sent: no connection or stream to addr
		cc.learn(q.s, addr, nil, err)
		q.failed(addr, err, false, Ack{})
	}
}

// answered takes the outcome of an attempt sent to addr.
func (q *clusterPublish) answered(addr string, pa *PendingAck) {
	if pa.err == nil {
		q.finish(pa.res, nil)
		return
	}
	q.failed(addr, pa.err, true, pa.res)
}

// failed sends the publish again, after its wait, when err allows it and
// attempts and the context are left; else it ends with err.
func (q *clusterPublish) failed(addr string, err error, sent bool, res Ack) {
	q.cc.mu.Lock()
	to := q.cc.routeLocked(q.s)
	q.cc.mu.Unlock()
	wait, again := q.r.next(err, sent, addr, to)
	switch {
	case !again:
		q.finish(res, err)
	case q.ctx.Err() != nil:
		q.finish(res, stopped(err, q.ctx.Err()))
	default:
		// Not on the caller's goroutine nor the reader's: the next
		// attempt may dial.
		go func() {
			if werr := waitRetry(q.ctx, wait); werr != nil {
				q.finish(res, stopped(err, werr))
				return
			}
			q.cc.resends.Add(1)
			q.attempt()
		}()
	}
}

func (q *clusterPublish) finish(res Ack, err error) {
	q.out.res = res
	q.out.rtt = time.Since(q.out.sent)
	q.out.finish(err)
}

// clonePayloads copies payloads into one buffer.
func clonePayloads(payloads [][]byte) [][]byte {
	n := 0
	for _, p := range payloads {
		n += len(p)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(payloads))
	for i, p := range payloads {
		buf = append(buf, p...)
		out[i] = buf[len(buf)-len(p) : len(buf) : len(buf)]
	}
	return out
}
