package segment

import (
	"fmt"

	"github.com/felixmq/felix/internal/linux"
)

// openActive opens the newest segment for appends: it maps it at the
// segment size (the file may be shorter: its allocation grows as appends
// need it, and a segment sealed by a roll that crashed before installing
// the next one is the newest again), scans every record, and judges the
// tail (classifyTail): a torn write is always cut, damage at the tail only
// with RepairChecksumTail, damage with valid records after it never.
func openActive(fsys FS, dir string, base uint64, cfg Config, st *RecoveryStats) (*segment, error) {
	s, size, h, err := openSegmentFile(fsys, dir, base)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*segment, error) {
		_ = s.release()
		return nil, err
	}
	if err := s.mapFile(max(size, cfg.SegmentBytes)); err != nil {
		return fail(fmt.Errorf("segment: %w", err))
	}
	s.allocated = size
	data := s.data[:size] // past the end of the file a mapping faults
	s.mapping.Advise(0, size, linux.MADV_SEQUENTIAL)
	r := scan(data, s.version, SegmentHeaderBytes, size, base, s, cfg.IndexSpacingBytes)
	st.RecordsScanned += r.records
	st.BytesScanned += r.end - SegmentHeaderBytes
	st.IncompleteBatches += r.incomplete
	dataEnd, err := s.file.DataEnd(r.end)
	if err != nil {
		return fail(fmt.Errorf("segment: %s: %w", s.path, err))
	}
	extent := writtenExtent(data[:max(dataEnd, r.end)], r.end)
	cut := false
	switch classifyTail(data, r, extent) {
	case tailClean:
	case tailTorn:
		cut = true
	case tailInterior:
		cerr := &CorruptionError{Path: s.path, Offset: r.end, Kind: r.kind(), Detail: r.detail(size)}
		cerr.Detail += "; valid records follow, so this is not the tail"
		return fail(cerr)
	case tailDamage:
		cerr := &CorruptionError{Path: s.path, Offset: r.end, Kind: r.kind(), Detail: r.detail(size)}
		if !cfg.RepairChecksumTail {
			cerr.Detail += "; at the tail of the newest segment: RepairChecksumTail would truncate it"
			return fail(cerr)
		}
		cfg.Logger.Warn("segment: truncating damaged tail (RepairChecksumTail)", "err", cerr)
		cut = true
	}
	if cfg.KeepPartialBatches {
		r.open.left = 0
	}
	if err := s.cutTorn(&r, cut, extent, st); err != nil {
		return fail(err)
	}
	s.mapping.Advise(0, size, linux.MADV_NORMAL)
	// What the scan accepted may still be only in the page cache (a
	// process killed before its Sync). Write it back once, so that Durable
	// starts out true.
	if err := s.file.SyncData(); err != nil {
		return fail(fmt.Errorf("segment: sync %s: %w", s.path, err))
	}
	s.next, s.lastTS = r.next, eventTimeOr(r.lastTS, h.CreatedAtMicros)
	s.written.Store(r.end)
	s.synced.Store(r.end)
	return s, nil
}

// cutTorn cuts what recovery does not keep at the tail: the torn or
// repaired record at r.end when cut, and a marked batch the tail cut short
// (its records were written by one append that never finished, so none of
// them was acknowledged), whose records come off whole.
func (s *segment) cutTorn(r *scanResult, cut bool, extent int64, st *RecoveryStats) error {
	end := max(extent, r.end)
	if r.open.left > 0 {
		dropped := r.dropOpenBatch(s)
		st.TruncatedRecords += dropped
		if !cut {
			st.TruncatedRecords-- // cutTail counts one more
		}
		cut = true
	}
	if !cut {
		return nil
	}
	return s.cutTail(r.end, end, st)
}

// cutTail zeroes [from, to): first the record header at from, synced, then
// the rest, synced. A crash between the two leaves an all-zero header at
// from, which a second recovery reads as the end of the data and cuts again.
func (s *segment) cutTail(from, to int64, st *RecoveryStats) error {
	head := min(from+RecordHeaderBytes, to)
	clear(s.data[from:head])
	if err := s.mapping.Sync(from, head-from); err != nil {
		return fmt.Errorf("segment: cut tail of %s at %d: %w", s.path, from, err)
	}
	clear(s.data[head:to])
	if err := s.mapping.Sync(head, to-head); err != nil {
		return fmt.Errorf("segment: cut tail of %s at %d: %w", s.path, from, err)
	}
	st.TruncatedRecords++
	st.TruncatedBytes += to - from
	return nil
}
