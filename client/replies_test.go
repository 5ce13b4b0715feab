package client

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/frameio"
	"github.com/felixmq/felix/wire"
)

// replyStream is a control stream whose broker side is the given frames,
// then the end of the stream: enough for the reply readers, which run
// without QUIC on it. stalled marks the session as the watchdog does.
func replyStream(t *testing.T, stalled bool, frames ...[]byte) (*Client, *control) {
	t.Helper()
	c := &Client{cfg: Config{Tenant: "t"}.withDefaults()}
	sess := &session{c: c}
	sess.stalled.Store(stalled)
	return c, &control{sess: sess, fr: frameio.NewReader(bytes.NewReader(bytes.Join(frames, nil)), wire.DefaultMaxFrameBytes)}
}

// replyPublisher is a Publisher on ct whose reader runs when the test
// calls run.
func replyPublisher(c *Client, ct *control) *Publisher {
	p := &Publisher{c: c, ct: ct}
	p.rr = p.replyReader(nil, nil)
	return p
}

func jsonFrame(m wire.Message) []byte { return wire.AppendJSONFrame(nil, m) }

func ackFrame(t *testing.T, ack wire.PublishAck) []byte {
	t.Helper()
	f, err := wire.AppendPublishAckFrame(nil, ack)
	require.NoError(t, err)
	return f
}

func pendingAcks(p *Publisher, ids ...uint64) map[uint64]*PendingAck {
	p.mu.pending = map[uint64]*PendingAck{}
	out := map[uint64]*PendingAck{}
	for _, id := range ids {
		pa := &PendingAck{done: make(chan struct{})}
		p.mu.pending[id], out[id] = pa, pa
	}
	return out
}

// Acks complete their publishes by request id, in whatever order they
// come, binary or JSON: ok is nil, a refusal is a *BrokerError with the
// broker's message and the owner it named; cluster refusals match
// ErrNotOwner and ErrOwnerUnavailable. When the stream ends, what is still
// pending fails with ErrClosed (ErrPathStalled after a stall redial, so the
// caller knows to reopen).
func TestPublisherRepliesCompleteByRequestID(t *testing.T) {
	owner := wire.Owner{ID: "b2", Addr: "b2:5000"}
	for _, stalled := range []bool{false, true} {
		c, ct := replyStream(t, stalled,
			ackFrame(t, wire.PublishAck{Status: wire.AckOK, RequestID: 3}),
			jsonFrame(&wire.PublishError{RequestID: 1, Message: "not_owner: shard 1", Owner: &owner, Err: wire.NewTypedError(wire.CodeNotLeader)}),
			jsonFrame(&wire.PublishError{RequestID: 2, Message: "owner_unavailable: b2 down", Err: wire.NewTypedError(wire.CodeShardUnavailable)}),
			jsonFrame(&wire.PublishOK{RequestID: 4, Owner: &owner}),
			jsonFrame(&wire.ErrorMessage{Message: "bad frame"}),             // uncorrelated: kept for Err
			ackFrame(t, wire.PublishAck{Status: wire.AckOK, RequestID: 99}), // unknown id: ignored
		)
		p := replyPublisher(c, ct)
		acks := pendingAcks(p, 1, 2, 3, 4, 5)
		p.rr.ask()
		p.rr.run()

		require.NoError(t, acks[3].Wait(context.Background()))
		_, named := acks[3].Owner()
		require.False(t, named)

		err := acks[1].Wait(context.Background())
		var be *BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, "not_owner: shard 1", be.Message)
		require.Equal(t, &owner, be.Owner)
		require.ErrorIs(t, err, ErrNotOwner)
		require.NotErrorIs(t, err, ErrOwnerUnavailable)
		got, named := acks[1].Owner()
		require.True(t, named)
		require.Equal(t, owner, got)

		err = acks[2].Wait(context.Background())
		require.ErrorIs(t, err, ErrOwnerUnavailable)
		require.NotErrorIs(t, err, ErrNotOwner)

		require.NoError(t, acks[4].Wait(context.Background()))
		got, named = acks[4].Owner()
		require.True(t, named)
		require.Equal(t, owner, got)

		err = acks[5].Wait(context.Background())
		require.ErrorIs(t, err, ErrClosed, "still pending when the stream ended")
		require.Equal(t, stalled, errors.Is(err, ErrPathStalled))
		require.Equal(t, &BrokerError{Message: "bad frame"}, p.Err(), "the uncorrelated refusal comes first")
		p.mu.lastErr = nil
		require.ErrorIs(t, p.Err(), ErrClosed, "then what ended the stream")
		require.Equal(t, stalled, errors.Is(p.Err(), ErrPathStalled))
		p.mu.closing = true
		if !stalled {
			require.NoError(t, p.Err(), "a stream Close finished is not an error")
		}
	}
}

