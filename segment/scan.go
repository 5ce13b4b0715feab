package segment

import (
	"bytes"
	"fmt"
	"math"
)

// This file is the pure core of recovery: functions over a byte slice that
// decide what a segment holds. recover.go drives them over files.

// scanResult is where a scan of consecutive records stopped and why.
type scanResult struct {
	end     int64  // position after the last valid record
	next    uint64 // offset after the last valid record
	lastTS  int64  // of the newest event scanned; noEvent before one
	records int64
	stop    decodeVerdict // decodeOK: reached the limit cleanly
	gap     bool          // stopped on a valid record with the wrong offset
	stopHdr recordHeader  // header at end, when its CRC was good
	// open is the marked batch the scan is inside while it still expects
	// records of it (open.left > 0); incomplete counts marked batches
	// that ended short before the scan did (never written by this
	// package, which appends a batch with one write into one segment).
	open       openBatch
	incomplete int64
}

// openBatch is where a marked batch began, and the scan's state just
// before it, so a batch cut short at the tail can be dropped whole.
type openBatch struct {
	left         uint32 // records of it still expected
	start        int64
	first        uint64
	lastTS       int64
	records      int64
	indexLen     int
	lastIndexPos int64
}

// noEvent is scanResult.lastTS until the scan passes an event.
const noEvent = math.MinInt64

// scan verifies records of a segment of version from pos while offsets
// continue from expect, up to limit. With s != nil it adds index entries
// to s by the append rule.
func scan(data []byte, version uint16, pos, limit int64, expect uint64, s *segment, spacing int64) scanResult {
	r := scanResult{end: pos, next: expect, lastTS: noEvent}
	for r.end < limit {
		h, m, _, v := decodeRecord(data[r.end:limit], version)
		r.stopHdr = h
		if v != decodeOK {
			r.stop = v
			return r
		}
		if h.offset != r.next {
			r.gap = true
			return r
		}
		r.track(m, h.offset, s)
		if s != nil {
			s.addIndexLocked(h.offset, r.end, spacing)
		}
		r.end += h.size()
		r.next++
		if h.kind&kindGeneration == 0 {
			r.lastTS = h.ts
		}
		r.records++
	}
	return r
}

// track follows marked batches: a batch is its opening record and the
// Len-1 continuing records after it.
func (r *scanResult) track(m Mark, offset uint64, s *segment) {
	switch m.Kind {
	case MarkOpens:
		if r.open.left > 0 {
			r.incomplete++
		}
		r.open = openBatch{left: max(m.Len, 1) - 1, start: r.end, first: offset, lastTS: r.lastTS, records: r.records}
		if s != nil {
			r.open.indexLen, r.open.lastIndexPos = len(s.index), s.lastIndexPos
		}
	case MarkContinues:
		if r.open.left == 0 {
			r.incomplete++ // a continuation of nothing this scan saw open
			return
		}
		r.open.left--
	default:
		if r.open.left > 0 {
			r.incomplete++
			r.open.left = 0
		}
	}
}

// dropOpenBatch moves the end of the scan back to the start of a marked
// batch that was cut short (open.left > 0), undoing what its records added
// to s's index, and returns how many records it dropped.
func (r *scanResult) dropOpenBatch(s *segment) int64 {
	o := r.open
	dropped := r.records - o.records
	r.end, r.next, r.lastTS, r.records = o.start, o.first, o.lastTS, o.records
	s.index, s.lastIndexPos = s.index[:o.indexLen], o.lastIndexPos
	r.open = openBatch{}
	return dropped
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
	tailClean    tailAction = iota // nothing after the last valid record
	tailTorn                       // a write that never finished: always truncate
	tailDamage                     // damage at the tail, no evidence of a lost write
	tailInterior                   // damage with a valid record after it: never repaired
)

// tearUnit is the smallest span a crash loses whole: a device sector. The
// page cache writes back whole pages, which are whole sectors, and a device
// that loses power in the middle of a page leaves some of its sectors old.
const tearUnit = 512

// classifyTail judges what follows the last valid record r.end of the
// active segment (docs/storage-format.md, "Recovery verdicts"). extent is
// writtenExtent(data, r.end). A bad record is torn only on evidence that its
// bytes never all reached the file: the file ends inside it, its header was
// never committed (the CRC word, stored last, is zero), or a sector of it
// past its first byte is all zeros in the file (segments are preallocated
// with zeros, so a lost write leaves them). What the payload's bytes are
// decides nothing short of a whole sector.
func classifyTail(data []byte, r scanResult, extent int64) tailAction {
	p := r.end
	switch {
	case extent <= p:
		return tailClean
	case r.stop == decodeShortHeader || r.stop == decodeShortRecord:
		return tailTorn // cut off by the end of the file
	case bytes.Equal(data[p:p+RecordHeaderBytes], zeros[:RecordHeaderBytes]):
		return tailTorn // an all-zero header ends the data; what follows is leftovers
	case validRecordAfter(data, p, extent, r.next):
		return tailInterior
	case r.gap:
		return tailDamage
	case r.stop == decodeHeaderCRC:
		if be.Uint32(data[p+20:]) == 0 {
			return tailTorn // the header was never committed
		}
		return lostSector(data, p, p+RecordHeaderBytes)
	case r.stop == decodePayloadCRC:
		return lostSector(data, p, p+r.stopHdr.size())
	}
	return tailDamage
}

// lostSector judges the bad record at [p, end): torn when a sector that
// starts inside it, after p, is all zeros in the file, else damage. The
// sector holding p holds the header, which the header rules judge. The
// record's last sector counts whole: a lost sector loses what followed the
// record in it too, and bytes there that are not zeros say it was kept.
func lostSector(data []byte, p, end int64) tailAction {
	n := int64(len(data))
	for q := (p/tearUnit + 1) * tearUnit; q < end; q += tearUnit {
		if bytes.Equal(data[q:min(q+tearUnit, n)], zeros[:min(q+tearUnit, n)-q]) {
			return tailTorn
		}
	}
	return tailDamage
}

// validRecordAfter reports whether any position in (p, extent) holds a
// record header with a good CRC whose offset is at least expect: evidence
// that the damage at p is not at the tail. The header CRC does not depend
// on the segment version, so any version's records are evidence, whatever
// their kind bits say.
func validRecordAfter(data []byte, p, extent int64, expect uint64) bool {
	maxRecords := uint64(extent-p)/RecordHeaderBytes + 1
	for q := p + 1; q+RecordHeaderBytes <= extent; q++ {
		off := be.Uint64(data[q+4:])
		if off < expect || off-expect > maxRecords {
			continue // cheap filter before the CRC
		}
		if _, v := decodeRecordHeader(data[q:], FormatVersion); v != decodeHeaderCRC && v != decodeShortHeader {
			return true
		}
	}
	return false
}

// eventTimeOr is a scan's newest event time, or created when it saw none:
// a segment without events is as old as it is.
func eventTimeOr(lastTS, created int64) int64 {
	if lastTS == noEvent {
		return created
	}
	return lastTS
}
