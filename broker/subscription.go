package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/wire"
)

// subscription is one subscriber of one shard: its bounded queue, the event
// stream it owns, and the goroutine that drains the one onto the other.
type subscription struct {
	id     uint64
	sh     *shard // nil for a keyed watch
	watch  string // "cache/key" of a keyed watch, for stats
	detach func(*subscription)
	conn   *conn
	queue  *fanout.Queue
	out    *quic.SendStream
	// direct is set once the event stream is open, which can be after
	// the first offer; nil: every live buffer goes through the queue.
	direct  atomic.Pointer[directWriter]
	offsets bool // the peer negotiated EVENT_BATCH_OFFSETS
	gaps    bool // the peer negotiated gap notices
	// What else the peer reads on its batches (annotate.go): event
	// headers, append times, publishers.
	headers, stamps, publishers bool

	// Set by shard.attach under the shard lock, read only by run and the
	// reply: where it starts, records to read from the log first (durable
	// shards), then ring buffers.
	start      uint64
	history    historyRange
	replay     []*fanout.Buffer
	replayFrom uint64

	ctx    context.Context // ends when the subscription ends
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// expired: the token that opened it expired, so its event stream ends
	// with the auth code rather than "subscription ended".
	expired    atomic.Bool
	stopExpiry atomic.Pointer[func()] // set once armed; the timer may fire first
	// slow: a Block subscriber cut for holding up publishers too long
	// (cutSlow); fullSince is when its full queue first made a publisher
	// wait, 0 while it has room.
	slow      atomic.Bool
	fullSince atomic.Int64
}

// offer hands buf to the subscriber's queue; the shard lock is held. Drop
// policies never wait. Block waits for room (the shard admitted the publish
// first, so this wait is short unless several publishers race) and gives up
// only when the subscription ends. When the writer waits for the queue
// with everything written, buf is written from here instead (directWriter).
func (s *subscription) offer(buf *fanout.Buffer) {
	if d := s.direct.Load(); d != nil && s.queue.Hand(buf, d.write) {
		return
	}
	buf.Retain()
	var err error
	if s.queue.Policy() == fanout.Block {
		_, err = s.queue.PushWait(s.ctx, buf)
	} else {
		_, err = s.queue.Push(buf)
	}
	if err != nil && !errors.Is(err, fanout.ErrClosed) && s.ctx.Err() == nil {
		s.conn.b.log.Warn("subscriber push failed", "subscription", s.id, "err", err)
	}
}

// waitRoom waits until a Block subscriber's queue has room for events. Its
// queue may hold publishers up for bound in total, counted from the first
// wait that found it full until it has room again; past that the
// subscription is cut as a slow consumer and the publish goes on without
// it. An error means ctx ended first: the publish is refused.
func (s *subscription) waitRoom(ctx context.Context, events int, bound time.Duration) error {
	if s.queue.HasRoom(events) {
		s.fullSince.Store(0)
		return nil
	}
	now := time.Now()
	since := s.fullSince.Load()
	if since == 0 {
		s.fullSince.CompareAndSwap(0, now.UnixNano())
		since = s.fullSince.Load()
	}
	wctx, cancel := context.WithDeadline(ctx, time.Unix(0, since).Add(bound))
	defer cancel()
	switch err := s.queue.WaitRoom(wctx, events); {
	case err == nil:
		s.fullSince.Store(0)
		return nil
	case ctx.Err() != nil:
		return err
	}
	s.cutSlow(bound)
	return nil
}

// cutSlow ends a Block subscriber that held publishers up too long: its
// event stream is reset with wire.StreamSlowConsumer after what it had
// queued is dropped (and counted).
func (s *subscription) cutSlow(bound time.Duration) {
	if !s.slow.CompareAndSwap(false, true) {
		return
	}
	s.conn.b.metrics.slowConsumers.Inc()
	s.conn.b.log.Warn("slow consumer cut: its full queue held publishers up too long",
		"subscription", s.id, "remote", s.conn.qc.RemoteAddr().String(), "bound", bound,
		"queued_events", s.queue.Stats().Depth)
	s.end()
}

// end detaches the subscription and releases everything it holds. Safe to
// call from any goroutine, more than once.
func (s *subscription) end() {
	s.once.Do(func() {
		if stop := s.stopExpiry.Load(); stop != nil {
			(*stop)()
		}
		s.cancel()
		if s.detach != nil {
			s.detach(s)
		}
		s.queue.Close()
		drops := s.queue.Stats().DroppedEvents
		s.conn.b.metrics.endedDroppedEvent.Add(drops)
		if s.sh != nil {
			s.sh.st.m.endedDrops.Add(drops)
		}
		s.conn.forget(s)
		s.conn.b.metrics.subscribers.Dec()
	})
}

