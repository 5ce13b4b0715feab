package segment

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/felixmq/felix/internal/invariants"
)

// segment is one .log file and its mapping.
//
// Lifetime: the Log holds one reference while the segment is in its list;
// every reader holds one more while it may hand out slices of data. The
// mapping is unmapped and the file closed when the last reference goes, so
// retention and Close never pull memory from under a reader. A sealed
// segment only the log holds may also be unmapped by the map cache
// (mapcache.go) and mapped again when read.
type segment struct {
	path      string
	indexPath string
	base      uint64
	version   uint16 // of the header: FormatVersion or a later one, or FormatVersionV2 read back
	file      File
	mapping   Mapping
	data      []byte // the whole mapping

	// written is the end of the contents: records live in
	// [SegmentHeaderBytes, written). Stored after the bytes are in place, so
	// a reader that loads it may read everything below it.
	written atomic.Int64
	// synced is the end of the prefix known durable. Advanced by Log.Sync
	// (under Log.syncMu) and by seal (under Log.mu); only ever grows.
	synced atomic.Int64
	refs   atomic.Int32
	// syncing: a Sync is writing the segment back outside Log.mu, so a
	// seal leaves the file open and sets closeAfterSync for it.
	syncing, closeAfterSync atomic.Bool

	// Guarded by Log.mu.
	// allocated is the file's size: preallocated, and what records may
	// fill. The mapping (data) may be longer, up to the size the segment
	// rolls at; nothing reads or writes it past allocated (that would
	// fault past the end of the file).
	allocated int64
	next      uint64 // offset the next record of this segment gets
	// lastTS is the timestamp of the newest event, or the segment's
	// creation while it holds none: what its age is judged by. A
	// generation record has no time of its own (a replica writes 0), so
	// it never makes a segment look older or newer.
	lastTS       int64
	index        []IndexEntry // append-only; readers copy the slice header
	lastIndexPos int64
	sealed       bool
	lru          *list.Element // in Log.mu.maps while sealed and mapped
}

func segmentNames(dir string, base uint64) (string, string) {
	name := fmt.Sprintf("%020d", base)
	return filepath.Join(dir, name+".log"), filepath.Join(dir, name+".index")
}

// createSegment makes a new segment mapped at size, of which alloc bytes
// are preallocated, whose header is written and synced. The caller syncs
// the directory.
func createSegment(fsys FS, dir string, base uint64, version uint16, size, alloc int64, createdMicros int64) (*segment, error) {
	path, indexPath := segmentNames(dir, base)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	s := &segment{path: path, indexPath: indexPath, base: base, version: version, file: f, next: base, lastTS: createdMicros}
	fail := func(err error) (*segment, error) {
		s.closeFiles()
		_ = fsys.Remove(path)
		return nil, err
	}
	if err := f.Preallocate(alloc); err != nil {
		return fail(fmt.Errorf("preallocate %s: %w", path, err))
	}
	s.allocated = alloc
	var hdr [SegmentHeaderBytes]byte
	putSegmentHeader(hdr[:], SegmentHeader{Version: version, BaseOffset: base, CreatedAtMicros: createdMicros})
	if err := writeFull(f, hdr[:], 0); err != nil {
		return fail(fmt.Errorf("write header %s: %w", path, err))
	}
	// fsync, not fdatasync: the size set by preallocation is metadata.
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync header %s: %w", path, err))
	}
	if err := s.mapFile(size); err != nil {
		return fail(err)
	}
	s.written.Store(SegmentHeaderBytes)
	s.synced.Store(SegmentHeaderBytes)
	s.refs.Store(1)
	return s, nil
}

func (s *segment) mapFile(size int64) error {
	if size != int64(int(size)) {
		return fmt.Errorf("%w: segment %s of %d bytes does not fit the address space", ErrNotSupported, s.path, size)
	}
	m, err := s.file.Map(int(size))
	if err != nil {
		return err
	}
	s.mapping, s.data = m, m.Bytes()
	return nil
}

// writeFull writes all of b at off or fails; a short write is an error.
func writeFull(f File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n < len(b) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
	}
	return err
}

// acquire takes a reference; the caller already holds one or holds Log.mu
// with the segment in the log's list.
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference and unmaps on the last one.
func (s *segment) release() error {
	n := s.refs.Add(-1)
	if n < 0 && invariants.Enabled {
		panic(fmt.Sprintf("segment: %s released more often than acquired", s.path))
	}
	if n != 0 {
		return nil
	}
	return s.closeFiles()
}

// closeFile closes the file of a sealed segment, which only its mapping
// serves from then on: a log holds one descriptor, its active segment's,
// however many segments it retains (near RLIMIT_NOFILE a roll would
// otherwise fail, and the broker could not reopen its logs).
func (s *segment) closeFile() error {
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	return err
}

func (s *segment) closeFiles() error {
	var errs []error
	if s.mapping != nil {
		errs = append(errs, s.mapping.Unmap())
		s.mapping, s.data = nil, nil
	}
	errs = append(errs, s.closeFile())
	return errors.Join(errs...)
}

// addIndexLocked records an index entry for the record at pos when it is the
// first one or at least spacing bytes past the previous entry. Recovery
// rebuilds with the same rule, so a rebuilt index equals the written one.
func (s *segment) addIndexLocked(off uint64, pos, spacing int64) {
	if len(s.index) == 0 || pos-s.lastIndexPos >= spacing {
		s.index = append(s.index, IndexEntry{Offset: off, Position: uint64(pos)})
		s.lastIndexPos = pos
	}
}

// appendLocked writes recs at the end of the contents, with offsets s.next,
// s.next+1, ... (their Offset fields are not read), each with its own
// timestamp, mark, headers and publisher. The caller rolled the segment to
// a version that holds what they carry and checked that they fit. In
// mapped mode the records are built directly in the mapping; in fd mode
// they are staged and written with one WriteAt. written is published last.
func (s *segment) appendLocked(recs []Record, spacing int64, stage []byte, fd bool) ([]byte, error) {
	pos := s.written.Load()
	off := s.next
	if fd {
		stage = stage[:0]
		for _, r := range recs {
			stage = appendRecord(stage, off, r.TimestampMicros, r.Mark, r.body())
			off++
		}
		if err := writeFull(s.file, stage, pos); err != nil {
			return stage, fmt.Errorf("write %s at %d: %w", s.path, pos, err)
		}
	} else {
		q := pos
		for _, r := range recs {
			bd := r.body()
			size := int64(RecordHeaderBytes + r.Mark.tagLen() + bd.len())
			putRecord(s.data[q:q+size], off, r.TimestampMicros, r.Mark, bd)
			q += size
			off++
		}
	}
	off = s.next
	for _, r := range recs {
		s.addIndexLocked(off, pos, spacing)
		pos += int64(RecordHeaderBytes + r.Mark.tagLen() + r.body().len())
		off++
	}
	s.next = off
	for _, r := range slices.Backward(recs) {
		if r.Mark.Kind != MarkGeneration {
			s.lastTS = r.TimestampMicros
			break
		}
	}
	s.written.Store(pos)
	return stage, nil
}

// recordMark is the mark of record i of a batch of n (nil mark: none).
func recordMark(mark *BatchMark, i, n int) Mark {
	switch {
	case mark == nil:
		return Mark{}
	case i == 0:
		return Mark{Kind: MarkOpens, ProducerID: mark.ProducerID, Sequence: mark.Sequence, Len: uint32(n)}
	}
	return Mark{Kind: MarkContinues}
}

// bytes is the size of the contents, header included.
func (s *segment) bytes() int64 { return s.written.Load() }
