package client

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/felixmq/felix/wire"
)

// QueueOptions refine Consume. Zero values take the broker's defaults.
type QueueOptions struct {
	// Member names this consumer in the group (logs, diagnostics); default
	// "HOSTNAME-PID".
	Member string
	// MaxInflight bounds the unacked records out to this consumer; the
	// broker's default is 64.
	MaxInflight int
	// VisibilityTimeout is how long a delivered record may stay unacked
	// before the group redelivers it to any member; the broker's default
	// is 30 s.
	VisibilityTimeout time.Duration
	// MaxAttempts sets the group's bound on deliveries of a record, after
	// which it becomes a dead letter (kept with the group's state; 0
	// leaves it as it is). A broker that does not keep one
	// (wire.CapGroupMaxAttempts) ignores it.
	MaxAttempts uint32
}

// QueueMessage is one delivery.
type QueueMessage struct {
	// Shard is the stream shard the record is from; Offset is its offset
	// in that shard. Order holds within a shard only.
	Shard  uint32
	Offset uint64
	// Payload belongs to the caller.
	Payload []byte
	// Redeliveries counts earlier deliveries of this record to the group.
	Redeliveries uint64
	// Headers are the record's event headers.
	Headers []wire.EventHeader
}

// Ref names the record for Ack, AckAsync and Nack.
func (m QueueMessage) Ref() QueueRef { return QueueRef{Shard: m.Shard, Offset: m.Offset} }

// QueueRef names one delivered record: an offset is only meaningful with
// its shard, so acks take both. Build it with QueueMessage.Ref.
type QueueRef struct {
	Shard  uint32
	Offset uint64
}

// QueueConsumer is one member of a consumer group over a durable stream:
// each record of the stream goes to one member of the group at a time and
// comes back (to any member) until acked — at-least-once. Safe for
// concurrent use; Next is meant for one goroutine.
type QueueConsumer struct {
	c                        *Client
	ct                       *control
	js                       *jsonStream
	namespace, stream, group string

	wmu sync.Mutex // frame writes on ct
	mu  struct {
		sync.Mutex
		nextID  uint64
		pending map[uint64]chan error
		err     error // terminal
		lastErr error // last uncorrelated broker error (AckAsync)
	}
	done chan struct{}
}

// Consume joins group on namespace/stream (a durable stream) and starts
// receiving records from every shard of it; MaxInflight bounds the unacked
// records of all shards together.
func (c *Client) Consume(ctx context.Context, namespace, stream, group string, opts QueueOptions) (*QueueConsumer, error) {
	if opts.Member == "" {
		host, _ := os.Hostname()
		opts.Member = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	req := &wire.QueueConsume{TenantID: c.cfg.Tenant, Namespace: namespace, Stream: stream, Group: group, Member: opts.Member}
	if opts.MaxInflight != 0 {
		n := uint64(opts.MaxInflight)
		req.MaxInflight = &n
	}
	if opts.VisibilityTimeout != 0 {
		ms := uint64(max(opts.VisibilityTimeout.Milliseconds(), 1))
		req.VisibilityTimeoutMs = &ms
	}
	if opts.MaxAttempts != 0 {
		req.MaxAttempts = &opts.MaxAttempts
	}
	js, ct, err := c.openJSONStream(ctx, req)
	if err != nil {
		return nil, err
	}
	q := &QueueConsumer{c: c, ct: ct, js: js, namespace: namespace, stream: stream, group: group, done: make(chan struct{})}
	q.mu.pending = map[uint64]chan error{}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); q.readReplies() }()
	return q, nil
}

// Next returns the next delivered record.
func (q *QueueConsumer) Next(ctx context.Context) (QueueMessage, error) {
	m, err := q.js.receive(ctx)
	if err != nil {
		return QueueMessage{}, err
	}
	msg, ok := m.(*wire.QueueMessage)
	if !ok {
		return QueueMessage{}, fmt.Errorf("%w: %s on a queue stream", ErrProtocol, m.Type())
	}
	return QueueMessage{Shard: msg.Shard, Offset: msg.Offset, Payload: msg.Payload, Redeliveries: msg.Redeliveries, Headers: msg.Headers}, nil
}

// Ack acknowledges records and waits until the broker has made the group's
// position durable with them: they will not be delivered again, even after
// a broker crash. Records of several shards go as one queue_ack per shard;
// Ack waits for all of them and returns the first refusal.
func (q *QueueConsumer) Ack(ctx context.Context, refs ...QueueRef) error {
	return q.requestAll(ctx, byShard(refs), func(p shardOffsets, id *uint64) wire.Message {
		return &wire.QueueAck{TenantID: q.c.cfg.Tenant, Namespace: q.namespace, Stream: q.stream, Group: q.group,
			Shard: &p.shard, Offsets: p.offsets, RequestID: id}
	})
}

// AckAsync acknowledges records without waiting. Until the group's position
// is next written they may be redelivered after a broker crash
// (at-least-once). A refusal surfaces in LastError.
func (q *QueueConsumer) AckAsync(refs ...QueueRef) error {
	for _, p := range byShard(refs) {
		err := q.write(&wire.QueueAck{TenantID: q.c.cfg.Tenant, Namespace: q.namespace, Stream: q.stream, Group: q.group,
			Shard: &p.shard, Offsets: p.offsets})
		if err != nil {
			return err
		}
	}
	return nil
}

