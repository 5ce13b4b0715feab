package broker

import (
	"github.com/felixmq/felix/fanout"
	"github.com/felixmq/felix/segment"
	"github.com/felixmq/felix/wire"
)

// What a subscriber may read beside its events' payloads and offsets, each
// only if its client negotiated it: event headers (wire.CapHeaders), the
// append time of a durable stream's records (wire.FlagEventTimestamps) and
// the publisher (wire.FlagEventPublisher). A shard encodes each batch once
// without them (the bytes every other subscriber gets); the writer of a
// subscriber that reads one re-encodes a batch that has it, so only that
// subscriber pays for the copy.

// annotates reports whether buf carries something this subscriber reads.
func (s *subscription) annotates(buf *fanout.Buffer) bool {
	if s.stamps && buf.Stamp != 0 {
		return true
	}
	m := metaOf(buf)
	return m != nil && ((s.publishers && m.publisher != "") || (s.headers && m.headers != nil))
}

// appendAnnotated appends buf's events from index skip on (payloads are
// buf's, decoded) as one frame with what this subscriber reads.
func (w *eventWriter) appendAnnotated(buf *fanout.Buffer, payloads [][]byte, skip int) error {
	s, m := w.s, metaOf(buf)
	e := wire.EventBatch{Shared: true, HasBaseOffset: s.offsets, BaseOffset: buf.BaseOffset + uint64(skip), Payloads: payloads[skip:]}
	if s.publishers && m != nil && m.publisher != "" {
		e.HasPublisher, e.Publisher = true, []byte(m.publisher)
	}
	if s.stamps && buf.Stamp != 0 {
		e.Timestamps = make([]uint64, len(e.Payloads))
		for i := range e.Timestamps {
			e.Timestamps[i] = uint64(buf.Stamp)
		}
	}
	if s.headers && m != nil && m.headers != nil {
		e.Headers = blocksOf(m.headers[skip:])
	}
	return w.appendFrame(e)
}

// blocksOf is one header block per event: the empty block for one without.
func blocksOf(headers [][]byte) [][]byte {
	out := make([][]byte, len(headers))
	for i, h := range headers {
		if h == nil {
			h = wire.EmptyHeaderBlock
		}
		out[i] = h
	}
	return out
}

func (w *eventWriter) appendFrame(e wire.EventBatch) error {
	var err error
	w.wbuf, err = wire.AppendEventBatchFrame(w.wbuf, e)
	if err != nil {
		return err
	}
	w.sent(len(e.Payloads), payloadBytes(e.Payloads))
	return nil
}

// historyFrame gathers log records into the frames a subscriber gets: a
// new frame where the publisher changes, for a subscriber that reads
// publishers (a frame names one).
type historyFrame struct {
	base      uint64
	payloads  [][]byte
	stamps    []uint64
	headers   [][]byte
	anyHeader bool
	publisher []byte
	size      int
}

func (f *historyFrame) reset(base uint64) {
	f.base, f.size, f.anyHeader, f.publisher = base, 0, false, nil
	f.payloads, f.stamps, f.headers = f.payloads[:0], f.stamps[:0], f.headers[:0]
}

// splits reports whether rec must start a new frame.
func (w *eventWriter) splits(f *historyFrame, rec segment.Record) bool {
	return w.s.publishers && len(f.payloads) > 0 && string(f.publisher) != string(rec.Publisher)
}

func (f *historyFrame) add(rec segment.Record) {
	if len(f.payloads) == 0 {
		f.publisher = rec.Publisher
	}
	f.payloads = append(f.payloads, rec.Payload)
	f.stamps = append(f.stamps, uint64(rec.TimestampMicros))
	h := rec.Headers
	if h == nil {
		h = wire.EmptyHeaderBlock
	} else {
		f.anyHeader = true
	}
	f.headers = append(f.headers, h)
	f.size += len(rec.Payload)
}

// appendHistory appends f as one frame with what this subscriber reads.
func (w *eventWriter) appendHistory(f *historyFrame) error {
	s := w.s
	e := wire.EventBatch{Shared: true, HasBaseOffset: s.offsets, BaseOffset: f.base, Payloads: f.payloads}
	if s.publishers && len(f.publisher) > 0 {
		e.HasPublisher, e.Publisher = true, f.publisher
	}
	if s.stamps {
		e.Timestamps = f.stamps
	}
	if s.headers && f.anyHeader {
		e.Headers = f.headers
	}
	if err := w.appendFrame(e); err != nil {
		return err
	}
	if len(w.wbuf) >= gatherMax {
		return w.flush()
	}
	return nil
}
