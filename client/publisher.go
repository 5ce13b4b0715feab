package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// Publisher publishes to one stream over its own control stream. Acked
// publishes are pipelined: PublishAsync returns at once and acks (which the
// broker may send out of order) complete them by request id. Publish and
// PublishBatch read their own ack when no other goroutine is reading the
// stream (replyReader). A Publisher is safe for concurrent use.
type Publisher struct {
	c         *Client
	ct        *control
	namespace string
	stream    string
	binary    bool // broker takes binary acked batches and answers binary acks
	shards    bool // broker takes shard-addressed publishes (wire.CapShard)
	keyed     bool // broker takes keyed binary publishes (else keyed ones go as JSON)

	wmu  sync.Mutex
	wbuf []byte

	rr  *replyReader
	ack wire.PublishAck // decoded into by whoever holds rr's turn

	mu struct {
		sync.Mutex
		nextID  uint64
		pending map[uint64]*PendingAck
		err     error // terminal: the stream failed or was closed
		closing bool  // Close finished our side
		lastErr error // last uncorrelated broker error (fire-and-forget)
		// sent: a fire-and-forget batch went out, whose refusal may come
		// at any time, so the reader goroutine reads on for good.
		sent bool
	}
}

// PendingAck is an acked publish in flight.
type PendingAck struct {
	done chan struct{}
	rr   *replyReader // reads the stream for Wait; nil: wait for done
	err  error
	sent time.Time
	rtt  time.Duration
	res  Ack
	hook func(*PendingAck) // ClusterClient learning from the outcome
}

// Ack is what a broker's answer to a publish says besides ok or refused.
type Ack struct {
	// Offset is the offset of the batch's first record (HasOffset: the
	// broker said; it does when it advertised wire.FlagAckOffset).
	Offset    uint64
	HasOffset bool
	// Shard is the shard the batch went to (HasShard: the broker said).
	Shard    uint32
	HasShard bool
	// Owner is the shard's owner (Named: the broker named it; cluster
	// mode, with wire.CapOwner negotiated).
	Owner wire.Owner
	Named bool
}

// Owner is the shard's owner as the ack named it (cluster mode, with
// wire.CapOwner negotiated), once Done; false when it named none.
func (pa *PendingAck) Owner() (wire.Owner, bool) { return pa.res.Owner, pa.res.Named }

// Result is what the answer said about where the batch went, once Done.
func (pa *PendingAck) Result() Ack { return pa.res }

