package broker

import (
	"errors"
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
// A record that cannot be read (a corrupt log) ends the replay after every
// record before it was written: the subscriber gets an error frame naming
// the offset it cannot pass (storageError), then the end of the stream.
func (w *eventWriter) replayLog(from, to uint64) error {
	for off := from; off < to; {
		next, err := w.historySpan(off, to)
		var se *storageError
		if errors.As(err, &se) {
			return w.tell(se)
		}
		if err != nil {
			return err
		}
		off = next
	}
	w.next = max(w.next, to)
	return w.flush()
}

// errTold ends an event stream whose subscriber was sent the reason in an
// error frame: the stream is finished, not reset, so that it reads it.
type errTold struct{ err error }

func (e errTold) Error() string { return e.err.Error() }
func (e errTold) Unwrap() error { return e.err }

// tell writes an error frame carrying err and returns errTold.
func (w *eventWriter) tell(err error) error {
	w.wbuf = wire.AppendJSONFrame(w.wbuf, &wire.ErrorMessage{Message: err.Error()})
	if ferr := w.flush(); ferr != nil {
		return ferr
	}
	return errTold{err}
}

// historySpan writes records from off on, up to readerSpan bytes, through
// one log reader, and returns where it stopped.
func (w *eventWriter) historySpan(off, to uint64) (uint64, error) {
	r, err := w.s.sh.durable().log.NewReader(off) // attach opened it
	if err != nil {
		return off, err
	}
	defer r.Close()
	f := &w.hist
	f.reset(off)
	span := 0
	for off < to && span < readerSpan {
		rec, err := r.Next()
		if err == nil && rec.Offset != off {
			err = fmt.Errorf("%w: offset %d where %d was due", segment.ErrCorrupt, rec.Offset, off)
		}
		if err != nil {
			// What was read before it is delivered first.
			if len(f.payloads) > 0 {
				if werr := w.appendHistory(f); werr != nil {
					return off, werr
				}
			}
			if ferr := w.flush(); ferr != nil {
				return off, ferr
			}
			st := w.s.sh.st
			return off, w.s.conn.b.checkStorage(shardName(st.spec.StreamKey, w.s.sh.id), off, fmt.Errorf("replay at offset %d: %w", off, err))
		}
		if w.splits(f, rec) {
			if err := w.appendHistory(f); err != nil {
				return off, err
			}
			f.reset(off)
		}
		f.add(rec)
		span += len(rec.Payload)
		off++
		if len(f.payloads) == historyFrameEvents || f.size >= historyFrameBytes || off == to || span >= readerSpan {
			if err := w.appendHistory(f); err != nil {
				return off, err
			}
			f.reset(off)
		}
	}
	// The payloads alias the reader's mapping: write them out before Close.
	return off, w.flush()
}
