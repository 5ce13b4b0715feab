package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// jsonStream is the receiving half of an event stream that carries JSON
// frames (roster watches, queue consumers): a reader goroutine decodes
// frames into a bounded channel; when the channel is full the reader stops
// and QUIC flow control pushes back on the broker.
type jsonStream struct {
	c    *Client
	sess *session
	id   uint64
	ch   chan wire.Message

	attached  chan struct{}
	attachOne sync.Once
	es        eventStream
	readDone  chan struct{}
	closeOnce sync.Once
	err       atomic.Pointer[error]
}

func newJSONStream(c *Client, sess *session, id uint64) *jsonStream {
	return &jsonStream{
		c: c, sess: sess, id: id, ch: make(chan wire.Message, c.cfg.SubscriptionBuffer),
		attached: make(chan struct{}), readDone: make(chan struct{}),
	}
}

func (js *jsonStream) attach(es eventStream) {
	first := false
	js.attachOne.Do(func() {
		first = true
		js.es = es
		close(js.attached)
		js.c.wg.Add(1)
		go func() { defer js.c.wg.Done(); js.read() }()
	})
	if !first { // closed before its stream came (close)
		js.sess.router.refuse(js.id, es)
	}
}

func (js *jsonStream) read() {
	defer close(js.readDone)
	defer close(js.ch)
	for {
		h, payload, err := js.es.fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			js.fail(js.sess.wrap(err))
			return
		}
		if h.Flags != 0 {
			js.fail(fmt.Errorf("%w: binary frame %s on a JSON event stream", ErrProtocol, h.Flags))
			js.es.str.CancelRead(0)
			return
		}
		m, err := wire.DecodeJSON(payload)
		if err != nil {
			js.fail(err)
			js.es.str.CancelRead(0)
			return
		}
		select {
		case js.ch <- m:
		case <-js.sess.qc.Context().Done():
			js.fail(js.sess.wrap(ErrClosed))
			return
		}
	}
}

func (js *jsonStream) fail(err error) { js.err.CompareAndSwap(nil, &err) }

// next returns the next message, blocking until one arrives, ctx ends or
// the stream ends.
func (js *jsonStream) next(ctx context.Context) (wire.Message, error) {
	select {
	case <-js.attached:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-js.sess.qc.Context().Done():
		return nil, js.sess.wrap(ErrClosed)
	}
	select {
	case m, ok := <-js.ch:
		if !ok {
			if p := js.err.Load(); p != nil {
				return nil, *p
			}
			return nil, ErrClosed
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close stops reading: the broker sees the stream stopped and ends the
// watch or consumer. It waits for the reader.
func (js *jsonStream) close() {
	js.closeOnce.Do(func() {
		if !js.sess.router.release(js.id, &js.attachOne) {
			close(js.ch) // Next reports ErrClosed
			close(js.attached)
			return
		}
		js.es.str.CancelRead(0)
		for range js.ch {
		}
		<-js.readDone
	})
}

// openEventStream sends req on a fresh control stream and waits for
// `subscribed`; the returned stream is registered with the router.
func (c *Client) openJSONStream(ctx context.Context, req wire.Message) (*jsonStream, *control, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := ct.str.Write(wire.AppendJSONFrame(nil, req)); err != nil {
		return nil, nil, fmt.Errorf("client: write %s: %w", req.Type(), err)
	}
	m, err := ct.readJSON(ctx)
	if err != nil {
		ct.str.CancelWrite(0)
		return nil, nil, err
	}
	switch m := m.(type) {
	case *wire.Subscribed:
		js := newJSONStream(c, ct.sess, m.SubscriptionID)
		ct.sess.router.register(js.id, js)
		return js, ct, nil
	case *wire.ErrorMessage:
		ct.str.CancelWrite(0)
		ct.str.CancelRead(0)
		return nil, nil, &BrokerError{Message: m.Message}
	}
	ct.str.CancelWrite(0)
	return nil, nil, fmt.Errorf("%w: %s in reply to %s", ErrProtocol, m.Type(), req.Type())
}