// A frame a publish stream must not carry ends the stream with
// ErrProtocol, and every pending publish with it.
func TestPublisherRefusesWhatAPublishStreamMustNotCarry(t *testing.T) {
	batch, err := wire.AppendEventBatchFrame(nil, wire.EventBatch{Shared: true, Payloads: [][]byte{[]byte("x")}})
	require.NoError(t, err)
	for name, frame := range map[string][]byte{
		"an event batch": batch,
		"a subscribed":   jsonFrame(&wire.Subscribed{SubscriptionID: 1}),
	} {
		t.Run(name, func(t *testing.T) {
			c, ct := replyStream(t, false, frame, ackFrame(t, wire.PublishAck{Status: wire.AckOK, RequestID: 1}))
			p := replyPublisher(c, ct)
			acks := pendingAcks(p, 1)
			p.rr.ask()
			p.rr.run()
			require.ErrorIs(t, acks[1].Wait(context.Background()), ErrProtocol)
			require.ErrorIs(t, p.Err(), ErrProtocol)
		})
	}
}

// Cache replies go to the request with their id; a typed refusal is a
// *CacheError with the broker's code; what is pending when the stream ends
// fails, and so does every later request.
func TestCacheRepliesCompleteByRequestID(t *testing.T) {
	id := func(n uint64) *uint64 { return &n }
	c, ct := replyStream(t, false,
		jsonFrame(&wire.CounterValue{Key: "n", Value: 7, RequestID: id(2)}),
		jsonFrame(&wire.CacheError{RequestID: id(1), Code: wire.CacheErrNotCounter, Message: "key s holds text"}),
		jsonFrame(&wire.CacheValue{Key: "k", Found: true, Value: []byte("v"), RequestID: id(3)}),
		jsonFrame(&wire.CacheDeleted{RequestID: id(4), Existed: true}),
		jsonFrame(&wire.ErrorMessage{Message: "uncorrelated"}),
	)
	k := &Cache{c: c, reqStream: &reqStream{c: c, ct: ct, what: "cache", correlate: correlateCache, done: make(chan struct{})}}
	k.mu.pending = map[uint64]chan reqReply{}
	chs := map[uint64]chan reqReply{}
	for _, i := range []uint64{1, 2, 3, 4, 5} {
		chs[i] = make(chan reqReply, 1)
		k.mu.pending[i] = chs[i]
	}
	k.readReplies()

	r := <-chs[1]
	var ce *CacheError
	require.ErrorAs(t, r.err, &ce)
	require.Equal(t, wire.CacheErrNotCounter, ce.Code)
	require.Equal(t, "broker: not_a_counter: key s holds text", ce.Error())

	r = <-chs[2]
	sum, err := counterValue(r.m, r.err)
	require.NoError(t, err)
	require.Equal(t, int64(7), sum)
	r = <-chs[3]
	require.Equal(t, []byte("v"), r.m.(*wire.CacheValue).Value)
	_, err = counterValue(r.m, r.err)
	require.ErrorIs(t, err, ErrProtocol, "a value where a counter was asked for")
	r = <-chs[4]
	require.True(t, r.m.(*wire.CacheDeleted).Existed)

	require.ErrorIs(t, (<-chs[5]).err, ErrClosed)
	require.ErrorIs(t, k.mu.err, ErrClosed, "later requests fail at once")
}

