package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/felixmq/felix/wire"
)

// IdempotentPublisher publishes acked batches that the broker writes
// exactly once however often they are sent: each batch carries this
// publisher's producer id and its sequence on its shard, and the broker
// answers a batch it already holds with its original offset instead of
// writing it again (docs/protocol.md, "Idempotent producer").
//
// So it re-sends freely: after its connection fails (it dials again, and
// sends every unanswered batch again, in order, under the same sequences),
// after a retryable refusal (retry, retry_after, outcome_unknown, or a
// redirect), and after not_leader (to the broker named). It stops on a
// fatal answer: a refusal that re-sending cannot cure (sequence_expired,
// sequence_reused, unknown_producer, a gap it cannot fill, a fatal code),
// which fails every pending batch and later call with that error (Err).
//
// Up to Window batches are sent and unanswered at a time (64 by default,
// the most the broker remembers per producer and shard, so a re-send always
// finds its original). Safe for concurrent use; the order of one shard's
// batches is the order of the calls that made them.
type IdempotentPublisher struct {
	opts              IdempotentOptions
	first             *Client // the caller's Client, never closed here
	namespace, stream string
	producer          uint64
	shards            uint32 // the stream's width, 0 when unknown (keys then need it)
	routing           wire.Routing

	room chan struct{} // a token per batch in flight
	wake chan struct{} // cap 1: the pump has work
	stop chan struct{} // closed by Close: no more dials
	done chan struct{} // the pump finished

	resends, reconnects atomic.Uint64

	mu struct {
		sync.Mutex
		w       idemWindow
		conn    *idemConn   // nil while reconnecting
		dead    []*idemConn // lost connections whose writers may still run
		addr    string      // where to dial next; "" is the first broker
		err     error       // terminal
		closing bool
		retry   backoff  // of consecutive retryable answers
		spare   [][]byte // frame buffers of answered batches, for reuse
		// answered is closed (and replaced) when a batch is answered
		// while a PublishAsync waits for its shard's span to shrink.
		answered chan struct{}
	}
}

// IdempotentOptions configures an IdempotentPublisher; zero values are the
// defaults.
type IdempotentOptions struct {
	// Shard addresses batches without a key to this shard, on a broker that
	// takes shard-addressed publishes (wire.CapShard). 0 is shard 0, where
	// the broker puts unkeyed idempotent batches anyway.
	Shard uint32
	// Window is how many batches may be sent and unanswered at a time,
	// 1 to 64; 0 means 64.
	Window int
	// Redial opens a new connection after the current one failed, to addr
	// ("" is the broker first dialled, else the one a not_leader refusal
	// named). nil dials with the first Client's Config. The publisher
	// closes the Clients it dialled.
	Redial func(ctx context.Context, addr string) (*Client, error)
	// DialTimeout bounds one redial; 0 means 2 s. Failed redials are
	// retried, backing off to 2 s (to 100 ms after one the broker's host
	// refused: nothing listens there, so the next broker is asked soon),
	// until Close.
	DialTimeout time.Duration
}

// maxIdemWindow is the broker's remembered batches per producer and shard.
const maxIdemWindow = 64

// idemConn is one connection's control stream carrying the batches.
type idemConn struct {
	own    *Client // a Client this publisher dialled, closed with it; nil for the first
	ct     *control
	binary bool // the broker takes binary idempotent batches (wire.FlagPublishIdempotent)
	wmu    sync.Mutex
	rr     *replyReader
	head   wire.PublishOKHead // decoded into by whoever holds rr's turn
	closed atomic.Bool        // close ran: the reader reads on to see the end
}

