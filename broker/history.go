package broker

import (
	"fmt"

	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// historyRange is [from, to) of a durable shard's log that a subscriber
// starting in the past reads before the ring takes over.
type historyRange struct{ from, to uint64 }

// Replay frames: at most this many events or payload bytes each, and the
// log reader is reopened after readerSpan bytes so a long replay does not
// keep every segment it crossed mapped.
const (
	historyFrameEvents = 256
	historyFrameBytes  = 256 << 10
	readerSpan         = 64 << 20
)

// writeHistory replays the history range from the log. The records were
// committed before the subscriber attached (to is where the ring starts, or
// the tail for a catch-up subscriber), so the range is complete; a record
// missing from it is reported, never skipped.
// A segment trimmed by retention during the replay ends the subscription
// with the trim error, as a too_old cursor would have.
func (w *eventWriter) writeHistory() error {
	return w.replayLog(w.s.history.from, w.s.history.to)
}

// replayLog writes [from, to) from the log and flushes; next moves to to.
func (w *eventWriter) replayLog(from, to uint64) error {
	for off := from; off < to; {
		next, err := w.historySpan(off, to)
		if err != nil {
			return err
		}
		off = next
	}
	w.next = max(w.next, to)
	return w.flush()
}

// historySpan writes records from off on, up to readerSpan bytes, through
// one log reader, and returns where it stopped.
func (w *eventWriter) historySpan(off, to uint64) (uint64, error) {
	r, err := w.s.sh.durable().log.NewReader(off) // attach opened it
	if err != nil {
		return off, err
	}
	defer r.Close()
	var batch [][]byte
	base, size, span := off, 0, 0
	for off < to && span < readerSpan {
		rec, err := r.Next()
		if err != nil {
			return off, fmt.Errorf("replay at offset %d: %w", off, err)
		}
		if rec.Offset != off {
			return off, fmt.Errorf("replay: %w: offset %d where %d was due", segment.ErrCorrupt, rec.Offset, off)
		}
		batch = append(batch, rec.Payload)
		size += len(rec.Payload)
		span += len(rec.Payload)
		off++
		if len(batch) == historyFrameEvents || size >= historyFrameBytes || off == to || span >= readerSpan {
			if err := w.appendHistoryFrame(base, batch); err != nil {
				return off, err
			}
			base, size, batch = off, 0, batch[:0]
		}
	}
	// The payloads alias the reader's mapping: write them out before Close.
	return off, w.flush()
}

func (w *eventWriter) appendHistoryFrame(base uint64, payloads [][]byte) error {
	var err error
	w.wbuf, err = wire.AppendEventBatchFrame(w.wbuf, wire.EventBatch{
		Shared: true, HasBaseOffset: w.s.offsets, BaseOffset: base, Payloads: payloads,
	})
	if err != nil {
		return err
	}
	w.sent(len(payloads), payloadBytes(payloads))
	if len(w.wbuf) >= gatherMax {
		return w.flush()
	}
	return nil
}
