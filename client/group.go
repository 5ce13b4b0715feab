package client

import (
	"context"
	"fmt"
	"time"

	"github.com/felixmq/felix/wire"
)

// Group is a handle on one consumer group of one durable stream, as the
// published Felix 0.6 defines groups: a member polls one shard at a time
// for records, each claimed by it until it acks it, nacks it (at once or
// after a delay), or its visibility lapses; a record that runs out of
// attempts becomes a dead letter of the group. Requests are pipelined over
// one control stream, so a Group is safe for concurrent use; a poll that
// waits does not hold back the acks behind it.
//
// Records are at least once: a member that dies with a claim has it
// delivered again, counted in Attempts.
type Group struct {
	*reqStream
	c         *Client
	namespace string
	stream    string
	name      string
}

// OpenGroup opens a handle on namespace/stream's group. The broker must
// serve consumer groups (wire.FeatureConsumerGroup: a broker with durable
// storage).
func (c *Client) OpenGroup(ctx context.Context, namespace, stream, group string) (*Group, error) {
	rs, err := c.openReqStream(ctx, "group", func(ct *control) error {
		if !ct.features.Has(wire.FeatureConsumerGroup) {
			return fmt.Errorf("%w: the broker serves no consumer groups (no durable storage?)", ErrNotNegotiated)
		}
		return nil
	}, correlateGroup)
	if err != nil {
		return nil, err
	}
	return &Group{reqStream: rs, c: c, namespace: namespace, stream: stream, name: group}, nil
}

// correlateGroup is the request a group reply answers.
func correlateGroup(m wire.Message) (*uint64, error) {
	switch m := m.(type) {
	case *wire.CacheOK:
		return &m.RequestID, nil
	case *wire.GroupRecords:
		return &m.RequestID, nil
	case *wire.GroupDeadLetterList:
		return &m.RequestID, nil
	case *wire.GroupExtended:
		return &m.RequestID, nil
	case *wire.GroupPosition:
		return &m.RequestID, nil
	case *wire.GroupInfo:
		return &m.RequestID, nil
	case *wire.GroupDeleted:
		return &m.RequestID, nil
	case *wire.QueueError:
		return &m.RequestID, brokerError(m.Message, m.Err, nil)
	}
	return nil, nil
}

func (g *Group) ref(shard uint32) wire.GroupRef {
	return wire.GroupRef{TenantID: g.c.cfg.Tenant, Namespace: g.namespace, Stream: g.stream, Shard: shard, Group: g.name}
}

// need refuses a call the broker did not advertise the feature for.
func (g *Group) need(f wire.Features, what string) error {
	if !g.ct.features.Has(f) {
		return fmt.Errorf("%w: the broker does not serve %s", ErrNotNegotiated, what)
	}
	return nil
}

// PollOptions shape one poll. The zero value polls shard 0 for one record
// without waiting, claimed for the broker's visibility timeout.
type PollOptions struct {
	Shard uint32
	// Max is how many records to take at most (the broker caps it at
	// 1000, and at about 4 MiB of payload); 0 means 1.
	Max int
	// Wait is how long the broker may hold the poll open for records.
	Wait time.Duration
	// Consumer names this member (1 to 128 bytes), stable across its
	// restarts; Reclaim takes back, first, the claims it held from an
	// older connection (each as another attempt).
	Consumer string
	Reclaim  bool
	// Visibility is how long these claims stand; 0 is the broker's.
	Visibility time.Duration
	// MaxAttempts sets the group's bound on deliveries of a record on
	// this shard (kept with its state; 0 leaves it as it is). Needs a
	// Felix-Go broker (wire.CapGroupMaxAttempts).
	MaxAttempts uint32
}

// GroupRecord is one record a poll claimed.
type GroupRecord struct {
	Shard   uint32
	Offset  uint64
	Payload []byte
	// Attempts counts deliveries including this one: 1 is the first.
	Attempts uint64
	// Publisher is the principal that published it, when the broker
	// stored one ("" otherwise).
	Publisher string
	// Time is when it was appended (zero if the broker did not say).
	Time time.Time
	// Headers are its event headers.
	Headers []wire.EventHeader
}

