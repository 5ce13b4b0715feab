package client

import (
	"context"
	"sync"
	"sync/atomic"
)

// eventFeed is what the JSON event streams of roster watches and queue
// consumers share (a Subscription reads on its caller's goroutine:
// subscriptionFeed): the router attaches the stream once, a reader goroutine
// fills a bounded channel (when it is full the reader stops and QUIC flow
// control pushes back on the broker), and close stops the stream, or
// refuses it if it comes after close.
type eventFeed[T any] struct {
	c    *Client
	sess *session // the connection it runs on
	id   uint64
	ch   chan T

	attached  chan struct{}
	attachOne sync.Once
	es        eventStream
	readDone  chan struct{}
	closeOnce sync.Once
	err       atomic.Pointer[error]
}

func newEventFeed[T any](c *Client, sess *session, id uint64) eventFeed[T] {
	return eventFeed[T]{c: c, sess: sess, id: id, ch: make(chan T, c.cfg.SubscriptionBuffer),
		attached: make(chan struct{}), readDone: make(chan struct{})}
}

// attach takes es and starts read on it (read must close f.readDone and
// then f.ch when it returns); a stream that comes after close is refused.
func (f *eventFeed[T]) attach(es eventStream, read func()) {
	first := false
	f.attachOne.Do(func() {
		first = true
		f.es = es
		close(f.attached)
		f.c.wg.Add(1)
		go func() { defer f.c.wg.Done(); read() }()
	})
	if !first { // closed before its stream came (close)
		f.sess.router.refuse(f.id, es)
	}
}

// fail records the reason the feed ended; the first one wins.
func (f *eventFeed[T]) fail(err error) { f.err.CompareAndSwap(nil, &err) }

// receive returns the next item, blocking until one arrives, ctx ends or
// the feed ends (then the error says why).
func (f *eventFeed[T]) receive(ctx context.Context) (T, error) {
	var zero T
	select {
	case <-f.attached:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-f.sess.qc.Context().Done():
		return zero, f.sess.wrap(ErrClosed)
	}
	select {
	case v, ok := <-f.ch:
		if !ok {
			if p := f.err.Load(); p != nil {
				return zero, *p
			}
			return zero, ErrClosed
		}
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// close stops reading: the broker sees the stream stopped and ends what it
// fed. It waits for the reader.
func (f *eventFeed[T]) close() {
	f.closeOnce.Do(func() {
		if !f.sess.router.release(f.id, &f.attachOne) {
			close(f.ch) // receive reports ErrClosed
			close(f.attached)
			return
		}
		f.es.str.CancelRead(0)
		for range f.ch { // unblock the reader
		}
		<-f.readDone
	})
}
