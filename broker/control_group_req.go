package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/felixmq/felix/auth"
	"github.com/felixmq/felix/wire"
)

// The published 0.6 consumer-group requests (wire/message_group.go): one
// group on one shard each, answered with their own request_id. They share
// the groups and their state with queue_consume members.

const maxConsumerBytes = 128

// handleGroup dispatches a group request; handled false: not one.
func (ct *control) handleGroup(m wire.Message) (handled, keep bool) {
	req, ok := m.(wire.GroupRequest)
	if !ok {
		return false, true
	}
	action := auth.ActionQueueConsume
	switch m.(type) {
	case *wire.GroupSeek, *wire.GroupDelete, *wire.GroupDiscard, *wire.GroupRedrive:
		action = auth.ActionQueueManage
	}
	g, keep := ct.groupOf(req, action)
	if g == nil {
		return true, keep
	}
	id := req.ID()
	var err error
	switch m := m.(type) {
	case *wire.GroupPoll:
		err = ct.groupPoll(g, m)
	case *wire.GroupAck:
		err = g.ack([]uint64{m.Offset}, ct.groupDone(id))
	case *wire.GroupNack:
		err = ct.groupNack(g, m)
	case *wire.GroupExtend:
		err = ct.groupExtend(g, m)
	case *wire.GroupDeadLetters:
		offs := g.deadLetters()
		ct.groupReply(&wire.GroupDeadLetterList{Offsets: offs, RequestID: id})
	case *wire.GroupDeadLetter:
		err = g.settle(func(l *groupLedger, tail uint64) (bool, error) { return true, l.deadLetterNow(m.Offset, tail) }, ct.groupDone(id))
	case *wire.GroupDiscard:
		err = g.settle(func(l *groupLedger, _ uint64) (bool, error) { return true, l.discard(m.Offset) }, ct.groupDone(id))
	case *wire.GroupRedrive:
		first := g.sh.durable().log.First()
		err = g.settle(func(l *groupLedger, _ uint64) (bool, error) { return true, l.redrive(m.Offset, first) }, ct.groupDone(id))
	case *wire.GroupSeek:
		err = ct.groupSeek(g, m)
	case *wire.GroupDescribe:
		ct.groupDescribe(g, id)
	case *wire.GroupDelete:
		first := g.sh.durable().log.First()
		var existed bool
		err = g.settle(func(l *groupLedger, _ uint64) (bool, error) { existed = l.reset(first); return true, nil },
			ct.groupAnswer(id, func() wire.Message { return &wire.GroupDeleted{Existed: existed, RequestID: id} }))
	}
	if err != nil {
		ct.groupFail(id, err)
	}
	return true, true
}

// groupOf checks a group request (tenant, permission, durable stream,
// group name, a shard this broker serves) and opens its group. It answers
// a refusal itself; keep false ends the stream (authorisation).
func (ct *control) groupOf(req wire.GroupRequest, action auth.Action) (*groupShard, bool) {
	r := req.Ref()
	k := streamKey(r.TenantID, r.Namespace, r.Stream)
	if err := ct.authorize(k.Tenant, action, "queue:"+k.Tenant+"/"+k.Namespace+"/"+k.Stream); err != nil {
		ct.groupFail(req.ID(), err)
		return nil, false
	}
	if ct.broker().cfg.DataDir == "" {
		ct.groupFail(req.ID(), fmt.Errorf("%w: consumer groups need a broker with durable storage", ErrInvalidRequest))
		return nil, true
	}
	err := validRosterName("group", r.Group, maxGroupBytes)
	var st *stream
	if err == nil {
		st, err = ct.broker().streams.lookup(k)
	}
	if err == nil && !st.spec.Durable {
		err = fmt.Errorf("%w: queue: stream %s is not durable (groups read the stream's log)", ErrInvalidRequest, k)
	}
	var g *groupShard
	if err == nil {
		g, err = ct.groupShard(st, r.Shard, r.Group)
	}
	if err != nil {
		ct.groupFail(req.ID(), err)
		return nil, true
	}
	return g, true
}

// groupFail refuses request id: queue_error, correlated, to a client that
// speaks the queue additions; error to any other.
func (ct *control) groupFail(id uint64, err error) {
	if wire.Supports(ct.peer, wire.CapQueue) {
		ct.queueReply(id, err)
		return
	}
	ct.fail(err)
}

func (ct *control) groupReply(m wire.Message) {
	ct.out.send(func(b []byte) []byte { return wire.AppendJSONFrame(b, m) })
}

// groupDone answers cache_ok once a change is durable, or the error.
func (ct *control) groupDone(id uint64) func(error) {
	return ct.groupAnswer(id, func() wire.Message { return &wire.CacheOK{RequestID: id} })
}

func (ct *control) groupAnswer(id uint64, answer func() wire.Message) func(error) {
	return func(err error) {
		if err != nil {
			ct.groupFail(id, err)
			return
		}
		ct.groupReply(answer())
	}
}

// capped is ms as a duration, at most limit; 0 gives def.
func capped(ms *uint64, def, limit time.Duration) time.Duration {
	if ms == nil || *ms == 0 {
		return def
	}
	return min(time.Duration(min(*ms, uint64(limit/time.Millisecond)))*time.Millisecond, limit)
}

func (ct *control) groupNack(g *groupShard, m *wire.GroupNack) error {
	a := nackArgs{now: time.Now(), delay: capped(m.DelayMs, 0, ct.broker().cfg.Groups.MaxVisibility)}
	if m.Attempts != nil {
		a.attempts = *m.Attempts
	}
	return g.nack([]uint64{m.Offset}, a, ct.groupDone(m.RequestID))
}

