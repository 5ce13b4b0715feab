package segment

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/felixmq/felix/internal/invariants"
)

// Reader iterates records from an offset. It holds a reference on every
// segment it has visited, so the payload slices it returns — slices into
// the segment mappings, never copies — stay valid until Close, even if
// retention removes the segment or the log is closed meanwhile. A Reader is
// not safe for concurrent use; many Readers may run alongside Append.
//
// Under the invariants build tag a Reader panics when used after Close; a
// payload used after Close points into unmapped memory and faults (the
// tests prove it with debug.SetPanicOnFault).
type Reader struct {
	l      *Log
	next   uint64
	seg    *segment // current segment, or nil to look it up
	pos    int64
	held   []*segment
	closed bool
}

// NewReader returns a Reader positioned at offset from. Below First it
// fails with a *TrimmedError; at or after Next the Reader is at the tail and
// Next returns io.EOF until more is appended.
func (l *Log) NewReader(from uint64) (*Reader, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil, ErrClosed
	}
	if first := l.first.Load(); from < first {
		return nil, &TrimmedError{Requested: from, Oldest: first}
	}
	return &Reader{l: l, next: from}, nil
}

// Offset is the offset of the record the next call to Next returns.
func (r *Reader) Offset() uint64 { return r.next }

// Next returns the next record, or io.EOF at the tail. The payload is valid
// until Close. A record that fails its checksums is a *CorruptionError.
func (r *Reader) Next() (Record, error) {
	rec, n, err := r.peek()
	if err != nil {
		return Record{}, err
	}
	r.pos += n
	r.next++
	return rec, nil
}

// peek decodes the next record without consuming it.
func (r *Reader) peek() (Record, int64, error) {
	if r.closed {
		if invariants.Enabled {
			panic("segment: Reader used after Close")
		}
		return Record{}, 0, ErrClosed
	}
	for {
		if r.seg == nil {
			if err := r.locate(); err != nil {
				return Record{}, 0, err
			}
		}
		end := r.seg.written.Load()
		if r.pos >= end {
			if r.next >= r.l.next.Load() {
				return Record{}, 0, io.EOF
			}
			r.seg = nil // the record went to a later segment
			continue
		}
		h, m, bd, v := decodeRecord(r.seg.data[r.pos:end], r.seg.version)
		if v != decodeOK || h.offset != r.next {
			return Record{}, 0, r.corrupt(h, v, end)
		}
		return h.record(m, bd), h.size(), nil
	}
}

func (r *Reader) corrupt(h recordHeader, v decodeVerdict, end int64) error {
	if v == decodeOK {
		return &CorruptionError{Path: r.seg.path, Offset: r.pos, Kind: KindOffsetOutOfOrder,
			Detail: fmt.Sprintf("offset %d, want %d", h.offset, r.next)}
	}
	return &CorruptionError{Path: r.seg.path, Offset: r.pos, Kind: v.kind(), Detail: v.detail(h, int(end-r.pos))}
}

// locate finds the segment and position of r.next: binary search over the
// segments, then over the sparse index, then a scan of at most one index
// interval.
func (r *Reader) locate() error {
	l := r.l
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if first := l.first.Load(); r.next < first {
		l.mu.Unlock()
		return &TrimmedError{Requested: r.next, Oldest: first}
	}
	segs := l.mu.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > r.next }) - 1
	s := segs[max(i, 0)]
	index := s.index // append-only: the snapshot stays valid
	if err := l.acquireMappedLocked(s); err != nil {
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	r.held = append(r.held, s)
	r.seg = s

	j := sort.Search(len(index), func(j int) bool { return index[j].Offset > r.next }) - 1
	pos, off := int64(SegmentHeaderBytes), s.base
	if j >= 0 {
		pos, off = int64(index[j].Position), index[j].Offset
	}
	end := s.written.Load()
	for off < r.next && pos < end {
		h, v := decodeRecordHeader(s.data[pos:end], s.version)
		if v != decodeOK || h.offset != off {
			r.pos = pos
			return r.corrupt(h, v, end)
		}
		pos += h.size()
		off++
	}
	r.pos = pos
	return nil
}

// Close releases the Reader's segments; payloads it returned become invalid.
// Idempotent.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.l.releaseMapped(r.held...)
	r.held, r.seg = nil, nil
	return err
}

// Read calls fn for each record from offset from, until fn returns false,
// the tail is reached, or maxBytes of payload were delivered (at least one
// record is delivered if any exists). The payload is valid only during fn.
// It returns the offset to continue from. Below First it fails with a
// *TrimmedError; at or after Next it delivers nothing.
func (l *Log) Read(from uint64, maxBytes int, fn func(offset uint64, ts int64, payload []byte) bool) (uint64, error) {
	r, err := l.NewReader(from)
	if err != nil {
		return from, err
	}
	defer r.Close()
	delivered := 0
	for {
		rec, n, err := r.peek()
		if errors.Is(err, io.EOF) {
			return r.next, nil
		}
		if err != nil {
			return r.next, err
		}
		if delivered > 0 && delivered+len(rec.Payload) > maxBytes {
			return r.next, nil
		}
		r.pos += n
		r.next++
		delivered += len(rec.Payload)
		if !fn(rec.Offset, rec.TimestampMicros, rec.Payload) {
			return r.next, nil
		}
	}
}
