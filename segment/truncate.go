package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
)

// TruncateFrom removes the records at offset off and after it: a replica
// whose tail does not match its leader's log cuts it before writing the
// leader's records there. off must be in [First, Next]; at Next it does
// nothing. The cut is durable before TruncateFrom returns, so a crash never
// brings the removed records back:
//   - segments wholly past off are unlinked, newest first, and the
//     directory synced (the order retention's removal uses, reversed);
//   - in the segment holding off, an active one gets zeros over the cut
//     tail, written back (recovery reads a zero header as the end of the
//     data), and a sealed one is truncated on disk and gets a new index.
//
// A segment left empty by the cut is unlinked too; when none is left, a new
// empty segment based at off takes its place. Appends go on at off.
//
// Readers must not be reading at or past off (a replica only truncates
// records above its commit, which nobody reads); ones that hold a removed
// segment keep its mapping until they close. A failure is terminal for
// the log, as a failed write is.
func (l *Log) TruncateFrom(off uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if first, next := l.first.Load(), l.next.Load(); off < first || off > next {
		return fmt.Errorf("%w: truncate at %d outside [%d, %d]", ErrInvalidRecord, off, first, next)
	} else if off == next {
		return nil
	}
	segs := l.mu.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off }) - 1
	keep := i + 1
	if segs[i].base == off {
		keep = i // it would be left empty
	}
	for j := len(segs) - 1; j >= keep; j-- {
		if err := l.unlinkLocked(segs[j]); err != nil {
			return l.failLocked(err)
		}
	}
	l.mu.segs = segs[:keep]
	if keep == 0 {
		s, err := createSegment(l.fs, l.dir, off, l.cfg.FormatVersion, l.cfg.SegmentBytes, l.cfg.InitialAllocBytes, l.cfg.Now().UnixMicro())
		if err != nil {
			return l.failLocked(fmt.Errorf("truncate: %w", err))
		}
		l.mu.segs = []*segment{s}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("truncate: sync dir %s: %w", l.dir, err))
	}
	if keep == i+1 {
		if err := l.cutSegmentLocked(segs[i], off); err != nil {
			return l.failLocked(err)
		}
	}
	last := l.mu.segs[len(l.mu.segs)-1]
	l.next.Store(last.next)
	if l.durable.Load() > last.next {
		l.durable.Store(last.next)
	}
	l.stat.truncations.Add(1)
	return nil
}

// unlinkLocked removes s from disk and drops the log's reference to it.
func (l *Log) unlinkLocked(s *segment) error {
	if err := l.fs.Remove(s.path); err != nil {
		return fmt.Errorf("remove %s: %w", s.path, err)
	}
	if err := l.fs.Remove(s.indexPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.indexPath, err)
	}
	l.releaseSpace(s.allocated)
	l.dropMappedLocked(s)
	return s.release()
}

// cutSegmentLocked removes the records at off and after it from s, the
// last segment of the log.
func (l *Log) cutSegmentLocked(s *segment, off uint64) error {
	// A sealed segment may be unmapped (Config.MaxMappedSegments): map it
	// for the scan to off, holding it like a reader meanwhile.
	if err := l.acquireMappedLocked(s); err != nil {
		return err
	}
	defer s.release()
	pos, err := s.positionLocked(off)
	if err != nil {
		return err
	}
	end := s.written.Load()
	if s.sealed {
		f, err := l.fs.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("truncate %s: %w", s.path, err)
		}
		err = f.Truncate(pos)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("truncate %s to %d: %w", s.path, pos, err)
		}
		l.releaseSpace(s.allocated - pos)
		s.allocated = pos
	} else if err := l.zeroLocked(s, pos, end); err != nil {
		return err
	}
	k := sort.Search(len(s.index), func(k int) bool { return s.index[k].Offset >= off })
	// Readers copied the old slice header; a fresh array keeps what they
	// see unchanged while appends refill this one.
	s.index = slices.Clone(s.index[:k])
	s.lastIndexPos = SegmentHeaderBytes
	if k > 0 {
		s.lastIndexPos = int64(s.index[k-1].Position)
	}
	s.next = off
	s.written.Store(pos)
	if s.synced.Load() > pos {
		s.synced.Store(pos)
	}
	if s.sealed {
		if err := writeIndex(l.fs, s.indexPath, s.base, s.index); err != nil {
			_ = l.fs.Remove(s.indexPath) // a hint: the next open rebuilds it
		}
	}
	return nil
}