// Wait blocks until the broker acked (nil) or refused (a *BrokerError) the
// publish, or ctx ends.
func (pa *PendingAck) Wait(ctx context.Context) error {
	if pa.rr != nil {
		if err := pa.rr.await(ctx, pa.done); err != nil {
			return err
		}
		return pa.err
	}
	select {
	case <-pa.done:
		return pa.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the ack (or a failure) arrived.
func (pa *PendingAck) Done() <-chan struct{} { return pa.done }

// Latency is the time from sending to the ack, once Done.
func (pa *PendingAck) Latency() time.Duration { return pa.rtt }

// NewPublisher opens a publisher for namespace/stream of the client's tenant.
func (c *Client) NewPublisher(ctx context.Context, namespace, stream string) (*Publisher, error) {
	ct, err := c.openControl(ctx)
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		c: c, ct: ct, namespace: namespace, stream: stream,
		binary: wire.Supports(ct.flags, wire.FlagBinaryPublishBatch|wire.FlagBinaryPublishAcked|wire.FlagBinaryPublishAck),
		shards: wire.Supports(ct.flags, wire.CapShard),
		keyed:  wire.Supports(ct.flags, wire.FlagPublishKeyed),
	}
	p.mu.pending = map[uint64]*PendingAck{}
	p.rr = p.replyReader(ct.sess, ct.str.Context().Done())
	p.rr.start(&c.wg)
	return p, nil
}

// replyReader reads the acks; the reader goroutine reads while acks are
// pending, after a fire-and-forget send and to see the stream end.
func (p *Publisher) replyReader(sess *session, sending <-chan struct{}) *replyReader {
	return newReplyReader(p.ct.fr, p.ct.str, sess, sending, func(h wire.Header, payload []byte) error { return p.reply(h, payload, &p.ack) },
		func() (read, due bool) {
			p.mu.Lock()
			defer p.mu.Unlock()
			due = len(p.mu.pending) > 0 || p.mu.closing
			return due || p.mu.sent, due
		},
		func(err error) {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			p.failAll(p.ct.sess.wrap(err))
		})
}

// Binary reports whether publishes use the binary encoding.
func (p *Publisher) Binary() bool { return p.binary }

// Publish publishes one payload and waits for its ack.
func (p *Publisher) Publish(ctx context.Context, payload []byte) error {
	var one [1][]byte
	one[0] = payload
	return p.PublishBatch(ctx, one[:])
}

// PublishBatch publishes payloads as one atomic batch (contiguous offsets in
// one shard) and waits for its ack.
func (p *Publisher) PublishBatch(ctx context.Context, payloads [][]byte) error {
	// Not asking the reader goroutine: Wait reads the ack itself unless
	// another goroutine reads already.
	return p.publishAsync(-1, nil, payloads, nil).Wait(ctx)
}

// PublishAsync sends an acked batch and returns without waiting. The
// payloads are copied into the frame before it returns.
func (p *Publisher) PublishAsync(payloads [][]byte) *PendingAck {
	pa := p.publishAsync(-1, nil, payloads, nil)
	p.rr.ask()
	return pa
}

// PublishKeyAsync is PublishAsync routed by key: the broker hashes it to a
// shard (FNV-1a 64 with a SplitMix64 finish, as the published Felix
// does), so one key's batches keep their order in one shard. The ack's
// Result names the shard.
func (p *Publisher) PublishKeyAsync(key []byte, payloads [][]byte) *PendingAck {
	pa := p.publishAsync(-1, notNil(key), payloads, nil)
	p.rr.ask()
	return pa
}

// PublishShardAsync is PublishAsync addressed to one shard (cluster
// routing; ClusterClient uses it). It fails with ErrNotNegotiated on a
// broker that does not take shard-addressed publishes.
func (p *Publisher) PublishShardAsync(shard uint32, payloads [][]byte) *PendingAck {
	return p.publishShardLearning(shard, payloads, nil)
}

// publishShardLearning is PublishShardAsync calling hook with the outcome
// before Done is closed.
func (p *Publisher) publishShardLearning(shard uint32, payloads [][]byte, hook func(*PendingAck)) *PendingAck {
	if !p.shards {
		pa := &PendingAck{done: make(chan struct{}), err: ErrNotNegotiated}
		close(pa.done)
		return pa
	}
	pa := p.publishAsync(int64(shard), nil, payloads, hook)
	p.rr.ask()
	return pa
}

// publishAsync sends an acked batch; shard < 0 lets the broker pick, by
// key when there is one.
func (p *Publisher) publishAsync(shard int64, key []byte, payloads [][]byte, hook func(*PendingAck)) *PendingAck {
	return p.publishHeaded(shard, key, payloads, nil, hook)
}

// publishHeaded is publishAsync with one header block per payload (nil:
// none; the caller checked the broker takes them, which binary publishes
// alone carry).
func (p *Publisher) publishHeaded(shard int64, key []byte, payloads, headers [][]byte, hook func(*PendingAck)) *PendingAck {
	// sent is set before pa is in pending: once there, the reader may
	// complete or fail it (failAll on a broken stream) at any moment.
	pa := &PendingAck{done: make(chan struct{}), rr: p.rr, hook: hook, sent: time.Now()}
	p.mu.Lock()
	if p.mu.err != nil {
		err := p.mu.err
		p.mu.Unlock()
		pa.finish(err)
		return pa
	}
	p.mu.nextID++
	id := p.mu.nextID
	p.mu.pending[id] = pa
	p.mu.Unlock()

	err := p.write(func(b []byte) ([]byte, error) {
		if p.binary && (key == nil || p.keyed) {
			pb := p.batch(shard, key, payloads)
			pb.Headers = headers
			return wire.AppendAckedPublish(b, &wire.AckedPublish{RequestID: id, Mode: wire.AckPerBatch, PublishBatch: pb})
		}
		ack := wire.AckPerBatch
		return wire.AppendJSONFrame(b, &wire.PublishBatchMessage{
			TenantID: p.c.cfg.Tenant, Namespace: p.namespace, Stream: p.stream,
			Payloads: payloads, Key: key, RequestID: &id, Ack: &ack, Shard: shardField(shard),
		}), nil
	})
	if err != nil {
		p.complete(id, Ack{}, err)
	}
	return pa
}

// batch is a binary publish body, addressed to shard when it is >= 0,
// else routed by key when it is not nil.
func (p *Publisher) batch(shard int64, key []byte, payloads [][]byte) wire.PublishBatch {
	b := wire.PublishBatch{TenantID: p.c.cfg.Tenant, Namespace: p.namespace, Stream: p.stream, Payloads: payloads}
	if shard >= 0 {
		b.Shard, b.HasShard = uint32(shard), true
	} else if key != nil {
		b.Key, b.HasKey = key, true
	}
	return b
}

// notNil makes an empty key a key: nil means none.
func notNil(key []byte) []byte {
	if key == nil {
		return []byte{}
	}
	return key
}

// Send publishes payloads as one fire-and-forget batch. Nothing is dropped
// silently: the broker applies backpressure through QUIC flow control, so
// Send blocks when the broker cannot keep up. A broker-side refusal arrives
// later as an uncorrelated error (see Err).
func (p *Publisher) Send(payloads [][]byte) error {
	return p.send(-1, nil, payloads)
}

// SendKey is Send routed by key (see PublishKeyAsync).
func (p *Publisher) SendKey(key []byte, payloads [][]byte) error {
	return p.send(-1, notNil(key), payloads)
}

// SendShard is Send addressed to one shard (ErrNotNegotiated on a broker
// that does not take shard-addressed publishes).
func (p *Publisher) SendShard(shard uint32, payloads [][]byte) error {
	if !p.shards {
		return ErrNotNegotiated
	}
	return p.send(int64(shard), nil, payloads)
}

func (p *Publisher) send(shard int64, key []byte, payloads [][]byte) error {
	return p.sendHeaded(shard, key, payloads, nil)
}

func (p *Publisher) sendHeaded(shard int64, key []byte, payloads, headers [][]byte) error {
	p.mu.Lock()
	ask := !p.mu.sent
	p.mu.sent = true
	p.mu.Unlock()
	if ask {
		p.rr.ask()
	}
	return p.write(func(b []byte) ([]byte, error) {
		if p.binary && (key == nil || p.keyed) {
			pb := p.batch(shard, key, payloads)
			pb.Headers = headers
			return wire.AppendPublish(b, &pb)
		}
		none := wire.AckNone
		return wire.AppendJSONFrame(b, &wire.PublishBatchMessage{
			TenantID: p.c.cfg.Tenant, Namespace: p.namespace, Stream: p.stream, Payloads: payloads, Key: key, Ack: &none,
			Shard: shardField(shard),
		}), nil
	})
}

func shardField(shard int64) *uint32 {
	if shard < 0 {
		return nil
	}
	s := uint32(shard)
	return &s
}

func (p *Publisher) write(appendFrame func([]byte) ([]byte, error)) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	buf, err := appendFrame(p.wbuf[:0])
	if err != nil {
		return err
	}
	p.wbuf = buf
	if _, err := p.ct.str.Write(buf); err != nil {
		return p.ct.sess.wrap(fmt.Errorf("client: publish: %w", err))
	}
	return nil
}