// NewIdempotentPublisher asks the broker for a producer id and returns a
// publisher of namespace/stream. The broker must serve idempotent producers
// (wire.FeatureIdempotentProducer), else ErrNotNegotiated.
func (c *Client) NewIdempotentPublisher(ctx context.Context, namespace, stream string, opts IdempotentOptions) (*IdempotentPublisher, error) {
	if opts.Window == 0 {
		opts.Window = maxIdemWindow
	}
	if opts.Window < 1 || opts.Window > maxIdemWindow {
		return nil, fmt.Errorf("%w: Window %d not in [1, %d]", ErrInvalidConfig, opts.Window, maxIdemWindow)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	p := &IdempotentPublisher{opts: opts, first: c, namespace: namespace, stream: stream,
		room: make(chan struct{}, opts.Window), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	p.mu.w = newIdemWindow()
	ic, err := p.open(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	p.mu.conn = ic
	c.wg.Add(1)
	go func() { defer c.wg.Done(); p.pump() }()
	return p, nil
}

// open authenticates a control stream on c. The first one also gets the
// producer id and the stream's width; later ones check that the broker
// still serves idempotent producers, and start reading answers.
func (p *IdempotentPublisher) open(ctx context.Context, c, own *Client) (*idemConn, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	ic := &idemConn{own: own, ct: ct, binary: wire.Supports(ct.flags, wire.FlagPublishIdempotent|wire.FlagBinaryPublishBatch|wire.FlagBinaryPublishAcked)}
	if err := p.setUp(ctx, ic); err != nil {
		ct.str.CancelRead(0)
		ct.str.CancelWrite(0)
		return nil, err
	}
	ic.rr = newReplyReader(ct.fr, ct.str, ct.sess, ct.str.Context().Done(),
		func(h wire.Header, payload []byte) error { return p.answerFrame(ic, h, payload) },
		func() (read, due bool) {
			w := ic.closed.Load() || p.inflight() > 0
			return w, w
		},
		func(err error) {
			if !errors.Is(err, io.EOF) {
				p.first.cfg.Logger.Debug("idempotent publisher: connection lost", "err", err)
			}
			p.lost(ic)
		})
	ic.rr.start(&c.wg)
	return ic, nil
}

// inflight is how many batches are sent and unanswered.
func (p *IdempotentPublisher) inflight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.w.inflight)
}

func (p *IdempotentPublisher) setUp(ctx context.Context, ic *idemConn) error {
	if !ic.ct.features.Has(wire.FeatureIdempotentProducer) {
		return fmt.Errorf("%w: the broker does not serve idempotent producers", ErrNotNegotiated)
	}
	if p.producer != 0 {
		return nil
	}
	m, err := ic.ct.request(ctx, &wire.ProducerInit{RequestID: 1})
	if err != nil {
		return err
	}
	init, ok := m.(*wire.ProducerInitOK)
	if !ok {
		return fmt.Errorf("%w: %s in reply to producer_init", ErrProtocol, m.Type())
	}
	p.producer = init.ProducerID
	if !ic.ct.features.Has(wire.FeatureStreamShards) {
		return nil
	}
	m, err = ic.ct.request(ctx, &wire.StreamShards{TenantID: ic.ct.sess.c.cfg.Tenant, Namespace: p.namespace, Stream: p.stream, RequestID: 2})
	if err != nil {
		return err
	}
	view, ok := m.(*wire.StreamShardsView)
	if !ok {
		return fmt.Errorf("%w: %s in reply to stream_shards", ErrProtocol, m.Type())
	}
	p.shards = view.Shards
	if view.Routing != nil {
		if p.routing, ok = wire.ParseRouting(*view.Routing); !ok {
			p.shards = 0 // a routing we do not know: keys cannot be placed
		}
	}
	return nil
}

// request writes m and reads its answer, before the stream's reader runs;
// an error answer is a *BrokerError.
func (ct *control) request(ctx context.Context, m wire.Message) (wire.Message, error) {
	if _, err := ct.str.Write(wire.AppendJSONFrame(nil, m)); err != nil {
		return nil, ct.sess.wrap(fmt.Errorf("client: write %s: %w", m.Type(), err))
	}
	a, err := ct.readJSON(ctx)
	if err != nil {
		return nil, err
	}
	if e, ok := a.(*wire.ErrorMessage); ok {
		return nil, brokerError(e.Message, e.Err, e.Owner)
	}
	return a, nil
}

// ProducerID is the publisher's producer id.
func (p *IdempotentPublisher) ProducerID() uint64 { return p.producer }

// Resends counts batches sent again; Reconnects the connections replaced.
func (p *IdempotentPublisher) Resends() uint64    { return p.resends.Load() }
func (p *IdempotentPublisher) Reconnects() uint64 { return p.reconnects.Load() }

// Err is the error that stopped the publisher, nil while it runs.
func (p *IdempotentPublisher) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err
}