// run writes the replay and then the live queue to the event stream until
// the stream or the subscription ends.
func (s *subscription) run() {
	defer close(s.done)
	defer s.end()
	w := eventWriter{s: s, next: s.history.from, catchUp: s.queue.Policy() == fanout.CatchUp}
	defer w.release()
	err := w.writeHistory()
	if err == nil {
		err = w.writeReplay()
	}
	if err == nil {
		err = w.writeLive()
	}
	if err != nil && s.ctx.Err() == nil {
		s.conn.b.log.Debug("subscription ended", "subscription", s.id, "err", err)
	}
	if s.conn.b.draining.Load() || errors.As(err, &errTold{}) {
		// A graceful drain flushed the queue first, and an error frame
		// says why the subscription ends: end the stream with a FIN so
		// the peer reads everything that was written.
		s.out.Close()
		return
	}
	code := streamErrSubscriptionEnded
	switch {
	case s.expired.Load():
		code = streamErrAuth
	case s.slow.Load():
		code = streamErrSlowConsumer
	}
	s.out.CancelWrite(code)
}

// drainTo waits until the queue is empty (publishes are already refused),
// then ends the subscription gracefully and waits for its writer, all within
// ctx.
func (s *subscription) drainTo(ctx context.Context) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for s.queue.Stats().Depth > 0 && ctx.Err() == nil {
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-s.done:
			return
		}
	}
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
	}
}

// eventWriter turns queued buffers into stream writes. Small frames are
// gathered into one write (each quic-go Write is a handoff to the connection's
// send loop); a frame larger than gatherMax is written straight from the
// shared buffer without a copy.
type eventWriter struct {
	s           *subscription
	batch       []*fanout.Buffer
	wbuf        []byte
	sentDropped uint64
	decoded     wire.EventBatch
	// catchUp: the subscription's queue is a fanout.CatchUp queue of a
	// durable shard, and next is the offset due next on the stream.
	// Whatever the queue refused, the writer reads from the log: a queued
	// buffer past next means the events before it are to be read, a
	// buffer before next was read from the log already.
	catchUp bool
	next    uint64
	// hist gathers a replay's frames (annotate.go), reused.
	hist historyFrame
}

const gatherMax = 16 << 10

func (w *eventWriter) release() {
	w.batch = fanout.ReleaseAll(w.batch)
	w.batch = fanout.ReleaseAll(w.s.replay)
}

func (w *eventWriter) writeReplay() error {
	replay := w.s.replay
	for i, buf := range replay {
		if i == 0 && buf.BaseOffset < w.s.replayFrom {
			if err := w.writeTrimmed(buf, w.s.replayFrom); err != nil {
				return err
			}
		} else if err := w.add(buf); err != nil {
			return err
		}
	}
	err := w.flush()
	w.s.replay = fanout.ReleaseAll(replay)
	return err
}

// writeTrimmed writes the events of buf from offset from on: the first
// replay buffer can start before the requested offset.
func (w *eventWriter) writeTrimmed(buf *fanout.Buffer, from uint64) error {
	b := buf.Bytes()
	if err := wire.DecodeEventBatch(wire.FlagBinaryEventBatchShared|wire.FlagEventBatchOffsets, b[wire.HeaderLen:], &w.decoded); err != nil {
		return err
	}
	skip := int(from - buf.BaseOffset)
	return w.appendAnnotated(buf, w.decoded.Payloads, skip)
}

func (w *eventWriter) writeLive() error {
	// A Batcher owns a timer: one per subscription (New validated the config).
	bt, _ := fanout.NewBatcher(w.s.conn.b.cfg.Batch)
	for {
		var err error
		w.batch, err = bt.Next(w.s.ctx, w.s.queue, w.batch[:0])
		if errors.Is(err, fanout.ErrLagging) {
			err = w.catchUpToTail()
		}
		if err != nil {
			return err
		}
		for _, buf := range w.batch {
			if err := w.addLive(buf); err != nil {
				return err
			}
		}
		if err := w.noteDrops(); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		w.batch = fanout.ReleaseAll(w.batch)
	}
}

// addLive adds a queued buffer; on a catch-up queue only what is due, after
// reading from the log what the queue refused before it.
func (w *eventWriter) addLive(buf *fanout.Buffer) error {
	if !w.catchUp {
		return w.add(buf)
	}
	end := buf.BaseOffset + uint64(buf.Events)
	switch {
	case end <= w.next:
		return nil // read from the log already
	case buf.BaseOffset > w.next:
		if err := w.replayLog(w.next, buf.BaseOffset); err != nil {
			return err
		}
	}
	var err error
	if buf.BaseOffset < w.next {
		err = w.writeTrimmed(buf, w.next)
	} else {
		err = w.add(buf)
	}
	w.next = end
	return err
}

// catchUpToTail reads the log from next to the shard's committed tail
// until it reaches it, then lets the queue take pushes again. Records
// committed between the last read and Resume were refused; the first
// buffer queued after Resume shows the gap and addLive reads it.
func (w *eventWriter) catchUpToTail() error {
	w.s.conn.b.metrics.catchUps.Inc()
	for {
		tail := w.s.sh.tail()
		if w.next >= tail {
			break
		}
		if err := w.replayLog(w.next, tail); err != nil {
			return err
		}
	}
	w.s.queue.Resume()
	return nil
}

