package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// recoverDir opens every segment of dir and returns them in offset order,
// the last one active and ready for appends; see docs/storage-format.md.
//
// Repairs are ordered so that a crash during recovery leaves a directory a
// second recovery accepts: a discarded segment is all zeros either way; a
// tail is cut by zeroing the header at the cut first (an all-zero header
// ends the data) and only then the rest.
func recoverDir(fsys FS, dir string, cfg Config, st *RecoveryStats) ([]*segment, error) {
	if !cfg.MustExist {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("segment: create %s: %w", dir, err)
		}
	}
	bases, orphans, err := listSegments(fsys, dir)
	if cfg.MustExist && (errors.Is(err, fs.ErrNotExist) || err == nil && len(bases) == 0) {
		return nil, fmt.Errorf("%w: %s holds no segment", ErrMissing, dir)
	}
	if err != nil {
		return nil, err
	}
	base := cfg.BaseOffset
	if len(bases) > 0 {
		newest := bases[len(bases)-1]
		var discarded bool
		if bases, discarded, err = discardUninstalled(fsys, dir, bases, st); err != nil {
			return nil, err
		}
		if discarded && len(bases) == 0 {
			base = newest // keep the offsets the crashed create meant to use
		}
	}
	for _, o := range orphans {
		_ = fsys.Remove(o) // an index whose segment retention removed
	}
	if len(bases) == 0 {
		if cfg.Space != nil {
			if err := cfg.Space.Reserve(cfg.InitialAllocBytes); err != nil {
				return nil, fmt.Errorf("%w: new log %s: %w", ErrNoSpace, dir, err)
			}
		}
		s, err := createSegment(fsys, dir, base, cfg.FormatVersion, cfg.SegmentBytes, cfg.InitialAllocBytes, cfg.Now().UnixMicro())
		if err != nil && cfg.Space != nil {
			cfg.Space.Release(cfg.InitialAllocBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("segment: %w", err)
		}
		if err := fsys.SyncDir(dir); err != nil {
			_ = s.release()
			return nil, fmt.Errorf("segment: sync dir %s: %w", dir, err)
		}
		st.Segments = 1
		return []*segment{s}, nil
	}
	segs := make([]*segment, 0, len(bases))
	fail := func(err error) ([]*segment, error) {
		for _, s := range segs {
			_ = s.release()
		}
		return nil, err
	}
	for i, base := range bases {
		var s *segment
		if i < len(bases)-1 {
			s, err = openSealed(fsys, dir, base, cfg, st)
		} else {
			s, err = openActive(fsys, dir, base, cfg, st)
		}
		if err != nil {
			return fail(err)
		}
		segs = append(segs, s)
		st.FoundBytes += s.allocated
		if i > 0 && s.base != segs[i-1].next {
			return fail(&CorruptionError{Path: s.path, Offset: 8, Kind: KindOffsetGap,
				Detail: fmt.Sprintf("base offset %d, previous segment ends at %d", s.base, segs[i-1].next)})
		}
	}
	st.Segments = len(segs)
	return segs, nil
}

// listSegments returns the base offsets of the .log files in numeric order
// and the .index files that have no .log.
func listSegments(fsys FS, dir string) ([]uint64, []string, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("segment: list %s: %w", dir, err)
	}
	logs := map[uint64]bool{}
	var bases, indexes []uint64
	for _, n := range names {
		stem, ext, ok := strings.Cut(n, ".")
		if !ok || len(stem) != 20 || (ext != "log" && ext != "index") {
			continue
		}
		base, err := strconv.ParseUint(stem, 10, 64)
		if err != nil {
			continue
		}
		if ext == "log" {
			logs[base] = true
			bases = append(bases, base)
		} else {
			indexes = append(indexes, base)
		}
	}
	slices.Sort(bases)
	var orphans []string
	for _, b := range indexes {
		if !logs[b] {
			_, ip := segmentNames(dir, b)
			orphans = append(orphans, ip)
		}
	}
	return bases, orphans, nil
}

// discardUninstalled removes the newest segment when it is entirely zeros:
// a roll (or the very first create) that crashed before its header was
// durable. Nothing was ever appended to it.
func discardUninstalled(fsys FS, dir string, bases []uint64, st *RecoveryStats) ([]uint64, bool, error) {
	base := bases[len(bases)-1]
	path, indexPath := segmentNames(dir, base)
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, fmt.Errorf("segment: open %s: %w", path, err)
	}
	zero, err := allZero(f)
	_ = f.Close()
	if err != nil {
		return nil, false, fmt.Errorf("segment: read %s: %w", path, err)
	}
	if !zero {
		return bases, false, nil
	}
	if err := fsys.Remove(path); err != nil {
		return nil, false, fmt.Errorf("segment: remove uninstalled %s: %w", path, err)
	}
	_ = fsys.Remove(indexPath)
	if err := fsys.SyncDir(dir); err != nil {
		return nil, false, fmt.Errorf("segment: sync dir %s: %w", dir, err)
	}
	st.SegmentsDiscarded++
	return bases[:len(bases)-1], true, nil
}