// Err returns the last uncorrelated error the broker reported on this
// publisher's stream (a refused fire-and-forget publish), else the error
// that ended the stream, else nil. After Close has returned it is final:
// the broker answered everything it read, so a refusal is never missed, and
// a stream that ended because Close finished it is not an error.
func (p *Publisher) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.lastErr != nil {
		return p.mu.lastErr
	}
	if p.mu.err != nil && !(p.mu.closing && errors.Is(p.mu.err, ErrClosed)) {
		return p.mu.err
	}
	return nil
}

// broken reports whether the stream failed or was closed: a publish on it
// now would fail without being sent.
func (p *Publisher) broken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err != nil
}

func (p *Publisher) complete(id uint64, res Ack, err error) {
	p.mu.Lock()
	pa := p.mu.pending[id]
	delete(p.mu.pending, id)
	p.mu.Unlock()
	if pa == nil {
		return
	}
	pa.res = res
	pa.rtt = time.Since(pa.sent)
	pa.finish(err)
}

// finish records the outcome, lets the hook see it, and closes Done.
func (pa *PendingAck) finish(err error) {
	pa.err = err
	if pa.hook != nil {
		pa.hook(pa)
	}
	close(pa.done)
}

func (p *Publisher) reply(h wire.Header, payload []byte, ack *wire.PublishAck) error {
	if h.Kind() == wire.KindPublishAck {
		if err := wire.DecodePublishAckFlags(h.Flags, payload, ack); err != nil {
			return err
		}
		res := Ack{Offset: ack.Offset, HasOffset: ack.HasOffset, Shard: ack.Shard, HasShard: ack.HasShard,
			Owner: ack.Owner, Named: ack.HasOwner}
		var err error
		if ack.Status != wire.AckOK {
			err = brokerError(ack.Message, ack.Err, ownerOf(res))
		}
		p.complete(ack.RequestID, res, err)
		return nil
	}
	if h.Flags != 0 {
		return fmt.Errorf("%w: unexpected frame %s on a publish stream", ErrProtocol, h.Flags)
	}
	m, err := wire.DecodeJSON(payload)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *wire.PublishOK:
		p.complete(m.RequestID, jsonAck(m.Offset, m.Shard, m.Owner), nil)
	case *wire.PublishError:
		p.complete(m.RequestID, jsonAck(nil, m.Shard, m.Owner), brokerError(m.Message, m.Err, m.Owner))
	case *wire.ErrorMessage:
		p.mu.Lock()
		p.mu.lastErr = brokerError(m.Message, m.Err, m.Owner)
		p.mu.Unlock()
		p.c.cfg.Logger.Warn("broker error on publish stream", "message", m.Message)
	default:
		return fmt.Errorf("%w: %s on a publish stream", ErrProtocol, m.Type())
	}
	return nil
}

