package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/wire"
)

// subscriptionFeed is one incarnation of a Subscription: the event stream
// of one broker subscription id on one session. Next reads it on its own
// goroutine, a frame at a time (receive): a reader goroutine in between
// would cost every delivery a goroutine hand-off (docs/BENCHMARKS.md, "What
// limits each figure"), and QUIC flow control bounds what waits unread.
type subscriptionFeed struct {
	c       *Client
	sess    *session // the connection it runs on
	id      uint64
	dropped *atomic.Uint64 // the Subscription's count

	attached  chan struct{} // closed once es is set, or by close before that
	attachOne sync.Once
	es        eventStream
	closeOnce sync.Once
	closed    atomic.Bool

	// receive's own (Next is not called concurrently): why the feed
	// ended, the decode target, and the interrupt of a read whose
	// context ended.
	err   error
	batch wire.EventBatch
	intr  readInterrupt
}

func newSubscriptionFeed(c *Client, sess *session, id uint64, dropped *atomic.Uint64) *subscriptionFeed {
	return &subscriptionFeed{c: c, sess: sess, id: id, dropped: dropped, attached: make(chan struct{})}
}

// attach takes the event stream the router accepted for this id; one that
// comes after close is refused.
func (f *subscriptionFeed) attach(es eventStream) {
	first := false
	f.attachOne.Do(func() {
		first = true
		f.es = es
		f.intr.init(es.str)
		close(f.attached)
	})
	if !first {
		f.sess.router.refuse(f.id, es)
	}
}

// receive reads and decodes the next frame, blocking until one arrives,
// ctx ends or the feed ends (then the error says why, again at every
// later call). A read that ctx interrupted loses nothing: the frame
// resumes at the next call.
func (f *subscriptionFeed) receive(ctx context.Context) ([]Event, error) {
	if f.err != nil {
		return nil, f.err
	}
	select {
	case <-f.attached:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-f.sess.qc.Context().Done():
		return nil, f.sess.wrap(ErrClosed)
	}
	if f.closed.Load() {
		return nil, ErrClosed
	}
	stop := f.intr.arm(ctx)
	h, payload, err := f.es.fr.Next()
	f.intr.disarm(stop)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		f.err = f.ended(err)
		return nil, f.err
	}
	evs, err := f.decode(h, payload, &f.batch)
	if err != nil {
		f.err = err
		f.es.str.CancelRead(0)
		return nil, err
	}
	return evs, nil
}

// ended is what a failed read of the event stream means to Next.
func (f *subscriptionFeed) ended(err error) error {
	var se *quic.StreamError
	switch {
	case f.closed.Load():
		return ErrClosed
	case errors.Is(err, io.EOF):
		err = ErrClosed
	case errors.As(err, &se) && uint64(se.ErrorCode) == wire.StreamSlowConsumer:
		err = fmt.Errorf("%w: %w", ErrSlowConsumer, err)
	}
	return f.sess.wrap(err)
}

// close stops the event stream: the broker sees it stopped and ends what it
// fed; a Next reading it returns ErrClosed.
func (f *subscriptionFeed) close() {
	f.closeOnce.Do(func() {
		f.closed.Store(true)
		if !f.sess.router.release(f.id, &f.attachOne) {
			close(f.attached) // receive reports ErrClosed
			return
		}
		f.es.str.CancelRead(0)
	})
}

// readInterrupt ends a blocked read when its context ends, through the
// stream's read deadline; it allocates no channel per read.
type readInterrupt struct {
	str   deadliner
	fn    func() // interrupt, bound once
	fired sync.WaitGroup
}

func (i *readInterrupt) init(str deadliner) {
	i.str = str
	i.fn = i.interrupt
}

func (i *readInterrupt) interrupt() {
	i.str.SetReadDeadline(time.Now())
	i.fired.Done()
}

// arm interrupts the read about to start once ctx ends; disarm it with
// what arm returns when the read is over.
func (i *readInterrupt) arm(ctx context.Context) func() bool {
	if ctx.Done() == nil {
		return nil
	}
	i.fired.Add(1)
	return context.AfterFunc(ctx, i.fn)
}

// disarm undoes arm. If the interrupt ran, or is running, it waits for it
// and clears the deadline before anyone reads again.
func (i *readInterrupt) disarm(stop func() bool) {
	if stop == nil {
		return
	}
	if stop() {
		i.fired.Done() // the interrupt never runs
		return
	}
	i.fired.Wait()
	i.str.SetReadDeadline(time.Time{})
}