// Publish publishes payloads as one batch (without a key) and waits for its
// answer: where it landed, or why it never will. It reads the answer itself
// unless another goroutine reads the connection already.
func (p *IdempotentPublisher) Publish(ctx context.Context, payloads [][]byte) (Ack, error) {
	pa, _ := p.publish(ctx, nil, payloads, nil)
	err := pa.Wait(ctx)
	return pa.Result(), err
}

// PublishAsync sends payloads as one batch, routed by key (nil: no key;
// then to Shard), and returns without waiting for the answer; it waits for
// room in the window, or until ctx ends. The payloads are copied before it
// returns. Done is closed when the batch is written (Result says where) or
// the publisher stopped.
func (p *IdempotentPublisher) PublishAsync(ctx context.Context, key []byte, payloads [][]byte) *PendingAck {
	return p.publishHeaded(ctx, key, payloads, nil)
}

// publishHeaded is PublishAsync with one header block per payload (nil:
// none).
func (p *IdempotentPublisher) publishHeaded(ctx context.Context, key []byte, payloads, headers [][]byte) *PendingAck {
	pa, ic := p.publish(ctx, key, payloads, headers)
	if ic != nil {
		ic.rr.ask()
	}
	return pa
}

// publish is publishHeaded without asking a reader goroutine for the
// answer; it returns the connection the batch went out on, nil when none
// did yet.
func (p *IdempotentPublisher) publish(ctx context.Context, key []byte, payloads, headers [][]byte) (*PendingAck, *idemConn) {
	pa := &PendingAck{done: make(chan struct{}), sent: time.Now()}
	select {
	case p.room <- struct{}{}:
	case <-ctx.Done():
		pa.finish(ctx.Err())
		return pa, nil
	}
	b, err := p.batch(key, payloads, headers, pa)
	p.mu.Lock()
	if err == nil {
		err = p.mu.err
	}
	if err == nil && p.mu.closing {
		err = ErrClosed
	}
	if err == nil {
		err = p.awaitSpanLocked(ctx, b.shard)
	}
	if err != nil {
		p.mu.Unlock()
		<-p.room
		pa.finish(err)
		return pa, nil
	}
	p.mu.w.add(b)
	ic := p.mu.conn
	if ic == nil {
		p.mu.Unlock() // the pump sends it once connected again
		notify(p.wake)
		return pa, nil
	}
	pa.rr = ic.rr
	ic.wmu.Lock() // taken under mu: writes go out in sequence order
	p.mu.Unlock()
	err = ic.write(p, b)
	ic.wmu.Unlock()
	if err != nil {
		p.lost(ic)
	}
	return pa, ic
}

// awaitSpanLocked waits, p.mu held (let go meanwhile), until shard's
// oldest unanswered batch is less than the broker's remembered window
// behind the next sequence: a batch stuck in re-sends (its shard's leader
// changing, say) must still be found when it is sent again, however many
// later ones were answered meanwhile.
func (p *IdempotentPublisher) awaitSpanLocked(ctx context.Context, shard uint32) error {
	for p.mu.w.span(shard) >= maxIdemWindow {
		if p.mu.answered == nil {
			p.mu.answered = make(chan struct{})
		}
		ch := p.mu.answered
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			return ctx.Err()
		}
		p.mu.Lock()
		if p.mu.err != nil {
			return p.mu.err
		}
	}
	return nil
}

// batch builds a batch: its shard, and its binary frame (the publisher's
// copy of the payloads), in a buffer of an answered batch when one fits.
func (p *IdempotentPublisher) batch(key []byte, payloads, headers [][]byte, pa *PendingAck) (*idemBatch, error) {
	b := &idemBatch{shard: p.opts.Shard, pa: pa}
	if key != nil {
		if p.shards == 0 {
			return nil, fmt.Errorf("%w: keyed idempotent batches need the stream's width (stream_shards)", ErrNotNegotiated)
		}
		b.shard, b.key = wire.RouteKey(key, p.shards, p.routing), key
	}
	ap := p.frameOf(b, 0)
	ap.Payloads, ap.Headers = payloads, headers
	p.mu.Lock()
	var buf []byte
	if n := len(p.mu.spare); n > 0 {
		buf, p.mu.spare = p.mu.spare[n-1], p.mu.spare[:n-1]
	}
	p.mu.Unlock()
	frame, err := wire.AppendAckedPublish(buf[:0], ap)
	if err != nil {
		return nil, err
	}
	b.frame = frame
	return b, nil
}