func (ct *control) groupExtend(g *groupShard, m *wire.GroupExtend) error {
	if m.ExtendMs == 0 {
		return fmt.Errorf("%w: extend_ms 0", ErrInvalidRequest)
	}
	d := capped(&m.ExtendMs, 0, ct.broker().cfg.Groups.MaxVisibility)
	if err := g.extend(m.Offset, m.Attempts, d); err != nil {
		return err
	}
	ct.groupReply(&wire.GroupExtended{VisibleMs: uint64(d.Milliseconds()), RequestID: m.RequestID})
	return nil
}

// groupSeek moves the group to earliest (the oldest record the log
// holds), latest (the committed tail) or an offset between them.
func (ct *control) groupSeek(g *groupShard, m *wire.GroupSeek) error {
	first := g.sh.durable().log.First()
	var pos uint64
	var moved bool
	ifNew := m.IfNew != nil && *m.IfNew
	return g.settle(func(l *groupLedger, tail uint64) (bool, error) {
		switch m.Start.Kind {
		case wire.StartEarliest:
			pos = first
		case wire.StartLatest:
			pos = tail
		default:
			if pos = m.Start.Offset; pos < first || pos > tail {
				return false, fmt.Errorf("%w: queue: seek to %d outside the log's [%d, %d]", ErrInvalidRequest, pos, first, tail)
			}
		}
		pos, moved = l.seek(pos, ifNew)
		return moved, nil
	}, ct.groupAnswer(m.RequestID, func() wire.Message {
		return &wire.GroupPosition{Offset: pos, Moved: moved, RequestID: m.RequestID}
	}))
}

func (ct *control) groupDescribe(g *groupShard, id uint64) {
	info, tail := g.describe()
	m := &wire.GroupInfo{Tail: tail, InFlight: info.inFlight, Owed: info.owed, DeadLetters: info.deadLetters, RequestID: id}
	if info.exists {
		m.Committed = &info.committed
	}
	if wire.Supports(ct.peer, wire.CapGroupMaxAttempts) {
		m.MaxAttempts = &info.maxAttempts
	}
	ct.groupReply(m)
}

// errPollWaiters refuses a poll that would wait while the connection has
// maxPollWaitersPerConn waiting already.
var errPollWaiters = fmt.Errorf("%w: %d polls already wait on this connection", ErrLimitExceeded, maxPollWaitersPerConn)

// groupPoll takes records for the connection's member and answers with
// them; with nothing to take and a wait, it waits on a goroutine of its
// own (the stream goes on reading meanwhile) and answers when records come
// or the wait ends.
func (ct *control) groupPoll(g *groupShard, m *wire.GroupPoll) error {
	consumer := ""
	if m.Consumer != nil {
		if consumer = *m.Consumer; len(consumer) == 0 || len(consumer) > maxConsumerBytes {
			return fmt.Errorf("%w: consumer name of %d bytes, want 1 to %d", ErrInvalidRequest, len(consumer), maxConsumerBytes)
		}
	}
	cfg := ct.broker().cfg.Groups
	if m.MaxAttempts != nil {
		g.setMaxAttempts(*m.MaxAttempts)
	}
	a := pollArgs{max: int(max(1, min(m.MaxRecords, maxPollRecords))), visibility: capped(m.VisibilityMs, cfg.Visibility, cfg.MaxVisibility),
		reclaim: m.Reclaim != nil && *m.Reclaim}
	h := g.holder(ct.c, subjectOf(ct.principal), consumer)
	taken, changed := g.poll(h, a, time.Now())
	wait := capped(&m.WaitMs, 0, cfg.MaxWait)
	if len(taken) > 0 || wait == 0 || changed == nil {
		return ct.answerPoll(g, h, m.RequestID, taken)
	}
	if ct.c.pollWaiters.Add(1) > maxPollWaitersPerConn {
		ct.c.pollWaiters.Add(-1)
		return errPollWaiters
	}
	ct.async.Add(1)
	go func() {
		defer ct.async.Done()
		defer ct.c.pollWaiters.Add(-1)
		a.reclaim = false
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for len(taken) == 0 && changed != nil {
			select {
			case <-changed:
			case <-timer.C:
				changed = nil
				continue
			case <-ct.str.Context().Done():
				return
			}
			taken, changed = g.poll(h, a, time.Now())
		}
		if err := ct.answerPoll(g, h, m.RequestID, taken); err != nil {
			ct.groupFail(m.RequestID, err)
		}
	}()
	return nil
}

// answerPoll reads the taken records from the log and answers
// group_records, up to maxPollBytes of payload; what did not fit is handed
// back untouched. A record retention removed before it was read is
// finished: nothing can deliver it any more.
func (ct *control) answerPoll(g *groupShard, h *groupMember, id uint64, taken []takenRec) error {
	if len(taken) == 0 {
		ct.groupReply(&wire.GroupRecords{Records: []wire.GroupRecord{}, RequestID: id})
		return nil
	}
	var rd recordReader
	defer rd.close()
	recs := make([]wire.GroupRecord, 0, len(taken))
	size := 0
	for i, t := range taken {
		if size >= maxPollBytes {
			g.untake(h, taken[i:])
			break
		}
		rec, err := rd.read(g, t.offset)
		if errors.Is(err, errRecordTrimmed) {
			g.b.log.Warn("queue record trimmed by retention before delivery", "group", g.key.group, "shard", t.shard, "offset", t.offset)
			g.ack([]uint64{t.offset}, nil)
			continue
		}
		if err != nil {
			g.untake(h, taken[i:])
			return err
		}
		recs = append(recs, ct.groupRecord(t, rec))
		size += len(rec.Payload)
	}
	// The payloads alias the log's mapping: the frame is encoded (and the
	// bytes copied) before the reader closes.
	ct.groupReply(&wire.GroupRecords{Records: recs, RequestID: id})
	return nil
}
