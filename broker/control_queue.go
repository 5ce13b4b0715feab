package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// Queue consumer limits and defaults (queue_consume fields).
const (
	defaultMaxInflight = 64
	maxMaxInflight     = 1 << 16
	defaultVisibility  = 30 * time.Second
	maxVisibility      = 12 * time.Hour
	maxGroupBytes      = 255
)

// queueGroupFor checks the tenant, the action, the stream (durable, one
// shard) and the group name, and opens the group. It sends the refusal
// itself: keep=false ends the stream (authorisation), keep=true with a nil
// group goes on.
func (ct *control) queueGroupFor(tenant, ns, stream, group string) (g *queueGroup, keep bool) {
	k := streamKey(tenant, ns, stream)
	if err := ct.authorize(k.Tenant, ActionQueueConsume, "queue:"+k.Tenant+"/"+k.Namespace+"/"+k.Stream); err != nil {
		ct.fail(err.Error())
		return nil, false
	}
	if err := validRosterName("group", group, maxGroupBytes); err != nil {
		ct.fail(err.Error())
		return nil, true
	}
	st, err := ct.c.b.streams.lookup(k)
	if err != nil {
		ct.fail(err.Error())
		return nil, true
	}
	switch {
	case !st.spec.Durable:
		ct.fail(fmt.Sprintf("%v: queue: stream %s is not durable (queues read the stream's log)", ErrInvalidRequest, k))
		return nil, true
	case len(st.shards) != 1:
		ct.fail(fmt.Sprintf("%v: queue: stream %s has %d shards; queues need a single-shard stream", ErrInvalidRequest, k, len(st.shards)))
		return nil, true
	}
	g, err = ct.c.b.groups.get(ct.c.b, groupKey{stream: k, group: group}, st.shards[0])
	if err != nil {
		ct.fail("queue: " + err.Error())
		return nil, true
	}
	return g, true
}

// queueConsume makes this connection a member of the group and starts its
// delivery stream.
func (ct *control) queueConsume(m *wire.QueueConsume) bool {
	if !ct.requireCap(wire.CapQueue, "queue_consume") {
		return true
	}
	if ct.c.b.draining.Load() {
		ct.fail(ErrDraining.Error())
		return true
	}
	maxInflight, visibility, err := consumeLimits(m)
	if err == nil {
		err = validRosterName("member", m.Member, maxMemberBytes)
	}
	if err != nil {
		ct.fail(err.Error())
		return true
	}
	g, keep := ct.queueGroupFor(m.TenantID, m.Namespace, m.Stream, m.Group)
	if g == nil {
		return keep
	}
	ctx, cancel := context.WithCancel(ct.c.ctx)
	c := &queueConsumer{id: ct.c.b.nextSubID.Add(1), g: g, conn: ct.c, member: m.Member,
		maxInflight: maxInflight, visibility: visibility, ctx: ctx, cancel: cancel}
	if err := ct.c.addExtra(c.id, c); err != nil {
		cancel()
		ct.fail(err.Error())
		return true
	}
	out, err := ct.openEventStream(ctx, c.id)
	if err != nil {
		c.end()
		return true
	}
	c.out = out
	// A consumer that stops reading (closed, killed) must give its records
	// back now, not when it would next be written to: the stream's context
	// ends on the peer's STOP_SENDING.
	context.AfterFunc(out.Context(), func() { cancel(); c.end() })
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, &wire.Subscribed{SubscriptionID: c.id}) })
	ct.c.streams.Add(1)
	go func() { defer ct.c.streams.Done(); c.run() }()
	return true
}

func consumeLimits(m *wire.QueueConsume) (int, time.Duration, error) {
	maxInflight, visibility := uint64(defaultMaxInflight), defaultVisibility
	if m.MaxInflight != nil {
		maxInflight = *m.MaxInflight
	}
	if maxInflight < 1 || maxInflight > maxMaxInflight {
		return 0, 0, fmt.Errorf("%w: max_inflight %d not in [1, %d]", ErrInvalidRequest, maxInflight, maxMaxInflight)
	}
	if m.VisibilityTimeoutMs != nil {
		ms := *m.VisibilityTimeoutMs
		if ms < 1 || ms > uint64(maxVisibility/time.Millisecond) {
			return 0, 0, fmt.Errorf("%w: visibility_timeout_ms %d not in [1, %d]", ErrInvalidRequest, ms, maxVisibility/time.Millisecond)
		}
		visibility = time.Duration(ms) * time.Millisecond
	}
	return int(maxInflight), visibility, nil
}

// queueAck and queueNack answer with queue_ok / queue_error when the
// request carries a request_id (an ack only once it is durable), else
// report a refusal as an uncorrelated error.
func (ct *control) queueAck(m *wire.QueueAck) bool {
	return ct.queueOffsets("queue_ack", m.TenantID, m.Namespace, m.Stream, m.Group, m.Offsets, m.RequestID,
		func(g *queueGroup, done func(error)) error { return g.ack(m.Offsets, done) })
}

func (ct *control) queueNack(m *wire.QueueNack) bool {
	return ct.queueOffsets("queue_nack", m.TenantID, m.Namespace, m.Stream, m.Group, m.Offsets, m.RequestID,
		func(g *queueGroup, done func(error)) error {
			err := g.nack(m.Offsets)
			if err == nil && done != nil {
				done(nil)
			}
			return err
		})
}

func (ct *control) queueOffsets(what, tenant, ns, stream, group string, offsets []uint64, reqID *uint64,
	apply func(*queueGroup, func(error)) error) bool {
	if !ct.requireCap(wire.CapQueue, what) {
		return true
	}
	g, keep := ct.queueGroupFor(tenant, ns, stream, group)
	if g == nil {
		return keep
	}
	var err error
	if len(offsets) == 0 {
		err = fmt.Errorf("%w: %s without offsets", ErrInvalidRequest, what)
	} else {
		var done func(error)
		if reqID != nil {
			done = func(err error) { ct.queueReply(*reqID, err) }
		}
		err = apply(g, done)
	}
	if err == nil {
		return true
	}
	if reqID != nil {
		ct.queueReply(*reqID, err)
	} else {
		ct.fail(err.Error())
	}
	return !errors.Is(err, ErrForbidden)
}

func (ct *control) queueReply(id uint64, err error) {
	ct.out.send(func(b []byte) []byte {
		if err != nil {
			return wire.AppendJSONFrame(b, &wire.QueueError{RequestID: id, Message: err.Error()})
		}
		return wire.AppendJSONFrame(b, &wire.QueueOK{RequestID: id})
	})
}
