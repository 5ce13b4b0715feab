package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/felixmq/felix/wire"
)

// reqStream pipelines requests over one control stream: every call writes
// its request with a fresh request_id and waits for the reply with that
// id, so calls from many goroutines are in flight together and replies
// may come back out of order. Caches and consumer groups run on one.
type reqStream struct {
	c    *Client
	ct   *control
	what string // "cache", "group": for errors and logs
	// correlate says which request a reply answers (nil: none, an
	// uncorrelated frame) and the error it carries, if it is a refusal.
	correlate func(wire.Message) (id *uint64, err error)

	wmu  sync.Mutex
	wbuf []byte

	mu struct {
		sync.Mutex
		nextID  uint64
		pending map[uint64]chan reqReply
		err     error // terminal: the stream ended
	}
	done chan struct{}
}

type reqReply struct {
	m   wire.Message
	err error
}

// openReqStream opens a control stream for requests of kind what; ok
// checks what the broker advertised before any request is sent.
func (c *Client) openReqStream(ctx context.Context, what string, ok func(*control) error,
	correlate func(wire.Message) (*uint64, error)) (*reqStream, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	if err := ok(ct); err != nil {
		ct.str.CancelRead(0)
		ct.str.CancelWrite(0)
		return nil, err
	}
	s := &reqStream{c: c, ct: ct, what: what, correlate: correlate, done: make(chan struct{})}
	s.mu.pending = map[uint64]chan reqReply{}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); s.readReplies() }()
	return s, nil
}

// do sends the request build makes with a fresh request id and waits for
// its reply (or the refusal's error).
func (s *reqStream) do(ctx context.Context, build func(id uint64) wire.Message) (wire.Message, error) {
	ch := make(chan reqReply, 1)
	s.mu.Lock()
	if err := s.mu.err; err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.nextID++
	id := s.mu.nextID
	s.mu.pending[id] = ch
	s.mu.Unlock()

	s.wmu.Lock()
	s.wbuf = wire.AppendJSONFrame(s.wbuf[:0], build(id))
	_, err := s.ct.str.Write(s.wbuf)
	s.wmu.Unlock()
	if err != nil {
		s.forget(id)
		return nil, s.ct.sess.wrap(fmt.Errorf("client: %s request: %w", s.what, err))
	}
	s.ct.sess.awaiting.Add(1)
	defer s.ct.sess.awaiting.Add(-1)
	select {
	case r := <-ch:
		return r.m, r.err
	case <-ctx.Done():
		s.forget(id)
		return nil, ctx.Err()
	}
}

func (s *reqStream) forget(id uint64) {
	s.mu.Lock()
	delete(s.mu.pending, id)
	s.mu.Unlock()
}

// readReplies hands each reply to the request with its id until the stream
// ends, then fails whatever is pending.
func (s *reqStream) readReplies() {
	defer close(s.done)
	for {
		h, payload, err := s.ct.fr.Next()
		if err == nil && h.Flags != 0 {
			err = fmt.Errorf("%w: binary frame %s on a %s stream", ErrProtocol, h.Flags, s.what)
		}
		var m wire.Message
		if err == nil {
			m, err = wire.DecodeJSON(payload)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			s.failAll(s.ct.sess.wrap(err))
			return
		}
		s.dispatch(m)
	}
}

func (s *reqStream) dispatch(m wire.Message) {
	id, err := s.correlate(m)
	if id == nil {
		if e, ok := m.(*wire.ErrorMessage); ok {
			// Uncorrelated: a frame the broker could not decode. Nothing
			// to complete; say so.
			s.c.cfg.Logger.Warn("broker error on "+s.what+" stream", "message", e.Message)
		}
		return
	}
	s.mu.Lock()
	ch := s.mu.pending[*id]
	delete(s.mu.pending, *id)
	s.mu.Unlock()
	if ch != nil {
		ch <- reqReply{m: m, err: err}
	}
}

func (s *reqStream) failAll(err error) {
	s.mu.Lock()
	if s.mu.err == nil {
		s.mu.err = err
	}
	pending := s.mu.pending
	s.mu.pending = map[uint64]chan reqReply{}
	s.mu.Unlock()
	for _, ch := range pending {
		ch <- reqReply{err: err}
	}
}

// close finishes the stream once the replies to every request in flight
// arrived (or ctx ended) and waits for the reader.
func (s *reqStream) close(ctx context.Context) error {
	s.wmu.Lock()
	s.ct.str.Close()
	s.wmu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.ct.str.CancelRead(0)
		<-s.done
	}
	return nil
}

func unexpected(m wire.Message, what string) error {
	return fmt.Errorf("%w: %s in reply to a %s request", ErrProtocol, m.Type(), what)
}
