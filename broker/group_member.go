package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/wire"
)

// groupTakeBatch bounds the records a member takes per round: one stream
// write carries them, and no group lock is held for long.
const groupTakeBatch = 64

// groupMember is one member of a consumer group on one connection, with
// its event stream. It is a member of the group on every shard of the
// stream this broker serves (in shard order) and pulls records from them
// in turn, writing them as queue_message frames.
type groupMember struct {
	id          uint64
	groups      []*groupShard
	group       string
	conn        *conn
	member      string
	maxInflight int
	visibility  time.Duration
	// ident and connID name a poll member across connections (member
	// reclaim, group_ledger_admin.go); a queue_consume member has the
	// zero ident. reserved are the offsets a reclaim reserved for it,
	// lowest first (the ledger's, under the group lock).
	ident    memberIdent
	connID   uint64
	reserved []uint64
	// headers: the member's client negotiated wire.CapHeaders.
	headers bool
	// inflight counts the member's unacked records over every shard, so
	// that max_inflight bounds them together. Only the member's writer adds
	// (in take); acks, nacks, timeouts and release subtract.
	inflight atomic.Int64
	gone     atomic.Bool // released: takes nothing more
	out      *quic.SendStream
	log      *slog.Logger // the broker's

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// end detaches the member: its in-flight records on every shard go back to
// the group for redelivery to the others at once (not after the visibility
// timeout).
func (c *groupMember) end() {
	c.once.Do(func() {
		c.cancel()
		c.gone.Store(true)
		for _, g := range c.groups {
			g.release(c)
		}
		c.conn.forgetExtra(c.id)
	})
}

func (c *groupMember) run() {
	defer c.end()
	err := c.deliver()
	if err != nil && c.ctx.Err() == nil {
		c.log.Debug("queue consumer ended", "consumer", c.id, "group", c.group, "member", c.member, "err", err)
	}
	c.out.CancelWrite(streamErrSubscriptionEnded)
}

// deliver loops: take what the groups give this member, read it from the
// shards' logs, write it; wait when there is nothing to take.
func (c *groupMember) deliver() error {
	readers := make([]recordReader, len(c.groups))
	defer closeReaders(readers)
	var (
		taken []takenRec
		waits []<-chan struct{}
		wbuf  []byte
		err   error
		start int
	)
	for {
		taken, waits = c.takeRound(start, taken[:0], waits[:0])
		if waits == nil {
			return ErrDraining
		}
		start = (start + 1) % len(c.groups)
		if len(taken) == 0 {
			closeReaders(readers) // do not pin log segments while idle
			if err := c.wait(waits); err != nil {
				return err
			}
			continue
		}
		if wbuf, err = c.encode(readers, taken, wbuf[:0]); err != nil {
			return err
		}
		if _, err := c.out.Write(wbuf); err != nil {
			return err
		}
	}
}

// takeRound takes from every shard once, starting at shard start (which
// moves on each round), each shard giving at most its share of a batch or
// of the in-flight budget: a busy shard cannot fill the member's budget
// while the others wait. It returns the channels to wait on, or nil once a
// group closed.
func (c *groupMember) takeRound(start int, taken []takenRec, waits []<-chan struct{}) ([]takenRec, []<-chan struct{}) {
	n := len(c.groups)
	share := max(min(groupTakeBatch, c.maxInflight)/n, 1)
	now := time.Now()
	for i := range n {
		var wait <-chan struct{}
		taken, wait = c.groups[(start+i)%n].take(c, len(taken)+share, now, taken)
		if wait == nil {
			return taken, nil
		}
		waits = append(waits, wait)
	}
	return taken, waits
}

// wait blocks until one of the groups may have something for this member.
// One shard (the common case) needs no reflection.
func (c *groupMember) wait(waits []<-chan struct{}) error {
	if len(waits) == 1 {
		select {
		case <-waits[0]:
			return nil
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
	cases := make([]reflect.SelectCase, 0, len(waits)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.ctx.Done())})
	for _, w := range waits {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
	}
	if i, _, _ := reflect.Select(cases); i == 0 {
		return c.ctx.Err()
	}
	return nil
}

// encode reads the taken records from their shards' logs and appends their
// queue_message frames to wbuf.
func (c *groupMember) encode(readers []recordReader, taken []takenRec, wbuf []byte) ([]byte, error) {
	for _, t := range taken {
		i := c.groupIndex(t.shard)
		g := c.groups[i]
		rec, err := readers[i].read(g, t.offset)
		if errors.Is(err, errRecordTrimmed) {
			// Retention removed it before the group got to it: nothing
			// can deliver it any more, so stop waiting for an ack.
			c.log.Warn("queue record trimmed by retention before delivery", "group", c.group, "shard", t.shard, "offset", t.offset)
			g.ack([]uint64{t.offset}, nil)
			continue
		}
		if err != nil {
			return wbuf, err
		}
		m := &wire.QueueMessage{Shard: t.shard, Offset: t.offset, Redeliveries: t.redeliveries, Payload: rec.Payload}
		if c.headers {
			m.Headers = recordHeaders(rec)
		}
		// The payload aliases the log mapping: it is copied (as base64)
		// into wbuf here, before the reader can move or close.
		wbuf = wire.AppendJSONFrame(wbuf, m)
	}
	return wbuf, nil
}

func closeReaders(readers []recordReader) {
	for i := range readers {
		readers[i].close()
	}
}

// groupIndex is the index in c.groups of shard's group (every shard outside
// cluster mode, the owned ones in it; few, in shard order).
func (c *groupMember) groupIndex(shard uint32) int {
	for i, g := range c.groups {
		if g.key.shard == shard {
			return i
		}
	}
	panic(fmt.Sprintf("queue: shard %d taken from a group the member is not in", shard))
}
