package segment

import (
	"math"
	"sort"
)

// OffsetForTime returns the first offset below limit whose record was
// appended at or after ts (Unix microseconds), and false when no record
// below limit is that recent. It binary-searches the segments by their
// newest timestamp, then the segment's sparse index by the timestamps of
// the records it points at, and scans at most one index interval, reading
// record headers only (their CRC checked). That assumes timestamps rise
// with offsets, as one appender's clock makes them; where the clock
// stepped back the answer is near the first such record rather than
// exactly it. A record header that does not decode is a *CorruptionError.
func (l *Log) OffsetForTime(ts int64, limit uint64) (uint64, bool, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return 0, false, ErrClosed
	}
	segs := l.mu.segs
	// The first segment whose newest record is recent enough holds the
	// answer, if any does.
	i := sort.Search(len(segs), func(i int) bool { return segs[i].lastTS >= ts })
	if i == len(segs) || segs[i].base >= limit {
		l.mu.Unlock()
		return 0, false, nil
	}
	s := segs[i]
	index := s.index // append-only: the snapshot stays valid
	if err := l.acquireMappedLocked(s); err != nil {
		l.mu.Unlock()
		return 0, false, err
	}
	l.mu.Unlock()
	defer l.releaseMapped(s)

	end := s.written.Load()
	tsAt := func(pos int64) (recordHeader, error) {
		h, v := decodeRecordHeader(s.data[pos:end], s.version)
		if v != decodeOK {
			return h, &CorruptionError{Path: s.path, Offset: pos, Kind: v.kind(), Detail: v.detail(h, int(end-pos))}
		}
		return h, nil
	}
	// eventTS is the time of the first event at or after pos (none: past
	// every time). A generation record has no time (a replica writes 0):
	// taken for one, it would break the order the search relies on.
	eventTS := func(pos int64) (int64, error) {
		for pos < end {
			h, err := tsAt(pos)
			if err != nil || h.kind&kindGeneration == 0 {
				return h.ts, err
			}
			pos += h.size()
		}
		return math.MaxInt64, nil
	}
	// The last index entry whose record is older than ts: the answer is
	// after it, within one interval.
	var searchErr error
	j := sort.Search(len(index), func(j int) bool {
		t, err := eventTS(int64(index[j].Position))
		if err != nil && searchErr == nil {
			searchErr = err
		}
		return err != nil || t >= ts
	})
	if searchErr != nil {
		return 0, false, searchErr
	}
	pos, off := int64(SegmentHeaderBytes), s.base
	if j > 0 {
		pos, off = int64(index[j-1].Position), index[j-1].Offset
	}
	for pos < end && off < limit {
		h, err := tsAt(pos)
		if err != nil {
			return 0, false, err
		}
		if h.ts >= ts && h.kind&kindGeneration == 0 {
			return h.offset, true, nil
		}
		pos += h.size()
		off++
	}
	return 0, false, nil
}
