package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// queueTakeBatch bounds the records a member takes per round: one stream
// write carries them, and the group lock is not held for long.
const queueTakeBatch = 64

// queueConsumer is one member of a group on one connection, with its event
// stream. It pulls records from the group and writes them as queue_message
// frames.
type queueConsumer struct {
	id          uint64
	g           *queueGroup
	conn        *conn
	member      string
	maxInflight int
	visibility  time.Duration
	inflight    int  // guarded by g.mu
	gone        bool // guarded by g.mu: released, takes nothing more
	out         *quic.SendStream

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// end detaches the member: its in-flight records go back to the group for
// redelivery to the others at once (not after the visibility timeout).
func (c *queueConsumer) end() {
	c.once.Do(func() {
		c.cancel()
		c.g.release(c)
		c.conn.forgetExtra(c.id)
	})
}

func (c *queueConsumer) run() {
	defer c.end()
	err := c.deliver()
	if err != nil && c.ctx.Err() == nil {
		c.conn.b.log.Debug("queue consumer ended", "consumer", c.id, "group", c.g.key.group, "member", c.member, "err", err)
	}
	c.out.CancelWrite(streamErrSubscriptionEnded)
}

// deliver loops: take what the group gives this member, read it from the
// stream's log, write it; wait when there is nothing to take.
func (c *queueConsumer) deliver() error {
	var (
		r     *segment.Reader
		taken []takenRec
		wbuf  []byte
	)
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	for {
		var wait <-chan struct{}
		taken, wait = c.g.take(c, queueTakeBatch, time.Now(), taken[:0])
		if wait == nil {
			return ErrDraining
		}
		if len(taken) == 0 {
			if r != nil { // do not pin log segments while idle
				r.Close()
				r = nil
			}
			select {
			case <-wait:
			case <-c.ctx.Done():
				return c.ctx.Err()
			}
			continue
		}
		wbuf = wbuf[:0]
		for _, t := range taken {
			payload, err := c.read(&r, t.offset)
			if errors.Is(err, segment.ErrTrimmed) {
				// Retention removed it before the group got to it: nothing
				// can deliver it any more, so stop waiting for an ack.
				c.conn.b.log.Warn("queue record trimmed by retention before delivery", "group", c.g.key.group, "offset", t.offset)
				c.g.ack([]uint64{t.offset}, nil)
				continue
			}
			if err != nil {
				return err
			}
			// The payload aliases the log mapping: it is copied (as base64)
			// into wbuf here, before the reader can move or close.
			wbuf = wire.AppendJSONFrame(wbuf, &wire.QueueMessage{Offset: t.offset, Redeliveries: t.redeliveries, Payload: payload})
		}
		if _, err := c.out.Write(wbuf); err != nil {
			return err
		}
	}
}

// read returns the record at off, reusing the reader for consecutive
// offsets (the common case: new records in order).
func (c *queueConsumer) read(r **segment.Reader, off uint64) ([]byte, error) {
	if *r != nil && (*r).Offset() != off {
		(*r).Close()
		*r = nil
	}
	if *r == nil {
		nr, err := c.g.sh.d.log.NewReader(off)
		if err != nil {
			return nil, err
		}
		*r = nr
	}
	rec, err := (*r).Next()
	if err != nil {
		return nil, fmt.Errorf("queue: reading offset %d: %w", off, err)
	}
	if rec.Offset != off {
		return nil, fmt.Errorf("queue: %w: offset %d where %d was due", segment.ErrCorrupt, rec.Offset, off)
	}
	return rec.Payload, nil
}
