package broker

import (
	"context"
	"sync"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// rosterWatch is one roster_watch: the snapshot taken when it registered,
// then a bounded queue of encode-once roster_change frames, written to its
// event stream by run.
type rosterWatch struct {
	id       uint64
	r        *roster
	conn     *conn
	queue    *fanout.Queue
	out      *quic.SendStream
	snapshot []byte // roster_snapshot frames, set by roster.watch

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// end detaches the watch and releases its queue. Safe to call more than
// once.
func (w *rosterWatch) end() {
	w.once.Do(func() {
		w.cancel()
		w.r.unwatch(w)
		w.queue.Close()
		w.conn.forgetExtra(w.id)
	})
}

// run writes the snapshot, then changes as they are queued, reporting
// drops as subscription_gap (a watcher that sees one must re-watch to
// resynchronise), until the stream or the watch ends.
func (w *rosterWatch) run() {
	defer w.end()
	err := w.write()
	if err != nil && w.ctx.Err() == nil {
		w.conn.b.log.Debug("roster watch ended", "watch", w.id, "roster", w.r.key.String(), "err", err)
	}
	w.out.CancelWrite(streamErrSubscriptionEnded)
}

func (w *rosterWatch) write() error {
	if _, err := w.out.Write(w.snapshot); err != nil {
		return err
	}
	w.snapshot = nil
	bt, _ := fanout.NewBatcher(w.conn.b.cfg.Batch) // validated by New
	var (
		batch       []*fanout.Buffer
		wbuf        []byte
		sentDropped uint64
	)
	defer func() { fanout.ReleaseAll(batch) }()
	for {
		var err error
		batch, err = bt.Next(w.ctx, w.queue, batch[:0])
		if err != nil {
			return err
		}
		wbuf = wbuf[:0]
		for _, buf := range batch {
			wbuf = append(wbuf, buf.Bytes()...)
		}
		batch = fanout.ReleaseAll(batch)
		if d := w.queue.Stats().DroppedEvents; d != sentDropped {
			wbuf = wire.AppendJSONFrame(wbuf, &wire.SubscriptionGap{SubscriptionID: w.id, Dropped: d - sentDropped})
			sentDropped = d
		}
		if _, err := w.out.Write(wbuf); err != nil {
			return err
		}
	}
}
