package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/felixmq/felix/wire"
)

// jsonStream is the receiving half of an event stream that carries JSON
// frames (roster watches, queue consumers).
type jsonStream struct {
	eventFeed[wire.Message]
}

func newJSONStream(c *Client, sess *session, id uint64) *jsonStream {
	return &jsonStream{newEventFeed[wire.Message](c, sess, id)}
}

func (js *jsonStream) attach(es eventStream) { js.eventFeed.attach(es, js.read) }

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
		return nil, nil, brokerError(m.Message, m.Err, m.Owner)
	}
	ct.str.CancelWrite(0)
	return nil, nil, fmt.Errorf("%w: %s in reply to %s", ErrProtocol, m.Type(), req.Type())
}