// allZero reads f in chunks and reports whether every byte is zero.
func allZero(f File) (bool, error) {
	size, err := f.Size()
	if err != nil {
		return false, err
	}
	buf := make([]byte, min(size, int64(len(zeros))))
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		if !slices.Equal(buf[:n], zeros[:n]) {
			return false, nil
		}
		if n == 0 {
			break
		}
	}
	return true, nil
}

// openSegmentFile opens a segment read-write and validates its header.
func openSegmentFile(fsys FS, dir string, base uint64) (*segment, int64, SegmentHeader, error) {
	path, indexPath := segmentNames(dir, base)
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, SegmentHeader{}, fmt.Errorf("segment: open %s: %w", path, err)
	}
	s := &segment{path: path, indexPath: indexPath, base: base, file: f, next: base}
	s.refs.Store(1)
	size, err := f.Size()
	if err != nil {
		_ = s.release()
		return nil, 0, SegmentHeader{}, fmt.Errorf("segment: stat %s: %w", path, err)
	}
	hdr := make([]byte, min(size, SegmentHeaderBytes))
	if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
		_ = s.release()
		return nil, 0, SegmentHeader{}, fmt.Errorf("segment: read %s: %w", path, err)
	}
	h, kind, detail := parseSegmentHeader(hdr)
	if kind == "" && h.BaseOffset != base {
		kind, detail = KindSegmentName, fmt.Sprintf("header base_offset %d", h.BaseOffset)
	}
	if kind != "" {
		_ = s.release()
		return nil, 0, SegmentHeader{}, &CorruptionError{Path: path, Offset: 0, Kind: kind, Detail: detail}
	}
	s.version = h.Version
	return s, size, h, nil
}

// openSealed opens a segment that is not the newest: its file length is its
// contents, and any damage refuses the log.
func openSealed(fsys FS, dir string, base uint64, cfg Config, st *RecoveryStats) (*segment, error) {
	s, size, h, err := openSegmentFile(fsys, dir, base)
	if err != nil {
		return nil, err
	}
	if err := s.mapFile(size); err != nil {
		_ = s.release()
		return nil, fmt.Errorf("segment: %w", err)
	}
	entries, valid := loadIndex(fsys, s, size)
	from, expect := int64(SegmentHeaderBytes), base
	switch {
	case !valid:
		st.IndexesRebuilt++
	case !cfg.VerifyAllOnOpen && len(entries) > 0:
		last := entries[len(entries)-1]
		s.index, s.lastIndexPos = entries, int64(last.Position)
		from, expect = int64(last.Position), last.Offset
	}
	var idx *segment
	if !valid {
		idx = s
	}
	r := scan(s.data, s.version, from, size, expect, idx, cfg.IndexSpacingBytes)
	st.RecordsScanned += r.records
	st.BytesScanned += r.end - from
	st.IncompleteBatches += r.incomplete
	if r.open.left > 0 {
		st.IncompleteBatches++
	}
	if !r.clean() {
		_ = s.release()
		return nil, &CorruptionError{Path: s.path, Offset: r.end, Kind: r.kind(), Detail: r.detail(size)}
	}
	if valid && s.index == nil {
		s.index = entries // VerifyAllOnOpen with a good index
	}
	if !valid {
		if err := writeIndex(fsys, s.indexPath, s.base, s.index); err != nil {
			_ = s.release()
			return nil, fmt.Errorf("segment: rewrite index: %w", err)
		}
	}
	if r.lastTS == noEvent && from > SegmentHeaderBytes {
		// The records after the last index entry are generation records:
		// the newest event is before them.
		r.lastTS = scan(s.data, s.version, SegmentHeaderBytes, size, base, nil, 0).lastTS
	}
	s.next, s.lastTS, s.sealed, s.allocated = r.next, eventTimeOr(r.lastTS, h.CreatedAtMicros), true, size
	if err := s.closeFile(); err != nil { // its mapping serves it
		_ = s.release()
		return nil, fmt.Errorf("segment: close %s: %w", s.path, err)
	}
	s.written.Store(size)
	s.synced.Store(size)
	return s, nil
}

// loadIndex reads the index of s and checks every entry against the
// segment: it must point at a record header with a good CRC and that
// offset, in strictly ascending order, starting at the first record.
func loadIndex(fsys FS, s *segment, size int64) ([]IndexEntry, bool) {
	b, err := readFile(fsys, s.indexPath)
	if err != nil {
		return nil, false
	}
	entries, ok := parseIndex(b, s.base)
	if !ok || (len(entries) == 0) != (size == SegmentHeaderBytes) {
		return nil, false
	}
	for i, e := range entries {
		pos := int64(e.Position)
		if i == 0 && (e.Offset != s.base || pos != SegmentHeaderBytes) {
			return nil, false
		}
		if i > 0 && (e.Offset <= entries[i-1].Offset || e.Position <= entries[i-1].Position) {
			return nil, false
		}
		if e.Position > uint64(size) || pos+RecordHeaderBytes > size {
			return nil, false
		}
		h, v := decodeRecordHeader(s.data[pos:size], s.version)
		if v != decodeOK || h.offset != e.Offset {
			return nil, false
		}
	}
	return entries, true
}

func readFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}
