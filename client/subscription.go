package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/felixmq/felix/wire"
)

// From says where a subscription starts.
type From struct {
	kind   wire.StartKind
	offset uint64
	set    bool
}

// Latest starts at the live tail (the default).
func Latest() From { return From{kind: wire.StartLatest, set: true} }

// Earliest starts at the oldest event the broker still holds.
func Earliest() From { return From{kind: wire.StartEarliest, set: true} }

// Offset starts at offset n (the first event not yet seen).
func Offset(n uint64) From { return From{kind: wire.StartOffset, offset: n, set: true} }

// SubscribeOptions refine Subscribe.
type SubscribeOptions struct {
	// Shard of the stream to follow; order is per shard. Default 0.
	Shard uint32
	// From is where to start; the zero value is Latest.
	From From
}

// Event is one delivered event, or a gap report.
type Event struct {
	// Offset of the event in its shard, when HasOffset (the broker sends
	// offsets to clients that negotiate them, which this client always does).
	Offset    uint64
	HasOffset bool
	// Payload belongs to the caller.
	Payload []byte
	// Dropped, when non-zero, makes this a gap report instead of an event:
	// the broker's queue for this subscription dropped that many events
	// (its policy drop_new or drop_old) since the previous report.
	Dropped uint64
}

// Subscription follows one shard of a stream.
type Subscription struct {
	eventFeed[[]Event]
	cur       []Event
	delivered atomic.Uint64
	dropped   atomic.Uint64
}

// Subscribe asks the broker for a subscription on namespace/stream of the
// client's tenant. Earliest and Offset need a broker that advertised
// EVENT_BATCH_OFFSETS: an older broker would silently start at the tail, so
// the client refuses instead.
func (c *Client) Subscribe(ctx context.Context, namespace, stream string, opts SubscribeOptions) (*Subscription, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	defer ct.str.CancelRead(0)
	msg := &wire.Subscribe{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream}
	if opts.From.set && opts.From.kind != wire.StartLatest {
		if !wire.Supports(ct.flags, wire.FlagEventBatchOffsets) {
			ct.str.CancelWrite(0)
			return nil, fmt.Errorf("%w: the broker does not support resuming (no offsets capability)", ErrProtocol)
		}
	}
	if opts.From.set {
		msg.Start = &wire.Start{Kind: opts.From.kind, Offset: opts.From.offset}
	}
	if opts.Shard != 0 {
		msg.Shard = &opts.Shard
	}
	if _, err := ct.str.Write(wire.AppendJSONFrame(nil, msg)); err != nil {
		return nil, fmt.Errorf("client: write subscribe: %w", err)
	}
	ct.str.Close()
	m, err := ct.readJSON(ctx)
	if err != nil {
		return nil, err
	}
	switch m := m.(type) {
	case *wire.Subscribed:
		return c.newSubscription(ct.sess, m.SubscriptionID), nil
	case *wire.SubscribeCursorError:
		return nil, &CursorError{Reason: string(m.Reason), Requested: m.Requested, Available: m.Available}
	case *wire.ErrorMessage:
		return nil, &BrokerError{Message: m.Message, Owner: m.Owner}
	}
	return nil, fmt.Errorf("%w: %s in reply to subscribe", ErrProtocol, m.Type())
}

// newSubscription registers subscription id with the session's router,
// which attaches its event stream when (or if already) it arrives.
func (c *Client) newSubscription(sess *session, id uint64) *Subscription {
	s := &Subscription{eventFeed: newEventFeed[[]Event](c, sess, id)}
	sess.router.register(s.id, s)
	return s
}

// ID is the broker-assigned subscription id.
func (s *Subscription) ID() uint64 { return s.id }

// Delivered and Dropped count events returned by Next and events the broker
// reported dropped.
func (s *Subscription) Delivered() uint64 { return s.delivered.Load() }

// Dropped counts events the broker reported as dropped for this subscription.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

func (s *Subscription) attach(es eventStream) { s.eventFeed.attach(es, s.read) }

// read turns event frames into Events until the stream ends.
func (s *Subscription) read() {
	defer close(s.readDone)
	defer close(s.ch)
	var batch wire.EventBatch
	for {
		h, payload, err := s.es.fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			s.fail(s.sess.wrap(err))
			return
		}
		evs, err := s.decode(h, payload, &batch)
		if err != nil {
			s.fail(err)
			s.es.str.CancelRead(0)
			return
		}
		select {
		case s.ch <- evs:
		case <-s.sess.qc.Context().Done():
			s.fail(s.sess.wrap(ErrClosed))
			return
		}
	}
}

func (s *Subscription) decode(h wire.Header, payload []byte, batch *wire.EventBatch) ([]Event, error) {
	if h.Flags == 0 {
		m, err := wire.DecodeJSON(payload)
		if err != nil {
			return nil, err
		}
		switch m := m.(type) {
		case *wire.SubscriptionGap:
			s.dropped.Add(m.Dropped)
			return []Event{{Dropped: m.Dropped}}, nil
		case *wire.ErrorMessage: // why the broker ends the subscription
			return nil, eventStreamError(m.Message)
		}
		return nil, fmt.Errorf("%w: %s on an event stream", ErrProtocol, m.Type())
	}
	if err := wire.DecodeEventBatch(h.Flags, payload, batch); err != nil {
		return nil, err
	}
	// One copy per frame: the events' payloads share it, and it outlives
	// the reader's buffer.
	total := 0
	for _, p := range batch.Payloads {
		total += len(p)
	}
	owned := make([]byte, total)
	evs := make([]Event, len(batch.Payloads))
	pos := 0
	for i, p := range batch.Payloads {
		n := copy(owned[pos:], p)
		evs[i] = Event{Offset: batch.BaseOffset + uint64(i), HasOffset: batch.HasBaseOffset, Payload: owned[pos : pos+n : pos+n]}
		pos += n
	}
	return evs, nil
}

// Next returns the next event or gap report, blocking until one arrives,
// ctx ends, or the subscription ends (then the error says why).
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for len(s.cur) == 0 {
		evs, err := s.receive(ctx)
		if err != nil {
			return Event{}, err
		}
		s.cur = evs
	}
	ev := s.cur[0]
	s.cur = s.cur[1:]
	if ev.Dropped == 0 {
		s.delivered.Add(1)
	}
	return ev, nil
}

// Close ends the subscription: the broker sees its event stream stopped and
// releases the subscription. Close waits for the subscription's reader.
func (s *Subscription) Close() error {
	s.close()
	return nil
}