// frameOf is b as an acked publish; its sequence and request id are
// patched in when it is written (write).
func (p *IdempotentPublisher) frameOf(b *idemBatch, req uint64) *wire.AckedPublish {
	ap := &wire.AckedPublish{RequestID: req, Idempotent: true, ProducerID: p.producer, Sequence: b.seq,
		PublishBatch: wire.PublishBatch{TenantID: p.first.cfg.Tenant, Namespace: p.namespace, Stream: p.stream}}
	switch {
	case b.key != nil:
		ap.Key, ap.HasKey = b.key, true
	case b.shard != 0:
		ap.Shard, ap.HasShard = b.shard, true
	}
	return ap
}

// write sends batches on ic, in order; ic.wmu is held. A binary batch is
// its frame with the request id and sequence patched in; a broker that
// takes no binary idempotent batches gets publish_idempotent.
func (ic *idemConn) write(p *IdempotentPublisher, batches ...*idemBatch) error {
	for _, b := range batches {
		var out []byte
		if ic.binary {
			patchIdem(b.frame, b.req, b.seq)
			out = b.frame
		} else {
			var ap wire.AckedPublish
			if err := wire.DecodeAckedPublishFlags(frameFlags(b.frame), b.frame[wire.HeaderLen:], &ap); err != nil {
				return err
			}
			m := &wire.PublishIdempotent{TenantID: ap.TenantID, Namespace: ap.Namespace, Stream: ap.Stream, Payloads: ap.Payloads,
				RequestID: b.req, ProducerID: p.producer, Sequence: b.seq}
			if ap.HasKey {
				m.Key = b.key
			}
			if ap.HasShard {
				m.Shard = &ap.Shard
			}
			out = wire.AppendJSONFrame(nil, m)
		}
		if _, err := ic.ct.str.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// patchIdem writes req and seq into an idempotent publish frame: request id
// first, then ack mode, producer id, sequence (wire.AppendAckedPublish).
func patchIdem(frame []byte, req, seq uint64) {
	be := frame[wire.HeaderLen:]
	putU64(be[0:], req)
	putU64(be[17:], seq)
}

func putU64(b []byte, v uint64) {
	_ = b[7]
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func frameFlags(frame []byte) wire.Flags { return wire.Flags(uint16(frame[6])<<8 | uint16(frame[7])) }

// answerFrame applies one answer on ic. A publish_ok, nearly every answer,
// is read without the JSON decoder when it has the canonical form.
func (p *IdempotentPublisher) answerFrame(ic *idemConn, h wire.Header, payload []byte) error {
	if h.Flags != 0 {
		return fmt.Errorf("%w: binary frame %s on an idempotent publisher", ErrProtocol, h.Flags)
	}
	if head := &ic.head; wire.DecodePublishOKHead(payload, head) {
		p.acked(head.RequestID, Ack{Offset: head.Offset, HasOffset: head.HasOffset, Shard: head.Shard, HasShard: head.HasShard})
		return nil
	}
	m, err := wire.DecodeJSON(payload)
	if err != nil {
		return err
	}
	p.answer(m)
	return nil
}

// lost drops ic after it failed; the pump dials again while batches wait.
func (p *IdempotentPublisher) lost(ic *idemConn) {
	p.mu.Lock()
	if p.mu.conn == ic {
		p.mu.conn = nil
		p.mu.dead = append(p.mu.dead, ic)
	}
	p.mu.Unlock()
	ic.close()
	notify(p.wake)
}

// waitDead waits until no write runs on a lost connection any more (its
// stream is cancelled, so they end at once): a batch's frame is patched
// for its next send only once nothing reads it for an earlier one. No
// write can start on a lost connection, whose writers took its lock while
// it was the current one.
func (p *IdempotentPublisher) waitDead() {
	p.mu.Lock()
	dead := p.mu.dead
	p.mu.dead = nil
	p.mu.Unlock()
	for _, ic := range dead {
		//lint:ignore SA2001 taking the lock is the wait for the writers
		ic.wmu.Lock()
		ic.wmu.Unlock()
	}
}

func (ic *idemConn) close() {
	ic.closed.Store(true)
	ic.ct.str.CancelRead(0)
	ic.ct.str.CancelWrite(0)
	ic.rr.ask()
	if ic.own != nil {
		go ic.own.Close()
	}
}
