package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// openStreamTimeout bounds waiting for the client to allow another
// unidirectional stream (its MaxIncomingUniStreams).
const openStreamTimeout = 5 * time.Second

// subscribe registers a subscription on one shard (the `shard` field, 0 when
// absent), opens its event stream, writes event_stream_hello, replies
// `subscribed` and starts the writer, which replays and then follows the live
// tail. Client-supplied subscription ids are ignored: ids are broker-assigned
// (the published broker honoured client ids and lost events on collisions).
func (ct *control) subscribe(m *wire.Subscribe) bool {
	if ct.c.b.draining.Load() {
		ct.fail(ErrDraining)
		return true
	}
	k := streamKey(m.TenantID, m.Namespace, m.Stream)
	if err := ct.authorize(k.Tenant, auth.ActionSubscribe, streamResource(k)); err != nil {
		ct.fail(err)
		return false
	}
	st, err := ct.c.b.streams.lookup(k)
	if err != nil {
		ct.fail(err)
		return true
	}
	idx := 0
	if m.Shard != nil {
		idx = int(*m.Shard)
	}
	if idx < 0 || idx >= len(st.shards) {
		ct.fail(refusal(wire.CodeInvalidRequest, fmt.Sprintf("shard %d not in [0, %d) for %s", idx, len(st.shards), k)))
		return true
	}
	switch r, err := ct.c.b.routeOf(k, idx); {
	case err != nil:
		ct.fail(err)
		return true
	case r != nil && !r.self:
		ct.refuseNotOwner(r)
		return true
	}
	sh := st.shards[idx]
	sub, err := ct.newSubscription(ct.c.b.subscriberQueue(st.spec), func(s *subscription) { s.sh, s.detach = sh, sh.detach })
	if err != nil {
		ct.fail(err)
		return true
	}
	if !ct.startSubscription(sub, m) {
		sub.end()
	}
	return true
}

// subscriberQueue is the queue of a subscriber of a stream: a durable
// stream's subscribers catch up from the log unless the broker opted into
// dropping (Config.DurableDrops).
func (b *Broker) subscriberQueue(spec StreamSpec) fanout.Config {
	q := b.cfg.Queue
	if spec.Durable && !b.cfg.DurableDrops {
		q.Policy = fanout.CatchUp
	}
	return q
}

// newSubscription makes a subscription with a queue per qcfg and registers
// it with the connection. source sets what it follows (shard or watched
// key, and detach) before the registration makes it visible to the
// connection's teardown; the caller then attaches it.
func (ct *control) newSubscription(qcfg fanout.Config, source func(*subscription)) (*subscription, error) {
	c := ct.c
	q, err := fanout.NewQueue(qcfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	sub := &subscription{
		id: c.b.nextSubID.Add(1), conn: c, queue: q,
		offsets: wire.Supports(ct.peer, wire.FlagEventBatchOffsets),
		gaps:    wire.Supports(ct.peer, wire.CapGapNotices),
		headers: wire.Supports(ct.peer, wire.CapHeaders), stamps: wire.Supports(ct.peer, wire.FlagEventTimestamps),
		publishers: wire.Supports(ct.peer, wire.FlagEventPublisher),
		ctx:        ctx, cancel: cancel, done: make(chan struct{}),
	}
	source(sub)
	stop := atExpiry(ct.principal, func() { sub.expired.Store(true); sub.end() })
	sub.stopExpiry.Store(&stop)
	if err := c.add(sub); err != nil {
		stop()
		cancel()
		q.Close()
		return nil, err
	}
	c.b.metrics.subscribers.Inc()
	return sub, nil
}

// startSubscription attaches, opens the event stream and starts the writer.
// false means the subscription must be ended by the caller.
func (ct *control) startSubscription(sub *subscription, m *wire.Subscribe) bool {
	var start wire.Start
	if m.Start != nil {
		start = *m.Start
	}
	if err := sub.sh.attach(sub, start, m.Start != nil); err != nil {
		var ce *CursorError
		if errors.As(err, &ce) {
			ct.out.send(func(b []byte) []byte {
				return wire.AppendJSONFrame(b, &wire.SubscribeCursorError{
					Reason: wire.CursorReason(ce.Reason), Requested: ce.Requested, Available: ce.Available,
				})
			})
			return false
		}
		ct.fail(err)
		return false
	}
	return ct.startEventStream(sub)
}

// startEventStream opens the subscription's event stream (with its hello),
// replies subscribed and starts the writer. false means the subscription
// must be ended by the caller.
func (ct *control) startEventStream(sub *subscription) bool {
	out, err := ct.openEventStream(sub.ctx, sub.id)
	if err != nil {
		return false
	}
	sub.out = out
	if d := newDirectWriter(sub, ct.c.b.cfg.Batch); d != nil {
		sub.direct.Store(d)
	}
	// A client that closes its subscription stops reading the event stream
	// (STOP_SENDING): end the subscription then, not at its next write,
	// which on a quiet stream may never come.
	context.AfterFunc(out.Context(), sub.cancel)
	reply := &wire.Subscribed{SubscriptionID: sub.id}
	if sub.sh != nil && sub.offsets {
		reply.StartOffset = &sub.start
	}
	ct.replyStarted(sub.ctx, reply, sub.run)
	return true
}

// replySubscribed answers `subscribed` for the event stream id and starts
// run, its writer, once that reply is on the control stream. The event
// stream's data must not overtake the reply: a client parks an event
// stream until the reply names it (client.router), so a replay larger
// than the client's connection window, written first, would leave no flow
// control credit for the reply it waits for, and both sides would wait
// until the client gave up (TestDurableReplayLargerThanWindows, seen in a
// loaded run).
func (ct *control) replySubscribed(ctx context.Context, id uint64, run func()) {
	ct.replyStarted(ctx, &wire.Subscribed{SubscriptionID: id}, run)
}

// replyStarted is replySubscribed with the reply given.
func (ct *control) replyStarted(ctx context.Context, reply *wire.Subscribed, run func()) {
	written := ct.out.sendWritten(func(b []byte) []byte {
		return wire.AppendJSONFrame(b, reply)
	})
	ct.c.streams.Add(1)
	go func() {
		defer ct.c.streams.Done()
		select {
		case <-written:
		case <-ctx.Done():
		}
		run()
	}()
}

// refuseNotOwner answers a subscribe for another broker's shard: an error
// naming the owner (its id and QUIC address also as fields for clients that
// advertised wire.CapOwner). Subscribes are not proxied: events would cross
// two hops and the client can reach the owner itself (docs/protocol.md).
func (ct *control) refuseNotOwner(r *route) {
	err := notOwner(r)
	msg := &wire.ErrorMessage{Message: err.Error(), Err: ct.typed(err)}
	if ct.ownerAcks {
		msg.Shard, msg.Owner = ct.placed(r.result(0))
	}
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, msg) })
}