func (p *Publisher) failAll(err error) {
	p.mu.Lock()
	if p.mu.err == nil {
		p.mu.err = err
	}
	pending := p.mu.pending
	p.mu.pending = map[uint64]*PendingAck{}
	p.mu.Unlock()
	for _, pa := range pending {
		pa.rtt = time.Since(pa.sent)
		pa.finish(err)
	}
}

// Close finishes the stream after the acks of every pending publish arrived
// (or ctx ended), and waits for the reader.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	p.mu.closing = true
	p.mu.Unlock()
	p.wmu.Lock()
	p.ct.str.Close()
	p.wmu.Unlock()
	p.rr.ask() // to read the last acks and the end of the stream
	select {
	case <-p.rr.done:
	case <-ctx.Done():
		p.ct.str.CancelRead(0)
		<-p.rr.done
	}
	return nil
}

// jsonAck is the Ack of a JSON answer's optional fields.
func jsonAck(offset *uint64, shard *uint32, own *wire.Owner) Ack {
	var a Ack
	if offset != nil {
		a.Offset, a.HasOffset = *offset, true
	}
	if shard != nil {
		a.Shard, a.HasShard = *shard, true
	}
	if own != nil {
		a.Owner, a.Named = *own, true
	}
	return a
}

// ownerOf is the owner an answer named, nil for none.
func ownerOf(a Ack) *wire.Owner {
	if !a.Named {
		return nil
	}
	o := a.Owner
	return &o
}
