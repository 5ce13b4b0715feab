package segment

import "fmt"

// MarkedBatch is an idempotent producer's batch as the log holds it.
type MarkedBatch struct {
	First      uint64 // offset of its opening record
	ProducerID uint64
	Sequence   uint64
	Len        uint32 // records the batch declared
	// Held is how many of its records the log holds: Len, unless another
	// writer left the batch short (recovery cuts a short batch at the
	// tail, so this package never leaves one).
	Held            uint32
	TimestampMicros int64
}

// Batches calls fn for every marked batch that opens at or after offset
// from, in offset order, until fn returns false. It reads record headers
// only (the header CRC is checked, payloads are not read), and skips v2
// segments, which cannot hold marks, so rebuilding a producer table from a
// large log costs a walk over its headers. Appends may run meanwhile: what
// they add after the call began may or may not be seen. A record header
// that does not decode is a *CorruptionError.
func (l *Log) Batches(from uint64, fn func(MarkedBatch) bool) error {
	w := batchWalk{from: from, fn: fn}
	after := false // whether a segment was walked; base is its base
	var base uint64
	for !w.stopped {
		s, err := l.nextMarkedSegment(from, after, base)
		if err != nil || s == nil {
			if err == nil {
				w.flush()
			}
			return err
		}
		after, base = true, s.base
		err = w.segment(s)
		_ = l.releaseMapped(s)
		if err != nil {
			return err
		}
	}
	return nil
}

// nextMarkedSegment takes a reference on the first segment after base
// (any, when !after) that can hold marked batches at or after from, mapped;
// nil when there is none. One segment at a time, so a walk over a long log
// holds one mapping, not one per segment.
func (l *Log) nextMarkedSegment(from uint64, after bool, base uint64) (*segment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil, ErrClosed
	}
	segs := l.mu.segs
	for i, s := range segs {
		last := i == len(segs)-1
		if (after && s.base <= base) || s.version < FormatVersion || (!last && segs[i+1].base <= from) {
			continue
		}
		if err := l.acquireMappedLocked(s); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, nil
}

// batchWalk groups marked records into batches across Batches' segments.
type batchWalk struct {
	from    uint64
	fn      func(MarkedBatch) bool
	cur     MarkedBatch
	has     bool // cur is a batch still open
	stopped bool
}

func (w *batchWalk) flush() {
	if w.has && !w.stopped {
		w.stopped = !w.fn(w.cur)
	}
	w.has = false
}

func (w *batchWalk) segment(s *segment) error {
	end := s.written.Load()
	pos, off := int64(SegmentHeaderBytes), s.base
	for pos < end && !w.stopped {
		h, v := decodeRecordHeader(s.data[pos:end], s.version)
		if v == decodeOK && pos+h.size() > end {
			v = decodeShortRecord
		}
		switch {
		case v != decodeOK:
			return &CorruptionError{Path: s.path, Offset: pos, Kind: v.kind(),
				Detail: fmt.Sprintf("reading marks at offset %d: %s", off, v.detail(h, int(end-pos)))}
		case h.offset != off:
			return &CorruptionError{Path: s.path, Offset: pos, Kind: KindOffsetOutOfOrder,
				Detail: fmt.Sprintf("offset %d, want %d", h.offset, off)}
		}
		switch {
		case h.kind&kindOpens != 0:
			w.flush()
			if h.offset >= w.from {
				m := h.mark(s.data[pos:])
				w.cur = MarkedBatch{First: h.offset, ProducerID: m.ProducerID, Sequence: m.Sequence,
					Len: m.Len, Held: 1, TimestampMicros: h.ts}
				w.has = true
			}
		case h.kind&kindContinues != 0 && w.has && w.cur.Held < w.cur.Len:
			w.cur.Held++
		default:
			w.flush()
		}
		pos += h.size()
		off++
	}
	return nil
}