// Queue acks and nacks complete by request id: queue_ok is nil,
// queue_error a *BrokerError; an uncorrelated error is kept for LastError;
// the end of the stream fails what is pending and every later call.
func TestQueueRepliesCompleteByRequestID(t *testing.T) {
	_, ct := replyStream(t, true,
		jsonFrame(&wire.QueueError{RequestID: 2, Message: "queue: offset 9 was never delivered to group g"}),
		jsonFrame(&wire.QueueOK{RequestID: 1}),
		jsonFrame(&wire.ErrorMessage{Message: "queue: fire-and-forget ack refused"}),
	)
	q := &QueueConsumer{ct: ct, done: make(chan struct{})}
	q.mu.pending = map[uint64]chan error{}
	ids, chs, err := q.register(3)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, ids)
	q.readReplies()

	require.NoError(t, <-chs[0])
	err = <-chs[1]
	var be *BrokerError
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "never delivered")
	err = <-chs[2]
	require.ErrorIs(t, err, ErrPathStalled, "pending when the stalled session ended")
	require.Equal(t, &BrokerError{Message: "queue: fire-and-forget ack refused"}, q.LastError())
	_, _, err = q.register(1)
	require.ErrorIs(t, err, ErrPathStalled, "no request after the stream ended")
}

// A publisher whose stream ended fails every later publish at once with
// the error that ended it (the first one, whatever follows), its hook
// seeing it first; shard-addressed publishes to a broker without the shard
// capability fail with ErrNotNegotiated and write nothing.
func TestPublisherAfterItsStreamEnded(t *testing.T) {
	p := &Publisher{c: &Client{cfg: Config{Tenant: "t"}.withDefaults()}}
	p.mu.pending = map[uint64]*PendingAck{}
	require.ErrorIs(t, p.PublishShardAsync(1, [][]byte{[]byte("x")}).Wait(t.Context()), ErrNotNegotiated)
	require.ErrorIs(t, p.SendShard(1, [][]byte{[]byte("x")}), ErrNotNegotiated)

	ended := errors.New("stream reset by the broker")
	p.failAll(ended)
	p.failAll(ErrClosed)
	var hookSaw error
	pa := p.publishAsync(-1, nil, [][]byte{[]byte("x")}, func(pa *PendingAck) { hookSaw = pa.err })
	require.ErrorIs(t, pa.Wait(t.Context()), ended)
	require.ErrorIs(t, hookSaw, ended, "the hook saw the outcome before Done")
	require.ErrorIs(t, p.Err(), ended)
}

// A cache handle whose stream ended refuses new requests before writing
// them, and a reply to a request that gave up waiting is dropped.
func TestCacheAfterItsStreamEnded(t *testing.T) {
	c := &Client{cfg: Config{Tenant: "t"}.withDefaults()}
	k := &Cache{c: c, reqStream: &reqStream{c: c, what: "cache", correlate: correlateCache}}
	k.mu.pending = map[uint64]chan reqReply{}
	ch := make(chan reqReply, 1)
	k.mu.pending[1] = ch
	k.forget(1)
	id := uint64(1)
	k.dispatch(&wire.CacheOK{RequestID: id})
	require.Empty(t, ch, "the reply of a forgotten request goes nowhere")

	k.failAll(ErrClosed)
	_, err := k.do(t.Context(), func(*uint64) wire.Message { t.Fatal("no request is built"); return nil })
	require.ErrorIs(t, err, ErrClosed)
	_, err = k.CounterGet(t.Context(), "n")
	require.ErrorIs(t, err, ErrClosed)
}

// An ack completes its publish once: with the latency since it was sent,
// the owner it named, the hook seeing the outcome before Done closes; an
// ack for an id no longer pending (already failed) changes nothing.
func TestPublisherCompleteOnce(t *testing.T) {
	p := &Publisher{c: &Client{cfg: Config{Tenant: "t"}.withDefaults()}}
	p.mu.pending = map[uint64]*PendingAck{}
	owner := wire.Owner{ID: "b1", Addr: "b1:5000"}
	var order []string
	pa := &PendingAck{done: make(chan struct{}), sent: time.Now().Add(-time.Millisecond)}
	pa.hook = func(pa *PendingAck) {
		select {
		case <-pa.Done():
			order = append(order, "hook after done")
		default:
			order = append(order, "hook before done")
		}
	}
	p.mu.pending[7] = pa
	p.complete(7, Ack{Owner: owner, Named: true}, nil)
	p.complete(7, Ack{}, errors.New("a second answer"))
	require.NoError(t, pa.Wait(t.Context()))
	require.Equal(t, []string{"hook before done"}, order)
	require.GreaterOrEqual(t, pa.Latency(), time.Millisecond)
	got, named := pa.Owner()
	require.True(t, named)
	require.Equal(t, owner, got)
	require.Empty(t, p.mu.pending)

	require.Nil(t, shardField(-1), "the broker picks the shard")
	require.Equal(t, uint32(3), *shardField(3))
}