// Poll claims up to opts.Max records of one shard; none is an answer,
// not an error.
func (g *Group) Poll(ctx context.Context, opts PollOptions) ([]GroupRecord, error) {
	m := &wire.GroupPoll{GroupRef: g.ref(opts.Shard), MaxRecords: uint32(max(opts.Max, 1)), WaitMs: uint64(opts.Wait.Milliseconds())}
	if opts.Consumer != "" {
		if err := g.need(wire.FeatureGroupConsumer, "named members"); err != nil {
			return nil, err
		}
		m.Consumer, m.Reclaim = &opts.Consumer, &opts.Reclaim
	}
	if opts.Visibility > 0 {
		if err := g.need(wire.FeatureGroupClaimControl, "a poll's visibility"); err != nil {
			return nil, err
		}
		ms := uint64(max(opts.Visibility.Milliseconds(), 1))
		m.VisibilityMs = &ms
	}
	if opts.MaxAttempts > 0 {
		if !wire.Supports(g.ct.flags, wire.CapGroupMaxAttempts) {
			return nil, fmt.Errorf("%w: the broker does not keep a group's max_attempts", ErrNotNegotiated)
		}
		m.MaxAttempts = &opts.MaxAttempts
	}
	recs, err := ask[*wire.GroupRecords](ctx, g, 0, "", func(id uint64) wire.Message { m.RequestID = id; return m })
	if err != nil {
		return nil, err
	}
	out := make([]GroupRecord, len(recs.Records))
	for i, rec := range recs.Records {
		out[i] = GroupRecord{Shard: opts.Shard, Offset: rec.Offset, Payload: rec.Payload, Attempts: rec.Attempts, Headers: rec.Headers}
		if rec.Publisher != nil {
			out[i].Publisher = *rec.Publisher
		}
		if rec.TimestampMicros != nil {
			out[i].Time = time.UnixMicro(int64(*rec.TimestampMicros))
		}
	}
	return out, nil
}

// ask sends a request the broker advertised f for (0: any) and returns
// its answer, of type T.
func ask[T wire.Message](ctx context.Context, g *Group, f wire.Features, what string, build func(id uint64) wire.Message) (T, error) {
	var zero T
	if f != 0 {
		if err := g.need(f, what); err != nil {
			return zero, err
		}
	}
	r, err := g.do(ctx, build)
	if err != nil {
		return zero, err
	}
	a, ok := r.(T)
	if !ok {
		return zero, unexpected(r, "group")
	}
	return a, nil
}

// ok waits for a request answered cache_ok.
func (g *Group) ok(ctx context.Context, build func(id uint64) wire.Message) error {
	_, err := ask[*wire.CacheOK](ctx, g, 0, "", build)
	return err
}

// Ack finishes a record: the group will not deliver it again. It returns
// once that is durable.
func (g *Group) Ack(ctx context.Context, shard uint32, offset uint64) error {
	return g.ok(ctx, func(id uint64) wire.Message {
		return &wire.GroupAck{GroupRef: g.ref(shard), Offset: offset, RequestID: id}
	})
}

// NackOptions shape a nack. The zero value hands the record back at once,
// whatever claim stands.
type NackOptions struct {
	// Delay keeps the record from everyone that long (it stays in play,
	// counted against the group's in-flight bound).
	Delay time.Duration
	// Attempts names the delivery handed back (GroupRecord.Attempts):
	// once that claim no longer stands the nack is refused stale_claim.
	Attempts uint64
}

// Nack hands a record back to the group. One whose attempts ran out
// becomes a dead letter instead.
func (g *Group) Nack(ctx context.Context, shard uint32, offset uint64, opts NackOptions) error {
	m := &wire.GroupNack{GroupRef: g.ref(shard), Offset: offset}
	if opts.Delay > 0 || opts.Attempts > 0 {
		if err := g.need(wire.FeatureGroupClaimControl, "delayed or attempts-named nacks"); err != nil {
			return err
		}
	}
	if opts.Delay > 0 {
		ms := uint64(max(opts.Delay.Milliseconds(), 1))
		m.DelayMs = &ms
	}
	if opts.Attempts > 0 {
		m.Attempts = &opts.Attempts
	}
	return g.ok(ctx, func(id uint64) wire.Message { m.RequestID = id; return m })
}