// add appends buf's frame in the peer's layout, or writes it directly when
// it is large.
func (w *eventWriter) add(buf *fanout.Buffer) error {
	if w.s.annotates(buf) {
		b := buf.Bytes()
		if err := wire.DecodeEventBatch(wire.FlagBinaryEventBatchShared|wire.FlagEventBatchOffsets, b[wire.HeaderLen:], &w.decoded); err != nil {
			return err
		}
		if err := w.appendAnnotated(buf, w.decoded.Payloads, 0); err != nil {
			return err
		}
		if len(w.wbuf) >= gatherMax {
			return w.flush()
		}
		return nil
	}
	flags, body := w.s.layout(buf)
	w.sent(buf.Events, eventBatchPayload(buf.Bytes(), buf.Events))
	w.wbuf = wire.AppendHeader(w.wbuf, flags, uint32(len(body)))
	if len(body) <= gatherMax {
		w.wbuf = append(w.wbuf, body...)
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	return w.write(body)
}

// layout is buf's frame flags and body in the peer's layout: a shared
// event batch, with its base offset when the peer negotiated offsets.
func (s *subscription) layout(buf *fanout.Buffer) (wire.Flags, []byte) {
	body := buf.Bytes()[wire.HeaderLen:]
	if !s.offsets {
		return wire.FlagBinaryEventBatchShared, body[8:]
	}
	return wire.FlagBinaryEventBatchShared | wire.FlagEventBatchOffsets, body
}

// sent counts events about to be written: the broker's delivery counters
// and the stream's (a keyed watch's count as watch events).
func (w *eventWriter) sent(events, payload int) { w.s.sent(events, payload) }

func (s *subscription) sent(events, payload int) {
	m := s.conn.b.metrics
	m.deliveredEvents.Add(uint64(events))
	m.bytesOut.Add(uint64(payload))
	if s.sh == nil {
		m.features.watchEvents.Add(uint64(events))
		return
	}
	st := s.sh.st.m
	st.deliveredEvents.Add(uint64(events))
	st.deliveredBytes.Add(uint64(payload))
}

// write writes b to the event stream, counting its bytes.
func (w *eventWriter) write(b []byte) error {
	n, err := w.s.out.Write(b)
	w.s.conn.b.metrics.frameBytesOut.Add(uint64(n))
	return err
}

// noteDrops tells a peer that negotiated gap notices how many events its
// queue dropped since the last notice.
func (w *eventWriter) noteDrops() error {
	dropped := w.s.queue.Stats().DroppedEvents
	if dropped == w.sentDropped || !w.s.gaps {
		return nil
	}
	w.wbuf = wire.AppendJSONFrame(w.wbuf, &wire.SubscriptionGap{
		SubscriptionID: w.s.id, Dropped: dropped - w.sentDropped,
	})
	w.sentDropped = dropped
	return nil
}

func (w *eventWriter) flush() error {
	if len(w.wbuf) == 0 {
		return nil
	}
	err := w.write(w.wbuf)
	w.wbuf = w.wbuf[:0]
	return err
}

// directWriter writes a live buffer to the event stream from the goroutine
// that offers it, while the writer goroutine waits for the queue with
// everything written (fanout.Queue.Hand): one goroutine fewer to wake per
// event, and the event leaves with the publish that made it. Only where
// the writer never holds a partial batch (delivery batching that does not
// wait: the latency profile) and keeps no position of its own (not a
// catch-up queue), and only if the stream takes the frame at once.
type directWriter struct {
	s   *subscription
	out tryWriter
	buf []byte // the frame; guarded by the queue's lock (Hand)
}

// newDirectWriter is the direct path of s, nil where it does not apply.
func newDirectWriter(s *subscription, batch fanout.BatchConfig) *directWriter {
	tw, ok := any(s.out).(tryWriter)
	if !ok || s.queue.Policy() == fanout.CatchUp || !(batch.MaxEvents == 1 || batch.MaxDelay < 0) {
		return nil
	}
	return &directWriter{s: s, out: tw}
}

func (d *directWriter) write(buf *fanout.Buffer) bool {
	if d.s.annotates(buf) {
		return false // re-encoded for this subscriber by its writer
	}
	flags, body := d.s.layout(buf)
	if len(body) > gatherMax {
		return false
	}
	d.buf = append(wire.AppendHeader(d.buf[:0], flags, uint32(len(body))), body...)
	if d.out.TryWriteAll(d.buf) != nil {
		return false
	}
	d.s.sent(buf.Events, eventBatchPayload(buf.Bytes(), buf.Events))
	d.s.conn.b.metrics.frameBytesOut.Add(uint64(len(d.buf)))
	return true
}
