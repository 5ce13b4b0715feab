package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// From says where a subscription starts.
type From struct {
	kind   wire.StartKind
	offset uint64
	at     time.Time // At: resolved to an offset when the subscription opens
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
	// Headers are the event's headers (the broker sends them to clients
	// that offer wire.CapHeaders, which this client does by default).
	Headers []wire.EventHeader
	// Time is when the event's record was appended (the broker's clock),
	// on durable streams, for a client that offered
	// wire.FlagEventTimestamps (Config.Flags); zero otherwise.
	Time time.Time
	// Publisher is the principal that published the event, for a client
	// that offered wire.FlagEventPublisher, when the broker knows it.
	Publisher string
	// Dropped, when non-zero, makes this a gap report instead of an event:
	// the broker's queue for this subscription dropped that many events
	// (its policy drop_new or drop_old) since the previous report.
	Dropped uint64
}

// Subscription follows one shard of a stream.
//
// When the connection it runs on is replaced (the Client redialled after
// its path stalled), Next resumes it on the new connection at the offset
// after the last event it returned: a durable stream's subscriber misses
// nothing; an ephemeral stream's subscriber gets what the broker still
// holds in its ring, and a gap report for what it no longer does, so every
// event is delivered or reported lost.
type Subscription struct {
	c      *Client
	resume func(ctx context.Context, from From) (*subscriptionFeed, *wire.Subscribed, error) // nil: cannot resume

	mu struct {
		sync.Mutex
		feed   *subscriptionFeed
		closed bool
	}
	// Next's own: the pending events and the offset due next.
	cur     []Event
	next    uint64
	hasNext bool

	delivered atomic.Uint64
	dropped   atomic.Uint64
	resumes   atomic.Uint64
}

// Subscribe asks the broker for a subscription on namespace/stream of the
// client's tenant. Earliest and Offset need a broker that advertised
// EVENT_BATCH_OFFSETS: an older broker would silently start at the tail, so
// the client refuses instead.
func (c *Client) Subscribe(ctx context.Context, namespace, stream string, opts SubscribeOptions) (*Subscription, error) {
	s := &Subscription{c: c}
	s.resume = func(ctx context.Context, from From) (*subscriptionFeed, *wire.Subscribed, error) {
		o := opts
		o.From = from
		return c.subscribe(ctx, namespace, stream, o, &s.dropped)
	}
	feed, reply, err := c.subscribe(ctx, namespace, stream, opts, &s.dropped)
	if err != nil {
		return nil, err
	}
	s.mu.feed = feed
	if reply.StartOffset != nil {
		s.next, s.hasNext = *reply.StartOffset, true
	}
	return s, nil
}

// subscribe is one subscribe request, on the current session.
func (c *Client) subscribe(ctx context.Context, namespace, stream string, opts SubscribeOptions, dropped *atomic.Uint64) (*subscriptionFeed, *wire.Subscribed, error) {
	from, err := opts.From.resolve(ctx, c, namespace, stream, opts.Shard)
	if err != nil {
		return nil, nil, err
	}
	opts.From = from
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer ct.str.CancelRead(0)
	msg := &wire.Subscribe{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream}
	if opts.From.set && opts.From.kind != wire.StartLatest {
		if !wire.Supports(ct.flags, wire.FlagEventBatchOffsets) {
			ct.str.CancelWrite(0)
			return nil, nil, fmt.Errorf("%w: the broker does not support resuming (no offsets capability)", ErrProtocol)
		}
	}
	if opts.From.set {
		msg.Start = &wire.Start{Kind: opts.From.kind, Offset: opts.From.offset}
	}
	if opts.Shard != 0 {
		msg.Shard = &opts.Shard
	}
	if _, err := ct.str.Write(wire.AppendJSONFrame(nil, msg)); err != nil {
		return nil, nil, fmt.Errorf("client: write subscribe: %w", err)
	}
	ct.str.Close()
	m, err := ct.readJSON(ctx)
	if err != nil {
		return nil, nil, err
	}
	switch m := m.(type) {
	case *wire.Subscribed:
		return c.newSubscriptionFeed(ct.sess, m.SubscriptionID, dropped), m, nil
	case *wire.SubscribeCursorError:
		return nil, nil, &CursorError{Reason: string(m.Reason), Requested: m.Requested, Available: m.Available}
	case *wire.ErrorMessage:
		return nil, nil, brokerError(m.Message, m.Err, m.Owner)
	}
	return nil, nil, fmt.Errorf("%w: %s in reply to subscribe", ErrProtocol, m.Type())
}

// newSubscription is a Subscription that cannot resume (a keyed watch's),
// on the feed of subscription id.
func (c *Client) newSubscription(sess *session, id uint64) *Subscription {
	s := &Subscription{c: c}
	s.mu.feed = c.newSubscriptionFeed(sess, id, &s.dropped)
	return s
}