// Extend keeps the claim of delivery attempts of a record standing for d
// from now, for a member still working on it, and returns what the broker
// granted (it caps d).
func (g *Group) Extend(ctx context.Context, shard uint32, offset, attempts uint64, d time.Duration) (time.Duration, error) {
	e, err := ask[*wire.GroupExtended](ctx, g, wire.FeatureGroupClaimControl, "claim extensions", func(id uint64) wire.Message {
		return &wire.GroupExtend{GroupRef: g.ref(shard), Offset: offset, Attempts: attempts,
			ExtendMs: uint64(max(d.Milliseconds(), 1)), RequestID: id}
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(e.VisibleMs) * time.Millisecond, nil
}

// DeadLetters lists the group's dead letters on a shard, lowest first.
func (g *Group) DeadLetters(ctx context.Context, shard uint32) ([]uint64, error) {
	l, err := ask[*wire.GroupDeadLetterList](ctx, g, wire.FeatureGroupDeadLetters, "dead letters", func(id uint64) wire.Message {
		return &wire.GroupDeadLetters{GroupRef: g.ref(shard), RequestID: id}
	})
	if err != nil {
		return nil, err
	}
	return l.Offsets, nil
}

func (g *Group) offsetOp(ctx context.Context, f wire.Features, what string, shard uint32, offset uint64,
	build func(wire.GroupOffsetOp) wire.Message) error {
	if err := g.need(f, what); err != nil {
		return err
	}
	return g.ok(ctx, func(id uint64) wire.Message {
		return build(wire.GroupOffsetOp{GroupRef: g.ref(shard), Offset: offset, RequestID: id})
	})
}

// DeadLetter gives up on a record in play: it is listed as a dead letter
// and finished.
func (g *Group) DeadLetter(ctx context.Context, shard uint32, offset uint64) error {
	return g.offsetOp(ctx, wire.FeatureGroupClaimControl, "group_dead_letter", shard, offset,
		func(op wire.GroupOffsetOp) wire.Message { return &wire.GroupDeadLetter{GroupOffsetOp: op} })
}

// Redrive puts a dead letter back: owed to the group again, with a fresh
// set of attempts.
func (g *Group) Redrive(ctx context.Context, shard uint32, offset uint64) error {
	return g.offsetOp(ctx, wire.FeatureGroupDeadLetters, "dead letters", shard, offset,
		func(op wire.GroupOffsetOp) wire.Message { return &wire.GroupRedrive{GroupOffsetOp: op} })
}

// Discard drops a dead letter.
func (g *Group) Discard(ctx context.Context, shard uint32, offset uint64) error {
	return g.offsetOp(ctx, wire.FeatureGroupDeadLetters, "dead letters", shard, offset,
		func(op wire.GroupOffsetOp) wire.Message { return &wire.GroupDiscard{GroupOffsetOp: op} })
}

// Seek moves the group's position on a shard (every claim standing is
// voided; dead letters stay). With ifNew only a group that does not exist
// yet moves. It returns where the group stands and whether it moved.
func (g *Group) Seek(ctx context.Context, shard uint32, start wire.Start, ifNew bool) (uint64, bool, error) {
	m := &wire.GroupSeek{GroupRef: g.ref(shard), Start: start}
	if ifNew {
		m.IfNew = &ifNew
	}
	p, err := ask[*wire.GroupPosition](ctx, g, wire.FeatureGroupAdmin, "group_seek", func(id uint64) wire.Message { m.RequestID = id; return m })
	if err != nil {
		return 0, false, err
	}
	return p.Offset, p.Moved, nil
}

// GroupInfo is a group's state on one shard: the lag a user watches is
// Tail - Committed.
type GroupInfo struct {
	// Committed is the group's position, absent (Exists false) for a
	// group that has none yet.
	Committed uint64
	Exists    bool
	// Tail is the shard's committed tail.
	Tail uint64
	// InFlight and Owed are the broker's memory: records claimed (or
	// nacked with a delay), and records owed again after a nack or a
	// lapsed claim.
	InFlight, Owed uint64
	DeadLetters    uint64
	// MaxAttempts is the group's bound (0: none), when the broker says.
	MaxAttempts uint32
}

// Describe reports the group's state on a shard.
func (g *Group) Describe(ctx context.Context, shard uint32) (GroupInfo, error) {
	m, err := ask[*wire.GroupInfo](ctx, g, wire.FeatureGroupAdmin, "group_describe", func(id uint64) wire.Message {
		return &wire.GroupDescribe{GroupRef: g.ref(shard), RequestID: id}
	})
	if err != nil {
		return GroupInfo{}, err
	}
	info := GroupInfo{Tail: m.Tail, InFlight: m.InFlight, Owed: m.Owed, DeadLetters: m.DeadLetters}
	if m.Committed != nil {
		info.Committed, info.Exists = *m.Committed, true
	}
	if m.MaxAttempts != nil {
		info.MaxAttempts = *m.MaxAttempts
	}
	return info, nil
}

// Delete forgets the group on a shard (position, dead letters, claims)
// and reports whether there was one.
func (g *Group) Delete(ctx context.Context, shard uint32) (bool, error) {
	d, err := ask[*wire.GroupDeleted](ctx, g, wire.FeatureGroupAdmin, "group_delete", func(id uint64) wire.Message {
		return &wire.GroupDelete{GroupRef: g.ref(shard), RequestID: id}
	})
	if err != nil {
		return false, err
	}
	return d.Existed, nil
}

// Close finishes the group's stream once every request in flight was
// answered (or ctx ended).
func (g *Group) Close(ctx context.Context) error { return g.close(ctx) }