// zeroLocked writes zeros over [from, to) of the active segment s and
// writes them back: the record header at from first, as cutTail does, so
// that a crash in between leaves a zero header recovery stops at.
func (l *Log) zeroLocked(s *segment, from, to int64) error {
	if from >= to {
		return nil
	}
	head := min(from+RecordHeaderBytes, to)
	for _, r := range [][2]int64{{from, head}, {head, to}} {
		if r[0] >= r[1] {
			continue
		}
		var err error
		if l.cfg.WriteMode == WriteModeFD {
			if err = writeFull(s.file, make([]byte, r[1]-r[0]), r[0]); err == nil {
				err = s.file.SyncData()
			}
		} else {
			clear(s.data[r[0]:r[1]])
			err = s.mapping.Sync(r[0], r[1]-r[0])
		}
		if err != nil {
			return fmt.Errorf("truncate %s at %d: %w", s.path, from, err)
		}
	}
	return nil
}

// positionLocked is the file position of the record at off in s: from the
// nearest index entry, a scan of at most one index interval.
func (s *segment) positionLocked(off uint64) (int64, error) {
	j := sort.Search(len(s.index), func(j int) bool { return s.index[j].Offset > off }) - 1
	pos, at := int64(SegmentHeaderBytes), s.base
	if j >= 0 {
		pos, at = int64(s.index[j].Position), s.index[j].Offset
	}
	end := s.written.Load()
	for at < off {
		h, v := decodeRecordHeader(s.data[pos:end], s.version)
		if v != decodeOK || h.offset != at {
			return 0, &CorruptionError{Path: s.path, Offset: pos, Kind: v.kind(), Detail: v.detail(h, int(end-pos))}
		}
		pos += h.size()
		at++
	}
	return pos, nil
}

// Reset empties the log and makes base the offset of its next record: a
// replica that installs its leader's snapshot starts its log where the
// leader's retained log starts. Every segment is unlinked and a new empty
// one based at base takes their place, durably (the directory is synced
// in between, so a crash leaves either the old log or the new one). First,
// Next and Durable become base. Readers holding a removed segment keep its
// mapping until they close.
func (l *Log) Reset(base uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	for j := len(l.mu.segs) - 1; j >= 0; j-- {
		if err := l.unlinkLocked(l.mu.segs[j]); err != nil {
			return l.failLocked(err)
		}
	}
	l.mu.segs = nil
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("reset: sync dir %s: %w", l.dir, err))
	}
	s, err := createSegment(l.fs, l.dir, base, l.cfg.FormatVersion, l.cfg.SegmentBytes, l.cfg.InitialAllocBytes, l.cfg.Now().UnixMicro())
	if err != nil {
		return l.failLocked(fmt.Errorf("reset: %w", err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		_ = s.release()
		return l.failLocked(fmt.Errorf("reset: sync dir %s: %w", l.dir, err))
	}
	l.mu.segs = []*segment{s}
	l.first.Store(base)
	l.next.Store(base)
	l.durable.Store(base)
	return nil
}

// SetRetentionFloor keeps retention from removing a segment holding any
// offset at or above floor: a replica's records past its commit may still
// be cut and rewritten, and a leader's followers may still need them.
// 0 (the default) means no floor.
func (l *Log) SetRetentionFloor(floor uint64) { l.retentionFloor.Store(floor) }
