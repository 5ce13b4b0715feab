package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/auth"
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

// groupStreamFor checks the tenant, the action, the stream (durable) and
// the group name. It sends the refusal itself: keep=false ends the stream
// (authorisation), keep=true with a nil stream goes on.
func (ct *control) groupStreamFor(tenant, ns, stream, group string) (st *stream, keep bool) {
	k := streamKey(tenant, ns, stream)
	if err := ct.authorize(k.Tenant, auth.ActionQueueConsume, "queue:"+k.Tenant+"/"+k.Namespace+"/"+k.Stream); err != nil {
		ct.fail(err)
		return nil, false
	}
	if err := validRosterName("group", group, maxGroupBytes); err != nil {
		ct.fail(err)
		return nil, true
	}
	st, err := ct.broker().streams.lookup(k)
	if err != nil {
		ct.fail(err)
		return nil, true
	}
	if !st.spec.Durable {
		ct.fail(fmt.Errorf("%w: queue: stream %s is not durable (queues read the stream's log)", ErrInvalidRequest, k))
		return nil, true
	}
	return st, true
}

// groupShard opens group on one shard of st (each shard has a group of its
// own: state, positions, redelivery). In cluster mode the shard must be
// this broker's: the records are in its owner's log.
func (ct *control) groupShard(st *stream, shard uint32, group string) (*groupShard, error) {
	if int64(shard) >= int64(len(st.shards)) {
		return nil, fmt.Errorf("%w: queue: shard %d not in [0, %d) for %s", ErrInvalidRequest, shard, len(st.shards), st.spec.StreamKey)
	}
	if err := ct.broker().servesShard(st.spec.StreamKey, int(shard)); err != nil {
		return nil, err
	}
	return ct.openGroupShard(st, shard, group)
}

// openGroupShard is groupShard for a shard already checked.
func (ct *control) openGroupShard(st *stream, shard uint32, group string) (*groupShard, error) {
	// Open (and recover) the log here, not under the broker-wide group
	// set's lock in openGroup, which every ack takes.
	if _, err := st.shards[shard].readLog(); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	k := groupKey{stream: st.spec.StreamKey, shard: shard, group: group}
	g, err := ct.broker().groups.get(ct.broker(), k, st.shards[shard])
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return g, nil
}

// groupShardsFor opens group on every shard of the stream that this broker
// serves (all of them outside cluster mode): a member takes from all of
// them. In cluster mode each owner serves its own shards' records, so a
// group needs a member on every owner. It sends the refusal itself, like
// groupStreamFor.
func (ct *control) groupShardsFor(tenant, ns, stream, group string) (gs []*groupShard, keep bool) {
	st, keep := ct.groupStreamFor(tenant, ns, stream, group)
	if st == nil {
		return nil, keep
	}
	if len(st.shards) > 1 && !wire.Supports(ct.peer, wire.CapQueueShards) {
		ct.fail(fmt.Errorf("%w: queue: stream %s has %d shards; a client without capability 0x%04x (multi-shard queues) needs a single-shard stream",
			ErrInvalidRequest, st.spec.StreamKey, len(st.shards), wire.CapQueueShards.Caps()))
		return nil, true
	}
	var lastErr error
	for i := range st.shards {
		if lastErr = ct.broker().servesShard(st.spec.StreamKey, i); lastErr != nil {
			if errors.Is(lastErr, ErrOwnerUnavailable) {
				// Not placed yet: a member joining now would never take
				// this shard, so it waits for the placement (retry).
				ct.fail(fmt.Errorf("queue: %w", lastErr))
				return nil, true
			}
			continue
		}
		g, err := ct.openGroupShard(st, uint32(i), group)
		if err != nil {
			ct.fail(err)
			return nil, true
		}
		gs = append(gs, g)
	}
	if len(gs) == 0 {
		ct.fail(fmt.Errorf("queue: no shard of %s is served by this broker (%w); connect a member to each owner", st.spec.StreamKey, lastErr))
		return nil, true
	}
	return gs, true
}