// Nack hands records back for immediate redelivery (to any member).
func (q *QueueConsumer) Nack(ctx context.Context, refs ...QueueRef) error {
	return q.requestAll(ctx, byShard(refs), func(p shardOffsets, id *uint64) wire.Message {
		return &wire.QueueNack{TenantID: q.c.cfg.Tenant, Namespace: q.namespace, Stream: q.stream, Group: q.group,
			Shard: &p.shard, Offsets: p.offsets, RequestID: id}
	})
}

// shardOffsets are the offsets of one shard in one ack or nack. The shard
// is always sent, 0 too: a broker refuses a shard-less ack on a stream of
// several shards (it would be ambiguous), and brokers from before
// multi-shard queues ignore the field.
type shardOffsets struct {
	shard   uint32
	offsets []uint64
}

// byShard groups refs per shard, shards in order of first appearance. No
// refs still make one (empty) request, which the broker refuses as it
// always did.
func byShard(refs []QueueRef) []shardOffsets {
	if len(refs) == 0 {
		return []shardOffsets{{}}
	}
	var out []shardOffsets
	for _, r := range refs {
		i := slices.IndexFunc(out, func(p shardOffsets) bool { return p.shard == r.Shard })
		if i < 0 {
			i = len(out)
			out = append(out, shardOffsets{shard: r.Shard})
		}
		out[i].offsets = append(out[i].offsets, r.Offset)
	}
	return out
}

// LastError is the last refusal of a request without a reply (AckAsync).
func (q *QueueConsumer) LastError() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.lastErr
}

// requestAll sends one request per part, each with a request_id, and
// waits for every reply; the first refusal is the result.
func (q *QueueConsumer) requestAll(ctx context.Context, parts []shardOffsets, build func(shardOffsets, *uint64) wire.Message) error {
	ids, chs, err := q.register(len(parts))
	if err != nil {
		return err
	}
	for i, p := range parts {
		if err := q.write(build(p, &ids[i])); err != nil {
			q.forget(ids...)
			return err
		}
	}
	var first error
	for i, ch := range chs {
		select {
		case err := <-ch:
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			q.forget(ids[i:]...)
			return ctx.Err()
		}
	}
	return first
}

// register reserves n request ids and their reply channels.
func (q *QueueConsumer) register(n int) ([]uint64, []chan error, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.err != nil {
		return nil, nil, q.mu.err
	}
	ids, chs := make([]uint64, n), make([]chan error, n)
	for i := range n {
		q.mu.nextID++
		ids[i], chs[i] = q.mu.nextID, make(chan error, 1)
		q.mu.pending[ids[i]] = chs[i]
	}
	return ids, chs, nil
}

func (q *QueueConsumer) forget(ids ...uint64) {
	q.mu.Lock()
	for _, id := range ids {
		delete(q.mu.pending, id)
	}
	q.mu.Unlock()
}

func (q *QueueConsumer) write(m wire.Message) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if _, err := q.ct.str.Write(wire.AppendJSONFrame(nil, m)); err != nil {
		return q.ct.sess.wrap(fmt.Errorf("client: queue %s: %w", m.Type(), err))
	}
	return nil
}

// readReplies completes Ack and Nack calls from queue_ok / queue_error and
// keeps uncorrelated errors for LastError.
func (q *QueueConsumer) readReplies() {
	defer close(q.done)
	for {
		h, payload, err := q.ct.fr.Next()
		if err == nil && h.Flags != 0 {
			err = fmt.Errorf("%w: binary frame on a queue control stream", ErrProtocol)
		}
		var m wire.Message
		if err == nil {
			m, err = wire.DecodeJSON(payload)
		}
		if err != nil {
			q.failAll(q.ct.sess.wrap(fmt.Errorf("client: queue replies: %w", err)))
			return
		}
		switch m := m.(type) {
		case *wire.QueueOK:
			q.complete(m.RequestID, nil)
		case *wire.QueueError:
			q.complete(m.RequestID, brokerError(m.Message, m.Err, nil))
		case *wire.ErrorMessage:
			q.mu.Lock()
			q.mu.lastErr = brokerError(m.Message, m.Err, m.Owner)
			q.mu.Unlock()
		}
	}
}

func (q *QueueConsumer) complete(id uint64, err error) {
	q.mu.Lock()
	ch := q.mu.pending[id]
	delete(q.mu.pending, id)
	q.mu.Unlock()
	if ch != nil {
		ch <- err
	}
}

func (q *QueueConsumer) failAll(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.err == nil {
		q.mu.err = err
	}
	for id, ch := range q.mu.pending {
		ch <- q.mu.err
		delete(q.mu.pending, id)
	}
}

// Close leaves the group: the broker hands this consumer's unacked records
// to the other members at once.
func (q *QueueConsumer) Close() error {
	q.js.close()
	q.wmu.Lock()
	q.ct.str.Close()
	q.wmu.Unlock()
	q.ct.str.CancelRead(0)
	<-q.done
	return nil
}