// newSubscriptionFeed registers subscription id with the session's router,
// which attaches its event stream when (or if already) it arrives.
func (c *Client) newSubscriptionFeed(sess *session, id uint64, dropped *atomic.Uint64) *subscriptionFeed {
	f := newSubscriptionFeed(c, sess, id, dropped)
	sess.router.register(f.id, f)
	return f
}

// ID is the broker-assigned subscription id (of the current connection).
func (s *Subscription) ID() uint64 { return s.feed().id }

func (s *Subscription) feed() *subscriptionFeed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.feed
}

// Delivered and Dropped count events returned by Next and events the broker
// reported dropped.
func (s *Subscription) Delivered() uint64 { return s.delivered.Load() }

// Dropped counts events the broker reported as dropped for this
// subscription, and those a resume found no longer held.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Resumes counts the times the subscription moved to a new connection.
func (s *Subscription) Resumes() uint64 { return s.resumes.Load() }

func (f *subscriptionFeed) decode(h wire.Header, payload []byte, batch *wire.EventBatch) ([]Event, error) {
	if h.Flags == 0 {
		m, err := wire.DecodeJSON(payload)
		if err != nil {
			return nil, err
		}
		switch m := m.(type) {
		case *wire.SubscriptionGap:
			f.dropped.Add(m.Dropped)
			return []Event{{Dropped: m.Dropped}}, nil
		case *wire.ErrorMessage: // why the broker ends the subscription
			return nil, eventStreamError(m.Message, m.Err)
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
	publisher := string(batch.Publisher)
	for i, p := range batch.Payloads {
		n := copy(owned[pos:], p)
		evs[i] = Event{Offset: batch.BaseOffset + uint64(i), HasOffset: batch.HasBaseOffset, Payload: owned[pos : pos+n : pos+n],
			Publisher: publisher}
		pos += n
		if batch.Timestamps != nil {
			evs[i].Time = time.UnixMicro(int64(batch.Timestamps[i]))
		}
		if batch.Headers != nil {
			hs, err := wire.ParseHeaders(batch.Headers[i])
			if err != nil {
				return nil, err
			}
			evs[i].Headers = hs
		}
	}
	return evs, nil
}

// Next returns the next event or gap report, blocking until one arrives,
// ctx ends, or the subscription ends (then the error says why). A
// subscription whose connection the Client replaced resumes here (see
// Subscription).
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for len(s.cur) == 0 {
		f := s.feed()
		evs, err := f.receive(ctx)
		if err != nil {
			if !s.resumable(err) {
				return Event{}, err
			}
			if gap, rerr := s.resumeAfter(ctx, f); rerr != nil {
				return Event{}, fmt.Errorf("%w (resuming: %w)", err, rerr)
			} else if gap != 0 {
				return Event{Dropped: gap}, nil
			}
			continue
		}
		s.cur = evs
	}
	ev := s.cur[0]
	s.cur = s.cur[1:]
	if ev.Dropped == 0 {
		s.delivered.Add(1)
		if ev.HasOffset {
			s.next, s.hasNext = ev.Offset+1, true
		}
	}
	return ev, nil
}

// resumable reports whether err ended the feed because the Client replaced
// its connection, so the subscription can go on on the new one.
func (s *Subscription) resumable(err error) bool {
	return s.resume != nil && s.hasNext && errors.Is(err, ErrPathStalled)
}

// resumeAfter subscribes again on the Client's new connection at the
// offset due next, and returns the events that are gone from the broker in
// the meantime (an ephemeral stream's ring moved past them).
func (s *Subscription) resumeAfter(ctx context.Context, old *subscriptionFeed) (gap uint64, err error) {
	if err := s.c.awaitSessionAfter(ctx, old.sess); err != nil {
		return 0, err
	}
	feed, _, err := s.resume(ctx, Offset(s.next))
	var ce *CursorError
	if errors.As(err, &ce) {
		switch ce.Reason {
		case "too_old":
			gap = ce.Available - s.next
		case "in_future":
			gap = 0 // the broker holds nothing from there on; its tail is next now
		}
		feed, _, err = s.resume(ctx, Offset(ce.Available))
		s.next = ce.Available
	}
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	closed := s.mu.closed
	if !closed {
		s.mu.feed = feed
	}
	s.mu.Unlock()
	if closed {
		feed.close()
		return 0, ErrClosed
	}
	old.close()
	s.resumes.Add(1)
	s.dropped.Add(gap)
	return gap, nil
}

// Close ends the subscription: the broker sees its event stream stopped and
// releases the subscription. Close waits for the subscription's reader.
func (s *Subscription) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	f := s.mu.feed
	s.mu.Unlock()
	f.close()
	return nil
}