// servesShard is nil when this broker serves shard idx of k: always
// outside cluster mode, else when the placement makes it the owner.
func (b *Broker) servesShard(k StreamKey, idx int) error {
	r, err := b.routeOf(k, idx)
	switch {
	case err != nil:
		return err
	case r != nil && !r.self:
		return notOwner(r)
	}
	return nil
}

// queueConsume makes this connection a member of the group and starts its
// delivery stream.
func (ct *control) queueConsume(m *wire.QueueConsume) bool {
	if !ct.requireCap(wire.CapQueue, "queue_consume") {
		return true
	}
	if ct.broker().draining.Load() {
		ct.fail(ErrDraining)
		return true
	}
	maxInflight, visibility, err := consumeLimits(m)
	if err == nil {
		err = validRosterName("member", m.Member, maxMemberBytes)
	}
	if err != nil {
		ct.fail(err)
		return true
	}
	gs, keep := ct.groupShardsFor(m.TenantID, m.Namespace, m.Stream, m.Group)
	if gs == nil {
		return keep
	}
	if m.MaxAttempts != nil {
		for _, g := range gs {
			g.setMaxAttempts(*m.MaxAttempts)
		}
	}
	ctx, cancel := context.WithCancel(ct.c.ctx)
	c := &groupMember{id: ct.broker().nextSubID.Add(1), groups: gs, group: m.Group, conn: ct.c, member: m.Member,
		maxInflight: maxInflight, visibility: visibility, log: ct.broker().log, ctx: ctx, cancel: cancel,
		headers: wire.Supports(ct.peer, wire.CapHeaders)}
	if err := ct.c.addExtra(c.id, c); err != nil {
		cancel()
		ct.fail(err)
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
	ct.replySubscribed(ctx, c.id, c.run)
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
// report a refusal as an uncorrelated error. Their offsets are offsets of
// one shard (see ackShard).
func (ct *control) queueAck(m *wire.QueueAck) bool {
	return ct.ackOrNack("queue_ack", m.TenantID, m.Namespace, m.Stream, m.Group, m.Shard, m.Offsets, m.RequestID,
		func(g *groupShard, done func(error)) error { return g.ack(m.Offsets, done) })
}

func (ct *control) queueNack(m *wire.QueueNack) bool {
	return ct.ackOrNack("queue_nack", m.TenantID, m.Namespace, m.Stream, m.Group, m.Shard, m.Offsets, m.RequestID,
		func(g *groupShard, done func(error)) error { return g.nack(m.Offsets, nackArgs{now: time.Now()}, done) })
}

func (ct *control) ackOrNack(what, tenant, ns, stream, group string, shard *uint32, offsets []uint64, reqID *uint64,
	apply func(*groupShard, func(error)) error) bool {
	if !ct.requireCap(wire.CapQueue, what) {
		return true
	}
	st, keep := ct.groupStreamFor(tenant, ns, stream, group)
	if st == nil {
		return keep
	}
	var g *groupShard
	sh, err := ackShard(what, st, shard)
	if err == nil {
		g, err = ct.groupShard(st, sh, group)
	}
	switch {
	case err != nil:
	case len(offsets) == 0:
		err = fmt.Errorf("%w: %s without offsets", ErrInvalidRequest, what)
	default:
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
		ct.fail(err)
	}
	return !errors.Is(err, ErrForbidden)
}

// ackShard is the shard an ack or nack names. One without a shard comes
// from a client that predates multi-shard queues: on a single-shard stream
// it means shard 0; on more shards its offsets could name records of any
// shard, and applying them to shard 0 could ack records nobody processed.
func ackShard(what string, st *stream, shard *uint32) (uint32, error) {
	switch {
	case shard != nil:
		return *shard, nil
	case len(st.shards) == 1:
		return 0, nil
	}
	return 0, fmt.Errorf("%w: queue: %s without shard on stream %s of %d shards", ErrInvalidRequest, what, st.spec.StreamKey, len(st.shards))
}

func (ct *control) queueReply(id uint64, err error) {
	ct.out.send(func(b []byte) []byte {
		if err != nil {
			return wire.AppendJSONFrame(b, &wire.QueueError{RequestID: id, Message: err.Error(), Err: ct.typed(err)})
		}
		return wire.AppendJSONFrame(b, &wire.QueueOK{RequestID: id})
	})
}
