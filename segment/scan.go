package segment

import (
	"bytes"
	"fmt"
)

// This file is the pure core of recovery: functions over a byte slice that
// decide what a segment holds. recover.go drives them over files.

// scanResult is where a scan of consecutive records stopped and why.
type scanResult struct {
	end     int64  // position after the last valid record
	next    uint64 // offset after the last valid record
	lastTS  int64
	records int64
	stop    decodeVerdict // decodeOK: reached the limit cleanly
	gap     bool          // stopped on a valid record with the wrong offset
	stopHdr recordHeader  // header at end, when its CRC was good
}

// scan verifies records from pos while offsets continue from expect, up to
// limit. With s != nil it adds index entries to s by the append rule.
func scan(data []byte, pos, limit int64, expect uint64, s *segment, spacing int64) scanResult {
	r := scanResult{end: pos, next: expect}
	for r.end < limit {
		h, payload, v := decodeRecord(data[r.end:limit])
		r.stopHdr = h
		if v != decodeOK {
			r.stop = v
			return r
		}
		if h.offset != r.next {
			r.gap = true
			return r
		}
		if s != nil {
			s.addIndexLocked(h.offset, r.end, spacing)
		}
		r.end += int64(RecordHeaderBytes + len(payload))
		r.next++
		r.lastTS = h.ts
		r.records++
	}
	return r
}

// clean reports whether the scan ended at the limit with nothing wrong.
func (r scanResult) clean() bool { return r.stop == decodeOK && !r.gap }

func (r scanResult) kind() CorruptionKind {
	if r.gap {
		return KindOffsetOutOfOrder
	}
	return r.stop.kind()
}

func (r scanResult) detail(limit int64) string {
	if r.gap {
		return fmt.Sprintf("offset %d, want %d", r.stopHdr.offset, r.next)
	}
	return r.stop.detail(r.stopHdr, int(limit-r.end))
}

var zeros = make([]byte, 64<<10)

// writtenExtent returns the end of the written part of data[from:]: one past
// its last non-zero byte, or from if it is all zeros. Preallocated segments
// are zero-filled, so this is how far a crashed writer got.
func writtenExtent(data []byte, from int64) int64 {
	end := int64(len(data))
	for end > from {
		start := max(from, end-int64(len(zeros)))
		if bytes.Equal(data[start:end], zeros[:end-start]) {
			end = start
			continue
		}
		for end > start && data[end-1] == 0 {
			end--
		}
		return end
	}
	return from
}

// tailAction is the verdict on the end of the active segment.
type tailAction uint8

const (
	tailClean  tailAction = iota // nothing after the last valid record
	tailTorn                     // a write that never finished: always truncate
	tailDamage                   // damage inside the written extent
)

// classifyTail judges what follows the last valid record r.end of the
// active segment (docs/storage-format.md, "Recovery verdicts"). extent is
// writtenExtent(data, r.end).
func classifyTail(data []byte, r scanResult, extent int64) tailAction {
	p := r.end
	n := int64(len(data))
	switch {
	case extent <= p:
		return tailClean
	case p+RecordHeaderBytes > n:
		return tailTorn // header cut off by the end of the file
	case bytes.Equal(data[p:p+RecordHeaderBytes], zeros[:RecordHeaderBytes]):
		return tailTorn // an all-zero header ends the data
	case p+RecordHeaderBytes > extent:
		return tailTorn // the header itself was not fully written
	case r.stop == decodeShortRecord:
		return tailTorn // record cut off by the end of the file
	case r.stop == decodePayloadCRC && p+RecordHeaderBytes+int64(r.stopHdr.length) > extent:
		return tailTorn // payload runs past the written extent
	}
	return tailDamage
}

// validRecordAfter reports whether any position in (p, extent) holds a
// record header with a good CRC whose offset is at least expect: evidence
// that the damage at p is not at the tail.
func validRecordAfter(data []byte, p, extent int64, expect uint64) bool {
	maxRecords := uint64(extent-p)/RecordHeaderBytes + 1
	for q := p + 1; q+RecordHeaderBytes <= extent; q++ {
		off := be.Uint64(data[q+4:])
		if off < expect || off-expect > maxRecords {
			continue // cheap filter before the CRC
		}
		if _, v := decodeRecordHeader(data[q:]); v == decodeOK {
			return true
		}
	}
	return false
}
